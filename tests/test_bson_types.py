"""BSON types and CodecOptions behaviour beyond the corpus: UUIDs, datetimes, custom types, raw documents."""

from __future__ import annotations

import collections
import datetime
import os
import re
import uuid

import pytest

from greenmongo import bson
from greenmongo.bson import (
    Binary,
    BinaryVectorDtype,
    CodecOptions,
    DatetimeConversion,
    DatetimeMS,
    Int64,
    ObjectId,
    RawBSONDocument,
    TypeCodec,
    TypeRegistry,
    UuidRepresentation,
)
from greenmongo.bson import objectid as objectid_module
from greenmongo.bson.objectid import _process_random
from greenmongo.errors import InvalidBSON, InvalidDocument, InvalidId

U = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")


# -- UUID representations (BSON Binary UUID spec) ------------------------------

def test_unspecified_refuses_native_uuid() -> None:
    with pytest.raises(ValueError, match="UNSPECIFIED"):  # PyMongo's error type
        bson.encode({"u": U})


@pytest.mark.parametrize("representation,subtype,payload", [
    (UuidRepresentation.STANDARD, 4, "00112233445566778899aabbccddeeff"),
    (UuidRepresentation.PYTHON_LEGACY, 3, "00112233445566778899aabbccddeeff"),
    (UuidRepresentation.JAVA_LEGACY, 3, "7766554433221100ffeeddccbbaa9988"),
    (UuidRepresentation.CSHARP_LEGACY, 3, "33221100554477668899aabbccddeeff"),
])
def test_uuid_representations(representation: int, subtype: int, payload: str) -> None:
    opts = CodecOptions(uuid_representation=representation)
    data = bson.encode({"u": U}, codec_options=opts)
    assert data[11] == subtype and data[12:28].hex() == payload
    assert bson.decode(data, codec_options=opts)["u"] == U
    # Under UNSPECIFIED nothing is converted implicitly: the Binary comes back as it is.
    raw = bson.decode(data)["u"]
    assert isinstance(raw, Binary) and raw.subtype == subtype
    assert raw.as_uuid(representation) == U


def test_standard_does_not_decode_legacy_subtype() -> None:
    data = bson.encode({"u": Binary.from_uuid(U, UuidRepresentation.PYTHON_LEGACY)})
    value = bson.decode(data, codec_options=CodecOptions(uuid_representation=UuidRepresentation.STANDARD))["u"]
    assert isinstance(value, Binary) and value.subtype == 3


# -- datetimes -------------------------------------------------------------------

def test_naive_datetimes_are_utc_and_truncated_to_millis() -> None:
    value = datetime.datetime(2024, 5, 6, 7, 8, 9, 123456)
    out = bson.decode(bson.encode({"d": value}))["d"]
    assert out == datetime.datetime(2024, 5, 6, 7, 8, 9, 123000) and out.tzinfo is None


def test_tz_aware_and_tzinfo() -> None:
    plus5 = datetime.timezone(datetime.timedelta(hours=5))
    value = datetime.datetime(2024, 1, 1, 5, 0, tzinfo=plus5)
    data = bson.encode({"d": value})
    assert bson.decode(data)["d"] == datetime.datetime(2024, 1, 1, 0, 0)
    aware = bson.decode(data, codec_options=CodecOptions(tz_aware=True))["d"]
    assert aware.tzinfo == datetime.timezone.utc and aware == value
    local = bson.decode(data, codec_options=CodecOptions(tz_aware=True, tzinfo=plus5))["d"]
    assert local.utcoffset() == datetime.timedelta(hours=5) and local == value
    with pytest.raises(ValueError):
        CodecOptions(tzinfo=plus5)


def test_datetime_conversion_modes() -> None:
    far = DatetimeMS(2**62)
    data = bson.encode({"d": far})
    with pytest.raises(InvalidBSON, match="DATETIME_AUTO"):
        bson.decode(data)
    auto = CodecOptions(datetime_conversion=DatetimeConversion.DATETIME_AUTO)
    assert bson.decode(data, codec_options=auto)["d"] == far
    assert bson.decode(data, codec_options=CodecOptions(datetime_conversion=DatetimeConversion.DATETIME_MS))["d"] == far
    clamped = bson.decode(data, codec_options=CodecOptions(datetime_conversion=DatetimeConversion.DATETIME_CLAMP))
    assert clamped["d"] == datetime.datetime(9999, 12, 31, 23, 59, 59, 999000)
    ms = bson.decode(bson.encode({"d": datetime.datetime(1970, 1, 2)}),
                     codec_options=CodecOptions(datetime_conversion=DatetimeConversion.DATETIME_MS))["d"]
    assert ms == DatetimeMS(86_400_000)


# -- custom types, document classes, check_keys ---------------------------------

class Money:
    def __init__(self, cents: int) -> None:
        self.cents = cents


class MoneyCodec(TypeCodec):
    python_type = Money
    bson_type = Int64

    def transform_python(self, value: Money) -> Int64:
        return Int64(value.cents)

    def transform_bson(self, value: Int64) -> Money:
        return Money(int(value))


def test_type_registry_round_trip_and_fallback() -> None:
    opts = CodecOptions(type_registry=TypeRegistry([MoneyCodec()], fallback_encoder=lambda v: str(v)))
    data = bson.encode({"m": Money(250), "nested": {"m": [Money(1)]}, "other": complex(1, 2)}, codec_options=opts)
    out = bson.decode(data, codec_options=opts)
    assert isinstance(out["m"], Money) and out["m"].cents == 250
    assert out["nested"]["m"][0].cents == 1
    assert out["other"] == "(1+2j)"
    with pytest.raises(InvalidDocument, match="cannot encode object"):
        bson.encode({"m": Money(1)})
    with pytest.raises(TypeError):
        TypeRegistry([type("Bad", (TypeCodec,), {"python_type": int, "bson_type": int,
                                                  "transform_python": lambda s, v: v,
                                                  "transform_bson": lambda s, v: v})()])


