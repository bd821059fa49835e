"""Collection against SecantusDB: every public method with real data, checked on the wire via command events."""

from __future__ import annotations

import pytest

from greenmongo.collection import Collection, ReturnDocument
from greenmongo.errors import (
    BulkWriteError,
    CollectionInvalid,
    ConfigurationError,
    DuplicateKeyError,
    InvalidName,
    InvalidOperation,
    OperationFailure,
    WriteError,
)
from greenmongo.operations import (
    DeleteMany,
    DeleteOne,
    IndexModel,
    InsertOne,
    ReplaceOne,
    SearchIndexModel,
    UpdateMany,
    UpdateOne,
)
from greenmongo.operations.results import BulkWriteResult, DeleteResult, InsertManyResult, InsertOneResult, UpdateResult
from greenmongo.options.read_concern import ReadConcern
from greenmongo.options.read_preferences import ReadPreference
from greenmongo.options.write_concern import WriteConcern
from tests.api_support import scratch_database
from tests.waits import wait_until


@pytest.fixture
def db(client, recorder):
    with scratch_database(client, "api_coll_") as database:
        recorder.clear()
        yield database


@pytest.fixture
def coll(db, recorder):
    collection = db.items
    collection.insert_many([{"_id": i, "x": i, "tag": "even" if i % 2 == 0 else "odd"} for i in range(10)])
    recorder.clear()
    return collection


# -- attributes and options -------------------------------------------------------------------------


def test_names_database_options_and_sub_collections(db):
    coll = db.items
    assert isinstance(coll, Collection)
    assert (coll.name, coll.full_name, coll.database) == ("items", f"{db.name}.items", db)
    assert coll.codec_options == db.codec_options and coll.write_concern == db.write_concern
    assert coll.read_preference == db.read_preference and coll.read_concern == db.read_concern
    sub = coll.sub
    assert sub.full_name == f"{db.name}.items.sub" and sub == coll["sub"] == db["items.sub"]
    tuned = coll.with_options(write_concern=WriteConcern(w=1), read_preference=ReadPreference.SECONDARY_PREFERRED,
                              read_concern=ReadConcern("majority"))
    assert tuned.write_concern == WriteConcern(w=1) and tuned.read_concern == ReadConcern("majority")
    assert tuned.read_preference == ReadPreference.SECONDARY_PREFERRED
    assert tuned.sub.write_concern == WriteConcern(w=1)  # sub-collections inherit the options
    assert tuned == coll and hash(tuned) == hash(coll) and coll != db.other
    assert repr(coll) == f"Collection({db!r}, 'items')"
    with pytest.raises(AttributeError):
        _ = coll._private
    assert callable(coll.watch)  # not taken for a sub-collection name
    with pytest.raises(NotImplementedError):
        bool(coll)
    with pytest.raises(TypeError, match="not callable.*'insert'"):
        coll.insert({"a": 1})
    with pytest.raises(TypeError, match="not iterable"):
        next(iter(coll))
    for bad in ("", "a..b", ".a", "a.", "a$b", "a\x00b"):
        with pytest.raises(InvalidName):
            db[bad]
    with pytest.raises(TypeError):
        db.get_collection(5)
    with pytest.raises(TypeError):
        coll.with_options(write_concern={"w": 1})


def test_sessions_must_be_the_clients_own(coll):
    with pytest.raises(TypeError, match="ClientSession"):
        coll.insert_one({"a": 1}, session=object())
    session = coll.database.client.start_session()
    session.end_session()
    with pytest.raises(InvalidOperation, match="ended session"):
        coll.find({}, session=session)


# -- inserts -------------------------------------------------------------------------------------------


def test_insert_one_adds_an_id_and_reports_duplicates(db, recorder):
    document = {"a": 1}
    result = db.c.insert_one(document, comment="hi")
    assert isinstance(result, InsertOneResult) and result.acknowledged
    assert result.inserted_id == document["_id"]
    assert db.c.find_one({"_id": result.inserted_id}) == {"_id": result.inserted_id, "a": 1}
    (insert,) = recorder.commands("insert")
    assert insert["comment"] == "hi" and insert["documents"] == [document] and "writeConcern" not in insert
    with pytest.raises(DuplicateKeyError) as info:
        db.c.insert_one({"_id": result.inserted_id})
    assert info.value.code == 11000
    with pytest.raises(TypeError):
        db.c.insert_one([("a", 1)])


