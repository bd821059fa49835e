"""Cursor batches left encoded until they are read: bson.codec.decode_cursor_reply, DocumentBatch, the
cursor's DocumentBuffer, and what a cursor over a scripted server does with a batch holding a bad document.

A cursor reply decoded for a cursor that nobody watches (no command listener, log or span) keeps
``cursor.firstBatch`` / ``cursor.nextBatch`` as a DocumentBatch over the reply's bytes; each document is
decoded when the cursor hands it out. These tests hold it to three things: the documents are the ones an
eager decode gives; anything that is not a well-framed array of documents is decoded (and judged) as
before; and a document that does not decode fails alone, as the server's protocol error, on its turn.
"""

from __future__ import annotations

import gc
import struct
import sys
from typing import Any

import pytest

from greenmongo import MongoClient, bson
from greenmongo.bson import CodecOptions, Int64, ObjectId, RawBSONDocument, SON, TypeDecoder, TypeRegistry, codec
from greenmongo.bson.codec import DocumentBatch, decode_cursor_reply
from greenmongo.command_cursor import DocumentBuffer
from greenmongo.errors import InvalidBSON, ProtocolError
from greenmongo.monitoring import CommandListener, ConnectionClosedEvent, ConnectionPoolListener
from tests.servers.scripted import Malformed, ScriptedServer

needs_c = pytest.mark.skipif(not bson.has_c(), reason="C extension not built, or GREENMONGO_NO_EXTENSIONS is set")

DOCS = [{"_id": i, "s": "x" * i, "sub": {"k": [i, {"deep": i}]}} for i in range(5)]


def cursor_reply(field: str = "firstBatch", documents: Any = DOCS, **extra: Any) -> bytes:
    return bson.encode({"cursor": {field: documents, "id": Int64(0), "ns": "db.c", **extra}, "ok": 1.0})


def bad_utf8(data: bytes, marker: bytes = b"BAD!") -> bytes:
    """``data`` with the string ``marker`` (same length) replaced by invalid UTF-8."""
    assert data.count(marker) == 1
    return data.replace(marker, b"\xff\xfe\xfd\xfc")


# -- decode_cursor_reply ------------------------------------------------------------------------------


@needs_c
@pytest.mark.parametrize("field", ["firstBatch", "nextBatch"])
def test_the_batch_stays_encoded_and_reads_as_an_eager_decode(field: str) -> None:
    data = cursor_reply(field, postBatchResumeToken={"t": 1})
    reply = decode_cursor_reply(data)
    batch = reply["cursor"][field]
    assert type(batch) is DocumentBatch
    assert len(batch) == 5
    eager = bson.decode(data)
    assert list(batch) == eager["cursor"][field] == DOCS
    assert [batch[i] for i in range(5)] == DOCS and batch[-1] == DOCS[-1]
    assert list(batch[1:4]) == DOCS[1:4] and type(batch[1:4]) is DocumentBatch
    assert batch == DOCS and batch != DOCS[:4]
    # everything else is the eager decode's
    reply["cursor"][field] = eager["cursor"][field]
    assert reply == eager


@needs_c
def test_each_read_decodes_a_new_document() -> None:
    batch = decode_cursor_reply(cursor_reply())["cursor"]["firstBatch"]
    first, again = batch[0], batch[0]
    assert first == again and first is not again  # nothing cached: the batch holds bytes only


@needs_c
@pytest.mark.parametrize("document", [
    {"firstBatch": [{"a": 1}]},  # top level, not under "cursor"
    {"x": {"firstBatch": [{"a": 1}]}},  # under another document
    {"cursor": {"inner": {"nextBatch": [{"a": 1}]}}},  # deeper than the cursor document
    {"cursor": {"batch": [{"a": 1}]}},  # another name
    {"cursor": {"firstBatch": [1, 2]}},  # elements that are not documents (reply_fields names them)
    {"cursor": {"firstBatch": [{"a": 1}, "two"]}},
    {"cursor": {"firstBatch": {"0": {"a": 1}}}},  # a document, not an array
    {"cursor": "firstBatch"},
])
def test_only_a_cursor_batch_of_documents_stays_encoded(document: dict) -> None:
    decoded = decode_cursor_reply(bson.encode(document))
    assert decoded == document
    assert "DocumentBatch" not in repr(decoded)


@needs_c
def test_an_empty_batch() -> None:
    batch = decode_cursor_reply(cursor_reply(documents=[]))["cursor"]["firstBatch"]
    assert len(batch) == 0 and list(batch) == [] and not batch


def _broken_element_length(data: bytes) -> bytes:
    """The reply with its batch's second document claiming one byte more than it has (the array's framing
    is then wrong, and the reply itself does not decode)."""
    reply = bson.decode(data)
    first = bson.encode(reply["cursor"]["firstBatch"][0])
    start = data.index(bson.encode(reply["cursor"]["firstBatch"][1]), data.index(first) + len(first))
    length = int.from_bytes(data[start:start + 4], "little")
    return data[:start] + (length + 1).to_bytes(4, "little") + data[start + 4:]


