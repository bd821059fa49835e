"""findAndModify: find_one_and_delete / find_one_and_replace / find_one_and_update.

``parse`` returns the reply's ``value`` (the document before or after the
change, or None). A writeConcernError in an ``ok: 1`` reply is raised as
WriteConcernError (Read and Write Concern spec: helpers for commands that
write parse it). Hints need server 4.2, and 4.4 when unacknowledged.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from greenmongo.bson.codec_options import CodecOptions
from greenmongo.errors import ConfigurationError
from greenmongo.operations.arguments import (
    collation_document,
    hint_value,
    projection_document,
    sort_document,
    validate_array_filters,
    validate_boolean,
    validate_is_mapping,
    validate_optional_non_negative_integer,
    validate_replacement,
    validate_update,
)
from greenmongo.operations.base import (
    WIRE_4_2,
    WIRE_4_4,
    Command,
    Operation,
    WireInfo,
    raw_data_field,
    write_concern_field,
)
from greenmongo.operations.replies import raise_write_concern_error, write_concern_error_document
from greenmongo.options.write_concern import DEFAULT_WRITE_CONCERN, WriteConcern
from greenmongo.wire import reply_fields


class ReturnDocument:
    """Which document find_one_and_replace/update return (PyMongo's values: False/True)."""

    BEFORE = False
    AFTER = True


DELETE = "delete"
REPLACE = "replace"
UPDATE = "update"


class FindAndModifyOperation(Operation[Optional[Mapping[str, Any]]]):
    """One ``findAndModify`` command (a retryable write)."""

    name = "findAndModify"
    is_write = True
    retryable = True
    supports_write_concern = True

    def __init__(self, dbname: str, collection: str, filter: Mapping[str, Any], kind: str, *,
                 update: Any = None, projection: Any = None, sort: Any = None, upsert: Optional[bool] = None,
                 return_document: bool = ReturnDocument.BEFORE, array_filters: Optional[list[Mapping[str, Any]]] = None,
                 hint: Any = None, collation: Any = None, let: Optional[Mapping[str, Any]] = None,
                 comment: Any = None, bypass_document_validation: Optional[bool] = None,
                 max_time_ms: Optional[int] = None, write_concern: Optional[WriteConcern] = None,
                 codec_options: Optional[CodecOptions] = None, raw_data: Optional[bool] = None,
                 extra: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(dbname, codec_options=codec_options)
        validate_is_mapping("filter", filter)
        if kind == REPLACE:
            validate_replacement(update)
        elif kind == UPDATE:
            validate_update(update)
        elif kind != DELETE:
            raise ValueError(f"unknown findAndModify kind {kind!r}")
        if not isinstance(return_document, bool):
            raise TypeError("return_document must be ReturnDocument.BEFORE or ReturnDocument.AFTER, not "
                            f"{type(return_document).__name__}")
        if upsert is not None:
            validate_boolean("upsert", upsert)
        if let is not None:
            validate_is_mapping("let", let)
        validate_optional_non_negative_integer("max_time_ms", max_time_ms)
        self.collection = collection
        self.filter = filter
        self.kind = kind
        self.update = update
        self.projection = projection_document(projection)
        self.sort = sort_document(sort)
        self.upsert = upsert
        self.return_document = return_document
        self.array_filters = validate_array_filters(array_filters)
        self.hint = hint_value(hint)
        self.collation = collation_document(collation)
        self.let = let
        self.comment = comment
        self.bypass_document_validation = bypass_document_validation
        self.max_time_ms = max_time_ms
        self.write_concern = write_concern or DEFAULT_WRITE_CONCERN
        self.raw_data = raw_data
        self.extra = dict(extra or {})

    @property
    def acknowledged(self) -> bool:
        return self.write_concern.acknowledged

    def build(self, wire: WireInfo) -> Command:
        if self.hint is not None:
            if wire.max_wire_version < WIRE_4_2:
                raise ConfigurationError("Must be connected to MongoDB 4.2+ to use hint on find and modify "
                                         "commands.")
            if not self.acknowledged and wire.max_wire_version < WIRE_4_4:
                raise ConfigurationError("Must be connected to MongoDB 4.4+ to use hint on unacknowledged find "
                                         "and modify commands.")
        body: dict[str, Any] = {"findAndModify": self.collection, "query": self.filter}
        if self.kind == DELETE:
            body["remove"] = True
        else:
            body["update"] = self.update
            body["new"] = self.return_document
        if self.projection is not None:
            body["fields"] = self.projection
        if self.sort is not None:
            body["sort"] = self.sort
        if self.upsert is not None:
            body["upsert"] = self.upsert
        if self.array_filters is not None:
            body["arrayFilters"] = self.array_filters
        if self.hint is not None:
            body["hint"] = self.hint
        if self.collation is not None:
            body["collation"] = self.collation
        if self.bypass_document_validation is not None:
            body["bypassDocumentValidation"] = self.bypass_document_validation
        if self.max_time_ms is not None:
            body["maxTimeMS"] = self.max_time_ms
        if self.let is not None:
            body["let"] = self.let
        if self.comment is not None:
            body["comment"] = self.comment
        body.update(self.extra)
        write_concern_field(body, self.write_concern)
        raw_data_field(body, self.raw_data, wire)
        return Command(self.dbname, body, acknowledged=self.acknowledged)

    def parse(self, reply: Optional[Mapping[str, Any]], wire: WireInfo) -> Optional[Mapping[str, Any]]:
        if reply is None:
            return None
        self.check_reply(reply, wire)
        error = write_concern_error_document(reply)
        if error:
            raise_write_concern_error(error)
        value: Optional[Mapping[str, Any]] = reply_fields.document(reply, "value", default=None)
        return value
