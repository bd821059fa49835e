"""A failed operation leaves no reference cycle behind.

An exception's traceback holds every frame it passed through, and each frame keeps its locals. A frame
that still holds the error, or something holding it (a retry state, a pool's wait-queue entry, a list
of reported errors), makes a cycle that only the cyclic collector frees. When every operation fails
(a server gone slow, so that each one times out), each failed attempt then keeps its frames, its
connection, that connection's read buffer and its session alive until a full collection. In the soak
that cost 10 MiB at 500 greenlets. And a monitor that kept each failed check's previous
description grew a chain as long as the outage.

Each case runs one failing path with the collector off, then collects: nothing of greenmongo's may be
found unreachable (its objects, and frames of its code).
"""

from __future__ import annotations

import gc
import os
from types import FrameType
from typing import Any, Callable, Optional

import gevent
import pytest

import greenmongo
from greenmongo import MongoClient
from greenmongo.errors import ConnectionFailure, PyMongoError
from tests.api_support import gc_instances
from tests.servers.scripted import Close, Reply, ScriptedServer, replica_set_member
from tests.waits import wait_until

PACKAGE = os.path.dirname(greenmongo.__file__) + os.sep
FIND_REPLY = {"ok": 1, "cursor": {"id": 0, "ns": "db.coll", "firstBatch": []}}


def _ours(obj: Any) -> bool:
    kind = type(obj)  # not isinstance(): gc.garbage may hold weak proxies whose referent is gone
    if kind is FrameType:
        return obj.f_code.co_filename.startswith(PACKAGE)
    module = kind.__dict__.get("__module__")  # a str for classes; some builtins' is a descriptor
    return isinstance(module, str) and module.startswith("greenmongo")


def _describe(obj: Any) -> str:
    if type(obj) is FrameType:
        return f"frame {obj.f_code.co_name} ({os.path.basename(obj.f_code.co_filename)})"
    return type(obj).__qualname__


def _attempt(action: Callable[[], Any]) -> Optional[str]:
    """``action()``; its error's type name, None if it returned."""
    try:
        action()
    except PyMongoError as exc:
        return type(exc).__name__
    return None


def unreachable_after(action: Callable[[], Any]) -> tuple[Optional[str], list[str]]:
    """Run ``action`` once to warm its path (a first use creates classes and caches), then again with the cyclic
    collector off; the second run's error type name (None if it returned) and what of greenmongo's the collector
    then found unreachable (it would have been kept until a collection)."""
    _attempt(action)
    gc.collect()
    # Held for the window: what earlier tests left (a client whose last reference a finishing greenlet drops
    # meanwhile) cannot become garbage in it, so only what this run made is judged.
    existing = [obj for obj in gc.get_objects() if _ours(obj)]
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        raised = _attempt(action)
        gc.collect()
        found = sorted({_describe(obj) for obj in gc.garbage if _ours(obj)})
    finally:
        gc.garbage.clear()
        gc.set_debug(0)
        gc.enable()
        del existing
    return raised, found


@pytest.fixture
def server():
    with ScriptedServer() as scripted:
        host, port = scripted.address
        me = f"{host}:{port}"
        scripted.hello_reply = replica_set_member("rs", [me], me, primary=me)
        yield scripted


def client_for(server: ScriptedServer, **options: Any) -> MongoClient:
    host, port = server.address
    client = MongoClient(host, port, directConnection=True, serverMonitoringMode="poll", **options)
    client.admin.command("ping")
    return client


def _slow(document: dict) -> Callable[[Any], Reply]:
    return lambda request: Reply(document, delay=2.0)


def _hold_the_connection_then(client: MongoClient, action: Callable[[], Any]) -> Callable[[], Any]:
    """``action`` while another greenlet's slow find holds the pool's only connection."""
    def run() -> Any:
        holder = gevent.spawn(client.db.coll.find_one, {})
        (server,) = client._core.topology.servers().values()
        pool = server.pool
        wait_until(lambda: pool.stats().in_use == 1, message="the slow find holding the connection")
        try:
            return action()
        finally:
            holder.kill()
    return run


