"""PyMongo's legacy ``gridfs.GridFS`` API and the ``gridfs`` package's public shape.

The parity test compares names and signatures with the installed PyMongo 4.20 (the peer); the
integration tests run every GridFS method against SecantusDB, and one drop-in test runs PyMongo-style
code (``import gridfs``) in a fresh interpreter after ``install_as_pymongo()``.
"""

from __future__ import annotations

import datetime
import importlib
import inspect
import io
import os
import subprocess
import sys
import textwrap

import pytest

import greenmongo.gridfs as gm_gridfs
from greenmongo import WriteConcern
from greenmongo.bson import Int64, ObjectId
from greenmongo.errors import ConfigurationError, CorruptGridFile, FileExists, InvalidOperation, NoFile
from greenmongo.gridfs import GridFS, GridIn, GridOut, GridOutCursor, grid_file
from tests.api_support import scratch_database

server = pytest.mark.server

# -- parity with PyMongo's gridfs (no server) -------------------------------------------------------

_CLASSES = ("GridFS", "GridFSBucket", "GridIn", "GridOut", "GridOutCursor")
_DUNDERS = ("__init__", "__iter__", "__next__", "__enter__", "__exit__")


def _real_gridfs():
    real = pytest.importorskip("gridfs")
    if real.__name__ != "gridfs" or not hasattr(real, "AsyncGridFS"):
        pytest.skip("the real PyMongo gridfs package is not importable here")
    importlib.import_module("gridfs.grid_file")  # PyMongo's gridfs loads it with the package; be sure
    return real


def _accepts(theirs: inspect.Signature, ours: inspect.Signature) -> list[str]:
    """What a call valid for PyMongo's signature could not do with ours (empty: compatible)."""
    problems = []
    mine = list(ours.parameters.values())
    for index, parameter in enumerate(theirs.parameters.values()):
        if index < len(mine) and mine[index].kind is inspect.Parameter.VAR_POSITIONAL:
            return problems  # ours takes every further positional (e.g. __exit__(*exc))
        if index >= len(mine):
            problems.append(f"missing parameter {parameter.name}")
            continue
        counterpart = mine[index]
        if parameter.kind is not inspect.Parameter.POSITIONAL_ONLY and counterpart.name != parameter.name:
            problems.append(f"parameter {index} is {counterpart.name}, PyMongo's is {parameter.name}")
        widened = (parameter.kind is inspect.Parameter.POSITIONAL_ONLY
                   and counterpart.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD)
        if counterpart.kind is not parameter.kind and not widened:
            problems.append(f"{parameter.name} is {counterpart.kind.name}, PyMongo's is {parameter.kind.name}")
        if counterpart.default != parameter.default:
            problems.append(f"{parameter.name} defaults to {counterpart.default!r}, PyMongo's to {parameter.default!r}")
    for extra in mine[len(theirs.parameters):]:
        if extra.default is inspect.Parameter.empty and extra.kind not in (inspect.Parameter.VAR_POSITIONAL,
                                                                          inspect.Parameter.VAR_KEYWORD):
            problems.append(f"extra required parameter {extra.name}")
    return problems


@pytest.mark.one_pass
def test_public_names_match_pymongo_gridfs() -> None:
    real = _real_gridfs()
    synchronous = [name for name in real.__all__ if not name.startswith("Async")]
    assert set(synchronous) <= set(gm_gridfs.__all__)
    for name in synchronous:
        assert hasattr(gm_gridfs, name)
    for name in ("GridFSError", "CorruptGridFile", "NoFile", "FileExists"):
        assert getattr(gm_gridfs.errors, name) is getattr(gm_gridfs, name)
        assert issubclass(getattr(gm_gridfs.errors, name), gm_gridfs.errors.GridFSError)
    internals = {"GridOutChunkIterator", "GridOutIterator", "GRIDOUT_BASE_CLASS"}
    own = {name for name in vars(real.grid_file) if name.startswith(("Grid", "DEFAULT"))
           or name in ("NoFile", "FileExists", "CorruptGridFile", "EMPTY", "NEWLN")} - internals
    assert own >= {"GridFS", "GridIn", "GridOut", "GridOutCursor", "DEFAULT_CHUNK_SIZE", "NoFile"}
    for name in own:
        theirs, ours = getattr(real.grid_file, name), getattr(grid_file, name)
        if isinstance(theirs, type):
            assert ours.__name__ == theirs.__name__
        else:
            assert ours == theirs
    assert grid_file.GridIn is GridIn and grid_file.GridFS is GridFS and grid_file.DEFAULT_CHUNK_SIZE == 255 * 1024


