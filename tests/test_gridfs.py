"""GridFS: the pure data model (no server), then GridFSBucket/GridIn/GridOut against SecantusDB.

The spec's own cases run in spec/test_unified_suites.py (gridfs/tests); these cover what they
do not: index creation rules, sessions on every command, streaming reads and seeks, batching,
abort and source errors, kill safety, and PyMongo's GridIn/GridOut/GridOutCursor shapes.
"""

from __future__ import annotations

import io
import os

import gevent
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from greenmongo import MongoClient, ReadPreference, WriteConcern
from greenmongo.bson import Binary, Int64, ObjectId
from greenmongo.errors import ConfigurationError, CorruptGridFile, FileExists, GridFSError, NoFile, PyMongoError
from greenmongo.gridfs import GridFSBucket, GridIn, GridOut, GridOutCursor
from greenmongo.gridfs import errors as gridfs_errors
from greenmongo.gridfs import grid_in as grid_in_module
from greenmongo.gridfs.layout import (
    DEFAULT_CHUNK_SIZE,
    ChunkLayout,
    ChunkSplitter,
    files_document,
    index_key_matches,
    revision_query,
    upload_date_now,
    validate_chunk_size,
)
from tests.api_support import Recorder, scratch_database
from tests.waits import assert_stays

# -- pure: layout -------------------------------------------------------------------------------


def test_errors_are_pymongo_shaped_and_reexported() -> None:
    assert issubclass(GridFSError, PyMongoError)
    for error in (NoFile, FileExists, CorruptGridFile):
        assert issubclass(error, GridFSError)
    assert gridfs_errors.NoFile is NoFile and gridfs_errors.CorruptGridFile is CorruptGridFile
    assert DEFAULT_CHUNK_SIZE == 255 * 1024


def test_chunk_layout_counts_and_sizes() -> None:
    layout = ChunkLayout(10, 4)
    assert layout.chunk_count == 3
    assert [layout.expected_size(n) for n in range(3)] == [4, 4, 2]
    assert ChunkLayout(8, 4).chunk_count == 2 and ChunkLayout(8, 4).expected_size(1) == 4
    assert ChunkLayout(0, 4).chunk_count == 0
    assert layout.chunk_of(0) == (0, 0) and layout.chunk_of(9) == (2, 1)


def test_chunk_layout_reads_any_numeric_type_and_rejects_nonsense() -> None:
    for length, chunk_size in ((10.0, 4), (Int64(10), 4.0), (10, Int64(4))):
        layout = ChunkLayout.of_file({"length": length, "chunkSize": chunk_size})
        assert (layout.length, layout.chunk_size, layout.chunk_count) == (10, 4, 3)
    assert ChunkLayout.of_file({}).length == 0  # legacy: no length means empty
    for document in ({"length": -1, "chunkSize": 4}, {"length": 2.5, "chunkSize": 4},
                     {"length": "10", "chunkSize": 4}, {"length": 10, "chunkSize": 0}, {"length": 10}):
        with pytest.raises(CorruptGridFile):
            ChunkLayout.of_file(document)


