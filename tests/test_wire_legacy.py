"""OP_QUERY / OP_REPLY (legacy hello only) against hand-built bytes."""

from __future__ import annotations

import struct

import pytest

from greenmongo import bson
from greenmongo.errors import ProtocolError
from greenmongo.wire import legacy
from greenmongo.wire.header import OP_QUERY, parse_header

IS_MASTER = struct.pack("<i", 17) + b"\x10isMaster\x00" + struct.pack("<i", 1) + b"\x00"
OK = struct.pack("<i", 13) + b"\x10ok\x00" + struct.pack("<i", 1) + b"\x00"


def test_op_query_bytes() -> None:
    message = legacy.pack_op_query(3, "admin.$cmd", IS_MASTER)
    payload = struct.pack("<i", 0) + b"admin.$cmd\x00" + struct.pack("<ii", 0, -1) + IS_MASTER
    assert message == struct.pack("<iiii", 16 + len(payload), 3, 0, 2004) + payload


def test_encode_command_query_uses_db_dollar_cmd() -> None:
    message = legacy.encode_command_query(4, {"isMaster": 1, "helloOk": True}, "admin")
    header = parse_header(message[:16])
    assert header.opcode == OP_QUERY and header.length == len(message)
    assert message[20:31] == b"admin.$cmd\x00"
    assert bson.decode(message[31 + 8:]) == {"isMaster": 1, "helloOk": True}


def op_reply(documents: list[bytes], flags: int = 0, number: int | None = None) -> bytes:
    count = len(documents) if number is None else number
    return struct.pack("<iqii", flags, 0, 0, count) + b"".join(documents)


def test_op_reply_parse() -> None:
    reply = legacy.unpack_op_reply(op_reply([OK]))
    assert reply.documents == [OK] and reply.cursor_id == 0 and not reply.query_failure
    assert legacy.decode_command_reply(reply) == {"ok": 1}


def test_query_failure_becomes_ok_zero() -> None:
    error = bson.encode({"$err": "bad things", "code": 2})
    reply = legacy.unpack_op_reply(op_reply([error], flags=legacy.REPLY_FLAG_QUERY_FAILURE))
    document = legacy.decode_command_reply(reply)
    assert document["ok"] == 0 and document["errmsg"] == "bad things"


@pytest.mark.parametrize("payload, match", [
    (b"\x00" * 10, "too short"),
    (op_reply([OK], number=2), "ends before"),
    (op_reply([OK], number=-1), "negative"),
    (op_reply([OK]) + b"\x00\x00", "after its documents"),
    (op_reply([OK[:-4]], number=1), "ends before|runs past"),
])
def test_malformed_op_reply(payload: bytes, match: str) -> None:
    with pytest.raises(ProtocolError, match=match):
        legacy.unpack_op_reply(payload)


def test_command_reply_needs_exactly_one_document() -> None:
    with pytest.raises(ProtocolError, match="one document"):
        legacy.decode_command_reply(legacy.unpack_op_reply(op_reply([OK, OK])))
