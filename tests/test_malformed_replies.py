"""Malformed replies from a scripted server, through the public API and at the connection level.

Every case holds the driver to the same contract: the operation raises a greenmongo error (the class
PyMongo raises; ProtocolError where PyMongo has nothing better or leaks a builtin), never a bare
TypeError/KeyError/struct.error/..., and never returns the garbage as a result; it does so in
bounded time; the connection that read the reply is closed and not pooled again; and the same client
then reads a good reply from the same server (the script's next step).

tests/test_connection_scripted.py has the first malformed-bytes cases at the connection level; the
connection-level table here adds the rest, the API tables cover them all (and the wrong-typed fields
a connection cannot judge).
"""

from __future__ import annotations

import struct
import time
import tracemalloc
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Optional

import pytest

import greenmongo
from greenmongo import MongoClient, bson
from greenmongo.errors import (
    AutoReconnect,
    ConfigurationError,
    NetworkTimeout,
    OperationFailure,
    ProtocolError,
    PyMongoError,
    ServerSelectionTimeoutError,
)
from greenmongo.monitoring import (
    CommandListener,
    CommandStartedEvent,
    ConnectionCheckedOutEvent,
    ConnectionClosedEvent,
    ConnectionPoolListener,
)
from greenmongo.net.handshake import open_connection
from greenmongo.options.connection_settings import ConnectionSettings
from greenmongo.wire import compression
from greenmongo.wire.header import OP_COMPRESSED, OP_QUERY
from tests.servers.scripted import (
    MAX_WIRE_VERSION,
    Close,
    Dribble,
    Malformed,
    Raw,
    Reply,
    ScriptedServer,
    default_hello,
)
from tests.waits import wait_until

#: socketTimeoutMS of the clients here: what a hung reply costs.
SOCKET_TIMEOUT_MS = 500
#: Every failure must come within this (generous: a bound on a hang, not a measurement).
BOUND = 5.0

GOOD_FIND = {"ok": 1, "cursor": {"id": bson.Int64(0), "ns": "db.c", "firstBatch": [{"a": 1}]}}
OK = {"ok": 1.0}


def find_reply(**cursor: Any) -> dict:
    """A find reply whose cursor document is GOOD_FIND's with ``cursor`` replacing fields (None: drop it)."""
    document = dict(GOOD_FIND["cursor"], **cursor)
    return {"ok": 1, "cursor": {key: value for key, value in document.items() if value is not None}}


def op_msg_payload(document: Any = GOOD_FIND, flags: int = 0) -> bytes:
    return struct.pack("<I", flags) + b"\x00" + bson.encode(document)


def kind0(document: Any = GOOD_FIND) -> bytes:
    return b"\x00" + bson.encode(document)


def kind1(identifier: str, *documents: Any) -> bytes:
    name = identifier.encode() + b"\x00"
    payload = b"".join(bson.encode(document) for document in documents)
    return b"\x01" + struct.pack("<i", 4 + len(name) + len(payload)) + name + payload


PLAIN = op_msg_payload()  # the bytes after the header of a good find reply, for the OP_COMPRESSED cases


# -- the operations ---------------------------------------------------------------------


@dataclass(frozen=True)
class Op:
    """An API call, the command it sends, a good reply to that command and what the call then returns."""

    command: str
    call: Callable[[Any], Any]
    good_reply: Any
    good_result: Any


def _update(client: Any) -> Any:
    result = client.db.c.update_one({"_id": 1}, {"$set": {"a": 1}})
    return result.matched_count, result.modified_count, result.upserted_id


OPS = {
    "find": Op("find", lambda client: list(client.db.c.find({})), GOOD_FIND, [{"a": 1}]),
    "command": Op("dbStats", lambda client: client.db.command("dbStats"), {"ok": 1, "db": "db"},
                  {"ok": 1, "db": "db"}),
    "insert": Op("insert", lambda client: client.db.c.insert_one({"_id": 1}).inserted_id, {"ok": 1, "n": 1}, 1),
    "insert_many": Op("insert", lambda client: client.db.c.insert_many([{"_id": 1}, {"_id": 2}]).inserted_ids,
                      {"ok": 1, "n": 2}, [1, 2]),
    "update": Op("update", _update, {"ok": 1, "n": 1, "nModified": 1}, (1, 1, None)),
    "delete": Op("delete", lambda client: client.db.c.delete_one({}).deleted_count, {"ok": 1, "n": 1}, 1),
    "count": Op("count", lambda client: client.db.c.estimated_document_count(), {"ok": 1, "n": 3}, 3),
    "distinct": Op("distinct", lambda client: client.db.c.distinct("a"), {"ok": 1, "values": [1, 2]}, [1, 2]),
    "find_one_and_update": Op("findAndModify",
                              lambda client: client.db.c.find_one_and_update({}, {"$set": {"a": 2}}),
                              {"ok": 1, "value": {"_id": 1, "a": 1}}, {"_id": 1, "a": 1}),
    "list_databases": Op("listDatabases", lambda client: list(client.list_databases()),
                         {"ok": 1, "databases": [{"name": "db"}]}, [{"name": "db"}]),
    # A first batch then a getMore: the getMore's reply is the one scripted.
    "get_more": Op("getMore", lambda client: list(client.db.c.find({}, batch_size=1)),
                   {"ok": 1, "cursor": {"id": bson.Int64(0), "ns": "db.c", "nextBatch": [{"a": 2}]}},
                   [{"a": 1}, {"a": 2}]),
}
GET_MORE_FIRST_BATCH = find_reply(id=bson.Int64(42))


