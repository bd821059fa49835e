"""find / getMore / killCursors / explain: command documents, cursor arithmetic, reply parsing."""

from __future__ import annotations

import pytest

from greenmongo.bson import Int64, ObjectId
from greenmongo.bson.codec_options import CodecOptions
from greenmongo.bson.son import SON
from greenmongo.errors import (CursorNotFound, ExecutionTimeout, InvalidOperation, NotPrimaryError, OperationFailure,
                               ProtocolError)
from greenmongo.operations.base import ExecutionFields, WireInfo
from greenmongo.operations.collation import Collation, CollationStrength
from greenmongo.operations.cursor_state import CursorState, GetMoreOperation, KillCursorsOperation
from greenmongo.operations.find import CursorType, ExplainOperation, FindOneOperation, FindOperation, FindSpec
from greenmongo.options.read_concern import ReadConcern
from greenmongo.options.read_preferences import ReadPreference, Secondary

W = WireInfo(max_wire_version=25, address=("h", 27017))
OLD = WireInfo(max_wire_version=8)


_OPERATION_OPTIONS = ("read_concern", "read_preference", "codec_options", "raw_data")


def find(**kwargs):
    options = {name: kwargs.pop(name) for name in _OPERATION_OPTIONS if name in kwargs}
    return FindOperation("db", "coll", FindSpec(**kwargs), **options)


def body(op, wire=W):
    return op.build(wire).body


def test_minimal_find_and_contract_attributes():
    op = find()
    assert body(op) == {"find": "coll", "filter": {}}
    assert op.name == "find" and op.is_read and not op.is_write
    assert op.retryable and op.supports_read_concern and not op.supports_write_concern
    assert op.read_preference == ReadPreference.PRIMARY
    command = op.build(W)
    assert command.dbname == "db" and command.acknowledged and not command.sequences


@pytest.mark.parametrize("filter", [None, {}, {"_id": 7}, SON([("a", 1), ("b", 2)])])
def test_find_one_spec_is_the_validated_spec_of_a_filter_and_limit_minus_one(filter):
    fast = FindSpec.find_one(filter)
    assert fast == FindSpec(filter, limit=-1).validated()
    assert fast is not FindSpec.find_one(filter)  # a new spec each time: nothing shared between calls
    operation = FindOperation("db", "coll", fast, validated=True)
    assert body(operation) == {"find": "coll", "filter": filter or {}, "limit": 1, "singleBatch": True}
    with pytest.raises(TypeError, match="filter must be an instance of dict"):
        FindSpec.find_one([("a", 1)])


@pytest.mark.parametrize("filter", [None, {}, {"_id": 7}, SON([("a", 1), ("b", 2)]),
                                    {"$query": {"a": 1}, "$orderby": {"a": -1}, "$comment": "legacy"}])
@pytest.mark.parametrize("read_concern", [None, ReadConcern(), ReadConcern("majority")])
@pytest.mark.parametrize("raw_data", [None, True])
@pytest.mark.parametrize("wire", [W, OLD, WireInfo(max_wire_version=27)])
def test_plain_find_one_writes_what_the_general_build_writes(filter, read_concern, raw_data, wire):
    """FindOneOperation(plain=True) writes the find_one template's command at once; the same keys, values and
    order as FindOperation.build, whatever the filter (a legacy $query too), readConcern, rawData and wire."""
    def build(plain):
        operation = FindOneOperation("db", "coll", FindSpec.find_one(filter), validated=True, plain=plain,
                                     read_concern=read_concern, raw_data=raw_data)
        return operation.build(wire)

    fast, general = build(True), build(False)
    assert (fast.dbname, list(fast.body.items())) == (general.dbname, list(general.body.items()))
    assert list(general.body)[:2] == ["find", "filter"] or "$query" in (filter or {})
    assert ("readConcern" in fast.body) == (read_concern is not None and not read_concern.is_server_default)


