"""Pool behaviour beyond the spec files: forced races, interruption, background greenlet
lifetime, load-balanced generations, logging, listener isolation."""

from __future__ import annotations

import gc
import logging
import subprocess
import sys
import textwrap
from time import monotonic
from typing import Any, List

import gevent
import gevent.event
import pytest

from greenmongo.errors import InvalidOperation, PoolClearedError, WaitQueueTimeoutError
from greenmongo.monitoring.pool import (ConnectionCheckOutFailedEvent, ConnectionClosedEvent,
                                        ConnectionCreatedEvent, ConnectionPoolListener, PoolClearedEvent,
                                        PoolCreatedEvent)
from greenmongo.pool import Pool, PoolClosedError, PoolOptions
from greenmongo.logs.pool import StructuredMessage
from tests.api_support import PoolRecorder as Recorder
from tests.waits import eventually, wait_until


class Conn:
    def __init__(self, connection_id: int, service_id: Any = None) -> None:
        self.id = connection_id
        self.closed = False
        self.service_id = service_id

    def close(self) -> None:
        self.closed = True




def make_pool(factory: Any = Conn, listeners: Any = (), ready: bool = True, **options: Any) -> Pool:
    pool = Pool(("behaviour", 27017), factory, PoolOptions(**options), list(listeners))
    if ready:
        pool.ready()
    return pool


def assert_at_rest(pool: Pool, total: int) -> None:
    stats = pool.stats()
    assert (stats.in_use, stats.pending, stats.waiters, stats.establishing, stats.populators) == (0, 0, 0, 0, 0), stats
    assert stats.total == stats.available == total, stats


# -- forced races ---------------------------------------------------------------

def test_waiter_killed_after_being_handed_a_connection_passes_it_on() -> None:
    pool = make_pool(max_pool_size=1)
    conn = pool.check_out()
    got: List[Any] = []
    first = gevent.spawn(pool.check_out)
    second = gevent.spawn(lambda: got.append(pool.check_out()))
    gevent.sleep(0)
    assert pool.stats().waiters == 2
    first.kill(block=False)  # queued before the wake-up the check-in is about to queue
    pool.check_in(conn)  # hands `conn` to `first` synchronously
    gevent.joinall([first, second], timeout=1)
    assert isinstance(first.value, gevent.GreenletExit)  # killed, not served
    assert got == [conn]  # `first` died holding it and gave it to the next waiter
    pool.check_in(conn)
    assert_at_rest(pool, 1)


def test_waiter_killed_after_being_given_a_connecting_slot_releases_it() -> None:
    recorder = Recorder()
    pool = make_pool(listeners=[recorder], max_pool_size=1)
    conn = pool.check_out()
    got: List[Any] = []
    first = gevent.spawn(pool.check_out)
    second = gevent.spawn(lambda: got.append(pool.check_out()))
    gevent.sleep(0)
    first.kill(block=False)
    conn.closed = True  # perished: checking it in frees a slot, reserved for `first`
    pool.check_in(conn)
    gevent.joinall([first, second], timeout=1)
    assert isinstance(first.value, gevent.GreenletExit)  # killed, not served
    assert len(got) == 1 and got[0] is not conn and got[0].id == 2
    pool.check_in(got[0])
    assert_at_rest(pool, 1)
    failed = recorder.of(ConnectionCheckOutFailedEvent)
    assert [event.reason for event in failed] == ["connectionError"]


def test_kill_during_establishment_releases_the_slot() -> None:
    gate = gevent.event.Event()

    def factory(connection_id: int) -> Conn:
        gate.wait()
        return Conn(connection_id)

    recorder = Recorder()
    pool = make_pool(factory, [recorder], max_pool_size=1, max_connecting=1)
    stuck = gevent.spawn(pool.check_out)
    gevent.sleep(0)
    assert pool.stats().pending == 1
    stuck.kill()
    assert pool.stats().pending == 0 and pool.stats().total == 0
    closed = recorder.of(ConnectionClosedEvent)
    assert [(event.connection_id, event.reason) for event in closed] == [(1, "error")]
    gate.set()
    assert pool.check_out().id == 2