def test_bypass_document_validation(db):
    strict = db.create_collection("strict", validator={"x": {"$type": "int"}})
    with pytest.raises(WriteError) as info:
        strict.insert_one({"x": "text"})
    assert info.value.code == 121
    strict.insert_one({"x": "text"}, bypass_document_validation=True)
    assert strict.count_documents({}) == 1


def test_insert_many_ordered_and_unordered(db, recorder):
    result = db.c.insert_many([{"_id": i} for i in range(5)])
    assert isinstance(result, InsertManyResult) and result.inserted_ids == list(range(5))
    generated = db.c.insert_many(({"g": i} for i in range(3)))  # any iterable
    assert len(generated.inserted_ids) == 3 and db.c.count_documents({"g": {"$exists": True}}) == 3
    with pytest.raises(BulkWriteError) as ordered:
        db.d.insert_many([{"_id": 1}, {"_id": 1}, {"_id": 2}])
    assert ordered.value.details["nInserted"] == 1 and ordered.value.details["writeErrors"][0]["index"] == 1
    with pytest.raises(BulkWriteError) as unordered:
        db.e.insert_many([{"_id": 1}, {"_id": 1}, {"_id": 2}], ordered=False)
    assert unordered.value.details["nInserted"] == 2
    assert recorder.commands("insert")[-1]["ordered"] is False
    with pytest.raises(TypeError):
        db.c.insert_many([])
    with pytest.raises(TypeError):
        db.c.insert_many({"_id": 1})


def test_insert_many_splits_by_the_servers_message_size(db, recorder):
    big = "x" * (10 * 1024 * 1024)
    db.big.insert_many([{"_id": i, "s": big} for i in range(5)])  # 50 MB > maxMessageSizeBytes (48 MB)
    inserts = recorder.commands("insert")
    assert len(inserts) == 2 and sum(len(command["documents"]) for command in inserts) == 5
    assert db.big.count_documents({}) == 5


# -- updates and deletes --------------------------------------------------------------------------------------


def test_update_one_many_and_replace_one(coll, recorder):
    result = coll.update_one({"_id": 1}, {"$set": {"y": 1}})
    assert isinstance(result, UpdateResult)
    assert (result.matched_count, result.modified_count, result.upserted_id) == (1, 1, None)
    assert result.raw_result["n"] == 1 and result.did_upsert is False
    many = coll.update_many({"tag": "even"}, {"$inc": {"x": 100}})
    assert (many.matched_count, many.modified_count) == (5, 5)
    assert coll.find_one({"_id": 4})["x"] == 104
    replaced = coll.replace_one({"_id": 2}, {"replaced": True})
    assert replaced.modified_count == 1 and coll.find_one({"_id": 2}) == {"_id": 2, "replaced": True}
    upsert = coll.replace_one({"_id": "new"}, {"v": 1}, upsert=True)
    assert upsert.upserted_id == "new" and upsert.matched_count == 0 and upsert.did_upsert
    update_commands = recorder.commands("update")
    assert update_commands[0]["updates"] == [{"q": {"_id": 1}, "u": {"$set": {"y": 1}}, "multi": False}]
    assert update_commands[1]["updates"][0]["multi"] is True
    assert update_commands[-1]["updates"][0]["upsert"] is True
    with pytest.raises(ValueError):
        coll.update_one({"_id": 1}, {"y": 1})  # needs operators
    with pytest.raises(ValueError):
        coll.replace_one({"_id": 1}, {"$set": {"y": 1}})  # must not have operators
    with pytest.raises(TypeError):
        coll.update_one({"_id": 1}, {"$set": {"y": 1}}, upsert="yes")


