"""Collection.bulk_write / insert_many: runs, batch splitting, result merging, BulkWriteError, w=0."""

from __future__ import annotations

import pytest

from greenmongo import bson
from greenmongo.errors import BulkWriteError, ConfigurationError, DocumentTooLarge, InvalidOperation, OperationFailure
from greenmongo.operations import DeleteMany, DeleteOne, InsertOne, ReplaceOne, UpdateMany, UpdateOne
from greenmongo.operations.base import WireInfo
from greenmongo.operations.bulk import COMMAND_FIELDS_RESERVE, BulkWrite
from greenmongo.options.write_concern import WriteConcern
from greenmongo.wire.batching import op_msg_overhead

W = WireInfo(max_wire_version=25)


def drain(bulk, wire=W, replies=None):
    """Run the executor loop with canned replies (a callable of the batch, default: all succeed)."""
    sent = []
    while (batch := bulk.next_batch(wire)) is not None:
        command = batch.build(wire)
        sent.append(command)
        if not command.acknowledged:
            batch.parse(None, wire)
            continue
        reply = replies(batch, command) if replies else {"ok": 1, "n": batch.size,
                                                          **({"nModified": batch.size} if batch.name == "update"
                                                             else {})}
        batch.parse(reply, wire)
    return sent


def docs_of(command):
    return [bson.decode(data) for data in command.sequences[0].encoded]


def test_ordered_runs_keep_request_order():
    requests = [InsertOne({"_id": 1}), InsertOne({"_id": 2}), UpdateOne({"_id": 1}, {"$set": {"a": 1}}),
                InsertOne({"_id": 3}), DeleteOne({"_id": 2})]
    bulk = BulkWrite("db", "c", requests, comment="k", let={"v": 1})
    sent = drain(bulk)
    assert [c.name for c in sent] == ["insert", "update", "insert", "delete"]
    assert sent[0].body == {"insert": "c", "ordered": True, "comment": "k"}  # let is never sent with insert
    assert sent[1].body == {"update": "c", "ordered": True, "comment": "k", "let": {"v": 1}}
    assert docs_of(sent[0]) == [{"_id": 1}, {"_id": 2}]
    assert sent[1].for_monitoring()["updates"] == [{"q": {"_id": 1}, "u": {"$set": {"a": 1}}, "multi": False}]
    assert sent[3].for_monitoring()["deletes"] == [{"q": {"_id": 2}, "limit": 1}]
    result = bulk.result()
    assert (result.inserted_count, result.matched_count, result.deleted_count) == (3, 1, 1)
    assert result.acknowledged and result.upserted_ids == {}


def test_unordered_groups_by_kind_and_maps_indexes_back():
    requests = [DeleteOne({"d": 0}), InsertOne({"_id": "a"}), UpdateOne({"u": 2}, {"$set": {"x": 1}}, upsert=True),
                InsertOne({"_id": "b"}), UpdateOne({"u": 4}, {"$set": {"x": 1}}, upsert=True)]
    bulk = BulkWrite("db", "c", requests, ordered=False)

    def replies(batch, command):
        if batch.name == "insert":
            return {"ok": 1, "n": 1, "writeErrors": [{"index": 1, "code": 11000, "errmsg": "dup"}]}
        if batch.name == "update":
            return {"ok": 1, "n": 2, "nModified": 0, "upserted": [{"index": 1, "_id": "new"}]}
        return {"ok": 1, "n": 1}

    sent = drain(bulk, replies=replies)
    assert [c.name for c in sent] == ["insert", "update", "delete"]
    assert all(c.body["ordered"] is False for c in sent)
    with pytest.raises(BulkWriteError) as info:
        bulk.result()
    details = info.value.details
    assert info.value.code == 65
    assert details["writeErrors"] == [{"index": 3, "code": 11000, "errmsg": "dup", "op": {"_id": "b"}}]
    assert details["upserted"] == [{"index": 4, "_id": "new"}]
    assert (details["nInserted"], details["nUpserted"], details["nMatched"], details["nRemoved"]) == (1, 1, 1, 1)