def test_find_one_operation_returns_the_closed_cursors_batch_and_a_cursor_state_only_when_left_open():
    operation = FindOneOperation("db", "coll", FindSpec.find_one({"a": 1}), validated=True)
    closed = {"ok": 1.0, "cursor": {"id": Int64(0), "ns": "db.coll", "firstBatch": [{"_id": 1}, {"_id": 2}]}}
    assert operation.parse(closed, W) == [{"_id": 1}]  # cut at the limit, as a CursorState would cut it
    assert operation.parse({"ok": 1, "cursor": {"id": 0, "ns": "db.coll", "firstBatch": []}}, W) == []
    left_open = {"ok": 1.0, "cursor": {"id": Int64(5), "ns": "db.coll", "firstBatch": [{"_id": 1}]}}
    state = operation.parse(left_open, W)
    assert isinstance(state, CursorState) and state.cursor_id == 5 and state.first_batch == [{"_id": 1}]
    with pytest.raises(OperationFailure):
        operation.parse({"ok": 0, "code": 2, "errmsg": "bad"}, W)
    for malformed in ({"ok": 1, "cursor": {"id": 0, "ns": "db.coll", "firstBatch": [1]}},
                      {"ok": 1, "cursor": {"id": "x", "ns": "db.coll", "firstBatch": []}},
                      {"ok": 1, "cursor": {"id": 0, "ns": "db.coll"}}, {"ok": 1}):
        with pytest.raises(ProtocolError):
            operation.parse(malformed, W)


def test_every_find_option_is_sent_under_its_command_name():
    op = find(filter={"x": 1}, projection={"a": 1}, skip=3, limit=10, no_cursor_timeout=True,
              cursor_type=CursorType.TAILABLE_AWAIT, sort=[("a", 1), ("b", -1)], allow_partial_results=True,
              oplog_replay=True, batch_size=4, collation=Collation("fr", strength=CollationStrength.PRIMARY),
              hint="a_1", max_time_ms=500, max_await_time_ms=100, max={"a": 9}, min={"a": 1},
              return_key=True, show_record_id=False, comment={"c": 1}, allow_disk_use=True, let={"v": 2},
              read_concern=ReadConcern("majority"))
    assert body(op) == {
        "find": "coll", "filter": {"x": 1}, "sort": {"a": 1, "b": -1}, "projection": {"a": 1}, "hint": "a_1",
        "skip": 3, "limit": 10, "batchSize": 4, "comment": {"c": 1}, "maxTimeMS": 500,
        "readConcern": {"level": "majority"}, "max": {"a": 9}, "min": {"a": 1}, "returnKey": True,
        "showRecordId": False, "tailable": True, "oplogReplay": True, "noCursorTimeout": True,
        "awaitData": True, "allowPartialResults": True, "collation": {"locale": "fr", "strength": 1},
        "allowDiskUse": True, "let": {"v": 2},
    }
    assert list(body(op))[:2] == ["find", "filter"]


@pytest.mark.parametrize("sort, expected", [
    ([("a", 1), ("b", -1)], {"a": 1, "b": -1}),
    ((("a", -1),), {"a": -1}),
    ({"a": 1, "b": -1}, {"a": 1, "b": -1}),
    (["a", "b"], {"a": 1, "b": 1}),
    ("a", {"a": 1}),
    ([("score", {"$meta": "textScore"})], {"score": {"$meta": "textScore"}}),
])
def test_sort_spellings(sort, expected):
    assert body(find(sort=sort))["sort"] == expected


@pytest.mark.parametrize("projection, expected", [
    (["a", "b.c"], {"a": 1, "b.c": 1}),
    (("a",), {"a": 1}),
    ({"a": 0}, {"a": 0}),
    ([], {}),
])
def test_projection_spellings(projection, expected):
    assert body(find(projection=projection))["projection"] == expected


@pytest.mark.parametrize("hint, expected", [
    ("a_1", "a_1"),
    ([("a", 1), ("b", -1)], {"a": 1, "b": -1}),
    ({"a": 1}, {"a": 1}),
])
def test_hint_spellings(hint, expected):
    assert body(find(hint=hint))["hint"] == expected


