"""Extended JSON (json_util): output per mode, the parser's key-set rules, options, UUIDs, dates, nesting."""

from __future__ import annotations

import base64
import datetime
import json
import pickle
import re
import uuid
from collections import OrderedDict

import pytest

from greenmongo import bson
from greenmongo.bson import (
    UNDEFINED,
    Binary,
    BinaryVector,
    BinaryVectorDtype,
    Code,
    CodecOptions,
    DatetimeConversion,
    DatetimeMS,
    DBPointer,
    DBRef,
    Decimal128,
    Int64,
    MaxKey,
    MinKey,
    ObjectId,
    RawBSONDocument,
    Regex,
    Symbol,
    Timestamp,
    TypeEncoder,
    TypeRegistry,
    UuidRepresentation,
)
from greenmongo.bson import json_util
from greenmongo.bson.json_util import (
    CANONICAL_JSON_OPTIONS,
    DEFAULT_JSON_OPTIONS,
    LEGACY_JSON_OPTIONS,
    RELAXED_JSON_OPTIONS,
    DatetimeRepresentation,
    JSONMode,
    JSONOptions,
    dumps,
    loads,
)

OID = ObjectId("57e193d7a9cc81b4027498b5")
UUID = uuid.UUID("c8edabc3-f738-4ca3-b68d-ab92a91478a3")
UTC = datetime.timezone.utc


def as_json(obj, options=DEFAULT_JSON_OPTIONS):
    return json.loads(dumps(obj, json_options=options))


# -- options ------------------------------------------------------------------

def test_presets_and_modes() -> None:
    assert DEFAULT_JSON_OPTIONS is RELAXED_JSON_OPTIONS
    assert RELAXED_JSON_OPTIONS.json_mode == JSONMode.RELAXED
    assert CANONICAL_JSON_OPTIONS.json_mode == JSONMode.CANONICAL
    assert LEGACY_JSON_OPTIONS.json_mode == JSONMode.LEGACY
    assert CANONICAL_JSON_OPTIONS.strict_number_long is True
    assert CANONICAL_JSON_OPTIONS.datetime_representation == DatetimeRepresentation.NUMBERLONG
    assert RELAXED_JSON_OPTIONS.strict_number_long is False
    assert RELAXED_JSON_OPTIONS.datetime_representation == DatetimeRepresentation.ISO8601
    assert LEGACY_JSON_OPTIONS.datetime_representation == DatetimeRepresentation.LEGACY
    # PyMongo 4's LEGACY preset: no UUID representation, UUIDs written as {"$uuid": ...}.
    assert LEGACY_JSON_OPTIONS.uuid_representation == UuidRepresentation.UNSPECIFIED
    assert LEGACY_JSON_OPTIONS.strict_uuid is False
    assert isinstance(CANONICAL_JSON_OPTIONS, CodecOptions)


