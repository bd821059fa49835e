"""aggregate, counting, distinct, index/collection/database administration and run_command."""

from __future__ import annotations

import pytest

from greenmongo.bson import Int64
from greenmongo.errors import ConfigurationError, InvalidName, InvalidOperation, OperationFailure, WriteConcernError
from greenmongo.operations import IndexModel, SearchIndexModel
from greenmongo.operations.aggregate import AggregateOperation, write_stage_read_preference
from greenmongo.operations.base import ExecutionFields, WireInfo
from greenmongo.operations.collation import Collation
from greenmongo.operations.collections import (
    CollModOperation,
    CreateCollectionOperation,
    DropCollectionOperation,
    ListCollectionsOperation,
    RenameCollectionOperation,
)
from greenmongo.operations.count import CountDocumentsOperation, DistinctOperation, EstimatedDocumentCountOperation
from greenmongo.operations.databases import DropDatabaseOperation, ListDatabasesOperation
from greenmongo.operations.indexes import (
    CreateIndexesOperation,
    CreateSearchIndexesOperation,
    DropIndexesOperation,
    DropSearchIndexOperation,
    ListIndexesOperation,
    UpdateSearchIndexOperation,
    index_information,
    list_search_indexes_operation,
)
from greenmongo.operations.arguments import index_name
from greenmongo.operations.run_command import RunCommandOperation, RunCursorCommandOperation, command_document
from greenmongo.options.read_concern import ReadConcern
from greenmongo.options.read_preferences import ReadPreference, Secondary, SecondaryPreferred
from greenmongo.options.write_concern import WriteConcern

W = WireInfo(max_wire_version=25, address=("h", 1))


def body(op, wire=W):
    return op.build(wire).body


# -- aggregate ----------------------------------------------------------------------------------

def test_aggregate_read_with_options():
    op = AggregateOperation("db", "c", [{"$match": {}}], batch_size=5, allow_disk_use=True,
                            collation=Collation("en"), max_time_ms=10, max_await_time_ms=20, comment="c",
                            hint={"a": 1}, let={"v": 1}, read_concern=ReadConcern("majority"),
                            write_concern=WriteConcern(w=2), read_preference=Secondary())
    assert body(op) == {"aggregate": "c", "pipeline": [{"$match": {}}], "cursor": {"batchSize": 5},
                        "allowDiskUse": True, "collation": {"locale": "en"}, "maxTimeMS": 10, "comment": "c",
                        "hint": {"a": 1}, "let": {"v": 1}, "readConcern": {"level": "majority"}}
    assert op.is_read and op.retryable and not op.supports_write_concern
    assert op.selection_read_preference([6, 25]) == Secondary()
    state = op.parse({"ok": 1, "cursor": {"id": Int64(4), "ns": "db.c", "firstBatch": [{"a": 1}]}}, W)
    get_more = state.get_more_operation().build(W).body
    assert get_more == {"getMore": Int64(4), "collection": "c", "batchSize": 5, "maxTimeMS": 20, "comment": "c"}


def test_aggregate_default_cursor_and_batch_size_zero():
    assert body(AggregateOperation("db", "c", []))["cursor"] == {}
    assert body(AggregateOperation("db", "c", [], batch_size=0))["cursor"] == {"batchSize": 0}


def test_database_level_aggregate():
    op = AggregateOperation("admin", None, [{"$currentOp": {}}])
    assert body(op)["aggregate"] == 1
    state = op.parse({"ok": 1, "cursor": {"id": 0, "firstBatch": []}}, W)
    assert state.namespace == "admin.$cmd.aggregate"


