"""Change streams: the pure resume rules, then watch() against SecantusDB's single-node replica set.

The spec's unified tests (spec/test_unified_suites.py with change-streams/tests/unified) cover the
command shapes and the resume allow list; these tests cover what they do not: the cached resume
token, try_next on empty batches, sessions across a resume, closing, interruption by
gevent.Timeout, and argument checking.
"""

from __future__ import annotations

import contextlib
import gc
from typing import Any, Iterator

import gevent
import pytest

from greenmongo import MongoClient
from greenmongo.bson.timestamp import Timestamp
from greenmongo.change_stream import (
    ChangeStream,
    ClusterChangeStream,
    CollectionChangeStream,
    DatabaseChangeStream,
)
from greenmongo.errors import (
    AutoReconnect,
    ConnectionFailure,
    CursorNotFound,
    InvalidOperation,
    NetworkTimeout,
    NotPrimaryError,
    OperationFailure,
    PoolClosedError,
)
from greenmongo.operations.base import WireInfo
from greenmongo.operations.change_stream import (
    MISSING_RESUME_TOKEN_MESSAGE,
    ChangeStreamAggregateOperation,
    ResumePoint,
    is_resumable_error,
    stage_options,
)
from tests.api_support import Recorder, scratch_database

TOKEN_A = {"_data": "A"}
TOKEN_B = {"_data": "B"}
PBRT = {"_data": "P"}
OPERATION_TIME = Timestamp(1700000000, 5)


# -- pure: which errors resume ------------------------------------------------------------------------

def _server_error(code: int, labels: tuple = (), wire: int = 21) -> OperationFailure:
    reply = {"ok": 0, "code": code, "errmsg": "boom", "errorLabels": list(labels)}
    return OperationFailure("boom", code, reply, wire)


def test_network_errors_and_timeouts_resume() -> None:
    assert is_resumable_error(AutoReconnect("connection closed"), 21)
    assert is_resumable_error(NetworkTimeout("timed out"), 21)
    assert is_resumable_error(ConnectionFailure("reset"), None)


def test_errors_that_are_neither_network_nor_server_do_not_resume() -> None:
    assert not is_resumable_error(PoolClosedError("client closed"), 21)
    assert not is_resumable_error(InvalidOperation("closed"), 21)
    assert not is_resumable_error(ValueError("bad"), 21)


def test_cursor_not_found_resumes_on_every_server() -> None:
    for wire in (6, 8, 21):
        error = CursorNotFound("gone", 43, {"ok": 0, "code": 43}, wire)
        assert is_resumable_error(error, wire)


def test_from_4_4_only_the_label_makes_a_server_error_resumable() -> None:
    assert is_resumable_error(_server_error(6, ("ResumableChangeStreamError",)), 21)
    assert not is_resumable_error(_server_error(6), 21)  # on the allow list, but 4.4+ needs the label
    assert not is_resumable_error(_server_error(280, ("NonResumableChangeStreamError",)), 21)


def test_before_4_4_the_allow_listed_codes_resume() -> None:
    for code in (6, 7, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436, 63, 150, 13388, 234, 133):
        assert is_resumable_error(_server_error(code, wire=8), 8), code
    assert not is_resumable_error(_server_error(216, wire=8), 8)  # ElectionInProgress
    assert not is_resumable_error(_server_error(11000, ("ResumableChangeStreamError",), wire=8), 8)


def test_the_failed_commands_wire_version_decides_not_the_current_one() -> None:
    # The error's own wire version (from the connection the getMore used) wins over the stream's.
    assert is_resumable_error(_server_error(189, wire=8), 21)
    assert not is_resumable_error(_server_error(189, wire=9), 8)


def test_a_not_primary_reply_is_judged_as_a_server_error() -> None:
    # NotPrimaryError is a ConnectionFailure, but a server said it: label / allow-list rules apply.
    labelled = NotPrimaryError("not primary", {"ok": 0, "code": 10107, "errorLabels": ["ResumableChangeStreamError"]})
    unlabelled = NotPrimaryError("not primary", {"ok": 0, "code": 10107})
    assert is_resumable_error(labelled, 21)
    assert not is_resumable_error(unlabelled, 21)
    assert is_resumable_error(unlabelled, 8)


# -- pure: the $changeStream stage and the cached resume token ------------------------------------------