def test_timeout_in_listener_after_checkout_returns_the_connection() -> None:
    class Slow(ConnectionPoolListener):
        def connection_checked_out(self, event: Any) -> None:
            gevent.sleep(1)

    pool = make_pool(listeners=[Slow()], max_pool_size=1)
    with pytest.raises(gevent.Timeout):
        with gevent.Timeout(0.01):
            pool.check_out()
    assert_at_rest(pool, 1)


def test_context_manager_checks_in_on_error_and_on_kill() -> None:
    pool = make_pool(max_pool_size=1)
    with pytest.raises(ZeroDivisionError):
        with pool.checkout():
            raise ZeroDivisionError()
    assert_at_rest(pool, 1)

    def hold() -> None:
        with pool.checkout():
            gevent.sleep(10)

    glet = gevent.spawn(hold)
    gevent.sleep(0)
    assert pool.stats().in_use == 1
    glet.kill()
    assert_at_rest(pool, 1)


class Blocking(ConnectionPoolListener):
    """Blocks in the first call of ``method`` until ``gate`` is set; records every event and its greenlet."""

    def __init__(self, method: str) -> None:
        self.method = method
        self.gate = gevent.event.Event()
        self.entered = gevent.event.Event()
        self.events: List[Any] = []
        self.by: List[Any] = []

    def __getattribute__(self, name: str) -> Any:
        if name.startswith(("pool_", "connection_")):
            return lambda event: self._add(name, event)
        return super().__getattribute__(name)

    def _add(self, name: str, event: Any) -> None:
        self.events.append(type(event).__name__)
        self.by.append(gevent.getcurrent())
        if name == self.method and not self.entered.is_set():
            self.entered.set()
            self.gate.wait()


@pytest.mark.parametrize("method", ["connection_checked_in", "connection_created", "connection_check_out_started"])
def test_kill_in_its_own_listener_call_leaves_the_pool_at_rest(method: str) -> None:
    listener = Blocking(method)
    pool = make_pool(listeners=[listener], max_pool_size=1)

    def operation() -> None:
        with pool.checkout():
            pass

    glet = gevent.spawn(operation)
    assert listener.entered.wait(1)
    assert listener.by[-1] is glet  # nobody else was delivering: the operation runs its own listener
    glet.kill()
    assert isinstance(glet.value, gevent.GreenletExit)
    listener.gate.set()
    assert_at_rest(pool, pool.stats().total)
    with pool.checkout():  # the pool still serves
        pass
    assert_at_rest(pool, 1)


def test_a_slow_listener_holds_up_no_other_checkout_and_events_stay_in_order() -> None:
    listener = Blocking("connection_checked_in")
    pool = make_pool(listeners=[listener], max_pool_size=2)
    first = gevent.spawn(lambda: pool.check_in(pool.check_out()))
    assert listener.entered.wait(1)
    before = len(listener.events)
    # Meanwhile another greenlet checks out and in twice, unhindered; its events wait their turn.
    with gevent.Timeout(1):
        for _ in range(2):
            conn = pool.check_out()
            pool.check_in(conn)
    assert len(listener.events) == before and not first.dead
    listener.gate.set()
    first.join(1)
    gevent.joinall([glet for glet in set(listener.by) if glet is not gevent.getcurrent()], timeout=1)
    assert listener.events == [
        "PoolCreatedEvent", "PoolReadyEvent",
        "ConnectionCheckOutStartedEvent", "ConnectionCreatedEvent", "ConnectionReadyEvent",
        "ConnectionCheckedOutEvent", "ConnectionCheckedInEvent",  # the slow one
    ] + ["ConnectionCheckOutStartedEvent", "ConnectionCheckedOutEvent", "ConnectionCheckedInEvent"] * 2
    assert_at_rest(pool, 1)


def test_perished_connections_are_announced_before_a_connecting_slot_is_taken() -> None:
    pending_seen: List[int] = []

    class Closed(ConnectionPoolListener):
        def connection_closed(self, event: Any) -> None:
            pending_seen.append(pool.stats().pending)

    pool = make_pool(listeners=[Closed()], max_connecting=1)
    conn = pool.check_out()
    pool.check_in(conn)
    conn.closed = True  # perished while available
    fresh = pool.check_out()
    assert fresh is not conn and pending_seen == [0]  # the listener ran holding no slot
    pool.check_in(fresh)
    assert_at_rest(pool, 1)