@pytest.mark.parametrize("stage", [{"$out": "other"}, {"$merge": {"into": "other"}}])
def test_aggregate_with_write_stage(stage):
    op = AggregateOperation("db", "c", [{"$match": {}}, stage], batch_size=0,
                            write_concern=WriteConcern(w="majority"), read_concern=ReadConcern("local"),
                            bypass_document_validation=True, read_preference=SecondaryPreferred())
    assert op.is_write and not op.retryable and op.supports_write_concern
    assert body(op) == {"aggregate": "c", "pipeline": [{"$match": {}}, stage], "cursor": {},
                        "bypassDocumentValidation": True, "readConcern": {"level": "local"},
                        "writeConcern": {"w": "majority"}}
    assert "readConcern" not in body(op, WireInfo(max_wire_version=7))
    # CRUD spec: the read preference applies only when every available server is 5.0+.
    assert op.selection_read_preference([13, 25]) == SecondaryPreferred()
    assert op.selection_read_preference([12, 25]) == ReadPreference.PRIMARY
    assert op.selection_read_preference([]) == SecondaryPreferred()
    assert op.selection_read_preference([8], load_balanced=True) == SecondaryPreferred()
    with pytest.raises(WriteConcernError):
        op.parse({"ok": 1, "cursor": {"id": 0, "firstBatch": []}, "writeConcernError": {"code": 64}}, W)


def test_write_stage_rule_keeps_primary():
    assert write_stage_read_preference(ReadPreference.PRIMARY, [6]) == ReadPreference.PRIMARY


def test_unacknowledged_out_gives_an_empty_cursor():
    op = AggregateOperation("db", "c", [{"$out": "x"}], write_concern=WriteConcern(w=0))
    assert not op.build(W).acknowledged
    state = op.parse(None, W)
    assert state.first_batch == [] and state.exhausted


def test_aggregate_rejects_explain_and_reads_pymongo_kwargs():
    with pytest.raises(ConfigurationError):
        AggregateOperation("db", "c", [], extra={"explain": True})
    with pytest.raises(TypeError):
        AggregateOperation("db", "c", {"$match": {}})
    op = AggregateOperation("db", "c", [], extra={"batchSize": 3, "maxAwaitTimeMS": 7, "cursor": {"x": 1}})
    assert body(op)["cursor"] == {"x": 1, "batchSize": 3}
    assert body(op)["cursor"] == {"x": 1, "batchSize": 3}  # building twice (a retry) sends the same


# -- counting ------------------------------------------------------------------------------------

def test_count_documents_pipeline_and_result():
    op = CountDocumentsOperation("db", "c", {"a": 1}, skip=2, limit=5, hint=[("a", 1)], collation={"locale": "en"},
                                 max_time_ms=9, comment="n", read_concern=ReadConcern("local"))
    assert body(op) == {"aggregate": "c", "pipeline": [{"$match": {"a": 1}}, {"$skip": 2}, {"$limit": 5},
                                                       {"$group": {"_id": 1, "n": {"$sum": 1}}}],
                        "cursor": {}, "collation": {"locale": "en"}, "maxTimeMS": 9, "comment": "n",
                        "hint": {"a": 1}, "readConcern": {"level": "local"}}
    assert op.retryable and op.is_read
    assert op.parse({"ok": 1, "cursor": {"id": 0, "firstBatch": [{"_id": 1, "n": 3}]}}, W) == 3
    assert op.parse({"ok": 1, "cursor": {"id": 0, "firstBatch": []}}, W) == 0
    assert body(CountDocumentsOperation("db", "c", {}))["pipeline"] == [
        {"$match": {}}, {"$group": {"_id": 1, "n": {"$sum": 1}}}]


def test_estimated_document_count():
    op = EstimatedDocumentCountOperation("db", "c", max_time_ms=5, comment=1, read_concern=ReadConcern("local"))
    assert body(op) == {"count": "c", "maxTimeMS": 5, "comment": 1, "readConcern": {"level": "local"}}
    assert op.parse({"ok": 1, "n": 12}, W) == 12
    assert op.parse({"ok": 0, "code": 26, "errmsg": "ns does not exist"}, W) == 0
    assert op.parse({"ok": 0, "errmsg": "ns missing"}, W) == 0
    with pytest.raises(OperationFailure):
        op.parse({"ok": 0, "code": 2, "errmsg": "bad"}, W)


