"""insert/update/delete/findAndModify: command documents, reply parsing, write errors, w=0."""

from __future__ import annotations

import pytest

from greenmongo import bson
from greenmongo.bson import ObjectId, RawBSONDocument
from greenmongo.errors import (
    ConfigurationError,
    DuplicateKeyError,
    InvalidOperation,
    OperationFailure,
    WriteConcernError,
    WriteError,
    WTimeoutError,
)
from greenmongo.operations import DeleteMany, DeleteOne, InsertOne, ReplaceOne, UpdateMany, UpdateOne
from greenmongo.operations.base import ExecutionFields, WireInfo
from greenmongo.operations.find_and_modify import DELETE, REPLACE, UPDATE, FindAndModifyOperation, ReturnDocument
from greenmongo.operations.replies import check_write_reply, write_concern_error_document
from greenmongo.operations.write import DeleteOperation, InsertOneOperation, UpdateOperation
from greenmongo.options.write_concern import WriteConcern

W = WireInfo(max_wire_version=25)
W0 = WriteConcern(w=0)


def monitored(op, wire=W):
    return op.build(wire).for_monitoring()


# -- insert -----------------------------------------------------------------------------

def test_insert_one_generates_id_into_the_users_document():
    doc = {"x": 1}
    op = InsertOneOperation("db", "coll", doc)
    assert isinstance(doc["_id"], ObjectId) and op.inserted_id is doc["_id"]
    command = op.build(W)
    assert command.body == {"insert": "coll", "ordered": True}
    assert command.sequences[0].identifier == "documents"
    assert bson.decode(command.sequences[0].encoded[0]) == doc
    assert next(iter(bson.decode(command.sequences[0].encoded[0]))) == "_id"  # _id first on the wire
    assert monitored(op)["documents"] == [doc]
    assert op.is_write and op.retryable and op.supports_write_concern and not op.supports_read_concern


def test_insert_one_keeps_existing_id_and_raw_documents():
    assert InsertOneOperation("db", "c", {"_id": 5}).inserted_id == 5
    raw = RawBSONDocument(bson.encode({"_id": 7, "a": 1}))
    op = InsertOneOperation("db", "c", raw)
    assert op.inserted_id == 7 and op.build(W).sequences[0].encoded[0] == raw.raw
    with pytest.raises(TypeError):
        InsertOneOperation("db", "c", [1, 2])


def test_insert_options_and_result():
    op = InsertOneOperation("db", "coll", {"_id": 1}, write_concern=WriteConcern(w="majority", wtimeout=100),
                            bypass_document_validation=True, comment="c")
    assert op.build(W).body == {"insert": "coll", "ordered": True,
                                "writeConcern": {"w": "majority", "wtimeout": 100},
                                "bypassDocumentValidation": True, "comment": "c"}
    result = op.parse({"ok": 1, "n": 1}, W)
    assert result.acknowledged and result.inserted_id == 1
    assert InsertOneOperation("db", "c", {}, bypass_document_validation=False).build(W).body[
        "bypassDocumentValidation"] is False
    assert "bypassDocumentValidation" not in InsertOneOperation("db", "c", {}).build(W).body


def test_unacknowledged_insert_sends_w0_without_reply():
    op = InsertOneOperation("db", "coll", {"_id": 1}, write_concern=W0)
    command = op.build(W)
    assert not command.acknowledged and command.body["writeConcern"] == {"w": 0}
    result = op.parse(None, W)
    assert not result.acknowledged and result.inserted_id == 1


@pytest.mark.parametrize("code", [11000, 11001, 12582])
def test_duplicate_key_write_error(code):
    op = InsertOneOperation("db", "coll", {"_id": 1})
    error = {"index": 0, "code": code, "errmsg": "E11000 duplicate key"}
    with pytest.raises(DuplicateKeyError) as info:
        op.parse({"ok": 1, "n": 0, "writeErrors": [error]}, W)
    assert info.value.code == code and info.value.details == error


