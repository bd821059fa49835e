"""Client Side Operations Timeout: ``greenmongo.timeout()`` and ``resolve`` (unit), then what a timeoutMS
does to real operations against SecantusDB (integration).

Timing: every bound asserted is an upper bound with generous slack (``SLACK``) for a loaded 2-core
machine; nothing lower-level is timed. Fail points carry the test client's own ``appName``, so the
internal client that sets them (and other clients) are never blocked. Nothing waits by sleeping:
greenlets hand over through events and queues fed by command listeners.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import re
import time
from typing import Any, Iterator

import gevent
import pytest
from gevent.event import Event
from gevent.queue import Queue

import greenmongo
from greenmongo import MongoClient
from greenmongo.engine.deadline import LEGACY, current_scope, resolve
from greenmongo.errors import (
    ExecutionTimeout,
    GreenMongoError,
    InvalidOperation,
    NetworkTimeout,
    OperationFailure,
    ServerSelectionTimeoutError,
    WaitQueueTimeoutError,
)
from greenmongo.monitoring import CommandListener
from greenmongo.monitoring.pool import (
    ConnectionCheckedOutEvent,
    ConnectionCheckOutFailedEvent,
    ConnectionClosedEvent,
    ConnectionCreatedEvent,
    PoolClearedEvent,
)
from greenmongo.write_concern import WriteConcern
from tests.api_support import PoolRecorder, Recorder, scratch_database
from tests.test_kill_safety_e2e import SessionCounter

#: Allowance on top of a deadline for a loaded 2-core machine (the timeout must come at the deadline,
#: not at some later, unrelated limit: the blocks used are always much longer than deadline + SLACK).
SLACK = 0.5
_apps = itertools.count()


# == unit: greenmongo.timeout() =====================================================================

@pytest.mark.parametrize("seconds", ["1", b"1", [1], True, False, object()])
def test_timeout_refuses_what_is_not_a_number(seconds: Any) -> None:
    with pytest.raises(TypeError):
        greenmongo.timeout(seconds)


@pytest.mark.parametrize("seconds", [-1, -0.001, float("-inf")])
def test_timeout_refuses_negative_seconds(seconds: float) -> None:
    with pytest.raises(ValueError):
        greenmongo.timeout(seconds)


def test_timeout_blocks_nest_and_an_inner_block_only_shortens() -> None:
    assert current_scope() is None
    with greenmongo.timeout(10):
        outer = current_scope()
        assert outer is not None and outer.deadline.timeout == 10.0
        assert 9.0 < outer.deadline.remaining() <= 10.0
        with greenmongo.timeout(1000):  # longer: keeps the outer end
            inner = current_scope()
            assert inner is not outer and inner.deadline.expires == outer.deadline.expires
        with greenmongo.timeout(0):  # "no limit" cannot lift an enclosing limit either
            assert current_scope().deadline.expires == outer.deadline.expires
        with greenmongo.timeout(0.5):  # shorter: wins
            inner = current_scope()
            assert inner.deadline.expires < outer.deadline.expires and inner.deadline.timeout == 0.5
            assert resolve(3.0).expires == inner.deadline.expires  # the block beats any entity timeout
        assert current_scope() is outer
    assert current_scope() is None
    with greenmongo.timeout(0):
        unlimited = current_scope().deadline
        assert unlimited.csot and not unlimited.finite and unlimited.remaining() is None


def test_timeout_none_changes_nothing() -> None:
    with greenmongo.timeout(None):
        assert current_scope() is None
        assert resolve(None) is LEGACY
        assert resolve(2.0).timeout == 2.0
    with greenmongo.timeout(5):
        outer = current_scope()
        with greenmongo.timeout(None):
            assert current_scope() is outer  # None does not unset an enclosing block
        assert current_scope() is outer


def test_timeout_is_greenlet_local() -> None:
    seen: dict = {}

    def child() -> None:
        seen["scope"] = current_scope()
        seen["legacy"] = resolve(None)
        seen["entity"] = resolve(4.0)
        with greenmongo.timeout(0.25):  # the child's own block does not leak to its parent
            seen["own"] = current_scope().deadline.timeout

    with greenmongo.timeout(1):
        parent = current_scope()
        gevent.spawn(child).get(timeout=5)
        assert current_scope() is parent
    assert seen["scope"] is None
    assert seen["legacy"] is LEGACY
    assert seen["entity"].timeout == 4.0 and seen["entity"].expires != parent.deadline.expires
    assert seen["own"] == 0.25


def test_a_gevent_timeout_inside_a_block_still_resets_the_scope() -> None:
    never = Event()
    with greenmongo.timeout(30):
        outer = current_scope()
        with pytest.raises(gevent.Timeout):
            with gevent.Timeout(0.02):
                with greenmongo.timeout(5):
                    assert current_scope() is not outer
                    never.wait()  # the gevent.Timeout lands here, inside the block
        assert current_scope() is outer
        with pytest.raises(gevent.Timeout):
            with gevent.Timeout(0.02):
                with greenmongo.timeout(5), greenmongo.timeout(1):  # two levels unwound at once
                    never.wait()
        assert current_scope() is outer
    assert current_scope() is None


# == unit: which timeout applies ===================================================================

def test_resolve_precedence_block_collection_database_client() -> None:
    client = MongoClient("mongodb://127.0.0.1:9/", timeoutMS=4000, connect=False)
    try:
        database = client.get_database("db", timeout_ms=3000)
        collection = database.get_collection("c", timeout_ms=2000)
        assert (database.timeout_ms, collection.timeout_ms, client.db.timeout_ms) == (3000, 2000, 4000)
        assert resolve(client.get_database("plain")._timeout).timeout == 4.0  # the client's
        assert resolve(database.get_collection("plain")._timeout).timeout == 3.0  # the database's
        assert resolve(database["sub"]._timeout).timeout == 3.0  # attribute/item access inherits too
        assert resolve(collection._timeout).timeout == 2.0
        assert resolve(collection.with_options(timeout_ms=1000)._timeout).timeout == 1.0
        assert resolve(collection.with_options()._timeout).timeout == 2.0  # with_options keeps it
        assert database.with_options(timeout_ms=500).timeout_ms == 500
        with greenmongo.timeout(0.25):
            assert resolve(collection._timeout).timeout == 0.25  # the block beats every level
        # timeoutMS=0: CSOT on (deprecated options ignored, retries until done) with no limit
        unlimited = resolve(collection.with_options(timeout_ms=0)._timeout)
        assert unlimited.csot and not unlimited.finite and unlimited.max_time_ms(0.0) is None
        assert resolve(database.get_collection("c", timeout_ms=0)._timeout).remaining() is None
    finally:
        client.close()
    legacy = MongoClient("mongodb://127.0.0.1:9/", connect=False)
    try:
        assert resolve(legacy.db.c._timeout) is LEGACY and not LEGACY.csot
        assert resolve(legacy.get_database("db", timeout_ms=0).c._timeout).csot  # set below the client
    finally:
        legacy.close()


def test_with_transaction_refuses_an_operation_timeout_inside_its_callback(server_uri) -> None:
    recorder = Recorder()
    client = MongoClient(server_uri, timeoutMS=5000, event_listeners=[recorder])
    try:
        collection = client.csot_unit.c
        other = client.csot_unit.other
        seen: dict = {}

        def callback(session: Any) -> None:
            seen["session"] = resolve(None, session._state)
            seen["no session"] = resolve(None)  # an operation without the session keeps its own timeout
            with greenmongo.timeout(1):
                seen["other block"] = resolve(other._timeout)  # allowed: not this session's operation
                collection.insert_one({"_id": 1}, session=session)  # refused: overrides the transaction's

        with client.start_session() as session:
            with pytest.raises(InvalidOperation, match="with_transaction"):
                session.with_transaction(callback)
            assert not session.in_transaction
        assert seen["session"].timeout == 5.0
        assert seen["no session"] is LEGACY
        assert seen["other block"].timeout == 1.0
        assert recorder.names() == []  # refused before anything was sent; nothing to abort
    finally:
        client.close()


def test_the_selection_timeout_error_names_the_limit_that_ended_the_wait() -> None:
    """A server selection cut short by timeoutMS reports what it waited (about 0.3 s), not the 30 s of
    serverSelectionTimeoutMS that did not act; without a timeoutMS, serverSelectionTimeoutMS."""
    client = MongoClient("mongodb://invalid/?serverSelectionTimeoutMS=30000&timeoutMS=300")
    try:
        with Timed() as timed, pytest.raises(ServerSelectionTimeoutError) as info:
            client.admin.command("ping")
    finally:
        client.close()
    assert info.value.timeout and timed.elapsed < 0.3 + SLACK
    waited = float(re.search(r"Timeout: ([0-9.e-]+)s", str(info.value)).group(1))
    assert 0.2 < waited <= 0.3, str(info.value)
    legacy = MongoClient("mongodb://invalid/?serverSelectionTimeoutMS=200")
    try:
        with pytest.raises(ServerSelectionTimeoutError, match=r"Timeout: 0\.2s"):
            legacy.admin.command("ping")
    finally:
        legacy.close()


# == integration ======================================================================================

class Probe:
    """A client with its own appName whose command and pool events are recorded."""

    def __init__(self, uri: str, listeners: tuple, **options: Any) -> None:
        self.app = f"csot-{next(_apps)}"
        self.commands = Recorder()
        self.pool = PoolRecorder()
        self.client = MongoClient(uri, appname=self.app, event_listeners=[self.commands, self.pool, *listeners],
                                  **options)

    def started(self, name: str) -> list:
        return [event.command for event in self.commands.started_events if event.command_name == name]

    def clear(self) -> None:
        self.commands.clear()
        self.pool.events.clear()


@pytest.fixture
def db(internal: MongoClient) -> Iterator[Any]:
    with scratch_database(internal, "csot_") as database:
        database.create_collection("coll")
        yield database


@pytest.fixture
def probe(server_uri: str) -> Iterator[Any]:
    made: list = []

    def make(*listeners: Any, **options: Any) -> Probe:
        probe = Probe(server_uri, listeners, **options)
        made.append(probe)
        return probe

    yield make
    for probe in made:
        probe.client.close()


@contextlib.contextmanager
def fail_point(internal: MongoClient, mode: Any, **data: Any) -> Iterator[None]:
    internal.admin.command("configureFailPoint", "failCommand", mode=mode, data=data)
    try:
        yield
    finally:
        internal.admin.command("configureFailPoint", "failCommand", mode="off")


class Timed:
    def __enter__(self) -> "Timed":
        self.started = time.monotonic()
        self.elapsed = None
        return self

    def __exit__(self, *exc: Any) -> None:
        self.elapsed = time.monotonic() - self.started


class StartedQueue(CommandListener):
    """Puts the name of every command started into a queue: another greenlet waits on it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.queue: Queue = Queue()

    def started(self, event: Any) -> None:
        if event.command_name == self.name:
            self.queue.put(event)

    def succeeded(self, event: Any) -> None:
        pass

    def failed(self, event: Any) -> None:
        pass