def test_bad_arguments_raise_pymongo_errors():
    with pytest.raises(TypeError):
        find(filter=[1])
    with pytest.raises(TypeError):
        find(projection=5)
    with pytest.raises(TypeError):
        find(sort=5)
    with pytest.raises(ValueError):
        find(sort=[])
    with pytest.raises(TypeError):
        find(sort=[(1, 1)])
    with pytest.raises(TypeError):
        find(limit="3")
    with pytest.raises(ValueError):
        find(skip=-1)
    with pytest.raises(ValueError):
        find(cursor_type=5)
    with pytest.raises(TypeError):
        find(no_cursor_timeout=1)
    with pytest.raises(InvalidOperation):
        find(cursor_type=CursorType.EXHAUST, limit=3)
    with pytest.raises(TypeError):
        find(collation=5)


# validated() tests the exact types first and leaves everything else to the validators: these are the
# values that must still reach them (bool is not an int, 0/1 are not booleans, subclasses are fine).
@pytest.mark.parametrize("options", [
    {"skip": False}, {"limit": True}, {"batch_size": False}, {"limit": 1.0}, {"skip": "1"},
    {"no_cursor_timeout": 0}, {"allow_partial_results": 1}, {"oplog_replay": None},
    {"max_time_ms": True}, {"max_time_ms": "5"}, {"max_await_time_ms": 1.5}, {"allow_disk_use": 1},
    {"filter": "x"}, {"filter": [("a", 1)]},
], ids=repr)
def test_every_option_of_the_wrong_type_is_refused(options):
    with pytest.raises(TypeError):
        find(**options)


class _Int(int):
    pass


def test_subclasses_and_other_mappings_are_accepted():
    command = body(find(filter=SON([("a", 1)]), skip=_Int(2), limit=_Int(3), batch_size=_Int(1), max_time_ms=_Int(5)))
    assert (command["filter"], command["skip"], command["limit"], command["batchSize"], command["maxTimeMS"]) == (
        {"a": 1}, 2, 3, 1, 5)
    with pytest.raises(ValueError):
        find(max_time_ms=-1)


def test_min_max_need_a_hint():
    with pytest.raises(InvalidOperation):
        body(find(min={"a": 1}))
    assert body(find(min={"a": 1}, hint={"a": 1}))["min"] == {"a": 1}


@pytest.mark.parametrize("limit, batch_size, expected", [
    (0, 0, {}),
    (5, 0, {"limit": 5}),
    (0, 3, {"batchSize": 3}),
    (4, 2, {"limit": 4, "batchSize": 2}),
    (4, 4, {"limit": 4, "batchSize": 5}),          # equal: +1 so the server closes the cursor
    (2, 10, {"limit": 2, "batchSize": 10}),
    (-1, 0, {"limit": 1, "singleBatch": True}),    # find_one
    (-5, 3, {"limit": 5, "singleBatch": True}),
    (0, -3, {"batchSize": 3, "singleBatch": True}),
])
def test_limit_batch_size_transformation(limit, batch_size, expected):
    fields = {k: v for k, v in body(find(limit=limit, batch_size=batch_size)).items()
              if k in ("limit", "batchSize", "singleBatch")}
    assert fields == expected


def test_tailable_without_await_and_exhaust():
    assert body(find(cursor_type=CursorType.TAILABLE))["tailable"] is True
    assert "awaitData" not in body(find(cursor_type=CursorType.TAILABLE))
    exhaust = find(cursor_type=CursorType.EXHAUST, batch_size=2)
    assert "tailable" not in body(exhaust)
    state = exhaust.parse({"ok": 1, "cursor": {"id": Int64(9), "ns": "db.coll", "firstBatch": [{}, {}]}}, W)
    assert state.exhaust and state.get_more_operation().build(W).exhaust_allowed


def test_read_concern_default_is_not_sent():
    assert "readConcern" not in body(find(read_concern=ReadConcern()))
    assert body(find(read_concern=ReadConcern("local")))["readConcern"] == {"level": "local"}


def test_raw_data_only_for_8_2():
    assert body(find(raw_data=True), WireInfo(max_wire_version=27))["rawData"] is True
    assert "rawData" not in body(find(raw_data=True), WireInfo(max_wire_version=25))


