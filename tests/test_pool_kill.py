"""Kill injection: gevent.Timeouts and kill()s landing at every switch point of checkout,
establishment, use and check-in must leave the pool's counters exactly at rest.

10,000 operations across 1,000 greenlets on a pool of 10; connect, handshake, send and
receive are ``gevent.sleep(0)`` switches in a fake connection, and listeners switch too (they
check the pool's invariants at every event). Meanwhile a chaos greenlet clears (sometimes
interrupting in-use and pending connections) and re-readies the pool.

With listeners switching this much, an operation almost never delivers its own events: the
publisher queues them behind the delivery under way and the operation goes on, so check-in and
the event call sites are switch points of an operation only when nobody else is delivering.
Kills landing there are forced deterministically in tests/test_pool_behaviour.py.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from typing import Any, Dict

import gevent
import pytest

from greenmongo.errors import AutoReconnect, ConnectionFailure, PyMongoError
from greenmongo.monitoring.pool import ConnectionPoolListener
from greenmongo.pool import Pool, PoolOptions
from greenmongo.pool.waitqueue import HANDED_CONNECTION
from tests.waits import eventually

GREENLETS = 1_000
OPS_PER_GREENLET = 10
MAX_POOL_SIZE = 10
MAX_CONNECTING = 2
RARE_PHASES = ("connect", "handshake")


class Harness:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.phase: Dict[Any, str] = {}
        self.landed: Counter = Counter()
        self.reached: Counter = Counter()  # switch points passed by the workers
        self.abandoned: Counter = Counter()
        self.violations: list = []
        self.completed = 0
        self.failed = 0
        self.interrupted = 0
        self.inject = True
        self.sequence = itertools.count()
        self.queued_at: Dict[Any, int] = {}
        # Kills and Timeouts are injected into the operations' greenlets only: a listener call
        # queued behind another greenlet's is delivered by the event publisher's own greenlet,
        # which holds nothing of the pool's (killing it proves nothing about the pool).
        self.targets: set = set()

    def switch(self, name: str) -> None:
        """A ``gevent.sleep(0)`` switch point. Sometimes a kill() or a Timeout is queued just
        before it, so that it lands exactly here (an outside kill queued while we are already
        scheduled to wake would land at our next switch instead)."""
        me = gevent.getcurrent()
        previous = self.phase.get(me)
        self.phase[me] = name
        if me in self.targets:
            self.reached[name] += 1
        # Workers connect only while the pool refills (a few dozen times a run, fewer on a loaded
        # machine), so the first kills there are not left to chance.
        chance = 1.0 if name in RARE_PHASES and self.landed[name] < 3 else 0.04
        if self.inject and me in self.targets and self.rng.random() < chance:
            exception = gevent.GreenletExit() if self.rng.random() < 0.5 else gevent.Timeout()
            gevent.get_hub().loop.run_callback(me.throw, exception)
        try:
            gevent.sleep(0)
        except BaseException as exc:
            self.landed[name] += 1
            exc.greenmongo_landed = name  # type: ignore[union-attr]
            raise
        self.phase[me] = previous


class FakeConnection:
    def __init__(self, harness: Harness, connection_id: int) -> None:
        self.harness = harness
        self.id = connection_id
        self.closed = False
        self.owner: Any = None

    def close(self) -> None:
        self.closed = True

    def round_trip(self) -> None:
        if self.closed:
            raise AutoReconnect("connection closed")
        self.harness.switch("send")
        if self.harness.rng.random() < 0.03:
            self.closed = True  # a network error: the connection is now perished
            raise AutoReconnect("network error")
        self.harness.switch("receive")


class SwitchingListener(ConnectionPoolListener):
    """Switches inside the pool's event call sites and checks invariants at each event."""

    def __init__(self, harness: Harness) -> None:
        self.harness = harness
        self.pool: Any = None

    def check(self, where: str) -> None:
        pool = self.pool
        if pool is None:
            return
        stats = pool.stats()
        if not (0 <= stats.pending <= pool.opts.max_connecting and stats.total <= MAX_POOL_SIZE
                and stats.total == stats.pending + stats.available + stats.in_use):
            self.harness.violations.append((where, stats.as_dict()))

    def connection_check_out_started(self, event: Any) -> None:
        self.check("checkout_started")
        self.harness.switch("event:checkout_started")

    def connection_checked_out(self, event: Any) -> None:
        self.check("checked_out")
        self.harness.switch("event:checked_out")

    def connection_checked_in(self, event: Any) -> None:
        self.check("checked_in")
        self.harness.switch("checkin")

    def connection_created(self, event: Any) -> None:
        self.check("created")

    def connection_closed(self, event: Any) -> None:
        self.check("closed")