def test_ordered_stops_after_a_batch_with_write_errors():
    bulk = BulkWrite("db", "c", [InsertOne({"_id": 1}), DeleteOne({}), InsertOne({"_id": 2})])
    calls = []

    def replies(batch, command):
        calls.append(batch.name)
        return {"ok": 1, "n": 0, "writeErrors": [{"index": 0, "code": 11000, "errmsg": "dup"}]}

    drain(bulk, replies=replies)
    assert calls == ["insert"]
    with pytest.raises(BulkWriteError) as info:
        bulk.result()
    assert info.value.details["writeErrors"][0]["op"] == {"_id": 1}


def test_write_concern_errors_do_not_stop_and_raise_at_the_end():
    bulk = BulkWrite("db", "c", [InsertOne({}), DeleteMany({})])
    drain(bulk, replies=lambda b, c: {"ok": 1, "n": 1, "writeConcernError": {"code": 64, "errmsg": "wtimeout"},
                                      "errorLabels": ["X"]})
    with pytest.raises(BulkWriteError) as info:
        bulk.result()
    details = info.value.details
    assert details["nInserted"] == 1 and details["nRemoved"] == 1
    assert details["writeConcernErrors"] == [{"code": 64, "errmsg": "wtimeout", "errorLabels": ["X"]}] * 2
    assert not bulk.retryable


def test_retryable_write_concern_error_raises_at_once_without_merging():
    bulk = BulkWrite("db", "c", [InsertOne({"_id": 1}), InsertOne({"_id": 2})])
    batch = bulk.next_batch(W)
    first_command = batch.build(W)
    with pytest.raises(BulkWriteError) as info:
        batch.parse({"ok": 1, "n": 2, "writeConcernError": {"code": 91, "errmsg": "shutdown"}}, W)
    assert info.value.details["writeConcernErrors"][-1]["code"] == 91
    assert info.value.details["nInserted"] == 2
    assert bulk.full_result["nInserted"] == 0
    # The executor retries the same batch: identical statements, merged once.
    assert bulk.next_batch(W) is batch
    assert batch.build(W).sequences[0].encoded == first_command.sequences[0].encoded
    batch.parse({"ok": 1, "n": 2}, W)
    assert bulk.next_batch(W) is None and bulk.result().inserted_count == 2


def test_command_failure_propagates():
    bulk = BulkWrite("db", "c", [InsertOne({})])
    with pytest.raises(OperationFailure):
        bulk.next_batch(W).parse({"ok": 0, "code": 8, "errmsg": "unknown"}, W)


def test_result_counts_upserts_and_matches():
    bulk = BulkWrite("db", "c", [UpdateOne({"a": 1}, {"$set": {"b": 1}}, upsert=True), ReplaceOne({"a": 2}, {"b": 2})])
    drain(bulk, replies=lambda b, c: {"ok": 1, "n": 2, "nModified": 1, "upserted": [{"index": 0, "_id": 9}]})
    result = bulk.result()
    assert (result.matched_count, result.modified_count, result.upserted_count) == (1, 1, 1)
    assert result.upserted_ids == {0: 9}
    assert result.bulk_api_result["upserted"] == [{"index": 0, "_id": 9}]


def test_split_by_max_write_batch_size():
    bulk = BulkWrite("db", "c", [InsertOne({"_id": i}) for i in range(5)])
    sent = drain(bulk, WireInfo(max_wire_version=25, max_write_batch_size=2))
    assert [len(c.sequences[0]) for c in sent] == [2, 2, 1]
    assert [d["_id"] for c in sent for d in docs_of(c)] == [0, 1, 2, 3, 4]
    assert bulk.result().inserted_count == 5


def _room_for(bulk_kwargs, kind="insert"):
    body = {kind: "c", "ordered": True}
    body.update(bulk_kwargs)
    return op_msg_overhead(len(bson.encode(body)) + COMMAND_FIELDS_RESERVE, "documents")