def test_legacy_query_modifiers_unwrap():
    op = find(filter={"$query": {"a": 1}, "$orderby": {"a": -1}, "$maxTimeMS": 5, "$readPreference": {},
                      "$showDiskLoc": True})
    assert body(op) == {"find": "coll", "filter": {"a": 1}, "sort": {"a": -1}, "maxTimeMS": 5,
                        "showRecordId": True}


def reply(first_batch, cursor_id=0, ns="db.coll"):
    return {"ok": 1.0, "cursor": {"id": Int64(cursor_id), "ns": ns, "firstBatch": first_batch}}


def test_parse_builds_cursor_state():
    op = find(batch_size=2, comment="hi", read_preference=Secondary())
    state = op.parse(reply([{"_id": 1}, {"_id": 2}], 42), W)
    assert state.first_batch == [{"_id": 1}, {"_id": 2}]
    assert state.cursor_id == 42 and state.address == ("h", 27017) and state.alive
    assert state.namespace == "db.coll" and state.retrieved == 2
    get_more = state.get_more_operation()
    assert get_more.build(W).body == {"getMore": Int64(42), "collection": "coll", "batchSize": 2,
                                      "comment": "hi"}
    assert isinstance(get_more.build(W).body["getMore"], Int64)
    assert "comment" not in get_more.build(OLD).body  # getMore comment needs 4.4
    assert not get_more.retryable and get_more.dbname == "db"
    assert get_more.parse({"ok": 1, "cursor": {"id": Int64(0), "ns": "db.coll", "nextBatch": [{"_id": 3}]}},
                          W) == [{"_id": 3}]
    assert state.exhausted and not state.alive and state.close() is None


def test_exhausted_first_reply_and_missing_cursor():
    state = find().parse(reply([{"a": 1}]), W)
    assert state.exhausted and not state.needs_get_more and not state.needs_kill
    with pytest.raises(ValueError):
        state.get_more_operation()


def test_limit_arithmetic_for_get_more_and_kill():
    op = find(limit=5, batch_size=2)
    state = op.parse(reply([{"i": 0}, {"i": 1}], 7), W)
    assert state.next_batch_size() == 2
    state.get_more_operation().parse({"ok": 1, "cursor": {"id": 7, "nextBatch": [{"i": 2}, {"i": 3}]}}, W)
    assert state.retrieved == 4 and state.next_batch_size() == 1
    assert state.get_more_operation().build(W).body["batchSize"] == 1
    # The server (5.0+) may leave the cursor open when the last batch lines up with the limit.
    state.get_more_operation().parse({"ok": 1, "cursor": {"id": 7, "nextBatch": [{"i": 4}]}}, W)
    assert state.limit_reached and not state.alive and state.needs_kill
    kill = state.close()
    assert isinstance(kill, KillCursorsOperation)
    assert kill.build(W).body == {"killCursors": "coll", "cursors": [Int64(7)]}
    assert kill.dbname == "db" and kill.parse({"ok": 0, "errmsg": "ignored"}, W)
    assert state.close() is None  # only once


def test_limit_without_batch_size_asks_for_the_rest():
    state = find(limit=10).parse(reply([{}] * 3, 5), W)
    assert state.get_more_operation().build(W).body["batchSize"] == 7


def test_batch_trimmed_at_limit_when_server_overshoots():
    state = find(limit=2).parse(reply([{"a": 1}, {"a": 2}, {"a": 3}], 0), W)
    assert state.first_batch == [{"a": 1}, {"a": 2}]


def test_single_batch_never_gets_more():
    state = find(limit=-3).parse(reply([{}, {}], 11), W)
    assert not state.needs_get_more and state.needs_kill
    assert state.close().cursor_ids == [11]


