"""The server session pool (engine/server_session.py): LIFO reuse, timeouts, and no reuse across fork."""

from __future__ import annotations

import os

import pytest

from greenmongo.engine import server_session
from greenmongo.engine.server_session import ServerSession, ServerSessionPool


def test_most_recent_first_and_near_timeout_ones_dropped() -> None:
    pool = ServerSessionPool()
    first, second = ServerSession(), ServerSession()
    pool.put(first, 30)
    pool.put(second, 30)
    assert pool.get(30) is second and pool.get(30) is first
    stale = ServerSession()
    stale.last_use -= 29.5 * 60  # within a minute of the server's 30
    pool.put(stale, 30)
    assert len(pool) == 0 and pool.get(30) is not stale
    stale.last_use -= 10 ** 6
    pool.put(stale, None)  # no timeout known: kept
    assert pool.get(None) is stale


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_neither_reuses_nor_returns_the_parents_sessions() -> None:
    pool = ServerSessionPool()
    parents = ServerSession()
    pool.put(parents, 30)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report and leave at once
        try:
            mine = pool.get(30)
            pool.put(parents, 30)
            ok = (mine is not parents and mine.pid == os.getpid() and len(pool) == 0
                  and server_session._pid == os.getpid())
            os.write(write_end, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        assert os.read(read_end, 1) == b"1"
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)
    assert pool.get(30) is parents  # the parent's pool is untouched