@dataclass(frozen=True)
class Case:
    id: str
    op: str
    action: Any
    error: type
    match: str
    closes: bool = True  # False: a well-formed failure (ok: 0), the connection stays in step and pooled
    connection_level: bool = False  # also run at the connection level (cases the older table lacks)


def _hang(length_extra: int = 100) -> Raw:
    return Malformed.length_lie(length_extra, close_after=False, hold=BOUND + 5)


# The bytes are broken: the connection reads them (OP_MSG/OP_REPLY/OP_COMPRESSED framing, BSON).
WIRE_CASES = [
    Case("length_below_16", "find", Malformed.header_length(8), ProtocolError, "shorter than a header",
         connection_level=True),
    Case("length_zero", "find", Malformed.header_length(0), ProtocolError, "shorter than a header",
         connection_level=True),
    Case("length_negative", "find", Malformed.header_length(-1), ProtocolError, "shorter than a header",
         connection_level=True),
    Case("length_16_no_body", "find", Malformed.header_length(16), ProtocolError, "shorter than a header",
         connection_level=True),
    Case("length_2gb", "find", Malformed.header_length(2**31 - 1), ProtocolError,
         "larger than the maximum message size 48000000", connection_level=True),
    Case("length_lie_then_close", "insert", Malformed.length_lie(close_after=True), AutoReconnect, "mid-message"),
    Case("length_lie_then_hang", "find", _hang(), NetworkTimeout, "timed out", connection_level=True),
    Case("truncated_body", "command", Malformed.truncated_body(), AutoReconnect, "mid-message"),
    Case("close_instead_of_reply", "find", Close(), AutoReconnect, "closed by the server"),
    Case("wrong_response_to", "find", Malformed.wrong_response_to(), ProtocolError, "responseTo"),
    Case("wrong_opcode", "insert", Malformed.garbage_opcode(), ProtocolError, "unexpected opcode 4242"),
    Case("op_query_as_reply", "find", Malformed.garbage_opcode(OP_QUERY), ProtocolError, "unexpected opcode 2004",
         connection_level=True),
    Case("bad_checksum", "find", Malformed.bad_checksum(), ProtocolError, "checksum mismatch"),
    Case("checksum_flag_without_crc", "find", Malformed.flag_bits(1, GOOD_FIND), ProtocolError,
         "checksum mismatch", connection_level=True),
    Case("required_flag_bit_2", "find", Malformed.flag_bits(1 << 2, GOOD_FIND), ProtocolError,
         "unknown required flag bits 0x4", connection_level=True),
    Case("required_flag_bit_15", "command", Malformed.flag_bits(1 << 15, OK), ProtocolError,
         "unknown required flag bits 0x8000", connection_level=True),
    Case("more_to_come_not_asked_for", "find", Malformed.flag_bits(2, GOOD_FIND), ProtocolError,
         "moreToCome", connection_level=True),
    Case("unknown_section_kind", "find", Malformed.unknown_section_kind(), ProtocolError, "unknown section kind"),
    Case("no_body_section", "find", Malformed.op_msg_payload(struct.pack("<I", 0) + kind1("docs", {"a": 1})),
         ProtocolError, "no kind-0 body", connection_level=True),
    Case("flags_only", "find", Malformed.op_msg_payload(struct.pack("<I", 0)), ProtocolError, "too short",
         connection_level=True),
    Case("two_body_sections", "find", Malformed.op_msg_payload(struct.pack("<I", 0) + kind0() + kind0()),
         ProtocolError, "more than one kind-0", connection_level=True),
    Case("section_size_past_the_end", "find",
         Malformed.op_msg_payload(struct.pack("<I", 0) + b"\x00" + struct.pack("<i", 1000) + b"\x00" * 8),
         ProtocolError, "does not fit", connection_level=True),
    Case("invalid_bson", "find", Malformed.garbage_bson(), ProtocolError, "not valid BSON"),
    Case("body_not_nul_terminated", "find", Malformed.body(b"\x06\x00\x00\x00\x0a\x05"), ProtocolError,
         "not valid BSON", connection_level=True),
    Case("body_unknown_element_type", "find", Malformed.body(b"\x08\x00\x00\x00\x33a\x00\x00"), ProtocolError,
         "not valid BSON", connection_level=True),
    Case("body_invalid_utf8", "find",
         Malformed.body(bson.encode({"ok": 1, "k": "xx"}).replace(b"xx", b"\xff\xfe")), ProtocolError,
         "not valid BSON", connection_level=True),
    Case("op_reply_without_documents", "command", Malformed.op_reply(0), ProtocolError, "holds 0",
         connection_level=True),
    Case("op_reply_negative_count", "command", Malformed.op_reply(-1), ProtocolError, "negative",
         connection_level=True),
    Case("op_reply_count_past_the_end", "command", Malformed.op_reply(2, bson.encode(OK)), ProtocolError,
         "ends before", connection_level=True),
    Case("compressed_unknown_compressor", "find", Malformed.compressed(9, PLAIN, len(PLAIN)), ProtocolError,
         "unknown compressorId 9", connection_level=True),
    Case("compressed_zlib_garbage", "find", Malformed.compressed(compression.ZLIB_ID, b"garbage!", len(PLAIN)),
         ProtocolError, "could not decompress zlib", connection_level=True),
    Case("compressed_snappy_garbage", "find", Malformed.compressed(compression.SNAPPY_ID, b"\x50garbage", 0x50),
         ProtocolError, "snappy", connection_level=True),
    Case("compressed_zstd_garbage", "find", Malformed.compressed(compression.ZSTD_ID, b"garbage!", len(PLAIN)),
         ProtocolError, "zstd", connection_level=True),
    Case("compressed_size_larger_than_data", "find",
         Malformed.compressed(compression.ZLIB_ID, zlib.compress(PLAIN), len(PLAIN) + 10), ProtocolError,
         f"decompressed {len(PLAIN)} bytes but OP_COMPRESSED declared {len(PLAIN) + 10}", connection_level=True),
    Case("compressed_size_smaller_than_data", "find",
         Malformed.compressed(compression.ZLIB_ID, zlib.compress(PLAIN), len(PLAIN) - 10), ProtocolError,
         "but OP_COMPRESSED declared", connection_level=True),
    Case("compressed_size_negative", "find", Malformed.compressed(compression.ZLIB_ID, zlib.compress(PLAIN), -1),
         ProtocolError, "uncompressedSize -1 is out of bounds", connection_level=True),
    Case("compressed_size_2gb", "find",
         Malformed.compressed(compression.ZLIB_ID, zlib.compress(PLAIN), 2**31 - 1), ProtocolError,
         "out of bounds", connection_level=True),
    Case("compressed_wraps_op_query", "find",
         Malformed.compressed(compression.NOOP_ID, PLAIN, len(PLAIN), original_opcode=OP_QUERY), ProtocolError,
         "wraps unexpected opcode 2004", connection_level=True),
    Case("compressed_wraps_compressed", "find",
         Malformed.compressed(compression.NOOP_ID, PLAIN, len(PLAIN), original_opcode=OP_COMPRESSED),
         ProtocolError, "wraps another OP_COMPRESSED", connection_level=True),
    Case("compressed_too_short", "find", Malformed.op_msg_payload(b"\x00\x00", opcode=OP_COMPRESSED),
         ProtocolError, "too short", connection_level=True),
]

