"""Database against SecantusDB: run_command semantics, cursor commands, collection listing and DDL."""

from __future__ import annotations

import pytest

from greenmongo.bson import DBRef, RawBSONDocument
from greenmongo.bson.codec_options import CodecOptions
from greenmongo.collection import Collection
from greenmongo.command_cursor import CommandCursor
from greenmongo.database import Database
from greenmongo.errors import CollectionInvalid, InvalidName, InvalidOperation, OperationFailure, WriteError
from greenmongo.options.read_concern import ReadConcern
from greenmongo.options.read_preferences import ReadPreference
from greenmongo.options.write_concern import WriteConcern
from tests.api_support import scratch_database


@pytest.fixture
def db(client, recorder):
    with scratch_database(client, "api_db_") as database:
        recorder.clear()
        yield database


def test_attributes_options_and_collections(client, db):
    assert isinstance(db, Database) and db.client is client and db.name.startswith("api_db_")
    assert db == client[db.name] == client.get_database(db.name) and hash(db) == hash(client[db.name])
    assert db != client.other and repr(db) == f"Database({client!r}, {db.name!r})"
    assert db.codec_options == client.codec_options and db.write_concern == client.write_concern
    assert db.read_preference == client.read_preference and db.read_concern == client.read_concern
    tuned = db.with_options(codec_options=CodecOptions(tz_aware=True), write_concern=WriteConcern(w="majority"),
                            read_concern=ReadConcern("local"), read_preference=ReadPreference.NEAREST)
    assert tuned.codec_options.tz_aware and tuned.write_concern == WriteConcern(w="majority")
    assert tuned.read_concern == ReadConcern("local") and tuned.read_preference == ReadPreference.NEAREST
    coll = tuned.get_collection("c", write_concern=WriteConcern(w=1))
    assert isinstance(coll, Collection) and coll.write_concern == WriteConcern(w=1)
    assert coll.read_preference == ReadPreference.NEAREST  # the rest is inherited
    assert db.c == db["c"] == db.get_collection("c") and db.c.full_name == f"{db.name}.c"
    with pytest.raises(AttributeError):
        _ = db._private
    assert callable(db.watch)  # not taken for a sub-collection name
    with pytest.raises(NotImplementedError):
        bool(db)
    with pytest.raises(TypeError, match="not iterable"):
        next(iter(db))
    for bad in ("", "a.b", "a b", "a$b", "a/b", 'a"b'):
        with pytest.raises(InvalidName):
            client[bad]
    assert client["$external"].name == "$external"
    with pytest.raises(TypeError):
        Database(client, 5)
    with pytest.raises(TypeError):
        db.with_options(read_preference="primary")


# -- run command ----------------------------------------------------------------------------------------


def test_command_spellings_and_replies(db, recorder):
    assert db.command("ping")["ok"] == 1
    db.c.insert_many([{"_id": i} for i in range(3)])
    assert db.command({"count": "c"})["n"] == 3
    assert db.command("count", "c", query={"_id": {"$gt": 0}})["n"] == 2
    assert db.command("count", "c", comment="hi")["n"] == 3
    counts = recorder.commands("count")
    assert counts[1] == {"count": "c", "query": {"_id": {"$gt": 0}}, "$db": db.name}
    assert counts[2]["comment"] == "hi"
    raw = db.command("ping", codec_options=CodecOptions(document_class=RawBSONDocument))
    assert isinstance(raw, RawBSONDocument) and raw["ok"] == 1
    with pytest.raises(OperationFailure) as info:
        db.command("noSuchCommand")
    assert info.value.code == 59
    failed = db.command("noSuchCommand", check=False)
    assert failed["ok"] == 0 and failed["code"] == 59
    assert db.command("noSuchCommand", allowable_errors=[59])["ok"] == 0
    with pytest.raises(TypeError):
        db.command(5)
    with pytest.raises(TypeError, match="ClientSession"):
        db.command("ping", session=object())


def test_command_adds_no_concerns_and_primary_by_default(db, recorder):
    picky = db.with_options(read_concern=ReadConcern("majority"), write_concern=WriteConcern(w="majority"),
                            read_preference=ReadPreference.SECONDARY_PREFERRED)
    picky.command("find", "c")
    picky.command("insert", "c", documents=[{"_id": 1}])
    find, insert = recorder.started_events
    for command in (find.command, insert.command):
        assert "readConcern" not in command and "writeConcern" not in command
        assert "$readPreference" not in command  # primary, the default, is never sent to a replica set
    picky.command("ping", read_preference=ReadPreference.SECONDARY_PREFERRED)
    assert recorder.commands("ping")[0]["$readPreference"] == {"mode": "secondaryPreferred"}


def test_command_is_never_retried(client, db, recorder):
    client.admin.command("configureFailPoint", "failCommand", mode={"times": 1},
                         data={"failCommands": ["ping"], "errorCode": 6})  # HostUnreachable: retryable
    recorder.clear()
    try:
        with pytest.raises(OperationFailure) as info:
            db.command("ping")
        assert info.value.code == 6
        assert recorder.names() == ["ping"]
    finally:
        client.admin.command("configureFailPoint", "failCommand", mode="off")


