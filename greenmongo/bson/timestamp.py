"""Timestamp: the server's internal (seconds, increment) pair, ordered like the server orders it."""

from __future__ import annotations

import calendar
import datetime
from typing import Any, Union

from greenmongo.bson._slots import getstate_slots, setstate_slots
from greenmongo.bson.tz_util import utc  # noqa: F401  (PyMongo's name here)

#: Exclusive upper bound of both fields (they are unsigned 32-bit).
UPPERBOUND = 4294967296
_UINT32_MAX = UPPERBOUND - 1


class Timestamp:
    __slots__ = ("__time", "__inc")
    __getstate__ = getstate_slots
    __setstate__ = setstate_slots
    _type_marker = 17

    def __init__(self, time: Union[int, datetime.datetime], inc: int) -> None:
        if isinstance(time, datetime.datetime):
            offset = time.utcoffset()
            if offset is not None:
                time = time - offset
            time = int(calendar.timegm(time.timetuple()))
        if not isinstance(time, int) or isinstance(time, bool):
            raise TypeError("time must be an instance of int")
        if not isinstance(inc, int) or isinstance(inc, bool):
            raise TypeError("inc must be an instance of int")
        if not 0 <= time <= _UINT32_MAX:
            raise ValueError("time must be contained in [0, 2**32)")
        if not 0 <= inc <= _UINT32_MAX:
            raise ValueError("inc must be contained in [0, 2**32)")
        self.__time = time
        self.__inc = inc

    @classmethod
    def _from_wire(cls, time: int, inc: int) -> "Timestamp":
        """Decoder fast path: two unsigned 32-bit values need no validation."""
        self = object.__new__(cls)
        self.__time = time
        self.__inc = inc
        return self

    @property
    def time(self) -> int:
        return self.__time

    @property
    def inc(self) -> int:
        return self.__inc

    def as_datetime(self) -> datetime.datetime:
        return datetime.datetime.fromtimestamp(self.__time, datetime.timezone.utc)

    def _inc_time(self) -> tuple[int, int]:
        """The wire order (increment first), for the encoder."""
        return self.__inc, self.__time

    def _key(self) -> tuple[int, int]:
        return self.__time, self.__inc

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, Timestamp):
            return self._key() == other._key()
        return NotImplemented

    def __ne__(self, other: Any) -> bool:
        if isinstance(other, Timestamp):
            return self._key() != other._key()
        return NotImplemented

    def __lt__(self, other: Any) -> bool:
        if isinstance(other, Timestamp):
            return self._key() < other._key()
        return NotImplemented

    def __le__(self, other: Any) -> bool:
        if isinstance(other, Timestamp):
            return self._key() <= other._key()
        return NotImplemented

    def __gt__(self, other: Any) -> bool:
        if isinstance(other, Timestamp):
            return self._key() > other._key()
        return NotImplemented

    def __ge__(self, other: Any) -> bool:
        if isinstance(other, Timestamp):
            return self._key() >= other._key()
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"Timestamp({self.__time}, {self.__inc})"
