"""Counting and distinct: count_documents, estimated_document_count, distinct.

count_documents is a ``$match``/``$skip``/``$limit``/``$group`` aggregate (an
empty result means 0); estimated_document_count is the ``count`` command with
no filter (a missing collection counts 0); distinct returns the reply's
``values`` array. All three are retryable reads that take a read concern.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from greenmongo.bson.codec_options import CodecOptions
from greenmongo.operations.aggregate import AggregateOperation
from greenmongo.operations.arguments import (
    collation_document,
    hint_value,
    validate_is_mapping,
    validate_optional_non_negative_integer,
)
from greenmongo.operations.base import (
    Command,
    Operation,
    WireInfo,
    raw_data_field,
    read_concern_field,
    reply_ok,
)
from greenmongo.options.read_concern import ReadConcern
from greenmongo.options.read_preferences import ServerMode
from greenmongo.wire import reply_fields

NAMESPACE_NOT_FOUND = 26


def count_pipeline(filter: Mapping[str, Any], skip: Optional[int] = None,
                   limit: Optional[int] = None) -> list[Mapping[str, Any]]:
    """The CRUD spec's countDocuments pipeline."""
    pipeline: list[Mapping[str, Any]] = [{"$match": filter}]
    if skip:
        pipeline.append({"$skip": skip})
    if limit:
        pipeline.append({"$limit": limit})
    pipeline.append({"$group": {"_id": 1, "n": {"$sum": 1}}})
    return pipeline


class CountDocumentsOperation(AggregateOperation):
    """``count_documents``: an aggregate whose parse returns the count (0 for an empty result)."""

    def __init__(self, dbname: str, collection: str, filter: Mapping[str, Any], *, skip: Optional[int] = None,
                 limit: Optional[int] = None, **options: Any) -> None:
        validate_is_mapping("filter", filter)
        validate_optional_non_negative_integer("skip", skip)
        validate_optional_non_negative_integer("limit", limit)
        super().__init__(dbname, collection, count_pipeline(filter, skip, limit), **options)

    def parse(self, reply: Optional[Mapping[str, Any]], wire: WireInfo) -> int:  # type: ignore[override]
        state = super().parse(reply, wire)
        if not state.first_batch:
            return 0
        return int(reply_fields.integer(state.first_batch[0], "n", where="cursor.firstBatch[0]"))


class EstimatedDocumentCountOperation(Operation[int]):
    """``estimated_document_count``: the ``count`` command on collection metadata."""

    name = "count"
    retryable = True
    supports_read_concern = True
    allowable_errors = ("ns missing", NAMESPACE_NOT_FOUND)

    def __init__(self, dbname: str, collection: str, *, max_time_ms: Optional[int] = None, comment: Any = None,
                 read_concern: Optional[ReadConcern] = None, read_preference: Optional[ServerMode] = None,
                 codec_options: Optional[CodecOptions] = None, raw_data: Optional[bool] = None) -> None:
        super().__init__(dbname, read_preference=read_preference, codec_options=codec_options)
        validate_optional_non_negative_integer("max_time_ms", max_time_ms)
        self.collection = collection
        self.max_time_ms = max_time_ms
        self.comment = comment
        self.read_concern = read_concern
        self.raw_data = raw_data

    def build(self, wire: WireInfo) -> Command:
        body: dict[str, Any] = {"count": self.collection}
        if self.max_time_ms is not None:
            body["maxTimeMS"] = self.max_time_ms
        if self.comment is not None:
            body["comment"] = self.comment
        read_concern_field(body, self.read_concern)
        raw_data_field(body, self.raw_data, wire)
        return Command(self.dbname, body)

    def parse(self, reply: Optional[Mapping[str, Any]], wire: WireInfo) -> int:
        if reply is None:
            raise ValueError("count is always acknowledged")
        self.check_reply(reply, wire)
        if not reply_ok(reply):
            return 0
        return int(reply_fields.integer(reply, "n"))


class DistinctOperation(Operation[list[Any]]):
    """``distinct``: the distinct values of ``key`` among documents matching ``filter``."""

    name = "distinct"
    retryable = True
    supports_read_concern = True

    def __init__(self, dbname: str, collection: str, key: str, filter: Optional[Mapping[str, Any]] = None, *,
                 collation: Any = None, hint: Any = None, max_time_ms: Optional[int] = None, comment: Any = None,
                 read_concern: Optional[ReadConcern] = None, read_preference: Optional[ServerMode] = None,
                 codec_options: Optional[CodecOptions] = None, raw_data: Optional[bool] = None,
                 extra: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(dbname, read_preference=read_preference, codec_options=codec_options)
        if not isinstance(key, str):
            raise TypeError(f"key must be an instance of str, not {type(key).__name__}")
        if filter is not None:
            validate_is_mapping("filter", filter)
        validate_optional_non_negative_integer("max_time_ms", max_time_ms)
        self.collection = collection
        self.key = key
        self.filter = filter
        self.collation = collation_document(collation)
        self.hint = hint_value(hint)
        self.max_time_ms = max_time_ms
        self.comment = comment
        self.read_concern = read_concern
        self.raw_data = raw_data
        self.extra = dict(extra or {})

    def build(self, wire: WireInfo) -> Command:
        body: dict[str, Any] = {"distinct": self.collection, "key": self.key}
        if self.filter is not None:
            body["query"] = self.filter
        if self.collation is not None:
            body["collation"] = self.collation
        if self.hint is not None:
            body["hint"] = self.hint
        if self.max_time_ms is not None:
            body["maxTimeMS"] = self.max_time_ms
        if self.comment is not None:
            body["comment"] = self.comment
        body.update(self.extra)
        read_concern_field(body, self.read_concern)
        raw_data_field(body, self.raw_data, wire)
        return Command(self.dbname, body)

    def parse(self, reply: Optional[Mapping[str, Any]], wire: WireInfo) -> list[Any]:
        if reply is None:
            raise ValueError("distinct is always acknowledged")
        self.check_reply(reply, wire)
        return list(reply_fields.array(reply, "values"))
