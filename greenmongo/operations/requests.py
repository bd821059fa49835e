"""Write models for ``Collection.bulk_write`` and ``MongoClient.bulk_write`` (PyMongo's names).

The same classes serve both APIs, as in PyMongo: ``namespace`` (``"db.coll"``)
is required only by the client-level bulk write. Documents are validated
when a bulk write takes the model (update documents must start with an
operator, replacements must not), so an invalid model fails the whole bulk
write before anything is sent.
"""

from __future__ import annotations

from types import GenericAlias
from typing import Any, Mapping, Optional, Union

from greenmongo.bson.objectid import ObjectId
from greenmongo.bson.raw import RawBSONDocument
from greenmongo.operations.arguments import (
    collation_document,
    hint_value,
    sort_document,
    validate_array_filters,
    validate_boolean,
    validate_is_document_type,
    validate_is_mapping,
    validate_replacement,
    validate_update,
)

INSERT = "insert"
UPDATE = "update"
DELETE = "delete"


def ensure_id(document: Any) -> Any:
    """The document's ``_id``, generating an ObjectId into the (mutable) document when it has none.

    Like PyMongo, the caller's own dict gains the ``_id``; a RawBSONDocument
    cannot be changed and is sent as it is.
    """
    if type(document) is not dict and isinstance(document, RawBSONDocument):
        return document.get("_id")
    if "_id" not in document:
        document["_id"] = ObjectId()
    return document["_id"]


def update_statement(filter: Any, update: Any, *, multi: bool, upsert: Optional[bool], collation: Any,
                     array_filters: Optional[list[Mapping[str, Any]]], hint: Any, sort: Any) -> dict[str, Any]:
    """One entry of an ``update`` command's ``updates``; options that are None are left out."""
    statement: dict[str, Any] = {"q": filter, "u": update, "multi": multi}
    if upsert is not None:
        statement["upsert"] = upsert
    if collation is not None:
        statement["collation"] = collation
    if array_filters is not None:
        statement["arrayFilters"] = array_filters
    if hint is not None:
        statement["hint"] = hint
    if sort is not None:
        statement["sort"] = sort
    return statement


def delete_statement(filter: Any, *, multi: bool, collation: Any, hint: Any) -> dict[str, Any]:
    """One entry of a ``delete`` command's ``deletes`` (limit 0 deletes every match); None options left out."""
    statement: dict[str, Any] = {"q": filter, "limit": 0 if multi else 1}
    if collation is not None:
        statement["collation"] = collation
    if hint is not None:
        statement["hint"] = hint
    return statement


def _validate_namespace(namespace: Optional[str]) -> Optional[str]:
    if namespace is None:
        return None
    if not isinstance(namespace, str):
        raise TypeError(f"namespace must be an instance of str, not {type(namespace).__name__}")
    dbname, dot, collection = namespace.partition(".")
    if not dbname or not dot or not collection:
        raise ValueError(f"namespace must be of the form 'database.collection', not {namespace!r}")
    return namespace


class _WriteModel:
    """Shared plumbing: the kind of statement, its namespace, equality and repr."""

    __slots__ = ("_namespace",)
    _namespace: Optional[str]
    kind = ""
    multi = False

    def _fields(self) -> tuple[Any, ...]:
        raise NotImplementedError

    @property
    def namespace(self) -> Optional[str]:
        return self._namespace

    def _validate(self) -> None:
        """Checks deferred to bulk_write time, as in PyMongo."""

    def _statement(self) -> dict[str, Any]:
        """The collection-level ``insert``/``update``/``delete`` statement."""
        raise NotImplementedError

    def _client_op(self, namespace_index: int) -> dict[str, Any]:
        """The entry of the server 8.0 ``bulkWrite`` command's ``ops`` array."""
        raise NotImplementedError

    @property
    def uses_collation(self) -> bool:
        return getattr(self, "_collation", None) is not None

    @property
    def uses_hint(self) -> bool:
        return getattr(self, "_hint", None) is not None

    @property
    def uses_array_filters(self) -> bool:
        return getattr(self, "_array_filters", None) is not None

    @property
    def uses_sort(self) -> bool:
        return getattr(self, "_sort", None) is not None

    def __eq__(self, other: object) -> bool:
        if type(other) is type(self):
            return self._fields() == other._fields()
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return "{}({})".format(type(self).__name__, ", ".join(repr(value) for value in self._fields()))


class InsertOne(_WriteModel):
    """Insert one document (an ``_id`` is generated into it when missing)."""

    __slots__ = ("_doc",)
    kind = INSERT
    __class_getitem__: Any = classmethod(GenericAlias)  # InsertOne[dict], as PyMongo's generic class

    def __init__(self, document: Any, namespace: Optional[str] = None) -> None:
        self._doc = document
        self._namespace = _validate_namespace(namespace)

    @property
    def document(self) -> Any:
        return self._doc

    def _fields(self) -> tuple[Any, ...]:
        return (self._doc,) if self._namespace is None else (self._doc, self._namespace)

    def _validate(self) -> None:
        validate_is_document_type("document", self._doc)

    def _statement(self) -> Any:
        ensure_id(self._doc)
        return self._doc

    def _client_op(self, namespace_index: int) -> dict[str, Any]:
        ensure_id(self._doc)
        document = self._doc
        if not isinstance(document, RawBSONDocument) and next(iter(document)) != "_id":
            # Nested documents are encoded as given, and the spec wants _id first.
            document = {"_id": document["_id"], **{k: v for k, v in document.items() if k != "_id"}}
        return {"insert": namespace_index, "document": document}


