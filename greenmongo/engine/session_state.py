"""The engine's half of a logical session: what the executor reads and updates on every command.

``ClientSession`` (greenmongo/client_session.py) is PyMongo's API over one ``SessionState``;
implicit sessions are a bare ``SessionState`` the executor takes for one operation (or a cursor
keeps until it is done). The engine never sees the API object, so everything it needs is here, in
public methods: the server session (taken from the client's pool on first use), txnNumbers, the
transaction state machine, $clusterTime/operationTime, and the readConcern fields causal
consistency and snapshot reads add. No I/O.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Mapping, Optional

from greenmongo.bson.timestamp import Timestamp
from greenmongo.engine.protocols import ServerSessionSource
from greenmongo.engine.server_session import ServerSession
from greenmongo.engine.transaction import Transaction
from greenmongo.errors import InvalidOperation

if TYPE_CHECKING:
    from greenmongo.engine.deadline import TimeoutScope


class SessionState:
    """One logical session's server session, transaction and times, as the engine uses them."""

    __slots__ = ("source", "implicit", "causal_consistency", "snapshot", "transaction", "cluster_time",
                 "operation_time", "snapshot_time", "ended", "default_timeout", "transaction_scope",
                 "trace_span", "trace_span_open", "_server_session")
    #: Tracing (``logs/tracing.py``): the last transaction's span, the parent of its operations, and whether
    #: it is still open. Set only by a tracing client's start_transaction (unset otherwise: no cost per session).
    trace_span: Any
    trace_span_open: bool

    def __init__(self, source: ServerSessionSource, *, implicit: bool, causal_consistency: bool,
                 snapshot: bool, default_timeout: Optional[float] = None) -> None:
        #: The client core that owns the server-session pool (also: which client the session belongs to).
        self.source = source
        self.implicit = implicit
        self.causal_consistency = causal_consistency
        self.snapshot = snapshot
        self.transaction = Transaction()
        self.cluster_time: Optional[Mapping[str, Any]] = None
        self.operation_time: Optional[Timestamp] = None
        self.snapshot_time: Optional[Timestamp] = None
        self.ended = False
        #: timeoutMS (seconds) of commit, abort, end and with_transaction: the session's defaultTimeoutMS,
        #: else the client's; None: not set.
        self.default_timeout = default_timeout
        #: Private to the engine: with_transaction's deadline while its callback and commit run.
        self.transaction_scope: Optional["TimeoutScope"] = None
        self._server_session: Optional[ServerSession] = None

    @property
    def in_transaction(self) -> bool:
        return self.transaction.active

    @property
    def server_session(self) -> Optional[ServerSession]:
        """The server session in use, None until the first command (or after ``end``)."""
        return self._server_session

    def check_not_ended(self) -> None:
        if self.ended:
            raise InvalidOperation("Cannot use ended session")

    def use_server_session(self) -> ServerSession:
        if self._server_session is None:
            self._server_session = self.source.take_server_session()
        return self._server_session

    def lsid_for_command(self) -> Mapping[str, Any]:
        server_session = self.use_server_session()
        server_session.last_use = time.monotonic()
        return server_session.session_id

    def mark_dirty(self) -> None:
        """A network error: the server may still be running a command under this lsid; do not reuse it."""
        if self._server_session is not None:
            self._server_session.dirty = True

    def next_txn_number(self) -> int:
        """A new transaction number (a transaction, or a retryable write, which keeps it across its retry)."""
        server_session = self.use_server_session()
        server_session.txn_number += 1
        return server_session.txn_number

    def txn_number(self) -> int:
        return self.use_server_session().txn_number

    def advance_cluster_time(self, cluster_time: Mapping[str, Any]) -> None:
        if not isinstance(cluster_time, Mapping) or not isinstance(cluster_time.get("clusterTime"), Timestamp):
            raise ValueError("cluster_time must be a document with a Timestamp clusterTime")
        if self.cluster_time is None or cluster_time["clusterTime"] > self.cluster_time["clusterTime"]:
            self.cluster_time = cluster_time

    def advance_operation_time(self, operation_time: Timestamp) -> None:
        if not isinstance(operation_time, Timestamp):
            raise TypeError("operation_time must be a Timestamp")
        if self.operation_time is None or operation_time > self.operation_time:
            self.operation_time = operation_time

    def observe_reply(self, reply: Mapping[str, Any]) -> None:
        """$clusterTime, operationTime, a transaction's recoveryToken and a snapshot's atClusterTime."""
        cluster_time = reply.get("$clusterTime")
        if cluster_time is not None:
            self.advance_cluster_time(cluster_time)
        operation_time = reply.get("operationTime")
        if isinstance(operation_time, Timestamp):
            self.advance_operation_time(operation_time)
        token = reply.get("recoveryToken")
        if token is not None:
            self.transaction.observe_recovery_token(token)
        if self.snapshot and self.snapshot_time is None:
            cursor = reply.get("cursor")
            at = (cursor.get("atClusterTime") if isinstance(cursor, Mapping) else None) or reply.get("atClusterTime")
            if isinstance(at, Timestamp):
                self.snapshot_time = at

    def read_concern_extra(self) -> Optional[dict[str, Any]]:
        """afterClusterTime (causal consistency) or atClusterTime (snapshot) for a command's readConcern."""
        if self.snapshot:
            return {"atClusterTime": self.snapshot_time} if self.snapshot_time is not None else None
        if self.causal_consistency and self.operation_time is not None:
            return {"afterClusterTime": self.operation_time}
        return None

    def end(self) -> None:
        """Give the server session (and a connection a transaction still holds) back (no I/O); the session
        cannot be used afterwards."""
        self.ended = True
        self.transaction.unpin()
        server_session, self._server_session = self._server_session, None
        if server_session is not None:
            self.source.return_server_session(server_session)