# -- clear, interrupt, close ------------------------------------------------------

def test_clear_fails_every_waiter_at_once_with_a_retryable_error() -> None:
    recorder = Recorder()
    pool = make_pool(listeners=[recorder], max_pool_size=1)
    conn = pool.check_out()
    waiters = [gevent.spawn(pool.check_out) for _ in range(5)]
    gevent.sleep(0)
    pool.clear()
    gevent.sleep(0)  # one loop turn: every waiter has its error
    assert all(glet.ready() for glet in waiters)
    for glet in waiters:
        assert isinstance(glet.exception, PoolClearedError)
        assert glet.exception.has_error_label("RetryableWriteError")
    assert pool.stats().waiters == 0
    pool.check_in(conn)  # stale: closed
    assert pool.stats().total == 0
    cleared = recorder.of(PoolClearedEvent)
    assert len(cleared) == 1 and cleared[0].interrupt_connections is False


def test_clear_with_interrupt_cancels_pending_and_closes_in_use() -> None:
    never = gevent.event.Event()
    calls: List[int] = []

    def factory(connection_id: int) -> Conn:
        calls.append(connection_id)
        if connection_id > 1:
            never.wait()
        return Conn(connection_id)

    recorder = Recorder()
    pool = make_pool(factory, [recorder], max_pool_size=5)
    in_use = pool.check_out()
    pending = gevent.spawn(pool.check_out)
    gevent.sleep(0)
    assert pool.stats().pending == 1
    pool.clear(interrupt_in_use_connections=True)
    pending.join(timeout=1)
    assert isinstance(pending.exception, PoolClearedError)
    assert "interrupted due to server monitor timeout" in str(pending.exception)
    assert in_use.closed
    pool.check_in(in_use)
    assert pool.stats().total == 0
    reasons = [(event.connection_id, event.reason) for event in recorder.of(ConnectionClosedEvent)]
    assert reasons == [(2, "error"), (1, "stale")]


def test_clear_with_interrupt_cancels_background_population() -> None:
    never = gevent.event.Event()

    def factory(connection_id: int) -> Conn:
        never.wait()
        return Conn(connection_id)

    errors: List[BaseException] = []
    pool = Pool(("behaviour", 27017), factory, PoolOptions(min_pool_size=2), on_populate_error=errors.append)
    pool.ready()
    wait_until(lambda: pool.stats().pending == 2 and pool.stats().populators == 2, message="two establishing")
    pool.clear(interrupt_in_use_connections=True)
    wait_until(lambda: (pool.stats().pending, pool.stats().total, pool.stats().populators) == (0, 0, 0),
               message=lambda: f"population cancelled; {pool.stats()}")
    assert errors == []  # an interruption is not an establishment error for SDAM


def test_populate_error_reaches_sdam_hook_before_closed_event() -> None:
    order: List[str] = []

    def factory(connection_id: int) -> Conn:
        raise OSError("connection refused")

    class Order(ConnectionPoolListener):
        def pool_cleared(self, event: Any) -> None:
            order.append("cleared")

        def connection_closed(self, event: Any) -> None:
            order.append("closed")

    holder: List[Pool] = []
    pool = Pool(("behaviour", 27017), factory, PoolOptions(min_pool_size=1), [Order()],
                on_populate_error=lambda error: holder[0].clear(cause=error))
    holder.append(pool)
    pool.ready()
    wait_until(lambda: "closed" in order, message="the failed connection's ConnectionClosedEvent")
    assert order[:2] == ["cleared", "closed"]
    assert pool.state == "paused"
    with pytest.raises(PoolClearedError, match="connection refused"):
        pool.check_out()