@pytest.mark.one_pass
@pytest.mark.parametrize("class_name", _CLASSES)
def test_methods_and_properties_match_pymongo(class_name: str) -> None:
    real = _real_gridfs()
    theirs, ours = getattr(real, class_name), getattr(gm_gridfs, class_name)
    problems = []
    for name in dir(theirs):
        if name.startswith("_") and name not in _DUNDERS + ("_id",):
            continue
        if not hasattr(ours, name):
            problems.append(f"{name}: missing")
            continue
        their_attr, our_attr = inspect.getattr_static(theirs, name), inspect.getattr_static(ours, name)
        if isinstance(their_attr, property):
            if not isinstance(our_attr, property):
                problems.append(f"{name}: not a property")
            elif their_attr.fset is not None and our_attr.fset is None:
                problems.append(f"{name}: read-only here, settable in PyMongo")
        elif callable(their_attr):
            try:
                their_signature = inspect.signature(getattr(theirs, name))
            except (TypeError, ValueError):
                continue  # a C slot wrapper PyMongo inherits (io.IOBase): nothing to compare
            problems.extend(f"{name}: {problem}"
                            for problem in _accepts(their_signature, inspect.signature(getattr(ours, name))))
    assert problems == []


# -- integration ----------------------------------------------------------------------------------


@pytest.fixture
def db(client, recorder):
    with scratch_database(client, "gridfs_legacy_") as database:
        recorder.clear()
        yield database


@pytest.fixture
def fs(db):
    return GridFS(db)


def _date(n: int) -> datetime.datetime:
    return datetime.datetime(2020, 1, 1) + datetime.timedelta(seconds=n)


def _put_versions(fs: GridFS, db, *files: tuple) -> list:
    """Store (filename, data, fields) files with upload dates one second apart, in order."""
    ids = []
    for n, (filename, data, fields) in enumerate(files):
        file_id = fs.put(data, filename=filename, **fields)
        db["fs.files"].update_one({"_id": file_id}, {"$set": {"uploadDate": _date(n)}})
        ids.append(file_id)
    return ids


@server
def test_constructor_checks_its_arguments(db) -> None:
    with pytest.raises(TypeError):
        GridFS(db["fs"])
    with pytest.raises(TypeError):
        GridFS(db, collection=1)
    with pytest.raises(TypeError):
        GridFS(db, disable_md5=True)  # removed in PyMongo 4.0
    with pytest.raises(ConfigurationError):
        GridFS(db.with_options(write_concern=WriteConcern(w=0)))
    images = GridFS(db, "images")
    file_id = images.put(b"png", filename="logo")
    assert db["images.files"].find_one()["_id"] == file_id and db["images.chunks"].count_documents({}) == 1
    assert "fs.files" not in db.list_collection_names()
    assert images.get(file_id).read() == b"png"