# The bytes are fine; the reply's fields are missing or of the wrong type (judged where they are read).
FIELD_CASES = [
    Case("no_ok", "find", Reply({"cursor": GOOD_FIND["cursor"]}), OperationFailure, "command failed", closes=False),
    Case("body_is_an_array_not_a_reply", "find", Reply({"0": 1, "1": 2}), OperationFailure, "command failed",
         closes=False),
    Case("ok_a_string", "find", Reply({"ok": "yes", "cursor": GOOD_FIND["cursor"]}), ProtocolError,
         r"ok is a str \('yes'\), expected a number"),
    Case("code_a_string", "find", Reply({"ok": 0, "code": "11000", "errmsg": "dup"}), ProtocolError,
         "code is a str"),
    Case("code_an_array", "insert", Reply({"ok": 0, "code": [91], "errmsg": "x"}), ProtocolError, "code is a list"),
    Case("errmsg_not_a_string", "find", Reply({"ok": 0, "code": 2, "errmsg": 5}), ProtocolError, "errmsg is a int"),
    Case("error_labels_a_string", "insert",
         Reply({"ok": 0, "code": 91, "errmsg": "x", "errorLabels": "RetryableWriteError"}), ProtocolError,
         "errorLabels is a str"),
    Case("error_labels_of_numbers", "insert", Reply({"ok": 0, "code": 2, "errmsg": "x", "errorLabels": [1]}),
         ProtocolError, r"errorLabels\[0\] is a int"),
    Case("cursor_missing", "find", Reply({"ok": 1}), ProtocolError, "cursor is missing"),
    Case("cursor_not_a_document", "find", Reply({"ok": 1, "cursor": [1]}), ProtocolError,
         "cursor is a list .* expected a document"),
    Case("cursor_id_a_string", "find", Reply(find_reply(id="42")), ProtocolError, "cursor.id is a str"),
    Case("cursor_id_a_double", "find", Reply(find_reply(id=1.5)), ProtocolError, "cursor.id is a float"),
    Case("cursor_id_missing", "find", Reply(find_reply(id=None)), ProtocolError, "cursor.id is missing"),
    Case("first_batch_a_document", "find", Reply(find_reply(firstBatch={"a": 1})), ProtocolError,
         "cursor.firstBatch is a dict .* expected an array"),
    Case("first_batch_a_string", "find", Reply(find_reply(firstBatch="abc")), ProtocolError,
         "cursor.firstBatch is a str"),
    Case("first_batch_of_numbers", "find", Reply(find_reply(firstBatch=[1, 2])), ProtocolError,
         r"cursor.firstBatch\[0\] is a int"),
    Case("first_batch_missing", "find", Reply(find_reply(firstBatch=None)), ProtocolError,
         "cursor.firstBatch is missing"),
    Case("ns_a_number", "find", Reply(find_reply(id=bson.Int64(7), ns=5)), ProtocolError, "cursor.ns is a int"),
    Case("ns_without_a_collection", "find", Reply(find_reply(id=bson.Int64(7), ns="db")), ProtocolError,
         "cursor.ns is a str"),
    Case("next_batch_not_an_array", "get_more",
         Reply({"ok": 1, "cursor": {"id": bson.Int64(0), "ns": "db.c", "nextBatch": {"a": 2}}}), ProtocolError,
         "cursor.nextBatch is a dict"),
    Case("get_more_cursor_id_a_string", "get_more",
         Reply({"ok": 1, "cursor": {"id": "0", "ns": "db.c", "nextBatch": []}}), ProtocolError,
         "cursor.id is a str"),
    Case("get_more_cursor_missing", "get_more", Reply({"ok": 1}), ProtocolError, "cursor is missing"),
    Case("n_a_string", "insert", Reply({"ok": 1, "n": "one"}), ProtocolError, "n is a str"),
    Case("n_a_fraction", "delete", Reply({"ok": 1, "n": 0.5}), ProtocolError, r"n is a float \(0.5\)"),
    Case("n_modified_a_string", "update", Reply({"ok": 1, "n": 1, "nModified": "1"}), ProtocolError,
         "nModified is a str"),
    Case("count_n_a_document", "count", Reply({"ok": 1, "n": {"n": 3}}), ProtocolError, "n is a dict"),
    Case("count_n_missing", "count", Reply({"ok": 1}), ProtocolError, "n is missing"),
    Case("upserted_not_an_array", "update", Reply({"ok": 1, "n": 1, "nModified": 0, "upserted": 5}),
         ProtocolError, "upserted is a int"),
    Case("upserted_entry_without_id", "update",
         Reply({"ok": 1, "n": 1, "nModified": 0, "upserted": [{"index": 0}]}), ProtocolError,
         r"upserted\[0\]._id is missing"),
    Case("write_errors_not_an_array", "insert",
         Reply({"ok": 1, "n": 0, "writeErrors": {"index": 0, "code": 11000, "errmsg": "dup"}}), ProtocolError,
         "writeErrors is a dict"),
    Case("write_error_not_a_document", "insert", Reply({"ok": 1, "n": 0, "writeErrors": ["dup"]}), ProtocolError,
         r"writeErrors\[0\] is a str"),
    Case("write_error_without_index", "insert",
         Reply({"ok": 1, "n": 0, "writeErrors": [{"code": 11000, "errmsg": "dup"}]}), ProtocolError,
         r"writeErrors\[0\].index is missing"),
    Case("write_error_without_code", "insert", Reply({"ok": 1, "n": 0, "writeErrors": [{"index": 0}]}),
         ProtocolError, r"writeErrors\[0\].code is missing"),
    Case("write_error_index_outside_the_batch", "insert_many",
         Reply({"ok": 1, "n": 1, "writeErrors": [{"index": 5, "code": 11000, "errmsg": "dup"}]}), ProtocolError,
         r"writeErrors\[0\].index is a int \(5\), expected an index into the batch of 2"),
    Case("write_concern_error_a_string", "insert", Reply({"ok": 1, "n": 1, "writeConcernError": "w"}),
         ProtocolError, "writeConcernError is a str"),
    Case("write_concern_error_code_a_string", "insert",
         Reply({"ok": 1, "n": 1, "writeConcernError": {"code": "64", "errmsg": "w"}}), ProtocolError,
         "writeConcernError.code is a str"),
    Case("write_concern_error_without_code", "update",
         Reply({"ok": 1, "n": 1, "nModified": 1, "writeConcernError": {"errmsg": "w"}}), ProtocolError,
         "writeConcernError.code is missing"),
    Case("write_concern_error_in_a_bulk_without_code", "insert_many",
         Reply({"ok": 1, "n": 2, "writeConcernError": {"errmsg": "w"}}), ProtocolError,
         "writeConcernError.code is missing"),
    Case("distinct_values_not_an_array", "distinct", Reply({"ok": 1, "values": "ab"}), ProtocolError,
         "values is a str"),
    Case("find_and_modify_value_not_a_document", "find_one_and_update", Reply({"ok": 1, "value": [1]}),
         ProtocolError, "value is a list"),
    Case("list_databases_not_an_array", "list_databases", Reply({"ok": 1, "databases": {"name": "db"}}),
         ProtocolError, "databases is a dict"),
    Case("cluster_time_a_string", "command", Reply({"ok": 1, "$clusterTime": "now"}), ProtocolError,
         r"\$clusterTime is a str"),
    Case("cluster_time_without_timestamp", "command", Reply({"ok": 1, "$clusterTime": {"clusterTime": 5}}),
         ProtocolError, r"\$clusterTime.clusterTime is a int"),
    Case("operation_time_not_a_timestamp", "command", Reply({"ok": 1, "operationTime": "then"}), ProtocolError,
         "operationTime is a str"),
    Case("errmsg_of_10_mb", "find", Reply({"ok": 0, "code": 2, "codeName": "BadValue", "errmsg": "e" * (10 << 20)}),
         OperationFailure, "^e{100}", closes=False),
]

