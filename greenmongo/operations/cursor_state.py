"""Server-side cursor bookkeeping: getMore/killCursors commands and the limit arithmetic.

A ``CursorState`` comes out of every cursor-returning operation (find,
aggregate, listIndexes, listCollections, the client bulk results cursor). It
holds no documents: the first batch is ``first_batch``, each getMore returns
its batch from ``GetMoreOperation.parse``. It knows when to ask for more
(``needs_get_more``), how many (the user's batch size, capped by what is left
of the limit), and when the server-side cursor must be killed (``close``).
getMore and killCursors must go to ``address``, the server that created the
cursor, and in load-balanced mode over ``pin``, the connection that created it.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from greenmongo.bson.codec_options import DEFAULT_CODEC_OPTIONS, CodecOptions
from greenmongo.bson.int64 import Int64
from greenmongo.errors import OperationFailure
from greenmongo.operations.base import WIRE_4_4, Command, Operation, WireInfo, namespace_parts, reply_ok
from greenmongo.wire import reply_fields

#: getMore errors after which the server has already discarded the cursor: no killCursors.
CURSOR_CLOSED_ERROR_CODES = frozenset({43, 175, 237})  # CursorNotFound, QueryPlanKilled, CursorKilled


class CursorState:
    """One server-side cursor as the driver tracks it (pure; see the module docstring)."""

    __slots__ = ("cursor_id", "namespace", "address", "limit", "batch_size", "get_more_max_time_ms",
                 "comment", "tailable", "await_data", "exhaust", "codec_options", "retrieved", "first_batch",
                 "post_batch_resume_token", "at_cluster_time", "session", "pin", "_dead", "_no_more")

    def __init__(self, cursor_id: int, namespace: str, *, address: Any = None,
                 first_batch: Optional[Sequence[Any]] = None,
                 limit: int = 0, batch_size: int = 0, get_more_max_time_ms: Optional[int] = None,
                 comment: Any = None, tailable: bool = False, await_data: bool = False, exhaust: bool = False,
                 codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
                 post_batch_resume_token: Any = None, at_cluster_time: Any = None) -> None:
        self.cursor_id = int(cursor_id or 0)
        self.namespace = namespace
        self.address = address
        self.limit = abs(limit or 0)
        self.batch_size = batch_size or 0
        self.get_more_max_time_ms = get_more_max_time_ms
        self.comment = comment
        self.tailable = tailable
        self.await_data = await_data
        self.exhaust = exhaust
        self.codec_options = codec_options
        self.retrieved = 0
        self.post_batch_resume_token = post_batch_resume_token
        self.at_cluster_time = at_cluster_time
        #: The session the cursor's getMores and killCursors use (set by the executor; opaque here).
        self.session: Any = None
        #: Load-balanced mode: the connection the cursor was opened on, kept for its getMores and killCursors
        #: until it is exhausted or closed (set and released by the engine; opaque here).
        self.pin: Any = None
        self._dead = False
        self._no_more = False
        self.first_batch = self._take(first_batch if first_batch is not None else [])

    @classmethod
    def from_reply(cls, reply: Mapping[str, Any], *, default_namespace: str, address: Any = None,
                   **options: Any) -> "CursorState":
        """Read ``cursor: {id, ns, firstBatch}`` from a command reply (ProtocolError if malformed).

        A failed reply the operation allowed (listIndexes on a missing collection) is an empty cursor.
        """
        if not reply_ok(reply):
            return cls(0, default_namespace, address=address, **options)
        cursor, cursor_id, namespace = cursor_fields(reply, default_namespace)
        codec_options = options.get("codec_options", DEFAULT_CODEC_OPTIONS)
        first_batch = reply_fields.documents(cursor, "firstBatch", where="cursor",
                                             document_class=codec_options.document_class)
        return cls(cursor_id, namespace, address=address, first_batch=first_batch,
                   post_batch_resume_token=cursor.get("postBatchResumeToken"),
                   at_cluster_time=cursor.get("atClusterTime"), **options)

    @classmethod
    def closed(cls, namespace: str, documents: Optional[list[Any]] = None, **options: Any) -> "CursorState":
        """A cursor that exists only on the client (a fake cursor over a fixed list)."""
        return cls(0, namespace, first_batch=documents or [], **options)

    def _take(self, documents: Sequence[Any]) -> Sequence[Any]:
        """Count a batch in, cutting it at the limit (the server enforces it too; this is the backstop). A
        batch may be a list or a ``DocumentBatch`` still encoded: neither is decoded or copied here."""
        if self.limit:
            room = max(self.limit - self.retrieved, 0)
            if len(documents) > room:
                documents = documents[:room]
        self.retrieved += len(documents)
        return documents

    # -- state ----------------------------------------------------------------------

    @property
    def dbname(self) -> str:
        return namespace_parts(self.namespace)[0]

    @property
    def collection_name(self) -> str:
        return namespace_parts(self.namespace)[1]

    @property
    def exhausted(self) -> bool:
        """The server has no cursor left (id 0) or the driver closed it."""
        return self.cursor_id == 0 or self._dead

    @property
    def limit_reached(self) -> bool:
        return bool(self.limit) and self.retrieved >= self.limit

    @property
    def alive(self) -> bool:
        """The server could still return documents."""
        return not self.exhausted and not self.limit_reached and not self._no_more

    def single_batch_done(self) -> None:
        """The user asked for one batch: fetch no more (``close`` still kills a server cursor left open)."""
        self._no_more = True

    @property
    def needs_get_more(self) -> bool:
        return self.alive

    @property
    def needs_kill(self) -> bool:
        """A server-side cursor is open that nobody will read to the end (limit reached, or closing)."""
        return not self.exhausted

    def next_batch_size(self) -> int:
        """The getMore ``batchSize``: the user's, capped by what is left of the limit (0 = server default)."""
        if self.limit:
            remaining = self.limit - self.retrieved
            return min(self.batch_size, remaining) if self.batch_size else remaining
        return self.batch_size

    # -- commands -------------------------------------------------------------------

    def get_more_operation(self) -> "GetMoreOperation":
        if not self.needs_get_more:
            raise ValueError("this cursor has nothing more to fetch")
        return GetMoreOperation(self)

    def close(self) -> Optional["KillCursorsOperation"]:
        """Mark the cursor dead; return the killCursors to send if the server still holds it."""
        if self.exhausted:
            self._dead = True
            return None
        operation = KillCursorsOperation(self.dbname, self.collection_name, [self.cursor_id])
        self._dead = True
        return operation

    def handle_error(self, error: BaseException) -> Optional["KillCursorsOperation"]:
        """After a failed getMore the cursor is unusable: kill it unless the server already did."""
        if isinstance(error, OperationFailure) and error.code in CURSOR_CLOSED_ERROR_CODES:
            self._dead = True
            return None
        return self.close()

    def record_get_more(self, reply: Mapping[str, Any]) -> Sequence[Any]:
        cursor, self.cursor_id, self.namespace = cursor_fields(reply, self.namespace)
        if "postBatchResumeToken" in cursor:
            self.post_batch_resume_token = cursor["postBatchResumeToken"]
        batch = reply_fields.documents(cursor, "nextBatch", where="cursor",
                                       document_class=self.codec_options.document_class)
        return self._take(batch)

    def __repr__(self) -> str:
        return (f"CursorState(id={self.cursor_id}, ns={self.namespace!r}, retrieved={self.retrieved}, "
                f"limit={self.limit}, alive={self.alive})")