@pytest.mark.parametrize("slack, expected", [(0, [3, 3]), (-1, [2, 2, 2])])
def test_split_at_the_exact_message_size_boundary(slack, expected):
    documents = [{"_id": i, "s": "x" * 100} for i in range(6)]
    size = len(bson.encode(documents[0]))
    assert all(len(bson.encode(d)) == size for d in documents)
    wire = WireInfo(max_wire_version=25, max_message_size=_room_for({}) + 3 * size + slack)
    sent = drain(BulkWrite("db", "c", [InsertOne(d) for d in documents]), wire)
    assert [len(c.sequences[0]) for c in sent] == expected


def test_document_too_large_for_any_message():
    wire = WireInfo(max_wire_version=25, max_message_size=_room_for({}) + 50)
    bulk = BulkWrite("db", "c", [InsertOne({"s": "x" * 100})])
    with pytest.raises(DocumentTooLarge):
        bulk.next_batch(wire)


def test_unacknowledged_checks_max_bson_size_but_acknowledged_lets_the_server_decide():
    wire = WireInfo(max_wire_version=25, max_bson_size=100)
    big = {"s": "x" * 200}
    assert drain(BulkWrite("db", "c", [InsertOne(dict(big))]), wire)
    with pytest.raises(DocumentTooLarge):
        BulkWrite("db", "c", [InsertOne(dict(big))], ordered=False, write_concern=WriteConcern(w=0)).next_batch(wire)
    # An update statement may exceed maxBsonObjectSize by the 16 KiB command allowance.
    update = UpdateOne({}, {"$set": {"s": "x" * 150}})
    assert drain(BulkWrite("db", "c", [update], ordered=False, write_concern=WriteConcern(w=0)), wire)


def test_statements_are_encoded_lazily_and_released():
    bulk = BulkWrite("db", "c", [InsertOne({"_id": i}) for i in range(4)])
    wire = WireInfo(max_wire_version=25, max_write_batch_size=2)
    batch = bulk.next_batch(wire)
    run = bulk.runs[0]
    assert run.encoded[3] is None  # not looked at yet
    batch.parse({"ok": 1, "n": 2}, wire)
    assert run.encoded[0] is None and run.encoded[1] is None


def test_unordered_unacknowledged_sends_everything_w0():
    bulk = BulkWrite("db", "c", [InsertOne({}), DeleteOne({})], ordered=False, write_concern=WriteConcern(w=0))
    sent = drain(bulk)
    assert [c.acknowledged for c in sent] == [False, False]
    assert all(c.body["writeConcern"] == {"w": 0} and c.body["ordered"] is False for c in sent)
    result = bulk.result()
    assert not result.acknowledged
    with pytest.raises(InvalidOperation):
        _ = result.inserted_count


def test_ordered_unacknowledged_is_acknowledged_until_the_last_batch():
    bulk = BulkWrite("db", "c", [InsertOne({}), DeleteOne({}), DeleteOne({"a": 1})], write_concern=WriteConcern(w=0))
    sent = drain(bulk, replies=lambda b, c: {"ok": 1, "n": 1})
    assert [c.name for c in sent] == ["insert", "delete"]
    assert [c.acknowledged for c in sent] == [True, False]
    assert "writeConcern" not in sent[0].body and sent[1].body["writeConcern"] == {"w": 0}
    assert not bulk.result().acknowledged


def test_ordered_unacknowledged_stops_quietly_at_the_first_error():
    bulk = BulkWrite("db", "c", [InsertOne({}), DeleteOne({})], write_concern=WriteConcern(w=0))
    sent = drain(bulk, replies=lambda b, c: {"ok": 1, "n": 0, "writeErrors": [{"index": 0, "code": 1}]})
    assert len(sent) == 1 and not bulk.result().acknowledged
    failed = BulkWrite("db", "c", [InsertOne({}), DeleteOne({})], write_concern=WriteConcern(w=0))
    sent = drain(failed, replies=lambda b, c: {"ok": 0, "code": 2, "errmsg": "bad"})
    assert len(sent) == 1


