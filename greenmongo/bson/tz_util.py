"""PyMongo's ``bson.tz_util``: ``FixedOffset`` time zones and ``utc``.

``utc`` is ``datetime.timezone.utc`` (PyMongo's is a ``FixedOffset(0, "UTC")``): it is the tzinfo
of every tz-aware datetime greenmongo decodes, so ``decoded.tzinfo is bson.tz_util.utc`` holds as
it does under PyMongo, and it compares, pickles and formats like the standard library's UTC.
"""

from __future__ import annotations

import datetime
from typing import Optional, Union

#: A zero ``timedelta`` (the DST offset of every FixedOffset).
ZERO = datetime.timedelta(0)

#: UTC, as decoded datetimes carry it.
utc: datetime.tzinfo = datetime.timezone.utc


class FixedOffset(datetime.tzinfo):
    """A time zone at a constant offset from UTC, given in minutes east (or as a timedelta), with a name."""

    def __init__(self, offset: Union[float, datetime.timedelta], name: str) -> None:
        self.__offset = offset if isinstance(offset, datetime.timedelta) else datetime.timedelta(minutes=offset)
        self.__name = name

    def __getinitargs__(self) -> tuple[datetime.timedelta, str]:
        """tzinfo's pickling and copying protocol: rebuild from these arguments."""
        return self.__offset, self.__name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.__offset!r}, {self.__name!r})"

    def utcoffset(self, dt: Optional[datetime.datetime]) -> datetime.timedelta:
        return self.__offset

    def tzname(self, dt: Optional[datetime.datetime]) -> str:
        return self.__name

    def dst(self, dt: Optional[datetime.datetime]) -> datetime.timedelta:
        return ZERO


__all__ = ["ZERO", "FixedOffset", "utc"]
