"""The deprecated BSON types (symbol, undefined, DBPointer), kept distinct so they round-trip exactly."""

from __future__ import annotations

from typing import Any

from greenmongo.bson._slots import getstate_slots, setstate_slots
from greenmongo.bson.objectid import ObjectId


class Symbol(str):
    """BSON symbol (0x0E): behaves as a str, re-encodes as a symbol."""

    __slots__ = ()
    _type_marker = 14

    def __repr__(self) -> str:
        return f"Symbol({str.__repr__(self)})"


class Undefined:
    """BSON undefined (0x06); ``UNDEFINED`` is the only instance. Falsy, like None."""

    __slots__ = ()
    _type_marker = 6
    _instance: "Undefined"

    def __new__(cls) -> "Undefined":
        try:
            return cls._instance
        except AttributeError:
            cls._instance = super().__new__(cls)
            return cls._instance

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "UNDEFINED"

    def __reduce__(self) -> Any:
        return (Undefined, ())


UNDEFINED = Undefined()


class DBPointer:
    """BSON DBPointer (0x0C): a namespace string and an ObjectId."""

    __slots__ = ("namespace", "id")
    __getstate__ = getstate_slots
    __setstate__ = setstate_slots
    _type_marker = 12

    def __init__(self, namespace: str, id: ObjectId) -> None:
        if not isinstance(namespace, str):
            raise TypeError("namespace must be a str")
        if not isinstance(id, ObjectId):
            raise TypeError("id must be an ObjectId")
        self.namespace = namespace
        self.id = id

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, DBPointer):
            return self.namespace == other.namespace and self.id == other.id
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.namespace, self.id))

    def __repr__(self) -> str:
        return f"DBPointer({self.namespace!r}, {self.id!r})"