def test_stage_options_send_only_what_was_given() -> None:
    assert stage_options() == {}
    assert stage_options("updateLookup", "whenAvailable", True, True) == {
        "fullDocument": "updateLookup", "fullDocumentBeforeChange": "whenAvailable", "showExpandedEvents": True,
        "allChangesForCluster": True}
    assert stage_options(show_expanded_events=False) == {"showExpandedEvents": False}


def test_first_aggregate_sends_the_starting_point_as_given() -> None:
    point = ResumePoint({"fullDocument": "updateLookup"}, resume_after=TOKEN_A, start_after=TOKEN_B,
                        start_at_operation_time=OPERATION_TIME)
    # All three are sent: the server, not the driver, reports that they conflict.
    assert point.stage(21) == {"fullDocument": "updateLookup", "resumeAfter": TOKEN_A, "startAfter": TOKEN_B,
                               "startAtOperationTime": OPERATION_TIME}
    assert ResumePoint({}).stage(21) == {}


def test_resume_uses_the_latest_document_token_with_resume_after() -> None:
    point = ResumePoint({}, start_at_operation_time=OPERATION_TIME)
    point.aggregate_succeeded({"operationTime": Timestamp(1, 1)}, False, None, 21)
    point.document_returned({"_id": TOKEN_A}, last_in_batch=False, post_batch_resume_token=PBRT)
    assert point.resume_token == TOKEN_A  # not the last of its batch: its own _id
    assert point.stage(21) == {"resumeAfter": TOKEN_A}  # startAtOperationTime is dropped
    point.document_returned({"_id": TOKEN_B}, last_in_batch=True, post_batch_resume_token=PBRT)
    assert point.resume_token == PBRT  # the last of its batch: the postBatchResumeToken
    point.document_returned({"_id": TOKEN_B}, last_in_batch=True, post_batch_resume_token=None)
    assert point.resume_token == TOKEN_B


def test_an_empty_batch_caches_its_post_batch_resume_token() -> None:
    point = ResumePoint({})
    point.aggregate_succeeded({"operationTime": OPERATION_TIME}, True, PBRT, 21)
    assert point.resume_token == PBRT and point.operation_time is None
    point.batch_drained(TOKEN_B)
    assert point.resume_token == TOKEN_B
    point.batch_drained(None)  # a reply without one changes nothing
    assert point.resume_token == TOKEN_B
    assert point.stage(21) == {"resumeAfter": TOKEN_B}


def test_start_after_is_kept_until_a_document_is_returned() -> None:
    point = ResumePoint({}, start_after=TOKEN_A, start_at_operation_time=OPERATION_TIME)
    point.aggregate_succeeded({}, True, PBRT, 21)
    assert point.stage(21) == {"startAfter": PBRT}  # startAtOperationTime removed on resume
    point.document_returned({"_id": TOKEN_B}, last_in_batch=False, post_batch_resume_token=None)
    assert point.stage(21) == {"resumeAfter": TOKEN_B}


def test_operation_time_is_saved_only_when_nothing_else_can_resume() -> None:
    reply = {"operationTime": OPERATION_TIME}
    point = ResumePoint({"fullDocument": "default"})
    point.aggregate_succeeded(reply, True, None, 7)
    assert point.operation_time == OPERATION_TIME
    assert point.stage(7) == {"fullDocument": "default", "startAtOperationTime": OPERATION_TIME}
    assert point.stage(6) == {"fullDocument": "default"}  # pre-4.0 servers: the original command

    for skipped in (dict(first_batch_empty=False, post_batch_resume_token=None, max_wire_version=7),
                    dict(first_batch_empty=True, post_batch_resume_token=None, max_wire_version=6)):
        point = ResumePoint({})
        point.aggregate_succeeded(reply, **skipped)
        assert point.operation_time is None and point.stage(7) == {}, skipped

    given = Timestamp(1, 1)  # the user's own startAtOperationTime is the one resumed from
    point = ResumePoint({}, start_at_operation_time=given)
    point.aggregate_succeeded(reply, True, None, 21)
    assert point.stage(21) == {"startAtOperationTime": given}


def test_only_the_first_aggregate_saves_the_operation_time() -> None:
    point = ResumePoint({})
    point.aggregate_succeeded({"operationTime": Timestamp(1, 1)}, False, None, 21)
    point.aggregate_succeeded({"operationTime": OPERATION_TIME}, True, None, 21)
    assert point.operation_time is None


