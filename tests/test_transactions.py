"""Transactions and retryable writes against SecantusDB: what is sent, what lands, and that a
greenlet killed inside a transaction leaves nothing behind (the transaction is aborted, the
connection and the server session are given back)."""

from __future__ import annotations

import gc

import gevent
import pytest

from greenmongo import MongoClient
from greenmongo.errors import AutoReconnect, InvalidOperation, OperationFailure
from greenmongo.read_preferences import ReadPreference
from greenmongo.write_concern import WriteConcern
from tests.api_support import Recorder, held_by_open_transactions, scratch_database
from tests.test_kill_safety_e2e import pool_problems
from tests.waits import wait_event, wait_until

pytestmark = pytest.mark.server


@pytest.fixture
def coll(client):
    with scratch_database(client, "txn") as db:
        db.create_collection("c")
        yield db.c


def _fail_point(client: MongoClient, mode, **data) -> None:
    client.admin.command({"configureFailPoint": "failCommand", "mode": mode, "data": data})


def _off(client: MongoClient) -> None:
    client.admin.command({"configureFailPoint": "failCommand", "mode": "off"})


def test_with_transaction_sends_the_transaction_fields_and_commits(client, recorder, coll) -> None:
    with client.start_session() as session:
        recorder.clear()
        result = session.with_transaction(
            lambda s: (coll.insert_one({"_id": 1}, session=s), coll.insert_one({"_id": 2}, session=s)) and "done",
            write_concern=WriteConcern(w="majority"))
        assert result == "done"
        assert not session.in_transaction
    first, second = recorder.commands("insert")
    assert first["startTransaction"] is True and first["autocommit"] is False
    assert "startTransaction" not in second and second["autocommit"] is False
    assert first["txnNumber"] == second["txnNumber"]
    assert "writeConcern" not in first and "writeConcern" not in second
    [commit] = recorder.commands("commitTransaction")
    assert commit["txnNumber"] == first["txnNumber"] and commit["writeConcern"] == {"w": "majority"}
    assert sorted(doc["_id"] for doc in coll.find()) == [1, 2]


def test_an_exception_in_the_block_aborts_and_nothing_lands(client, recorder, coll) -> None:
    with client.start_session() as session:
        with pytest.raises(KeyError):
            with session.start_transaction():
                coll.insert_one({"_id": 1}, session=session)
                assert coll.count_documents({}) == 0  # not visible outside the transaction
                raise KeyError("the application fails mid-transaction")
        assert recorder.names()[-1] == "abortTransaction"
        with pytest.raises(InvalidOperation, match="twice"):
            session.abort_transaction()
    assert coll.count_documents({}) == 0


def test_reads_in_a_transaction_must_use_primary(client, coll) -> None:
    with client.start_session() as session:
        with session.start_transaction(read_preference=ReadPreference.SECONDARY):
            with pytest.raises(InvalidOperation, match="must be primary"):
                coll.find_one({}, session=session)
            session.abort_transaction()


def test_a_retryable_write_is_retried_once_with_the_same_transaction_number(client, recorder, coll) -> None:
    _fail_point(client, {"times": 1}, failCommands=["insert"], closeConnection=True)
    try:
        recorder.clear()
        coll.insert_one({"_id": 7})
    finally:
        _off(client)
    attempts = [event.command for event in recorder.started_events if event.command_name == "insert"]
    assert len(attempts) == 2
    assert attempts[0]["txnNumber"] == attempts[1]["txnNumber"] and attempts[0]["lsid"] == attempts[1]["lsid"]
    assert coll.count_documents({"_id": 7}) == 1


def test_without_retry_writes_there_is_no_transaction_number_and_no_retry(server_uri, coll) -> None:
    recorder = Recorder()
    with MongoClient(server_uri, retryWrites=False, event_listeners=[recorder]) as client:
        target = client[coll.database.name].c
        _fail_point(client, {"times": 1}, failCommands=["insert"], closeConnection=True)
        try:
            with pytest.raises(AutoReconnect):
                target.insert_one({"_id": 8})
        finally:
            _off(client)
        [attempt] = recorder.commands("insert")
        assert "txnNumber" not in attempt


def test_a_non_retryable_server_error_is_raised_at_once(client, recorder, coll) -> None:
    _fail_point(client, {"times": 1}, failCommands=["insert"], errorCode=2, errorLabels=[])
    try:
        recorder.clear()
        with pytest.raises(OperationFailure) as info:
            coll.insert_one({"_id": 9})
    finally:
        _off(client)
    assert info.value.code == 2 and len(recorder.commands("insert")) == 1