def test_document_class_and_key_order() -> None:
    opts = CodecOptions(document_class=collections.OrderedDict)
    out = bson.decode(bson.encode({"b": 1, "a": {"z": 1, "y": 2}}), codec_options=opts)
    assert isinstance(out, collections.OrderedDict) and isinstance(out["a"], collections.OrderedDict)
    assert list(out) == ["b", "a"] and list(out["a"]) == ["z", "y"]


def test_id_is_written_first_at_top_level_only() -> None:
    data = bson.encode({"a": 1, "_id": 2, "sub": {"x": 1, "_id": 3}})
    assert list(bson.decode(data)) == ["_id", "a", "sub"]
    assert list(bson.decode(data)["sub"]) == ["x", "_id"]


def test_check_keys_and_bad_keys() -> None:
    with pytest.raises(InvalidDocument, match=r"\$"):
        bson.encode({"$bad": 1}, check_keys=True)
    with pytest.raises(InvalidDocument, match=r"'\.'"):
        bson.encode({"a.b": 1}, check_keys=True)
    assert bson.decode(bson.encode({"$ok": 1, "a.b": 2})) == {"$ok": 1, "a.b": 2}
    with pytest.raises(InvalidDocument, match="NUL"):
        bson.encode({"a\x00b": 1})
    with pytest.raises(InvalidDocument, match="string keys"):
        bson.encode({1: 1})
    with pytest.raises(InvalidDocument, match="UTF-8"):
        bson.encode({"s": "\ud800"})
    with pytest.raises(OverflowError):
        bson.encode({"big": 2**64})


def test_compiled_patterns_and_regex() -> None:
    data = bson.encode({"r": re.compile("^a.c$", re.IGNORECASE | re.MULTILINE)})
    out = bson.decode(data)["r"]
    assert out.pattern == "^a.c$" and out.try_compile().flags & re.IGNORECASE


# -- RawBSONDocument ---------------------------------------------------------------

def test_raw_document_is_lazy_and_passes_through() -> None:
    data = bson.encode({"a": {"b": [1, {"c": 2}]}, "s": "x"})
    raw = bson.decode(data, codec_options=CodecOptions(document_class=RawBSONDocument))
    assert isinstance(raw, RawBSONDocument) and raw.raw == data
    assert isinstance(raw["a"], RawBSONDocument) and raw["a"]["b"][1]["c"] == 2
    assert bson.encode(raw) == data
    assert bson.encode({"wrap": raw}) == bson.encode({"wrap": bson.decode(data)})
    with pytest.raises(InvalidBSON):
        RawBSONDocument(data[:-1])


# -- ObjectId --------------------------------------------------------------------------

def test_objectid_layout_and_order() -> None:
    a, b = ObjectId(), ObjectId()
    assert a < b and a != b and len(a.binary) == 12
    # 4 bytes of time, the process's 5 random bytes, a 3-byte big-endian counter that counts up and wraps
    assert a.binary[4:9] == b.binary[4:9] == _process_random()
    assert (int.from_bytes(b.binary[9:], "big") - int.from_bytes(a.binary[9:], "big")) % (1 << 24) == 1
    saved = objectid_module._counter
    try:
        objectid_module._counter = 0xFFFFFE
        assert ObjectId().binary[9:] == b"\xff\xff\xff" and ObjectId().binary[9:] == b"\x00\x00\x00"
        objectid_module._counter = 0x0102FF
        assert ObjectId().binary[9:] == b"\x01\x03\x00"
    finally:
        objectid_module._counter = saved
    assert abs((a.generation_time - datetime.datetime.now(datetime.timezone.utc)).total_seconds()) < 5
    assert ObjectId(str(a)) == a and ObjectId.is_valid(str(a)) and not ObjectId.is_valid("zz")
    with pytest.raises(InvalidId):
        ObjectId("not-an-oid")
    lower = ObjectId.from_datetime(datetime.datetime(2020, 1, 1))
    assert lower.binary[4:] == b"\x00" * 8


def test_objectid_process_random_changes_after_fork() -> None:
    before = _process_random()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report its random and exit without running pytest's teardown
        os.close(read)
        os.write(write, _process_random() + ObjectId().binary[4:9])
        os._exit(0)
    os.close(write)
    reply = os.read(read, 10)
    os.close(read)
    os.waitpid(pid, 0)
    child_random, child_oid_random = reply[:5], reply[5:]
    assert child_random != before and child_oid_random == child_random
    assert _process_random() == before


# -- vectors (bson-binary-vector prose tests) ------------------------------------------

def test_vector_padding_bits_must_be_zero() -> None:
    with pytest.raises(ValueError):
        Binary.from_vector([0b11111111], BinaryVectorDtype.PACKED_BIT, padding=7)
    with pytest.raises(ValueError):
        Binary(b"\x10\x07\xff", subtype=9).as_vector()
    b1 = Binary.from_vector([0b10000000], BinaryVectorDtype.PACKED_BIT, padding=7)
    assert b1 == Binary(b"\x10\x07\x80", subtype=9)
    assert b1.as_vector().data == [128]
    assert b1 != Binary(b"\x10\x07\x80", subtype=0)