def test_close_fails_waiters_stops_background_and_closes_connections() -> None:
    pool = make_pool(max_pool_size=1, min_pool_size=1, max_idle_time=60)
    held = pool.check_out()
    waiters = [gevent.spawn(pool.check_out) for _ in range(3)]
    gevent.sleep(0)
    assert pool.stats().waiters == 3
    maintenance = pool._maintenance
    assert maintenance is not None and not maintenance.dead
    pool.close()
    gevent.joinall(waiters, timeout=1)
    assert all(isinstance(glet.exception, PoolClosedError) for glet in waiters)
    gevent.sleep(0)
    assert maintenance.dead
    assert pool.stats().total == 1  # the checked-out one, closed when it comes back
    pool.check_in(held)
    assert held.closed and pool.stats().total == 0
    with pytest.raises(PoolClosedError, match="closed connection pool"):
        pool.check_out()
    pool.ready()  # no effect on a closed pool
    assert pool.state == "closed"


def test_close_cancels_background_population() -> None:
    never = gevent.event.Event()

    def factory(connection_id: int) -> Conn:
        never.wait()
        return Conn(connection_id)

    recorder = Recorder()
    pool = make_pool(factory, [recorder], min_pool_size=2)
    wait_until(lambda: pool.stats().pending == 2, message="two establishing")
    pool.close()

    def cancelled() -> None:
        stats = pool.stats()
        assert (stats.pending, stats.total, stats.populators, stats.establishing) == (0, 0, 0, 0), stats

    eventually(cancelled, message="population cancelled by close()")
    assert [event.reason for event in recorder.of(ConnectionClosedEvent)] == ["error", "error"]


def test_check_in_of_a_foreign_or_returned_connection_raises() -> None:
    pool = make_pool()
    with pytest.raises(InvalidOperation):
        pool.check_in(Conn(99))
    conn = pool.check_out()
    pool.check_in(conn)
    with pytest.raises(InvalidOperation):
        pool.check_in(conn)
    assert_at_rest(pool, 1)


def test_deadline_bounds_the_wait() -> None:
    recorder = Recorder()
    pool = make_pool(listeners=[recorder], max_pool_size=1, wait_queue_timeout=10)
    held = pool.check_out()
    started = monotonic()
    with pytest.raises(WaitQueueTimeoutError) as info:
        pool.check_out(deadline=monotonic() + 0.02)
    assert 0.015 < monotonic() - started < 1
    assert info.value.timeout
    assert recorder.of(ConnectionCheckOutFailedEvent)[-1].reason == "timeout"
    pool.check_in(held)
    assert_at_rest(pool, 1)


def test_paused_pool_refuses_checkouts_with_retryable_error() -> None:
    pool = make_pool(ready=False)
    with pytest.raises(PoolClearedError) as info:
        pool.check_out()
    assert info.value.has_error_label("RetryableWriteError")


# -- background maintenance ----------------------------------------------------------

def test_min_pool_size_is_filled_and_refilled() -> None:
    pool = make_pool(min_pool_size=3, max_connecting=2)
    eventually(lambda: assert_at_rest(pool, 3), message="minPoolSize filled")
    conns = [pool.check_out() for _ in range(3)]
    for conn in conns:
        conn.closed = True
        pool.check_in(conn)
    assert pool.stats().total == 0  # the closed ones were dropped at check-in...
    eventually(lambda: assert_at_rest(pool, 3), message="minPoolSize refilled")  # ...and replaced


def test_idle_connections_closed_in_background() -> None:
    recorder = Recorder()
    pool = make_pool(listeners=[recorder], max_idle_time=0.01, maintenance_interval=0.005)
    pool.check_in(pool.check_out())
    wait_until(lambda: pool.stats().total == 0, message="the idle connection closed")
    assert [event.reason for event in recorder.of(ConnectionClosedEvent)] == ["idle"]


def test_no_background_creation_is_observable_before_pool_ready_event() -> None:
    seen: List[str] = []

    class Switching(ConnectionPoolListener):
        def pool_ready(self, event: Any) -> None:
            seen.append("ready")
            gevent.sleep(0.01)  # a listener that switches: background must still wait
            seen.append("ready done")

        def connection_created(self, event: Any) -> None:
            seen.append("created")

    pool = make_pool(listeners=[Switching()], ready=False, min_pool_size=1, maintenance_interval=0.001)
    pool.ready()
    wait_until(lambda: "created" in seen, message="the background connection created")
    assert seen == ["ready", "ready done", "created"]


