"""Collection.bulk_write and insert_many: statements grouped into runs, runs split into batches.

Ordered bulk writes keep the user's order, so consecutive statements of one
kind form a run; unordered ones group all inserts, then all updates, then all
deletes. Each run is cut into batches by the selected server's
maxWriteBatchSize and maxMessageSizeBytes (statements travel in an OP_MSG
document sequence; ``COMMAND_FIELDS_RESERVE`` bytes are kept for the fields
the executor adds). Statements are encoded once, batch by batch.

The executor loop::

    bulk = BulkWrite(...)
    while (batch := bulk.next_batch(wire)) is not None:
        execute(batch)            # build / finalize / send / batch.parse(reply)
    return bulk.result()          # BulkWriteResult, or raises BulkWriteError

``next_batch`` returns the same batch until its ``parse`` succeeds, so a retry
resends exactly the same statements. Each batch is its own retryable write
(new txnNumber) when the bulk has no multi-document statements. A batch reply
whose writeConcernError has a retryable code raises BulkWriteError at once
(without merging, so a retry does not count twice); the executor's retry
logic finds the code in ``details["writeConcernErrors"][-1]``.

Unacknowledged (w=0) ordered bulk writes are sent acknowledged (with the
server's default write concern) except for the final batch, so that the
first error still stops the remaining writes, as in PyMongo; unordered ones
are all sent w=0.
"""

from __future__ import annotations

import copy
from collections import abc
from typing import Any, Iterable, Iterator, Mapping, Optional

from greenmongo.bson.codec_options import CodecOptions
from greenmongo.errors import BulkWriteError, InvalidOperation, OperationFailure
from greenmongo.operations.arguments import validate_boolean, validate_is_document_type
from greenmongo.operations.base import (
    Command,
    DocumentSequence,
    Operation,
    WireInfo,
    encode_document,
    reply_codec_options,
)
from greenmongo.operations.replies import (
    RETRYABLE_WRITE_ERROR_CODES,
    check_write_reply_fields,
    write_concern_error_document,
)
from greenmongo.operations.requests import DELETE, INSERT, UPDATE, WRITE_MODEL_TYPES, InsertOne, ensure_id
from greenmongo.operations.results import BulkWriteResult, InsertManyResult
from greenmongo.operations.write import check_unacknowledged_options, validate_write_options, write_command_body
from greenmongo.options.write_concern import DEFAULT_WRITE_CONCERN, WriteConcern
from greenmongo.wire.batching import COMMAND_OVERHEAD, WireLimits, iter_batches, op_msg_overhead

#: Bytes kept free in each message for what the executor adds ($db, lsid, txnNumber, $clusterTime,
#: $readPreference, apiVersion...): the client bulk write spec's allowance, used here too.
COMMAND_FIELDS_RESERVE = 1000

SEQUENCE_IDENTIFIERS = {INSERT: "documents", UPDATE: "updates", DELETE: "deletes"}


def empty_bulk_result() -> dict[str, Any]:
    """PyMongo's merged bulk result document, before any batch."""
    return {"writeErrors": [], "writeConcernErrors": [], "nInserted": 0, "nUpserted": 0, "nMatched": 0,
            "nModified": 0, "nRemoved": 0, "upserted": []}


class _Run:
    """Consecutive statements of one kind, their original indexes and (lazily) their BSON."""

    __slots__ = ("kind", "indexes", "statements", "encoded", "offset", "_plan")

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.indexes: list[int] = []
        self.statements: list[Any] = []
        self.encoded: list[Optional[bytes]] = []
        self.offset = 0
        self._plan: Optional[Iterator[tuple[int, int]]] = None

    def add(self, index: int, statement: Any) -> None:
        self.indexes.append(index)
        self.statements.append(statement)
        self.encoded.append(None)

    def __len__(self) -> int:
        return len(self.statements)