@pytest.mark.server
def test_a_blocked_command_times_out_at_the_deadline_and_its_connection_is_closed(internal, db, probe) -> None:
    p = probe(timeoutMS=300)
    coll = p.client[db.name].coll
    coll.insert_one({"_id": 1})  # a pooled connection exists
    p.clear()
    with fail_point(internal, {"times": 1}, failCommands=["find"], blockConnection=True, blockTimeMS=3000,
                    appName=p.app):
        with Timed() as timed, pytest.raises(GreenMongoError) as info:
            coll.find_one({"_id": 1})
    assert info.value.timeout is True, repr(info.value)
    assert isinstance(info.value, NetworkTimeout)  # the read ran out: a network timeout
    assert timed.elapsed < 0.3 + SLACK, timed.elapsed
    [find] = p.started("find")
    assert 0 < find["maxTimeMS"] <= 300
    assert [event.command_name for event in p.commands.failed_events] == ["find"]
    [used] = [event.connection_id for event in p.pool.of(ConnectionCheckedOutEvent)]
    closed = [event for event in p.pool.of(ConnectionClosedEvent) if event.connection_id == used]
    assert [event.reason for event in closed] == ["error"]  # a half-read reply: the connection is gone
    assert not p.pool.of(PoolClearedEvent)  # a timeout is not a server failure
    p.clear()
    assert coll.find_one({"_id": 1}) == {"_id": 1}  # the next operation works, on a new connection
    assert [event.connection_id for event in p.pool.of(ConnectionCheckedOutEvent)] != [used]
    assert len(p.pool.of(ConnectionCreatedEvent)) == 1