def test_write_error_wins_over_write_concern_error_and_last_error_is_reported():
    reply = {"ok": 1, "n": 0, "writeErrors": [{"index": 0, "code": 1, "errmsg": "first"},
                                              {"index": 1, "code": 121, "errmsg": "validation",
                                               "errInfo": {"details": 1}}],
             "writeConcernError": {"code": 64, "errmsg": "wc"}}
    with pytest.raises(WriteError) as info:
        check_write_reply(reply)
    assert type(info.value) is WriteError and info.value.code == 121
    assert info.value.details["errInfo"] == {"details": 1}


def test_write_concern_errors():
    reply = {"ok": 1, "n": 1, "writeConcernError": {"code": 91, "errmsg": "shutdown"},
             "errorLabels": ["RetryableWriteError"]}
    with pytest.raises(WriteConcernError) as info:
        InsertOneOperation("db", "c", {}).parse(reply, W)
    assert type(info.value) is WriteConcernError and info.value.code == 91
    assert info.value.has_error_label("RetryableWriteError")
    assert write_concern_error_document(reply)["errorLabels"] == ["RetryableWriteError"]
    with pytest.raises(WTimeoutError):
        check_write_reply({"ok": 1, "writeConcernError": {"code": 64, "errmsg": "timeout",
                                                          "errInfo": {"wtimeout": True}}})
    with pytest.raises(WTimeoutError):
        check_write_reply({"ok": 1, "writeConcernError": {"code": 50, "errmsg": "maxTimeMS"}})


def test_command_failure_is_operation_failure():
    with pytest.raises(OperationFailure) as info:
        InsertOneOperation("db", "c", {}).parse({"ok": 0, "code": 13, "errmsg": "unauthorized"}, W)
    assert info.value.code == 13


# -- update / replace ---------------------------------------------------------------------

def test_update_one_command_with_every_option():
    op = UpdateOperation("db", "coll", {"a": 1}, {"$set": {"b": 2}}, upsert=True, collation={"locale": "en"},
                         array_filters=[{"i.x": 1}], hint=[("a", 1)], sort={"a": -1}, let={"v": 1}, comment="c",
                         bypass_document_validation=True, write_concern=WriteConcern(w=1))
    command = op.build(W)
    assert command.body == {"update": "coll", "ordered": True, "writeConcern": {"w": 1},
                            "bypassDocumentValidation": True, "comment": "c", "let": {"v": 1}}
    assert monitored(op)["updates"] == [{"q": {"a": 1}, "u": {"$set": {"b": 2}}, "multi": False, "upsert": True,
                                         "collation": {"locale": "en"}, "arrayFilters": [{"i.x": 1}],
                                         "hint": {"a": 1}, "sort": {"a": -1}}]
    assert op.retryable


def test_update_many_and_pipeline_and_replace():
    many = UpdateOperation("db", "c", {}, [{"$set": {"a": 1}}], multi=True)
    assert monitored(many)["updates"] == [{"q": {}, "u": [{"$set": {"a": 1}}], "multi": True}]
    assert not many.retryable
    replace = UpdateOperation("db", "c", {"a": 1}, {"b": 1}, replacement=True)
    assert monitored(replace)["updates"][0]["u"] == {"b": 1}


@pytest.mark.parametrize("update", [{"a": 1}, {}, []])
def test_update_document_must_use_operators(update):
    with pytest.raises(ValueError):
        UpdateOperation("db", "c", {}, update)


def test_replacement_must_not_use_operators():
    with pytest.raises(ValueError):
        UpdateOperation("db", "c", {}, {"$set": {"a": 1}}, replacement=True)
    UpdateOperation("db", "c", {}, {}, replacement=True)  # empty replacement is fine


