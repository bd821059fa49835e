"""MongoClient.bulk_write (server 8.0 bulkWrite): ops/nsInfo, batching, results cursor, errors."""

from __future__ import annotations

import pytest

from greenmongo import bson
from greenmongo.bson import Int64
from greenmongo.errors import ClientBulkWriteException, DocumentTooLarge, InvalidOperation, OperationFailure
from greenmongo.operations import DeleteMany, DeleteOne, InsertOne, ReplaceOne, UpdateMany, UpdateOne
from greenmongo.operations.base import WireInfo
from greenmongo.operations.client_bulk import ClientBulkWrite
from greenmongo.operations.results import DeleteResult, InsertOneResult, UpdateResult
from greenmongo.options.write_concern import WriteConcern

W = WireInfo(max_wire_version=25, address=("h", 1))


def models():
    return [
        InsertOne({"_id": 8, "x": 88}, namespace="db.coll0"),
        UpdateOne({"_id": 1}, {"$inc": {"x": 1}}, namespace="db.coll0"),
        UpdateMany({"_id": {"$gt": 1}}, {"$inc": {"x": 2}}, namespace="db.coll1"),
        ReplaceOne({"_id": 4}, {"x": 44}, upsert=True, namespace="db.coll0"),
        DeleteOne({"_id": 5}, namespace="other.c"),
        DeleteMany({"_id": {"$gt": 5}}, namespace="db.coll1"),
    ]


def cursor_reply(results, cursor_id=0, **counts):
    reply = {"ok": 1, "cursor": {"id": Int64(cursor_id), "ns": "admin.$cmd.bulkWrite", "firstBatch": results},
             "nErrors": 0, "nInserted": 0, "nUpserted": 0, "nMatched": 0, "nModified": 0, "nDeleted": 0}
    reply.update(counts)
    return reply


def test_command_document_ops_and_ns_info():
    bulk = ClientBulkWrite(models(), verbose_results=True, comment="c", let={"v": 1},
                           bypass_document_validation=False, write_concern=WriteConcern(w=1))
    batch = bulk.next_batch(W)
    command = batch.build(W)
    assert command.dbname == "admin" and batch.name == "bulkWrite" and batch.is_write
    assert command.body == {"bulkWrite": 1, "errorsOnly": False, "ordered": True, "bypassDocumentValidation": False,
                            "comment": "c", "let": {"v": 1}, "writeConcern": {"w": 1}}
    document = command.for_monitoring()
    assert document["nsInfo"] == [{"ns": "db.coll0"}, {"ns": "db.coll1"}, {"ns": "other.c"}]
    assert document["ops"] == [
        {"insert": 0, "document": {"_id": 8, "x": 88}},
        {"update": 0, "filter": {"_id": 1}, "updateMods": {"$inc": {"x": 1}}, "multi": False},
        {"update": 1, "filter": {"_id": {"$gt": 1}}, "updateMods": {"$inc": {"x": 2}}, "multi": True},
        {"update": 0, "filter": {"_id": 4}, "updateMods": {"x": 44}, "multi": False, "upsert": True},
        {"delete": 2, "filter": {"_id": 5}, "multi": False},
        {"delete": 1, "filter": {"_id": {"$gt": 5}}, "multi": True},
    ]
    assert [s.identifier for s in command.sequences] == ["ops", "nsInfo"]
    assert not batch.retryable  # UpdateMany and DeleteMany are not retryable


def test_defaults_errors_only_and_ordered():
    bulk = ClientBulkWrite([InsertOne({"_id": 1}, namespace="d.c")])
    assert bulk.next_batch(W).build(W).body == {"bulkWrite": 1, "errorsOnly": True, "ordered": True}
    assert bulk.retryable


def test_insert_gets_id_first():
    document = {"x": 1}
    bulk = ClientBulkWrite([InsertOne(document, namespace="d.c")])
    command = bulk.next_batch(W).build(W)
    op = bson.decode(command.sequences[0].encoded[0])
    assert list(op["document"]) == ["_id", "x"] and op["document"]["_id"] == document["_id"]


