"""Sessions (Driver Sessions spec): server sessions, their pool, and ClientSession.

Every command to a deployment that supports sessions carries an ``lsid``: the user's explicit
session, or an implicit one the executor takes for the operation (a cursor keeps its implicit
session until it is exhausted or closed). Server sessions are pooled LIFO and dropped once they
are within a minute of the server's logicalSessionTimeoutMinutes, or after a network error made
their state doubtful. The client also gossips the highest ``$clusterTime`` it has seen.

Transactions are a later issue: ``start_transaction`` and friends raise InvalidOperation.
"""

from __future__ import annotations

import os
import time
import uuid
from collections import deque
from typing import Any, Mapping, Optional

from greenmongo.bson.binary import UUID_SUBTYPE, Binary
from greenmongo.bson.timestamp import Timestamp
from greenmongo.errors import ConfigurationError, InvalidOperation


class ServerSession:
    """The server's side of a session: an id, when it was last used, a transaction number."""

    __slots__ = ("session_id", "last_use", "txn_number", "dirty", "pid")

    def __init__(self) -> None:
        self.session_id = {"id": Binary(uuid.uuid4().bytes, UUID_SUBTYPE)}
        self.last_use = time.monotonic()
        self.txn_number = 0
        self.dirty = False
        self.pid = os.getpid()

    def timed_out(self, timeout_minutes: Optional[int]) -> bool:
        """Within a minute of expiring on the server: not worth reusing."""
        if timeout_minutes is None:
            return False
        return time.monotonic() - self.last_use > (timeout_minutes - 1) * 60


class ServerSessionPool:
    """LIFO pool of server sessions (most recently used first, as the spec recommends)."""

    def __init__(self) -> None:
        self._sessions: deque[ServerSession] = deque()

    def get(self, timeout_minutes: Optional[int]) -> ServerSession:
        pid = os.getpid()
        while self._sessions:
            session = self._sessions.popleft()
            if session.pid == pid and not session.timed_out(timeout_minutes):
                return session
        return ServerSession()

    def put(self, session: ServerSession, timeout_minutes: Optional[int]) -> None:
        while self._sessions and self._sessions[-1].timed_out(timeout_minutes):
            self._sessions.pop()  # the oldest are at the end
        if session.dirty or session.pid != os.getpid() or session.timed_out(timeout_minutes):
            return
        self._sessions.appendleft(session)

    def clear(self) -> None:
        self._sessions.clear()

    def __len__(self) -> int:
        return len(self._sessions)


class SessionOptions:
    """Options of an explicit session (PyMongo's names)."""

    def __init__(self, causal_consistency: Optional[bool] = None, default_transaction_options: Any = None,
                 snapshot: Optional[bool] = False) -> None:
        if snapshot and causal_consistency:
            raise ConfigurationError("snapshot reads do not support causal_consistency=True")
        self._causal_consistency = True if causal_consistency is None and not snapshot else bool(
            causal_consistency)
        self._default_transaction_options = default_transaction_options
        self._snapshot = bool(snapshot)

    @property
    def causal_consistency(self) -> bool:
        return self._causal_consistency

    @property
    def default_transaction_options(self) -> Any:
        return self._default_transaction_options

    @property
    def snapshot(self) -> bool:
        return self._snapshot


class _NoTransaction:
    """Transaction state for ``ClientSession._transaction`` (transactions are not built yet)."""

    state = "none"
    pinned_address = None


class ClientSession:
    """A logical session: PyMongo's ClientSession API, without transactions for now."""

    def __init__(self, client: Any, options: Optional[SessionOptions] = None, *, implicit: bool = False) -> None:
        self._client = client
        self._options = options or SessionOptions()
        self._implicit = implicit
        self._server_session: Optional[ServerSession] = None
        self._cluster_time: Optional[Mapping[str, Any]] = None
        self._operation_time: Optional[Timestamp] = None
        self._ended = False
        self._transaction = _NoTransaction()
        self._pinned_address = None

    # -- PyMongo's API --------------------------------------------------------------------

    @property
    def client(self) -> Any:
        return self._client

    @property
    def options(self) -> SessionOptions:
        return self._options

    @property
    def session_id(self) -> Mapping[str, Any]:
        self._check_not_ended()
        return self._use_server_session().session_id

    @property
    def cluster_time(self) -> Optional[Mapping[str, Any]]:
        return self._cluster_time

    @property
    def operation_time(self) -> Optional[Timestamp]:
        return self._operation_time

    @property
    def has_ended(self) -> bool:
        return self._ended

    @property
    def in_transaction(self) -> bool:
        return False

    def advance_cluster_time(self, cluster_time: Mapping[str, Any]) -> None:
        if not isinstance(cluster_time, Mapping) or not isinstance(cluster_time.get("clusterTime"), Timestamp):
            raise ValueError("cluster_time must be a document with a Timestamp clusterTime")
        if self._cluster_time is None or cluster_time["clusterTime"] > self._cluster_time["clusterTime"]:
            self._cluster_time = cluster_time

    def advance_operation_time(self, operation_time: Timestamp) -> None:
        if not isinstance(operation_time, Timestamp):
            raise TypeError("operation_time must be a Timestamp")
        if self._operation_time is None or operation_time > self._operation_time:
            self._operation_time = operation_time

    def end_session(self) -> None:
        """Return the server session to the client's pool; the session cannot be used afterwards."""
        if self._ended:
            return
        self._ended = True
        server_session, self._server_session = self._server_session, None
        if server_session is not None:
            self._client._return_server_session(server_session)

    def start_transaction(self, *args: Any, **kwargs: Any) -> Any:
        raise InvalidOperation("transactions are not supported by greenmongo yet")

    def commit_transaction(self) -> None:
        raise InvalidOperation("transactions are not supported by greenmongo yet")

    def abort_transaction(self) -> None:
        raise InvalidOperation("transactions are not supported by greenmongo yet")

    def with_transaction(self, *args: Any, **kwargs: Any) -> Any:
        raise InvalidOperation("transactions are not supported by greenmongo yet")

    def __enter__(self) -> "ClientSession":
        return self

    def __exit__(self, *exc: object) -> None:
        self.end_session()

    # -- used by the executor ------------------------------------------------------------------

    def _check_not_ended(self) -> None:
        if self._ended:
            raise InvalidOperation("Cannot use ended session")

    def _use_server_session(self) -> ServerSession:
        if self._server_session is None:
            self._server_session = self._client._take_server_session()
        return self._server_session

    def _lsid_for_command(self) -> Mapping[str, Any]:
        server_session = self._use_server_session()
        server_session.last_use = time.monotonic()
        return server_session.session_id

    def _mark_dirty(self) -> None:
        if self._server_session is not None:
            self._server_session.dirty = True

    def _observe_reply(self, reply: Mapping[str, Any]) -> None:
        cluster_time = reply.get("$clusterTime")
        if cluster_time is not None:
            self.advance_cluster_time(cluster_time)
        operation_time = reply.get("operationTime")
        if isinstance(operation_time, Timestamp):
            self.advance_operation_time(operation_time)
