"""Datetimes as BSON stores them: signed milliseconds since the epoch, including values Python cannot hold."""

from __future__ import annotations

import datetime
import enum
from typing import Any, Optional

EPOCH_AWARE = datetime.datetime.fromtimestamp(0, datetime.timezone.utc)
EPOCH_NAIVE = EPOCH_AWARE.replace(tzinfo=None)
_MIN_MS = -62135596800000  # 0001-01-01T00:00:00Z
_MAX_MS = 253402300799999  # 9999-12-31T23:59:59.999Z


class DatetimeConversion(enum.IntEnum):
    """What BSON datetimes decode to."""

    DATETIME = 1  # datetime.datetime; out-of-range values raise
    DATETIME_CLAMP = 2  # datetime.datetime, clamped to datetime.min/max
    DATETIME_MS = 3  # always DatetimeMS
    DATETIME_AUTO = 4  # datetime.datetime when it fits, else DatetimeMS


class DatetimeMS:
    """A BSON datetime as an int of milliseconds: lossless for every value BSON can store."""

    __slots__ = ("_value",)
    _type_marker = 9

    def __init__(self, value: Any) -> None:
        if isinstance(value, int) and not isinstance(value, bool):
            if not -(2**63) <= value < 2**63:
                raise OverflowError("DatetimeMS must fit in a signed 64-bit integer")
            self._value = value
        elif isinstance(value, datetime.datetime):
            self._value = datetime_to_millis(value)
        else:
            raise TypeError(f"{type(value)} is not an int or datetime.datetime")

    def __int__(self) -> int:
        return self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __repr__(self) -> str:
        return f"DatetimeMS({self._value})"

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, DatetimeMS):
            return self._value == other._value
        return NotImplemented

    def __lt__(self, other: Any) -> bool:
        if isinstance(other, DatetimeMS):
            return self._value < other._value
        return NotImplemented

    def __le__(self, other: Any) -> bool:
        if isinstance(other, DatetimeMS):
            return self._value <= other._value
        return NotImplemented

    def __gt__(self, other: Any) -> bool:
        if isinstance(other, DatetimeMS):
            return self._value > other._value
        return NotImplemented

    def __ge__(self, other: Any) -> bool:
        if isinstance(other, DatetimeMS):
            return self._value >= other._value
        return NotImplemented

    def as_datetime(self, codec_options: Any = None) -> datetime.datetime:
        tz_aware = getattr(codec_options, "tz_aware", False)
        tzinfo = getattr(codec_options, "tzinfo", None)
        return millis_to_datetime(self._value, tz_aware, tzinfo, DatetimeConversion.DATETIME)


def datetime_to_millis(value: datetime.datetime) -> int:
    """Milliseconds since the epoch; a naive datetime is taken as UTC (PyMongo's rule)."""
    if value.tzinfo is None:
        delta = value - EPOCH_NAIVE
    elif value.utcoffset() is None:
        delta = value.replace(tzinfo=None) - EPOCH_NAIVE
    else:
        delta = value - EPOCH_AWARE
    return delta.days * 86400000 + delta.seconds * 1000 + delta.microseconds // 1000


def millis_to_datetime(millis: int, tz_aware: bool, tzinfo: Optional[datetime.tzinfo],
                       conversion: int) -> Any:
    """Decode milliseconds per ``conversion``; raises OverflowError/ValueError when it cannot."""
    if conversion == DatetimeConversion.DATETIME_MS:
        return DatetimeMS(millis)
    if conversion == DatetimeConversion.DATETIME_AUTO and not _MIN_MS <= millis <= _MAX_MS:
        return DatetimeMS(millis)
    if conversion == DatetimeConversion.DATETIME_CLAMP:
        millis = min(max(millis, _MIN_MS), _MAX_MS)
    seconds, ms = divmod(millis, 1000)
    if tz_aware:
        value = EPOCH_AWARE + datetime.timedelta(seconds=seconds, milliseconds=ms)
        if tzinfo is not None:
            value = value.astimezone(tzinfo)
        return value
    return EPOCH_NAIVE + datetime.timedelta(seconds=seconds, milliseconds=ms)