def cursor_fields(reply: Mapping[str, Any], default_namespace: str) -> tuple[Mapping[str, Any], int, str]:
    """The ``cursor`` document, its id (an integer) and namespace (``db.collection``) of a cursor reply."""
    cursor = reply_fields.document(reply, "cursor")
    cursor_id = reply_fields.integer(cursor, "id", where="cursor")
    namespace = reply_fields.string(cursor, "ns", where="cursor", default=None) or default_namespace
    if "." not in namespace:
        raise reply_fields.malformed("cursor.ns", namespace, "a 'database.collection' namespace")
    return cursor, int(cursor_id), namespace


class GetMoreOperation(Operation[Sequence[Any]]):
    """The next batch of a cursor; ``parse`` returns it and updates the state."""

    name = "getMore"
    lazy_batches = True
    session_read_concern = "none"
    #: A getMore that never left the driver (a cleared pool while it waited for a connection) is retried:
    #: the cursor cannot have moved. One that was sent is not (Retryable Reads spec).
    retry_unsent = True

    def __init__(self, state: CursorState) -> None:
        super().__init__(state.dbname, codec_options=state.codec_options)
        self.state = state
        self.cursor_id = state.cursor_id

    deprecated_max_time_ms = False  # its maxTimeMS is maxAwaitTimeMS

    def max_time_ms_for(self, budget_ms: Optional[int]) -> Optional[int]:
        """A timeoutMS never becomes a getMore's maxTimeMS; it only caps maxAwaitTimeMS (tailable
        awaitData cursors and change streams), so the server answers before the deadline."""
        wait = self.state.get_more_max_time_ms
        if wait is None or budget_ms is None:
            return None
        return min(wait, budget_ms)

    def build(self, wire: WireInfo) -> Command:
        state = self.state
        body: dict[str, Any] = {"getMore": Int64(self.cursor_id), "collection": state.collection_name}
        batch_size = state.next_batch_size()
        if batch_size:
            body["batchSize"] = batch_size
        if state.get_more_max_time_ms is not None:
            body["maxTimeMS"] = state.get_more_max_time_ms
        if state.comment is not None and wire.max_wire_version >= WIRE_4_4:
            body["comment"] = state.comment
        return Command(self.dbname, body, exhaust_allowed=state.exhaust)

    def parse(self, reply: Optional[Mapping[str, Any]], wire: WireInfo) -> Sequence[Any]:
        if reply is None:
            raise ValueError("getMore is always acknowledged")
        self.check_reply(reply, wire)
        return self.state.record_get_more(reply)


class KillCursorsOperation(Operation[Mapping[str, Any]]):
    """Kill server-side cursors; the reply may be ignored, so ``parse`` never raises for it."""

    name = "killCursors"
    session_read_concern = "none"

    def __init__(self, dbname: str, collection: str, cursor_ids: list[int]) -> None:
        super().__init__(dbname)
        self.collection = collection
        self.cursor_ids = [int(cursor_id) for cursor_id in cursor_ids]

    def build(self, wire: WireInfo) -> Command:
        return Command(self.dbname, {"killCursors": self.collection,
                                     "cursors": [Int64(cursor_id) for cursor_id in self.cursor_ids]})

    def parse(self, reply: Optional[Mapping[str, Any]], wire: WireInfo) -> Mapping[str, Any]:
        return reply or {}