def test_update_options_array_filters_hint_let_sort_collation(coll, recorder):
    coll.insert_one({"_id": "arr", "a": [1, 5, 9]})
    coll.update_one({"_id": "arr"}, {"$set": {"a.$[big]": 0}}, array_filters=[{"big": {"$gt": 4}}])
    assert coll.find_one("arr")["a"] == [1, 0, 0]
    coll.update_many({"$expr": {"$eq": ["$tag", "$$t"]}}, {"$set": {"seen": True}}, let={"t": "odd"}, hint="_id_")
    assert coll.count_documents({"seen": True}) == 5
    coll.update_one({"tag": "odd"}, {"$set": {"last": True}}, sort={"x": -1})
    assert coll.find_one({"last": True})["_id"] == 9
    coll.update_one({"tag": "ODD"}, {"$set": {"ci": True}}, collation={"locale": "en", "strength": 2})
    assert coll.count_documents({"ci": True}) == 1
    statements = [command["updates"][0] for command in recorder.commands("update")]
    assert statements[0]["arrayFilters"] == [{"big": {"$gt": 4}}]
    assert statements[1]["hint"] == "_id_" and recorder.commands("update")[1]["let"] == {"t": "odd"}
    assert statements[2]["sort"] == {"x": -1}
    assert statements[3]["collation"] == {"locale": "en", "strength": 2}


def test_delete_one_and_many(coll, recorder):
    result = coll.delete_one({"tag": "odd"})
    assert isinstance(result, DeleteResult) and result.deleted_count == 1 and result.acknowledged
    assert coll.delete_many({"tag": "even"}, hint={"_id": 1}).deleted_count == 5
    assert coll.delete_many({"tag": "ODD"}, collation={"locale": "en", "strength": 2}).deleted_count == 4
    assert coll.count_documents({}) == 0
    deletes = [command["deletes"][0] for command in recorder.commands("delete")]
    assert [statement["limit"] for statement in deletes] == [1, 0, 0]
    assert deletes[1]["hint"] == {"_id": 1}


def test_unacknowledged_writes_send_w0_and_have_no_counts(coll, recorder):
    fire = coll.with_options(write_concern=WriteConcern(w=0))
    inserted = fire.insert_one({"_id": "w0"})
    assert inserted.acknowledged is False and inserted.inserted_id == "w0"
    updated = fire.update_one({"_id": 1}, {"$set": {"w0": True}})
    assert updated.acknowledged is False
    with pytest.raises(InvalidOperation):
        _ = updated.matched_count
    deleted = fire.delete_many({"tag": "even"})
    with pytest.raises(InvalidOperation):
        _ = deleted.deleted_count
    many = fire.insert_many([{"_id": "m1"}, {"_id": "m2"}])
    assert many.acknowledged is False and many.inserted_ids == ["m1", "m2"]
    bulk = fire.bulk_write([InsertOne({"_id": "b1"}), DeleteOne({"_id": 3})])
    assert isinstance(bulk, BulkWriteResult) and bulk.acknowledged is False
    assert fire.find_one_and_update({"_id": 5}, {"$set": {"f": 1}}) is None
    for name in ("insert", "update", "delete", "findAndModify"):  # the single-statement helpers
        assert recorder.commands(name)[0]["writeConcern"] == {"w": 0}, name
    # An ordered w:0 bulk write sends all but its last batch acknowledged, so an error still stops it.
    assert "writeConcern" not in recorder.commands("insert")[-1]
    assert recorder.commands("delete")[-1]["writeConcern"] == {"w": 0}
    unacknowledged = [event for event in recorder.succeeded_events if event.reply == {"ok": 1}]
    assert len(unacknowledged) == 6
    with pytest.raises(ConfigurationError):
        fire.update_one({"_id": 1}, {"$set": {"y": 1}}, collation={"locale": "en"})
    with pytest.raises(ConfigurationError):
        fire.bulk_write([UpdateOne({"_id": 1}, {"$set": {"a.$[i]": 1}}, array_filters=[{"i": 1}])])

    def applied() -> bool:
        return coll.count_documents({"_id": {"$in": ["w0", "m1", "m2", "b1"]}}) == 4 and \
            coll.count_documents({"tag": "even"}) == 0 and coll.find_one({"_id": 5}).get("f") == 1

    wait_until(applied, message="the unacknowledged writes applied")


# -- find and modify --------------------------------------------------------------------------------------


