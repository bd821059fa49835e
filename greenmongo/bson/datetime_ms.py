"""Datetimes as BSON stores them: signed milliseconds since the epoch, including values Python cannot hold."""

from __future__ import annotations

import datetime
import enum
from typing import TYPE_CHECKING, Any, Optional, Union, cast

from greenmongo.bson._slots import getstate_slots, setstate_slots
from greenmongo.bson.tz_util import utc
from greenmongo.errors import InvalidBSON

if TYPE_CHECKING:
    from greenmongo.bson.codec_options import CodecOptions

EPOCH_AWARE = datetime.datetime.fromtimestamp(0, utc)
EPOCH_NAIVE = EPOCH_AWARE.replace(tzinfo=None)
_MIN_MS = -62135596800000  # 0001-01-01T00:00:00Z
_MAX_MS = 253402300799999  # 9999-12-31T23:59:59.999Z


class DatetimeConversion(int, enum.Enum):
    """What BSON datetimes decode to (an int, so it compares with the numbers PyMongo accepts too)."""

    DATETIME = 1  # datetime.datetime; out-of-range values raise
    DATETIME_CLAMP = 2  # datetime.datetime, clamped to datetime.min/max
    DATETIME_MS = 3  # always DatetimeMS
    DATETIME_AUTO = 4  # datetime.datetime when it fits, else DatetimeMS


class DatetimeMS:
    """A BSON datetime as an int of milliseconds: lossless for every value BSON can store."""

    __slots__ = ("_value",)
    __getstate__ = getstate_slots
    __setstate__ = setstate_slots
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

    # Ordered against another DatetimeMS or a plain int of milliseconds, as PyMongo's is.
    def __lt__(self, other: Any) -> bool:
        other = _millis_of(other)
        return NotImplemented if other is NotImplemented else self._value < other

    def __le__(self, other: Any) -> bool:
        other = _millis_of(other)
        return NotImplemented if other is NotImplemented else self._value <= other

    def __gt__(self, other: Any) -> bool:
        other = _millis_of(other)
        return NotImplemented if other is NotImplemented else self._value > other

    def __ge__(self, other: Any) -> bool:
        other = _millis_of(other)
        return NotImplemented if other is NotImplemented else self._value >= other

    def as_datetime(self, codec_options: Optional["CodecOptions"] = None) -> datetime.datetime:
        """This instant as the decoder would give it under ``codec_options`` (default: the defaults).

        Its ``tz_aware``, ``tzinfo`` and ``datetime_conversion`` apply; a value datetime.datetime
        cannot hold raises InvalidBSON unless the conversion clamps or falls back to DatetimeMS.
        """
        tz_aware = getattr(codec_options, "tz_aware", False)
        tzinfo = getattr(codec_options, "tzinfo", None)
        conversion = getattr(codec_options, "datetime_conversion", DatetimeConversion.DATETIME)
        try:
            # PyMongo's annotation: a datetime (DATETIME_MS/DATETIME_AUTO options can give a DatetimeMS).
            return cast(datetime.datetime, millis_to_datetime(self._value, tz_aware, tzinfo, conversion))
        except (OverflowError, ValueError) as exc:
            raise InvalidBSON(f"DatetimeMS({self._value}) is out of datetime.datetime's range ({exc}); use "
                              "CodecOptions(datetime_conversion=DatetimeConversion.DATETIME_AUTO) or "
                              "DATETIME_CLAMP") from exc


def _millis_of(other: Any) -> Any:
    if isinstance(other, DatetimeMS):
        return other._value
    if isinstance(other, int) and not isinstance(other, bool):
        return other
    return NotImplemented


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
                       conversion: int) -> Union[datetime.datetime, "DatetimeMS"]:
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


def __getattr__(name: str) -> Any:
    """PyMongo's ``bson.datetime_ms`` also exposes these; codec_options imports this module, so they
    are looked up on first use rather than imported at load time."""
    if name in ("CodecOptions", "DEFAULT_CODEC_OPTIONS"):
        from greenmongo.bson import codec_options

        return getattr(codec_options, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