def test_maintenance_greenlet_ends_when_pool_is_dropped() -> None:
    pool = make_pool(min_pool_size=1, max_idle_time=1)
    wait_until(lambda p=pool: p.stats().available == 1, message="minPoolSize filled")
    glet = pool._maintenance
    assert glet is not None and not glet.dead
    del pool
    gc.collect()
    gevent.sleep(0)
    assert glet.dead


HUB_SCRIPT = textwrap.dedent("""
    import gevent
    from greenmongo.pool import Pool, PoolOptions
    from tests.waits import wait_until

    class Conn:
        closed = False
        def __init__(self, connection_id):
            self.id = connection_id
        def close(self):
            self.closed = True

    kept = Pool(("a", 1), Conn, PoolOptions(min_pool_size=2, max_idle_time=5))
    kept.ready()
    closed = Pool(("b", 1), Conn, PoolOptions(min_pool_size=2, max_idle_time=5))
    closed.ready()
    wait_until(lambda: kept.stats().available == 2 and closed.stats().available == 2, message="both filled")
    conn = kept.check_out()
    kept.check_in(conn)
    closed.close()
    assert kept._maintenance is not None and not kept._maintenance.dead
    gevent.get_hub().join()  # returns only if nothing keeps the loop alive
    print("joined", kept.stats().total)
""")