def test_update_options_on_ops():
    model = UpdateOne({"a": 1}, {"$set": {"b": 1}}, upsert=False, collation={"locale": "en"},
                      array_filters=[{"i": 1}], hint="a_1", sort={"a": -1}, namespace="d.c")
    op = ClientBulkWrite([model]).next_batch(W).build(W).for_monitoring()["ops"][0]
    assert op == {"update": 0, "filter": {"a": 1}, "updateMods": {"$set": {"b": 1}}, "multi": False,
                  "upsert": False, "arrayFilters": [{"i": 1}], "hint": "a_1", "collation": {"locale": "en"},
                  "sort": {"a": -1}}


def test_verbose_results_are_recorded():
    bulk = ClientBulkWrite(models(), verbose_results=True)
    batch = bulk.next_batch(W)
    results = [
        {"ok": 1, "idx": 0, "n": 1},
        {"ok": 1, "idx": 1, "n": 1, "nModified": 1},
        {"ok": 1, "idx": 2, "n": 2, "nModified": 2},
        {"ok": 1, "idx": 3, "n": 1, "nModified": 0, "upserted": {"_id": 4}},
        {"ok": 1, "idx": 4, "n": 1},
        {"ok": 1, "idx": 5, "n": 2},
    ]
    assert batch.parse(cursor_reply(results, nInserted=1, nUpserted=1, nMatched=3, nModified=3, nDeleted=3),
                       W) is None
    assert bulk.next_batch(W) is None
    result = bulk.result()
    assert (result.inserted_count, result.upserted_count, result.matched_count, result.modified_count,
            result.deleted_count) == (1, 1, 3, 3, 3)
    assert result.has_verbose_results
    assert isinstance(result.insert_results[0], InsertOneResult) and result.insert_results[0].inserted_id == 8
    assert isinstance(result.update_results[3], UpdateResult)
    assert result.update_results[3].upserted_id == 4 and result.update_results[3].matched_count == 1
    assert result.update_results[1].upserted_id is None and not result.update_results[1].did_upsert
    assert isinstance(result.delete_results[5], DeleteResult) and result.delete_results[5].deleted_count == 2


def test_summary_results_hide_verbose_maps():
    bulk = ClientBulkWrite([InsertOne({"_id": 1}, namespace="d.c")])
    bulk.next_batch(W).parse(cursor_reply([], nInserted=1), W)
    result = bulk.result()
    assert result.inserted_count == 1 and not result.has_verbose_results
    with pytest.raises(InvalidOperation):
        _ = result.insert_results


def test_results_cursor_get_more_feeds_the_batch():
    bulk = ClientBulkWrite([DeleteOne({}, namespace="d.c"), DeleteOne({}, namespace="d.c")], verbose_results=True)
    batch = bulk.next_batch(W)
    cursor = batch.parse(cursor_reply([{"ok": 1, "idx": 0, "n": 1}], cursor_id=77, nDeleted=2), W)
    assert cursor is not None and cursor.needs_get_more and cursor.address == ("h", 1)
    get_more = cursor.get_more_operation()
    assert get_more.dbname == "admin" and get_more.build(W).body["collection"] == "$cmd.bulkWrite"
    batch.record_results(get_more.parse({"ok": 1, "cursor": {"id": 0, "nextBatch": [{"ok": 1, "idx": 1, "n": 1}]}},
                                        W))
    assert bulk.next_batch(W) is None
    assert sorted(bulk.result().delete_results) == [0, 1]