def test_a_document_without_id_is_refused() -> None:
    point = ResumePoint({}, resume_after=TOKEN_A)
    with pytest.raises(InvalidOperation, match="resume token is missing"):
        point.document_returned({"operationType": "insert"}, last_in_batch=True, post_batch_resume_token=PBRT)
    assert point.resume_token == TOKEN_A
    assert "resume token is missing" in MISSING_RESUME_TOKEN_MESSAGE


def test_the_resume_token_copy_is_the_users() -> None:
    token = {"_data": "A"}
    point = ResumePoint({}, resume_after=token)
    token["_data"] = "changed"
    assert point.resume_token == {"_data": "A"}


def test_aggregate_operation_builds_for_the_connection_and_records_the_reply() -> None:
    point = ResumePoint({"fullDocument": "updateLookup", "allChangesForCluster": True})
    operation = ChangeStreamAggregateOperation(point, "admin", None, [{"$match": {"x": 1}}], batch_size=2,
                                               max_await_time_ms=50, comment="c")
    command = operation.build(WireInfo(21))
    assert command.dbname == "admin"
    assert command.body["aggregate"] == 1
    assert command.body["pipeline"] == [
        {"$changeStream": {"fullDocument": "updateLookup", "allChangesForCluster": True}}, {"$match": {"x": 1}}]
    assert command.body["cursor"] == {"batchSize": 2}
    assert "maxAwaitTimeMS" not in command.body and "maxTimeMS" not in command.body
    reply = {"ok": 1, "operationTime": OPERATION_TIME,
             "cursor": {"id": 7, "ns": "admin.$cmd.aggregate", "firstBatch": [], "postBatchResumeToken": PBRT}}
    state = operation.parse(reply, WireInfo(21, address=("h", 1)))
    assert state.tailable and state.await_data
    assert state.get_more_max_time_ms == 50 and state.comment == "c" and state.batch_size == 2
    assert state.collection_name == "$cmd.aggregate"
    assert point.started and point.resume_token == PBRT and point.max_wire_version == 21
    # A resume built later on the same point resumes from the cached token.
    assert operation.build(WireInfo(21)).body["pipeline"][0] == {
        "$changeStream": {"fullDocument": "updateLookup", "resumeAfter": PBRT, "allChangesForCluster": True}}


def test_a_failed_aggregate_records_nothing() -> None:
    point = ResumePoint({}, start_after=TOKEN_A)
    operation = ChangeStreamAggregateOperation(point, "db", "coll", [])
    with pytest.raises(OperationFailure):
        operation.parse({"ok": 0, "code": 40324, "errmsg": "bad stage"}, WireInfo(21))
    assert not point.started and point.stage(21) == {"startAfter": TOKEN_A}


# -- against the server ------------------------------------------------------------------------------

@pytest.fixture
def client(server_uri: str, recorder: Recorder) -> Iterator[MongoClient]:
    """conftest's client, with fast heartbeats: resume tests close connections with fail points, and the
    server is back in the topology as soon as a monitor check finds it."""
    client = MongoClient(server_uri, event_listeners=[recorder], heartbeatFrequencyMS=500)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def database(client: MongoClient) -> Iterator[Any]:
    with scratch_database(client, "change_streams_") as database:
        database.create_collection("coll")
        yield database


@contextlib.contextmanager
def fail_point(client: MongoClient, mode: Any, data: dict) -> Iterator[None]:
    client.admin.command("configureFailPoint", "failCommand", mode=mode, data=data)
    try:
        yield
    finally:
        client.admin.command("configureFailPoint", "failCommand", mode="off")


def _insert_events(stream: ChangeStream, count: int) -> list:
    return [stream.next() for _ in range(count)]


@pytest.mark.server
def test_collection_watch_command_shapes(client: MongoClient, recorder: Recorder, database: Any) -> None:
    coll = database.coll
    recorder.clear()
    with coll.watch([{"$match": {"operationType": "insert"}}], full_document="updateLookup",
                    full_document_before_change="off", max_await_time_ms=100, batch_size=5,
                    collation={"locale": "simple"}, comment="why", show_expanded_events=True) as stream:
        assert isinstance(stream, CollectionChangeStream) and stream.alive
        assert stream.try_next() is None
    [aggregate] = recorder.commands("aggregate")
    assert aggregate["aggregate"] == "coll"
    assert aggregate["pipeline"] == [
        {"$changeStream": {"fullDocument": "updateLookup", "fullDocumentBeforeChange": "off",
                           "showExpandedEvents": True}},
        {"$match": {"operationType": "insert"}}]
    assert aggregate["cursor"] == {"batchSize": 5}
    assert aggregate["collation"] == {"locale": "simple"} and aggregate["comment"] == "why"
    assert "maxTimeMS" not in aggregate and "maxAwaitTimeMS" not in aggregate
    [get_more] = recorder.commands("getMore")
    assert get_more["collection"] == "coll" and get_more["maxTimeMS"] == 100
    assert get_more["batchSize"] == 5 and get_more["comment"] == "why"
    assert recorder.names()[-1] == "killCursors"
    assert not stream.alive


