"""Cursor, CommandCursor and the raw batch cursors against SecantusDB: batching, limits, builders, kills."""

from __future__ import annotations

import gc

import gevent
import pytest

from greenmongo import bson
from greenmongo.command_cursor import CommandCursor, RawBatchCommandCursor
from greenmongo.cursor import Cursor, CursorType, RawBatchCursor
from greenmongo.errors import ConnectionFailure, InvalidOperation, OperationFailure
from tests.api_support import scratch_database


@pytest.fixture
def coll(client, recorder):
    with scratch_database(client, "api_cursor_") as database:
        collection = database.items
        collection.insert_many([{"_id": i, "x": i, "y": i % 3, "s": "abc"[i % 3]} for i in range(25)])
        recorder.clear()
        yield collection


# -- batching ------------------------------------------------------------------------------------------


def test_batches_are_fetched_only_when_needed(coll, recorder):
    cursor = coll.find({}, batch_size=10)
    assert isinstance(cursor, Cursor) and recorder.names() == []  # lazy: nothing sent yet
    assert cursor.alive and cursor.cursor_id is None and cursor.address is None and cursor.retrieved == 0
    first = [next(cursor) for _ in range(10)]
    assert [doc["_id"] for doc in first] == list(range(10))
    assert recorder.names() == ["find"] and cursor.retrieved == 10 and cursor.cursor_id
    next(cursor)
    assert recorder.names() == ["find", "getMore"] and cursor.retrieved == 20
    rest = list(cursor)
    assert len(rest) == 14 and recorder.names() == ["find", "getMore", "getMore"]
    assert not cursor.alive and cursor.cursor_id == 0
    get_more = recorder.commands("getMore")[0]
    assert get_more["batchSize"] == 10 and get_more["collection"] == "items"
    assert get_more["getMore"] == recorder.succeeded_events[0].reply["cursor"]["id"]
    # Every getMore went to the server that created the cursor.
    assert {event.connection_id for event in recorder.started_events} == {cursor.address}
    assert "killCursors" not in recorder.names()


def test_limits(coll, recorder):
    assert len(list(coll.find(batch_size=10, limit=15))) == 15
    assert recorder.commands("find")[0]["limit"] == 15
    assert recorder.commands("getMore")[0]["batchSize"] == 5  # only what is left of the limit
    recorder.clear()
    assert len(list(coll.find(batch_size=5, limit=5))) == 5
    assert recorder.commands("find")[0]["batchSize"] == 6  # limit + 1: the server closes the cursor itself
    assert recorder.names() == ["find"]
    recorder.clear()
    single = coll.find(batch_size=2).limit(-3)
    assert len(list(single)) == 3
    assert recorder.commands("find")[0]["singleBatch"] is True and recorder.names() == ["find"]
    recorder.clear()
    assert len(list(coll.find().skip(20))) == 5 and recorder.commands("find")[0]["skip"] == 20
    assert list(coll.find().limit(0).skip(24)) == [{"_id": 24, "x": 24, "y": 0, "s": "a"}]
    with pytest.raises(TypeError):
        coll.find().limit("1")
    with pytest.raises(ValueError):
        coll.find().skip(-1)
    with pytest.raises(ValueError):
        coll.find().batch_size(-1)
    with pytest.raises(ValueError):
        coll.find(batch_size=-1)


def test_sort_and_projection_forms(coll, recorder):
    def ids(cursor) -> list:
        return [doc["_id"] for doc in cursor][:4]

    assert ids(coll.find().sort("x", -1)) == [24, 23, 22, 21]
    assert ids(coll.find().sort("x")) == [0, 1, 2, 3]
    assert ids(coll.find().sort([("y", 1), ("x", -1)])) == [24, 21, 18, 15]
    assert ids(coll.find().sort({"y": -1, "x": 1})) == [2, 5, 8, 11]
    assert ids(coll.find(sort=[("x", -1)])) == [24, 23, 22, 21]
    assert ids(coll.find(sort={"x": -1})) == [24, 23, 22, 21]
    assert [command["sort"] for command in recorder.commands("find")] == [
        {"x": -1}, {"x": 1}, {"y": 1, "x": -1}, {"y": -1, "x": 1}, {"x": -1}, {"x": -1}]
    assert coll.find_one({"_id": 3}, {"x": 1}) == {"_id": 3, "x": 3}
    assert coll.find_one({"_id": 3}, {"x": 0, "_id": 0}) == {"y": 0, "s": "a"}
    assert coll.find_one({"_id": 3}, ["s", "y"]) == {"_id": 3, "y": 0, "s": "a"}
    assert coll.find_one({"_id": 3}, projection=("s",)) == {"_id": 3, "s": "a"}
    with pytest.raises(TypeError):
        coll.find({}, 5)
    with pytest.raises(TypeError):
        coll.find().sort(5)
    with pytest.raises(TypeError):
        coll.find("not a filter")