@server
def test_put_stores_bytes_str_and_streams_with_top_level_fields(fs, db) -> None:
    file_id = fs.put(b"hello world", filename="a.txt", content_type="text/plain", chunk_size=4,
                     metadata={"owner": "ann"}, aliases=["b.txt"], foo=1)
    assert isinstance(file_id, ObjectId)
    stored = db["fs.files"].find_one({"_id": file_id})
    assert {key: stored[key] for key in ("filename", "contentType", "chunkSize", "length", "metadata", "aliases",
                                         "foo")} == {"filename": "a.txt", "contentType": "text/plain", "chunkSize": 4,
                                                     "length": 11, "metadata": {"owner": "ann"},
                                                     "aliases": ["b.txt"], "foo": 1}
    assert "md5" not in stored and "content_type" not in stored and "chunk_size" not in stored
    assert db["fs.chunks"].count_documents({"files_id": file_id}) == 3
    grid_out = fs.get(file_id)
    assert isinstance(grid_out, GridOut)
    assert (grid_out.filename, grid_out.name, grid_out.content_type, grid_out.length, grid_out.chunk_size,
            grid_out.metadata, grid_out.aliases, grid_out.foo) == ("a.txt", "a.txt", "text/plain", 11, 4,
                                                                   {"owner": "ann"}, ["b.txt"], 1)
    assert grid_out.md5 is None and grid_out.upload_date == stored["uploadDate"]
    assert type(grid_out.length) is Int64  # the stored value: copied elsewhere it stays an int64
    assert grid_out.read() == b"hello world"

    text_id = fs.put("héllo", encoding="utf-8", _id="text")
    assert text_id == "text" and fs.get("text").read() == "héllo".encode() and fs.get("text").encoding == "utf-8"
    with pytest.raises(TypeError):
        fs.put("no encoding")
    stream_id = fs.put(io.BytesIO(bytes(range(100))), chunkSize=7)
    assert fs.get(stream_id).read() == bytes(range(100)) and fs.get(stream_id).filename is None
    empty_id = fs.put(b"")
    assert fs.get(empty_id).read() == b"" and fs.get(empty_id).length == 0
    with pytest.raises(FileExists):
        fs.put(b"again", _id="text")
    assert fs.get("text").read() == "héllo".encode()  # the existing file is untouched
    assert db["fs.files"].count_documents({}) == 4


@server
def test_new_file_attributes_before_and_after_close(fs, db) -> None:
    grid_in = fs.new_file(filename="n", _id=5)
    assert isinstance(grid_in, GridIn) and grid_in._id == 5 and not grid_in.closed
    for name in ("length", "upload_date", "md5"):
        with pytest.raises(AttributeError):
            getattr(grid_in, name)
    grid_in.foo = 1  # before close: stored with the files document
    grid_in.content_type = "application/x-test"
    grid_in.filename = "renamed"
    assert (grid_in.foo, grid_in.content_type, grid_in.contentType) == (1, "application/x-test",
                                                                         "application/x-test")
    with grid_in:
        grid_in.write(b"data")
    assert grid_in.closed and grid_in.length == 4 and type(grid_in.length) is Int64 and grid_in.md5 is None
    stored = db["fs.files"].find_one({"_id": 5})
    assert (stored["foo"], stored["contentType"], stored["filename"]) == (1, "application/x-test", "renamed")
    grid_in.bar = 2  # after close: the stored document is updated at once
    grid_in.content_type = "text/plain"
    assert db["fs.files"].find_one({"_id": 5}, projection={"_id": 0, "bar": 1, "contentType": 1}) == {
        "bar": 2, "contentType": "text/plain"}
    with pytest.raises(AttributeError):
        grid_in._id = 6
    with pytest.raises(ValueError):
        grid_in.write(b"more")


@server
def test_get_reads_like_a_file_and_raises_no_file(fs, db) -> None:
    file_id = fs.put(b"line one\nline two\nlast", chunk_size=5)
    with fs.get(file_id) as grid_out:
        assert grid_out.readchunk() == b"line "
        assert grid_out.tell() == 5 and grid_out.readline() == b"one\n"
        assert list(grid_out) == [b"line two\n", b"last"]
        assert grid_out.seek(-4, os.SEEK_END) == 18 and grid_out.read() == b"last"
        assert grid_out.seek(0) == 0 and grid_out.read(4) == b"line"
    assert grid_out.closed
    with pytest.raises(NoFile):
        fs.get(ObjectId())
    with pytest.raises(NoFile):
        fs.get({"_id": file_id})  # an id, not a query
    db["fs.files"].insert_one({"_id": "legacy", "length": 3.0, "chunkSize": 2.0, "uploadDate": _date(0)})
    db["fs.chunks"].insert_many([{"files_id": "legacy", "n": 0, "data": b"ab"},
                                 {"files_id": "legacy", "n": 1, "data": b"c"}])
    legacy = fs.get("legacy")
    assert type(legacy.length) is int and legacy.length == 3 and legacy.read() == b"abc"