class _LazySizes(abc.Sequence[int]):
    """Statement sizes for ``iter_batches``, encoding each statement the first time it is looked at."""

    def __init__(self, run: _Run, codec_options: CodecOptions) -> None:
        self._run = run
        self._codec_options = codec_options

    def __len__(self) -> int:
        return len(self._run)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        data = self._run.encoded[index]
        if data is None:
            data = self._run.encoded[index] = encode_document(self._run.statements[index], self._codec_options)
        return len(data)


class BulkWrite:
    """A collection bulk write (or insert_many) in progress; see the module docstring."""

    def __init__(self, dbname: str, collection: str, requests: Iterable[Any], *, ordered: bool = True,
                 bypass_document_validation: Optional[bool] = None, comment: Any = None,
                 let: Optional[Mapping[str, Any]] = None, write_concern: Optional[WriteConcern] = None,
                 codec_options: Optional[CodecOptions] = None, raw_data: Optional[bool] = None) -> None:
        validate_boolean("ordered", ordered)
        validate_write_options(bypass_document_validation, let)
        if not isinstance(requests, abc.Iterable) or isinstance(requests, (abc.Mapping, str, bytes)):
            raise TypeError(f"requests must be a list, not {type(requests).__name__}")
        self.dbname = dbname
        self.collection = collection
        self.ordered = ordered
        self.bypass_document_validation = bypass_document_validation
        self.comment = comment
        self.let = let
        self.write_concern = write_concern or DEFAULT_WRITE_CONCERN
        self.encode_options = codec_options or reply_codec_options(None)
        self.reply_codec_options = reply_codec_options(codec_options)
        self.raw_data = raw_data
        self.models: list[Any] = []
        for request in requests:
            if not isinstance(request, WRITE_MODEL_TYPES):
                raise TypeError(f"{request!r} is not a valid request")
            request._validate()
            self.models.append(request)
        if not self.models:
            raise InvalidOperation("No operations to execute")
        self.retryable = not any(model.multi for model in self.models)
        self.runs = self._plan_runs()
        self.full_result = empty_bulk_result()
        self._run_index = 0
        self._pending: Optional[BulkWriteBatch] = None
        self._stopped = False
        self._checked_options = False

    @classmethod
    def for_insert_many(cls, dbname: str, collection: str, documents: Iterable[Any], **options: Any) -> "BulkWrite":
        """insert_many's bulk write: every document gains an ``_id`` first (``inserted_ids``)."""
        if (not isinstance(documents, abc.Iterable) or isinstance(documents, (abc.Mapping, str, bytes))
                or (isinstance(documents, abc.Sized) and not len(documents))):
            raise TypeError("documents must be a non-empty list")
        models = []
        for document in documents:
            validate_is_document_type("document", document)
            models.append(InsertOne(document))
        if not models:
            raise TypeError("documents must be a non-empty list")
        return cls(dbname, collection, models, **options)

    # -- planning -----------------------------------------------------------------

    def _plan_runs(self) -> list[_Run]:
        if self.ordered:
            runs: list[_Run] = []
            for index, model in enumerate(self.models):
                if not runs or runs[-1].kind != model.kind:
                    runs.append(_Run(model.kind))
                runs[-1].add(index, model._statement())
            return runs
        grouped = {INSERT: _Run(INSERT), UPDATE: _Run(UPDATE), DELETE: _Run(DELETE)}
        for index, model in enumerate(self.models):
            grouped[model.kind].add(index, model._statement())
        return [run for run in grouped.values() if len(run)]

    @property
    def acknowledged(self) -> bool:
        return self.write_concern.acknowledged

    @property
    def inserted_ids(self) -> list[Any]:
        """The ``_id`` of every InsertOne, in request order."""
        return [ensure_id(model.document) for model in self.models if model.kind == INSERT]

    def _check_unacknowledged(self, wire: WireInfo) -> None:
        """Client-side errors for the whole bulk write, before the first batch is sent (CRUD spec)."""
        if self.acknowledged:
            return
        for model in self.models:
            if model.kind == INSERT:
                continue
            check_unacknowledged_options(model.kind, wire, hint=model.uses_hint, sort=model.uses_sort)

    def _body(self, kind: str, write_concern: WriteConcern, wire: WireInfo) -> dict[str, Any]:
        return write_command_body(kind, self.collection, self.ordered, write_concern, wire,
                                  bypass_document_validation=self.bypass_document_validation,
                                  comment=self.comment, let=None if kind == INSERT else self.let,
                                  raw_data=self.raw_data)

    def _next_range(self, run: _Run, wire: WireInfo) -> tuple[int, int]:
        if run._plan is None:
            overhead = op_msg_overhead(
                len(encode_document(self._body(run.kind, self.write_concern, wire)))
                + COMMAND_FIELDS_RESERVE, SEQUENCE_IDENTIFIERS[run.kind])
            limits = wire.limits
            if run.kind != INSERT:
                # An update or delete statement may exceed maxBsonObjectSize by the command allowance.
                limits = WireLimits(limits.max_bson_size + COMMAND_OVERHEAD, limits.max_message_size,
                                    limits.max_write_batch_size)
            run._plan = iter_batches(_LazySizes(run, self.encode_options), overhead=overhead, limits=limits,
                                     acknowledged=self.acknowledged, operation=run.kind,
                                     max_batch_bytes=wire.max_batch_bytes)
        return next(run._plan)

    def next_batch(self, wire: WireInfo) -> Optional["BulkWriteBatch"]:
        """The batch to send next, or None when the bulk write is done (or stopped by an error)."""
        if self._pending is not None:
            return self._pending
        if not self._checked_options:
            self._check_unacknowledged(wire)
            self._checked_options = True
        while not self._stopped and self._run_index < len(self.runs):
            run = self.runs[self._run_index]
            if run.offset >= len(run):
                self._run_index += 1
                continue
            start, end = self._next_range(run, wire)
            final = end == len(run) and self._run_index == len(self.runs) - 1
            if self.acknowledged or not self.ordered or final:
                write_concern = self.write_concern
            else:
                write_concern = DEFAULT_WRITE_CONCERN
            self._pending = BulkWriteBatch(self, run, start, end, write_concern, wire)
            return self._pending
        return None

    # -- results ------------------------------------------------------------------

    def _merge(self, run: _Run, start: int, reply: Mapping[str, Any], full: dict[str, Any]) -> None:
        affected = reply.get("n", 0)
        if run.kind == INSERT:
            full["nInserted"] += affected
        elif run.kind == DELETE:
            full["nRemoved"] += affected
        else:
            upserted = reply.get("upserted") or []
            for entry in upserted:
                full["upserted"].append({"index": run.indexes[start + entry["index"]], "_id": entry["_id"]})
            full["nUpserted"] += len(upserted)
            full["nMatched"] += affected - len(upserted)
            full["nModified"] += reply.get("nModified", 0)
        for error in reply.get("writeErrors") or ():
            document = dict(error)
            position = start + error["index"]
            document["index"] = run.indexes[position]
            document["op"] = run.statements[position]
            full["writeErrors"].append(document)
        wce = write_concern_error_document(reply)
        if wce:
            full["writeConcernErrors"].append(wce)

    def _completed(self, batch: "BulkWriteBatch", reply: Optional[Mapping[str, Any]]) -> None:
        """Record a batch's reply (None when unacknowledged) and move past it."""
        run = batch.run
        if reply is not None and batch.acknowledged:
            if self.acknowledged:
                self._merge(run, batch.start, reply, self.full_result)
            if self.ordered and reply.get("writeErrors"):
                self._stopped = True
        run.offset = batch.end
        for position in range(batch.start, batch.end):
            run.encoded[position] = None  # sent: let the BSON go
        self._pending = None

    def _stop(self) -> None:
        self._stopped = True
        self._pending = None

    def result(self) -> BulkWriteResult:
        """The merged result; raises BulkWriteError if any batch had write or write concern errors."""
        if not self.acknowledged:
            return BulkWriteResult({}, False)
        full = self.full_result
        if full["writeErrors"] or full["writeConcernErrors"]:
            raise_bulk_write_error(full)
        return BulkWriteResult(full, True)

    def insert_many_result(self) -> InsertManyResult:
        self.result()
        return InsertManyResult(self.inserted_ids, self.acknowledged)