def test_find_options_reach_the_command(coll, recorder):
    coll.create_index("x")
    recorder.clear()
    list(coll.find({"x": {"$gte": 0}}).hint([("x", 1)]).max_time_ms(5000).comment("c")
         .collation({"locale": "en"}).allow_disk_use(True).min([("x", 3)]).max([("x", 6)]))
    find = recorder.commands("find")[0]
    assert find["hint"] == {"x": 1} and find["maxTimeMS"] == 5000 and find["comment"] == "c"
    assert find["collation"] == {"locale": "en"} and find["allowDiskUse"] is True
    assert find["min"] == {"x": 3} and find["max"] == {"x": 6}
    docs = list(coll.find({}, hint="x_1", min={"x": 3}, max={"x": 6}))
    assert [doc["_id"] for doc in docs] == [3, 4, 5]
    assert list(coll.find({"_id": 1}, return_key=True)) == [{"_id": 1}]
    assert "$recordId" in next(coll.find({"_id": 1}, show_record_id=True))
    assert [d["_id"] for d in coll.find({"$expr": {"$eq": ["$x", "$$v"]}}, let={"v": 7})] == [7]
    list(coll.find({}, no_cursor_timeout=True, allow_partial_results=True, limit=1))
    flags = recorder.commands("find")[-1]
    assert flags["noCursorTimeout"] is True and flags["allowPartialResults"] is True
    with pytest.raises(InvalidOperation):
        list(coll.find().min([("x", 1)]))  # min/max need a hint
    with pytest.raises(TypeError):
        coll.find().min({"x": 1})
    with pytest.raises(OperationFailure):
        list(coll.find().where("this.x == 1"))  # sent as $where: SecantusDB has no JavaScript
    assert recorder.commands("find")[-1]["filter"]["$where"] == bson.Code("this.x == 1")


def test_exhaust_cursor_reads_every_batch(coll, recorder):
    assert len(list(coll.find(cursor_type=CursorType.EXHAUST, batch_size=10))) == 25
    with pytest.raises(InvalidOperation):
        coll.find(cursor_type=CursorType.EXHAUST).limit(1)


def test_add_and_remove_option_flags(coll, recorder):
    cursor = coll.find().add_option(16).add_option(128)
    list(cursor.remove_option(128).limit(1))
    find = recorder.commands("find")[0]
    assert find["noCursorTimeout"] is True and "allowPartialResults" not in find


def test_builders_are_refused_once_the_query_ran(coll):
    cursor = coll.find(batch_size=2)
    next(cursor)
    for build in (lambda: cursor.limit(1), lambda: cursor.sort("x"), lambda: cursor.skip(1),
                  lambda: cursor.batch_size(3), lambda: cursor.hint("_id_"), lambda: cursor.comment("x")):
        with pytest.raises(InvalidOperation):
            build()
    cursor.close()


# -- indexing, rewind, clone, helpers ----------------------------------------------------------------


def test_getitem_index_and_slices(coll, recorder):
    cursor = coll.find().sort("x")
    assert cursor[3]["_id"] == 3 and cursor[24]["_id"] == 24
    with pytest.raises(IndexError):
        cursor[25]
    with pytest.raises(IndexError):
        cursor[-1]
    with pytest.raises(IndexError):
        cursor[::2]
    with pytest.raises(TypeError):
        cursor["a"]
    assert [doc["_id"] for doc in coll.find().sort("x")[5:8]] == [5, 6, 7]
    assert [doc["_id"] for doc in coll.find().sort("x")[22:]] == [22, 23, 24]
    recorder.clear()
    empty = coll.find()[3:3]
    assert list(empty) == [] and not empty.alive and recorder.names() == []


def test_rewind_and_clone(coll, recorder):
    cursor = coll.find({"y": 0}, batch_size=2).sort("x")
    first = [doc["_id"] for doc in cursor]
    assert [doc["_id"] for doc in cursor] == []  # exhausted
    assert [doc["_id"] for doc in cursor.rewind()] == first
    assert recorder.names().count("find") == 2
    partial = coll.find(batch_size=2)
    next(partial)
    clone = partial.clone()
    assert clone is not partial and clone.retrieved == 0
    assert len(list(clone)) == 25 and len(list(partial)) == 24
    recorder.clear()
    live = coll.find(batch_size=2)
    next(live)
    live.rewind()  # the open server cursor is killed
    assert recorder.names() == ["find", "killCursors"]
    assert len(live.to_list()) == 25


