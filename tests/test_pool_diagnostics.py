"""Pool-exhaustion diagnostics (greenmongo/pool/diagnostics.py): what a WaitQueueTimeoutError and the
checkout-failed log say about who holds the connections, the debug mode's holders, pool_stats(), and
that a killed holder leaves nothing behind. Unit tests on a pool of fake connections, then one test
end to end against SecantusDB."""

from __future__ import annotations

import logging
import re
from time import monotonic
from typing import Any, Iterator, List

import gevent
import pytest
from gevent.event import Event

from greenmongo import MongoClient
from greenmongo.errors import InvalidOperation, WaitQueueTimeoutError
from greenmongo.pool import Pool
from greenmongo.pool import diagnostics
from tests import pool_fakes
from tests.waits import wait_until


def make_pool(**options: Any) -> Pool:
    return pool_fakes.make_pool(("diag.example", 27017), **options)


def hold(pool: Pool, use: Any, release: Event, name: str) -> gevent.Greenlet:
    """A greenlet named ``name`` that checks a connection out for ``use`` and keeps it until ``release``."""
    def holder() -> None:
        conn = pool.check_out(use=use)
        try:
            release.wait()
        finally:
            pool.check_in(conn)

    glet = gevent.Greenlet(holder)
    glet.name = name
    glet.start()
    return glet


@pytest.fixture
def release() -> Iterator[Event]:
    event = Event()
    yield event
    event.set()


def test_the_timeout_error_counts_in_use_by_cursor_transaction_and_other(release: Event) -> None:
    pool = make_pool(max_pool_size=3, wait_queue_timeout=0.05)
    holders = [hold(pool, use, release, f"h{n}") for n, use in enumerate(("cursor", "transaction", None))]
    wait_until(lambda: pool.stats().in_use == 3)
    with pytest.raises(WaitQueueTimeoutError) as caught:
        pool.check_out()
    message = str(caught.value)
    assert message.startswith("Timed out while checking out a connection from connection pool. address: "
                              "diag.example:27017, maxPoolSize: 3, connections in use by cursors: 1, connections in "
                              "use by transactions: 1, connections in use by other operations: 1, connections "
                              "available: 0, connections being established: 0, wait queue length: 0, "), message
    waited = float(re.search(r"this checkout waited: ([0-9.]+) s", message).group(1))
    assert waited >= 0.05
    assert "waitQueueTimeoutMS: 50" in message
    assert "Longest holders" not in message  # debug mode is off
    release.set()
    gevent.joinall(holders, raise_error=True)
    assert pool._uses == {"cursor": 0, "transaction": 0}


def test_the_wait_queue_length_and_longest_wait_are_reported(release: Event) -> None:
    pool = make_pool(max_pool_size=1)
    holding = hold(pool, None, release, "holder")
    wait_until(lambda: pool.stats().in_use == 1)
    patient = gevent.spawn(pool.check_out, monotonic() + 60)  # waits far longer
    wait_until(lambda: pool.stats().waiters == 1)
    gevent.sleep(0.05)
    with pytest.raises(WaitQueueTimeoutError) as caught:
        pool.check_out(deadline=monotonic() + 0.02)
    message = str(caught.value)
    assert "wait queue length: 1," in message and message.endswith(", bounded by the operation's timeoutMS")
    longest = float(re.search(r"longest current wait: ([0-9.]+) s", message).group(1))
    waited = float(re.search(r"this checkout waited: ([0-9.]+) s", message).group(1))
    assert longest >= 0.07 > waited  # the patient waiter's, not this checkout's
    stats = pool.stats()
    assert stats.waiters == 1 and stats.longest_wait >= 0.07
    patient.kill()
    assert pool.stats().waiters == 0 and pool.stats().longest_wait == 0.0
    release.set()
    holding.join()


def test_the_checkout_failed_log_carries_the_same_counts(release: Event, caplog: pytest.LogCaptureFixture) -> None:
    pool = make_pool(max_pool_size=2, wait_queue_timeout=0.02)
    holders = [hold(pool, "cursor", release, "a"), hold(pool, None, release, "b")]
    wait_until(lambda: pool.stats().in_use == 2)
    with caplog.at_level(logging.DEBUG, logger="greenmongo.connection"):
        with pytest.raises(WaitQueueTimeoutError):
            pool.check_out()
    (record,) = [r for r in caplog.records if r.msg.get("message") == "Connection checkout failed"]
    fields = dict(record.msg)
    assert {key: fields[key] for key in ("maxPoolSize", "inUse", "inUseByCursors", "inUseByTransactions",
                                         "inUseByOtherOperations", "available", "pending", "waitQueueLength")} == {
        "maxPoolSize": 2, "inUse": 2, "inUseByCursors": 1, "inUseByTransactions": 0, "inUseByOtherOperations": 1,
        "available": 0, "pending": 0, "waitQueueLength": 0}
    assert fields["longestWaitMS"] >= 20 and "error" not in fields
    text = record.getMessage()
    assert "Reason: Wait queue timeout elapsed without a connection becoming available" in text
    assert "In use: 2 of maxPoolSize 2 (cursors: 1, transactions: 0, other: 1), available: 0, pending: 0, " \
           "wait queue length: 0, longest wait: " in text
    release.set()
    gevent.joinall(holders)