def raise_bulk_write_error(full_result: dict[str, Any]) -> None:
    """BulkWriteError with the partial result (write errors sorted by index)."""
    errors = full_result["writeErrors"]
    if errors:
        errors.sort(key=lambda error: error["index"])
        first = errors[0]
        if first.get("code") == 20 and str(first.get("errmsg", "")).startswith("Transaction numbers"):
            raise OperationFailure("This MongoDB deployment does not support retryable writes. Please add "
                                   "retryWrites=false to your connection string.", 20, full_result)
    raise BulkWriteError(full_result)


class BulkWriteBatch(Operation[Optional[Mapping[str, Any]]]):
    """One insert/update/delete command of a bulk write; built from a fixed slice of a run."""

    is_write = True
    supports_write_concern = True

    def __init__(self, bulk: BulkWrite, run: _Run, start: int, end: int, write_concern: WriteConcern,
                 wire: WireInfo) -> None:
        super().__init__(bulk.dbname, codec_options=bulk.reply_codec_options)
        self.bulk = bulk
        self.run = run
        self.start = start
        self.end = end
        self.write_concern = write_concern
        self.retryable = bulk.retryable
        self._body = bulk._body(run.kind, write_concern, wire)
        sizes = _LazySizes(run, bulk.encode_options)
        for position in range(start, end):
            sizes[position]  # make sure every statement of the batch is encoded
        self._sequence = DocumentSequence(SEQUENCE_IDENTIFIERS[run.kind], run.statements[start:end],
                                          run.encoded[start:end])  # type: ignore[arg-type]

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.run.kind

    @property
    def collection(self) -> str:
        """The bulk write's collection (its operation span's name: "insert db.coll")."""
        return self.bulk.collection

    @property
    def acknowledged(self) -> bool:
        return self.write_concern.acknowledged

    @property
    def size(self) -> int:
        return self.end - self.start

    def build(self, wire: WireInfo) -> Command:
        return Command(self.dbname, dict(self._body), [self._sequence], acknowledged=self.acknowledged)

    def parse(self, reply: Optional[Mapping[str, Any]], wire: WireInfo) -> Optional[Mapping[str, Any]]:
        bulk = self.bulk
        if reply is None:
            bulk._completed(self, None)
            return None
        try:
            self.check_reply(reply, wire)
        except OperationFailure:
            if not bulk.acknowledged:
                # An ordered w=0 bulk write stops quietly at its first failure, as in PyMongo.
                bulk._stop()
                return reply
            raise
        check_write_reply_fields(reply, self.size)
        wce = reply.get("writeConcernError")
        if bulk.acknowledged and wce and wce.get("code") in RETRYABLE_WRITE_ERROR_CODES:
            # Raised without merging (the executor may retry this batch); the reply's labels (a 4.4+
            # server's RetryableWriteError) travel on the error.
            provisional = copy.deepcopy(bulk.full_result)
            bulk._merge(self.run, self.start, reply, provisional)
            try:
                raise_bulk_write_error(provisional)
            except OperationFailure as error:
                for label in reply.get("errorLabels") or ():
                    error._add_error_label(label)
                raise
        bulk._completed(self, reply)
        return reply

    def __repr__(self) -> str:
        return f"<BulkWriteBatch {self.run.kind} [{self.start}:{self.end}] of {len(self.run)}>"


__all__ = ["BulkWrite", "BulkWriteBatch", "COMMAND_FIELDS_RESERVE", "empty_bulk_result",
           "raise_bulk_write_error"]