@pytest.mark.parametrize("kwargs", [
    {"json_mode": JSONMode.CANONICAL, "strict_number_long": False},
    {"json_mode": JSONMode.CANONICAL, "datetime_representation": DatetimeRepresentation.ISO8601},
    {"json_mode": JSONMode.CANONICAL, "strict_uuid": False},
    {"json_mode": JSONMode.RELAXED, "strict_number_long": True},
    {"json_mode": JSONMode.RELAXED, "datetime_representation": DatetimeRepresentation.LEGACY},
    {"json_mode": 7},
    {"json_mode": JSONMode.LEGACY, "datetime_representation": 9},
])
def test_conflicting_options_are_refused(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        JSONOptions(**kwargs)


def test_with_options_keeps_the_mode_and_recomputes_derived_settings() -> None:
    options = CANONICAL_JSON_OPTIONS.with_options(tz_aware=True,
                                                  uuid_representation=UuidRepresentation.STANDARD)
    assert options.json_mode == JSONMode.CANONICAL and options.tz_aware
    assert options.with_options(tz_aware=False).tz_aware is False
    assert options.uuid_representation == UuidRepresentation.STANDARD
    relaxed = options.with_options(json_mode=JSONMode.RELAXED)
    assert relaxed.datetime_representation == DatetimeRepresentation.ISO8601
    assert relaxed.strict_number_long is False and relaxed.tz_aware


def test_equality_repr_and_pickle() -> None:
    assert CANONICAL_JSON_OPTIONS != RELAXED_JSON_OPTIONS  # same CodecOptions fields, different mode
    assert CANONICAL_JSON_OPTIONS == JSONOptions(json_mode=JSONMode.CANONICAL)
    assert repr(CANONICAL_JSON_OPTIONS).startswith("JSONOptions(")
    assert "json_mode=2" in repr(CANONICAL_JSON_OPTIONS)
    aware = RELAXED_JSON_OPTIONS.with_options(tz_aware=True)
    for options in (CANONICAL_JSON_OPTIONS, LEGACY_JSON_OPTIONS, aware):
        clone = pickle.loads(pickle.dumps(options))
        assert clone == options and clone.json_mode == options.json_mode


# -- generating -------------------------------------------------------------

ALL_TYPES = {
    "_id": OID,
    "String": "string",
    "Int32": 42,
    "Int64": Int64(42),
    "Double": 42.42,
    "Decimal": Decimal128("1234.5"),
    "Binary": Binary(UUID.bytes, 4),
    "BinaryUserDefined": Binary(b"123", 0x80),
    "Bytes": b"\x01\x02",
    "Code": Code("function() {}"),
    "CodeWithScope": Code("function() {}", {}),
    "Subdocument": {"foo": "bar"},
    "Array": [1, 2, 3],
    "Timestamp": Timestamp(42, 1),
    "RegularExpression": Regex("foo*", "xi"),
    "DatetimeEpoch": datetime.datetime(1970, 1, 1),
    "DatetimePositive": datetime.datetime(9999, 12, 31, 23, 59, 59, 999000),
    "DatetimeNegative": datetime.datetime(1, 1, 1),
    "True": True,
    "False": False,
    "DBRef": DBRef("collection", ObjectId("57e193d7a9cc81b4027498b1"), database="database"),
    "DBRefNoDB": DBRef("collection", ObjectId("57fd71e96e32ab4225b723fb")),
    "Minkey": MinKey(),
    "Maxkey": MaxKey(),
    "Null": None,
    "Symbol": Symbol("sym"),
    "DBPointer": DBPointer("db.coll", OID),
    "Undefined": UNDEFINED,
}


def test_canonical_output_matches_the_spec_example() -> None:
    out = as_json(ALL_TYPES, CANONICAL_JSON_OPTIONS)
    assert out["_id"] == {"$oid": "57e193d7a9cc81b4027498b5"}
    assert out["String"] == "string"
    assert out["Int32"] == {"$numberInt": "42"}
    assert out["Int64"] == {"$numberLong": "42"}
    assert out["Double"] == {"$numberDouble": "42.42"}
    assert out["Decimal"] == {"$numberDecimal": "1234.5"}
    assert out["Binary"] == {"$binary": {"base64": "yO2rw/c4TKO2jauSqRR4ow==", "subType": "04"}}
    assert out["BinaryUserDefined"] == {"$binary": {"base64": "MTIz", "subType": "80"}}
    assert out["Bytes"] == {"$binary": {"base64": "AQI=", "subType": "00"}}
    assert out["Code"] == {"$code": "function() {}"}
    assert out["CodeWithScope"] == {"$code": "function() {}", "$scope": {}}
    assert out["Array"] == [{"$numberInt": "1"}, {"$numberInt": "2"}, {"$numberInt": "3"}]
    assert out["Timestamp"] == {"$timestamp": {"t": 42, "i": 1}}
    assert out["RegularExpression"] == {"$regularExpression": {"pattern": "foo*", "options": "ix"}}
    assert out["DatetimeEpoch"] == {"$date": {"$numberLong": "0"}}
    assert out["DatetimePositive"] == {"$date": {"$numberLong": "253402300799999"}}
    assert out["DatetimeNegative"] == {"$date": {"$numberLong": "-62135596800000"}}
    assert out["DBRef"] == {"$ref": "collection", "$id": {"$oid": "57e193d7a9cc81b4027498b1"},
                            "$db": "database"}
    assert list(out["DBRef"]) == ["$ref", "$id", "$db"]
    assert out["DBRefNoDB"] == {"$ref": "collection", "$id": {"$oid": "57fd71e96e32ab4225b723fb"}}
    assert out["Minkey"] == {"$minKey": 1} and out["Maxkey"] == {"$maxKey": 1}
    assert out["Null"] is None and out["True"] is True and out["False"] is False
    assert out["Symbol"] == {"$symbol": "sym"}
    assert out["DBPointer"] == {"$dbPointer": {"$ref": "db.coll",
                                               "$id": {"$oid": "57e193d7a9cc81b4027498b5"}}}
    assert out["Undefined"] == {"$undefined": True}
    assert list(out) == list(ALL_TYPES)  # key order kept


def test_relaxed_output() -> None:
    out = as_json(ALL_TYPES, RELAXED_JSON_OPTIONS)
    assert out["Int32"] == 42 and out["Int64"] == 42 and out["Double"] == 42.42
    assert out["Array"] == [1, 2, 3]
    assert out["DatetimeEpoch"] == {"$date": "1970-01-01T00:00:00Z"}
    assert out["DatetimePositive"] == {"$date": "9999-12-31T23:59:59.999Z"}
    assert out["DatetimeNegative"] == {"$date": {"$numberLong": "-62135596800000"}}  # before 1970
    assert out["Decimal"] == {"$numberDecimal": "1234.5"}
    text = dumps({"d": 1.0, "big": 1e300, "i": 2**40})
    assert json.loads(text, parse_float=lambda s: ("float", s)) == {
        "d": ("float", "1.0"), "big": ("float", "1e+300"), "i": 2**40}


@pytest.mark.parametrize("value, text", [
    (float("inf"), "Infinity"), (float("-inf"), "-Infinity"), (float("nan"), "NaN"),
    (-0.0, "-0.0"), (1.0, "1.0"), (1.2345678921232e18, "1.2345678921232E+18"), (5e-324, "5E-324"),
])
def test_doubles(value: float, text: str) -> None:
    assert as_json({"d": value}, CANONICAL_JSON_OPTIONS) == {"d": {"$numberDouble": text}}
    relaxed = as_json({"d": value})
    if text in ("Infinity", "-Infinity", "NaN"):
        assert relaxed == {"d": {"$numberDouble": text}}  # non-finite stays wrapped in every mode
        assert as_json({"d": value}, LEGACY_JSON_OPTIONS) == {"d": {"$numberDouble": text}}
    else:
        assert relaxed == {"d": value}


def test_ints() -> None:
    assert as_json([2**31 - 1, -(2**31), 2**31, Int64(1)], CANONICAL_JSON_OPTIONS) == [
        {"$numberInt": "2147483647"}, {"$numberInt": "-2147483648"}, {"$numberLong": "2147483648"},
        {"$numberLong": "1"}]
    with pytest.raises(OverflowError):
        dumps(2**63, json_options=CANONICAL_JSON_OPTIONS)
    with pytest.raises(OverflowError):
        dumps(-(2**63) - 1)
    assert dumps(2**70, json_options=LEGACY_JSON_OPTIONS) == str(2**70)
    strict = JSONOptions(json_mode=JSONMode.LEGACY, strict_number_long=True)
    assert as_json(Int64(5), strict) == {"$numberLong": "5"}
    assert as_json(Int64(5), LEGACY_JSON_OPTIONS) == 5


def test_legacy_output() -> None:
    out = as_json(ALL_TYPES, LEGACY_JSON_OPTIONS)
    assert out["Binary"] == {"$binary": "yO2rw/c4TKO2jauSqRR4ow==", "$type": "04"}
    assert out["RegularExpression"] == {"$regex": "foo*", "$options": "ix"}
    assert out["DatetimeEpoch"] == {"$date": 0}
    assert out["Int32"] == 42 and out["Int64"] == 42


def test_datetime_representations_and_time_zones() -> None:
    plus_one = datetime.timezone(datetime.timedelta(hours=1))
    moment = datetime.datetime(2012, 12, 24, 13, 15, 30, 501999, tzinfo=plus_one)
    assert as_json(moment) == {"$date": "2012-12-24T12:15:30.501Z"}  # converted to UTC, ms precision
    assert as_json(moment, CANONICAL_JSON_OPTIONS) == {"$date": {"$numberLong": "1356351330501"}}
    number_long = JSONOptions(json_mode=JSONMode.LEGACY,
                              datetime_representation=DatetimeRepresentation.NUMBERLONG)
    assert as_json(moment, number_long) == {"$date": {"$numberLong": "1356351330501"}}
    iso = JSONOptions(json_mode=JSONMode.LEGACY, datetime_representation=DatetimeRepresentation.ISO8601)
    assert as_json(datetime.datetime(1969, 12, 31), iso) == {"$date": {"$numberLong": "-86400000"}}
    assert as_json(DatetimeMS(253402300800000)) == {"$date": {"$numberLong": "253402300800000"}}
    assert as_json(DatetimeMS(1001)) == {"$date": "1970-01-01T00:00:01.001Z"}


def test_regex_forms() -> None:
    assert as_json(re.compile("a+", re.I | re.M)) == {
        "$regularExpression": {"pattern": "a+", "options": "imu"}}
    assert as_json(Regex("p", re.X | re.S)) == {"$regularExpression": {"pattern": "p", "options": "sx"}}


def test_vector_dumps_as_subtype_9() -> None:
    vector = BinaryVector([1, -2], BinaryVectorDtype.INT8)
    assert as_json(vector) == as_json(Binary.from_vector(vector))
    assert as_json(vector)["$binary"]["subType"] == "09"


def test_unsupported_types_and_custom_encoders() -> None:
    # A value with no BSON form reaches json.dumps unchanged: its TypeError, or its ``default``.
    with pytest.raises(TypeError, match="not JSON serializable"):
        dumps({"x": object()})
    assert dumps({"x": object()}, default=lambda value: "?") == '{"x": "?"}'

    class Money:
        def __init__(self, cents: int) -> None:
            self.cents = cents

    class MoneyEncoder(TypeEncoder):
        python_type = Money

        def transform_python(self, value: Money) -> Int64:
            return Int64(value.cents)

    options = CANONICAL_JSON_OPTIONS.with_options(type_registry=TypeRegistry([MoneyEncoder()]))
    assert as_json({"m": Money(5)}, options) == {"m": {"$numberLong": "5"}}
    fallback = RELAXED_JSON_OPTIONS.with_options(type_registry=TypeRegistry(fallback_encoder=repr))
    assert as_json({"s": {1}, "m": Money}, fallback) == {"s": [1], "m": repr(Money)}  # iterables stay arrays


def test_mappings_subclasses_and_kwargs_pass_through() -> None:
    class MyInt(int):
        pass

    assert as_json(OrderedDict([("b", 1), ("a", MyInt(2))]), CANONICAL_JSON_OPTIONS) == {
        "b": {"$numberInt": "1"}, "a": {"$numberInt": "2"}}
    assert dumps({"b": 1, "a": 2}, sort_keys=True, separators=(",", ":")) == '{"a":2,"b":1}'
    raw = RawBSONDocument(bson.encode({"x": Int64(3)}))
    assert as_json(raw, CANONICAL_JSON_OPTIONS) == {"x": {"$numberLong": "3"}}


def test_default_for_json_dumps() -> None:
    text = json.dumps({"id": OID, "when": datetime.datetime(1970, 1, 1)},
                      default=lambda o: json_util.default(o, CANONICAL_JSON_OPTIONS))
    assert json.loads(text) == {"id": {"$oid": str(OID)}, "when": {"$date": {"$numberLong": "0"}}}


# -- UUIDs --------------------------------------------------------------------

@pytest.mark.parametrize("representation, subtype, data", [
    (UuidRepresentation.STANDARD, "04", UUID.bytes),
    (UuidRepresentation.PYTHON_LEGACY, "03", UUID.bytes),
    (UuidRepresentation.JAVA_LEGACY, "03", UUID.bytes[7::-1] + UUID.bytes[:7:-1]),
    (UuidRepresentation.CSHARP_LEGACY, "03", UUID.bytes_le),
])
def test_uuid_representations_round_trip(representation: int, subtype: str, data: bytes) -> None:
    options = CANONICAL_JSON_OPTIONS.with_options(uuid_representation=representation)
    out = as_json({"u": UUID}, options)
    assert out == {"u": {"$binary": {"base64": base64.b64encode(data).decode(), "subType": subtype}}}
    assert loads(dumps({"u": UUID}, json_options=options), json_options=options) == {"u": UUID}
    # Under UNSPECIFIED the same text stays Binary: no implicit conversion.
    assert loads(dumps({"u": UUID}, json_options=options), json_options=CANONICAL_JSON_OPTIONS) == {
        "u": Binary(data, int(subtype))}


def test_uuid_unspecified_refuses_native_uuids() -> None:
    with pytest.raises(ValueError, match="UNSPECIFIED"):
        dumps({"u": UUID})
    loose = JSONOptions(json_mode=JSONMode.RELAXED, strict_uuid=False)
    assert as_json({"u": UUID}, loose) == {"u": {"$uuid": str(UUID)}}


@pytest.mark.parametrize("text", [
    str(UUID), str(UUID).upper(), UUID.hex, "urn:uuid:" + str(UUID),
])
def test_dollar_uuid_input_is_binary_subtype_4(text: str) -> None:
    doc = '{"u": {"$uuid": "%s"}}' % text
    assert loads(doc) == {"u": Binary(UUID.bytes, 4)}
    standard = RELAXED_JSON_OPTIONS.with_options(uuid_representation=UuidRepresentation.STANDARD)
    assert loads(doc, json_options=standard) == {"u": UUID}
    # As PyMongo's json_util: any representation but UNSPECIFIED reads $uuid as a UUID (MongoEngine's
    # from_json reads what to_json wrote with PYTHON_LEGACY and compares documents).
    legacy = RELAXED_JSON_OPTIONS.with_options(uuid_representation=UuidRepresentation.PYTHON_LEGACY)
    assert loads(doc, json_options=legacy) == {"u": UUID}


@pytest.mark.parametrize("representation, subtype_4, subtype_3", [
    (UuidRepresentation.UNSPECIFIED, Binary(UUID.bytes, 4), Binary(UUID.bytes, 3)),
    (UuidRepresentation.STANDARD, UUID, UUID),  # subtype 3 read as PYTHON_LEGACY
    (UuidRepresentation.PYTHON_LEGACY, UUID, UUID),  # subtype 4 read as STANDARD
    (UuidRepresentation.JAVA_LEGACY, UUID, uuid.UUID(bytes=UUID.bytes[7::-1] + UUID.bytes[:7:-1])),
    (UuidRepresentation.CSHARP_LEGACY, UUID, uuid.UUID(bytes_le=UUID.bytes)),
])
def test_uuid_binary_input_is_read_as_pymongo_reads_it(representation: int, subtype_4: object,
                                                      subtype_3: object) -> None:
    options = RELAXED_JSON_OPTIONS.with_options(uuid_representation=representation)
    data = base64.b64encode(UUID.bytes).decode()
    for subtype, expected in (("04", subtype_4), ("03", subtype_3)):
        text = '{"u": {"$binary": {"base64": "%s", "subType": "%s"}}}' % (data, subtype)
        assert loads(text, json_options=options) == {"u": expected}, subtype
    short = '{"u": {"$binary": {"base64": "AQI=", "subType": "04"}}}'
    assert loads(short, json_options=options) == {"u": Binary(b"\x01\x02", 4)}  # not 16 bytes: no UUID


@pytest.mark.parametrize("text", [
    "c8edabc3-f738-4ca3-b68d-ab92a91478a", "c8edabc3f738-4ca3-b68d-ab92a91478a3", "{%s}" % UUID, "", "x" * 36,
])
def test_bad_dollar_uuid(text: str) -> None:
    with pytest.raises(ValueError, match=r"\$uuid"):
        loads('{"u": {"$uuid": "%s"}}' % text)


# -- parsing ------------------------------------------------------------------

def test_every_type_round_trips_through_canonical_text() -> None:
    options = CANONICAL_JSON_OPTIONS.with_options(datetime_conversion=DatetimeConversion.DATETIME_AUTO)
    back = loads(dumps(ALL_TYPES, json_options=options), json_options=options)
    expected = dict(ALL_TYPES, Bytes=b"\x01\x02")
    assert back == expected
    for key in ("Int64", "Symbol", "Code", "Decimal"):
        assert type(back[key]) is type(ALL_TYPES[key]), key
    assert back["CodeWithScope"].scope == {}
    assert bson.encode(back) == bson.encode(ALL_TYPES)


def test_relaxed_round_trip_loses_only_number_types() -> None:
    back = loads(dumps(ALL_TYPES))
    assert back == dict(ALL_TYPES, Bytes=b"\x01\x02")
    assert type(back["Int64"]) is int


def test_numbers() -> None:
    assert loads('{"a": 1, "b": 2147483648, "c": 1.5, "d": 1e2, "e": 123456789012345678901234567890}') == {
        "a": 1, "b": 2147483648, "c": 1.5, "d": 100.0, "e": 1.2345678901234568e29}
    assert type(loads('{"e": 9223372036854775808}')["e"]) is float
    assert type(loads('{"e": 9223372036854775807}')["e"]) is int
    assert loads('{"x": {"$numberInt": "-5"}, "y": {"$numberLong": "-9223372036854775808"}}') == {
        "x": -5, "y": Int64(-(2**63))}
    assert str(loads('{"x": {"$numberDouble": "-0.0"}}')["x"]) == "-0.0"
    assert loads('{"x": {"$numberDouble": "1E+3"}}')["x"] == 1000.0


@pytest.mark.parametrize("text", [
    '{"x": {"$numberInt": "2147483648"}}',
    '{"x": {"$numberInt": "1.0"}}',
    '{"x": {"$numberInt": " 1"}}',
    '{"x": {"$numberInt": "+1"}}',
    '{"x": {"$numberLong": "9223372036854775808"}}',
    '{"x": {"$numberLong": "1_000"}}',
    '{"x": {"$numberDouble": "inf"}}',
    '{"x": {"$numberDouble": "1.0f"}}',
    '{"x": {"$numberDecimal": "1E6145"}}',
    '{"x": {"$numberDecimal": "bad"}}',
    '{"x": {"$oid": "57e193d7a9cc81b4027498b"}}',
    '{"x": {"$oid": "57e193d7a9cc81b4027498bz"}}',
    '{"x": {"$oid": " 57e193d7a9cc81b4027498b"}}',
    '{"x": {"$binary": {"base64": "AQ", "subType": "00"}}}',
    '{"x": {"$binary": {"base64": "AQ==", "subType": "100"}}}',
    '{"x": {"$binary": "AQ==", "$type": "00"}}',
    '{"x": {"$binary": "AQ=="}}',
    '{"x": {"$timestamp": {"t": -1, "i": 0}}}',
    '{"x": {"$timestamp": {"t": 4294967296, "i": 0}}}',
    '{"x": {"$timestamp": {"t": 1.0, "i": 0}}}',
    '{"x": {"$timestamp": {"t": {"$numberInt": "1"}, "i": 0}}}',
    '{"x": {"$date": "2012-13-01T00:00:00Z"}}',
    '{"x": {"$date": "2012-12-01T24:00:00Z"}}',
    '{"x": {"$date": "yesterday"}}',
    '{"x": {"$date": {"$numberLong": "1", "x": 1}}}',
    '{"x": {"$date": 1.5}}',
    '{"x": {"$date": true}}',
    '{"x": {"$undefined": false}}',
    '{"x": {"$minKey": 1.0}}',
    '{"x": {"$symbol": 1}}',
    '{"x": {"$scope": {}}}',
    '{"x": {"$code": "f", "$scope": []}}',
    '{"x": {"$regularExpression": {"pattern": "a", "options": "", "x": 1}}}',
    '{"x": {"$dbPointer": {"$ref": "a.b", "$id": "57e193d7a9cc81b4027498b5"}}}',
    '{"x": {"$dbPointer": {"$ref": 1, "$id": {"$oid": "57e193d7a9cc81b4027498b5"}}}}',
    '{"x": {"$oid": "57e193d7a9cc81b4027498b5", "$numberInt": "1"}}',
    '{"x": {"a": 1, "$numberInt": "1"}}',
    '{"x": NaN}',
    '{"x": Infinity}',
    '{"x": 1',
])
def test_parse_errors_raise_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        loads(text)


def test_dollar_keys_that_are_not_wrappers_stay_documents() -> None:
    assert loads('{"x": {"$type": "string"}}') == {"x": {"$type": "string"}}
    assert loads('{"x": {"$type": {"$numberInt": "2"}}}') == {"x": {"$type": 2}}
    query = '{"x": {"$regex": {"$regularExpression": {"pattern": "p", "options": ""}}, "$options": "ix"}}'
    assert loads(query) == {"x": {"$regex": Regex("p", ""), "$options": "ix"}}
    assert loads('{"x": {"$regex": "p", "$options": "i"}}') == {"x": {"$regex": "p", "$options": "i"}}
    assert loads('{"x": {"$in": [1, 2]}, "$or": []}') == {"x": {"$in": [1, 2]}, "$or": []}


def test_a_top_level_one_key_wrapper_converts_other_objects_are_documents() -> None:
    # PyMongo's loads converts a top-level wrapper, so dumps/loads round-trips a single value.
    assert loads('{"$oid": "57e193d7a9cc81b4027498b5"}') == OID
    assert loads(dumps(OID)) == OID
    moment = datetime.datetime(2020, 5, 1, 12, 0, 0, 123000)
    assert loads(dumps(moment)) == moment
    with pytest.raises(ValueError):
        loads('{"$numberInt": 42}')
    assert loads('{"$type": "string"}') == {"$type": "string"}  # not a wrapper: a document
    # Several keys: a document, even when shaped like a DBRef (the bson corpus reads the top level as a
    # BSON document).
    doc = loads('{"$ref": "c", "$id": 1}')
    assert type(doc) is dict and doc == {"$ref": "c", "$id": 1}
    # Wrappers anywhere below the top level are converted, including inside top-level arrays.
    assert loads('[{"$oid": "57e193d7a9cc81b4027498b5"}]') == [OID]
    assert loads('"text"') == "text"


def test_dbrefs_and_lookalikes() -> None:
    ref = loads('{"r": {"$id": 1, "x": true, "$ref": "c", "$db": "d"}}')["r"]
    assert ref == DBRef("c", 1, "d", x=True)
    assert list(ref.as_doc()) == ["$ref", "$id", "$db", "x"]
    for lookalike in ('{"$ref": "c"}', '{"$ref": 1, "$id": 1}', '{"$ref": "c", "$id": 1, "$db": 5}'):
        assert type(loads('{"r": %s}' % lookalike)["r"]) is dict


def test_dates() -> None:
    assert loads('{"d": {"$date": "2012-12-24T12:15:30.501Z"}}') == {
        "d": datetime.datetime(2012, 12, 24, 12, 15, 30, 501000)}
    assert loads('{"d": {"$date": "2012-12-24T13:15:30.5019+01:00"}}')["d"] == datetime.datetime(
        2012, 12, 24, 12, 15, 30, 501000)
    assert loads('{"d": {"$date": "2012-12-24T07:15:30-0500"}}')["d"] == datetime.datetime(
        2012, 12, 24, 12, 15, 30)
    assert loads('{"d": {"$date": {"$numberLong": "-1"}}}')["d"] == datetime.datetime(
        1969, 12, 31, 23, 59, 59, 999000)


def test_tz_aware_dates() -> None:
    aware = RELAXED_JSON_OPTIONS.with_options(tz_aware=True)
    assert loads('{"d": {"$date": "1970-01-01T00:00:00Z"}}', json_options=aware)["d"] == datetime.datetime(
        1970, 1, 1, tzinfo=UTC)
    assert loads('{"d": {"$date": "1970-01-01T00:00:00Z"}}', json_options=aware)["d"].tzinfo is UTC
    plus_two = datetime.timezone(datetime.timedelta(hours=2))
    local = RELAXED_JSON_OPTIONS.with_options(tz_aware=True, tzinfo=plus_two)
    value = loads('{"d": {"$date": "1970-01-01T00:00:00Z"}}', json_options=local)["d"]
    assert value.utcoffset() == datetime.timedelta(hours=2) and value.hour == 2
    assert dumps(value) == '{"$date": "1970-01-01T00:00:00Z"}'


def test_dates_outside_python_range_follow_datetime_conversion() -> None:
    text = '{"d": {"$date": {"$numberLong": "253402300800000"}}}'
    with pytest.raises(ValueError, match="DATETIME_AUTO"):
        loads(text)
    auto = RELAXED_JSON_OPTIONS.with_options(datetime_conversion=DatetimeConversion.DATETIME_AUTO)
    assert loads(text, json_options=auto) == {"d": DatetimeMS(253402300800000)}
    clamp = RELAXED_JSON_OPTIONS.with_options(datetime_conversion=DatetimeConversion.DATETIME_CLAMP)
    assert loads(text, json_options=clamp)["d"] == datetime.datetime(9999, 12, 31, 23, 59, 59, 999000)
    as_ms = RELAXED_JSON_OPTIONS.with_options(datetime_conversion=DatetimeConversion.DATETIME_MS)
    assert loads('{"d": {"$date": "1970-01-01T00:00:01Z"}}', json_options=as_ms) == {"d": DatetimeMS(1000)}


def test_binary_subtypes() -> None:
    assert loads('{"b": {"$binary": {"base64": "AQI=", "subType": "0"}}}') == {"b": b"\x01\x02"}
    value = loads('{"b": {"$binary": {"subType": "8", "base64": "AQI="}}}')["b"]
    assert value == Binary(b"\x01\x02", 8) and value.subtype == 8
    assert loads('{"b": {"$binary": {"base64": "AQI=", "subType": "FF"}}}')["b"].subtype == 255


def test_code_scope_and_regex() -> None:
    code = loads('{"c": {"$scope": {"x": {"$numberLong": "1"}}, "$code": "f"}}')["c"]
    assert code == Code("f", {"x": Int64(1)})
    # $scope is a document by definition, so its own $-keys are never a wrapper.
    assert loads('{"c": {"$code": "f", "$scope": {"$oid": 1}}}')["c"].scope == {"$oid": 1}
    regex = loads('{"r": {"$regularExpression": {"options": "mix", "pattern": "a"}}}')["r"]
    assert regex == Regex("a", "imx")


def test_nul_characters_are_refused_where_bson_cannot_hold_them() -> None:
    with pytest.raises(ValueError, match="NUL"):
        loads('{"a\\u0000": 1}')
    with pytest.raises(ValueError, match="NUL"):
        loads('{"a": {"b": {"c\\u0000": 1}}}')
    assert loads('{"a": "x\\u0000y", "c": {"$code": "\\u0000"}}') == {"a": "x\x00y", "c": Code("\x00")}


def test_legacy_input_forms_only_in_legacy_mode() -> None:
    legacy = LEGACY_JSON_OPTIONS.with_options(uuid_representation=UuidRepresentation.UNSPECIFIED)
    assert loads('{"b": {"$binary": "AQI=", "$type": "80"}}', json_options=legacy) == {
        "b": Binary(b"\x01\x02", 128)}
    assert loads('{"b": {"$type": "80", "$binary": "AQI="}}', json_options=legacy)["b"].subtype == 128
    assert loads('{"r": {"$regex": "a", "$options": "mi"}}', json_options=legacy) == {"r": Regex("a", "im")}
    assert loads('{"r": {"$regex": "a"}}', json_options=legacy) == {"r": Regex("a", "")}
    assert loads('{"r": {"$regex": {"$in": [1]}}}', json_options=legacy) == {"r": {"$regex": {"$in": [1]}}}
    assert loads('{"d": {"$date": 1000}}', json_options=legacy) == {
        "d": datetime.datetime(1970, 1, 1, 0, 0, 1)}
    assert loads('{"x": NaN}', json_options=legacy)["x"] != loads('{"x": NaN}', json_options=legacy)["x"]
    with pytest.raises(ValueError):
        loads('{"b": {"$binary": "AQI=", "$type": "80"}}')


def test_legacy_integer_date_is_read_in_every_mode_but_canonical() -> None:
    # {"$date": <millis>} is what LEGACY dumps writes; PyMongo reads it whatever the options (MongoEngine's
    # QuerySet.from_json loads its to_json output with the default options). CANONICAL parses strictly, as
    # the bson corpus requires ("Bad $date (number, not string or hash)").
    text = dumps({"d": datetime.datetime(2026, 11, 26, 5, 40, 5, 261000)}, json_options=LEGACY_JSON_OPTIONS)
    assert text == '{"d": {"$date": 1795671605261}}'
    for options in (DEFAULT_JSON_OPTIONS, RELAXED_JSON_OPTIONS, LEGACY_JSON_OPTIONS):
        assert loads(text, json_options=options) == {"d": datetime.datetime(2026, 11, 26, 5, 40, 5, 261000)}
    assert loads('{"d": {"$date": -1}}') == {"d": datetime.datetime(1969, 12, 31, 23, 59, 59, 999000)}
    with pytest.raises(ValueError):
        loads(text, json_options=CANONICAL_JSON_OPTIONS)


def test_document_class() -> None:
    options = RELAXED_JSON_OPTIONS.with_options(document_class=OrderedDict)
    doc = loads('{"b": {"y": 1, "x": 2}, "a": [{"k": 1}]}', json_options=options)
    assert type(doc) is OrderedDict and type(doc["b"]) is OrderedDict and type(doc["a"][0]) is OrderedDict
    assert list(doc) == ["b", "a"] and list(doc["b"]) == ["y", "x"]
    raw_options = CANONICAL_JSON_OPTIONS.with_options(document_class=RawBSONDocument)
    raw = loads('{"x": {"$numberLong": "1"}, "s": {"a": 1}}', json_options=raw_options)
    assert isinstance(raw, RawBSONDocument)
    assert raw.raw == bson.encode({"x": Int64(1), "s": {"a": 1}})


def test_json_hooks() -> None:
    text = '{"a": {"$oid": "57e193d7a9cc81b4027498b5"}, "p": {"$dbPointer": {"$ref": "n", "$id": ' \
           '{"$oid": "57e193d7a9cc81b4027498b5"}}}, "d": {"$date": {"$numberLong": "0"}}, ' \
           '"b": {"$binary": {"base64": "AQI=", "subType": "05"}}, "r": {"$ref": "c", "$id": 1}}'
    expected = {"a": OID, "p": DBPointer("n", OID), "d": datetime.datetime(1970, 1, 1),
                "b": Binary(b"\x01\x02", 5), "r": DBRef("c", 1)}
    assert json.loads(text, object_hook=json_util.object_hook) == expected
    assert json.loads(text, object_pairs_hook=json_util.object_pairs_hook) == expected
    # A hook cannot see the top level, so a top-level wrapper converts (PyMongo's behaviour).
    assert json.loads('{"$oid": "57e193d7a9cc81b4027498b5"}', object_hook=json_util.object_hook) == OID
    with pytest.raises(ValueError):
        json.loads('{"x": {"$numberInt": 1}}', object_hook=json_util.object_hook)


# -- nesting ------------------------------------------------------------------

def _nested(depth: int, leaf: str) -> str:
    return '{"a": ' * depth + leaf + "}" * depth


def test_parser_nests_at_least_200_levels() -> None:
    doc = loads(_nested(200, '{"$numberLong": "7"}'))
    for _ in range(199):
        doc = doc["a"]
    assert doc == {"a": Int64(7)} and type(doc["a"]) is Int64
    arrays = loads('{"x": ' + "[" * 200 + '{"$numberInt": "1"}' + "]" * 200 + "}")["x"]
    for _ in range(199):
        arrays = arrays[0]
    assert arrays == [1]
    # Wrapper objects double the apparent depth: 100 levels of code-with-scope is 200 JSON objects.
    text = '{"c": ' + '{"$code": "f", "$scope": {"c": ' * 100 + '1' + "}}" * 100 + "}"
    code = loads(text)["c"]
    for _ in range(99):
        code = code.scope["c"]
    assert code == Code("f", {"c": 1})


def test_generator_writes_deep_documents() -> None:
    doc: dict = {"leaf": Int64(1)}
    for _ in range(150):
        doc = {"a": doc}
    text = dumps(doc, json_options=CANONICAL_JSON_OPTIONS)
    assert loads(text, json_options=CANONICAL_JSON_OPTIONS) == doc


def test_absurd_nesting_is_a_value_error_not_a_crash() -> None:
    with pytest.raises(ValueError, match="deep"):
        loads(_nested(100000, "1"))


def test_reference_cycles_are_a_value_error() -> None:
    cycle: dict = {}
    cycle["self"] = cycle
    with pytest.raises(ValueError, match="cycle"):
        dumps(cycle)