def test_tailable_await_get_more_uses_max_await_time_and_survives_empty_batches():
    op = find(cursor_type=CursorType.TAILABLE_AWAIT, max_await_time_ms=250, max_time_ms=1000)
    state = op.parse(reply([], 3), W)
    get_more = state.get_more_operation()
    assert get_more.build(W).body == {"getMore": Int64(3), "collection": "coll", "maxTimeMS": 250}
    assert get_more.parse({"ok": 1, "cursor": {"id": 3, "nextBatch": []}}, W) == []
    assert state.alive
    # A timeoutMS only caps maxAwaitTimeMS (what is left of it, minus the round trip, in ms).
    assert get_more.max_time_ms_for(100) == 100 and get_more.max_time_ms_for(900) == 250
    assert get_more.max_time_ms_for(None) is None  # no limit: the built maxAwaitTimeMS stands


def test_non_await_get_more_never_sends_max_time():
    state = find(max_time_ms=1000, max_await_time_ms=250).parse(reply([{}], 3), W)
    assert "maxTimeMS" not in state.get_more_operation().build(W).body
    assert state.get_more_operation().max_time_ms_for(500) is None  # a timeoutMS never becomes one


def test_get_more_updates_namespace_and_post_batch_token():
    state = CursorState(1, "db.$cmd.aggregate")
    state.record_get_more({"cursor": {"id": 1, "ns": "db.other", "nextBatch": [], "postBatchResumeToken": {"t": 1}}})
    assert state.namespace == "db.other" and state.post_batch_resume_token == {"t": 1}


def test_errors_from_find_and_get_more():
    with pytest.raises(ExecutionTimeout):
        find().parse({"ok": 0, "code": 50, "errmsg": "time limit"}, W)
    with pytest.raises(NotPrimaryError):
        find().parse({"ok": 0, "code": 10107, "errmsg": "not primary"}, W)
    with pytest.raises(OperationFailure) as info:
        find().parse({"ok": 0, "code": 2, "errmsg": "bad", "codeName": "BadValue"}, W)
    assert info.value.code == 2 and info.value.code_name == "BadValue"
    state = find().parse(reply([{}], 8), W)
    with pytest.raises(CursorNotFound) as not_found:
        state.get_more_operation().parse({"ok": 0, "code": 43, "errmsg": "cursor not found"}, W)
    assert state.handle_error(not_found.value) is None and not state.alive  # the server already forgot it


def test_other_get_more_errors_kill_the_cursor():
    state = find().parse(reply([{}], 8), W)
    kill = state.handle_error(OperationFailure("boom", 1))
    assert kill.cursor_ids == [8] and state.exhausted


def test_finalize_places_executor_fields():
    op = find(read_concern=ReadConcern("majority"))
    lsid = {"id": ObjectId()}
    command = op.finalize(op.build(W), ExecutionFields(
        lsid=lsid, cluster_time={"clusterTime": 1}, read_preference={"mode": "secondary"},
        read_concern_extra={"afterClusterTime": 5}, max_time_ms=90))
    assert command.body["readConcern"] == {"level": "majority", "afterClusterTime": 5}
    assert command.body["lsid"] is lsid and command.body["$clusterTime"] == {"clusterTime": 1}
    assert command.body["$readPreference"] == {"mode": "secondary"} and command.body["maxTimeMS"] == 90
    assert next(iter(command.body)) == "find"
    in_txn = op.finalize(op.build(W), ExecutionFields(in_transaction=True, txn_number=3, autocommit=False,
                                                      start_transaction=True,
                                                      read_concern={"level": "snapshot"}))
    assert in_txn.body["readConcern"] == {"level": "snapshot"}
    assert in_txn.body["txnNumber"] == Int64(3) and in_txn.body["autocommit"] is False
    assert in_txn.body["startTransaction"] is True
    later = op.finalize(op.build(W), ExecutionFields(in_transaction=True, txn_number=3, autocommit=False))
    assert "readConcern" not in later.body


def test_explain_wraps_find():
    op = ExplainOperation(find(filter={"a": 1}, read_concern=ReadConcern("local")), verbosity="queryPlanner",
                          max_time_ms=100)
    assert op.build(W).body == {"explain": {"find": "coll", "filter": {"a": 1}}, "verbosity": "queryPlanner",
                                "readConcern": {"level": "local"}, "maxTimeMS": 100}
    assert op.parse({"ok": 1, "queryPlanner": {}}, W)["queryPlanner"] == {}