@pytest.mark.server
def test_max_time_ms_is_what_is_left_and_absent_without_a_limit(internal, db, probe) -> None:
    limited = probe(timeoutMS=1000)
    coll = limited.client[db.name].coll
    coll.insert_one({"_id": 1})
    coll.find_one({})
    limited.client[db.name].command("ping")
    coll.find({}, max_time_ms=60000).to_list()  # deprecated maxTimeMS: replaced by the CSOT value
    with greenmongo.timeout(0.25):
        coll.find_one({})
    coll.with_options(timeout_ms=500).count_documents({})
    sent = {name: [command.get("maxTimeMS") for command in limited.started(name)]
            for name in ("insert", "find", "ping", "aggregate")}
    assert all(isinstance(value, int) and 0 < value <= 1000 for values in sent.values() for value in values), sent
    assert len(sent["find"]) == 3 and sent["find"][2] <= 250, sent
    assert sent["aggregate"][0] <= 500, sent

    unlimited = probe(timeoutMS=0)
    coll = unlimited.client[db.name].coll
    coll.insert_one({"_id": 2})
    coll.find_one({})
    coll.find({}, max_time_ms=60000).to_list()  # CSOT on (timeoutMS=0): the deprecated option is ignored
    unlimited.client[db.name].command("ping")
    for name in ("insert", "find", "ping"):
        assert unlimited.started(name) and all("maxTimeMS" not in c for c in unlimited.started(name)), name

    legacy = probe()
    legacy.client[db.name].coll.find({}, max_time_ms=12345).to_list()
    legacy.client[db.name].coll.find_one({})
    assert [c.get("maxTimeMS") for c in legacy.started("find")] == [12345, None]