def test_ordered_write_error_stops_and_reports_partial_result():
    bulk = ClientBulkWrite([DeleteOne({"_id": 1}, namespace="d.c"), DeleteOne({"$expr": 1}, namespace="d.c"),
                            DeleteOne({"_id": 3}, namespace="d.c")], verbose_results=True)
    wire = WireInfo(max_wire_version=25, max_write_batch_size=2)
    batch = bulk.next_batch(wire)
    batch.parse(cursor_reply([{"ok": 1, "idx": 0, "n": 1},
                              {"ok": 0, "idx": 1, "code": 17276, "errmsg": "bad $$id2"}], nErrors=1, nDeleted=1), wire)
    assert bulk.next_batch(wire) is None  # ordered: the third op is never sent
    with pytest.raises(ClientBulkWriteException) as info:
        bulk.result()
    error = info.value
    assert error.error is None and list(error.write_errors) == [1] and error.write_errors[1]["code"] == 17276
    assert error.partial_result.deleted_count == 1 and list(error.partial_result.delete_results) == [0]


def test_ordered_first_op_failing_means_no_partial_result():
    bulk = ClientBulkWrite([InsertOne({"_id": 1}, namespace="d.c"), InsertOne({"_id": 2}, namespace="d.c")])
    bulk.next_batch(W).parse(cursor_reply([{"ok": 0, "idx": 0, "code": 11000, "errmsg": "dup"}], nErrors=1), W)
    with pytest.raises(ClientBulkWriteException) as info:
        bulk.result()
    assert info.value.partial_result is None and 0 in info.value.write_errors


@pytest.mark.parametrize("errors, successful", [(2, False), (1, True)])
def test_unordered_partial_result_rule(errors, successful):
    bulk = ClientBulkWrite([InsertOne({"_id": 1}, namespace="d.c"), InsertOne({"_id": 1}, namespace="d.c")],
                           ordered=False)
    results = [{"ok": 0, "idx": i, "code": 11000, "errmsg": "dup"} for i in range(errors)]
    bulk.next_batch(W).parse(cursor_reply(results, nErrors=errors, nInserted=2 - errors), W)
    with pytest.raises(ClientBulkWriteException) as info:
        bulk.result()
    assert (info.value.partial_result is not None) is successful


def test_unordered_continues_across_batches():
    bulk = ClientBulkWrite([InsertOne({"_id": i}, namespace="d.c") for i in range(3)], ordered=False)
    wire = WireInfo(max_wire_version=25, max_write_batch_size=2)
    first = bulk.next_batch(wire)
    first.parse(cursor_reply([{"ok": 0, "idx": 1, "code": 11000, "errmsg": "dup"}], nErrors=1, nInserted=1), wire)
    second = bulk.next_batch(wire)
    assert second.start == 2 and second.build(wire).for_monitoring()["ops"] == [{"insert": 0, "document": {"_id": 2}}]
    second.parse(cursor_reply([], nInserted=1), wire)
    with pytest.raises(ClientBulkWriteException) as info:
        bulk.result()
    assert list(info.value.write_errors) == [1] and info.value.partial_result.inserted_count == 2


def test_write_concern_error_continues_then_raises():
    bulk = ClientBulkWrite([InsertOne({"_id": 10}, namespace="d.c")], verbose_results=True)
    reply = cursor_reply([{"ok": 1, "idx": 0, "n": 1}], nInserted=1)
    reply["writeConcernError"] = {"code": 91, "errmsg": "Replication is being shut down"}
    bulk.next_batch(W).parse(reply, W)
    with pytest.raises(ClientBulkWriteException) as info:
        bulk.result()
    assert info.value.write_concern_errors == [{"code": 91, "errmsg": "Replication is being shut down"}]
    assert info.value.partial_result.insert_results[0].inserted_id == 10


def test_top_level_error_before_and_after_results():
    bulk = ClientBulkWrite([InsertOne({"x": 1}, namespace="d.c")])
    batch = bulk.next_batch(W)
    with pytest.raises(OperationFailure) as info:
        batch.parse({"ok": 0, "code": 8, "errmsg": "fail point"}, W)
    with pytest.raises(OperationFailure) as raised:
        bulk.fail(info.value)
    assert raised.value is info.value  # nothing observed yet: the error itself
    assert bulk.next_batch(W) is None

    later = ClientBulkWrite([InsertOne({"_id": i}, namespace="d.c") for i in range(2)], ordered=False)
    wire = WireInfo(max_wire_version=25, max_write_batch_size=1)
    later.next_batch(wire).parse(cursor_reply([], nInserted=1), wire)
    network = ConnectionError("reset")
    with pytest.raises(ClientBulkWriteException) as wrapped:
        later.fail(network)
    assert wrapped.value.error is network and wrapped.value.partial_result.inserted_count == 1