def test_debug_mode_names_the_holders_in_the_error_and_in_holders(release: Event) -> None:
    pool = make_pool(max_pool_size=2, wait_queue_timeout=0.02, debug=True)
    first = hold(pool, "cursor", release, "report-worker")
    wait_until(lambda: pool.stats().in_use == 1)
    second = hold(pool, "transaction", release, "billing-worker")
    wait_until(lambda: pool.stats().in_use == 2)
    with pytest.raises(WaitQueueTimeoutError) as caught:
        pool.check_out()
    message = str(caught.value)
    assert ". Longest holders: connection 1 (cursor) held " in message
    assert "by greenlet report-worker, checked out at tests/test_pool_diagnostics.py:" in message
    assert " in hold.<locals>.holder" in message and "; connection 2 (transaction) held" in message
    assert message.index("report-worker") < message.index("billing-worker")  # longest held first
    infos = pool.holders()
    assert [(i["connection_id"], i["use"], i["greenlet"], i["greenlet_alive"]) for i in infos] == [
        (1, "cursor", "report-worker", True), (2, "transaction", "billing-worker", True)]
    assert infos[0]["held_for"] >= infos[1]["held_for"] > 0
    assert infos[0]["stack"][0].startswith("tests/test_pool_diagnostics.py:") and infos[0]["stack"][0].endswith(
        " in hold.<locals>.holder")
    assert infos[0]["api"] is not None and infos[0]["api"].endswith(" in Pool.check_out")
    assert [info["connection_id"] for info in pool.holders(limit=1)] == [1]
    release.set()
    gevent.joinall([first, second], raise_error=True)
    assert pool.holders() == []
    assert all(record.holder is None for record in pool._available)