@pytest.mark.server
def test_wtimeout_is_dropped_under_a_timeout_and_kept_without(internal, db, probe) -> None:
    limited = probe(timeoutMS=2000, w=1, wTimeoutMS=5000)
    coll = limited.client[db.name].coll
    coll.insert_one({"_id": 1})
    coll.with_options(write_concern=WriteConcern(wtimeout=7000)).insert_one({"_id": 2})
    coll.with_options(timeout_ms=0).update_one({"_id": 1}, {"$set": {"a": 1}})
    first, second = limited.started("insert")
    assert first["writeConcern"] == {"w": 1}  # wtimeout dropped, w kept
    assert "writeConcern" not in second  # nothing left of it: not sent at all
    [update] = limited.started("update")
    assert update["writeConcern"] == {"w": 1}  # timeoutMS=0 is CSOT too

    legacy = probe(w=1, wTimeoutMS=5000)
    legacy.client[db.name].coll.insert_one({"_id": 3})
    [insert] = legacy.started("insert")
    assert insert["writeConcern"] == {"w": 1, "wtimeout": 5000}
    assert internal[db.name].coll.count_documents({}) == 3


@pytest.mark.server
def test_socket_timeout_is_ignored_under_a_timeout(internal, db, probe) -> None:
    internal[db.name].coll.insert_one({"_id": 1})
    limited = probe(timeoutMS=5000, socketTimeoutMS=100)
    unlimited = probe(timeoutMS=0, socketTimeoutMS=100)
    legacy = probe(socketTimeoutMS=100)
    block = {"failCommands": ["find"], "blockConnection": True, "blockTimeMS": 400}
    with fail_point(internal, "alwaysOn", appName=limited.app, **block):
        assert limited.client[db.name].coll.find_one({}) == {"_id": 1}
    with fail_point(internal, "alwaysOn", appName=unlimited.app, **block):
        assert unlimited.client[db.name].coll.find_one({}) == {"_id": 1}
    with fail_point(internal, "alwaysOn", appName=legacy.app, **block):
        with pytest.raises(NetworkTimeout) as info:
            legacy.client[db.name].coll.find_one({})
    assert info.value.timeout and "socket timeout" in str(info.value)
    assert len(legacy.started("find")) == 2  # the first try and its one retry, each cut by socketTimeoutMS
    assert len(limited.started("find")) == len(unlimited.started("find")) == 1


