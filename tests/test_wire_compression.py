"""OP_COMPRESSED: each compressor, the wire layout, bounds and the never-compress list."""

from __future__ import annotations

import struct
import zlib

import pytest

from greenmongo import bson
from greenmongo.errors import ProtocolError
from greenmongo.wire import compression, op_msg
from greenmongo.wire.header import HEADER_SIZE, OP_COMPRESSED, OP_MSG, parse_header

MESSAGE = op_msg.pack_op_msg(77, bson.encode({"insert": "c", "payload": "x" * 500}), response_to=3)


@pytest.mark.parametrize("name, compressor_id", [("snappy", 1), ("zlib", 2), ("zstd", 3), ("noop", 0)])
def test_round_trip_and_layout(name: str, compressor_id: int) -> None:
    compressor = compression.get_compressor(name)
    wrapped = compression.compress_message(MESSAGE, compressor)
    header = parse_header(wrapped[:HEADER_SIZE])
    assert header.opcode == OP_COMPRESSED
    assert header.length == len(wrapped)
    assert (header.request_id, header.response_to) == (77, 3)
    original_opcode, uncompressed_size, wire_id = struct.unpack_from("<iiB", wrapped, HEADER_SIZE)
    assert (original_opcode, uncompressed_size, wire_id) == (OP_MSG, len(MESSAGE) - HEADER_SIZE, compressor_id)
    if name != "noop":
        assert len(wrapped) < len(MESSAGE)
    opcode, body, seen_id = compression.unpack_compressed(wrapped[HEADER_SIZE:], max_message_size=48_000_000)
    assert (opcode, seen_id) == (OP_MSG, compressor_id)
    assert body == MESSAGE[HEADER_SIZE:]


def test_zlib_level_is_applied() -> None:
    data = bytes(range(256)) * 200
    fast = compression.get_compressor("zlib", 1).compress(data)
    stored = compression.get_compressor("zlib", 0).compress(data)
    assert zlib.decompress(fast) == zlib.decompress(stored) == data
    assert len(stored) > len(data) > len(fast)
    with pytest.raises(ValueError):
        compression.get_compressor("zlib", 10)


def test_available_and_unknown() -> None:
    assert compression.available_compressors() == ("snappy", "zlib", "zstd")
    with pytest.raises(ValueError):
        compression.get_compressor("snoopy")


@pytest.mark.parametrize("client, server, expected", [
    (["zstd", "snappy", "zlib"], ["zlib", "snappy"], "snappy"),
    (["zlib", "snappy"], ["snappy", "zlib"], "zlib"),
    (["snappy"], [], None),
    ([], ["zlib"], None),
])
def test_negotiation_uses_client_order(client, server, expected) -> None:
    assert compression.negotiate(client, server) == expected


@pytest.mark.parametrize("name", ["hello", "isMaster", "ismaster", "saslStart", "saslContinue", "getnonce",
                                  "authenticate", "createUser", "updateUser", "copydbSaslStart",
                                  "copydbgetnonce", "copydb"])
def test_never_compressed(name: str) -> None:
    assert not compression.may_compress(name)


@pytest.mark.parametrize("name", ["insert", "find", "ping", "getMore", "aggregate"])
def test_ordinary_commands_compressed(name: str) -> None:
    assert compression.may_compress(name)


def wrapped_payload(compressor_id: int, data: bytes, size: int, opcode: int = OP_MSG) -> bytes:
    return struct.pack("<iiB", opcode, size, compressor_id) + data


def test_declared_size_beyond_max_message_size_rejected_before_work() -> None:
    with pytest.raises(ProtocolError, match="out of bounds"):
        compression.unpack_compressed(wrapped_payload(2, b"", 10_000), max_message_size=1000)
    with pytest.raises(ProtocolError, match="out of bounds"):
        compression.unpack_compressed(wrapped_payload(2, b"", -1), max_message_size=1000)


def test_size_mismatch_rejected() -> None:
    data = zlib.compress(b"a" * 100)
    with pytest.raises(ProtocolError, match="declared"):
        compression.unpack_compressed(wrapped_payload(2, data, 50), max_message_size=1000)
    with pytest.raises(ProtocolError, match="declared"):
        compression.unpack_compressed(wrapped_payload(2, data, 200), max_message_size=1000)


def test_snappy_declared_length_checked_before_decompressing() -> None:
    data = compression.get_compressor("snappy").compress(b"b" * 100)
    with pytest.raises(ProtocolError, match="snappy"):
        compression.unpack_compressed(wrapped_payload(1, data, 99), max_message_size=1000)


@pytest.mark.parametrize("compressor_id", [1, 2, 3])
def test_corrupt_data_is_a_protocol_error(compressor_id: int) -> None:
    with pytest.raises(ProtocolError):
        compression.unpack_compressed(wrapped_payload(compressor_id, b"\x05garbage!", 5), max_message_size=1000)


def test_unknown_compressor_and_nesting() -> None:
    with pytest.raises(ProtocolError, match="unknown compressorId 9"):
        compression.unpack_compressed(wrapped_payload(9, b"abc", 3), max_message_size=1000)
    with pytest.raises(ProtocolError, match="wraps another"):
        compression.unpack_compressed(wrapped_payload(0, b"abc", 3, OP_COMPRESSED), max_message_size=1000)
    with pytest.raises(ProtocolError, match="too short"):
        compression.unpack_compressed(b"\x00\x01", max_message_size=1000)