def test_batching_by_message_size_and_ns_info_per_batch():
    many = [InsertOne({"_id": i, "s": "x" * 50}, namespace=f"d.c{i % 2}") for i in range(4)]
    probe = ClientBulkWrite(list(many))
    body_size = len(bson.encode(probe._body(W)))
    op_size = len(bson.encode({"insert": 0, "document": {"_id": 0, "s": "x" * 50}}))
    ns_size = len(bson.encode({"ns": "d.c0"}))
    wire = WireInfo(max_wire_version=25, max_message_size=1000 + body_size + 2 * op_size + 2 * ns_size)
    bulk = ClientBulkWrite(many)
    sizes, ns = [], []
    while (batch := bulk.next_batch(wire)) is not None:
        document = batch.build(wire).for_monitoring()
        sizes.append(len(document["ops"]))
        ns.append(document["nsInfo"])
        batch.parse(cursor_reply([], nInserted=len(document["ops"])), wire)
    assert sizes == [2, 2]
    assert ns == [[{"ns": "d.c0"}, {"ns": "d.c1"}]] * 2
    assert bulk.result().inserted_count == 4
    tiny = WireInfo(max_wire_version=25, max_message_size=1000 + body_size + 10)
    with pytest.raises(DocumentTooLarge):
        ClientBulkWrite(list(many)).next_batch(tiny)


def test_unacknowledged_rules():
    w0 = WriteConcern(w=0)
    with pytest.raises(InvalidOperation, match="Cannot request unacknowledged write concern and verbose results"):
        ClientBulkWrite([InsertOne({}, namespace="d.c")], ordered=False, verbose_results=True, write_concern=w0)
    with pytest.raises(InvalidOperation, match="Cannot request unacknowledged write concern and ordered writes"):
        ClientBulkWrite([InsertOne({}, namespace="d.c")], write_concern=w0)
    bulk = ClientBulkWrite([InsertOne({}, namespace="d.c")], ordered=False, write_concern=w0)
    batch = bulk.next_batch(W)
    command = batch.build(W)
    assert not command.acknowledged and command.body["writeConcern"] == {"w": 0}
    assert batch.parse(None, W) is None and bulk.next_batch(W) is None
    assert not bulk.result().acknowledged
    small = WireInfo(max_wire_version=25, max_bson_size=64)
    with pytest.raises(DocumentTooLarge):
        ClientBulkWrite([InsertOne({"s": "x" * 100}, namespace="d.c")], ordered=False,
                        write_concern=w0).next_batch(small)


def test_model_validation():
    with pytest.raises(InvalidOperation):
        ClientBulkWrite([])
    with pytest.raises(InvalidOperation):
        ClientBulkWrite([InsertOne({})])  # no namespace
    with pytest.raises(ValueError):
        ClientBulkWrite([UpdateOne({}, {"x": 1}, namespace="d.c")])
    with pytest.raises(ValueError):
        ClientBulkWrite([ReplaceOne({}, {"$set": {"x": 1}}, namespace="d.c")])
    with pytest.raises(TypeError):
        ClientBulkWrite([{"insertOne": {}}])


def test_raw_data_on_8_2():
    bulk = ClientBulkWrite([InsertOne({}, namespace="d.c")], raw_data=True)
    assert bulk.next_batch(WireInfo(max_wire_version=27)).build(W).body["rawData"] is True
    older = ClientBulkWrite([InsertOne({}, namespace="d.c")], raw_data=True)
    assert "rawData" not in older.next_batch(W).build(W).body