@pytest.mark.server
def test_retries_go_on_until_the_deadline_and_then_the_error_is_a_timeout(internal, db, probe) -> None:
    retryable = {"failCommands": ["insert"], "errorCode": 7, "errorLabels": ["RetryableWriteError"]}
    limited = probe(timeoutMS=5000)
    with fail_point(internal, {"times": 2}, appName=limited.app, **retryable):
        limited.client[db.name].coll.insert_one({"_id": 1})
    inserts = limited.started("insert")
    assert len(inserts) == 3  # two failures, then success: more than the one retry of the legacy rules
    assert len({command["txnNumber"] for command in inserts}) == 1  # the same write each time
    assert [event.command_name for event in limited.commands.failed_events] == ["insert", "insert"]

    legacy = probe()
    with fail_point(internal, {"times": 2}, appName=legacy.app, **retryable):
        with pytest.raises(OperationFailure) as info:
            legacy.client[db.name].coll.insert_one({"_id": 2})
    assert info.value.code == 7 and len(legacy.started("insert")) == 2

    short = probe(timeoutMS=400)
    with fail_point(internal, "alwaysOn", appName=short.app, blockConnection=True, blockTimeMS=60, **retryable):
        with Timed() as timed, pytest.raises(GreenMongoError) as info:
            short.client[db.name].coll.insert_one({"_id": 3})
    assert info.value.timeout is True, repr(info.value)
    assert isinstance(info.value, (ExecutionTimeout, NetworkTimeout)), repr(info.value)
    assert len(short.started("insert")) >= 3  # retried again and again while time was left
    assert timed.elapsed < 0.4 + SLACK, timed.elapsed
    assert internal[db.name].coll.find_one({"_id": 3}) is None
    assert internal[db.name].coll.find_one({"_id": 1}) == {"_id": 1}


@pytest.mark.server
def test_retries_under_a_timeout_let_other_greenlets_run(internal, db, probe) -> None:
    """Under a timeoutMS retries go on until the deadline; an attempt that fails without any I/O (a
    paused pool: PoolClearedError at once) must still let the hub run other greenlets between attempts.
    Here another greenlet makes the pool ready 50 ms later and the insert then succeeds; a retry loop
    that never yields would spin until the deadline (with timeoutMS=0, for ever) with the hub blocked."""
    p = probe(timeoutMS=3000)
    coll = p.client[db.name].coll
    coll.insert_one({"_id": 0})
    [server] = p.client._core.topology.servers().values()
    server.pool.clear()  # paused while the server stays selectable (nothing marked it Unknown)
    readied = []

    def make_ready() -> None:
        gevent.sleep(0.05)  # the pause this test is about, not a synchronisation
        readied.append(time.monotonic())
        server.pool.ready()

    helper = gevent.spawn(make_ready)
    with Timed() as timed:
        coll.insert_one({"_id": 1})
    helper.join(5)
    assert readied and readied[0] < timed.started + timed.elapsed  # the helper ran while the insert retried
    assert timed.elapsed < 0.05 + SLACK, timed.elapsed
    assert internal[db.name].coll.count_documents({}) == 2


@pytest.mark.server
def test_a_wait_queue_timeout_under_timeout_ms_does_not_clear_the_pool(internal, db, probe) -> None:
    pings = StartedQueue("ping")
    p = probe(pings, maxPoolSize=1, waitQueueTimeoutMS=60000)
    p.client.admin.command("ping")
    pings.queue.get(timeout=5)
    p.clear()
    with fail_point(internal, "alwaysOn", failCommands=["ping"], blockConnection=True, blockTimeMS=1500,
                    appName=p.app):
        holder = gevent.spawn(p.client.admin.command, "ping")
        pings.queue.get(timeout=10)  # the holder's ping is on the wire: the only connection is in use
        with Timed() as timed, pytest.raises(WaitQueueTimeoutError) as info:
            with greenmongo.timeout(0.2):  # waitQueueTimeoutMS (60 s) is ignored under a timeoutMS
                p.client.admin.command("ping")
        assert not holder.ready()  # it did not wait for the connection to come back
        assert holder.get(timeout=10)["ok"] == 1
    assert info.value.timeout is True
    assert timed.elapsed < 0.2 + SLACK, timed.elapsed
    [failed] = p.pool.of(ConnectionCheckOutFailedEvent)
    assert failed.reason == "timeout"
    assert not p.pool.of(PoolClearedEvent) and not p.pool.of(ConnectionClosedEvent)
    assert len(p.started("ping")) == 1  # the waiter never sent anything

    # The other way round: a short waitQueueTimeoutMS does not cut a checkout that timeoutMS allows.
    patient = probe(pings, maxPoolSize=1, waitQueueTimeoutMS=50, timeoutMS=10000)
    patient.client.admin.command("ping")
    pings.queue.get(timeout=5)
    with fail_point(internal, {"times": 1}, failCommands=["ping"], blockConnection=True, blockTimeMS=400,
                    appName=patient.app):
        holder = gevent.spawn(patient.client.admin.command, "ping")
        pings.queue.get(timeout=10)
        assert patient.client.admin.command("ping")["ok"] == 1  # waited past 50 ms for the connection
        assert holder.get(timeout=10)["ok"] == 1
    assert len(patient.pool.of(ConnectionCreatedEvent)) == 1