ALL_CASES = WIRE_CASES + FIELD_CASES


# -- fixtures ------------------------------------------------------------------------------


@pytest.fixture
def server():
    with ScriptedServer() as scripted:
        yield scripted


class Events(CommandListener, ConnectionPoolListener):
    """Command and pool events in one list, in order: which pooled connection ran which command."""

    def __init__(self) -> None:
        self.events: list = []

    def _add(self, event: Any) -> None:
        self.events.append(event)

    started = succeeded = failed = _add
    pool_created = pool_ready = pool_cleared = pool_closed = _add
    connection_created = connection_ready = connection_closed = _add
    connection_check_out_started = connection_check_out_failed = _add
    connection_checked_out = connection_checked_in = _add

    def connections_of(self, command_name: str) -> list[int]:
        """The pool's id of the connection each ``command_name`` was sent on (one greenlet: the last checkout)."""
        connections, current = [], None
        for event in self.events:
            if isinstance(event, ConnectionCheckedOutEvent):
                current = event.connection_id
            elif isinstance(event, CommandStartedEvent) and event.command_name == command_name:
                connections.append(current)
        return connections

    def closed(self) -> set[int]:
        return {event.connection_id for event in self.events if isinstance(event, ConnectionClosedEvent)}

    def checked_out(self) -> list[int]:
        return [event.connection_id for event in self.events if isinstance(event, ConnectionCheckedOutEvent)]


