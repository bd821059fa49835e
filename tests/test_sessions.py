"""Sessions: implicit lsid on every command, pooled server sessions, explicit sessions, $clusterTime gossip."""

from __future__ import annotations

import pytest

from greenmongo import MongoClient, WriteConcern
from greenmongo.errors import InvalidOperation
from greenmongo.engine.server_session import ServerSession, ServerSessionPool
from tests.api_support import Recorder

pytestmark = pytest.mark.server


@pytest.fixture
def observed(server_uri: str):
    recorder = Recorder()
    client = MongoClient(server_uri, event_listeners=[recorder])
    yield client, recorder
    client.close()


def _lsids(recorder: Recorder) -> list:
    return [event.command.get("lsid") for event in recorder.started_events]


def test_implicit_sessions_are_attached_pooled_and_kept_by_cursors(observed) -> None:
    client, recorder = observed
    coll = client.sessions_test.implicit
    coll.drop()
    coll.insert_many([{"i": i} for i in range(10)])
    recorder.clear()
    assert len(list(coll.find({}, batch_size=3))) == 10
    names = [event.command_name for event in recorder.started_events]
    assert names == ["find", "getMore", "getMore", "getMore"]
    lsids = _lsids(recorder)
    assert lsids[0] is not None and all(lsid == lsids[0] for lsid in lsids)  # one session for the cursor
    recorder.clear()
    coll.find_one({})
    coll.insert_one({"i": 10})
    # The cursor's session went back to the pool and is reused (LIFO) by the next operations.
    assert _lsids(recorder) == [lsids[0], lsids[0]]
    assert len(client._core.server_sessions) == 1


def test_unacknowledged_writes_carry_no_implicit_session(observed) -> None:
    client, recorder = observed
    coll = client.sessions_test.get_collection("unack", write_concern=WriteConcern(w=0))
    recorder.clear()
    coll.insert_one({"x": 1})
    assert recorder.started_events[-1].command_name == "insert"
    assert "lsid" not in recorder.started_events[-1].command


def test_explicit_session_and_cluster_time_gossip(observed) -> None:
    client, recorder = observed
    coll = client.sessions_test.explicit
    with client.start_session() as session:
        coll.insert_one({"x": 1}, session=session)
        found = coll.find_one({"x": 1}, session=session)
        assert found["x"] == 1
        assert all(event.command["lsid"] == session.session_id for event in recorder.started_events[-2:])
        assert session.cluster_time is not None and session.operation_time is not None
    assert session.has_ended
    with pytest.raises(InvalidOperation):
        coll.find_one({}, session=session)
    # Every command to the replica set carries the highest $clusterTime the client has seen.
    recorder.clear()
    coll.find_one({})
    sent = recorder.started_events[-1].command["$clusterTime"]["clusterTime"]
    assert sent >= session.cluster_time["clusterTime"]
    with client.start_session(snapshot=True) as snapshot_session:
        with pytest.raises(InvalidOperation, match="snapshot sessions"):
            snapshot_session.start_transaction()


def test_pool_discards_dirty_and_expiring_sessions() -> None:
    pool = ServerSessionPool()
    clean, dirty, old = ServerSession(), ServerSession(), ServerSession()
    dirty.dirty = True
    old.last_use -= 29.5 * 60  # within a minute of a 30-minute timeout
    for session in (old, dirty, clean):
        pool.put(session, 30)
    assert len(pool) == 1
    assert pool.get(30) is clean
    assert pool.get(30) not in (clean, dirty, old)  # empty: a new one