def test_cursor_command(db, recorder):
    db.c.insert_many([{"_id": i} for i in range(5)])
    recorder.clear()
    cursor = db.cursor_command("find", "c", batchSize=2, comment="for getMore", max_await_time_ms=None)
    assert isinstance(cursor, CommandCursor)
    assert [doc["_id"] for doc in cursor] == [0, 1, 2, 3, 4]
    find = recorder.commands("find")[0]
    assert find == {"find": "c", "batchSize": 2, "$db": db.name}  # the command is sent as written
    assert all(command["comment"] == "for getMore" for command in recorder.commands("getMore"))
    recorder.clear()
    tuned = db.cursor_command({"find": "c", "batchSize": 1})
    tuned.batch_size(3)
    assert len(list(tuned)) == 5
    assert [command["batchSize"] for command in recorder.commands("getMore")] == [3, 3]
    recorder.clear()
    capped = db.create_collection("capped", capped=True, size=4096)
    capped.insert_one({"_id": 1})
    tail = db.cursor_command("find", "capped", tailable=True, awaitData=True, max_await_time_ms=20)
    assert tail.try_next() == {"_id": 1} and tail.try_next() is None and tail.alive
    assert recorder.commands("getMore")[0]["maxTimeMS"] == 20
    tail.close()
    assert recorder.names()[-1] == "killCursors"
    with pytest.raises(InvalidOperation, match="cursor"):
        db.cursor_command("ping")


# -- collections ------------------------------------------------------------------------------------------


def test_list_collections_and_names(db, recorder):
    for name in ("a", "b", "c"):
        db.create_collection(name)
    recorder.clear()
    assert sorted(db.list_collection_names()) == ["a", "b", "c"]
    assert db.list_collection_names(filter={"name": "b"}) == ["b"]
    assert db.list_collection_names(filter={"type": "collection", "name": "c"}) == ["c"]
    assert sorted(db.list_collection_names(authorizedCollections=True)) == ["a", "b", "c"]
    first, by_name, by_type, authorized = recorder.commands("listCollections")
    assert first["nameOnly"] is True and by_name["nameOnly"] is True and "nameOnly" not in by_type
    assert authorized["authorizedCollections"] is True
    recorder.clear()
    described = list(db.list_collections(filter={"name": {"$in": ["a", "c"]}}, batchSize=1, comment="lc"))
    assert sorted(doc["name"] for doc in described) == ["a", "c"] and all(doc["type"] == "collection"
                                                                         for doc in described)
    listing = recorder.commands("listCollections")[0]
    assert listing["cursor"] == {"batchSize": 1} and listing["comment"] == "lc"
    assert "comment" not in recorder.commands("getMore")[0]  # the server keeps it for the cursor
    assert [doc["name"] for doc in db.list_collections(nameOnly=True)] != []
    assert recorder.commands("listCollections")[-1]["nameOnly"] is True


def test_create_collection_options(db, recorder):
    capped = db.create_collection("capped", capped=True, size=4096, max=3)
    assert isinstance(capped, Collection) and capped.options() == {"capped": True, "size": 4096, "max": 3}
    validated = db.create_collection("validated", validator={"n": {"$type": "int"}}, validationLevel="strict")
    with pytest.raises(WriteError):
        validated.insert_one({"n": "text"})
    series = db.create_collection("series", timeseries={"timeField": "t", "granularity": "hours"},
                                  expireAfterSeconds=3600)
    assert series.options()["timeseries"]["timeField"] == "t"
    clustered = db.create_collection("clustered", clusteredIndex={"key": {"_id": 1}, "unique": True})
    assert clustered.options()["clusteredIndex"]["key"] == {"_id": 1}
    images = db.create_collection("images", changeStreamPreAndPostImages={"enabled": True})
    assert images.options()["changeStreamPreAndPostImages"] == {"enabled": True}
    tuned = db.create_collection("tuned", write_concern=WriteConcern(w=1), comment="made")
    assert tuned.write_concern == WriteConcern(w=1)
    create = recorder.commands("create")[-1]
    assert create["writeConcern"] == {"w": 1} and create["comment"] == "made"
    with pytest.raises(CollectionInvalid):
        db.create_collection("capped")
    with pytest.raises(OperationFailure) as info:
        db.create_collection("capped", check_exists=False)
    assert info.value.code == 48  # NamespaceExists, from the server
    with pytest.raises(InvalidName):
        db.create_collection("bad$name")


def test_drop_and_validate_collection(db, recorder):
    db.c.insert_one({"_id": 1})
    db.d.insert_one({"_id": 1})
    assert db.drop_collection("c")["ok"] == 1
    db.drop_collection(db.d, comment="bye")
    assert recorder.commands("drop")[-1]["comment"] == "bye"
    assert db.list_collection_names() == []
    assert db.drop_collection("never")["ok"] in (0, 1)  # a missing collection is not an error
    with pytest.raises(TypeError):
        db.drop_collection(5)
    db.e.insert_one({"_id": 1})
    result = db.validate_collection("e", full=True)
    assert result["valid"] is True
    assert recorder.commands("validate")[0] == {"validate": "e", "scandata": False, "full": True, "$db": db.name}
    with pytest.raises(OperationFailure):
        db.validate_collection("never")


def test_database_aggregate_and_dereference(db, recorder):
    docs = list(db.aggregate([{"$documents": [{"a": 1}, {"a": 2}, {"a": 3}]}, {"$match": {"a": {"$gt": 1}}}],
                             batchSize=1, comment="dbagg", let={"v": 1}))
    assert docs == [{"a": 2}, {"a": 3}]
    aggregate = recorder.commands("aggregate")[0]
    assert aggregate["aggregate"] == 1 and aggregate["comment"] == "dbagg" and aggregate["let"] == {"v": 1}
    list(db.aggregate([{"$documents": [{"_id": 1, "x": 1}]}, {"$out": "written"}]))
    assert db.written.find_one() == {"_id": 1, "x": 1}
    assert db.dereference(DBRef("written", 1)) == {"_id": 1, "x": 1}
    assert db.dereference(DBRef("written", 2)) is None
    with pytest.raises(ValueError):
        db.dereference(DBRef("written", 1, database="elsewhere"))
    with pytest.raises(TypeError):
        db.dereference({"$ref": "written", "$id": 1})