@pytest.fixture
def events():
    return Events()


@pytest.fixture
def client(server, events):
    """No retries: a retried read or write would hide the first reply's error behind the good second one."""
    client = MongoClient(server.uri, directConnection=True, socketTimeoutMS=SOCKET_TIMEOUT_MS,
                         serverSelectionTimeoutMS=5000, retryReads=False, retryWrites=False,
                         event_listeners=[events])
    try:
        yield client
    finally:
        client.close()


def script(server: ScriptedServer, op: Op, *actions: Any) -> None:
    if op.command == "getMore":
        server.script("find", *[GET_MORE_FIRST_BATCH] * len(actions))
    server.script(op.command, *actions)


# -- the API table ---------------------------------------------------------------------------


@pytest.mark.parametrize("case", ALL_CASES, ids=[case.id for case in ALL_CASES])
def test_malformed_reply_through_the_api(server, client, events, case: Case) -> None:
    op = OPS[case.op]
    client.admin.command("ping")  # connected: the table's reply is the first the operation reads
    script(server, op, case.action, op.good_reply)
    started = time.monotonic()
    with pytest.raises(case.error, match=case.match) as info:
        op.call(client)
    assert time.monotonic() - started < BOUND
    assert isinstance(info.value, PyMongoError)
    (used,) = events.connections_of(op.command)
    if case.closes:
        assert used in events.closed(), "the connection that read the reply is not closed"
    else:
        assert used not in events.closed()
    # The same client, the same server, the script's next step: a good reply reads as one.
    assert op.call(client) == op.good_result
    again = events.connections_of(op.command)[1]
    assert (again != used) if case.closes else (again == used)


def test_errmsg_of_10_mb_is_kept_whole(server, client) -> None:
    errmsg = "e" * (10 << 20)
    server.script("find", Reply({"ok": 0, "code": 2, "codeName": "BadValue", "errmsg": errmsg}))
    with pytest.raises(OperationFailure) as info:
        list(client.db.c.find({}))
    assert info.value.code == 2 and info.value.details["errmsg"] == errmsg