@pytest.mark.server
def test_cursor_lifetime_and_iteration_modes(internal, db, probe) -> None:
    internal[db.name].coll.insert_many([{"_id": i} for i in range(3)])
    p = probe(timeoutMS=1000)
    coll = p.client[db.name].coll
    with fail_point(internal, "alwaysOn", failCommands=["getMore"], blockConnection=True, blockTimeMS=600,
                    appName=p.app):
        lifetime = coll.find({}, batch_size=1, sort=[("_id", 1)])
        assert next(lifetime) == {"_id": 0}  # from the find's first batch
        started = time.monotonic()
        assert next(lifetime) == {"_id": 1}  # getMore: 600 ms of the cursor's 1000
        with pytest.raises(GreenMongoError) as info:
            next(lifetime)  # getMore: 600 ms more would outlive the cursor
        ended = time.monotonic() - started
        lifetime.close()
        [find] = p.started("find")
        assert 0 < find["maxTimeMS"] <= 1000  # the lifetime deadline bounds the find too
        assert info.value.timeout is True, repr(info.value)
        assert ended < 1.0 + SLACK, ended
        p.clear()

        iteration = coll.find({}, batch_size=1, sort=[("_id", 1)], timeout_mode=greenmongo.TimeoutMode.ITERATION)
        assert [doc["_id"] for doc in iteration] == [0, 1, 2]  # each next() has its own 1000 ms
        [find] = p.started("find")
        assert "maxTimeMS" not in find  # iteration mode sends none
        assert len(p.started("getMore")) >= 2
    assert all("maxTimeMS" not in command for command in p.started("getMore"))


@pytest.mark.server
def test_close_after_a_timed_out_get_more_kills_the_server_cursor(internal, db, probe) -> None:
    internal[db.name].coll.insert_many([{"_id": i} for i in range(3)])
    p = probe(timeoutMS=300)
    coll = p.client[db.name].coll
    cursor = coll.find({}, batch_size=1)
    next(cursor)
    cursor_id = cursor.cursor_id
    assert cursor_id
    with fail_point(internal, {"times": 1}, failCommands=["getMore"], blockConnection=True, blockTimeMS=2000,
                    appName=p.app):
        with pytest.raises(GreenMongoError) as info:
            next(cursor)
    assert info.value.timeout is True, repr(info.value)
    assert not p.started("killCursors")  # a timeout leaves the cursor to close()
    cursor.close()
    [kill] = p.started("killCursors")
    assert kill["cursors"] == [cursor_id]
    assert 0 < kill["maxTimeMS"] <= 300  # timeoutMS afresh for the kill
    [killed] = [event.reply for event in p.commands.succeeded_events if event.command_name == "killCursors"]
    assert list(killed["cursorsKilled"]) == [cursor_id]
    with pytest.raises(OperationFailure) as gone:
        internal[db.name].command("getMore", cursor_id, collection="coll")
    assert gone.value.code == 43  # CursorNotFound: the server cursor is gone