def test_explain_distinct_to_list(coll, recorder):
    plan = coll.find({"x": {"$gt": 3}}).limit(2).explain()
    assert plan["ok"] == 1 and "queryPlanner" in plan
    explain = recorder.commands("explain")[0]
    assert explain["explain"]["find"] == "items" and explain["explain"]["limit"] == 2
    assert sorted(coll.find({"y": 1}).distinct("s")) == ["b"]
    assert recorder.commands("distinct")[0]["query"] == {"y": 1}
    cursor = coll.find(batch_size=4).sort("x")
    assert [doc["_id"] for doc in cursor.to_list(6)] == [0, 1, 2, 3, 4, 5]
    assert len(cursor.to_list()) == 19 and cursor.to_list() == []
    with pytest.raises(ValueError):
        coll.find().to_list(0)


def test_cursor_properties_and_context_manager(coll, recorder):
    with coll.find(batch_size=3) as cursor:
        next(cursor)
        cursor_id = cursor.cursor_id
        assert cursor.collection == coll and cursor.session is None and cursor.retrieved == 3
        assert cursor.address == next(iter(coll.database.client.nodes))
    assert not cursor.alive
    kills = recorder.commands("killCursors")
    assert kills == [{"killCursors": "items", "cursors": [bson.Int64(cursor_id)], "$db": coll.database.name}]
    with pytest.raises(StopIteration):
        next(cursor)


# -- killing cursors --------------------------------------------------------------------------------------


def test_close_kills_the_server_cursor(coll, recorder):
    cursor = coll.find(batch_size=2)
    next(cursor)
    cursor.close()
    assert recorder.names() == ["find", "killCursors"]
    assert recorder.succeeded_events[-1].reply["cursorsKilled"] == [cursor.cursor_id]
    cursor.close()  # idempotent
    assert recorder.names() == ["find", "killCursors"]
    coll.find(batch_size=2).close()  # never started: nothing to kill
    exhausted = coll.find()
    list(exhausted)
    exhausted.close()  # the server already closed it
    assert recorder.names() == ["find", "killCursors", "find"]


def test_garbage_collected_cursor_is_killed_without_blocking(coll, recorder):
    cursor = coll.find(batch_size=2)
    next(cursor)
    cursor_id = cursor.cursor_id
    del cursor
    gc.collect()
    assert recorder.names() == ["find"]  # __del__ did no I/O
    coll.estimated_document_count()  # the next operation sends the kill first
    assert recorder.names() == ["find", "killCursors", "count"]
    assert recorder.commands("killCursors")[0]["cursors"] == [bson.Int64(cursor_id)]
    command_cursor = coll.aggregate([], batchSize=1)
    aggregate_id = command_cursor.cursor_id
    del command_cursor
    gc.collect()
    coll.estimated_document_count()
    assert recorder.commands("killCursors")[1]["cursors"] == [bson.Int64(aggregate_id)]


def test_interrupted_get_more_leaves_the_kill_to_the_client(coll, recorder):
    capped = coll.database.create_collection("capped", capped=True, size=100000)
    capped.insert_one({"_id": 1})
    cursor = capped.find(cursor_type=CursorType.TAILABLE_AWAIT).max_await_time_ms(3000)
    assert next(cursor) == {"_id": 1}
    cursor_id = cursor.cursor_id
    recorder.clear()
    with gevent.Timeout(0.2, False):
        cursor.try_next()
    assert not cursor.alive and recorder.names() == ["getMore"]
    capped.estimated_document_count()
    assert recorder.commands("killCursors")[0]["cursors"] == [bson.Int64(cursor_id)]


def _fail_next_get_more(client, **data) -> None:
    client.admin.command("configureFailPoint", "failCommand", mode={"times": 1},
                         data={"failCommands": ["getMore"], **data})


