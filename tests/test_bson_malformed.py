"""Malformed BSON: every bad buffer raises InvalidBSON (never another exception, never a hang)."""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from greenmongo import bson
from greenmongo.bson import MAX_NESTING_DEPTH
from greenmongo.errors import InvalidBSON

SAMPLE = {
    "s": "text", "i": 1, "l": bson.Int64(2**40), "d": 1.5, "b": True, "n": None,
    "doc": {"x": [1, "two", {"three": 3.0}]}, "oid": bson.ObjectId(b"123456789012"),
    "bin": bson.Binary(b"\x00\x01", 0x80), "re": bson.Regex("a.c", "i"), "ts": bson.Timestamp(5, 6),
    "code": bson.Code("f()", {"v": 1}), "dec": bson.Decimal128("1.5"), "min": bson.MinKey(),
    "max": bson.MaxKey(), "sym": bson.Symbol("s"), "ptr": bson.DBPointer("db.c", bson.ObjectId(b"abcdefghijkl")),
}
VALID = bson.encode(SAMPLE)


def _decode_or_invalid(data: bytes) -> None:
    """Malformed input decodes to a document or raises InvalidBSON saying why; nothing else."""
    try:
        document = bson.decode(data)
    except InvalidBSON as exc:
        assert str(exc), "InvalidBSON must say what is wrong"
    else:
        assert isinstance(document, dict), type(document)


def test_sample_round_trips() -> None:
    assert bson.encode(bson.decode(VALID)) == VALID


@pytest.mark.parametrize("cut", range(0, len(VALID)))
def test_every_truncation_is_invalid(cut: int) -> None:
    with pytest.raises(InvalidBSON):
        bson.decode(VALID[:cut])


def test_messages_say_what_and_where() -> None:
    data = bytearray(bson.encode({"name": "value"}))
    data[4] = 0x33  # unknown element type
    with pytest.raises(InvalidBSON, match=r"unknown BSON type 0x33.*at byte \d+"):
        bson.decode(bytes(data))
    lying = bytearray(bson.encode({"name": "value"}))
    lying[10:14] = struct.pack("<i", 1000)  # string length past the end
    with pytest.raises(InvalidBSON, match=r"string 'name'.*at byte 10"):
        bson.decode(bytes(lying))
    bad_utf8 = bson.encode({"k": "xx"}).replace(b"xx", b"\xff\xfe")
    with pytest.raises(InvalidBSON, match="not valid UTF-8"):
        bson.decode(bad_utf8)


def test_trailing_data_is_invalid() -> None:
    with pytest.raises(InvalidBSON, match="trailing"):
        bson.decode(VALID + b"\x00")
    assert bson.decode_all(VALID + VALID) == [bson.decode(VALID)] * 2


def test_depth_bomb_is_refused_cleanly() -> None:
    depth = MAX_NESTING_DEPTH + 50
    doc: dict = {}
    inner = doc
    for _ in range(depth - 1):
        inner["a"] = {}
        inner = inner["a"]
    with pytest.raises(Exception) as info:
        bson.encode(doc)
    assert "nest" in str(info.value)
    # Build the same nesting as raw bytes and decode it.
    data = b"\x05\x00\x00\x00\x00"
    for _ in range(depth):
        body = b"\x03a\x00" + data + b"\x00"
        data = struct.pack("<i", len(body) + 4) + body
    with pytest.raises(InvalidBSON, match="nest deeper"):
        bson.decode(data)


def test_boolean_and_subtype2_and_code_w_scope_checks() -> None:
    with pytest.raises(InvalidBSON, match="boolean"):
        bson.decode(b"\x09\x00\x00\x00\x08b\x00\x02\x00")
    old_binary = bson.encode({"x": bson.Binary(b"abc", 2)})
    assert bson.decode(old_binary)["x"] == bson.Binary(b"abc", 2)
    lying = bytearray(old_binary)
    lying[12:16] = struct.pack("<i", 2)  # inner length disagrees with outer
    with pytest.raises(InvalidBSON, match="old binary"):
        bson.decode(bytes(lying))


def test_is_valid_and_file_iter(tmp_path) -> None:
    assert bson.is_valid(VALID)
    assert not bson.is_valid(VALID[:-1])
    path = tmp_path / "docs.bson"
    path.write_bytes(VALID + VALID[:20])
    with open(path, "rb") as fh:
        it = bson.decode_file_iter(fh)
        assert next(it) == bson.decode(VALID)
        with pytest.raises(InvalidBSON):
            next(it)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200))
def test_fuzz_random_bytes(data: bytes) -> None:
    _decode_or_invalid(data)


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 255)), min_size=1, max_size=6))
def test_fuzz_mutated_document(mutations) -> None:
    data = bytearray(VALID)
    for offset, byte in mutations:
        data[offset] = byte
    _decode_or_invalid(bytes(data))


def test_mutation_sweep_every_byte() -> None:
    """Deterministic sweep: each byte of a valid document set to a few nasty values."""
    rng = random.Random(1234)
    for offset in range(len(VALID)):
        for byte in (0x00, 0x01, 0x7F, 0x80, 0xFF, rng.randrange(256)):
            data = bytearray(VALID)
            data[offset] = byte
            _decode_or_invalid(bytes(data))
