"""ObjectId per the BSON ObjectID spec: 4-byte time, 5-byte process random, 3-byte counter."""

from __future__ import annotations

import binascii
import datetime
import os
import struct
import time
from random import SystemRandom
from typing import Any, Optional, Union

from greenmongo.bson.tz_util import utc  # noqa: F401  (PyMongo's name here)
from greenmongo.errors import InvalidId

_PACK_TIME = struct.Struct(">I").pack
#: A new ObjectId's bytes in one pack: the time, the process random, the counter's high 16 and low 8 bits.
_PACK_NEW = struct.Struct(">I5sHB").pack
_UTC = datetime.timezone.utc
_MAX_COUNTER = 0xFFFFFF


def _new_process_state() -> None:
    """A fresh process random and counter start: run at import and in every forked child."""
    global _random, _counter
    _random = os.urandom(5)
    _counter = SystemRandom().randint(0, _MAX_COUNTER)


_random: bytes
_counter: int
_new_process_state()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_process_state)


class ObjectId:
    """A 12-byte BSON ObjectId; immutable and ordered by its bytes."""

    __slots__ = ("__id",)
    _type_marker = 7

    def __init__(self, oid: Union[str, bytes, "ObjectId", None] = None) -> None:
        if oid is None:
            global _counter
            _counter = counter = (_counter + 1) & _MAX_COUNTER
            self.__id = _PACK_NEW(int(time.time()) & 0xFFFFFFFF, _random, counter >> 8, counter & 0xFF)
        elif isinstance(oid, bytes) and len(oid) == 12:
            self.__id = oid
        elif isinstance(oid, str):
            if len(oid) != 24:
                raise InvalidId(f"{oid!r} is not a valid ObjectId: it must be a 12-byte input or a "
                                "24-character hex string")
            try:
                self.__id = bytes.fromhex(oid)
            except ValueError:
                raise InvalidId(f"{oid!r} is not a valid ObjectId: not a hex string") from None
        elif isinstance(oid, ObjectId):
            self.__id = oid.binary
        else:
            raise InvalidId(f"{oid!r} is not a valid ObjectId: it must be a 12-byte input or a "
                            "24-character hex string")

    @classmethod
    def _from_bytes(cls, data: bytes) -> "ObjectId":
        """Fast path for the decoder: ``data`` is known to be 12 bytes."""
        self = object.__new__(cls)
        self.__id = data
        return self

    @classmethod
    def from_datetime(cls, generation_time: datetime.datetime) -> "ObjectId":
        """An ObjectId for range queries on time: the time part set, the rest zero."""
        offset = generation_time.utcoffset()
        if offset is not None:
            generation_time = generation_time - offset
        seconds = int((generation_time.replace(tzinfo=None) - datetime.datetime(1970, 1, 1)).total_seconds())
        return cls(_PACK_TIME(seconds & 0xFFFFFFFF) + b"\x00" * 8)

    @classmethod
    def is_valid(cls, oid: Any) -> bool:
        if not oid:
            return False
        try:
            cls(oid)
            return True
        except (InvalidId, TypeError):
            return False

    @property
    def binary(self) -> bytes:
        return self.__id

    @property
    def generation_time(self) -> datetime.datetime:
        seconds = struct.unpack(">I", self.__id[:4])[0]
        return datetime.datetime.fromtimestamp(seconds, _UTC)

    def __getstate__(self) -> bytes:
        return self.__id

    def __setstate__(self, value: Any) -> None:
        if isinstance(value, dict):
            value = value["_ObjectId__id"]
        self.__id = value.encode("latin-1") if isinstance(value, str) else value

    def __str__(self) -> str:
        return binascii.hexlify(self.__id).decode()

    def __repr__(self) -> str:
        return f"ObjectId('{self}')"

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, ObjectId):
            return self.__id == other.binary
        return NotImplemented

    def __ne__(self, other: Any) -> bool:
        if isinstance(other, ObjectId):
            return self.__id != other.binary
        return NotImplemented

    def __lt__(self, other: Any) -> bool:
        if isinstance(other, ObjectId):
            return self.__id < other.binary
        return NotImplemented

    def __le__(self, other: Any) -> bool:
        if isinstance(other, ObjectId):
            return self.__id <= other.binary
        return NotImplemented

    def __gt__(self, other: Any) -> bool:
        if isinstance(other, ObjectId):
            return self.__id > other.binary
        return NotImplemented

    def __ge__(self, other: Any) -> bool:
        if isinstance(other, ObjectId):
            return self.__id >= other.binary
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.__id)


def _process_random() -> Optional[bytes]:
    """The current 5-byte process random (tests check it changes after fork)."""
    return _random