class _DeleteModel(_WriteModel):
    __slots__ = ("_filter", "_collation", "_hint")
    kind = DELETE

    def __init__(self, filter: Mapping[str, Any], collation: Any = None, hint: Any = None,
                 namespace: Optional[str] = None) -> None:
        if filter is not None:
            validate_is_mapping("filter", filter)
        self._filter = filter
        self._collation = collation_document(collation)
        self._hint = hint_value(hint)
        self._namespace = _validate_namespace(namespace)

    def _fields(self) -> tuple[Any, ...]:
        fields = (self._filter, self._collation, self._hint)
        return fields if self._namespace is None else fields + (self._namespace,)

    def _statement(self) -> dict[str, Any]:
        return delete_statement(self._filter, multi=self.multi, collation=self._collation, hint=self._hint)

    def _client_op(self, namespace_index: int) -> dict[str, Any]:
        op: dict[str, Any] = {"delete": namespace_index, "filter": self._filter, "multi": self.multi}
        if self._hint is not None:
            op["hint"] = self._hint
        if self._collation is not None:
            op["collation"] = self._collation
        return op


class DeleteOne(_DeleteModel):
    """Delete at most one document matching ``filter``."""

    __slots__ = ()


class DeleteMany(_DeleteModel):
    """Delete every document matching ``filter``."""

    __slots__ = ()
    multi = True


class _UpdateModel(_WriteModel):
    __slots__ = ("_filter", "_doc", "_upsert", "_collation", "_array_filters", "_hint", "_sort")
    kind = UPDATE
    is_replacement = False

    def __init__(self, filter: Mapping[str, Any], update: Any, upsert: Optional[bool] = None,
                 collation: Any = None, array_filters: Optional[list[Mapping[str, Any]]] = None, hint: Any = None,
                 namespace: Optional[str] = None, sort: Any = None) -> None:
        if filter is not None:
            validate_is_mapping("filter", filter)
        if upsert is not None:
            validate_boolean("upsert", upsert)
        self._filter = filter
        self._doc = update
        self._upsert = upsert
        self._collation = collation_document(collation)
        self._array_filters = validate_array_filters(array_filters)
        self._hint = hint_value(hint)
        self._sort = sort_document(sort)
        self._namespace = _validate_namespace(namespace)

    def _fields(self) -> tuple[Any, ...]:
        fields: tuple[Any, ...] = (self._filter, self._doc, self._upsert, self._collation, self._array_filters,
                                   self._hint)
        if self._sort is not None:
            fields += (self._sort,)
        return fields if self._namespace is None else fields + (self._namespace,)

    def _validate(self) -> None:
        if self.is_replacement:
            validate_replacement(self._doc)
        else:
            validate_update(self._doc)

    def _statement(self) -> dict[str, Any]:
        return update_statement(self._filter, self._doc, multi=self.multi, upsert=self._upsert,
                                collation=self._collation, array_filters=self._array_filters, hint=self._hint,
                                sort=self._sort)

    def _client_op(self, namespace_index: int) -> dict[str, Any]:
        op: dict[str, Any] = {"update": namespace_index, "filter": self._filter, "updateMods": self._doc,
                              "multi": self.multi}
        if self._upsert is not None:
            op["upsert"] = self._upsert
        if self._array_filters is not None:
            op["arrayFilters"] = self._array_filters
        if self._hint is not None:
            op["hint"] = self._hint
        if self._collation is not None:
            op["collation"] = self._collation
        if self._sort is not None:
            op["sort"] = self._sort
        return op


class UpdateOne(_UpdateModel):
    """Update at most one document; ``sort`` (server 8.0+) picks which."""

    __slots__ = ()


class UpdateMany(_UpdateModel):
    """Update every matching document."""

    __slots__ = ()
    multi = True

    def __init__(self, filter: Mapping[str, Any], update: Any, upsert: Optional[bool] = None,
                 collation: Any = None, array_filters: Optional[list[Mapping[str, Any]]] = None, hint: Any = None,
                 namespace: Optional[str] = None) -> None:
        super().__init__(filter, update, upsert, collation, array_filters, hint, namespace)


class ReplaceOne(_UpdateModel):
    """Replace at most one document; ``sort`` (server 8.0+) picks which."""

    __slots__ = ()
    is_replacement = True
    __class_getitem__: Any = classmethod(GenericAlias)  # ReplaceOne[dict], as PyMongo's generic class

    def __init__(self, filter: Mapping[str, Any], replacement: Any, upsert: Optional[bool] = None,
                 collation: Any = None, hint: Any = None, namespace: Optional[str] = None,
                 sort: Any = None) -> None:
        super().__init__(filter, replacement, upsert, collation, None, hint, namespace, sort)

    def _fields(self) -> tuple[Any, ...]:
        fields: tuple[Any, ...] = (self._filter, self._doc, self._upsert, self._collation, self._hint)
        if self._sort is not None:
            fields += (self._sort,)
        return fields if self._namespace is None else fields + (self._namespace,)


WriteModel = Union[InsertOne, DeleteOne, DeleteMany, ReplaceOne, UpdateOne, UpdateMany]
WRITE_MODEL_TYPES = (InsertOne, DeleteOne, DeleteMany, ReplaceOne, UpdateOne, UpdateMany)