@pytest.mark.server
def test_changes_arrive_in_order_and_the_resume_token_follows(database: Any) -> None:
    coll = database.coll
    stream = coll.watch(max_await_time_ms=50)
    initial = stream.resume_token
    assert initial is not None  # the aggregate's postBatchResumeToken
    coll.insert_one({"_id": 1})
    coll.update_one({"_id": 1}, {"$set": {"a": 2}})
    coll.replace_one({"_id": 1}, {"b": 3})
    coll.delete_one({"_id": 1})
    changes = _insert_events(stream, 4)
    assert [change["operationType"] for change in changes] == ["insert", "update", "replace", "delete"]
    assert changes[1]["updateDescription"]["updatedFields"] == {"a": 2}
    assert stream.resume_token is not None and stream.resume_token != initial
    # With nothing new, try_next returns None after one getMore and keeps the token current.
    assert stream.try_next() is None
    token = stream.resume_token
    stream.close()
    # A new stream resuming after the token sees only what happened since.
    coll.insert_one({"_id": 2})
    with coll.watch(resume_after=token, max_await_time_ms=50) as resumed:
        change = resumed.next()
        assert change["operationType"] == "insert" and change["documentKey"] == {"_id": 2}


@pytest.mark.server
def test_iteration_and_the_returned_token(database: Any) -> None:
    coll = database.coll
    with coll.watch(max_await_time_ms=50) as stream:
        coll.insert_many([{"i": i} for i in range(3)])
        seen = []
        for change in stream:
            seen.append(change["fullDocument"]["i"])
            if len(seen) == 3:
                break
        assert seen == [0, 1, 2]
        token = stream.resume_token
    with coll.watch(start_after=token, max_await_time_ms=50) as after:
        assert after.try_next() is None  # nothing after the last change yet
        coll.insert_one({"i": 3})
        assert after.next()["fullDocument"]["i"] == 3


@pytest.mark.server
def test_database_watch_runs_aggregate_1(client: MongoClient, recorder: Recorder, database: Any) -> None:
    recorder.clear()
    with database.watch(max_await_time_ms=50) as stream:
        assert isinstance(stream, DatabaseChangeStream)
        database.coll.insert_one({"in": "coll"})
        database.other.insert_one({"in": "other"})
        changes = _insert_events(stream, 2)
    assert [change["ns"]["coll"] for change in changes] == ["coll", "other"]
    [aggregate] = recorder.commands("aggregate")
    assert aggregate["aggregate"] == 1 and aggregate["$db"] == database.name
    assert aggregate["pipeline"] == [{"$changeStream": {}}]
    assert all(get_more["collection"] == "$cmd.aggregate" for get_more in recorder.commands("getMore"))


@pytest.mark.server
def test_client_watch_runs_on_admin_for_all_changes(client: MongoClient, recorder: Recorder,
                                                    database: Any) -> None:
    recorder.clear()
    with client.watch([{"$match": {"ns.db": database.name}}], max_await_time_ms=50) as stream:
        assert isinstance(stream, ClusterChangeStream)
        database.coll.insert_one({"x": 1})
        change = stream.next()
    assert change["ns"] == {"db": database.name, "coll": "coll"}
    [aggregate] = recorder.commands("aggregate")
    assert aggregate["$db"] == "admin" and aggregate["aggregate"] == 1
    assert aggregate["pipeline"][0] == {"$changeStream": {"allChangesForCluster": True}}


@pytest.mark.server
def test_invalidate_closes_the_stream(database: Any) -> None:
    coll = database.coll
    stream = coll.watch(max_await_time_ms=50)
    coll.insert_one({"x": 1})
    coll.drop()
    kinds = [change["operationType"] for change in stream]
    assert kinds == ["insert", "drop", "invalidate"]
    assert not stream.alive
    assert stream.try_next() is None
    with pytest.raises(StopIteration):
        stream.next()