@pytest.mark.server
@pytest.mark.parametrize("code, options", [(2, {}), (50, {"timeoutMS": 5000})], ids=["error", "MaxTimeMSExpired"])
def test_a_failed_get_more_gives_the_implicit_session_back(internal, db, probe, code, options) -> None:
    """A getMore that fails with a server error (under a timeoutMS: MaxTimeMSExpired, a timeout error)
    ends the cursor; its implicit session must go back to the pool even though the application drops the
    cursor without close() (``list(find())``), as it does after a successful iteration."""
    internal[db.name].coll.insert_many([{"_id": i} for i in range(3)])
    p = probe(**options)
    sessions = SessionCounter(p.client)
    with fail_point(internal, {"times": 1}, failCommands=["getMore"], errorCode=code, appName=p.app):

        def iterate() -> None:
            with pytest.raises(OperationFailure) as info:
                list(p.client[db.name].coll.find({}, batch_size=1))
            assert info.value.code == code and info.value.timeout is (code == 50)

        iterate()
    gc.collect()
    assert sessions.taken == 1 and sessions.outstanding == 0, (sessions.taken, sessions.returned)
    assert [event.command_name for event in p.commands.failed_events] == ["getMore"]


@pytest.mark.server
def test_a_get_more_timeout_error_ends_next_within_its_deadline(internal, db, probe) -> None:
    """The server answers a getMore with MaxTimeMSExpired after 900 ms of the cursor's 1000: ``next()`` must
    raise then, not start a killCursors with a fresh timeoutMS inside the same call (here blocked 900 ms
    more: the call would take 1.8 s). The cursor is left to close(), which kills it with the timeout
    afresh, as after a network timeout."""
    internal[db.name].coll.insert_many([{"_id": i} for i in range(3)])
    p = probe(timeoutMS=1000)
    coll = p.client[db.name].coll
    cursor = coll.find({}, batch_size=1)
    next(cursor)
    cursor_id = cursor.cursor_id
    with fail_point(internal, {"times": 2}, failCommands=["getMore", "killCursors"], errorCode=50,
                    blockConnection=True, blockTimeMS=900, appName=p.app):
        with Timed() as timed, pytest.raises(ExecutionTimeout) as info:
            next(cursor)
        assert info.value.timeout is True
        assert timed.elapsed < 1.0 + SLACK, timed.elapsed
        assert not p.started("killCursors")
        with Timed() as closing:
            cursor.close()
        assert closing.elapsed < 1.0 + SLACK, closing.elapsed
    [kill] = p.started("killCursors")
    assert kill["cursors"] == [cursor_id] and 0 < kill["maxTimeMS"] <= 1000


@pytest.mark.server
def test_queued_kills_do_not_hold_an_operation_past_its_timeout(internal, db, probe) -> None:
    """A dropped cursor's killCursors waits in the client's queue and goes out before the client's next
    operation. With the only connection busy, that operation (timeoutMS 200 ms) must not wait for the
    connection on the kill's behalf past its own deadline; the kill stays queued and goes out later."""
    internal[db.name].coll.insert_many([{"_id": i} for i in range(3)])
    pings = StartedQueue("ping")
    p = probe(pings, maxPoolSize=1)
    coll = p.client[db.name].coll
    cursor = coll.find({}, batch_size=1)
    next(cursor)
    cursor_id = cursor.cursor_id
    with fail_point(internal, {"times": 1}, failCommands=["ping"], blockConnection=True, blockTimeMS=2000,
                    appName=p.app):
        holder = gevent.spawn(p.client.admin.command, "ping")
        pings.queue.get(timeout=10)  # the only connection is busy for 2 s
        del cursor
        gc.collect()
        assert p.client._core.pending_kills == 1  # queued by the dropped cursor, no I/O
        with Timed() as timed, pytest.raises(GreenMongoError) as info:
            with greenmongo.timeout(0.2):
                coll.find_one({})
        assert not holder.ready()
        assert info.value.timeout is True, repr(info.value)
        assert timed.elapsed < 0.2 + SLACK, timed.elapsed
        assert p.client._core.pending_kills == 1  # not lost: still queued
        assert holder.get(timeout=10)["ok"] == 1
    assert coll.find_one({"_id": 0}) == {"_id": 0}  # the next operation sends it first
    assert p.client._core.pending_kills == 0
    [kill] = p.started("killCursors")
    assert kill["cursors"] == [cursor_id]