def test_get_more_errors_and_the_kill_that_follows(coll, recorder):
    client = coll.database.client
    cursor = coll.find(batch_size=2)
    next(cursor), next(cursor)
    _fail_next_get_more(client, errorCode=2)  # BadValue: the server still holds the cursor
    recorder.clear()
    with pytest.raises(OperationFailure):
        next(cursor)
    assert recorder.names() == ["getMore", "killCursors"] and not cursor.alive
    gone = coll.find(batch_size=2)
    next(gone), next(gone)
    _fail_next_get_more(client, errorCode=43)  # CursorNotFound: nothing left to kill
    recorder.clear()
    with pytest.raises(OperationFailure):
        next(gone)
    assert recorder.names() == ["getMore"] and not gone.alive
    dropped = coll.find(batch_size=2)
    next(dropped), next(dropped)
    cursor_id = dropped.cursor_id
    _fail_next_get_more(client, closeConnection=True)
    recorder.clear()
    with pytest.raises(ConnectionFailure):
        next(dropped)
    assert recorder.names() == ["getMore"]  # the kill waits for an operation once the server is back
    coll.estimated_document_count()  # waits for the rediscovery; the kill never makes an operation wait
    coll.estimated_document_count()
    assert recorder.commands("killCursors")[0]["cursors"] == [bson.Int64(cursor_id)]


# -- tailable cursors --------------------------------------------------------------------------------------


def test_tailable_cursor_waits_for_new_documents(coll, recorder):
    capped = coll.database.create_collection("capped", capped=True, size=100000)
    capped.insert_many([{"_id": 1}, {"_id": 2}])
    recorder.clear()
    cursor = capped.find(cursor_type=CursorType.TAILABLE, batch_size=5)
    assert [doc["_id"] for doc in cursor] == [1, 2]  # StopIteration at the end of the data...
    assert cursor.alive  # ...but the cursor stays open
    assert cursor.try_next() is None and cursor.alive
    capped.insert_one({"_id": 3})
    assert cursor.try_next() == {"_id": 3}
    assert recorder.commands("find")[0]["tailable"] is True and "awaitData" not in recorder.commands("find")[0]
    cursor.close()
    assert recorder.names()[-1] == "killCursors"
    recorder.clear()
    waiting = capped.find(cursor_type=CursorType.TAILABLE_AWAIT).max_await_time_ms(50)
    assert len(list(waiting)) == 3 and waiting.alive
    assert waiting.try_next() is None
    assert recorder.commands("find")[0]["awaitData"] is True
    assert all(command["maxTimeMS"] == 50 for command in recorder.commands("getMore"))
    waiting.close()
    ignored = capped.find().max_await_time_ms(50)  # only TAILABLE_AWAIT cursors use it
    list(ignored)
    assert "maxTimeMS" not in recorder.commands("find")[-1]


# -- command cursors ------------------------------------------------------------------------------------


def test_command_cursor_iteration(coll, recorder):
    cursor = coll.aggregate([{"$sort": {"x": 1}}], batchSize=5)
    assert isinstance(cursor, CommandCursor) and cursor.alive and cursor.cursor_id
    assert recorder.names() == ["aggregate"]
    assert [doc["_id"] for doc in cursor.to_list(7)] == list(range(7))
    assert recorder.names() == ["aggregate", "getMore"]
    assert cursor.try_next()["_id"] == 7
    cursor.batch_size(20)
    assert len(list(cursor)) == 17 and not cursor.alive and cursor.try_next() is None
    assert recorder.commands("getMore")[-1]["batchSize"] == 20 and cursor.retrieved == 25
    with pytest.raises(ValueError):
        cursor.batch_size(-1)
    with coll.aggregate([], batchSize=2) as open_cursor:
        next(open_cursor)
    assert recorder.names()[-1] == "killCursors" and not open_cursor.alive
    assert [doc["name"] for doc in coll.list_indexes()] == ["_id_"]


# -- raw batches ------------------------------------------------------------------------------------------------


def test_raw_batch_cursors(coll, recorder):
    cursor = coll.find_raw_batches({"y": 0}, batch_size=3, sort=[("x", 1)])
    assert isinstance(cursor, RawBatchCursor)
    batches = list(cursor)
    assert all(isinstance(batch, bytes) for batch in batches)
    assert [len(bson.decode_all(batch)) for batch in batches] == [3, 3, 3]
    assert [doc["_id"] for batch in batches for doc in bson.decode_all(batch)] == list(range(0, 25, 3))
    with pytest.raises(InvalidOperation):
        cursor[0]
    assert coll.find_raw_batches().explain()["ok"] == 1  # explain decodes as usual
    limited = list(coll.find_raw_batches(batch_size=4, limit=6))
    assert [len(bson.decode_all(batch)) for batch in limited] == [4, 2]
    aggregated = coll.aggregate_raw_batches([{"$match": {"y": 1}}], batchSize=4)
    assert isinstance(aggregated, RawBatchCommandCursor)
    assert [len(bson.decode_all(batch)) for batch in aggregated] == [4, 4]
    with pytest.raises(InvalidOperation):
        aggregated[0]