@pytest.mark.server
def test_resume_after_network_error_keeps_the_session_and_loses_nothing(
        client: MongoClient, recorder: Recorder, database: Any) -> None:
    coll = database.coll
    stream = coll.watch(max_await_time_ms=50, batch_size=1)
    coll.insert_many([{"i": 0}, {"i": 1}])
    assert stream.next()["fullDocument"]["i"] == 0
    token = stream.resume_token
    recorder.clear()
    with fail_point(client, {"times": 1}, {"failCommands": ["getMore"], "closeConnection": True}):
        assert stream.next()["fullDocument"]["i"] == 1
    started = [event for event in recorder.started_events if event.command_name in ("getMore", "aggregate")]
    assert [event.command_name for event in started][:2] == ["getMore", "aggregate"]
    resume = started[1].command
    assert resume["pipeline"][0] == {"$changeStream": {"resumeAfter": token}}
    assert resume["cursor"] == {"batchSize": 1}
    assert len({repr(event.command["lsid"]) for event in started}) == 1  # one session throughout
    stream.close()


@pytest.mark.server
def test_resume_with_an_implicit_session_sends_no_after_cluster_time(
        client: MongoClient, recorder: Recorder, database: Any) -> None:
    coll = database.coll
    stream = coll.watch(max_await_time_ms=50)
    coll.insert_one({"i": 0})
    stream.next()
    recorder.clear()
    with fail_point(client, {"times": 1}, {"failCommands": ["getMore"], "closeConnection": True}):
        coll.insert_one({"i": 1})
        stream.next()
    stream.close()
    [resume] = recorder.commands("aggregate")
    assert "afterClusterTime" not in resume.get("readConcern", {})


@pytest.mark.server
def test_resume_with_start_after_before_any_document(client: MongoClient, recorder: Recorder,
                                                     database: Any) -> None:
    coll = database.coll
    with coll.watch(max_await_time_ms=50) as probe:
        coll.insert_one({"i": 0})
        token = probe.next()["_id"]
    stream = coll.watch(start_after=token, max_await_time_ms=50)
    recorder.clear()
    labelled = {"failCommands": ["getMore"], "errorCode": 6, "errorLabels": ["ResumableChangeStreamError"]}
    with fail_point(client, {"times": 1}, labelled):
        assert stream.try_next() is None  # failed getMore, resumed: the new first batch is empty
    assert stream.alive
    [resume] = recorder.commands("aggregate")
    stage = resume["pipeline"][0]["$changeStream"]
    assert set(stage) == {"startAfter"}  # still startAfter: no document has been returned yet
    coll.insert_one({"i": 1})
    assert stream.next()["fullDocument"]["i"] == 1
    recorder.clear()
    with fail_point(client, {"times": 1}, labelled):
        stream.try_next()
    [resume] = recorder.commands("aggregate")
    assert set(resume["pipeline"][0]["$changeStream"]) == {"resumeAfter"}
    stream.close()


@pytest.mark.server
def test_consecutive_resumes_and_a_failed_resume(client: MongoClient, recorder: Recorder, database: Any) -> None:
    coll = database.coll
    stream = coll.watch(max_await_time_ms=50)
    recorder.clear()
    with fail_point(client, {"times": 2}, {"failCommands": ["getMore"], "closeConnection": True}):
        assert stream.try_next() is None
        assert stream.try_next() is None
    assert recorder.names().count("aggregate") == 2 and stream.alive
    # A resume whose aggregate fails on the network leaves the stream open; the next call resumes.
    # (getMore, then the resume's aggregate and its retry: three failures in a row.)
    recorder.clear()
    with fail_point(client, {"times": 3}, {"failCommands": ["getMore", "aggregate"], "closeConnection": True}):
        with pytest.raises(AutoReconnect):
            stream.try_next()
    assert [name for name in recorder.names() if name in ("getMore", "aggregate")] == [
        "getMore", "aggregate", "aggregate"]
    assert stream.alive
    coll.insert_one({"x": 1})
    assert stream.next()["fullDocument"]["x"] == 1
    stream.close()


@pytest.mark.server
def test_a_non_resumable_error_closes_the_stream(client: MongoClient, recorder: Recorder, database: Any) -> None:
    stream = database.coll.watch(max_await_time_ms=50)
    recorder.clear()
    with fail_point(client, {"times": 1}, {"failCommands": ["getMore"], "errorCode": 216}):
        with pytest.raises(OperationFailure) as caught:
            stream.try_next()
    assert caught.value.code == 216
    assert not stream.alive
    assert "aggregate" not in recorder.names()  # no resume
    with pytest.raises(StopIteration):
        next(stream)