@needs_c
def test_a_batch_whose_framing_is_wrong_fails_the_reply_as_an_eager_decode_does() -> None:
    data = _broken_element_length(cursor_reply())
    with pytest.raises(InvalidBSON) as eager:
        bson.decode(data)
    with pytest.raises(InvalidBSON) as lazy:
        decode_cursor_reply(data)
    assert str(lazy.value) == str(eager.value)


@needs_c
def test_a_bad_document_fails_when_it_is_read_and_alone() -> None:
    documents = [{"_id": 0, "s": "ok"}, {"_id": 1, "s": "BAD!"}, {"_id": 2, "s": "ok"}]
    data = bad_utf8(cursor_reply(documents=documents))
    with pytest.raises(InvalidBSON):
        bson.decode(data)  # eager: the whole reply fails
    batch = decode_cursor_reply(data)["cursor"]["firstBatch"]
    assert batch[0] == documents[0]
    with pytest.raises(InvalidBSON, match="UTF-8"):
        batch[1]
    assert batch[2] == documents[2]


@needs_c
def test_codec_options_apply_to_each_document() -> None:
    options = CodecOptions(document_class=SON, tz_aware=True)
    batch = decode_cursor_reply(cursor_reply(), options)["cursor"]["firstBatch"]
    assert type(batch) is DocumentBatch
    assert all(type(document) is SON and type(document["sub"]) is SON for document in batch)
    assert list(batch) == bson.decode(cursor_reply(), options)["cursor"]["firstBatch"]


@needs_c
def test_raw_documents_and_type_decoders_decode_as_before() -> None:
    raw = CodecOptions(document_class=RawBSONDocument)
    assert type(decode_cursor_reply(cursor_reply(), raw)) is RawBSONDocument  # the whole reply stays raw

    class Upper(TypeDecoder):
        bson_type = str

        def transform_bson(self, value: Any) -> Any:
            return value.upper()

    options = CodecOptions(type_registry=TypeRegistry([Upper()]))
    reply = decode_cursor_reply(cursor_reply(), options)
    assert type(reply["cursor"]["firstBatch"]) is list  # type decoders see the whole reply, as before
    assert reply == bson.decode(cursor_reply(), options)


@needs_c
def test_a_memoryview_of_the_reply_buffer_is_read_in_place() -> None:
    buffer = bytearray(b"\x00" * 5 + cursor_reply())
    batch = decode_cursor_reply(memoryview(buffer)[5:])["cursor"]["firstBatch"]
    assert list(batch) == DOCS
    with pytest.raises(BufferError):
        buffer.extend(b"more")  # the batch holds the buffer: it cannot move under the documents
    del batch
    gc.collect()
    buffer.extend(b"more")


@needs_c
def test_no_reference_is_leaked() -> None:
    data = cursor_reply()
    for _ in range(50):
        list(decode_cursor_reply(data)["cursor"]["firstBatch"])
    before = sys.getrefcount(data), sys.getrefcount(DocumentBatch)
    for _ in range(200):
        reply = decode_cursor_reply(data)
        list(reply["cursor"]["firstBatch"])
        del reply
    assert (sys.getrefcount(data), sys.getrefcount(DocumentBatch)) == before


def test_the_pure_python_codec_decodes_the_batch_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codec, "decode", codec._py_decode)
    reply = codec._py_decode_cursor_reply(cursor_reply())
    assert type(reply["cursor"]["firstBatch"]) is list and reply["cursor"]["firstBatch"] == DOCS


def test_a_document_batch_reads_bytes_without_the_c_extension(monkeypatch: pytest.MonkeyPatch) -> None:
    data = cursor_reply()
    starts = [data.index(bson.encode(document)) for document in DOCS]
    monkeypatch.setattr(codec, "_decode_at", codec._py_decode_at)
    monkeypatch.setattr(codec, "_decode_one", codec._py_decode_one)
    batch = DocumentBatch(memoryview(data), packed_int64s(starts), bson.DEFAULT_CODEC_OPTIONS)
    assert list(batch) == DOCS and batch[3] == DOCS[3]


def packed_int64s(values: list[int]) -> bytes:
    """The offsets as DocumentBatch keeps them (little-endian int64s, what the C decoder makes)."""
    return b"".join(value.to_bytes(8, "little", signed=True) for value in values)


# -- DocumentBuffer ------------------------------------------------------------------------------------


def test_a_buffer_hands_out_its_batches_in_order() -> None:
    buffer = DocumentBuffer()
    assert not buffer
    buffer.extend([1, 2])
    buffer.extend([])
    buffer.extend(iter([3]))  # any iterable (GridOutCursor passes a generator)
    buffer.append(4)
    taken = []
    while buffer:
        taken.append(buffer.popleft())
    assert taken == [1, 2, 3, 4]
    with pytest.raises(IndexError):
        buffer.popleft()
    buffer.extend([5, 6])
    buffer.extend([7])
    assert list(buffer) == [5, 6, 7] and not buffer  # iterating takes them
    buffer.extend([8])
    buffer.clear()
    assert not buffer