def test_find_one_and_update_replace_delete(coll, recorder):
    before = coll.find_one_and_update({"_id": 1}, {"$set": {"y": 1}})
    assert before == {"_id": 1, "x": 1, "tag": "odd"}
    after = coll.find_one_and_update({"tag": "odd"}, {"$inc": {"x": 10}}, sort=[("x", -1)], projection={"x": 1},
                                     return_document=ReturnDocument.AFTER)
    assert after == {"_id": 9, "x": 19}
    upserted = coll.find_one_and_update({"_id": "up"}, {"$set": {"v": 1}}, upsert=True,
                                        return_document=ReturnDocument.AFTER)
    assert upserted == {"_id": "up", "v": 1}
    replaced = coll.find_one_and_replace({"_id": 2}, {"r": True}, projection=["r"],
                                         return_document=ReturnDocument.AFTER)
    assert replaced == {"_id": 2, "r": True}
    deleted = coll.find_one_and_delete({"tag": "even"}, sort={"x": 1}, projection={"_id": 1})
    assert deleted == {"_id": 0}
    assert coll.find_one_and_delete({"_id": "missing"}) is None
    coll.find_one_and_update({"_id": 3}, {"$set": {"z": 1}}, maxTimeMS=5000, hint="_id_", let={"v": 1},
                             comment="c")
    commands = recorder.commands("findAndModify")
    assert commands[1]["sort"] == {"x": -1} and commands[1]["fields"] == {"x": 1} and commands[1]["new"] is True
    assert commands[2]["upsert"] is True and commands[4]["remove"] is True
    assert {key: commands[-1][key] for key in ("maxTimeMS", "hint", "let", "comment")} == \
        {"maxTimeMS": 5000, "hint": "_id_", "let": {"v": 1}, "comment": "c"}
    with pytest.raises(ValueError):
        coll.find_one_and_update({"_id": 1}, {"$set": {"y": 1}}, return_document="after")


# -- bulk write ---------------------------------------------------------------------------------------------


def test_bulk_write_mixed_models_and_results(coll, recorder):
    result = coll.bulk_write([
        InsertOne({"_id": 100}),
        UpdateOne({"_id": 1}, {"$set": {"u": 1}}),
        UpdateMany({"tag": "even"}, {"$set": {"u": 2}}),
        ReplaceOne({"_id": "r"}, {"r": 1}, upsert=True),
        DeleteOne({"_id": 3}),
        DeleteMany({"tag": "odd", "u": {"$exists": False}}),
    ], comment="bulk", let={"unused": 1})
    assert result.acknowledged
    assert (result.inserted_count, result.matched_count, result.modified_count) == (1, 6, 6)
    assert (result.upserted_count, result.deleted_count, result.upserted_ids) == (1, 4, {3: "r"})
    assert recorder.names() == ["insert", "update", "delete"]
    assert all(event.command["comment"] == "bulk" for event in recorder.started_events)
    assert recorder.commands("update")[0]["let"] == {"unused": 1} and "let" not in recorder.commands("insert")[0]


def test_bulk_write_errors_ordered_stop_unordered_continue(coll):
    requests = [InsertOne({"_id": 1}), UpdateOne({"_id": 2}, {"$set": {"b": 1}}), InsertOne({"_id": 50})]
    with pytest.raises(BulkWriteError) as ordered:
        coll.bulk_write(requests)
    details = ordered.value.details
    assert details["nInserted"] == 0 and details["nMatched"] == 0
    assert details["writeErrors"][0]["index"] == 0 and details["writeErrors"][0]["code"] == 11000
    assert details["writeErrors"][0]["op"] == {"_id": 1}
    assert coll.find_one({"_id": 50}) is None
    with pytest.raises(BulkWriteError) as unordered:
        coll.bulk_write(requests, ordered=False)
    details = unordered.value.details
    assert details["nInserted"] == 1 and details["nMatched"] == 1 and len(details["writeErrors"]) == 1
    assert coll.find_one({"_id": 50}) == {"_id": 50}
    with pytest.raises(TypeError):
        coll.bulk_write(InsertOne({"_id": 1}))
    with pytest.raises(InvalidOperation):
        coll.bulk_write([])
    with pytest.raises(TypeError):
        coll.bulk_write([{"insertOne": {"document": {}}}])


# -- finds (details in test_api_cursor.py) ----------------------------------------------------------------