class CountingPool(Pool):
    """Counts what waiters held when they were abandoned (proves the hand-off races ran)."""

    harness: Harness

    def _abandon(self, entry: Any) -> None:
        self.harness.abandoned[entry.outcome] += 1
        super()._abandon(entry)


def make_pool(harness: Harness, listener: SwitchingListener, **overrides: Any) -> CountingPool:
    def factory(connection_id: int) -> FakeConnection:
        harness.switch("connect")
        if harness.rng.random() < 0.02:
            raise AutoReconnect("connect failed")
        harness.switch("handshake")
        return FakeConnection(harness, connection_id)

    options = dict(max_pool_size=MAX_POOL_SIZE, min_pool_size=3, max_connecting=MAX_CONNECTING,
                   wait_queue_timeout=0.2, max_idle_time=0.05, maintenance_interval=0.01)
    options.update(overrides)
    CountingPool.harness = harness
    pool = CountingPool(("fake", 27017), factory, PoolOptions(**options), [listener])
    listener.pool = pool
    return pool


def one_operation(pool: Pool, harness: Harness) -> None:
    me = gevent.getcurrent()
    harness.phase[me] = "checkout"
    harness.queued_at[me] = next(harness.sequence)
    conn = pool.check_out()
    harness.phase[me] = "use"
    try:
        if conn.owner is not None:
            harness.violations.append(("shared", conn.id))
        conn.owner = me
        try:
            conn.round_trip()
        finally:
            conn.owner = None
    finally:
        harness.phase[me] = "checkin-call"
        pool.check_in(conn)
        harness.phase[me] = None


def worker(pool: Pool, harness: Harness) -> None:
    rng = harness.rng
    me = gevent.getcurrent()
    for _ in range(OPS_PER_GREENLET):
        timeout = gevent.Timeout(rng.choice((0, 0.0001, 0.0005, 0.001, 0.003))) if rng.random() < 0.3 else None
        try:
            if timeout is not None:
                timeout.start()
            try:
                one_operation(pool, harness)
                harness.completed += 1
            finally:
                if timeout is not None:
                    timeout.close()
        except (gevent.Timeout, gevent.GreenletExit) as exc:
            harness.interrupted += 1
            if not getattr(exc, "greenmongo_landed", None):
                # Not at a fake switch point: in the pool itself (the wait queue).
                harness.landed[harness.phase.get(me) or "between"] += 1
        except (ConnectionFailure, PyMongoError):
            harness.failed += 1
        harness.phase[me] = None


TARGET_PHASES = ("checkout", "connect", "handshake", "send", "receive", "checkin",
                 "event:checkout_started", "event:checked_out", None)


def killer(workers: list, harness: Harness, stop: gevent.event.Event) -> None:
    """Kills a random worker, aiming at a random switch point so that every one is reached
    (most workers are waiting in the queue at any moment; few hold a connection)."""
    rng = harness.rng
    while not stop.is_set():
        gevent.sleep(rng.choice((0, 0, 0, 0.0002)))
        wanted = rng.choice(TARGET_PHASES + ("head of queue",))
        if wanted == "head of queue":
            # The waiter most likely to be handed a connection or a slot next: killing it
            # races the hand-off (its kill is queued before its wake-up).
            waiting = [glet for glet in workers if not glet.dead and harness.phase.get(glet) == "checkout"]
            if waiting:
                min(waiting, key=lambda glet: harness.queued_at.get(glet, 0)).kill(block=False)
            continue
        candidates = [glet for glet in workers if not glet.dead and harness.phase.get(glet) == wanted]
        if candidates:
            rng.choice(candidates).kill(block=False)