def test_update_result_parsing():
    op = UpdateOperation("db", "c", {}, {"$set": {"a": 1}}, upsert=True)
    upserted = op.parse({"ok": 1, "n": 1, "nModified": 0, "upserted": [{"index": 0, "_id": "new"}]}, W)
    assert upserted.upserted_id == "new" and upserted.matched_count == 0 and upserted.modified_count == 0
    assert upserted.did_upsert and upserted.raw_result["updatedExisting"] is False
    matched = op.parse({"ok": 1, "n": 2, "nModified": 1}, W)
    assert matched.matched_count == 2 and matched.modified_count == 1 and matched.upserted_id is None
    assert matched.raw_result["updatedExisting"] is True and not matched.did_upsert
    null_id = op.parse({"ok": 1, "n": 1, "nModified": 0, "upserted": [{"index": 0, "_id": None}]}, W)
    assert null_id.did_upsert and null_id.upserted_id is None


def test_unacknowledged_update_checks_server_version():
    op = UpdateOperation("db", "c", {}, {"$set": {"a": 1}}, hint="a_1", write_concern=W0)
    with pytest.raises(ConfigurationError):
        op.build(WireInfo(max_wire_version=7))
    assert not op.build(WireInfo(max_wire_version=8)).acknowledged
    sort = UpdateOperation("db", "c", {}, {"$set": {"a": 1}}, sort={"a": 1}, write_concern=W0)
    with pytest.raises(ConfigurationError):
        sort.build(WireInfo(max_wire_version=21))
    result = op.parse(None, W)
    assert not result.acknowledged
    with pytest.raises(InvalidOperation):
        _ = result.matched_count


def test_update_many_rejects_sort():
    with pytest.raises(ValueError):
        UpdateOperation("db", "c", {}, {"$set": {"a": 1}}, multi=True, sort={"a": 1})


# -- delete ----------------------------------------------------------------------------------

def test_delete_commands():
    one = DeleteOperation("db", "c", {"a": 1}, collation={"locale": "fr"}, hint={"a": 1}, let={"x": 1})
    assert monitored(one) == {"delete": "c", "ordered": True, "let": {"x": 1},
                              "deletes": [{"q": {"a": 1}, "limit": 1, "collation": {"locale": "fr"},
                                           "hint": {"a": 1}}]}
    assert one.retryable
    many = DeleteOperation("db", "c", {}, multi=True)
    assert monitored(many)["deletes"] == [{"q": {}, "limit": 0}] and not many.retryable
    assert many.parse({"ok": 1, "n": 3}, W).deleted_count == 3


def test_unacknowledged_delete_hint_needs_4_4():
    op = DeleteOperation("db", "c", {}, hint="a_1", write_concern=W0)
    with pytest.raises(ConfigurationError):
        op.build(WireInfo(max_wire_version=8))
    assert op.build(WireInfo(max_wire_version=9)).body["writeConcern"] == {"w": 0}


def test_write_finalize_strips_write_concern_in_transaction():
    op = DeleteOperation("db", "c", {}, write_concern=WriteConcern(w="majority"))
    command = op.finalize(op.build(W), ExecutionFields(in_transaction=True, txn_number=1))
    assert "writeConcern" not in command.body and command.body["txnNumber"] == 1
    assert command.sequences[0].identifier == "deletes"
    assert op.finalize(op.build(W)).body["writeConcern"] == {"w": "majority"}


# -- findAndModify ------------------------------------------------------------------------------

def test_find_one_and_delete():
    op = FindAndModifyOperation("db", "c", {"a": 1}, DELETE, projection=["a"], sort=[("a", -1)], hint="a_1",
                                collation={"locale": "en"}, let={"v": 1}, comment="x", max_time_ms=10)
    assert op.build(W).body == {"findAndModify": "c", "query": {"a": 1}, "remove": True, "fields": {"a": 1},
                                "sort": {"a": -1}, "hint": "a_1", "collation": {"locale": "en"},
                                "maxTimeMS": 10, "let": {"v": 1}, "comment": "x"}
    assert op.is_write and op.retryable
    assert op.parse({"ok": 1, "value": {"a": 1}}, W) == {"a": 1}
    assert op.parse({"ok": 1, "value": None}, W) is None