@server
def test_get_version_counts_versions_among_the_matching_files(fs, db) -> None:
    _put_versions(fs, db, ("a", b"a0", {"owner": "ann"}), ("b", b"b0", {"owner": "bob"}),
                  ("a", b"a1", {"owner": "bob"}), ("a", b"a2", {"owner": "ann"}))
    expected = {0: b"a0", 1: b"a1", 2: b"a2", -1: b"a2", -2: b"a1", -3: b"a0", None: b"a2"}
    for version, content in expected.items():
        assert fs.get_version("a", version).read() == content
    assert fs.get_version("a").read() == b"a2" and fs.get_last_version("a").read() == b"a2"
    assert fs.get_version(filename="a", version=0).filename == "a"
    # keyword arguments narrow the files that count as versions
    assert fs.get_version("a", 0, owner="bob").read() == b"a1"
    assert fs.get_version("a", owner="ann").read() == b"a2"
    assert fs.get_version("a", -2, owner="ann").read() == b"a0"
    assert fs.get_last_version("a", owner={"$in": ["bob"]}).read() == b"a1"
    # no filename: versions among every file matching the keywords (or all files)
    assert fs.get_version(owner="bob", version=0).read() == b"b0"
    assert fs.get_version().read() == b"a2" and fs.get_version(version=1).read() == b"b0"
    assert fs.get_last_version(owner="bob").read() == b"a1"
    with pytest.raises(NoFile, match="no version 3 for filename 'a'"):
        fs.get_version("a", 3)
    with pytest.raises(NoFile):
        fs.get_version("a", -4)
    with pytest.raises(NoFile):
        fs.get_version("a", owner="cat")
    with pytest.raises(NoFile):
        fs.get_last_version("missing")
    with pytest.raises(TypeError):
        fs.get_version("a", "1")


@server
def test_delete_removes_the_file_and_its_chunks_and_ignores_missing_ids(fs, db) -> None:
    kept = fs.put(b"keep me", chunk_size=2)
    gone = fs.put(b"delete me", chunk_size=2)
    dict_id = fs.put(b"x", _id={"custom": 1})
    fs.delete(gone)
    assert not fs.exists(gone) and db["fs.chunks"].count_documents({"files_id": gone}) == 0
    with pytest.raises(NoFile):
        fs.get(gone)
    fs.delete(gone)  # again: not an error
    fs.delete(ObjectId())
    fs.delete(dict_id)
    assert not fs.exists(dict_id) and db["fs.chunks"].count_documents({"files_id": dict_id}) == 0
    assert fs.get(kept).read() == b"keep me" and db["fs.chunks"].count_documents({"files_id": kept}) == 4
    db["fs.chunks"].insert_one({"files_id": "orphan", "n": 0, "data": b"x"})
    fs.delete("orphan")  # no files document: the chunks go all the same
    assert db["fs.chunks"].count_documents({"files_id": "orphan"}) == 0


@server
def test_list_gives_distinct_filenames_without_none(fs) -> None:
    assert fs.list() == []
    fs.put(b"1", filename="b")
    fs.put(b"2", filename="a")
    fs.put(b"3", filename="b")
    fs.put(b"4")  # no filename
    fs.put(b"5", filename=None)
    assert sorted(fs.list()) == ["a", "b"]


@server
def test_exists_by_id_query_document_or_keywords(fs) -> None:
    assert not fs.exists()
    file_id = fs.put(b"data", filename="mike.txt", foo=13)
    assert fs.exists(file_id) and fs.exists({"_id": file_id}) and fs.exists(_id=file_id)
    assert fs.exists({"filename": "mike.txt"}) and fs.exists(filename="mike.txt")
    assert fs.exists({"foo": {"$gt": 12}}) and fs.exists(foo={"$gt": 12}) and fs.exists(foo=13, filename="mike.txt")
    assert fs.exists()  # any file
    assert not fs.exists(ObjectId()) and not fs.exists(filename="nope") and not fs.exists(foo={"$gt": 13})
    assert not fs.exists(foo=13, filename="other")
    with pytest.raises(TypeError):
        fs.exists(file_id, filename="mike.txt")


