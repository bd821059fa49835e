"""DBRef: a reference to a document in another collection, with its extra fields kept in order."""

from __future__ import annotations

from copy import deepcopy
from typing import Any, Mapping, Optional

from greenmongo.bson._slots import getstate_slots, setstate_slots
from greenmongo.bson.son import SON


class DBRef:
    __slots__ = ("__collection", "__id", "__database", "__kwargs")
    __getstate__ = getstate_slots
    __setstate__ = setstate_slots
    _type_marker = 100

    def __init__(self, collection: str, id: Any, database: Optional[str] = None,
                 _extra: Optional[Mapping[str, Any]] = None, **kwargs: Any) -> None:
        if not isinstance(collection, str):
            raise TypeError(f"collection must be an instance of str, not {type(collection).__name__}")
        if database is not None and not isinstance(database, str):
            raise TypeError(f"database must be an instance of str, not {type(database).__name__}")
        self.__collection = collection
        self.__id = id
        self.__database = database
        extra = dict(_extra or {})
        extra.update(kwargs)
        self.__kwargs = extra

    @property
    def collection(self) -> str:
        return self.__collection

    @property
    def id(self) -> Any:
        return self.__id

    @property
    def database(self) -> Optional[str]:
        return self.__database

    def __getattr__(self, key: str) -> Any:
        """The extra fields read as attributes (``ref.foo``); dunder lookups are never fields."""
        if key.startswith("__"):
            raise AttributeError(key)
        try:
            return self.__kwargs[key]
        except (KeyError, AttributeError):  # AttributeError: not initialised yet (being unpickled)
            raise AttributeError(key) from None

    def as_doc(self) -> SON[str, Any]:
        """The document form, a SON as PyMongo's: $ref, $id, then $db, then the extra fields (the spec's order)."""
        doc = SON([("$ref", self.collection), ("$id", self.id)])
        if self.database is not None:
            doc["$db"] = self.database
        doc.update(self.__kwargs)
        return doc

    def __repr__(self) -> str:
        extra = "".join(f", {k}={v!r}" for k, v in self.__kwargs.items())
        if self.database is None:
            return f"DBRef({self.collection!r}, {self.id!r}{extra})"
        return f"DBRef({self.collection!r}, {self.id!r}, {self.database!r}{extra})"

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, DBRef):
            return ([self.__collection, self.__id, self.__database, self.__kwargs]
                    == [other.__collection, other.__id, other.__database, other.__kwargs])
        return NotImplemented

    def __ne__(self, other: Any) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((self.__collection, self.__id, self.__database, tuple(sorted(self.__kwargs.items()))))

    def __deepcopy__(self, memo: Any) -> "DBRef":
        return DBRef(deepcopy(self.__collection, memo), deepcopy(self.__id, memo),
                     deepcopy(self.__database, memo), deepcopy(self.__kwargs, memo))
