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

#: This process's id, kept current in a forked child: the pool compares it on every get and put, and
#: ``os.getpid()`` is a system call each time.
_pid = os.getpid()


def _after_fork_in_child() -> None:
    global _pid
    _pid = os.getpid()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def process_id() -> int:
    """This process's id without a system call: kept current in a forked child by the hook above, which
    runs before the hooks of modules imported after this one (the client core's)."""
    return _pid


class ServerSession:
    """The server's side of a session: an id, when it was last used, a transaction number."""

    __slots__ = ("session_id", "last_use", "txn_number", "dirty", "pid")

    def __init__(self) -> None:
        self.session_id = {"id": Binary(uuid.uuid4().bytes, UUID_SUBTYPE)}
        self.last_use = time.monotonic()
        self.txn_number = 0
        self.dirty = False
        self.pid = _pid

    def timed_out(self, timeout_minutes: Optional[int], now: Optional[float] = None) -> bool:
        """Within a minute of expiring on the server: not worth reusing. ``now``: ``time.monotonic()``."""
        if timeout_minutes is None:
            return False
        return (time.monotonic() if now is None else now) - self.last_use > (timeout_minutes - 1) * 60


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
        now = time.monotonic() if timeout_minutes is not None else 0.0
        while self._sessions:
            session = self._sessions.popleft()
            if session.pid == _pid and not session.timed_out(timeout_minutes, now):
                return session
        return ServerSession()

    def put(self, session: ServerSession, timeout_minutes: Optional[int]) -> None:
        now = time.monotonic() if timeout_minutes is not None else 0.0
        while self._sessions and self._sessions[-1].timed_out(timeout_minutes, now):
            self._sessions.pop()  # the oldest are at the end
        if session.dirty or session.pid != _pid or session.timed_out(timeout_minutes, now):
            return
        self._sessions.appendleft(session)

    def clear(self) -> None:
        self._sessions.clear()

    def __len__(self) -> int:
        return len(self._sessions)