@server
def test_find_and_find_one_filter_sort_and_page(fs, db, recorder) -> None:
    ids = _put_versions(fs, db, ("c", b"ccc", {"kind": "x"}), ("a", b"a", {"kind": "y"}),
                        ("b", b"bb", {"kind": "x"}))
    cursor = fs.find({"kind": "x"}, sort=[("filename", 1)])
    assert isinstance(cursor, GridOutCursor)
    found = list(cursor)
    assert all(isinstance(grid_out, GridOut) for grid_out in found)
    assert [(grid_out.filename, grid_out.read()) for grid_out in found] == [("b", b"bb"), ("c", b"ccc")]
    assert [f.filename for f in fs.find().sort("uploadDate", -1).limit(2)] == ["b", "a"]
    assert [f.filename for f in fs.find({}, 1, 1, sort=[("filename", 1)])] == ["b"]  # positional skip, limit
    assert [f.filename for f in fs.find(filter={"length": {"$gte": 2}}, no_cursor_timeout=True,
                                         batch_size=1, sort=[("length", -1)])] == ["c", "b"]
    assert fs.find({"filename": "a"})[0].read() == b"a"
    assert [f._id for f in fs.find().sort("filename", 1).to_list()] == [ids[1], ids[2], ids[0]]
    assert list(fs.find({"kind": "z"})) == []
    with pytest.raises(TypeError):
        fs.find({}, projection={"filename": 1})  # PyMongo's GridOutCursor takes no projection

    assert fs.find_one(ids[1]).read() == b"a"  # a non-mapping filter is an _id
    assert fs.find_one({"filename": "c"})._id == ids[0]
    assert fs.find_one({"kind": "x"}, sort=[("filename", -1)]).filename == "c"
    assert fs.find_one({"kind": "x"}, None, 1, sort=[("filename", 1)]).filename == "c"  # skip after session
    assert fs.find_one().filename == "c"  # natural order: the first stored
    assert fs.find_one({"kind": "z"}) is None and fs.find_one(ObjectId()) is None
    recorder.clear()
    fs.find_one({"kind": "x"}, limit=5)  # a limit is ignored: one document, one batch
    find = recorder.commands("find")[0]
    assert find["limit"] == 1 and find["singleBatch"] is True
    assert "killCursors" not in recorder.names()


@server
def test_indexes_are_checked_once_per_instance_before_the_first_write(db, recorder) -> None:
    fs = GridFS(db)
    fs.put(b"first")
    names = recorder.names()
    assert names[:6] == ["find", "listIndexes", "createIndexes", "listIndexes", "createIndexes", "insert"]
    keys = [index["key"] for index in db["fs.files"].list_indexes()] + [
        index["key"] for index in db["fs.chunks"].list_indexes()]
    assert {"filename": 1, "uploadDate": 1} in keys and {"files_id": 1, "n": 1} in keys
    recorder.clear()
    fs.put(b"second")
    with fs.new_file() as grid_in:
        grid_in.write(b"third")
    assert recorder.names() == ["insert", "insert", "insert", "insert"]
    recorder.clear()
    GridFS(db).put(b"")
    assert recorder.names() == ["find", "insert"]  # a new instance checks; not empty: nothing to create


@server
def test_every_command_of_every_method_carries_the_session(client, fs, db, recorder) -> None:
    with client.start_session() as session:
        lsid = session.session_id
        file_id = fs.put(b"0123456789", filename="f", chunk_size=4, session=session)
        with fs.new_file(filename="f", _id="second", session=session) as grid_in:
            grid_in.write(b"abc")
        assert fs.get(file_id, session=session).read() == b"0123456789"
        assert fs.get_version("f", 0, session=session).read() == b"0123456789"
        assert fs.get_last_version("f", session=session).filename == "f"
        assert fs.list(session=session) == ["f"]
        assert [f.read() for f in fs.find({"_id": file_id}, session=session)] == [b"0123456789"]
        assert fs.find_one(file_id, session=session).read() == b"0123456789"
        assert fs.exists(file_id, session=session) and fs.exists(session=session, filename="f")
        fs.delete("second", session=session)
        commands = [event.command for event in recorder.started_events]
    names = {event.command_name for event in recorder.started_events}
    assert {"find", "listIndexes", "createIndexes", "insert", "distinct", "delete"} <= names
    assert commands and all(command.get("lsid") == lsid for command in commands)