@pytest.mark.parametrize("flags", [1 << 16, 1 << 20, 1 << 31], ids=["bit16", "bit20", "bit31"])
def test_unknown_optional_flag_bits_are_ignored(server, client, events, flags: int) -> None:
    """OP_MSG: bits 16-31 are optional, a receiver may ignore them (only 0-15 must be known)."""
    client.admin.command("ping")
    server.script("find", Malformed.flag_bits(flags, GOOD_FIND, hold=0))
    assert list(client.db.c.find({})) == [{"a": 1}]
    assert client.db.command("ping") == OK
    (used,) = events.connections_of("find")
    assert events.connections_of("ping")[-1] == used and used not in events.closed()


def test_a_retryable_read_retries_a_reply_cut_short(server, events) -> None:
    """With retryReads (the default) a network error mid-reply is retried once, on a new connection."""
    server.script("find", Malformed.truncated_body(), GOOD_FIND)
    with MongoClient(server.uri, directConnection=True, event_listeners=[events]) as client:
        assert list(client.db.c.find({})) == [{"a": 1}]
    assert len(server.commands("find")) == 2
    first, second = events.connections_of("find")
    assert first != second and first in events.closed()


def test_a_protocol_error_is_not_retried(server) -> None:
    server.script("find", Malformed.wrong_response_to(), GOOD_FIND)
    with MongoClient(server.uri, directConnection=True) as retrying:
        with pytest.raises(ProtocolError):
            list(retrying.db.c.find({}))
    assert len(server.commands("find")) == 1


# -- memory: a lying length or size costs what is sent, not what is claimed ------------------------


def _peak_during(call: Callable[[], Any]) -> tuple[int, Optional[BaseException]]:
    tracemalloc.start()
    error: Optional[BaseException] = None
    try:
        call()
    except PyMongoError as exc:
        error = exc
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak, error


LIMIT = 4 << 20  # far below each claim (40 MB to 2 GB); far above what the replies really carry


def _zstd_bomb() -> Optional[Raw]:
    try:
        import zstandard
    except ImportError:
        return None
    frame = zstandard.ZstdCompressor().compress(bytes(100 << 20))  # declares 100 MB in its frame header
    return Malformed.compressed(compression.ZSTD_ID, frame, len(PLAIN))


MEMORY_CASES = [
    ("length_40mb_then_close", {}, lambda: Malformed.header_length(40_000_000, GOOD_FIND, close_after=True, hold=0),
     AutoReconnect),
    ("length_40mb_then_hang", {}, lambda: Malformed.header_length(40_000_000, GOOD_FIND, hold=BOUND + 5),
     NetworkTimeout),
    ("length_2gb_with_the_default_cap", {}, lambda: Malformed.header_length(2**31 - 1, GOOD_FIND), ProtocolError),
    ("length_2gb_under_a_2gb_max_message_size", {"maxMessageSizeBytes": 2**31 - 1},
     lambda: Malformed.header_length(2**31 - 1, GOOD_FIND, close_after=True, hold=0), AutoReconnect),
    ("uncompressed_size_2gb", {}, lambda: Malformed.compressed(compression.ZLIB_ID, zlib.compress(PLAIN), 2**31 - 1),
     ProtocolError),
    ("zlib_bomb", {}, lambda: Malformed.compressed(compression.ZLIB_ID, zlib.compress(bytes(100 << 20)), len(PLAIN)),
     ProtocolError),
    ("zstd_bomb", {}, _zstd_bomb, ProtocolError),
]


@pytest.mark.parametrize("hello, build, error", [case[1:] for case in MEMORY_CASES],
                         ids=[case[0] for case in MEMORY_CASES])
def test_lying_sizes_are_not_allocated(hello, build, error) -> None:
    action = build()  # built (and its bomb compressed) before memory is traced
    if action is None:
        pytest.skip("zstandard is not installed")
    with ScriptedServer(hello=default_hello(**hello)) as server:
        server.script("find", action, GOOD_FIND)
        with MongoClient(server.uri, directConnection=True, socketTimeoutMS=SOCKET_TIMEOUT_MS,
                         retryReads=False) as client:
            client.admin.command("ping")
            peak, raised = _peak_during(lambda: list(client.db.c.find({})))
            assert isinstance(raised, error), raised
            assert peak < LIMIT, f"{peak} bytes allocated for a reply that carried under 1 KB"
            assert list(client.db.c.find({})) == [{"a": 1}]


# -- a slow link: the deadline bounds the whole reply -------------------------------------------------


