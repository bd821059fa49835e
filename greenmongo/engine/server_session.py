"""Server sessions (Driver Sessions spec): the server's half of a session, and their LIFO pool.

A server session is an ``lsid`` plus a transaction number. The pool hands out the most recently used
one first and drops those within a minute of the server's logicalSessionTimeoutMinutes, or marked dirty
by a network error (the server may still be running a command under that id).
"""

from __future__ import annotations

import os
import time
import uuid
from collections import deque
from typing import Any, Mapping, Optional

from greenmongo.bson.binary import UUID_SUBTYPE, Binary


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


class ClusterClock:
    """The highest ``$clusterTime`` the client has seen; gossiped to replica sets and sharded clusters."""

    __slots__ = ("cluster_time",)

    def __init__(self) -> None:
        self.cluster_time: Optional[Mapping[str, Any]] = None

    def advance(self, cluster_time: Mapping[str, Any]) -> None:
        current = self.cluster_time
        if current is None or cluster_time["clusterTime"] > current["clusterTime"]:
            self.cluster_time = cluster_time


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
