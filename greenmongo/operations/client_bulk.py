"""MongoClient.bulk_write: the server 8.0 ``bulkWrite`` command (Bulk Write spec).

Models on any namespaces go in ``ops`` and ``nsInfo`` document sequences on
``admin``; each batch lists only the namespaces its ops use and holds at most
maxWriteBatchSize ops within maxMessageSizeBytes minus 1000 bytes and the
command document. Per-operation results and errors come back in a results
cursor that must be read to the end.

The executor loop::

    bulk = ClientBulkWrite(models, ...)
    try:
        while (batch := bulk.next_batch(wire)) is not None:
            cursor = execute(batch)                 # parse records summary + first results
            while cursor is not None and cursor.needs_get_more:
                batch.record_results(execute(cursor.get_more_operation()))
    except GreenMongoError as exc:                  # a top-level error (command, network, getMore)
        bulk.fail(exc)                              # raises (ClientBulkWriteException if anything was seen)
    return bulk.result()                            # raises ClientBulkWriteException on write/WC errors

(on a top-level error while a results cursor is open, kill it: ``cursor.close()``.)
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, NoReturn, Optional

from greenmongo.bson.codec_options import CodecOptions
from greenmongo.errors import ClientBulkWriteException, DocumentTooLarge, InvalidOperation
from greenmongo.operations.arguments import validate_boolean
from greenmongo.operations.base import (
    Command,
    DocumentSequence,
    Operation,
    WireInfo,
    encode_document,
    raw_data_field,
    reply_codec_options,
    reply_ok,
    write_concern_field,
)
from greenmongo.operations.bulk import COMMAND_FIELDS_RESERVE
from greenmongo.operations.cursor_state import CursorState
from greenmongo.operations.replies import raise_write_concern_error, write_concern_error_document
from greenmongo.operations.requests import DELETE, INSERT, UPDATE, WRITE_MODEL_TYPES, ensure_id
from greenmongo.operations.results import ClientBulkWriteResult, DeleteResult, InsertOneResult, UpdateResult
from greenmongo.operations.write import validate_write_options, write_option_fields
from greenmongo.options.write_concern import DEFAULT_WRITE_CONCERN, WriteConcern
from greenmongo.wire import reply_fields
from greenmongo.wire.batching import COMMAND_OVERHEAD


def empty_client_bulk_result() -> dict[str, Any]:
    return {"nInserted": 0, "nUpserted": 0, "nMatched": 0, "nModified": 0, "nDeleted": 0,
            "insertResults": {}, "updateResults": {}, "deleteResults": {}}


class ClientBulkWrite:
    """A client bulk write in progress; see the module docstring."""

    def __init__(self, models: Iterable[Any], *, ordered: bool = True, verbose_results: Optional[bool] = None,
                 bypass_document_validation: Optional[bool] = None, comment: Any = None,
                 let: Optional[Mapping[str, Any]] = None, write_concern: Optional[WriteConcern] = None,
                 codec_options: Optional[CodecOptions] = None, raw_data: Optional[bool] = None) -> None:
        validate_boolean("ordered", ordered)
        if verbose_results is not None:
            validate_boolean("verbose_results", verbose_results)
        validate_write_options(bypass_document_validation, let)
        self.models = list(models)
        if not self.models:
            raise InvalidOperation("MongoClient.bulk_write requires at least one write model")
        for model in self.models:
            if not isinstance(model, WRITE_MODEL_TYPES):
                raise TypeError(f"{model!r} is not a valid request")
            if model.namespace is None:
                raise InvalidOperation(f"MongoClient.bulk_write requires a namespace on each model: {model!r}")
            model._validate()
        self.write_concern = write_concern or DEFAULT_WRITE_CONCERN
        if not self.write_concern.acknowledged:
            if verbose_results:
                raise InvalidOperation("Cannot request unacknowledged write concern and verbose results")
            if ordered:
                raise InvalidOperation("Cannot request unacknowledged write concern and ordered writes")
        self.ordered = ordered
        self.verbose_results = bool(verbose_results)
        self.errors_only = True if verbose_results is None else not verbose_results
        self.bypass_document_validation = bypass_document_validation
        self.comment = comment
        self.let = let
        self.raw_data = raw_data
        self.encode_options = codec_options or reply_codec_options(None)
        self.reply_codec_options = reply_codec_options(codec_options)
        self.retryable = not any(model.multi for model in self.models)
        self.full_result = empty_client_bulk_result()
        self.write_errors: dict[int, dict[str, Any]] = {}
        self.write_concern_errors: list[dict[str, Any]] = []
        self.any_successful = False
        self._observed = False
        self._offset = 0
        self._pending: Optional[ClientBulkWriteBatch] = None
        self._stopped = False

    @property
    def acknowledged(self) -> bool:
        return self.write_concern.acknowledged

    def _body(self, wire: WireInfo) -> dict[str, Any]:
        body: dict[str, Any] = {"bulkWrite": 1, "errorsOnly": self.errors_only, "ordered": self.ordered}
        write_option_fields(body, self.bypass_document_validation, self.comment, self.let)
        write_concern_field(body, self.write_concern)
        raw_data_field(body, self.raw_data, wire)
        return body

    def next_batch(self, wire: WireInfo) -> Optional["ClientBulkWriteBatch"]:
        if self._pending is not None:
            return self._pending
        if self._stopped or self._offset >= len(self.models):
            return None
        self._pending = self._plan_batch(wire)
        return self._pending

    def _plan_batch(self, wire: WireInfo) -> "ClientBulkWriteBatch":
        body = self._body(wire)
        body_size = len(encode_document(body))
        if not self.acknowledged and body_size > wire.max_bson_size + COMMAND_OVERHEAD:
            raise DocumentTooLarge(f"bulkWrite command document too large: {body_size} bytes")
        room = wire.max_message_size - (COMMAND_FIELDS_RESERVE + body_size)
        namespaces: dict[str, int] = {}
        ops: list[dict[str, Any]] = []
        encoded_ops: list[bytes] = []
        ns_docs: list[dict[str, Any]] = []
        encoded_ns: list[bytes] = []
        used = 0
        index = self._offset
        while index < len(self.models) and len(ops) < wire.max_write_batch_size:
            model = self.models[index]
            namespace = model.namespace
            new_namespace = namespace not in namespaces
            ns_index = len(namespaces) if new_namespace else namespaces[namespace]
            op = model._client_op(ns_index)
            op_bytes = encode_document(op, self.encode_options)
            if not self.acknowledged:
                self._check_unacknowledged_sizes(model, op, op_bytes, wire)
            added = len(op_bytes)
            ns_bytes = b""
            if new_namespace:
                ns_bytes = encode_document({"ns": namespace})
                added += len(ns_bytes)
            if used + added > room:
                if not ops:
                    raise DocumentTooLarge(f"the first operation of a bulkWrite batch ({added} bytes) does not "
                                           f"fit in a {wire.max_message_size}-byte message")
                break
            used += added
            ops.append(op)
            encoded_ops.append(op_bytes)
            if new_namespace:
                namespaces[namespace] = ns_index
                ns_docs.append({"ns": namespace})
                encoded_ns.append(ns_bytes)
            index += 1
        sequences = [DocumentSequence("ops", ops, encoded_ops), DocumentSequence("nsInfo", ns_docs, encoded_ns)]
        return ClientBulkWriteBatch(self, self._offset, index, body, sequences)

    def _check_unacknowledged_sizes(self, model: Any, op: Mapping[str, Any], op_bytes: bytes,
                                    wire: WireInfo) -> None:
        """With w=0 the server cannot report a size error, so the driver must (Bulk Write spec)."""
        if len(op_bytes) > wire.max_bson_size + COMMAND_OVERHEAD:
            raise DocumentTooLarge(f"bulkWrite operation too large: {len(op_bytes)} bytes, the maximum is "
                                   f"{wire.max_bson_size + COMMAND_OVERHEAD}")
        document = None
        if model.kind == INSERT:
            document = op["document"]
        elif model.kind == UPDATE and getattr(model, "is_replacement", False):
            document = op["updateMods"]
        if document is not None:
            size = len(encode_document(document, self.encode_options))
            if size > wire.max_bson_size:
                raise DocumentTooLarge(f"BSON document too large ({size} bytes) - the connected server supports "
                                       f"BSON document sizes up to {wire.max_bson_size} bytes.")

    # -- results ------------------------------------------------------------------

    def _record_summary(self, batch: "ClientBulkWriteBatch", reply: Mapping[str, Any]) -> None:
        full = self.full_result
        for key in ("nInserted", "nUpserted", "nMatched", "nModified", "nDeleted"):
            full[key] += int(reply_fields.integer(reply, key, default=0))
        errors = int(reply_fields.integer(reply, "nErrors", default=0))
        if errors == 0 or (not self.ordered and errors < batch.size):
            self.any_successful = True
        wce = write_concern_error_document(reply)
        if wce:
            self.write_concern_errors.append(wce)
        self._observed = True

    def _record_result(self, batch: "ClientBulkWriteBatch", document: Mapping[str, Any]) -> None:
        index = reply_fields.integer(document, "idx", where="cursor.firstBatch[]")
        if not 0 <= index < batch.size:
            raise reply_fields.malformed("cursor.firstBatch[].idx", index, f"an index into the batch of {batch.size}")
        reply_fields.number(document, "ok", where="cursor.firstBatch[]")
        position = batch.start + int(index)
        model = self.models[position]
        if not reply_ok(document):
            error = dict(document)
            error["idx"] = position
            error["op"] = model
            self.write_errors[position] = error
            if self.ordered:
                if position > batch.start:
                    self.any_successful = True
                self._stopped = True
            return
        self.any_successful = True
        if not self.verbose_results:
            return
        if model.kind == INSERT:
            if document.get("n") == 1:
                self.full_result["insertResults"][position] = InsertOneResult(ensure_id(model.document), True)
        elif model.kind == UPDATE:
            self.full_result["updateResults"][position] = UpdateResult(dict(document), True, in_client_bulk=True)
        elif model.kind == DELETE:
            self.full_result["deleteResults"][position] = DeleteResult(dict(document), True)

    def _completed(self, batch: "ClientBulkWriteBatch") -> None:
        self._offset = batch.end
        self._pending = None

    def partial_result(self) -> Optional[ClientBulkWriteResult]:
        if not self.any_successful:
            return None
        return ClientBulkWriteResult(self.full_result, True, self.verbose_results)

    def fail(self, error: BaseException) -> NoReturn:
        """A top-level error ends the bulk write: wrap it if results or errors were already seen."""
        self._stopped = True
        self._pending = None
        try:
            if not (self._observed or self.write_errors or self.write_concern_errors):
                raise error
            raise ClientBulkWriteException(error, self.write_errors, self.write_concern_errors,
                                           self.partial_result()) from error
        finally:
            del error  # the raised traceback holds this frame: no reference cycle through the argument

    def result(self) -> ClientBulkWriteResult:
        if not self.acknowledged:
            return ClientBulkWriteResult({}, False, False)
        if self.write_errors or self.write_concern_errors:
            raise ClientBulkWriteException(None, self.write_errors, self.write_concern_errors,
                                           self.partial_result())
        return ClientBulkWriteResult(self.full_result, True, self.verbose_results)


class ClientBulkWriteBatch(Operation[Optional[CursorState]]):
    """One ``bulkWrite`` command; ``parse`` returns the results cursor when it still has more."""

    name = "bulkWrite"
    is_write = True
    supports_write_concern = True

    def __init__(self, bulk: ClientBulkWrite, start: int, end: int, body: dict[str, Any],
                 sequences: list[DocumentSequence]) -> None:
        super().__init__("admin", codec_options=bulk.reply_codec_options)
        self.bulk = bulk
        self.start = start
        self.end = end
        self.retryable = bulk.retryable
        self._body = body
        self._sequences = sequences

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def acknowledged(self) -> bool:
        return self.bulk.acknowledged

    def build(self, wire: WireInfo) -> Command:
        return Command(self.dbname, dict(self._body), self._sequences, acknowledged=self.acknowledged)

    def parse(self, reply: Optional[Mapping[str, Any]], wire: WireInfo) -> Optional[CursorState]:
        bulk = self.bulk
        if reply is None:
            bulk._completed(self)
            return None
        self.check_reply(reply, wire)
        if (self.retryable and reply.get("writeConcernError")
                and "RetryableWriteError" in (reply.get("errorLabels") or ())):
            # Not recorded: the executor retries this batch (same txnNumber) and the retry's reply counts.
            raise_write_concern_error(write_concern_error_document(reply) or {})
        bulk._record_summary(self, reply)
        bulk._completed(self)
        state = CursorState.from_reply(reply, default_namespace="admin.$cmd.bulkWrite", address=wire.address,
                                       codec_options=self.codec_options)
        self.record_results(state.first_batch)
        state.first_batch = []
        return state if state.needs_get_more else None

    def record_results(self, documents: Iterable[Mapping[str, Any]]) -> None:
        """Feed a batch of the results cursor (first batch or a getMore's) into the bulk write."""
        for document in documents:
            self.bulk._record_result(self, document)

    def __repr__(self) -> str:
        return f"<ClientBulkWriteBatch ops [{self.start}:{self.end}]>"


__all__ = ["ClientBulkWrite", "ClientBulkWriteBatch", "empty_client_bulk_result"]