def test_find_and_find_one(coll, recorder):
    assert [doc["_id"] for doc in coll.find({"tag": "odd"}, {"_id": 1})] == [1, 3, 5, 7, 9]
    assert coll.find_one() is not None and coll.find_one({"_id": 4}) == {"_id": 4, "x": 4, "tag": "even"}
    assert coll.find_one(7) == {"_id": 7, "x": 7, "tag": "odd"}  # a bare value means _id
    assert coll.find_one({"_id": "none"}) is None
    assert coll.find_one({"tag": "odd"}, {"x": 1, "_id": 0}, 1, 99, sort=[("x", -1)]) == {"x": 7}
    find = recorder.commands("find")[-1]
    assert find["limit"] == 1 and find["singleBatch"] is True and find["skip"] == 1
    assert "killCursors" not in recorder.names()


# -- counting and distinct ----------------------------------------------------------------------------------


def test_counts_and_distinct(coll, recorder):
    assert coll.count_documents({}) == 10
    assert coll.count_documents({"tag": "odd"}, skip=1, limit=3) == 3
    assert coll.count_documents({"x": {"$gt": 100}}) == 0
    assert coll.count_documents({"tag": "ODD"}, collation={"locale": "en", "strength": 2}, hint="_id_",
                                maxTimeMS=5000) == 5
    pipeline = recorder.commands("aggregate")[1]["pipeline"]
    assert pipeline == [{"$match": {"tag": "odd"}}, {"$skip": 1}, {"$limit": 3},
                        {"$group": {"_id": 1, "n": {"$sum": 1}}}]
    assert recorder.commands("aggregate")[-1]["maxTimeMS"] == 5000
    assert coll.estimated_document_count() == 10 and coll.estimated_document_count(maxTimeMS=1000) == 10
    assert coll.database.missing.estimated_document_count() == 0
    assert recorder.commands("count")[1]["maxTimeMS"] == 1000
    with pytest.raises(ConfigurationError):
        coll.estimated_document_count(session=None)
    assert sorted(coll.distinct("tag")) == ["even", "odd"]
    assert sorted(coll.distinct("x", {"tag": "even"})) == [0, 2, 4, 6, 8]
    assert coll.distinct("tag", {"tag": "EVEN"}, collation={"locale": "en", "strength": 2}) == ["even"]
    assert recorder.commands("distinct")[1]["query"] == {"tag": "even"}


# -- aggregation -------------------------------------------------------------------------------------------


def test_aggregate_batches_and_out(coll, recorder):
    cursor = coll.aggregate([{"$match": {"tag": "odd"}}, {"$sort": {"x": -1}}], batchSize=2, comment="agg",
                            allowDiskUse=True, let={"v": 1}, maxTimeMS=5000)
    assert [doc["_id"] for doc in cursor] == [9, 7, 5, 3, 1]
    aggregate = recorder.commands("aggregate")[0]
    assert aggregate["cursor"] == {"batchSize": 2} and aggregate["comment"] == "agg"
    assert aggregate["allowDiskUse"] is True and aggregate["let"] == {"v": 1} and aggregate["maxTimeMS"] == 5000
    assert [command["batchSize"] for command in recorder.commands("getMore")] == [2, 2]
    out = coll.aggregate([{"$match": {"tag": "even"}}, {"$out": "evens"}])
    assert list(out) == []
    assert coll.database.evens.count_documents({}) == 5
    assert "batchSize" not in recorder.commands("aggregate")[-1]["cursor"]
    with pytest.raises(ConfigurationError):
        coll.aggregate([], explain=True)
    with pytest.raises(TypeError):
        coll.aggregate({"$match": {}})


# -- indexes ----------------------------------------------------------------------------------------------


