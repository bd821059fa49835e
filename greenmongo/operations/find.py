"""The find command from every CRUD-spec FindOptions field, and explain.

Limit and batch size follow the Find/getMore/killCursors spec: a negative
limit (or batch size) asks for a single batch (``singleBatch``, positive
``limit``), zero values are left out, and a batch size equal to the limit is
sent as limit + 1 so the server closes the cursor itself instead of leaving a
killCursors to the driver. ``maxTimeMS`` goes on find; a tailable awaitData
cursor sends ``maxAwaitTimeMS`` as the getMore's ``maxTimeMS``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from typing import Any, Mapping, Optional

from greenmongo.bson.codec_options import CodecOptions
from greenmongo.errors import InvalidOperation
from greenmongo.operations.arguments import (
    collation_document,
    hint_value,
    projection_document,
    sort_document,
    validate_boolean,
    validate_integer,
    validate_is_document_type,
    validate_is_mapping,
    validate_optional_boolean,
    validate_optional_non_negative_integer,
)
from greenmongo.operations.base import (
    Command,
    Operation,
    WireInfo,
    raw_data_field,
    read_concern_field,
)
from greenmongo.operations.cursor_state import CursorState, cursor_fields
from greenmongo.options.read_concern import ReadConcern
from greenmongo.options.read_preferences import ServerMode
from greenmongo.wire import reply_fields


class CursorType:
    """Values for ``find(cursor_type=...)`` (PyMongo's wire-protocol flag values)."""

    NON_TAILABLE = 0
    TAILABLE = 2
    TAILABLE_AWAIT = TAILABLE | 32
    EXHAUST = 64


_CURSOR_TYPES = (CursorType.NON_TAILABLE, CursorType.TAILABLE, CursorType.TAILABLE_AWAIT, CursorType.EXHAUST)

#: Legacy ``{"$query": ..., "$orderby": ...}`` filter modifiers -> find command fields.
_MODIFIERS = {
    "$query": "filter",
    "$orderby": "sort",
    "$hint": "hint",
    "$comment": "comment",
    "$maxScan": "maxScan",
    "$maxTimeMS": "maxTimeMS",
    "$max": "max",
    "$min": "min",
    "$returnKey": "returnKey",
    "$showRecordId": "showRecordId",
    "$showDiskLoc": "showRecordId",
    "$snapshot": "snapshot",
}


@dataclass
class FindSpec:
    """Every find option (the CRUD spec's FindOptions, PyMongo's names): the one definition that
    ``Collection.find``'s Cursor, its builders, ``find_one`` and FindOperation share.

    ``validated()`` checks every field and returns a copy with the values normalized to what the
    command sends (projection, sort, hint, collation, min/max documents).
    """

    filter: Optional[Mapping[str, Any]] = None
    projection: Any = None
    skip: int = 0
    limit: int = 0
    no_cursor_timeout: bool = False
    cursor_type: int = CursorType.NON_TAILABLE
    sort: Any = None
    allow_partial_results: bool = False
    oplog_replay: bool = False
    batch_size: int = 0
    collation: Any = None
    hint: Any = None
    max_scan: Optional[int] = None
    max_time_ms: Optional[int] = None
    max_await_time_ms: Optional[int] = None
    max: Any = None
    min: Any = None
    return_key: Optional[bool] = None
    show_record_id: Optional[bool] = None
    comment: Any = None
    allow_disk_use: Optional[bool] = None
    let: Optional[Mapping[str, Any]] = None

    def validated(self) -> "FindSpec":
        spec = {} if self.filter is None else self.filter
        # Exact-type tests first (every find_one runs this): only other types go to the validators,
        # which accept subclasses and raise PyMongo's errors.
        if type(spec) is not dict:
            validate_is_mapping("filter", spec)
        if type(self.skip) is not int:
            validate_integer("skip", self.skip)
        if type(self.limit) is not int:
            validate_integer("limit", self.limit)
        if self.no_cursor_timeout is not False:
            validate_boolean("no_cursor_timeout", self.no_cursor_timeout)
        if self.cursor_type not in _CURSOR_TYPES:
            raise ValueError("not a valid value for cursor_type")
        if self.allow_partial_results is not False:
            validate_boolean("allow_partial_results", self.allow_partial_results)
        if self.oplog_replay is not False:
            validate_boolean("oplog_replay", self.oplog_replay)
        if type(self.batch_size) is not int:
            validate_integer("batch_size", self.batch_size)
        if self.skip < 0:
            raise ValueError("skip must be >= 0")
        if self.max_time_ms is not None:
            validate_optional_non_negative_integer("max_time_ms", self.max_time_ms)
        if self.max_await_time_ms is not None:
            validate_optional_non_negative_integer("max_await_time_ms", self.max_await_time_ms)
        if self.allow_disk_use is not None:
            validate_optional_boolean("allow_disk_use", self.allow_disk_use)
        if self.let is not None:
            validate_is_document_type("let", self.let)
        if self.cursor_type == CursorType.EXHAUST and self.limit:
            raise InvalidOperation("Can't use limit and exhaust together.")
        out = FindSpec.__new__(FindSpec)  # a shallow copy without re-running the 22-field __init__ (hot path)
        out.__dict__.update(self.__dict__)
        out.filter = spec
        if self.projection is not None:
            out.projection = projection_document(self.projection)
        if self.sort is not None:
            out.sort = sort_document(self.sort)
        if self.collation is not None:
            out.collation = collation_document(self.collation)
        if self.hint is not None:
            out.hint = hint_value(self.hint)
        if self.max is not None:
            out.max = sort_document(self.max)
        if self.min is not None:
            out.min = sort_document(self.min)
        return out

    @classmethod
    def find_one(cls, filter: Optional[Mapping[str, Any]]) -> "FindSpec":
        """``find_one(filter)`` with no other option, validated: the one-field case of ``FindSpec(filter,
        limit=-1).validated()`` (every find_one without options runs it) from a template validated once."""
        spec = {} if filter is None else filter
        if type(spec) is not dict:
            validate_is_mapping("filter", spec)
        out = cls.__new__(cls)
        out.__dict__.update(_FIND_ONE_TEMPLATE)
        out.filter = spec
        return out

    def copy(self) -> "FindSpec":
        """A copy whose mutable option values are copies too (a cloned Cursor's)."""
        changes: dict[str, Any] = {name: copy.copy(value) for name, value in self.__dict__.items()
                                   if isinstance(value, (dict, list))}
        return replace(self, **changes)


_FIND_ONE_TEMPLATE = FindSpec(limit=-1).validated().__dict__


class FindOperation(Operation[CursorState]):
    """``find``: a retryable read returning a CursorState (first batch + getMore state)."""

    name = "find"
    lazy_batches = True
    retryable = True
    supports_read_concern = True

    def __init__(
        self,
        dbname: str,
        collection: str,
        spec: Optional[FindSpec] = None,
        *,
        read_concern: Optional[ReadConcern] = None,
        read_preference: Optional[ServerMode] = None,
        codec_options: Optional[CodecOptions] = None,
        raw_data: Optional[bool] = None,
        validated: bool = False,
        plain: bool = False,
    ) -> None:
        """``validated``: ``spec`` is already the result of ``FindSpec.validated()`` (or ``find_one``). ``plain``:
        ``spec`` is ``FindSpec.find_one(filter)`` (no other option), whose command ``build`` writes at once
        instead of testing each of the spec's two dozen options (every find_one without options runs it)."""
        super().__init__(dbname, read_preference=read_preference, codec_options=codec_options)
        self.collection = collection
        self.spec = spec if validated and spec is not None else (spec or FindSpec()).validated()
        self.read_concern = read_concern
        self.raw_data = raw_data
        self.plain = plain

    @property
    def tailable(self) -> bool:
        return bool(self.spec.cursor_type & CursorType.TAILABLE)

    @property
    def await_data(self) -> bool:
        return self.spec.cursor_type & CursorType.TAILABLE_AWAIT == CursorType.TAILABLE_AWAIT

    @property
    def single_batch(self) -> bool:
        return self.spec.limit < 0 or self.spec.batch_size < 0

    def _limit_fields(self) -> dict[str, Any]:
        """limit / batchSize / singleBatch after the spec's transformation."""
        limit = abs(self.spec.limit)
        single = self.single_batch
        if single:
            batch_size = 0 if limit else abs(self.spec.batch_size)
        else:
            batch_size = abs(self.spec.batch_size)
            if batch_size and batch_size == limit:
                batch_size += 1
        fields: dict[str, Any] = {}
        if limit:
            fields["limit"] = limit
        if batch_size:
            fields["batchSize"] = batch_size
        if single:
            fields["singleBatch"] = True
        return fields

    def _filter_fields(self) -> dict[str, Any]:
        """The filter, unwrapping a legacy ``$query`` document into find fields."""
        spec_filter: Mapping[str, Any] = self.spec.filter if self.spec.filter is not None else {}
        if "$query" not in spec_filter:
            return {"filter": spec_filter}
        fields: dict[str, Any] = {}
        for key, value in spec_filter.items():
            if key in ("$explain", "$readPreference"):
                continue
            fields[_MODIFIERS.get(key, key)] = value
        return fields

    def build(self, wire: WireInfo) -> Command:
        spec = self.spec
        if self.plain and spec.filter is not None and "$query" not in spec.filter:
            # What the rest makes of the find_one template, in its order (tests/test_operations_find.py).
            plain: dict[str, Any] = {"find": self.collection, "filter": spec.filter, "limit": 1, "singleBatch": True}
            read_concern_field(plain, self.read_concern)
            raw_data_field(plain, self.raw_data, wire)
            return Command(self.dbname, plain)
        if (spec.min is not None or spec.max is not None) and spec.hint is None:
            raise InvalidOperation("Passing a 'hint' is required when using the min/max query option to "
                                   "ensure the query utilizes the correct index")
        body: dict[str, Any] = {"find": self.collection}
        body.update(self._filter_fields())
        if spec.sort is not None:
            body["sort"] = spec.sort
        if spec.projection is not None:
            body["projection"] = spec.projection
        if spec.hint is not None:
            body["hint"] = spec.hint
        if spec.skip:
            body["skip"] = spec.skip
        body.update(self._limit_fields())
        if spec.comment is not None:
            body["comment"] = spec.comment
        if spec.max_scan is not None:
            body["maxScan"] = spec.max_scan
        if spec.max_time_ms is not None:
            body["maxTimeMS"] = spec.max_time_ms
        read_concern_field(body, self.read_concern)
        if spec.max is not None:
            body["max"] = spec.max
        if spec.min is not None:
            body["min"] = spec.min
        if spec.return_key is not None:
            body["returnKey"] = spec.return_key
        if spec.show_record_id is not None:
            body["showRecordId"] = spec.show_record_id
        if self.tailable:
            body["tailable"] = True
        if spec.oplog_replay:
            body["oplogReplay"] = True
        if spec.no_cursor_timeout:
            body["noCursorTimeout"] = True
        if self.await_data:
            body["awaitData"] = True
        if spec.allow_partial_results:
            body["allowPartialResults"] = True
        if spec.collation is not None:
            body["collation"] = spec.collation
        if spec.allow_disk_use is not None:
            body["allowDiskUse"] = spec.allow_disk_use
        if spec.let is not None:
            body["let"] = spec.let
        raw_data_field(body, self.raw_data, wire)
        return Command(self.dbname, body)

    def parse(self, reply: Optional[Mapping[str, Any]], wire: WireInfo) -> CursorState:
        if reply is None:
            raise ValueError("find is always acknowledged")
        self.check_reply(reply, wire)
        spec = self.spec
        await_data = self.await_data
        state = CursorState.from_reply(
            reply, default_namespace=f"{self.dbname}.{self.collection}", address=wire.address,
            limit=abs(spec.limit), batch_size=abs(spec.batch_size),
            get_more_max_time_ms=spec.max_await_time_ms if await_data else None,
            comment=spec.comment, tailable=self.tailable, await_data=await_data,
            exhaust=spec.cursor_type == CursorType.EXHAUST, codec_options=self.codec_options)
        if self.single_batch and not state.exhausted:
            state.single_batch_done()
        return state


class FindOneOperation(FindOperation):
    """``find_one``'s find (limit -1: the server answers with one batch and closes the cursor). ``parse``
    returns that batch, a list of at most one document, without the cursor bookkeeping; a reply whose
    cursor is still open (a server that ignored singleBatch) is a CursorState, which the caller closes."""

    lazy_batches = False  # one document, decoded at once

    def parse(self, reply: Optional[Mapping[str, Any]], wire: WireInfo) -> Any:
        if reply is None:
            raise ValueError("find is always acknowledged")
        self.check_reply(reply, wire)
        cursor, cursor_id, _namespace = cursor_fields(reply, self.dbname + "." + self.collection)
        if cursor_id:
            return super().parse(reply, wire)
        batch = reply_fields.documents(cursor, "firstBatch", where="cursor",
                                       document_class=self.codec_options.document_class)
        return batch[:1]


class ExplainOperation(Operation[Mapping[str, Any]]):
    """``explain`` wrapping another read's command; readConcern moves to the top level."""

    name = "explain"
    retryable = True
    supports_read_concern = True

    def __init__(self, inner: Operation[Any], verbosity: Optional[str] = None, max_time_ms: Optional[int] = None,
                 comment: Any = None) -> None:
        super().__init__(inner.dbname, read_preference=inner.read_preference, codec_options=inner.codec_options)
        validate_optional_non_negative_integer("max_time_ms", max_time_ms)
        self.inner = inner
        self.verbosity = verbosity
        self.max_time_ms = max_time_ms
        self.comment = comment

    def build(self, wire: WireInfo) -> Command:
        inner = dict(self.inner.build(wire).body)
        read_concern = inner.pop("readConcern", None)
        body: dict[str, Any] = {"explain": inner}
        if self.verbosity is not None:
            body["verbosity"] = self.verbosity
        if read_concern is not None:
            body["readConcern"] = read_concern
        if self.max_time_ms is not None:
            body["maxTimeMS"] = self.max_time_ms
        if self.comment is not None:
            body["comment"] = self.comment
        return Command(self.dbname, body)

    def parse(self, reply: Optional[Mapping[str, Any]], wire: WireInfo) -> Mapping[str, Any]:
        if reply is None:
            raise ValueError("explain is always acknowledged")
        self.check_reply(reply, wire)
        return reply


__all__ = ["CursorType", "ExplainOperation", "FindOperation", "FindSpec"]
