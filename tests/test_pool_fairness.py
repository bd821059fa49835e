"""Wait-queue fairness: waiters are served strictly in arrival order, newcomers never barge."""

from __future__ import annotations

from typing import Any, List

import gevent
import gevent.event
import pytest

from greenmongo.errors import WaitQueueTimeoutError
from greenmongo.pool import Pool, PoolOptions
from tests import pool_fakes
from tests.pool_fakes import Conn
from tests.waits import wait_until


def make_pool(**options: Any) -> Pool:
    return pool_fakes.make_pool(("fair", 27017), **options)


@pytest.mark.parametrize("max_pool_size", [1, 3])
def test_waiters_served_in_arrival_order(max_pool_size: int) -> None:
    pool = make_pool(max_pool_size=max_pool_size)
    held = [pool.check_out() for _ in range(max_pool_size)]
    order: List[int] = []

    def waiter(index: int) -> None:
        conn = pool.check_out()
        order.append(index)
        gevent.sleep(0)  # hold it across a switch so others must keep waiting
        pool.check_in(conn)

    greenlets = []
    for index in range(50):
        greenlets.append(gevent.spawn(waiter, index))
        gevent.sleep(0)  # each one queues before the next is spawned
    assert pool.stats().waiters == 50
    for conn in held:
        pool.check_in(conn)
    gevent.joinall(greenlets, timeout=5, raise_error=True)
    assert order == list(range(50))


def test_newcomer_does_not_overtake_a_waiter() -> None:
    pool = make_pool(max_pool_size=1)
    conn = pool.check_out()
    got: List[str] = []

    def first_waiter() -> None:
        c = pool.check_out()
        got.append("waiter")
        gevent.sleep(0.01)
        pool.check_in(c)

    waiter = gevent.spawn(first_waiter)
    gevent.sleep(0)
    assert pool.stats().waiters == 1
    # Check in and immediately ask again, without a switch in between: the
    # connection is already the waiter's, so we queue behind it.
    pool.check_in(conn)
    again = pool.check_out()
    got.append("newcomer")
    pool.check_in(again)
    waiter.join(timeout=5)
    assert got == ["waiter", "newcomer"]


def test_order_kept_when_some_waiters_time_out_or_die() -> None:
    pool = make_pool(max_pool_size=1)
    held = pool.check_out()
    order: List[int] = []

    def waiter(index: int) -> None:
        deadline = None
        if index % 3 == 1:
            from time import monotonic
            deadline = monotonic() + 0.01  # these leave the queue early
        try:
            conn = pool.check_out(deadline=deadline)
        except WaitQueueTimeoutError:
            return
        order.append(index)
        gevent.sleep(0)
        pool.check_in(conn)

    greenlets = []
    for index in range(30):
        greenlets.append(gevent.spawn(waiter, index))
        gevent.sleep(0)
    for glet in greenlets[2::5]:
        glet.kill()  # some die while waiting
    wait_until(lambda: all(greenlets[i].dead for i in range(1, 30, 3)), message="the deadlines passed")
    pool.check_in(held)
    gevent.joinall(greenlets, timeout=5)
    killed = {index for index in range(2, 30, 5)}
    expected = [i for i in range(30) if i % 3 != 1 and i not in killed]
    assert order == expected
    stats = pool.stats()
    assert (stats.waiters, stats.in_use, stats.total, stats.available) == (0, 0, 1, 1)


def test_checked_in_connection_goes_to_waiter_blocked_on_max_connecting() -> None:
    release = gevent.event.Event()

    def slow_factory(connection_id: int) -> Conn:
        if connection_id > 1:
            release.wait()  # establishments after the first are slow
        return Conn(connection_id)

    pool = Pool(("fair", 27017), slow_factory, PoolOptions(max_pool_size=10, max_connecting=1))
    pool.ready()
    first = pool.check_out()  # connection 1, established at once
    establishing = gevent.spawn(pool.check_out)  # connection 2: stuck in the factory
    gevent.sleep(0)
    assert pool.stats().pending == 1
    result: List[Any] = []
    waiter = gevent.spawn(lambda: result.append(pool.check_out()))
    gevent.sleep(0)
    assert pool.stats().waiters == 1  # blocked by maxConnecting, not by maxPoolSize
    pool.check_in(first)
    waiter.join(timeout=1)
    assert result == [first]  # handed over while connection 2 is still being established
    assert not establishing.ready()
    release.set()
    establishing.join(timeout=1)
    assert establishing.value.id == 2