@server
def test_gridfs_refuses_transactions(client, fs) -> None:
    file_id = fs.put(b"x")
    with client.start_session() as session:
        session.start_transaction()
        try:
            calls = [lambda: fs.put(b"y", session=session), lambda: fs.new_file(session=session),
                     lambda: fs.get(file_id, session=session), lambda: fs.get_version(session=session),
                     lambda: fs.get_last_version(session=session), lambda: fs.list(session=session),
                     lambda: fs.find(session=session), lambda: fs.find_one(session=session),
                     lambda: fs.exists(session=session), lambda: fs.delete(file_id, session=session)]
            for call in calls:
                with pytest.raises(InvalidOperation, match="transactions"):
                    call()
        finally:
            session.abort_transaction()
    assert fs.get(file_id).read() == b"x"


@server
def test_corruption_is_reported_through_get(fs, db) -> None:
    file_id = fs.put(b"0123456789", chunk_size=4)
    db["fs.chunks"].delete_one({"files_id": file_id, "n": 1})
    with pytest.raises(CorruptGridFile):
        fs.get(file_id).read()


@server
def test_type_registry_of_the_database_does_not_reach_gridfs(db) -> None:
    from greenmongo.bson.codec_options import CodecOptions, TypeDecoder, TypeRegistry

    class BytesToText(TypeDecoder):
        bson_type = bytes

        def transform_bson(self, value):
            return value.decode("latin-1")

    registry = TypeRegistry([BytesToText()])
    fs = GridFS(db.with_options(codec_options=CodecOptions(type_registry=registry)))
    file_id = fs.put(b"raw bytes", filename="f", tag=b"\x01")
    assert fs.get(file_id).read() == b"raw bytes" and fs.get(file_id).tag == b"\x01"
    assert fs.find_one(file_id).read() == b"raw bytes" and fs.find_one(file_id).tag == b"\x01"
    assert fs.get_last_version("f").tag == b"\x01" and fs.get_version("f", 0).read() == b"raw bytes"


@pytest.mark.one_pass
@server
def test_pymongo_style_code_runs_after_install_as_pymongo(server_uri) -> None:
    code = textwrap.dedent("""
        import os, sys
        import greenmongo
        greenmongo.install_as_pymongo()
        import gridfs
        from gridfs import GridFS, GridFSBucket, NoFile
        from gridfs.errors import FileExists
        from gridfs.grid_file import DEFAULT_CHUNK_SIZE, GridIn, GridOut, GridOutCursor
        from pymongo import MongoClient
        import greenmongo.gridfs
        assert gridfs is greenmongo.gridfs and gridfs.grid_file is greenmongo.gridfs.grid_file
        assert GridFS is greenmongo.gridfs.GridFS and GridIn is greenmongo.gridfs.GridIn
        client = MongoClient(os.environ["URI"])
        db = client["gridfs_dropin_check"]
        client.drop_database(db.name)
        try:
            fs = gridfs.GridFS(db)
            file_id = fs.put(b"payload", filename="p.bin", owner="ann")
            out = fs.get_last_version("p.bin", owner="ann")
            assert isinstance(out, GridOut) and out.read() == b"payload" and out.owner == "ann"
            assert fs.exists(filename="p.bin") and fs.list() == ["p.bin"]
            try:
                fs.put(b"x", _id=file_id)
            except FileExists:
                pass
            else:
                raise AssertionError("FileExists not raised")
            fs.delete(file_id)
            try:
                fs.get(file_id)
            except NoFile:
                print("ok")
        finally:
            client.drop_database(db.name)
            client.close()
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "URI": server_uri}, cwd=os.path.dirname(os.path.dirname(__file__)))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