def test_check_chunk_applies_the_spec_download_checks() -> None:
    layout = ChunkLayout(10, 4)
    assert layout.check_chunk({"n": 0, "data": b"abcd"}, 0) == b"abcd"
    assert layout.check_chunk({"n": 2.0, "data": Binary(b"ab", 2)}, 2) == b"ab"  # legacy types
    with pytest.raises(CorruptGridFile, match="missing chunk"):
        layout.check_chunk(None, 1)
    with pytest.raises(CorruptGridFile, match="n=2"):
        layout.check_chunk({"n": 2, "data": b"ab"}, 1)
    with pytest.raises(CorruptGridFile, match="truncated"):
        layout.check_chunk({"n": 1, "data": b"abc"}, 1)
    with pytest.raises(CorruptGridFile, match="truncated"):
        layout.check_chunk({"n": 2, "data": b"abcd"}, 2)  # the last chunk too long
    with pytest.raises(CorruptGridFile):
        layout.check_chunk({"n": 0, "data": "abcd"}, 0)
    layout.check_no_extra_chunk(None)
    layout.check_no_extra_chunk({"n": 3, "data": b""})  # an empty extra chunk is tolerated
    with pytest.raises(CorruptGridFile, match="extra chunk"):
        layout.check_no_extra_chunk({"n": 3, "data": b"x"})


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=200), chunk_size=st.integers(1, 17), cuts=st.lists(st.integers(0, 200), max_size=8))
def test_chunk_splitter_cuts_any_write_pattern_into_the_same_chunks(data: bytes, chunk_size: int,
                                                                    cuts: list) -> None:
    splitter = ChunkSplitter(chunk_size)
    chunks = []
    bounds = sorted({0, len(data), *[min(cut, len(data)) for cut in cuts]})
    for start, stop in zip(bounds, bounds[1:]):
        chunks.extend(splitter.feed(data[start:stop]))
        assert splitter.length == stop
    last = splitter.finish()
    if last is not None:
        chunks.append(last)
    assert [n for n, _ in chunks] == list(range(len(chunks)))
    assert b"".join(piece for _, piece in chunks) == data
    assert all(len(piece) == chunk_size for _, piece in chunks[:-1])
    assert all(piece for _, piece in chunks)  # never an empty chunk
    assert len(chunks) == ChunkLayout(len(data), chunk_size).chunk_count


def test_files_document_and_revision_and_index_rules() -> None:
    date = upload_date_now()
    assert date.microsecond % 1000 == 0 and date.tzinfo is not None
    document = files_document({"_id": 1, "chunkSize": 4, "filename": "f"}, 10, date)
    assert document == {"_id": 1, "length": 10, "chunkSize": 4, "uploadDate": date, "filename": "f"}
    assert isinstance(document["length"], Int64)
    assert "metadata" not in document and "md5" not in document and "contentType" not in document
    assert [revision_query(r) for r in (0, 2, -1, -3)] == [(1, 0), (1, 2), (-1, 0), (-1, 2)]
    with pytest.raises(TypeError):
        revision_query(True)
    wanted = (("filename", 1), ("uploadDate", 1))
    for key in ({"filename": 1, "uploadDate": 1}, {"filename": 1.0, "uploadDate": Int64(1)}):
        assert index_key_matches(key, wanted)
    for key in ({"uploadDate": 1, "filename": 1}, {"filename": 1}, {"filename": 1, "uploadDate": -1},
                {"filename": "text", "uploadDate": 1}, {"filename": True, "uploadDate": 1}, None):
        assert not index_key_matches(key, wanted)
    assert validate_chunk_size(4) == 4
    for bad, error in ((0, ValueError), (-4, ValueError), (2 ** 31, ValueError), (4.0, TypeError), (True, TypeError)):
        with pytest.raises(error):
            validate_chunk_size(bad)


# -- integration ----------------------------------------------------------------------------------

server = pytest.mark.server


@pytest.fixture
def db(client, recorder):
    with scratch_database(client, "gridfs_") as database:
        recorder.clear()
        yield database


@pytest.fixture
def bucket(db):
    return GridFSBucket(db, chunk_size_bytes=4)


def _chunks(db, bucket_name: str = "fs") -> list:
    return list(db[bucket_name + ".chunks"].find({}, sort=[("files_id", 1), ("n", 1)]))