@needs_c
def test_a_bad_document_in_a_buffer_is_a_protocol_error_for_it_alone() -> None:
    documents = [{"_id": 0}, {"_id": 1, "s": "BAD!"}, {"_id": 2}]
    buffer = DocumentBuffer()
    buffer.extend(decode_cursor_reply(bad_utf8(cursor_reply(documents=documents)))["cursor"]["firstBatch"])
    buffer.extend([{"_id": 3}])
    assert buffer.popleft() == documents[0]
    with pytest.raises(ProtocolError, match="not valid BSON: document 1 of a cursor batch") as info:
        buffer.popleft()
    assert isinstance(info.value.__cause__, InvalidBSON)
    assert [buffer.popleft(), buffer.popleft()] == [documents[2], {"_id": 3}]
    assert not buffer


# -- through a cursor ----------------------------------------------------------------------------------


class PoolEvents(ConnectionPoolListener):
    def __init__(self) -> None:
        self.closed: list[ConnectionClosedEvent] = []

    def connection_closed(self, event: ConnectionClosedEvent) -> None:
        self.closed.append(event)

    def __getattr__(self, name: str) -> Any:  # every other pool event: not needed here
        if name.startswith(("pool_", "connection_")):
            return lambda event: None
        raise AttributeError(name)


class Commands(CommandListener):
    def started(self, event: Any) -> None:
        pass

    succeeded = failed = started


BAD_BATCH = [{"_id": 1, "s": "ok"}, {"_id": 2, "s": "BAD!"}, {"_id": 3, "s": "ok"}]


def body_reply(raw_body: bytes) -> Any:
    """A reply with this body, the connection left open after it (Malformed.body's closes it)."""
    return Malformed.op_msg_payload(struct.pack("<I", 0) + b"\x00" + raw_body, hold=0)


def _open_cursor_reply() -> bytes:
    return bson.encode({"cursor": {"firstBatch": [{"_id": 0}], "id": Int64(42), "ns": "db.c"}, "ok": 1.0})


@pytest.fixture
def server():
    with ScriptedServer() as scripted:
        yield scripted


@needs_c
@pytest.mark.parametrize("in_get_more", [False, True], ids=["firstBatch", "nextBatch"])
def test_an_unwatched_cursor_skips_a_bad_document_and_keeps_its_connection(server: ScriptedServer,
                                                                           in_get_more: bool) -> None:
    field = "nextBatch" if in_get_more else "firstBatch"
    bad_reply = bad_utf8(cursor_reply(field, BAD_BATCH))
    if in_get_more:
        server.script("find", body_reply(_open_cursor_reply()))
        server.script("getMore", body_reply(bad_reply))
    else:
        server.script("find", body_reply(bad_reply))
    pool = PoolEvents()
    with MongoClient(server.uri, directConnection=True, retryReads=False, event_listeners=[pool]) as client:
        cursor = client.db.c.find({})
        if in_get_more:
            assert next(cursor) == {"_id": 0}
        assert next(cursor) == BAD_BATCH[0]
        with pytest.raises(ProtocolError, match="not valid BSON: document 1 of a cursor batch.*UTF-8"):
            next(cursor)
        assert next(cursor) == BAD_BATCH[2]  # nothing after the bad document is lost
        with pytest.raises(StopIteration):
            next(cursor)
        assert not pool.closed  # the framing was whole: the connection is in step and stays pooled
        assert client.db.command("ping") == {"ok": 1.0}


@needs_c
def test_a_watched_cursor_decodes_the_batch_whole_and_fails_the_reply(server: ScriptedServer) -> None:
    """Command listeners see the reply decoded, so it is decoded before they do: a bad document fails
    the reply, as the connection's contract for undecodable bytes says."""
    server.script("find", body_reply(bad_utf8(cursor_reply("firstBatch", BAD_BATCH))))
    pool = PoolEvents()
    with MongoClient(server.uri, directConnection=True, retryReads=False,
                     event_listeners=[pool, Commands()]) as client:
        with pytest.raises(ProtocolError, match="reply is not valid BSON"):
            next(client.db.c.find({}))
        assert len(pool.closed) == 1


@needs_c
def test_a_cursor_reads_a_large_batch_lazily_to_the_end(server: ScriptedServer) -> None:
    documents = [{"_id": ObjectId(), "n": n, "pad": "p" * 200} for n in range(3000)]
    server.script("find", body_reply(_open_cursor_reply()))
    server.script("getMore", body_reply(cursor_reply("nextBatch", documents)))
    with MongoClient(server.uri, directConnection=True) as client:
        cursor = client.db.c.find({})
        assert next(cursor) == {"_id": 0}
        assert cursor.to_list() == documents
