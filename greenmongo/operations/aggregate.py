"""The aggregate command (collection or database level), including $out/$merge pipelines.

A pipeline ending in ``$out`` or ``$merge`` writes: it takes the write
concern, is not a retryable read, leaves ``cursor.batchSize`` unset (a zero
batch size would stop the pipeline), and selects its server by the CRUD
spec's rule: the given read preference only when every available server is
5.0+ (or the topology is load balanced), otherwise primary.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional, Union

from greenmongo.bson.codec_options import CodecOptions
from greenmongo.errors import ConfigurationError
from greenmongo.operations.arguments import (
    collation_document,
    hint_value,
    validate_boolean,
    validate_is_mapping,
    validate_list,
    validate_optional_non_negative_integer,
)
from greenmongo.operations.base import (
    WIRE_4_2,
    WIRE_5_0,
    Command,
    Operation,
    WireInfo,
    raw_data_field,
    read_concern_field,
    write_concern_field,
)
from greenmongo.operations.cursor_state import CursorState
from greenmongo.operations.replies import raise_write_concern_error, write_concern_error_document
from greenmongo.options.read_concern import ReadConcern
from greenmongo.options.read_preferences import ReadPreference, ServerMode
from greenmongo.options.write_concern import DEFAULT_WRITE_CONCERN, WriteConcern


def has_write_stage(pipeline: list[Mapping[str, Any]]) -> bool:
    """True when the last stage is ``$out`` or ``$merge``."""
    if not pipeline:
        return False
    last = pipeline[-1]
    return isinstance(last, Mapping) and ("$out" in last or "$merge" in last)


def write_stage_read_preference(read_preference: ServerMode, available_wire_versions: Iterable[int],
                                load_balanced: bool = False) -> ServerMode:
    """The CRUD spec's server-selection rule for aggregate with ``$out``/``$merge``."""
    if read_preference.mode == ReadPreference.PRIMARY.mode or load_balanced:
        return read_preference
    versions = list(available_wire_versions)
    if versions and min(versions) < WIRE_5_0:
        return ReadPreference.PRIMARY
    return read_preference


class AggregateOperation(Operation[CursorState]):
    """``aggregate``; ``collection=None`` runs a database-level pipeline (``aggregate: 1``)."""

    name = "aggregate"
    lazy_batches = True
    supports_read_concern = True

    def __init__(self, dbname: str, collection: Optional[str], pipeline: list[Mapping[str, Any]], *,
                 batch_size: Optional[int] = None, allow_disk_use: Optional[bool] = None,
                 bypass_document_validation: Optional[bool] = None, collation: Any = None,
                 max_time_ms: Optional[int] = None, max_await_time_ms: Optional[int] = None,
                 comment: Any = None, hint: Any = None, let: Optional[Mapping[str, Any]] = None,
                 read_concern: Optional[ReadConcern] = None, write_concern: Optional[WriteConcern] = None,
                 read_preference: Optional[ServerMode] = None, codec_options: Optional[CodecOptions] = None,
                 raw_data: Optional[bool] = None, extra: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(dbname, read_preference=read_preference, codec_options=codec_options)
        validate_list("pipeline", pipeline)
        extra = dict(extra or {})
        if "explain" in extra:
            raise ConfigurationError("The explain option is not supported. Use Database.command instead.")
        for name in ("aggregate", "pipeline"):
            if name in extra:
                raise ConfigurationError(f"The {name} option cannot be specified as a keyword argument.")
        if "batchSize" in extra:
            batch_size = extra.pop("batchSize")
        if "maxAwaitTimeMS" in extra:
            max_await_time_ms = extra.pop("maxAwaitTimeMS")
        if "collation" in extra:
            collation = extra.pop("collation")
        validate_optional_non_negative_integer("batch_size", batch_size)
        validate_optional_non_negative_integer("max_time_ms", max_time_ms)
        validate_optional_non_negative_integer("max_await_time_ms", max_await_time_ms)
        if allow_disk_use is not None:
            validate_boolean("allow_disk_use", allow_disk_use)
        if let is not None:
            validate_is_mapping("let", let)
        self.collection = collection
        self.pipeline = pipeline
        self.batch_size = batch_size
        self.allow_disk_use = allow_disk_use
        self.bypass_document_validation = bypass_document_validation
        self.collation = collation_document(collation)
        self.max_time_ms = max_time_ms
        self.max_await_time_ms = max_await_time_ms
        self.comment = comment
        self.hint = hint_value(hint)
        self.let = let
        self.read_concern = read_concern
        self.write_concern = write_concern or DEFAULT_WRITE_CONCERN
        self.raw_data = raw_data
        self.cursor_options = dict(extra.pop("cursor", None) or {})
        self.extra = extra
        self.is_write = has_write_stage(pipeline)
        self.supports_write_concern = self.is_write
        self.retryable = not self.is_write

    @property
    def namespace(self) -> str:
        return f"{self.dbname}.{self.collection}" if self.collection else f"{self.dbname}.$cmd.aggregate"

    def selection_read_preference(self, available_wire_versions: Iterable[int] = (),
                                  load_balanced: bool = False) -> ServerMode:
        if not self.is_write:
            return self.read_preference
        return write_stage_read_preference(self.read_preference, available_wire_versions, load_balanced)

    @property
    def acknowledged(self) -> bool:
        return not self.is_write or self.write_concern.acknowledged

    def build(self, wire: WireInfo) -> Command:
        target: Union[str, int] = self.collection if self.collection else 1
        body: dict[str, Any] = {"aggregate": target, "pipeline": self.pipeline}
        cursor = dict(self.cursor_options)
        if self.batch_size is not None and not self.is_write:
            cursor["batchSize"] = self.batch_size
        body["cursor"] = cursor
        if self.allow_disk_use is not None:
            body["allowDiskUse"] = self.allow_disk_use
        if self.bypass_document_validation is not None:
            body["bypassDocumentValidation"] = self.bypass_document_validation
        if self.collation is not None:
            body["collation"] = self.collation
        if self.max_time_ms is not None:
            body["maxTimeMS"] = self.max_time_ms
        if self.comment is not None:
            body["comment"] = self.comment
        if self.hint is not None:
            body["hint"] = self.hint
        if self.let is not None:
            body["let"] = self.let
        body.update(self.extra)
        if "readConcern" not in body and (not self.is_write or wire.max_wire_version >= WIRE_4_2):
            read_concern_field(body, self.read_concern)
        if self.is_write and "writeConcern" not in body:
            write_concern_field(body, self.write_concern)
        raw_data_field(body, self.raw_data, wire)
        return Command(self.dbname, body, acknowledged=self.acknowledged)

    def _state(self, reply: Optional[Mapping[str, Any]], wire: WireInfo) -> CursorState:
        options = dict(address=wire.address, batch_size=self.batch_size or 0,
                       get_more_max_time_ms=self.max_await_time_ms, comment=self.comment,
                       codec_options=self.codec_options)
        if reply is None:
            # An unacknowledged $out/$merge has no cursor: iterate an empty (client-side) one.
            return CursorState.closed(self.namespace, [], **options)
        return CursorState.from_reply(reply, default_namespace=self.namespace, **options)

    def parse(self, reply: Optional[Mapping[str, Any]], wire: WireInfo) -> CursorState:
        if reply is not None:
            self.check_reply(reply, wire)
            error = write_concern_error_document(reply)
            if error:
                raise_write_concern_error(error)
        return self._state(reply, wire)