def test_codec_options_pass_to_cursor_state():
    options = CodecOptions(tz_aware=True)
    state = find(codec_options=options).parse(reply([{}], 2), W)
    assert state.codec_options is options
    assert state.get_more_operation().codec_options is options


def test_get_more_operation_reports_its_name():
    state = CursorState(5, "db.c")
    op = GetMoreOperation(state)
    assert op.name == "getMore" and op.build(W).name == "getMore"


def test_causal_read_concern_merges_into_the_transactions_first_statement_only():
    op = find()
    first = op.finalize(op.build(W), ExecutionFields(in_transaction=True, read_concern={"level": "majority"},
                                                     read_concern_extra={"afterClusterTime": 7}))
    assert first.body["readConcern"] == {"level": "majority", "afterClusterTime": 7}
    later = op.finalize(op.build(W), ExecutionFields(in_transaction=True, read_concern_extra={"afterClusterTime": 7}))
    assert "readConcern" not in later.body
    plain = op.finalize(op.build(W), ExecutionFields(read_concern_extra={"afterClusterTime": 7}))
    assert plain.body["readConcern"] == {"afterClusterTime": 7}


def test_wire_info_and_command_helpers():
    from greenmongo import bson
    from greenmongo.operations.base import Command, DocumentSequence

    hello = {"maxWireVersion": 21, "maxBsonObjectSize": 100, "maxMessageSizeBytes": 1000, "maxWriteBatchSize": 5}
    info = WireInfo.from_hello(hello, ("a", 1))
    assert (info.max_wire_version, info.max_bson_size, info.max_message_size, info.max_write_batch_size,
            info.address) == (21, 100, 1000, 5, ("a", 1))
    assert info.limits.max_write_batch_size == 5

    class FakeConnection:
        max_wire_version, max_bson_size, max_message_size, max_write_batch_size = 25, 10, 20, 30
        address = ("b", 2)

    assert WireInfo.from_connection(FakeConnection()) == WireInfo(25, 10, 20, 30, ("b", 2))
    sequence = DocumentSequence.encode("documents", [{"a": 1}, {"b": 2}])
    command = Command("db", {"insert": "c"}, [sequence], acknowledged=False)
    assert command.name == "insert" and not command.acknowledged and len(sequence) == 2
    assert command.encoded_sequences() == [("documents", [bson.encode({"a": 1}), bson.encode({"b": 2})])]
    encoded = command.sequences_for_connection()["documents"]  # already BSON: the connection sends it as is
    assert [bson.decode(doc) for doc in encoded] == [{"a": 1}, {"b": 2}]
    assert command.for_monitoring({"insert": "c", "$db": "db"}) == {"insert": "c", "$db": "db",
                                                                    "documents": [{"a": 1}, {"b": 2}]}
    with pytest.raises(ValueError):
        Command("db", {})
    with pytest.raises(ValueError):
        DocumentSequence("x", [{}], [])


@pytest.mark.parametrize("cursor_type", [CursorType.NON_TAILABLE, CursorType.TAILABLE, CursorType.TAILABLE_AWAIT,
                                         CursorType.EXHAUST])
@pytest.mark.parametrize("limit, batch_size", [(0, 0), (-1, 0), (0, -2), (5, 3)])
def test_parsed_state_matches_the_operations_cursor_flags(cursor_type, limit, batch_size):
    """parse reads the flags straight from the spec (hot path): they must agree with the properties."""
    if cursor_type == CursorType.EXHAUST and limit:
        return
    operation = find(cursor_type=cursor_type, limit=limit, batch_size=batch_size, max_await_time_ms=7)
    state = operation.parse({"ok": 1, "cursor": {"id": Int64(9), "ns": "db.coll", "firstBatch": [{}]}}, W)
    assert (state.tailable, state.await_data, state.exhaust) == (
        operation.tailable, operation.await_data, cursor_type == CursorType.EXHAUST)
    assert state.get_more_max_time_ms == (7 if operation.await_data else None)
    assert state.needs_get_more is not operation.single_batch
