"""What integration tests share: command and pool event recorders, and scratch databases.

The ``recorder`` and ``client`` fixtures built on these live in tests/conftest.py.
"""

from __future__ import annotations

import contextlib
import itertools
from typing import Any, Iterator

from greenmongo.monitoring import CommandListener, ConnectionPoolListener

_database_numbers = itertools.count()
_SESSION_FIELDS = ("lsid", "$clusterTime")


class Recorder(CommandListener):
    """Every command event, in order."""

    def __init__(self) -> None:
        self.started_events: list = []
        self.succeeded_events: list = []
        self.failed_events: list = []

    def started(self, event) -> None:
        self.started_events.append(event)

    def succeeded(self, event) -> None:
        self.succeeded_events.append(event)

    def failed(self, event) -> None:
        self.failed_events.append(event)

    def clear(self) -> None:
        self.started_events.clear()
        self.succeeded_events.clear()
        self.failed_events.clear()

    def commands(self, name: str) -> list:
        """The commands sent, without the session fields every command carries (lsid, $clusterTime):
        these tests are about command shapes; tests/test_sessions.py checks the session fields."""
        return [{key: value for key, value in event.command.items() if key not in _SESSION_FIELDS}
                for event in self.started_events if event.command_name == name]

    def names(self) -> list:
        return [event.command_name for event in self.started_events]


class PoolRecorder(ConnectionPoolListener):
    """Every connection pool (CMAP) event, in order."""

    def __init__(self) -> None:
        self.events: list = []

    def _add(self, event: Any) -> None:
        self.events.append(event)

    pool_created = pool_ready = pool_cleared = pool_closed = _add
    connection_created = connection_ready = connection_closed = _add
    connection_check_out_started = connection_check_out_failed = _add
    connection_checked_out = connection_checked_in = _add

    def of(self, kind: type) -> list:
        return [event for event in self.events if isinstance(event, kind)]


def held_by_open_transactions(database: Any, collection: str, ids: list, max_time_ms: int = 2000) -> list:
    """The documents of ``ids`` an open transaction still holds: SecantusDB blocks a plain write to a document
    an open transaction wrote until the write's maxTimeMS runs out (one document per update: it does not
    honour maxTimeMS for a multi-document update that waits). Each probe adds 1 to the document's ``probe``."""
    held = []
    for document_id in ids:
        try:
            database.command("update", collection, updates=[{"q": {"_id": document_id},
                                                             "u": {"$inc": {"probe": 1}}}], maxTimeMS=max_time_ms)
        except Exception as exc:
            if getattr(exc, "code", None) != 50:  # MaxTimeMSExpired
                raise
            held.append(document_id)
    return held


@contextlib.contextmanager
def scratch_database(client: Any, prefix: str) -> Iterator[Any]:
    """A database named ``<prefix><n>`` (unique in this session), dropped before and after use."""
    name = f"{prefix}{next(_database_numbers)}"
    client.drop_database(name)
    yield client[name]
    client.drop_database(name)


def _root(glet: Any) -> Any:
    while glet.parent is not None:
        glet = glet.parent
    return glet


def gc_instances(kind: type) -> list:
    """Every object the collector tracks whose type is ``kind`` or a subclass. It asks ``type()``, never
    ``isinstance()``: the latter reads ``__class__``, which raises ReferenceError on a weak proxy whose
    referent is gone, and gc.get_objects() returns such proxies."""
    import gc

    return [obj for obj in gc.get_objects() if issubclass(type(obj), kind)]


def live_greenlets() -> set:
    """Every greenlet of this thread that is running or scheduled to run, but the hub and the caller: what a
    leak check compares before and after (gevent's threadpool, which its resolver uses, has greenlets in
    other threads: not ours)."""
    import gevent
    import greenlet

    hub, current = gevent.get_hub(), gevent.getcurrent()
    root = _root(current)
    found = set()
    for obj in gc_instances(greenlet.greenlet):
        if obj is hub or obj is current or _root(obj) is not root:
            continue
        if isinstance(obj, gevent.Greenlet):
            if not obj.dead:
                found.add(obj)
        elif obj:  # a raw greenlet that started and did not finish
            found.add(obj)
    return found


def pool_at_rest(client: Any) -> list:
    """Every pool of the client with nothing checked out, pending, waiting or being established."""
    problems = []
    for address, server in client._core.topology.servers().items():
        stats = server.pool.stats()
        if stats.in_use or stats.pending or stats.waiters or stats.establishing or stats.total != stats.available:
            problems.append((address, stats.as_dict()))
        if server.operation_count:
            problems.append((address, "operation_count", server.operation_count))
    return problems