def test_index_management(coll, recorder):
    assert coll.create_index("x") == "x_1"
    assert coll.create_index([("tag", 1), ("x", -1)], unique=True, name="tag_x") == "tag_x"
    assert coll.create_indexes([IndexModel([("y", -1)]), IndexModel({"z": 1}, sparse=True)],
                               maxTimeMS=5000) == ["y_-1", "z_1"]
    assert recorder.commands("createIndexes")[-1]["maxTimeMS"] == 5000
    names = [index["name"] for index in coll.list_indexes()]
    assert sorted(names) == ["_id_", "tag_x", "x_1", "y_-1", "z_1"]
    info = coll.index_information()
    assert info["tag_x"]["key"] == [("tag", 1), ("x", -1)] and info["tag_x"]["unique"] is True
    with pytest.raises(DuplicateKeyError):
        coll.insert_one({"tag": "odd", "x": 1})
    coll.drop_index("x_1")
    coll.drop_index([("y", -1)])
    assert sorted(coll.index_information()) == ["_id_", "tag_x", "z_1"]
    coll.drop_indexes()
    assert list(coll.index_information()) == ["_id_"]
    assert list(coll.database.never_created.list_indexes()) == []
    with pytest.raises(OperationFailure):
        coll.drop_index("no_such_index")
    with pytest.raises(TypeError):
        coll.drop_index(5)


def test_search_index_helpers_send_their_commands(coll, recorder):
    """SecantusDB is not Atlas: each helper must still send its command and raise the server's error."""
    model = SearchIndexModel({"mappings": {"dynamic": True}}, name="s")
    with pytest.raises(OperationFailure):
        coll.create_search_index(model)
    with pytest.raises(OperationFailure):
        coll.create_search_index({"definition": {"mappings": {"dynamic": False}}, "name": "t"})
    with pytest.raises(OperationFailure):
        coll.create_search_indexes([model])
    with pytest.raises(OperationFailure):
        list(coll.list_search_indexes("s"))
    with pytest.raises(OperationFailure):
        coll.update_search_index("s", {"mappings": {"dynamic": False}})
    try:
        coll.drop_search_index("s")
    except OperationFailure:
        pass
    assert recorder.commands("createSearchIndexes")[0]["indexes"] == [model.document]
    assert recorder.commands("aggregate")[0]["pipeline"] == [{"$listSearchIndexes": {"name": "s"}}]
    assert recorder.commands("updateSearchIndex")[0]["name"] == "s"
    assert recorder.commands("dropSearchIndex")[0] == {"dropSearchIndex": "items", "name": "s",
                                                       "$db": coll.database.name}


# -- administration -----------------------------------------------------------------------------------------


def test_rename_drop_and_options(db, recorder):
    capped = db.create_collection("capped", capped=True, size=8192)
    assert capped.options() == {"capped": True, "size": 8192}
    assert db.missing.options() == {}
    capped.rename("renamed")
    assert recorder.commands("renameCollection")[-1]["to"] == f"{db.name}.renamed"
    assert db.list_collection_names() == ["renamed"]
    db.other.insert_one({})
    with pytest.raises(OperationFailure):
        db.other.rename("renamed")
    db.other.rename("renamed", dropTarget=True)
    assert db.list_collection_names() == ["renamed"]
    with pytest.raises(InvalidName):
        db.renamed.rename("bad$name")
    with pytest.raises(TypeError):
        db.renamed.rename(5)
    db.renamed.drop()
    db.renamed.drop()  # dropping a missing collection is fine
    assert db.list_collection_names() == []


def test_create_through_the_constructor(db):
    Collection(db, "made", create=True)
    Collection(db, "capped_made", capped=True, size=4096)
    assert sorted(db.list_collection_names()) == ["capped_made", "made"]
    assert db.capped_made.options()["capped"] is True
    with pytest.raises(CollectionInvalid):
        db.create_collection("made")


def test_codec_options_shape_documents(db):
    from collections import OrderedDict

    from greenmongo.bson import RawBSONDocument, encode
    from greenmongo.bson.codec_options import CodecOptions

    db.c.insert_one(RawBSONDocument(encode({"_id": 1, "a": {"b": 2}})))
    ordered = db.get_collection("c", codec_options=CodecOptions(document_class=OrderedDict))
    document = ordered.find_one()
    assert type(document) is OrderedDict and type(document["a"]) is OrderedDict
    raw = db.c.with_options(codec_options=CodecOptions(document_class=RawBSONDocument))
    raw_document = raw.find_one({"_id": 1})
    assert isinstance(raw_document, RawBSONDocument) and raw_document["a"]["b"] == 2
    assert isinstance(next(raw.aggregate([])), RawBSONDocument)
    assert raw.update_one({"_id": 1}, {"$set": {"c": 3}}).modified_count == 1  # write replies stay dicts
    assert raw.count_documents({}) == 1 and raw.distinct("c") == [3]