def test_a_greenlet_killed_inside_a_transaction_leaks_nothing(client, recorder, coll) -> None:
    """Killed while its second statement waits on the server: the ``with`` blocks abort the
    transaction and end the session; the pool is at rest and nothing was committed."""
    _fail_point(client, {"times": 1}, failCommands=["insert"], blockConnection=True, blockTimeMS=2000)
    inside = gevent.event.Event()

    def work() -> None:
        with client.start_session() as session:
            with session.start_transaction():
                coll.find_one({}, session=session)
                inside.set()
                coll.insert_one({"_id": 1}, session=session)

    try:
        worker = gevent.spawn(work)
        wait_event(inside, message="the transaction's first statement done")
        # Its CommandStartedEvent is published right before the send: once we run again, the
        # worker has yielded with the insert on the wire, blocked by the failpoint.
        wait_until(lambda: recorder.commands("insert"), message="the insert sent")
        worker.kill(block=True, timeout=10)
        assert worker.dead
    finally:
        _off(client)
    assert coll.count_documents({}) == 0
    assert pool_problems(client, closed=False) == []
    # The next transaction on the same client works and commits.
    with client.start_session() as session:
        with session.start_transaction():
            coll.insert_one({"_id": 2}, session=session)
    assert [doc["_id"] for doc in coll.find()] == [2]


def _queue_a_blocked_kill(client: MongoClient, coll) -> None:
    """A killCursors queued for the client's next operation, which the server holds for 2 s: the next
    operation waits there, before anything of its own is sent."""
    other = coll.database.other
    other.insert_many([{"_id": i} for i in range(3)])
    cursor = other.find(batch_size=1)
    next(cursor)
    _fail_point(client, {"times": 1}, failCommands=["killCursors"], blockConnection=True, blockTimeMS=2000)
    del cursor
    gc.collect()
    assert client._core.pending_kills == 1


@pytest.mark.parametrize("ending", ["commit_transaction", "abort_transaction"])
def test_a_commit_or_abort_interrupted_before_it_is_sent_leaves_the_abort_to_the_session_end(
        client, recorder, coll, ending) -> None:
    """A gevent.Timeout that lands before commitTransaction/abortTransaction reaches the server (here while
    the client sends a queued killCursors first) leaves the transaction in progress, as it is on the server:
    ending the session aborts it, rather than leaving it open there, holding what it wrote, until the
    server's transaction lifetime runs out."""
    coll.insert_one({"_id": 1})
    try:
        with client.start_session() as session:
            session.start_transaction()
            coll.update_one({"_id": 1}, {"$inc": {"n": 1}}, session=session)
            _queue_a_blocked_kill(client, coll)
            with pytest.raises(gevent.Timeout):
                with gevent.Timeout(0.3):
                    getattr(session, ending)()
            assert recorder.commands("killCursors") and not recorder.commands("commitTransaction")
            assert not recorder.commands("abortTransaction")
            assert session.in_transaction
        assert len(recorder.commands("abortTransaction")) == 1  # sent by the session's end
        assert held_by_open_transactions(coll.database, coll.name, [1], max_time_ms=1000) == []
        assert coll.find_one({"_id": 1}) == {"_id": 1, "probe": 1}  # the transaction's update did not land
        assert pool_problems(client, closed=False) == []
    finally:
        _off(client)
        client.admin.command("killAllSessions", [])  # what a failure left open would hold up the teardown


def test_a_commit_interrupted_after_it_is_sent_is_not_aborted(client, recorder, coll) -> None:
    """Once commitTransaction is on the wire its outcome is unknown: the session's end does not abort it
    (the server commits it)."""
    coll.insert_one({"_id": 1})
    _fail_point(client, {"times": 1}, failCommands=["commitTransaction"], blockConnection=True, blockTimeMS=500)
    try:
        with client.start_session() as session:
            session.start_transaction()
            coll.update_one({"_id": 1}, {"$inc": {"n": 1}}, session=session)
            with pytest.raises(gevent.Timeout):
                with gevent.Timeout(0.2):
                    session.commit_transaction()
            assert not session.in_transaction
    finally:
        _off(client)
    assert recorder.commands("commitTransaction") and not recorder.commands("abortTransaction")
    wait_until(lambda: coll.find_one({"_id": 1}) == {"_id": 1, "n": 1}, message="the commit applied")