def test_debug_off_records_nothing_and_never_captures(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden() -> None:
        raise AssertionError("Holder.capture called with debug off")

    monkeypatch.setattr(diagnostics.Holder, "capture", classmethod(lambda cls: forbidden()))
    pool = make_pool(max_pool_size=1)
    conn = pool.check_out(use="cursor")
    assert pool.describe(conn).holder is None and pool.holders() == []
    pool.check_in(conn)


def test_a_killed_holder_is_forgotten(release: Event) -> None:
    pool = make_pool(max_pool_size=2, debug=True)
    plain = hold(pool, None, release, "doomed")

    def with_block() -> None:
        with pool.checkout():
            release.wait()

    scoped = gevent.Greenlet(with_block)
    scoped.name = "doomed-too"
    scoped.start()
    wait_until(lambda: pool.stats().in_use == 2)
    waiter = gevent.spawn(pool.check_out)
    wait_until(lambda: pool.stats().waiters == 1)
    assert {info["greenlet"] for info in pool.holders()} == {"doomed", "doomed-too"}
    gevent.killall([plain, scoped])
    # The killed holders' connections went to the waiter, which holds one now, and the other is available.
    conn = waiter.get(timeout=5)
    (info,) = pool.holders()
    assert info["greenlet"] == _name(waiter) and info["use"] == "other"
    stats = pool.stats()
    assert (stats.in_use, stats.available, stats.waiters) == (1, 1, 0)
    pool.check_in(conn)
    assert pool.holders() == [] and pool._uses == {"cursor": 0, "transaction": 0}


def _name(glet: gevent.Greenlet) -> str:
    return glet.name


def test_a_holder_whose_greenlet_ended_is_shown_as_ended() -> None:
    pool = make_pool(debug=True)
    conn = gevent.spawn(pool.check_out, None, None, "cursor").get()  # the greenlet ends, the connection stays out
    (info,) = pool.holders()
    assert info["greenlet_alive"] is False and info["use"] == "cursor"
    assert "(ended)" in diagnostics.holder_line(info)
    pool.check_in(conn)


def test_stats_is_a_cheap_snapshot_with_the_dashboard_fields(release: Event) -> None:
    pool = make_pool(max_pool_size=4)
    holders = [hold(pool, "transaction", release, "t"), hold(pool, "cursor", release, "c")]
    wait_until(lambda: pool.stats().in_use == 2)
    stats = pool.stats().as_dict()
    assert {key: stats[key] for key in ("state", "generation", "total", "available", "pending", "in_use",
                                        "waiters", "max_pool_size", "in_use_by_cursors", "in_use_by_transactions",
                                        "longest_wait")} == {
        "state": "ready", "generation": 0, "total": 2, "available": 0, "pending": 0, "in_use": 2, "waiters": 0,
        "max_pool_size": 4, "in_use_by_cursors": 1, "in_use_by_transactions": 1, "longest_wait": 0.0}
    release.set()
    gevent.joinall(holders)
    assert pool.stats().available == 2 and pool.stats().in_use == 0


def test_pool_debug_is_a_keyword_and_an_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GREENMONGO_POOL_DEBUG", raising=False)
    with MongoClient("mongodb://diag.invalid/", connect=False) as off:
        assert off.options.pool_options.debug is False
        with pytest.raises(InvalidOperation, match="pool_debug=True"):
            off.pool_holders()
        assert off.pool_stats() == {}
    with MongoClient("mongodb://diag.invalid/", connect=False, pool_debug=True) as on:
        assert on.options.pool_options.debug is True and on.pool_holders() == []
    monkeypatch.setenv("GREENMONGO_POOL_DEBUG", "1")
    with MongoClient("mongodb://diag.invalid/", connect=False) as env:
        assert env.options.pool_options.debug is True
    with MongoClient("mongodb://diag.invalid/", connect=False, pool_debug=False) as keyword_wins:
        assert keyword_wins.options.pool_options.debug is False
    monkeypatch.delenv("GREENMONGO_POOL_DEBUG")
    with pytest.warns(UserWarning):  # a keyword, not a connection string option: unknown there
        uri_option = MongoClient("mongodb://diag.invalid/?pool_debug=true", connect=False)
    with uri_option:
        assert uri_option.options.pool_options.debug is False


# -- end to end -------------------------------------------------------------------------------------------


@pytest.mark.server
def test_an_exhausted_client_pool_says_who_holds_it(server_uri: str) -> None:
    """maxPoolSize=2: a find (cursor) and a transaction's insert, both blocked on the server by a fail point,
    hold the pool; a third operation times out naming both, and pool_stats()/pool_holders() agree."""
    internal = MongoClient(server_uri)
    client = MongoClient(server_uri, maxPoolSize=2, waitQueueTimeoutMS=300, pool_debug=True, appname="diag-e2e",
                         retryReads=False, retryWrites=False)
    coll = client.diag_db.things
    try:
        coll.drop()
        coll.insert_one({"_id": 0})
        internal.admin.command("configureFailPoint", "failCommand", mode="alwaysOn",
                               data={"failCommands": ["find", "insert"], "blockConnection": True, "blockTimeMS": 1500,
                                     "appName": "diag-e2e"})
        started: List[str] = []

        def reader() -> None:
            started.append("reader")
            list(coll.find({}))

        def in_transaction() -> None:
            with client.start_session() as session:
                with session.start_transaction():
                    started.append("txn")
                    coll.insert_one({"_id": 1}, session=session)

        glets = [gevent.Greenlet(reader), gevent.Greenlet(in_transaction)]
        glets[0].name, glets[1].name = "reader", "txn-writer"
        for glet in glets:
            glet.start()
        wait_until(lambda: sum(stats["in_use"] for stats in client.pool_stats().values()) == 2, timeout=10)
        (address, stats), = client.pool_stats().items()
        assert (stats["size"], stats["in_use"], stats["in_use_by_cursors"], stats["in_use_by_transactions"],
                stats["available"], stats["max_pool_size"]) == (2, 2, 1, 1, 0, 2)
        holders = client.pool_holders()
        assert sorted((h["greenlet"], h["use"]) for h in holders) == [("reader", "cursor"),
                                                                      ("txn-writer", "transaction")]
        assert all(h["address"] == address and h["stack"][0].startswith("tests/test_pool_diagnostics.py:")
                   for h in holders)
        # The greenmongo call each was checked out by: iterating the find's cursor, the transaction's insert_one.
        assert sorted(h["api"].rsplit(" in ", 1)[1] for h in holders) == ["Collection.insert_one", "_CursorBase.next"]
        with pytest.raises(WaitQueueTimeoutError) as caught:
            client.diag_db.command("ping")
        message = str(caught.value)
        assert (f"address: {address}, maxPoolSize: 2, connections in use by cursors: 1, connections in use by "
                f"transactions: 1, connections in use by other operations: 0, connections available: 0") in message
        assert "by greenlet reader" in message and "by greenlet txn-writer" in message
        internal.admin.command("configureFailPoint", "failCommand", mode="off")
        gevent.killall(glets)  # kill-safety: the killed holders give their connections back
        wait_until(lambda: client.pool_holders() == [], timeout=10)
        stats = client.pool_stats()[address]
        assert (stats["in_use"], stats["in_use_by_cursors"], stats["in_use_by_transactions"]) == (0, 0, 0)
        assert client.diag_db.command("ping")["ok"] == 1
    finally:
        internal.admin.command("configureFailPoint", "failCommand", mode="off")
        client.close()
        internal.close()