def test_background_never_keeps_the_hub_alive() -> None:
    result = subprocess.run([sys.executable, "-c", HUB_SCRIPT], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "joined 2"


# -- load-balanced mode ---------------------------------------------------------------

def test_load_balanced_clear_is_per_service_and_does_not_pause() -> None:
    services = iter(["svc-a", "svc-b", "svc-a"])
    recorder = Recorder()
    pool = make_pool(lambda cid: Conn(cid, next(services)), [recorder], load_balanced=True)
    a1, b1, a2 = pool.check_out(), pool.check_out(), pool.check_out()
    assert pool.describe(a1).service_id == "svc-a" and pool.describe(b1).service_id == "svc-b"
    pool.clear(service_id="svc-a")
    assert pool.state == "ready"
    assert pool.stale(pool.describe(a1).generation, "svc-a")
    assert not pool.stale(pool.describe(b1).generation, "svc-b")
    for conn in (a1, b1, a2):
        pool.check_in(conn)
    assert pool.stats().total == 1 and pool._service_generations == {"svc-b": [0, 1]}
    cleared = recorder.of(PoolClearedEvent)
    assert [event.service_id for event in cleared] == ["svc-a"]


def test_pinned_counts_in_load_balanced_timeout_message() -> None:
    pool = make_pool(lambda cid: Conn(cid, "svc"), load_balanced=True, max_pool_size=1, wait_queue_timeout=0.01)
    conn = pool.check_out()
    pool.mark_pinned(conn, "cursor")
    with pytest.raises(WaitQueueTimeoutError, match="connections in use by cursors: 1"):
        pool.check_out()
    pool.check_in(conn)
    assert pool._uses["cursor"] == 0


def test_a_connection_closed_by_an_error_is_closed_for_error_even_after_its_service_was_cleared() -> None:
    recorder = Recorder()
    pool = make_pool(lambda cid: Conn(cid, "svc"), [recorder], load_balanced=True)
    broken, healthy = pool.check_out(), pool.check_out()
    broken.close()  # a network error closed it; SDAM then clears its service
    pool.clear(service_id="svc")
    pool.check_in(broken)
    pool.check_in(healthy)
    assert [event.reason for event in recorder.of(ConnectionClosedEvent)] == ["error", "stale"]


def test_pinned_in_use_counts_by_kind_and_in_the_timeout_message() -> None:
    pool = make_pool(lambda cid: Conn(cid, "svc"), load_balanced=True, max_pool_size=3, wait_queue_timeout=0.01)
    cursor, transaction, other = pool.check_out(), pool.check_out(), pool.check_out()
    pool.mark_pinned(cursor, "cursor")
    pool.mark_pinned(transaction, "transaction")
    with pytest.raises(WaitQueueTimeoutError, match="^Timeout waiting for connection from the connection pool. "
                                                    "maxPoolSize: 3, connections in use by cursors: 1, connections "
                                                    "in use by transactions: 1, connections in use by other "
                                                    "operations: 1, connections available: 0, "):
        pool.check_out()
    pool.mark_pinned(transaction, None)  # no longer the transaction's (still checked out)
    assert pool._uses == {"cursor": 1, "transaction": 0}
    for conn in (cursor, transaction, other):
        pool.check_in(conn)
    assert pool._uses == {"cursor": 0, "transaction": 0}


# -- events, listeners, logging -----------------------------------------------------

def test_listener_exceptions_are_swallowed(caplog: pytest.LogCaptureFixture) -> None:
    class Broken(ConnectionPoolListener):
        def connection_checked_out(self, event: Any) -> None:
            raise RuntimeError("listener bug")

    pool = make_pool(listeners=[Broken()])
    with caplog.at_level(logging.ERROR, logger="greenmongo.monitoring"):
        conn = pool.check_out()
    pool.check_in(conn)
    assert_at_rest(pool, 1)
    assert "listener bug" in caplog.text


def test_pool_created_event_carries_non_default_options() -> None:
    recorder = Recorder()
    make_pool(listeners=[recorder], ready=False, max_pool_size=50, min_pool_size=5, max_idle_time=0.1,
              wait_queue_timeout=2, max_connecting=3)
    (created,) = recorder.of(PoolCreatedEvent)
    assert created.options == {"maxPoolSize": 50, "minPoolSize": 5, "maxIdleTimeMS": 100,
                               "waitQueueTimeoutMS": 2000, "maxConnecting": 3}


def test_standardized_log_messages(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="greenmongo.connection"):
        pool = Pool(("db.example", 27017), Conn, PoolOptions(max_pool_size=1, wait_queue_timeout=0.01))
        pool.ready()
        conn = pool.check_out()
        with pytest.raises(WaitQueueTimeoutError):
            pool.check_out()
        pool.clear()
        pool.check_in(conn)
        pool.close()
    records = [record for record in caplog.records if record.name == "greenmongo.connection"]
    assert all(record.levelno == logging.DEBUG for record in records)
    messages = [record.msg for record in records]
    assert all(isinstance(message, StructuredMessage) for message in messages)
    assert [message["message"] for message in messages] == [
        "Connection pool created", "Connection pool ready", "Connection checkout started",
        "Connection created", "Connection ready", "Connection checked out",
        "Connection checkout started", "Connection checkout failed", "Connection pool cleared",
        "Connection checked in", "Connection closed", "Connection pool closed"]
    for message in messages:
        assert message["serverHost"] == "db.example" and message["serverPort"] == 27017
    created = messages[0]
    assert created["maxPoolSize"] == 1 and created["waitQueueTimeoutMS"] == 10
    assert "minPoolSize" not in created  # only the options the user set
    assert messages[3]["driverConnectionId"] == 1
    assert messages[4]["durationMS"] >= 0 and messages[5]["durationMS"] >= 0
    failed = messages[7]
    assert failed["reason"] == "Wait queue timeout elapsed without a connection becoming available"
    assert "error" not in failed
    closed = messages[10]
    assert closed["reason"] == "Connection became stale because the pool was cleared"
    texts = [record.getMessage() for record in records]
    assert texts[3] == "Connection created: address=db.example:27017, driver-generated ID=1"
    assert texts[8] == "Connection pool for db.example:27017 cleared"
    assert texts[9] == "Connection checked in: address=db.example:27017, driver-generated ID=1"
    assert texts[10] == ("Connection closed: address=db.example:27017, driver-generated ID=1. "
                         "Reason: Connection became stale because the pool was cleared")


def test_logging_disabled_costs_no_messages(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="greenmongo.connection"):
        pool = make_pool()
        pool.check_in(pool.check_out())
    assert not [record for record in caplog.records if record.name == "greenmongo.connection"]


def test_connection_ids_are_assigned_in_creation_order() -> None:
    recorder = Recorder()
    pool = make_pool(listeners=[recorder], max_connecting=3)
    greenlets = [gevent.spawn(pool.check_out) for _ in range(6)]
    gevent.joinall(greenlets, raise_error=True)
    assert [event.connection_id for event in recorder.of(ConnectionCreatedEvent)] == [1, 2, 3, 4, 5, 6]