def test_a_dribbled_reply_is_cut_by_timeout_ms_as_a_whole(server) -> None:
    """One byte every 50 ms: each read gets a byte well within any per-read timeout, so only a bound on
    the whole round trip stops it (the reply would take ~5 s)."""
    dribble = Dribble(GOOD_FIND, interval=0.05)
    server.script("find", dribble, GOOD_FIND)
    with MongoClient(server.uri, directConnection=True, timeoutMS=400, retryReads=False) as client:
        client.admin.command("ping")
        started = time.monotonic()
        with pytest.raises(PyMongoError) as info:
            list(client.db.c.find({}))
        elapsed = time.monotonic() - started
        assert info.value.timeout and isinstance(info.value, NetworkTimeout), repr(info.value)
        assert elapsed < 2.0, f"{elapsed:.2f}s: the deadline bounded each read, not the reply"
        assert dribble.sent < len(bson.encode(GOOD_FIND))  # cut before the body was through
        assert list(client.db.c.find({})) == [{"a": 1}]


def test_a_dribbled_reply_is_cut_by_a_timeout_block(server) -> None:
    server.script("find", Dribble(GOOD_FIND, interval=0.05), GOOD_FIND)
    with MongoClient(server.uri, directConnection=True, retryReads=False) as client:
        client.admin.command("ping")
        started = time.monotonic()
        with pytest.raises(NetworkTimeout):
            with greenmongo.timeout(0.4):
                list(client.db.c.find({}))
        assert time.monotonic() - started < 2.0
        assert list(client.db.c.find({})) == [{"a": 1}]


def test_socket_timeout_bounds_each_read_as_in_pymongo(server) -> None:
    """Without timeoutMS, socketTimeoutMS bounds a silence, not a reply (PyMongo's meaning): a reply that
    keeps coming, however slowly, is read whole; one that stops is cut after socketTimeoutMS."""
    dribble = Dribble(GOOD_FIND, interval=0.005, step=2)
    server.script("find", dribble, _hang())
    with MongoClient(server.uri, directConnection=True, socketTimeoutMS=200, retryReads=False) as client:
        assert list(client.db.c.find({})) == [{"a": 1}]
        started = time.monotonic()
        with pytest.raises(NetworkTimeout, match="socket timeout 200.0ms"):
            list(client.db.c.find({}))
        assert time.monotonic() - started < BOUND


# -- hello replies ---------------------------------------------------------------------------------

def _without(name: str) -> dict:
    hello = default_hello()
    del hello[name]
    return hello


HELLO_CASES = [
    ("no_max_wire_version", _without("maxWireVersion"), ConfigurationError, "reports wire version 0"),
    ("max_wire_version_0", default_hello(maxWireVersion=0), ConfigurationError, "reports wire version 0"),
    ("max_wire_version_a_string", default_hello(maxWireVersion="21"), ServerSelectionTimeoutError,
     "maxWireVersion is a str"),
    ("max_wire_version_a_fraction", default_hello(maxWireVersion=21.5), ServerSelectionTimeoutError,
     "maxWireVersion is a float"),
    ("min_wire_version_a_document", default_hello(minWireVersion={"v": 0}), ServerSelectionTimeoutError,
     "minWireVersion is a dict"),
    ("max_message_size_a_string", default_hello(maxMessageSizeBytes="48000000"), ServerSelectionTimeoutError,
     "maxMessageSizeBytes is a str"),
    ("max_message_size_past_int32", default_hello(maxMessageSizeBytes=bson.Int64(2**40)),
     ServerSelectionTimeoutError, "maxMessageSizeBytes is a Int64 .*expected a positive int32"),
    ("max_bson_size_negative", default_hello(maxBsonObjectSize=-1), ServerSelectionTimeoutError,
     "maxBsonObjectSize is a int"),
    ("max_write_batch_size_zero", default_hello(maxWriteBatchSize=0), ServerSelectionTimeoutError,
     "maxWriteBatchSize is a int"),
    ("session_timeout_a_string", default_hello(logicalSessionTimeoutMinutes="30"), ServerSelectionTimeoutError,
     "logicalSessionTimeoutMinutes is a str"),
    ("compression_a_string", default_hello(compression="zlib"), ServerSelectionTimeoutError,
     "compression is a str"),
    ("topology_version_a_string", default_hello(topologyVersion="1"), ServerSelectionTimeoutError,
     "topologyVersion is a str"),
    ("topology_version_counter_a_string",
     default_hello(topologyVersion={"processId": bson.ObjectId(), "counter": "1"}), ServerSelectionTimeoutError,
     "topologyVersion.counter is a str"),
    ("hosts_a_string", default_hello(setName="rs", hosts="a:1"), ServerSelectionTimeoutError, "hosts is a str"),
    ("hosts_with_a_bad_port", default_hello(setName="rs", hosts=["a:x"]), ServerSelectionTimeoutError,
     "hosts is a str .*invalid port"),
    ("set_name_a_number", default_hello(setName=5), ServerSelectionTimeoutError, "setName is a int"),
    ("set_version_a_string", default_hello(setName="rs", hosts=["a:1"], setVersion="1"),
     ServerSelectionTimeoutError, "setVersion is a str"),
    ("election_id_a_string", default_hello(setName="rs", hosts=["a:1"], electionId="7f"),
     ServerSelectionTimeoutError, "electionId is a str"),
    ("last_write_a_string", default_hello(lastWrite="now"), ServerSelectionTimeoutError, "lastWrite is a str"),
    ("connection_id_a_string", default_hello(connectionId="1"), ServerSelectionTimeoutError,
     "connectionId is a str"),
    ("cluster_time_a_string", default_hello(**{"$clusterTime": "now"}), ServerSelectionTimeoutError,
     r"\$clusterTime is a str"),
    ("hello_without_ok", _without("ok"), ServerSelectionTimeoutError, "command failed"),
    ("hello_ok_a_string", default_hello(ok="1"), ServerSelectionTimeoutError, "ok is a str"),
]