@pytest.mark.server
def test_an_aggregate_error_is_raised_by_watch(database: Any) -> None:
    with pytest.raises(OperationFailure) as caught:
        database.coll.watch([{"$unsupported": "foo"}])
    assert caught.value.code == 40324
    with pytest.raises(OperationFailure):
        database.coll.watch(resume_after={"_data": "not a token"})


@pytest.mark.server
def test_a_change_without_id_raises_and_closes(client: MongoClient, recorder: Recorder, database: Any) -> None:
    stream = database.coll.watch(max_await_time_ms=50)
    token = stream.resume_token
    # Servers refuse to project _id out themselves (error 280); feed the driver such a document directly.
    stream._cursor._buffer.append({"operationType": "insert"})
    recorder.clear()
    with pytest.raises(InvalidOperation, match="resume token is missing"):
        stream.try_next()
    assert not stream.alive
    assert stream.resume_token == token
    assert recorder.names() == ["killCursors"]


@pytest.mark.server
def test_a_timeout_leaves_the_stream_open_and_the_next_call_resumes(
        client: MongoClient, recorder: Recorder, database: Any) -> None:
    coll = database.coll
    stream = coll.watch(max_await_time_ms=3000)
    recorder.clear()
    with pytest.raises(gevent.Timeout):
        with gevent.Timeout(0.2):
            stream.next()  # the server holds the getMore for up to 3 s
    assert stream.alive
    coll.insert_one({"x": 1})
    assert stream.next()["fullDocument"]["x"] == 1
    names = recorder.names()
    assert names[0] == "getMore" and "aggregate" in names
    resume = recorder.commands("aggregate")[0]
    assert set(resume["pipeline"][0]["$changeStream"]) == {"resumeAfter"}
    stream.close()


@pytest.mark.server
def test_sessions_implicit_is_returned_on_close_explicit_is_kept(client: MongoClient, recorder: Recorder,
                                                                 database: Any) -> None:
    coll = database.coll
    recorder.clear()
    stream = coll.watch(max_await_time_ms=50)
    stream.try_next()
    stream.close()
    stream.close()  # idempotent
    coll.find_one()
    lsids = [event.command.get("lsid") for event in recorder.started_events]
    assert recorder.names() == ["aggregate", "getMore", "killCursors", "find"]
    assert lsids[0] is not None and lsids == [lsids[0]] * 4  # the stream's session was back in the pool

    with client.start_session() as session:
        recorder.clear()
        with coll.watch(max_await_time_ms=50, session=session) as stream:
            stream.try_next()
        assert not session.has_ended
        lsids = [event.command.get("lsid") for event in recorder.started_events]
        assert lsids and all(lsid == session.session_id for lsid in lsids)


@pytest.mark.server
def test_an_abandoned_stream_does_no_io_and_is_cleaned_up_later(client: MongoClient, recorder: Recorder,
                                                                database: Any) -> None:
    coll = database.coll
    recorder.clear()
    stream = coll.watch(max_await_time_ms=50)
    del stream
    gc.collect()
    assert recorder.names() == ["aggregate"]  # nothing sent from __del__
    coll.find_one()
    assert recorder.names() == ["aggregate", "killCursors", "find"]
    lsids = [event.command.get("lsid") for event in recorder.started_events]
    assert lsids[0] == lsids[2]  # the stream's implicit session went back to the pool


@pytest.mark.server
def test_watch_on_a_standalone_server_is_the_servers_error(fresh_server: Any) -> None:
    server = fresh_server(standalone=True)
    with MongoClient(server.uri) as client:
        with pytest.raises(OperationFailure) as caught:
            client.db.coll.watch()
    assert caught.value.code == 40573


@pytest.mark.server
def test_arguments_are_checked_before_anything_is_sent(client: MongoClient, recorder: Recorder) -> None:
    coll = client.change_streams_args.coll
    recorder.clear()
    with pytest.raises(TypeError):
        coll.watch({"$match": {}})
    with pytest.raises(TypeError):
        coll.watch(full_document=1)
    with pytest.raises(TypeError):
        coll.watch(full_document_before_change=True)
    with pytest.raises(ValueError):
        coll.watch(batch_size=-1)
    with pytest.raises(TypeError):
        coll.watch(max_await_time_ms="1")
    with pytest.raises(TypeError):
        coll.watch(collation=1)
    assert recorder.names() == []