def test_find_one_and_update_and_replace():
    update = FindAndModifyOperation("db", "c", {}, UPDATE, update={"$inc": {"n": 1}}, upsert=True,
                                    return_document=ReturnDocument.AFTER, array_filters=[{"x": 1}],
                                    bypass_document_validation=True, write_concern=WriteConcern(w=2))
    assert update.build(W).body == {"findAndModify": "c", "query": {}, "update": {"$inc": {"n": 1}}, "new": True,
                                    "upsert": True, "arrayFilters": [{"x": 1}], "bypassDocumentValidation": True,
                                    "writeConcern": {"w": 2}}
    replace = FindAndModifyOperation("db", "c", {}, REPLACE, update={"b": 1})
    assert replace.build(W).body["new"] is False and replace.build(W).body["update"] == {"b": 1}
    with pytest.raises(ValueError):
        FindAndModifyOperation("db", "c", {}, REPLACE, update={"$set": {"b": 1}})
    with pytest.raises(ValueError):
        FindAndModifyOperation("db", "c", {}, UPDATE, update={"b": 1})
    with pytest.raises(TypeError):
        FindAndModifyOperation("db", "c", {}, UPDATE, update={"$set": {}}, return_document="after")


def test_find_and_modify_errors_and_hint_versions():
    op = FindAndModifyOperation("db", "c", {}, DELETE)
    with pytest.raises(WriteConcernError):
        op.parse({"ok": 1, "value": None, "writeConcernError": {"code": 100, "errmsg": "no"}}, W)
    with pytest.raises(DuplicateKeyError):
        op.parse({"ok": 0, "code": 11000, "errmsg": "dup"}, W)
    hinted = FindAndModifyOperation("db", "c", {}, DELETE, hint="a_1")
    with pytest.raises(ConfigurationError):
        hinted.build(WireInfo(max_wire_version=7))
    unack = FindAndModifyOperation("db", "c", {}, DELETE, hint="a_1", write_concern=W0)
    with pytest.raises(ConfigurationError):
        unack.build(WireInfo(max_wire_version=8))
    assert not unack.build(W).acknowledged and unack.parse(None, W) is None


# -- write models ------------------------------------------------------------------------------

def test_write_model_equality_repr_and_validation_timing():
    assert UpdateOne({"a": 1}, {"$set": {"b": 1}}) == UpdateOne({"a": 1}, {"$set": {"b": 1}})
    assert UpdateOne({"a": 1}, {"$set": {"b": 1}}) != UpdateMany({"a": 1}, {"$set": {"b": 1}})
    assert DeleteOne({"a": 1}) != DeleteOne({"a": 2})
    assert repr(InsertOne({"a": 1})) == "InsertOne({'a': 1})"
    bad = UpdateOne({}, {"b": 1})  # PyMongo validates when the bulk write takes the model
    with pytest.raises(ValueError):
        bad._validate()
    with pytest.raises(ValueError):
        ReplaceOne({}, {"$set": {"b": 1}})._validate()
    with pytest.raises(TypeError):
        DeleteOne([("a", 1)])
    with pytest.raises(TypeError):
        UpdateOne({}, {"$set": {}}, upsert=1)
    with pytest.raises(TypeError):
        UpdateMany({}, {"$set": {}}, array_filters={"a": 1})


def test_write_model_statements():
    assert UpdateOne({"a": 1}, {"$set": {"b": 1}}, hint=[("a", 1)], sort=[("a", -1)])._statement() == {
        "q": {"a": 1}, "u": {"$set": {"b": 1}}, "multi": False, "hint": {"a": 1}, "sort": {"a": -1}}
    assert DeleteMany({"a": 1}, collation={"locale": "en"})._statement() == {
        "q": {"a": 1}, "limit": 0, "collation": {"locale": "en"}}
    assert ReplaceOne({"a": 1}, {"b": 2}, upsert=False)._statement() == {
        "q": {"a": 1}, "u": {"b": 2}, "multi": False, "upsert": False}


def test_namespace_validation():
    assert InsertOne({}, namespace="db.c.d").namespace == "db.c.d"
    with pytest.raises(ValueError):
        InsertOne({}, namespace="nodot")
    with pytest.raises(TypeError):
        DeleteOne({}, namespace=5)