def chaos(pool: Pool, harness: Harness, stop: gevent.event.Event) -> None:
    rng = harness.rng
    while not stop.is_set():
        gevent.sleep(rng.uniform(0.05, 0.15))
        pool.clear(interrupt_in_use_connections=rng.random() < 0.5)
        gevent.sleep(rng.uniform(0, 0.003))
        pool.ready()


def assert_at_rest(pool: Pool) -> None:
    stats = pool.stats()
    assert stats.in_use == 0, stats
    assert stats.pending == 0, stats
    assert stats.waiters == 0, stats
    assert stats.establishing == 0, stats
    assert stats.populators == 0, stats
    assert pool._pending_for_pool == 0
    assert stats.total == stats.available <= MAX_POOL_SIZE, stats
    assert not pool._populators_starting


@pytest.mark.parametrize("seed, overrides", [
    (20240501, {}),
    (7, {"min_pool_size": 0, "max_connecting": 1}),
    (99, {"max_idle_time": None, "wait_queue_timeout": None}),
])
def test_kill_injection_leaves_pool_at_rest(seed: int, overrides: Dict[str, Any]) -> None:
    harness = Harness(seed)
    listener = SwitchingListener(harness)
    pool = make_pool(harness, listener, **overrides)
    pool.ready()
    stop = gevent.event.Event()
    workers = [gevent.spawn(worker, pool, harness) for _ in range(GREENLETS)]
    harness.targets.update(workers)
    helpers = [gevent.spawn(killer, workers, harness, stop), gevent.spawn(chaos, pool, harness, stop)]

    done = gevent.joinall(workers, timeout=60)
    stop.set()
    gevent.joinall(helpers, timeout=5)
    stuck = [glet for glet in workers if not glet.dead]
    assert not stuck, f"{len(stuck)} worker greenlets stuck; pool {pool.stats()}"
    assert len(done) == GREENLETS
    assert all(glet.dead for glet in helpers)
    assert not harness.violations, harness.violations[:10]

    # Every switch point of the operations was hit by an injected Timeout or kill.
    for phase in ("checkout", "connect", "handshake", "send", "receive"):
        assert harness.landed[phase] > 0, (phase, harness.landed, harness.reached)
    # The hand-off race ran: waiters killed after being handed a connection (the slot
    # variant is rarer here; tests/test_pool_behaviour.py forces both deterministically).
    assert harness.abandoned[HANDED_CONNECTION] > 0, harness.abandoned
    attempted = harness.completed + harness.failed + harness.interrupted
    assert attempted == GREENLETS * OPS_PER_GREENLET, (attempted, harness.landed)

    pool.ready()
    eventually(lambda: assert_at_rest(pool), message="background population settled")

    # The pool still serves 1,000 fresh checkouts.
    served = []

    def fresh() -> None:
        with pool.checkout() as conn:
            assert not conn.closed
            gevent.sleep(0)
        served.append(1)

    harness.inject = False  # no more injected kills; the fake connect still fails sometimes,
    harness.rng.seed(1)     # so retry that like a driver would
    fresh_workers = [gevent.spawn(_retrying, fresh) for _ in range(1_000)]
    gevent.joinall(fresh_workers, timeout=30)
    assert all(glet.successful() for glet in fresh_workers)
    assert len(served) == 1_000
    assert not harness.violations
    assert_at_rest(pool)

    pool.close()
    gevent.sleep(0)
    assert pool.stats().total == 0
    assert pool._maintenance is None or pool._maintenance.dead


def _retrying(fn: Any) -> None:
    """Retry the fake's connect failures (and a wait-queue timeout on an overloaded machine);
    a broken pool fails every attempt."""
    for _ in range(50):
        try:
            return fn()
        except ConnectionFailure:
            continue
    raise AssertionError("no success in 50 attempts")
