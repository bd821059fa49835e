"""The Operation contract: what the executor asks of every command the driver sends.

An operation is a pure object: it turns user arguments into a command
document, and a reply document into a result or an exception. It never
touches a socket, a pool, a session or a clock. The executor (select a server
-> check out a connection -> build -> finalize -> send -> parse -> release,
with retries, sessions and CSOT layered around that one path) drives it.

The contract
============

Attributes the executor reads before selecting a server:

``name``
    The command name (``"find"``, ``"insert"``, ...): used for monitoring,
    logging and the ``operation`` field of server-selection log messages.
``is_write`` / ``is_read``
    Writes go to a primary; ``is_read`` is simply ``not is_write``.
``retryable``
    Whether the Retryable Reads (``is_read``) or Retryable Writes
    (``is_write``) spec allows one retry: find, aggregate without ``$out``,
    count, distinct and the list commands are retryable reads; single-document
    writes, findAndModify and bulk writes without multi-document statements
    are retryable writes; updateMany/deleteMany, DDL commands, getMore and
    run_command are not. A retryable write is only retried when acknowledged.
``retry_unsent``
    Not retryable, but retried once (under retryReads) when its attempt never
    reached the wire - no connection could be checked out for it: getMore,
    whose server cursor cannot have moved then.
``read_preference``
    The preference the operation was given (writes: Primary).
``selection_read_preference(available_wire_versions, load_balanced)``
    The preference to select a server with; differs from ``read_preference``
    only for ``aggregate`` with ``$out``/``$merge`` (CRUD spec: primary when
    any available server is older than 5.0). The executor must use the value
    returned here for ``$readPreference`` too.
``codec_options``
    Decode the reply with these (writes: the collection's options with
    ``document_class=dict``; reads: the user's options, so documents come
    back as the user's document class).

Per attempt (the executor may call these again on a retry, on a new server):

``build(wire: WireInfo) -> Command``
    ``Command(dbname, body, sequences, acknowledged, exhaust_allowed)``. The
    body holds every operation field, including ``readConcern`` (when not the
    server default and the command takes one), ``writeConcern`` (when not the
    server default), ``collation``, ``comment``, ``let``, ``rawData``. It
    never holds ``$db``, ``lsid``, ``txnNumber``, ``$clusterTime``,
    ``$readPreference`` or the Stable API fields. ``sequences`` are OP_MSG
    kind-1 sections whose documents are already BSON-encoded (batch splitting
    needs their sizes), with the original documents kept for monitoring.
    ``acknowledged=False`` means: send with ``moreToCome`` and do not read a
    reply. Client-side errors (e.g. a hint on an unacknowledged update for a
    server older than 4.2) are raised here, before anything is sent.
``finalize(command, fields: ExecutionFields) -> Command``
    The single hook where session, transaction, causal-consistency, cluster
    time, read preference and CSOT fields are put into the body. The executor
    fills ``ExecutionFields``; the operation knows whether it takes a read or
    write concern (``supports_read_concern`` / ``supports_write_concern``).
``parse(reply, wire) -> result``
    ``reply`` is the decoded reply, or None when the command was sent
    unacknowledged. ``parse`` first checks ``ok`` itself
    (``check_command_reply`` with the operation's ``allowable_errors``), so the
    executor may send with ``check=False``, or let the connection check with
    ``allowable_errors=op.allowable_errors`` -- both work. It raises the
    driver's exceptions: OperationFailure and its subclasses for ``ok: 0``
    (NotPrimaryError, DuplicateKeyError for 11000/11001/12582,
    ExecutionTimeout, CursorNotFound), WriteError/DuplicateKeyError for
    ``writeErrors``, WriteConcernError/WTimeoutError for
    ``writeConcernError``, BulkWriteError from bulk batches.

Operations that need several commands (collection bulk writes, insert_many,
client bulk writes, cursors) hand out one ordinary Operation per command:

* ``bulk.BulkWrite``: ``while (batch := bulk.next_batch(wire)) is not None:
  run(batch)`` then ``bulk.result()`` (raises BulkWriteError). A batch is
  split when first handed out and rebuilt identically on a retry; its
  ``parse`` merges into the bulk only on success.
* ``client_bulk.ClientBulkWrite``: the same loop, plus the results cursor of
  each batch (``batch.parse`` returns a CursorState to drain with getMore,
  feeding ``batch.record_results``); top-level errors go to
  ``client_bulk.fail(exc)``.
* ``cursor_state.CursorState``: returned by find, aggregate and the list
  commands; it hands out GetMore and KillCursors operations and does the
  limit/batchSize arithmetic. getMore and killCursors must go to
  ``state.address`` (and the pinned connection when load balanced).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Iterable, Mapping, MutableMapping, Optional, Sequence, TypeVar, Union

from greenmongo import bson
from greenmongo.bson.codec_options import DEFAULT_CODEC_OPTIONS, CodecOptions
from greenmongo.bson.raw import RawBSONDocument
from greenmongo.options.read_concern import ReadConcern
from greenmongo.options.read_preferences import ReadPreference, ServerMode
from greenmongo.options.write_concern import WriteConcern
from greenmongo.wire.batching import (
    DEFAULT_MAX_BSON_SIZE,
    DEFAULT_MAX_WRITE_BATCH_SIZE,
    WireLimits,
)
from greenmongo.wire.command_errors import check_command_reply
from greenmongo.wire.header import DEFAULT_MAX_MESSAGE_SIZE
from greenmongo.wire.versions import (  # re-exported: the operations compare against them
    WIRE_4_2 as WIRE_4_2,
    WIRE_4_4 as WIRE_4_4,
    WIRE_5_0 as WIRE_5_0,
    WIRE_6_0 as WIRE_6_0,
    WIRE_7_0 as WIRE_7_0,
    WIRE_8_0 as WIRE_8_0,
    WIRE_8_2,
)

ResultT = TypeVar("ResultT")



@dataclass(frozen=True)
class WireInfo:
    """What an operation may know about the server it is built for."""

    max_wire_version: int
    max_bson_size: int = DEFAULT_MAX_BSON_SIZE
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    max_write_batch_size: int = DEFAULT_MAX_WRITE_BATCH_SIZE
    address: Optional[Any] = None
    #: Automatic encryption's cap on a write batch's statements, before encryption grows them (Client Side
    #: Encryption spec: 2 MiB); a single larger statement still goes, alone. None: only the server's limits.
    max_batch_bytes: Optional[int] = None

    @property
    def limits(self) -> WireLimits:
        return WireLimits(self.max_bson_size, self.max_message_size, self.max_write_batch_size)

    @classmethod
    def from_hello(cls, hello: Mapping[str, Any], address: Optional[Any] = None) -> "WireInfo":
        limits = WireLimits.from_hello(dict(hello))
        return cls(int(hello.get("maxWireVersion", 0)), limits.max_bson_size, limits.max_message_size,
                   limits.max_write_batch_size, address)

    @classmethod
    def from_connection(cls, connection: Any) -> "WireInfo":
        """From any object with ``max_wire_version``/``max_bson_size``/... (a pooled Connection)."""
        return cls(int(connection.max_wire_version), int(connection.max_bson_size),
                   int(connection.max_message_size), int(connection.max_write_batch_size),
                   getattr(connection, "address", None))


class DocumentSequence:
    """One OP_MSG kind-1 section: documents encoded once, originals kept for monitoring."""

    __slots__ = ("identifier", "documents", "encoded")

    def __init__(self, identifier: str, documents: Sequence[Mapping[str, Any]], encoded: Sequence[bytes]) -> None:
        if len(documents) != len(encoded):
            raise ValueError("a document sequence needs one encoding per document")
        self.identifier = identifier
        self.documents = documents
        self.encoded = encoded

    @classmethod
    def encode(cls, identifier: str, documents: Sequence[Mapping[str, Any]],
               codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS) -> "DocumentSequence":
        return cls(identifier, documents, [encode_document(doc, codec_options) for doc in documents])

    @property
    def size(self) -> int:
        """Bytes of the encoded documents (without the section header)."""
        return sum(len(data) for data in self.encoded)

    def __len__(self) -> int:
        return len(self.encoded)

    def __repr__(self) -> str:
        return f"DocumentSequence({self.identifier!r}, {len(self.encoded)} documents, {self.size} bytes)"


def encode_document(document: Mapping[str, Any], codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS) -> bytes:
    """BSON for one document, reusing a RawBSONDocument's bytes."""
    if type(document) is not dict and isinstance(document, RawBSONDocument):
        return document.raw
    return bson.encode(document, codec_options=codec_options)