@pytest.mark.parametrize("hello, error, match", [case[1:] for case in HELLO_CASES],
                         ids=[case[0] for case in HELLO_CASES])
def test_malformed_hello(hello, error, match) -> None:
    """The monitor's check fails (the server stays Unknown with the ProtocolError, the monitor lives on);
    an incompatible wire version is PyMongo's ConfigurationError. A good hello then makes it usable."""
    with ScriptedServer(hello=hello) as server:
        with MongoClient(server.uri, directConnection=True, serverSelectionTimeoutMS=300,
                         heartbeatFrequencyMS=500) as client:
            started = time.monotonic()
            with pytest.raises(error, match=match):
                client.admin.command("ping")
            assert time.monotonic() - started < BOUND
            server.hello_reply = default_hello()  # the server mends its hello: the next check sees it
            wait_until(lambda: [description.max_wire_version for description
                                in client.topology_description.server_descriptions().values()] == [MAX_WIRE_VERSION],
                       message="the monitor's next check of the mended server")
            assert client.admin.command("ping") == OK


# -- the connection level --------------------------------------------------------------------------

CONNECTION_CASES = [case for case in WIRE_CASES if case.connection_level]


@pytest.mark.parametrize("case", CONNECTION_CASES, ids=[case.id for case in CONNECTION_CASES])
def test_malformed_reply_closes_only_its_connection(server, case: Case) -> None:
    settings = ConnectionSettings(connect_timeout=2.0, socket_timeout=SOCKET_TIMEOUT_MS / 1000)
    with open_connection(server.address, settings) as victim, open_connection(server.address, settings) as bystander:
        server.script("find", case.action)
        started = time.monotonic()
        with pytest.raises(case.error, match=case.match) as info:
            victim.command("db", {"find": "c"})
        assert time.monotonic() - started < BOUND
        assert "127.0.0.1:" in str(info.value)
        assert victim.closed
        assert bystander.command("db", {"ping": 1}) == OK


# The cases a connection judges itself (a wire version of 0 is the topology's to refuse; no ``ok`` is a
# failed hello, an OperationFailure).
HANDSHAKE_CASES = [case for case in HELLO_CASES if case[2] is ServerSelectionTimeoutError
                   and case[0] != "hello_without_ok"]


@pytest.mark.parametrize("hello, match", [(case[1], case[3]) for case in HANDSHAKE_CASES],
                         ids=[case[0] for case in HANDSHAKE_CASES])
def test_malformed_hello_fails_the_handshake(hello, match) -> None:
    with ScriptedServer(hello=hello) as server:
        with pytest.raises(ProtocolError, match=match):
            open_connection(server.address, ConnectionSettings(connect_timeout=2.0))
        assert server.requests  # the hello was answered, and the answer refused


@pytest.mark.parametrize("size", [(16 << 20) + 40_000, 33_000_000])
def test_replies_larger_than_a_server_sends_are_read_whole(server, size: int) -> None:
    """The other side of reading a long body in parts: a reply that really is that long reads intact,
    and the next one starts where it ended."""
    blob = bytes(range(256)) * (size // 256)
    server.on("find", lambda request: {"ok": 1, "blob": bson.Binary(blob)})
    settings = ConnectionSettings(connect_timeout=2.0, socket_timeout=10.0)
    with open_connection(server.address, settings) as conn:
        for _ in range(2):
            assert conn.command("db", {"find": "c"})["blob"] == blob
        assert conn.command("db", {"ping": 1}) == OK


def test_a_malformed_field_is_named_briefly() -> None:
    """The error names the field and its type; a huge value is cut, so the message stays small."""
    from greenmongo.wire import reply_fields

    with pytest.raises(ProtocolError) as info:
        reply_fields.integer({"cursor": {"id": "x" * (10 << 20)}}["cursor"], "id", where="cursor")
    message = str(info.value)
    assert message.startswith("malformed reply: cursor.id is a str ('xxx") and message.endswith("expected an integer")
    assert len(message) < 200
    assert reply_fields.integer({"n": 3.0}, "n") == 3  # an integral double is a count (older servers)
    with pytest.raises(ProtocolError, match="n is a bool"):
        reply_fields.integer({"n": True}, "n")
    assert reply_fields.array({"a": None}, "a", default=()) == ()  # null is an absent optional field