@pytest.mark.server
def test_a_change_stream_timeout_leaves_the_stream_usable(internal, db, probe) -> None:
    p = probe(timeoutMS=600)
    coll = p.client[db.name].coll
    with coll.watch(max_await_time_ms=100) as stream:
        with Timed() as timed, pytest.raises(GreenMongoError) as info:
            stream.next()  # no change: getMores until the call's 600 ms are spent
        assert info.value.timeout is True, repr(info.value)
        assert timed.elapsed < 0.6 + SLACK, timed.elapsed
        assert stream.alive
        get_mores = p.started("getMore")
        assert len(get_mores) >= 2  # one deadline for the whole call, not one per getMore
        assert all(0 < command["maxTimeMS"] <= 100 for command in get_mores)
        assert len(p.started("aggregate")) == 1
        internal[db.name].coll.insert_one({"_id": "after"})
        change = stream.next()  # resumes (a new aggregate), then finds the change
        assert change["operationType"] == "insert" and change["documentKey"] == {"_id": "after"}
        assert len(p.started("aggregate")) == 2


@pytest.mark.server
def test_with_transaction_is_bounded_by_one_deadline(internal, db, probe) -> None:
    """Each attempt's insert fails at once with a transient error (code 24); the callback then spends
    0.3 s of its own (application work, simulated by a wait that nothing ends early), so the 0.45 s
    deadline falls during the second attempt's wait, between attempts: the error must be a timeout
    caused by the last transient error, never that error itself, and the abort after each failed
    callback must still be sent (its timeout is refreshed)."""
    p = probe()
    coll = p.client[db.name].coll
    attempts = []
    application_work = Event()

    def callback(session: Any) -> None:
        attempts.append(time.monotonic())
        try:
            coll.insert_one({"x": 1}, session=session)
        finally:
            application_work.wait(timeout=0.3)

    transient = {"failCommands": ["insert"], "errorCode": 24, "errorLabels": ["TransientTransactionError"]}
    with fail_point(internal, "alwaysOn", appName=p.app, **transient):
        with p.client.start_session() as session:
            with Timed() as timed, pytest.raises(GreenMongoError) as info:
                with greenmongo.timeout(0.45):
                    session.with_transaction(callback)
            assert not session.in_transaction
    assert timed.elapsed < 0.45 + 0.3 + SLACK, timed.elapsed
    assert len(attempts) == 2, attempts  # retried once within the deadline, not again after it
    error = info.value
    assert isinstance(error, ExecutionTimeout) and error.timeout is True, repr(error)
    cause = error.__cause__
    assert isinstance(cause, OperationFailure) and cause.code == 24, repr(cause)  # the last transient error
    assert cause.has_error_label("TransientTransactionError")
    assert str(cause) in str(error)
    inserts, aborts = p.started("insert"), p.started("abortTransaction")
    assert len(inserts) == 2 and len(aborts) == 2  # each failed attempt aborted its transaction
    assert all(0 < command["maxTimeMS"] <= 450 for command in inserts + aborts)
    assert internal[db.name].coll.count_documents({}) == 0


@pytest.mark.server
def test_commit_and_abort_are_bounded_by_the_session_default_timeout(internal, db, probe) -> None:
    p = probe()  # no client timeoutMS: the session's default_timeout_ms is what bounds commit and abort
    coll = p.client[db.name].coll
    with p.client.start_session(default_timeout_ms=300) as session:
        session.start_transaction()
        coll.insert_one({"_id": 1}, session=session)
        with fail_point(internal, {"times": 1}, failCommands=["commitTransaction"], blockConnection=True,
                        blockTimeMS=3000, appName=p.app):
            with Timed() as timed, pytest.raises(GreenMongoError) as info:
                session.commit_transaction()
        assert info.value.timeout is True, repr(info.value)
        assert timed.elapsed < 0.3 + SLACK, timed.elapsed
        commits = p.started("commitTransaction")
        assert commits and all(0 < command["maxTimeMS"] <= 300 for command in commits)

    with p.client.start_session(default_timeout_ms=300) as session:
        session.start_transaction()
        coll.insert_one({"_id": 2}, session=session)
        with fail_point(internal, {"times": 1}, failCommands=["abortTransaction"], blockConnection=True,
                        blockTimeMS=3000, appName=p.app):
            with Timed() as timed:
                session.abort_transaction()  # abort errors are not reported; it returns in time
        assert timed.elapsed < 0.3 + SLACK, timed.elapsed
        assert not session.in_transaction
        [abort] = p.started("abortTransaction")
        assert 0 < abort["maxTimeMS"] <= 300
        assert [e.command_name for e in p.commands.failed_events if e.command_name == "abortTransaction"] == [
            "abortTransaction"]
    assert internal[db.name].coll.find_one({"_id": 2}) is None