def test_distinct():
    op = DistinctOperation("db", "c", "x", {"a": 1}, collation={"locale": "en"}, hint="x_1", max_time_ms=3,
                           comment="d", read_concern=ReadConcern("majority"))
    assert body(op) == {"distinct": "c", "key": "x", "query": {"a": 1}, "collation": {"locale": "en"},
                        "hint": "x_1", "maxTimeMS": 3, "comment": "d", "readConcern": {"level": "majority"}}
    assert op.parse({"ok": 1, "values": [1, 2]}, W) == [1, 2]
    assert "query" not in body(DistinctOperation("db", "c", "x"))
    with pytest.raises(TypeError):
        DistinctOperation("db", "c", 5)


# -- indexes ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("keys, name", [
    ({"name": 1, "dob": -1}, "name_1_dob_-1"),
    ([("a", 1), ("b", "2dsphere")], "a_1_b_2dsphere"),
    ("a", "a_1"),
    (["a", ("b", -1)], "a_1_b_-1"),
    ({"$**": "text"}, "$**_text"),
])
def test_index_name_generation(keys, name):
    assert index_name(keys) == name
    assert IndexModel(keys).document["name"] == name


def test_index_model_document():
    model = IndexModel([("a", 1)], unique=True, collation=Collation("en"), name=None, expireAfterSeconds=10)
    assert model.document == {"key": {"a": 1}, "name": "a_1", "unique": True, "expireAfterSeconds": 10,
                              "collation": {"locale": "en"}}
    assert IndexModel("a", name="custom").document["name"] == "custom"


def test_create_indexes():
    op = CreateIndexesOperation("db", "c", [IndexModel({"x": 1}), IndexModel("y", sparse=True)],
                                commit_quorum="majority", max_time_ms=5, comment="i",
                                write_concern=WriteConcern(w=1))
    assert body(op) == {"createIndexes": "c", "indexes": [{"key": {"x": 1}, "name": "x_1"},
                                                          {"key": {"y": 1}, "name": "y_1", "sparse": True}],
                        "commitQuorum": "majority", "maxTimeMS": 5, "comment": "i", "writeConcern": {"w": 1}}
    assert op.parse({"ok": 1, "numIndexesBefore": 1}, W) == ["x_1", "y_1"]
    with pytest.raises(ConfigurationError):
        op.build(WireInfo(max_wire_version=8))
    with pytest.raises(TypeError):
        CreateIndexesOperation("db", "c", [{"key": {"x": 1}}])
    with pytest.raises(WriteConcernError):
        op.parse({"ok": 1, "writeConcernError": {"code": 64, "errmsg": "x"}}, W)
    assert body(CreateIndexesOperation("db", "c", [IndexModel("a")], raw_data=True),
                WireInfo(max_wire_version=27))["rawData"] is True


def test_drop_indexes():
    assert body(DropIndexesOperation("db", "c", "a_1")) == {"dropIndexes": "c", "index": "a_1"}
    assert body(DropIndexesOperation("db", "c", [("a", 1), ("b", -1)]))["index"] == "a_1_b_-1"
    assert body(DropIndexesOperation("db", "c", {"a": 1}))["index"] == {"a": 1}
    assert body(DropIndexesOperation("db", "c", drop_all=True))["index"] == "*"
    with pytest.raises(ValueError):
        DropIndexesOperation("db", "c", "*")
    with pytest.raises(TypeError):
        DropIndexesOperation("db", "c", 5)
    op = DropIndexesOperation("db", "c", "a_1")
    assert op.parse({"ok": 0, "code": 26, "errmsg": "ns not found"}, W)["ok"] == 0