class Command:
    """One command to send: ``dbname``, the kind-0 ``body``, kind-1 ``sequences`` and how to send it."""

    __slots__ = ("dbname", "body", "sequences", "acknowledged", "exhaust_allowed")

    def __init__(self, dbname: str, body: MutableMapping[str, Any], sequences: Sequence[DocumentSequence] = (),
                 *, acknowledged: bool = True, exhaust_allowed: bool = False) -> None:
        if not body:
            raise ValueError("a command body cannot be empty")
        self.dbname = dbname
        self.body = body
        self.sequences = tuple(sequences)
        self.acknowledged = acknowledged
        self.exhaust_allowed = exhaust_allowed

    @property
    def name(self) -> str:
        return next(iter(self.body))

    def sequences_for_connection(self) -> Optional[dict[str, Sequence[bytes]]]:
        """The sequences as ``Connection.command(sequences=...)`` takes them (no second encoding)."""
        if not self.sequences:
            return None
        return {seq.identifier: seq.encoded for seq in self.sequences}

    def encoded_sequences(self) -> list[tuple[str, Sequence[bytes]]]:
        """The sequences as ``wire.op_msg.pack_op_msg`` takes them."""
        return [(seq.identifier, seq.encoded) for seq in self.sequences]

    def for_monitoring(self, body: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
        """The command as CommandStartedEvent shows it: ``body`` plus each sequence as an array.

        Pass the final body (with ``$db``, ``lsid``...) the executor actually sent.
        """
        document = dict(self.body if body is None else body)
        for seq in self.sequences:
            document[seq.identifier] = list(seq.documents)
        return document

    def __repr__(self) -> str:
        return (f"Command({self.dbname!r}, {dict(self.body)!r}, sequences={list(self.sequences)!r}, "
                f"acknowledged={self.acknowledged})")


@dataclass
class ExecutionFields:
    """What the executor adds to a command after building it; None means "leave out".

    ``in_transaction`` strips the operation's own readConcern and writeConcern
    (statements inside a transaction carry neither). ``read_concern``, when
    given, replaces the operation's readConcern (a transaction's first
    statement, a snapshot session). ``read_concern_extra`` (``afterClusterTime``
    for causal consistency, ``atClusterTime`` for snapshot reads) is merged
    into whatever readConcern is sent. All readConcern handling applies only
    to commands that take one. ``max_time_ms`` is the CSOT value (from
    ``Operation.max_time_ms_for``) and replaces the operation's own maxTimeMS.
    ``csot``: a timeoutMS applies, so the deprecated per-command limits go:
    the operation's own maxTimeMS (``deprecated_max_time_ms``) and
    ``wtimeout`` (a write concern left empty is not sent).
    """

    lsid: Optional[Mapping[str, Any]] = None
    txn_number: Optional[int] = None
    start_transaction: bool = False
    autocommit: Optional[bool] = None
    in_transaction: bool = False
    read_concern: Optional[Mapping[str, Any]] = None
    read_concern_extra: Optional[Mapping[str, Any]] = None
    cluster_time: Optional[Mapping[str, Any]] = None
    read_preference: Optional[Mapping[str, Any]] = None
    max_time_ms: Optional[int] = None
    csot: bool = False
    session_read_concern: bool = False
    """The read concern fields come from the session (causal, snapshot): any command carries them."""


NO_EXECUTION_FIELDS = ExecutionFields()


def apply_execution_fields(body: Mapping[str, Any], fields: ExecutionFields, *, supports_read_concern: bool,
                           supports_write_concern: bool, accepts_max_time_ms: bool = True,
                           deprecated_max_time_ms: bool = True) -> dict[str, Any]:
    """A copy of ``body`` with the executor's fields placed (the command name stays first).

    Concern fields are only touched for commands that take them, so a
    user-written command (run_command) is sent as given, except for what a
    transaction or a snapshot session requires of every command.
    """
    out = dict(body)
    if fields.in_transaction and supports_write_concern:
        out.pop("writeConcern", None)
    if fields.csot:
        if deprecated_max_time_ms:
            out.pop("maxTimeMS", None)
        concern = out.get("writeConcern") if supports_write_concern else None
        if concern is not None and "wtimeout" in concern:
            concern = {key: value for key, value in concern.items() if key != "wtimeout"}
            if concern:
                out["writeConcern"] = concern
            else:
                del out["writeConcern"]
    # A transaction's first statement and a session's causal/snapshot fields reach every command.
    if supports_read_concern or fields.start_transaction or fields.session_read_concern:
        if fields.in_transaction:
            out.pop("readConcern", None)
        if fields.read_concern is not None:
            out["readConcern"] = dict(fields.read_concern)
        sends_read_concern = not fields.in_transaction or fields.read_concern is not None
        if fields.read_concern_extra and sends_read_concern:
            merged = dict(out.get("readConcern") or {})
            merged.update(fields.read_concern_extra)
            out["readConcern"] = merged
    if fields.max_time_ms is not None and accepts_max_time_ms:
        out["maxTimeMS"] = fields.max_time_ms
    if fields.lsid is not None:
        out["lsid"] = fields.lsid
    if fields.txn_number is not None:
        out["txnNumber"] = bson.Int64(fields.txn_number)
    if fields.start_transaction:
        out["startTransaction"] = True
    if fields.autocommit is not None:
        out["autocommit"] = fields.autocommit
    if fields.cluster_time is not None:
        out["$clusterTime"] = fields.cluster_time
    if fields.read_preference is not None:
        out["$readPreference"] = fields.read_preference
    return out


def read_concern_field(body: MutableMapping[str, Any], read_concern: Optional[ReadConcern]) -> None:
    """Add ``readConcern`` unless it is the server default (Read and Write Concern spec)."""
    if read_concern is not None and not read_concern.is_server_default:
        body["readConcern"] = read_concern.document


def write_concern_field(body: MutableMapping[str, Any], write_concern: Optional[WriteConcern]) -> None:
    """Add ``writeConcern`` unless it is the server default (w:0 is sent: it is not the default)."""
    if write_concern is not None and not write_concern.is_server_default:
        body["writeConcern"] = write_concern.document


def raw_data_field(body: MutableMapping[str, Any], raw_data: Optional[bool], wire: WireInfo) -> None:
    """``rawData`` (timeseries bucket access) exists from server 8.2; older servers never see it."""
    if raw_data is not None and wire.max_wire_version >= WIRE_8_2:
        body["rawData"] = raw_data


class Operation(Generic[ResultT]):
    """Base class for every command the driver sends (see the module docstring)."""

    name: ClassVar[str] = ""
    is_write: bool = False
    retryable: bool = False
    retry_unsent: bool = False
    supports_read_concern: bool = False
    supports_write_concern: bool = False
    accepts_max_time_ms: bool = True
    #: The command's own maxTimeMS comes from the deprecated maxTimeMS option: a timeoutMS replaces it.
    #: (Not for getMore, whose maxTimeMS is maxAwaitTimeMS, nor for runCommand's user document.)
    deprecated_max_time_ms: bool = True
    #: A timeoutMS puts a maxTimeMS on this command (False: a cursor's first command without a lifetime
    #: deadline - timeoutMode iteration, tailable cursors that do not await data).
    timeout_max_time_ms: bool = True
    allowable_errors: tuple[Union[int, str], ...] = ()
    #: commitTransaction / abortTransaction: sent with the session's transaction number, retried once always.
    ends_transaction: bool = False
    #: Which of an explicit session's readConcern fields the command carries, whatever its own concern:
    #: "all" (causal afterClusterTime and snapshot), "snapshot" (run_command: never afterClusterTime),
    #: "none" (getMore, killCursors).
    session_read_concern: str = "all"
    #: The reply's cursor batch may stay encoded (a ``bson.codec.DocumentBatch``, each document decoded as the
    #: cursor reads it): for the commands whose cursors hand documents on one at a time.
    lazy_batches: bool = False

    def __init__(self, dbname: str, *, read_preference: Optional[ServerMode] = None,
                 codec_options: Optional[CodecOptions] = None) -> None:
        self.dbname = dbname
        self.read_preference: ServerMode = read_preference or ReadPreference.PRIMARY
        self.codec_options: CodecOptions = codec_options or DEFAULT_CODEC_OPTIONS

    @property
    def is_read(self) -> bool:
        return not self.is_write

    def selection_read_preference(self, available_wire_versions: Iterable[int] = (),
                                  load_balanced: bool = False) -> ServerMode:
        return self.read_preference

    def build(self, wire: WireInfo) -> Command:
        raise NotImplementedError

    def max_time_ms_for(self, budget_ms: Optional[int]) -> Optional[int]:
        """The maxTimeMS a timeoutMS puts on this command, given what is left of it minus the server's
        round trip (None: no limit). Cursor commands without a lifetime deadline, and getMores, refine it."""
        return budget_ms if self.timeout_max_time_ms else None

    def finalize(self, command: Command, fields: ExecutionFields = NO_EXECUTION_FIELDS) -> Command:
        body = apply_execution_fields(command.body, fields, supports_read_concern=self.supports_read_concern,
                                      supports_write_concern=self.supports_write_concern or self.ends_transaction,
                                      accepts_max_time_ms=self.accepts_max_time_ms,
                                      deprecated_max_time_ms=self.deprecated_max_time_ms)
        # Statements in a transaction are always acknowledged: the transaction's write concern is the commit's.
        return Command(command.dbname, body, command.sequences,
                       acknowledged=command.acknowledged or fields.in_transaction,
                       exhaust_allowed=command.exhaust_allowed)

    def parse(self, reply: Optional[Mapping[str, Any]], wire: WireInfo) -> ResultT:
        raise NotImplementedError

    def check_reply(self, reply: Mapping[str, Any], wire: WireInfo) -> None:
        """Raise for ``ok: 0`` unless the code or message is one of ``allowable_errors``."""
        check_command_reply(reply, max_wire_version=wire.max_wire_version, allowable_errors=self.allowable_errors)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} on {self.dbname!r}>"


def reply_ok(reply: Mapping[str, Any]) -> bool:
    """True for ``ok: 1`` (any numeric type)."""
    try:
        return float(reply.get("ok", 0)) == 1.0
    except (TypeError, ValueError):
        return False


def namespace_parts(namespace: str) -> tuple[str, str]:
    """``"db.coll.name"`` -> ``("db", "coll.name")``."""
    dbname, _, collection = namespace.partition(".")
    return dbname, collection


def reply_codec_options(codec_options: Optional[CodecOptions]) -> CodecOptions:
    """The codec options to decode write replies with: the user's, but plain dicts."""
    options = codec_options or DEFAULT_CODEC_OPTIONS
    if options.document_class is dict:
        return options
    return options.with_options(document_class=dict)