def _find(client: MongoClient) -> Any:
    return client.db.coll.find_one({})


def _insert(client: MongoClient) -> Any:
    return client.db.coll.insert_one({})


# (command answered, its answer, client options, what the client runs, the error it must raise)
ONE_COMMAND_FAILURES = {
    "a socket timeout on a retried read": ("find", _slow(FIND_REPLY), {"socketTimeoutMS": 100}, _find,
                                           "NetworkTimeout"),
    "a socket timeout on a retried write": ("insert", _slow({"ok": 1, "n": 1}), {"socketTimeoutMS": 100}, _insert,
                                            "NetworkTimeout"),
    "a timeoutMS deadline cutting a reply": ("find", _slow(FIND_REPLY), {"timeoutMS": 150}, _find, "NetworkTimeout"),
    "a connection the server closes": ("find", lambda request: Close(), {}, _find, "AutoReconnect"),
    "a command error": ("find", lambda request: {"ok": 0, "code": 2, "errmsg": "bad value"}, {}, _find,
                        "OperationFailure"),
}


@pytest.mark.parametrize("case", list(ONE_COMMAND_FAILURES))
def test_one_failing_command(server, case: str) -> None:
    command, answer, options, run, expected = ONE_COMMAND_FAILURES[case]
    server.on(command, answer)
    with client_for(server, **options) as client:
        raised, found = unreachable_after(lambda: run(client))
    assert raised == expected
    assert found == [], found


def test_a_connection_that_cannot_be_established(server) -> None:
    """The monitor's connection (the first) is answered; every application connection is closed at its
    handshake: the pool's establishment fails, SDAM hears of it, the checkout raises."""
    def hello(request: Any) -> Any:
        return server.hello_reply if request.connection_number == 1 else Close()

    with client_for(server, serverSelectionTimeoutMS=300) as client:
        for name in ("hello", "ismaster", "isMaster"):
            server.on(name, hello)
        server.close_connections()
        raised, found = unreachable_after(lambda: client.db.coll.insert_one({}))
    assert raised in ("AutoReconnect", "ServerSelectionTimeoutError")
    assert found == [], found


def test_a_wait_queue_timeout(server) -> None:
    server.on("find", _slow(FIND_REPLY))
    with client_for(server, maxPoolSize=1, waitQueueTimeoutMS=50) as client:
        wait_for_connection = _hold_the_connection_then(client, lambda: client.db.coll.count_documents({}))
        raised, found = unreachable_after(wait_for_connection)
    assert raised == "WaitQueueTimeoutError"
    assert found == [], found


def test_a_waiter_failed_by_a_cleared_pool(server) -> None:
    """The slow find's connection is closed by the server: the pool is cleared and its waiter failed with
    PoolClearedError (then retried)."""
    server.on("find", lambda request: Close(delay=0.2))
    with client_for(server, maxPoolSize=1) as client:
        waiter = _hold_the_connection_then(client, lambda: client.db.coll.count_documents({}))
        _raised, found = unreachable_after(waiter)
    assert found == [], found


def test_a_server_selection_timeout() -> None:
    """Nothing listens: the monitor's connection attempts are refused while the operation waits."""
    with MongoClient("127.0.0.1", 1, serverSelectionTimeoutMS=100) as client:
        raised, found = unreachable_after(lambda: client.db.coll.find_one({}))
    assert raised == "ServerSelectionTimeoutError"
    assert found == [], found


def test_failed_checks_keep_no_chain_of_errors() -> None:
    """A monitor that cannot connect keeps its latest failure only: the connection errors alive stay as
    many from the third failed check to the seventh."""
    with MongoClient("127.0.0.1", 1, directConnection=True, heartbeatFrequencyMS=500) as client:
        (server,) = client._core.topology.servers().values()

        def alive_after(checks: int) -> int:
            wait_until(lambda: server.monitor.checks >= checks, 10, f"{checks} failed checks")
            gc.collect()
            return len(gc_instances(ConnectionFailure))

        after_three = alive_after(3)
        after_seven = alive_after(7)
    assert after_seven <= after_three, (after_three, after_seven)