def test_list_indexes_and_index_information():
    op = ListIndexesOperation("db", "c", batch_size=2, comment="l")
    assert body(op) == {"listIndexes": "c", "cursor": {"batchSize": 2}, "comment": "l"}
    assert op.retryable and op.read_preference == ReadPreference.PRIMARY
    state = op.parse({"ok": 1, "cursor": {"id": 3, "ns": "db.c", "firstBatch": [{"v": 2, "key": {"_id": 1},
                                                                                  "name": "_id_"}]}}, W)
    assert state.get_more_operation().build(W).body["comment"] == "l"  # the spec: comment on getMore too
    missing = op.parse({"ok": 0, "code": 26, "errmsg": "ns does not exist"}, W)
    assert missing.first_batch == [] and missing.exhausted
    info = index_information([{"v": 2, "key": {"a": 1, "b": -1}, "name": "a_1_b_-1", "unique": True}])
    assert info == {"a_1_b_-1": {"v": 2, "key": [("a", 1), ("b", -1)], "unique": True}}


def test_search_index_commands_carry_no_concerns():
    create = CreateSearchIndexesOperation("db", "c", [SearchIndexModel({"mappings": {}}, name="s",
                                                                        type="search"), {"definition": {}}])
    assert body(create) == {"createSearchIndexes": "c", "indexes": [
        {"definition": {"mappings": {}}, "name": "s", "type": "search"}, {"definition": {}}]}
    assert create.parse({"ok": 1, "indexesCreated": [{"id": "1", "name": "s"}]}, W) == ["s"]
    assert not create.supports_write_concern and not create.supports_read_concern
    assert body(UpdateSearchIndexOperation("db", "c", "s", {"a": 1})) == {
        "updateSearchIndex": "c", "name": "s", "definition": {"a": 1}}
    drop = DropSearchIndexOperation("db", "c", "s")
    assert body(drop) == {"dropSearchIndex": "c", "name": "s"}
    assert drop.parse({"ok": 0, "code": 26, "errmsg": "ns not found"}, W) is None
    listing = list_search_indexes_operation("db", "c", "s", batch_size=10, read_concern=ReadConcern("majority"))
    assert body(listing) == {"aggregate": "c", "pipeline": [{"$listSearchIndexes": {"name": "s"}}],
                             "cursor": {"batchSize": 10}}
    assert body(list_search_indexes_operation("db", "c"))["pipeline"] == [{"$listSearchIndexes": {}}]
    finalized = create.finalize(create.build(W), ExecutionFields(in_transaction=True,
                                                                 read_concern={"level": "snapshot"}))
    assert "readConcern" not in finalized.body


# -- collections and databases --------------------------------------------------------------------

def test_list_collections():
    op = ListCollectionsOperation("db", filter={"name": "x"}, authorized_collections=True, comment="c",
                                  batch_size=4)
    assert body(op) == {"listCollections": 1, "cursor": {"batchSize": 4}, "filter": {"name": "x"},
                        "authorizedCollections": True, "comment": "c"}
    state = op.parse({"ok": 1, "cursor": {"id": 8, "ns": "db.$cmd.listCollections", "firstBatch": []}}, W)
    assert "comment" not in state.get_more_operation().build(W).body
    assert body(ListCollectionsOperation.for_names("db"))["nameOnly"] is True
    assert body(ListCollectionsOperation.for_names("db", filter={"name": "a"}))["nameOnly"] is True
    assert "nameOnly" not in body(ListCollectionsOperation.for_names("db", filter={"options.capped": True}))
    assert op.retryable and op.read_preference == ReadPreference.PRIMARY


def test_create_collection_options():
    op = CreateCollectionOperation("db", "c", {
        "capped": True, "size": 4096, "validator": {"$jsonSchema": {}}, "collation": Collation("en"),
        "timeseries": {"timeField": "t"}, "expireAfterSeconds": 60,
        "clusteredIndex": {"key": {"_id": 1}, "unique": True}, "changeStreamPreAndPostImages": {"enabled": True}},
        write_concern=WriteConcern(w=1), comment="x")
    assert body(op) == {"create": "c", "capped": True, "size": 4096, "validator": {"$jsonSchema": {}},
                        "collation": {"locale": "en"}, "timeseries": {"timeField": "t"},
                        "expireAfterSeconds": 60, "clusteredIndex": {"key": {"_id": 1}, "unique": True},
                        "changeStreamPreAndPostImages": {"enabled": True}, "comment": "x",
                        "writeConcern": {"w": 1}}
    assert op.is_write and not op.retryable
    with pytest.raises(InvalidName):
        CreateCollectionOperation("db", "bad$name")
    with pytest.raises(InvalidName):
        CreateCollectionOperation("db", "")