@server
@pytest.mark.parametrize("size", [0, 1, 3, 4, 5, 8, 13])
def test_upload_and_download_round_trip(bucket, db, size: int) -> None:
    data = os.urandom(size)
    file_id = bucket.upload_from_stream("f", data, metadata={"owner": "ann"})
    assert isinstance(file_id, ObjectId)
    stored = db["fs.files"].find_one({"_id": file_id})
    assert set(stored) == {"_id", "length", "chunkSize", "uploadDate", "filename", "metadata"}
    assert (stored["length"], stored["chunkSize"], stored["filename"], stored["metadata"]) == (size, 4, "f",
                                                                                               {"owner": "ann"})
    assert isinstance(stored["length"], Int64)
    chunks = _chunks(db)
    assert [chunk["n"] for chunk in chunks] == list(range(-(-size // 4)))
    assert all(chunk["files_id"] == file_id and type(chunk["data"]) is bytes for chunk in chunks)
    assert bucket.open_download_stream(file_id).read() == data
    sink = io.BytesIO()
    bucket.download_to_stream(file_id, sink)
    assert sink.getvalue() == data


@server
def test_metadata_is_omitted_unless_given_and_file_like_sources_are_read_to_the_end(bucket, db) -> None:
    class Trickle(io.RawIOBase):
        """Returns at most 3 bytes per read: short reads must not end the upload early."""

        def __init__(self, data: bytes) -> None:
            self._source = io.BytesIO(data)

        def readable(self) -> bool:
            return True

        def read(self, size: int = -1) -> bytes:
            return self._source.read(min(size, 3) if size >= 0 else 3)

    data = bytes(range(50))
    file_id = bucket.upload_from_stream("trickle", Trickle(data))
    assert "metadata" not in db["fs.files"].find_one({"_id": file_id})
    assert bucket.open_download_stream(file_id).read() == data
    assert [len(chunk["data"]) for chunk in _chunks(db)] == [4] * 12 + [2]


@server
def test_indexes_are_created_once_before_the_first_write_on_an_empty_bucket(db, recorder) -> None:
    bucket = GridFSBucket(db, chunk_size_bytes=4)
    recorder.clear()
    bucket.upload_from_stream("a", b"12345")
    names = recorder.names()
    assert names[:6] == ["find", "listIndexes", "createIndexes", "listIndexes", "createIndexes", "insert"]
    find = recorder.commands("find")[0]
    assert find["find"] == "fs.files" and find["filter"] == {} and find["projection"] == {"_id": 1}
    created = [command["indexes"][0] for command in recorder.commands("createIndexes")]
    assert created[0]["key"] == {"filename": 1, "uploadDate": 1} and "unique" not in created[0]
    assert created[1]["key"] == {"files_id": 1, "n": 1} and created[1]["unique"] is True
    recorder.clear()
    bucket.upload_from_stream("b", b"123")
    assert recorder.names() == ["insert", "insert"]  # the same bucket checks once
    recorder.clear()
    GridFSBucket(db, chunk_size_bytes=4).upload_from_stream("c", b"")
    assert recorder.names() == ["find", "insert"]  # a new bucket checks; a non-empty files collection: done


@server
def test_existing_equivalent_indexes_are_not_created_again(db, recorder) -> None:
    db["fs.files"].create_index([("filename", 1.0), ("uploadDate", 1.0)])
    db["fs.chunks"].create_index([("files_id", 1.0), ("n", 1.0)], unique=True)
    recorder.clear()
    GridFSBucket(db).upload_from_stream("a", b"x")
    assert "createIndexes" not in recorder.names()
    assert recorder.names().count("listIndexes") == 2


@server
def test_index_check_reads_the_primary_whatever_the_bucket_read_preference(db, recorder) -> None:
    bucket = GridFSBucket(db, read_preference=ReadPreference.SECONDARY_PREFERRED)
    recorder.clear()
    bucket.upload_from_stream("a", b"x")
    find = recorder.commands("find")[0]
    assert find.get("$readPreference", {"mode": "primary"}) == {"mode": "primary"}


@server
def test_every_command_of_every_method_carries_the_session(client, db, recorder) -> None:
    bucket = GridFSBucket(db, chunk_size_bytes=4)
    with client.start_session() as session:
        lsid = session.session_id
        file_id = bucket.upload_from_stream("f", b"0123456789", session=session)
        upload = bucket.open_upload_stream_with_id(7, "g", session=session)
        upload.write(b"abc")
        upload.close()
        bucket.open_download_stream(file_id, session=session).read()
        bucket.download_to_stream_by_name("f", io.BytesIO(), session=session)
        assert [f._id for f in bucket.find({"filename": "g"}, session=session)] == [7]
        bucket.rename(file_id, "h", session=session)
        bucket.rename_by_name("h", "i", session=session)
        bucket.delete(7, session=session)
        bucket.delete_by_name("i", session=session)
        bucket.drop(session=session)
        commands = [event.command for event in recorder.started_events]
    names = {event.command_name for event in recorder.started_events}
    assert {"find", "listIndexes", "createIndexes", "insert", "update", "delete", "drop"} <= names
    assert commands and all(command.get("lsid") == lsid for command in commands)


@server
def test_gridout_streaming_reads_seek_and_attributes(bucket, db, recorder) -> None:
    data = b"line one\nline two\n\nlast line without newline"
    file_id = bucket.upload_from_stream("text", data, metadata={"kind": "text"})
    recorder.clear()
    grid_out = bucket.open_download_stream(file_id)
    assert recorder.names() == ["find"]  # only the files document so far
    assert (grid_out._id, grid_out.filename, grid_out.name, grid_out.length, grid_out.chunk_size) == (
        file_id, "text", "text", len(data), 4)
    assert grid_out.metadata == {"kind": "text"} and grid_out.upload_date is not None
    assert grid_out.uploadDate == grid_out.upload_date  # any field is an attribute
    assert not hasattr(grid_out, "no_such_field")
    assert grid_out.readable() and grid_out.seekable() and not grid_out.writable()
    assert grid_out.read(3) == b"lin" and grid_out.tell() == 3
    assert grid_out.readchunk() == b"e"  # the rest of chunk 0
    assert grid_out.readline() == b" one\n"
    assert grid_out.readline(3) == b"lin"
    assert list(grid_out) == [b"e two\n", b"\n", b"last line without newline"]
    assert grid_out.read() == b"" and grid_out.readchunk() == b""
    assert grid_out.seek(-7, os.SEEK_END) == len(data) - 7 and grid_out.read() == b"newline"
    assert grid_out.seek(5) == 5 and grid_out.read(4) == b"one\n"
    assert grid_out.seek(-4, os.SEEK_CUR) == 5 and grid_out.read(3) == b"one"
    assert grid_out.seek(len(data) + 10) == len(data) + 10 and grid_out.read() == b""
    with pytest.raises(OSError):
        grid_out.seek(-1)
    with pytest.raises(OSError):
        grid_out.seek(0, 7)
    grid_out.seek(0)
    assert grid_out.readlines() == data.splitlines(keepends=True)
    with pytest.raises(io.UnsupportedOperation):
        grid_out.write(b"x")
    grid_out.close()
    assert grid_out.closed
    with pytest.raises(ValueError):
        grid_out.read()


@server
def test_sequential_reads_use_one_cursor_and_zero_length_files_query_no_chunks(bucket, recorder) -> None:
    file_id = bucket.upload_from_stream("big", bytes(4 * 300))  # 300 chunks: find + getMores
    empty_id = bucket.upload_from_stream("empty", b"")
    recorder.clear()
    with bucket.open_download_stream(file_id) as grid_out:
        while grid_out.readchunk():
            pass
    finds = [command for command in recorder.commands("find") if command["find"] == "fs.chunks"]
    assert len(finds) == 1 and finds[0]["sort"] == {"n": 1}
    assert finds[0]["filter"] == {"files_id": file_id}
    assert "killCursors" not in recorder.names()  # read to the end: the server cursor is exhausted
    recorder.clear()
    assert bucket.open_download_stream(empty_id).read() == b""
    assert [command["find"] for command in recorder.commands("find")] == ["fs.files"]


@server
def test_a_seek_elsewhere_requeries_from_the_needed_chunk(bucket, recorder) -> None:
    data = bytes(range(40))
    file_id = bucket.upload_from_stream("f", data)
    grid_out = bucket.open_download_stream(file_id)
    assert grid_out.read(2) == data[:2]
    recorder.clear()
    grid_out.seek(30)
    assert grid_out.read(5) == data[30:35]
    chunk_finds = [command for command in recorder.commands("find") if command["find"] == "fs.chunks"]
    assert chunk_finds[0]["filter"] == {"files_id": file_id, "n": {"$gte": 7}}
    grid_out.close()


@server
@pytest.mark.parametrize("damage, match", [
    (lambda chunks, file_id: chunks.delete_one({"files_id": file_id, "n": 1}), "missing chunk"),
    (lambda chunks, file_id: chunks.delete_one({"files_id": file_id, "n": 2}), "missing chunk"),
    (lambda chunks, file_id: chunks.update_one({"files_id": file_id, "n": 1}, {"$set": {"data": b"xyz"}}),
     "truncated"),
    (lambda chunks, file_id: chunks.update_one({"files_id": file_id, "n": 2}, {"$set": {"n": 5}}), "n=5"),
    (lambda chunks, file_id: chunks.insert_one({"files_id": file_id, "n": 3, "data": b"extra"}), "extra chunk"),
])
def test_corrupt_files_raise_corrupt_grid_file(bucket, db, damage, match: str) -> None:
    file_id = bucket.upload_from_stream("f", b"0123456789")
    damage(db["fs.chunks"], file_id)
    with pytest.raises(CorruptGridFile, match=match):
        bucket.open_download_stream(file_id).read()


@server
def test_an_empty_extra_chunk_is_ignored(bucket, db) -> None:
    file_id = bucket.upload_from_stream("f", b"0123456789")
    db["fs.chunks"].insert_one({"files_id": file_id, "n": 3, "data": b""})
    assert bucket.open_download_stream(file_id).read() == b"0123456789"


@server
def test_missing_files_and_revisions(bucket) -> None:
    with pytest.raises(NoFile):
        bucket.open_download_stream(ObjectId())
    with pytest.raises(NoFile):
        bucket.download_to_stream(ObjectId(), io.BytesIO())
    for n in range(3):
        bucket.upload_from_stream("rev", b"v%d" % n)
        gevent.sleep(0.003)  # distinct uploadDates (milliseconds)
    expected = {0: b"v0", 1: b"v1", 2: b"v2", -1: b"v2", -2: b"v1", -3: b"v0"}
    for revision, content in expected.items():
        assert bucket.open_download_stream_by_name("rev", revision=revision).read() == content
    assert bucket.open_download_stream_by_name("rev").read() == b"v2"
    sink = io.BytesIO()
    bucket.download_to_stream_by_name("rev", sink, revision=0)
    assert sink.getvalue() == b"v0"
    with pytest.raises(NoFile) as no_name:
        bucket.open_download_stream_by_name("nope")
    with pytest.raises(NoFile) as no_revision:
        bucket.open_download_stream_by_name("rev", revision=3)
    assert str(no_name.value) != str(no_revision.value)
    assert "nope" in str(no_name.value) and "3" in str(no_revision.value)
    with pytest.raises(TypeError):
        bucket.open_download_stream_by_name(b"rev")


@server
def test_find_returns_gridouts_with_cursor_options(bucket) -> None:
    for name, owner in (("a", "ann"), ("b", "bob"), ("c", "ann")):
        bucket.upload_from_stream(name, name.encode() * 5, metadata={"owner": owner})
    cursor = bucket.find({"metadata.owner": "ann"}, sort=[("filename", -1)])
    assert isinstance(cursor, GridOutCursor)
    found = list(cursor)
    assert all(isinstance(grid_out, GridOut) for grid_out in found)
    assert [(grid_out.filename, grid_out.read()) for grid_out in found] == [("c", b"ccccc"), ("a", b"aaaaa")]
    assert [f.filename for f in bucket.find().sort("filename", 1).skip(1).limit(1)] == ["b"]
    assert [f.filename for f in bucket.find({}, batch_size=1, max_time_ms=5000, allow_disk_use=True)] == [
        "a", "b", "c"]
    assert bucket.find({"filename": "b"})[0].read() == b"bbbbb"
    assert [f.filename for f in bucket.find({"filename": "a"}).to_list()] == ["a"]
    with pytest.raises(NotImplementedError):
        bucket.find().add_option(2)


@server
def test_rename_delete_and_drop(bucket, db) -> None:
    first = bucket.upload_from_stream("name", b"12345")
    second = bucket.upload_from_stream("name", b"678")
    bucket.rename(first, "renamed")
    assert db["fs.files"].find_one({"_id": first})["filename"] == "renamed"
    with pytest.raises(NoFile):
        bucket.rename(ObjectId(), "x")
    bucket.rename_by_name("name", "other")
    with pytest.raises(NoFile):
        bucket.rename_by_name("name", "x")
    bucket.delete(first)
    assert db["fs.files"].find_one({"_id": first}) is None
    assert db["fs.chunks"].count_documents({"files_id": first}) == 0
    with pytest.raises(NoFile):
        bucket.delete(first)
    db["fs.chunks"].insert_one({"files_id": "orphan", "n": 0, "data": b"x"})
    with pytest.raises(NoFile):
        bucket.delete("orphan")
    assert db["fs.chunks"].count_documents({"files_id": "orphan"}) == 0  # orphans are cleaned anyway
    bucket.upload_from_stream("other", b"9")
    bucket.delete_by_name("other")
    assert db["fs.files"].count_documents({}) == 0 and db["fs.chunks"].count_documents({}) == 0
    with pytest.raises(NoFile):
        bucket.delete_by_name("other")
    assert second is not None
    bucket.upload_from_stream("again", b"1")
    bucket.drop()
    assert not {"fs.files", "fs.chunks"} & set(db.list_collection_names())


@server
def test_custom_bucket_name_ids_and_options(db) -> None:
    bucket = GridFSBucket(db, bucket_name="images", chunk_size_bytes=1000,
                          write_concern=WriteConcern(w=1), read_preference=ReadPreference.PRIMARY)
    bucket.upload_from_stream_with_id({"custom": 1}, "x", b"data", chunk_size_bytes=2)
    assert db["images.files"].find_one()["_id"] == {"custom": 1}
    assert db["images.files"].find_one()["chunkSize"] == 2
    assert bucket.open_download_stream({"custom": 1}).read() == b"data"
    assert bucket.upload_from_stream("default-size", b"") is not None
    assert db["images.files"].find_one({"filename": "default-size"})["chunkSize"] == 1000
    with pytest.raises(ConfigurationError):
        GridFSBucket(db, write_concern=WriteConcern(w=0))
    with pytest.raises(TypeError):
        GridFSBucket(db["fs"])
    with pytest.raises(TypeError):
        bucket.open_upload_stream(1)


@server
def test_file_exists_for_a_taken_id_and_abort_leaves_the_other_file_alone(bucket, db) -> None:
    bucket.upload_from_stream_with_id("taken", "first", b"123456")
    with pytest.raises(FileExists):
        bucket.upload_from_stream_with_id("taken", "second", b"abcdefgh")
    upload = bucket.open_upload_stream_with_id("taken", "third")
    upload.write(b"abcdefgh")  # two whole chunks: held until the batch is flushed
    with pytest.raises(FileExists):
        upload.close()
    upload.abort()
    assert bucket.open_download_stream("taken").read() == b"123456"
    bucket.upload_from_stream_with_id("empty", "e", b"")
    with pytest.raises(FileExists):
        bucket.upload_from_stream_with_id("empty", "e", b"")  # no chunks: the files insert collides


@server
def test_gridin_file_object_protocol(bucket, db) -> None:
    with bucket.open_upload_stream("f", metadata={"m": 1}) as upload:
        assert isinstance(upload, GridIn) and isinstance(upload._id, ObjectId)
        assert upload.filename == "f" and upload.chunk_size == 4 and upload.metadata == {"m": 1}
        assert not upload.closed and upload.writable() and not upload.readable() and not upload.seekable()
        assert not hasattr(upload, "length") and not hasattr(upload, "upload_date")  # known once closed
        with pytest.raises(io.UnsupportedOperation):
            upload.read()
        with pytest.raises(TypeError):
            upload.write("text without an encoding")
        with pytest.raises(TypeError):
            upload.write(12)
        upload.write(b"ab")
        upload.writelines([bytearray(b"cd"), memoryview(b"ef")])
        upload.write(io.BytesIO(b"gh"))
        upload.extra_field = "kept"
    assert upload.closed and upload.length == 8 and upload.upload_date.tzinfo is not None
    stored = db["fs.files"].find_one({"_id": upload._id})
    assert stored["extra_field"] == "kept" and stored["uploadDate"] == upload.upload_date.replace(tzinfo=None)
    upload.filename = "renamed"  # after close: updates the stored document
    upload.set("note", 1)
    stored = db["fs.files"].find_one({"_id": upload._id})
    assert stored["filename"] == "renamed" and stored["note"] == 1
    with pytest.raises(ValueError):
        upload.write(b"more")
    upload.close()  # again: nothing happens

    encoded = GridIn(db["fs"], filename="s", encoding="utf-8", chunk_size=3)
    encoded.write("héllo")
    encoded.close()
    assert GridOut(db["fs"], encoded._id).read() == "héllo".encode()


@server
def test_abort_and_a_failing_source_delete_the_uploaded_chunks(db, monkeypatch) -> None:
    monkeypatch.setattr(grid_in_module, "UPLOAD_BUFFER_CHUNKS", 2)  # flush every 2 chunks
    bucket = GridFSBucket(db, chunk_size_bytes=4)
    upload = bucket.open_upload_stream("aborted")
    upload.write(b"0123456789abcdef")
    assert db["fs.chunks"].count_documents({"files_id": upload._id}) == 4
    upload.abort()
    assert upload.closed and db["fs.chunks"].count_documents({"files_id": upload._id}) == 0
    with pytest.raises(ValueError):
        upload.write(b"x")

    class Broken(io.RawIOBase):
        def __init__(self) -> None:
            self.reads = 0

        def readable(self) -> bool:
            return True

        def read(self, size: int = -1) -> bytes:
            self.reads += 1
            if self.reads > 5:
                raise OSError("disk on fire")
            return b"x" * size

    with pytest.raises(OSError, match="disk on fire"):
        bucket.upload_from_stream("broken", Broken())
    assert db["fs.chunks"].count_documents({}) == 0 and db["fs.files"].count_documents({}) == 0


@server
def test_large_uploads_are_inserted_in_bounded_batches(db, recorder, monkeypatch) -> None:
    monkeypatch.setattr(grid_in_module, "UPLOAD_BUFFER_BYTES", 3000)
    bucket = GridFSBucket(db, chunk_size_bytes=1000)
    data = os.urandom(10_500)
    recorder.clear()
    file_id = bucket.upload_from_stream("big", data)
    inserts = [len(command["documents"]) for command in recorder.commands("insert")]
    assert inserts == [3, 3, 3, 2, 1]  # chunks in batches of 3 (+ overhead > budget), then the files document
    assert bucket.open_download_stream(file_id).read() == data


@server
def test_default_chunk_size_multi_megabyte_file(db) -> None:
    bucket = GridFSBucket(db)
    data = os.urandom(3 * DEFAULT_CHUNK_SIZE + 17)
    file_id = bucket.upload_from_stream("mb", io.BytesIO(data))
    assert [len(chunk["data"]) for chunk in _chunks(db)] == [DEFAULT_CHUNK_SIZE] * 3 + [17]
    assert bucket.open_download_stream(file_id).read() == data


@server
def test_concurrent_uploads_and_downloads_on_one_bucket(bucket) -> None:
    payloads = {f"file{i}": os.urandom(37 + i) for i in range(20)}
    greenlets = [gevent.spawn(bucket.upload_from_stream, name, data) for name, data in payloads.items()]
    gevent.joinall(greenlets, raise_error=True)
    ids = {name: glet.value for name, glet in zip(payloads, greenlets)}
    readers = [gevent.spawn(lambda i=ids[name]: bucket.open_download_stream(i).read()) for name in payloads]
    gevent.joinall(readers, raise_error=True)
    assert [glet.value for glet in readers] == list(payloads.values())


@server
def test_an_interrupted_upload_sends_nothing_more(bucket, db, recorder) -> None:
    class Slow(io.RawIOBase):
        def readable(self) -> bool:
            return True

        def read(self, size: int = -1) -> bytes:
            gevent.sleep(0.05)
            return b"x" * size

    recorder.clear()
    with pytest.raises(gevent.Timeout):
        with gevent.Timeout(0.2):
            bucket.upload_from_stream("slow", Slow())
    sent = recorder.names()
    assert "delete" not in sent
    # No cleanup I/O after the kill: none of its greenlets sends anything (the reads that fed the
    # upload took 50 ms each; 0.1 s is two of them).
    assert_stays(lambda: recorder.names() == sent, 0.1, "no command after the kill")
    assert db["fs.files"].count_documents({}) == 0


@server
def test_a_read_interrupted_mid_getmore_resumes_where_it_stopped(server_uri) -> None:
    recorder = Recorder()
    client = MongoClient(server_uri, appname="gridfs-interrupt", event_listeners=[recorder])
    try:
        with scratch_database(client, "gridfs_interrupt_") as db:
            bucket = GridFSBucket(db, chunk_size_bytes=4)
            data = os.urandom(4 * 150)  # the first batch holds 101 chunks: chunk 101 needs a getMore
            file_id = bucket.upload_from_stream("f", data)
            grid_out = bucket.open_download_stream(file_id)
            assert grid_out.read(4 * 101) == data[:4 * 101]
            client.admin.command("configureFailPoint", "failCommand", mode={"times": 1},
                                 data={"failCommands": ["getMore"], "blockConnection": True, "blockTimeMS": 1000,
                                       "appName": "gridfs-interrupt"})
            try:
                with pytest.raises(gevent.Timeout):
                    with gevent.Timeout(0.2):
                        grid_out.read(8)
            finally:
                client.admin.command("configureFailPoint", "failCommand", mode="off")
            assert grid_out.tell() == 4 * 101
            recorder.clear()
            assert grid_out.read() == data[4 * 101:]
            chunk_find = [c for c in recorder.commands("find") if c["find"] == "fs.chunks"][0]
            assert chunk_find["filter"]["n"] == {"$gte": 101}
            grid_out.close()
    finally:
        client.close()


@server
def test_gridout_exit_on_a_kill_does_no_io(bucket, recorder) -> None:
    file_id = bucket.upload_from_stream("f", bytes(4 * 150))
    recorder.clear()
    with pytest.raises(gevent.GreenletExit):
        with bucket.open_download_stream(file_id) as grid_out:
            grid_out.read(4)
            raise gevent.GreenletExit
    assert "killCursors" not in recorder.names() and grid_out.closed