def test_unacknowledged_hint_errors_before_anything_is_sent():
    for request, wire_version in ((DeleteOne({}, hint="a_1"), 8), (UpdateOne({}, {"$set": {"a": 1}}, hint="a_1"), 7),
                                  (ReplaceOne({}, {}, sort={"a": 1}), 21)):
        bulk = BulkWrite("db", "c", [InsertOne({}), request], ordered=False, write_concern=WriteConcern(w=0))
        with pytest.raises(ConfigurationError):
            bulk.next_batch(WireInfo(max_wire_version=wire_version))
    ok = BulkWrite("db", "c", [DeleteOne({}, hint="a_1")], write_concern=WriteConcern(w=0))
    assert ok.next_batch(WireInfo(max_wire_version=9)).build(W).for_monitoring()["deletes"][0]["hint"] == "a_1"


def test_bypass_document_validation_sent_when_given():
    assert drain(BulkWrite("db", "c", [InsertOne({})], bypass_document_validation=True))[0].body[
        "bypassDocumentValidation"] is True
    assert drain(BulkWrite("db", "c", [InsertOne({})], bypass_document_validation=False))[0].body[
        "bypassDocumentValidation"] is False  # the CRUD tests expect an explicit false to be sent
    assert "bypassDocumentValidation" not in drain(BulkWrite("db", "c", [InsertOne({})]))[0].body


def test_request_validation():
    with pytest.raises(InvalidOperation):
        BulkWrite("db", "c", [])
    with pytest.raises(TypeError):
        BulkWrite("db", "c", [{"insertOne": {}}])
    with pytest.raises(ValueError):
        BulkWrite("db", "c", [UpdateOne({}, {"a": 1})])
    with pytest.raises(TypeError):
        BulkWrite("db", "c", InsertOne({}))
    assert BulkWrite("db", "c", [UpdateOne({}, {"$set": {"a": 1}})]).retryable
    assert not BulkWrite("db", "c", [UpdateMany({}, {"$set": {"a": 1}})]).retryable


def test_insert_many():
    documents = [{"a": 1}, {"_id": "given"}]
    bulk = BulkWrite.for_insert_many("db", "c", documents, ordered=False)
    assert bulk.inserted_ids[1] == "given" and documents[0]["_id"] == bulk.inserted_ids[0]
    drain(bulk)
    result = bulk.insert_many_result()
    assert result.acknowledged and result.inserted_ids == [documents[0]["_id"], "given"]
    for bad in ([], {}, "abc", 5):
        with pytest.raises(TypeError):
            BulkWrite.for_insert_many("db", "c", bad)
    with pytest.raises(TypeError):
        BulkWrite.for_insert_many("db", "c", [1])
    generated = BulkWrite.for_insert_many("db", "c", ({"i": i} for i in range(3)))
    assert len(generated.inserted_ids) == 3


def test_insert_many_error_still_reports_partial_result():
    bulk = BulkWrite.for_insert_many("db", "c", [{"_id": 1}, {"_id": 1}])
    drain(bulk, replies=lambda b, c: {"ok": 1, "n": 1, "writeErrors": [{"index": 1, "code": 11000,
                                                                         "errmsg": "E11000"}]})
    with pytest.raises(BulkWriteError) as info:
        bulk.insert_many_result()
    assert info.value.details["nInserted"] == 1 and info.value.details["writeErrors"][0]["index"] == 1


def test_batch_operation_contract():
    bulk = BulkWrite("db", "c", [InsertOne({})], write_concern=WriteConcern(w="majority"))
    batch = bulk.next_batch(W)
    assert batch.is_write and batch.retryable and batch.supports_write_concern and batch.dbname == "db"
    assert batch.build(W).body["writeConcern"] == {"w": "majority"}
    assert batch.codec_options.document_class is dict