def test_drop_rename_collmod():
    drop = DropCollectionOperation("db", "c", comment=1)
    assert body(drop) == {"drop": "c", "comment": 1}
    assert drop.parse({"ok": 0, "code": 26, "errmsg": "ns not found"}, W)["code"] == 26
    rename = RenameCollectionOperation("db", "c", "d", drop_target=True, write_concern=WriteConcern(w=1))
    assert rename.dbname == "admin"
    assert body(rename) == {"renameCollection": "db.c", "to": "db.d", "dropTarget": True,
                            "writeConcern": {"w": 1}}
    with pytest.raises(InvalidName):
        RenameCollectionOperation("db", "c", ".d")
    with pytest.raises(InvalidName):
        RenameCollectionOperation("db", "c", "a..b")
    assert body(CollModOperation("db", "c", {"changeStreamPreAndPostImages": {"enabled": True}})) == {
        "collMod": "c", "changeStreamPreAndPostImages": {"enabled": True}}


def test_databases():
    op = ListDatabasesOperation(filter={"name": "x"}, name_only=True, authorized_databases=False, comment="d")
    assert op.dbname == "admin"
    assert body(op) == {"listDatabases": 1, "nameOnly": True, "filter": {"name": "x"},
                        "authorizedDatabases": False, "comment": "d"}
    state = op.parse({"ok": 1, "databases": [{"name": "a"}], "totalSize": 1}, W)
    assert state.first_batch == [{"name": "a"}] and state.exhausted
    drop = DropDatabaseOperation("db", write_concern=WriteConcern(w="majority"))
    assert body(drop) == {"dropDatabase": 1, "writeConcern": {"w": "majority"}}


# -- run_command -----------------------------------------------------------------------------------

def test_run_command_sends_the_users_command_as_written():
    assert command_document("ping") == {"ping": 1}
    assert command_document("count", "c", query={"a": 1}, comment="x") == {"count": "c", "query": {"a": 1},
                                                                            "comment": "x"}
    user = {"find": "c"}
    assert command_document(user, batchSize=1) == {"find": "c", "batchSize": 1} and user == {"find": "c"}
    op = RunCommandOperation("db", {"insert": "c", "writeConcern": {"w": 0}, "readConcern": {"level": "x"}})
    assert op.name == "insert" and not op.retryable and op.read_preference == ReadPreference.PRIMARY
    finalized = op.finalize(op.build(W), ExecutionFields(in_transaction=True, read_concern_extra={"a": 1}))
    assert finalized.body["writeConcern"] == {"w": 0} and finalized.body["readConcern"] == {"level": "x"}
    with pytest.raises(OperationFailure):
        op.parse({"ok": 0, "code": 1, "errmsg": "x"}, W)
    unchecked = RunCommandOperation("db", {"ping": 1}, check=False)
    assert unchecked.parse({"ok": 0, "errmsg": "x"}, W)["ok"] == 0
    allowed = RunCommandOperation("db", {"drop": "c"}, allowable_errors=[26])
    assert allowed.parse({"ok": 0, "code": 26, "errmsg": "ns not found"}, W)["code"] == 26


def test_cursor_command():
    op = RunCursorCommandOperation("db", {"find": "c", "comment": "z"}, batch_size=3, max_await_time_ms=9)
    state = op.parse({"ok": 1, "cursor": {"id": 5, "ns": "db.c", "firstBatch": [{}]}}, W)
    assert state.get_more_operation().build(W).body == {"getMore": Int64(5), "collection": "c", "batchSize": 3,
                                                        "maxTimeMS": 9, "comment": "z"}
    with pytest.raises(InvalidOperation):
        op.parse({"ok": 1, "n": 1}, W)
