"""The C accelerator (greenmongo.bson._speedups) against the pure-Python codec, head to head.

The C code must be indistinguishable from the Python code it replaces: the same values of the same
types, the same exception classes with the same messages, the same nesting limits; and on top of that
no leaked references or memory, and no crash on any input. Every comparison runs both paths in this
process: ``pure_python()`` points the module globals the pure functions call through back at the
pure functions for the duration of one call.
"""

from __future__ import annotations

import collections
import contextlib
import datetime
import gc
import importlib.util
import os
import random
import re
import struct
import subprocess
import sys
import tracemalloc
import uuid
from collections.abc import Iterator, MutableMapping
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from greenmongo import bson
from greenmongo.bson import (
    ALL_UUID_REPRESENTATIONS,
    MAX_NESTING_DEPTH,
    UNDEFINED,
    Binary,
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
    TypeCodec,
    TypeDecoder,
    TypeRegistry,
    UuidRepresentation,
    codec,
    decoder,
    encoder,
)
from greenmongo.errors import InvalidBSON, InvalidDocument
from spec.support import REPO_ROOT, in_ci, load_json, spec_files
from tests.test_bson_malformed import VALID as MALFORMED_SAMPLE

C_ACTIVE = bson.has_c()
needs_c = pytest.mark.skipif(not C_ACTIVE, reason="C extension not built, or GREENMONGO_NO_EXTENSIONS is set")

if C_ACTIVE:
    C_DECODE, C_DECODE_ALL, C_ENCODE = codec.decode, codec.decode_all, codec.encode
    C_DECODE_DOCUMENT, C_ENCODE_DOCUMENT = decoder.decode_document, encoder.encode_document


def test_extension_is_built_and_active_unless_disabled() -> None:
    """A compiled module that fails to wire itself up must not silently leave the slow path on."""
    disabled = os.environ.get("GREENMONGO_NO_EXTENSIONS", "") not in ("", "0")
    built = importlib.util.find_spec("greenmongo.bson._speedups") is not None
    if disabled:
        assert not bson.has_c()
        assert decoder.decode_document is decoder._py_decode_document
        assert encoder.encode_document is encoder._py_encode_document
    elif built:
        assert bson.has_c()
        assert type(bson.decode).__name__ == "builtin_function_or_method"
    else:
        pytest.skip("the C extension is not built here")


_BROKEN_EXTENSION = """
import sys, types, warnings
fake = types.ModuleType("greenmongo.bson._speedups")
def refuse(namespace):
    raise RuntimeError("built from other sources")
fake._init_decoder = fake._init_encoder = fake._init_codec = refuse
sys.modules["greenmongo.bson._speedups"] = fake
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    from greenmongo import bson
    from greenmongo.bson import decoder, encoder
assert not bson.has_c()
assert decoder.decode_document is decoder._py_decode_document
assert encoder.encode_document is encoder._py_encode_document
assert bson.decode(bson.encode({"a": [1, "b"]})) == {"a": [1, "b"]}
assert any("C extension disabled" in str(w.message) for w in caught), [str(w.message) for w in caught]
"""


def test_an_extension_that_cannot_wire_up_falls_back_to_pure_python() -> None:
    env = {key: value for key, value in os.environ.items() if key != "GREENMONGO_NO_EXTENSIONS"}
    proc = subprocess.run([sys.executable, "-c", _BROKEN_EXTENSION], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


# -- running the two paths ---------------------------------------------------------------------------

_PURE_GLOBALS = (
    (decoder, "decode_document", "_py_decode_document"),
    (encoder, "encode_document", "_py_encode_document"),
    (codec, "decode_document", None),
    (codec, "encode_document", None),
    (codec, "_decode_one", "_py_decode_one"),
    (codec, "decode", "_py_decode"),
)


@contextlib.contextmanager
def pure_python() -> Iterator[None]:
    """Route every internal call to the pure-Python functions (the C ones stay reachable as C_*)."""
    saved = [(module, name, getattr(module, name)) for module, name, _ in _PURE_GLOBALS]
    replacements = {
        (codec, "decode_document"): decoder._py_decode_document,
        (codec, "encode_document"): encoder._py_encode_document,
    }
    try:
        for module, name, pure in _PURE_GLOBALS:
            setattr(module, name, getattr(module, pure) if pure else replacements[(module, name)])
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)


def outcome(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple:
    try:
        return ("value", fn(*args, **kwargs))
    except Exception as exc:  # noqa: BLE001 - the comparison is the point
        return ("error", type(exc), str(exc))


def py_outcome(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple:
    with pure_python():
        return outcome(fn, *args, **kwargs)


def assert_same_outcome(c_result: tuple, py_result: tuple) -> None:
    assert c_result[0] == py_result[0], f"C gave {c_result!r}, Python gave {py_result!r}"
    if c_result[0] == "error":
        assert c_result[1] is py_result[1], f"C raised {c_result[1:]}, Python raised {py_result[1:]}"
        assert c_result[2] == py_result[2]
    else:
        assert_same(c_result[1], py_result[1])


def compare_decode(data: Any, opts: Any = None) -> tuple:
    c_result = outcome(C_DECODE, data, opts)
    assert_same_outcome(c_result, py_outcome(codec._py_decode, data, opts))
    return c_result


def compare_encode(doc: Any, check_keys: Any = False, opts: Any = None) -> tuple:
    c_result = outcome(C_ENCODE, doc, check_keys, opts)
    assert_same_outcome(c_result, py_outcome(codec._py_encode, doc, check_keys, opts))
    return c_result


# -- "the same value": type-exact, recursive --------------------------------------------------------

def _same_datetime(a: datetime.datetime, b: datetime.datetime, path: str) -> None:
    assert a.replace(tzinfo=None) == b.replace(tzinfo=None) and a.tzinfo == b.tzinfo and a.fold == b.fold, path


def _same_mapping(a: Any, b: Any, path: str) -> None:
    assert list(a.keys()) == list(b.keys()), path
    for key in a.keys():
        assert_same(a[key], b[key], f"{path}.{key}")


_SAME: dict[type, Callable[[Any, Any, str], None]] = {
    float: lambda a, b, p: _assert(struct.pack("<d", a) == struct.pack("<d", b), p),
    list: lambda a, b, p: (_assert(len(a) == len(b), p), [assert_same(x, y, f"{p}[{i}]")
                                                           for i, (x, y) in enumerate(zip(a, b))]),
    Binary: lambda a, b, p: _assert(bytes(a) == bytes(b) and a.subtype == b.subtype and vars(a) == vars(b), p),
    Code: lambda a, b, p: (_assert(str(a) == str(b), p), assert_same(a.scope, b.scope, f"{p}.scope")),
    DBRef: lambda a, b, p: assert_same(a.as_doc(), b.as_doc(), f"{p}<DBRef>"),
    datetime.datetime: _same_datetime,
    Regex: lambda a, b, p: (assert_same(a.pattern, b.pattern, p), assert_same(a.flags, b.flags, p)),
    Decimal128: lambda a, b, p: _assert(a.bid == b.bid, p),
    ObjectId: lambda a, b, p: _assert(a.binary == b.binary and type(a.binary) is bytes, p),
    Timestamp: lambda a, b, p: (assert_same(a.time, b.time, p), assert_same(a.inc, b.inc, p)),
    DatetimeMS: lambda a, b, p: _assert(int(a) == int(b), p),
    DBPointer: lambda a, b, p: (assert_same(a.namespace, b.namespace, p), assert_same(a.id, b.id, p)),
    uuid.UUID: lambda a, b, p: _assert(a == b and a.is_safe == b.is_safe, p),
    MinKey: lambda a, b, p: None,
    MaxKey: lambda a, b, p: None,
    RawBSONDocument: lambda a, b, p: _assert(a.raw == b.raw, p),
}


def _assert(condition: bool, path: str) -> None:
    assert condition, f"values differ at {path}"


def assert_same(a: Any, b: Any, path: str = "$") -> None:
    assert type(a) is type(b), f"{path}: {type(a).__name__} != {type(b).__name__}"
    compare = _SAME.get(type(a))
    if compare is not None:
        compare(a, b, path)
    elif isinstance(a, MutableMapping):
        _same_mapping(a, b, path)
    else:
        assert a == b, path
    if type(a) not in (Binary,) and hasattr(a, "__dict__") and not isinstance(a, type):
        assert vars(a).keys() == vars(b).keys(), path


# -- documents and options to throw at both ----------------------------------------------------------

class OrderedDoc(collections.OrderedDict):
    """A dict subclass document class."""


class PlainDoc(MutableMapping):
    """A document class that is a Mapping but not a dict."""

    def __init__(self) -> None:
        self._data: dict = {}

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._data[key] = value

    def __delitem__(self, key: str) -> None:
        del self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, PlainDoc) and list(self._data.items()) == list(other._data.items())


class MyInt(int):
    pass


class MyStr(str):
    pass


class MyFloat(float):
    pass


class MyObjectId(ObjectId):
    __slots__ = ()


class Money:
    def __init__(self, cents: int) -> None:
        self.cents = cents

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Money) and other.cents == self.cents

    def __repr__(self) -> str:
        return f"Money({self.cents})"


class MoneyCodec(TypeCodec):
    python_type = Money
    bson_type = Int64

    def transform_python(self, value: Money) -> Int64:
        return Int64(value.cents)

    def transform_bson(self, value: Int64) -> Money:
        return Money(int(value))


class UpperStrings(TypeDecoder):
    bson_type = str

    def transform_bson(self, value: str) -> str:
        return value.upper()


class ListLength(TypeDecoder):
    bson_type = list

    def transform_bson(self, value: list) -> int:
        return len(value)


REGISTRIES = [
    TypeRegistry(),
    TypeRegistry([MoneyCodec()]),
    TypeRegistry([UpperStrings(), ListLength()]),
    TypeRegistry([MoneyCodec()], fallback_encoder=repr),
]
OFFSETS = st.integers(-1439, 1439).map(lambda minutes: datetime.timezone(datetime.timedelta(minutes=minutes)))
ODD_OFFSETS = st.integers(-86399_999999, 86399_999999).map(
    lambda us: datetime.timezone(datetime.timedelta(microseconds=us)))
HANDLERS = ["strict", "replace", "ignore", "surrogateescape", "backslashreplace"]

KEYS = st.one_of(
    st.sampled_from(["_id", "a", "b", "$ref", "$id", "$db", "x.y", "$set", "", "é", "\x00", "a\x00b",
                     "\ud800", "0", "key with spaces"]),
    st.text(max_size=6),
)
TEXT = st.one_of(st.text(max_size=12), st.sampled_from(["", "\x00", "a\x00b", "\ud800x", "日本語", "é"]))
DATETIMES = st.one_of(
    st.datetimes(),
    st.datetimes(timezones=st.one_of(st.just(datetime.timezone.utc), OFFSETS, ODD_OFFSETS)),
    st.sampled_from([datetime.datetime.min, datetime.datetime.max, datetime.datetime(1970, 1, 1),
                     datetime.datetime(1969, 12, 31, 23, 59, 59, 999999)]),
)
LEAVES = st.one_of(
    st.none(), st.booleans(),
    st.integers(-2**31, 2**31 - 1), st.integers(-2**63, 2**63 - 1), st.integers(-2**70, 2**70),
    st.integers(-2**70, 2**70).map(Int64), st.floats(), TEXT, st.binary(max_size=20),
    st.builds(Binary, st.binary(max_size=20), st.sampled_from([0, 1, 2, 3, 4, 5, 6, 8, 9, 128, 255])),
    st.builds(Binary, st.binary(min_size=16, max_size=16), st.sampled_from([3, 4])),
    st.binary(min_size=12, max_size=12).map(ObjectId), DATETIMES,
    st.integers(-2**63, 2**63 - 1).map(DatetimeMS),
    st.builds(Timestamp, st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1)),
    st.binary(min_size=16, max_size=16).map(Decimal128.from_bid),
    st.builds(Regex, TEXT, st.one_of(st.integers(0, 2**70), st.sampled_from(["", "imsx", "xsmi", "qz"]))),
    st.sampled_from([re.compile("a.c", re.I | re.M), re.compile(b"x+"), re.compile("", re.X | re.S)]),
    st.builds(Code, TEXT), st.just(MinKey()), st.just(MaxKey()), st.builds(Symbol, TEXT),
    st.builds(DBPointer, TEXT, st.binary(min_size=12, max_size=12).map(ObjectId)), st.just(UNDEFINED),
    st.uuids(), st.integers().map(MyInt), TEXT.map(MyStr), st.floats().map(MyFloat),
    st.binary(min_size=12, max_size=12).map(MyObjectId), st.binary(max_size=8).map(bytearray),
    st.just(Money(7)), st.just(complex(1, 2)),
)


def _containers(children: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(
        st.lists(children, max_size=5),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(KEYS, children, max_size=5),
        st.dictionaries(KEYS, children, max_size=3).map(collections.OrderedDict),
        st.builds(Code, TEXT, st.dictionaries(KEYS, children, max_size=3)),
        st.builds(DBRef, TEXT, children, st.one_of(st.none(), TEXT)),
        st.dictionaries(KEYS, children, max_size=3).map(lambda d: RawBSONDocument(codec._py_encode(d))
                                                        if _encodable(d) else d),
    )


def _encodable(doc: dict) -> bool:
    with pure_python():
        try:
            codec._py_encode(doc)
            return True
        except Exception:  # noqa: BLE001
            return False


VALUES = st.recursive(LEAVES, _containers, max_leaves=25)
DOCUMENTS = st.dictionaries(KEYS, VALUES, max_size=8)
ENCODE_OPTIONS = st.builds(
    lambda rep, registry: CodecOptions(uuid_representation=rep, type_registry=registry),
    st.sampled_from(ALL_UUID_REPRESENTATIONS), st.sampled_from(REGISTRIES))
DECODE_OPTIONS = st.builds(
    lambda doc_class, tz_aware, tzinfo, rep, handler, conversion, registry: CodecOptions(
        document_class=doc_class, tz_aware=tz_aware, tzinfo=tzinfo if tz_aware else None,
        uuid_representation=rep, unicode_decode_error_handler=handler, datetime_conversion=conversion,
        type_registry=registry),
    st.sampled_from([dict, collections.OrderedDict, OrderedDoc, PlainDoc, RawBSONDocument]),
    st.booleans(), st.one_of(st.none(), OFFSETS), st.sampled_from(ALL_UUID_REPRESENTATIONS),
    st.sampled_from(HANDLERS), st.sampled_from(list(DatetimeConversion)), st.sampled_from(REGISTRIES),
)
ENCODING = CodecOptions(uuid_representation=UuidRepresentation.STANDARD, type_registry=REGISTRIES[3])


def _pure_encode(doc: Any) -> bytes:
    with pure_python():
        try:
            return codec._py_encode(doc, False, ENCODING)
        except Exception:  # noqa: BLE001
            assume(False)
            raise


FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                         HealthCheck.data_too_large])


# -- encoding ---------------------------------------------------------------------------------------------

@needs_c
@FUZZ
@given(DOCUMENTS, st.booleans(), ENCODE_OPTIONS)
def test_encode_matches_python(doc: dict, check_keys: bool, opts: CodecOptions) -> None:
    compare_encode(doc, check_keys, opts)


@needs_c
@FUZZ
@given(st.one_of(st.dictionaries(KEYS, VALUES, max_size=4).map(collections.OrderedDict),
                 st.dictionaries(KEYS, VALUES, max_size=4).map(lambda d: _fill(PlainDoc(), d)),
                 st.lists(VALUES, max_size=2), st.just(None), st.just("text")),
       st.booleans())
def test_encode_top_level_mappings_and_non_mappings(doc: Any, check_keys: bool) -> None:
    compare_encode(doc, check_keys, ENCODING)


def _fill(target: Any, source: dict) -> Any:
    for key, value in source.items():
        target[key] = value
    return target


@needs_c
@pytest.mark.parametrize("top_level", [True, False])
@pytest.mark.parametrize("depth", [0, 1, MAX_NESTING_DEPTH - 1, MAX_NESTING_DEPTH, MAX_NESTING_DEPTH + 1])
def test_encode_document_signature(top_level: bool, depth: int) -> None:
    doc = {"a": 1, "_id": 2, "sub": {"x": [1]}}
    c_result = outcome(C_ENCODE_DOCUMENT, doc, False, ENCODING, top_level, depth)
    py_result = py_outcome(encoder._py_encode_document, doc, False, ENCODING, top_level, depth)
    assert_same_outcome(c_result, py_result)
    assert_same_outcome(outcome(C_ENCODE_DOCUMENT, doc, check_keys=True, opts=ENCODING, depth=depth),
                        py_outcome(encoder._py_encode_document, doc, check_keys=True, opts=ENCODING, depth=depth))


@needs_c
def test_encode_errors_match() -> None:
    cases = [
        {"$bad": 1}, {"a.b": 1}, {"a\x00b": 1}, {1: 1}, {("t",): 1}, {"s": "\ud800"}, {"\udcff": 1},
        {"big": 2**64}, {"big": -(2**63) - 1}, {"i": Int64(2**63)}, {"l": [Int64(2**63)]}, {"_id": Int64(-2**64)},
        {"x": 1, "_id": 2**65}, {"r": Regex("a\x00")}, {"r": Regex("\ud800")}, {"c": Code("\ud800")},
        {"c": Code("f", {"$bad": 1})}, {"u": uuid.UUID(int=5)}, {"o": object()}, {"m": Money(1)},
        {"sym": Symbol("\ud800")}, {"p": DBPointer("\ud800", ObjectId(b"x" * 12))},
    ]
    for check_keys in (False, True):
        for doc in cases:
            compare_encode(doc, check_keys)
            compare_encode(doc, check_keys, CodecOptions(type_registry=REGISTRIES[3]))
            compare_encode({"nested": [doc]}, check_keys)
    compare_encode({"a": 1}, False, "not options")
    compare_encode({"a": 1}, False, {})


@needs_c
def test_encode_survives_a_document_mutated_while_encoding() -> None:
    doc: dict = {}

    def mutate(value: Any) -> int:
        doc.pop("z", None)
        doc["new"] = 1
        return 1

    opts = CodecOptions(type_registry=TypeRegistry(fallback_encoder=mutate))
    for build in (lambda: {"a": object(), "z": 1}, lambda: {"_id": 1, "a": object(), "z": 2},
                  lambda: {"a": 1, "_id": object(), "z": 2}, lambda: {"a": [object(), 2], "z": 1}):
        doc.clear()
        doc.update(build())
        c_result = outcome(C_ENCODE, doc, False, opts)
        doc.clear()
        doc.update(build())
        assert_same_outcome(c_result, py_outcome(codec._py_encode, doc, False, opts))


@contextlib.contextmanager
def python_stack(limit: int = 6000) -> Iterator[None]:
    """Room for the pure encoder to reach its own depth check: a list inside a list costs it three
    interpreter frames per level, so near MAX_NESTING_DEPTH it would otherwise stop at the recursion
    limit first (still InvalidDocument, but "nests too deeply"); the C encoder has no such limit."""
    saved = sys.getrecursionlimit()
    sys.setrecursionlimit(max(saved, limit))
    try:
        yield
    finally:
        sys.setrecursionlimit(saved)


@needs_c
def test_encode_nesting_limits_match() -> None:
    for depth in range(MAX_NESTING_DEPTH - 2, MAX_NESTING_DEPTH + 3):
        for container in ("dict", "list", "dict/list", "scope"):
            doc: Any = {"leaf": 1}
            for _ in range(depth):
                if container == "dict":
                    doc = {"d": doc}
                elif container == "list":
                    doc = [doc]
                elif container == "dict/list":
                    doc = {"w": [doc]}
                else:
                    doc = {"w": Code("f", doc)}
            with python_stack():
                compare_encode(doc if isinstance(doc, dict) else {"top": doc})
    cycle: dict = {}
    cycle["self"] = cycle
    loop: list = []
    loop.append(loop)
    with python_stack():
        compare_encode(cycle)
        compare_encode({"loop": loop})
    # With the default stack the pure path may stop earlier, but it is the same error class.
    assert outcome(C_ENCODE, {"loop": loop})[1] is py_outcome(codec._py_encode, {"loop": loop})[1] is InvalidDocument


# -- decoding ---------------------------------------------------------------------------------------------

@needs_c
@FUZZ
@given(DOCUMENTS, DECODE_OPTIONS)
def test_decode_matches_python(doc: dict, opts: CodecOptions) -> None:
    compare_decode(_pure_encode(doc), opts)


@needs_c
@FUZZ
@given(DOCUMENTS, DECODE_OPTIONS, st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1,
                                           max_size=4))
def test_decode_of_mutated_documents_matches_python(doc: dict, opts: CodecOptions, mutations: list) -> None:
    data = bytearray(_pure_encode(doc))
    for offset, byte in mutations:
        data[offset % len(data)] = byte
    result = compare_decode(bytes(data), opts)
    if result[0] == "error" and opts.unicode_decode_error_handler == "strict" and opts.type_registry is REGISTRIES[0]:
        assert result[1] is InvalidBSON


@needs_c
@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200))
def test_decode_of_random_bytes_matches_python(data: bytes) -> None:
    result = compare_decode(data)
    assert result[0] == "value" or result[1] is InvalidBSON


@needs_c
@settings(max_examples=1000, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(MALFORMED_SAMPLE) - 1), st.integers(0, 255)), min_size=1, max_size=6))
def test_malformed_corpus_mutations_match_python(mutations: list) -> None:
    data = bytearray(MALFORMED_SAMPLE)
    for offset, byte in mutations:
        data[offset] = byte
    result = compare_decode(bytes(data))
    assert result[0] == "value" or result[1] is InvalidBSON


@needs_c
def test_malformed_corpus_sweep_and_truncations_match_python() -> None:
    rng = random.Random(4321)
    opts = CodecOptions(tz_aware=True, uuid_representation=UuidRepresentation.STANDARD)
    for offset in range(len(MALFORMED_SAMPLE)):
        for byte in (0x00, 0x01, 0x7F, 0x80, 0xFF, rng.randrange(256)):
            data = bytearray(MALFORMED_SAMPLE)
            data[offset] = byte
            for options in (None, opts):
                result = compare_decode(bytes(data), options)
                assert result[0] == "value" or result[1] is InvalidBSON
    for cut in range(len(MALFORMED_SAMPLE) + 1):
        assert compare_decode(MALFORMED_SAMPLE[:cut])[1] is InvalidBSON or cut == len(MALFORMED_SAMPLE)


def _corpus_cases() -> list[tuple[str, bytes]]:
    files = spec_files("bson-corpus/tests")
    if not files:
        if in_ci():
            pytest.fail("bson-corpus spec data is missing")
        pytest.skip("bson-corpus spec data is not on disk")
    cases = []
    for path in files:
        data = load_json(path)
        for kind in ("valid", "decodeErrors"):
            for case in data.get(kind, []):
                for field in ("canonical_bson", "degenerate_bson", "bson"):
                    if field in case:
                        cases.append((f"{path.name}:{case['description']}", bytes.fromhex(case[field])))
    return cases


CORPUS_OPTIONS = [
    None,
    CodecOptions(tz_aware=True, datetime_conversion=DatetimeConversion.DATETIME_AUTO),
    CodecOptions(datetime_conversion=DatetimeConversion.DATETIME_MS, uuid_representation=UuidRepresentation.STANDARD),
    CodecOptions(datetime_conversion=DatetimeConversion.DATETIME_CLAMP, tz_aware=True,
                 tzinfo=datetime.timezone(datetime.timedelta(hours=-5)),
                 uuid_representation=UuidRepresentation.JAVA_LEGACY),
    CodecOptions(document_class=PlainDoc, unicode_decode_error_handler="replace",
                 uuid_representation=UuidRepresentation.CSHARP_LEGACY),
    CodecOptions(document_class=RawBSONDocument, uuid_representation=UuidRepresentation.PYTHON_LEGACY),
    CodecOptions(type_registry=REGISTRIES[2], unicode_decode_error_handler="surrogateescape"),
]


@needs_c
def test_bson_corpus_decodes_identically() -> None:
    cases = _corpus_cases()
    assert cases
    for description, data in cases:
        for opts in CORPUS_OPTIONS:
            try:
                compare_decode(data, opts)
            except AssertionError as exc:
                raise AssertionError(f"{description} with {opts}: {exc}") from None
        assert_same_outcome(outcome(bson.is_valid, data), py_outcome(codec.is_valid, data))


@needs_c
def test_decode_nesting_limits_match() -> None:
    for depth in range(MAX_NESTING_DEPTH - 2, MAX_NESTING_DEPTH + 3):
        for kind in (0x03, 0x04):
            data = b"\x05\x00\x00\x00\x00"
            for _ in range(depth):
                body = bytes([kind]) + b"0\x00" + data + b"\x00"
                data = struct.pack("<i", len(body) + 4) + body
            with python_stack():  # for the pure decoder (two frames per array level) and assert_same
                compare_decode(data)
                compare_decode(data, CodecOptions(document_class=PlainDoc))


@needs_c
def test_decode_document_signature_and_raw_inflation() -> None:
    data = _pure_encode({"a": {"b": [1, {"c": 2}]}, "s": "x", "ref": {"$ref": "c", "$id": 1}})
    raw_opts = CodecOptions(document_class=RawBSONDocument)
    for opts in (CodecOptions(), raw_opts):
        for depth in (-1, 0, 1, MAX_NESTING_DEPTH, MAX_NESTING_DEPTH + 1):
            assert_same_outcome(outcome(C_DECODE_DOCUMENT, data, 0, len(data), opts, depth),
                                py_outcome(decoder._py_decode_document, data, 0, len(data), opts, depth))
    for args in ((data, 0, len(data) + 5, CodecOptions()), (data, 3, 1, CodecOptions()),
                 (bytearray(data), 0, len(data), CodecOptions()), (data, 0, len(data), None),
                 (data, -4, len(data), CodecOptions())):
        assert_same_outcome(outcome(C_DECODE_DOCUMENT, *args), py_outcome(decoder._py_decode_document, *args))
    c_inflated = dict(RawBSONDocument(data).items())  # RawBSONDocument inflates through decode_document
    with pure_python():
        py_inflated = dict(RawBSONDocument(data).items())
    assert_same(c_inflated, py_inflated)
    assert type(c_inflated["a"]) is RawBSONDocument


@needs_c
def test_decode_entry_points_match() -> None:
    stream = MALFORMED_SAMPLE + _pure_encode({"a": 1}) + MALFORMED_SAMPLE[:-3]
    for data in (stream, bytearray(stream), memoryview(stream), stream[:len(MALFORMED_SAMPLE)], "text", 5, None):
        assert_same_outcome(outcome(C_DECODE_ALL, data), py_outcome(codec._py_decode_all, data))
        assert_same_outcome(outcome(C_DECODE, data), py_outcome(codec._py_decode, data))
        assert_same_outcome(outcome(lambda d: list(bson.decode_iter(d)), data),
                            py_outcome(lambda d: list(codec.decode_iter(d)), data))
    for opts in ("nope", {}, 1):
        assert_same_outcome(outcome(C_DECODE, MALFORMED_SAMPLE, opts),
                            py_outcome(codec._py_decode, MALFORMED_SAMPLE, opts))
    assert C_DECODE(MALFORMED_SAMPLE, codec_options=CodecOptions()) == bson.decode(MALFORMED_SAMPLE)


@needs_c
@pytest.mark.parametrize("handler", HANDLERS + ["no-such-handler"])
def test_invalid_utf8_under_every_handler(handler: str) -> None:
    opts = CodecOptions(unicode_decode_error_handler=handler)
    base = _pure_encode({"k": "xx", "arr": ["yy"], "code": Code("zz"), "sym": Symbol("ww"),
                         "cws": Code("vv", {"q": "uu"}), "re": Regex("tt", "i"),
                         "ptr": DBPointer("ss", ObjectId(b"o" * 12))})
    for text in (b"xx", b"yy", b"zz", b"ww", b"vv", b"uu", b"tt", b"ss", b"k\x00", b"arr"):
        for bad in (b"\xff\xfe", b"\xc3(", b"\xed\xa0"):
            compare_decode(base.replace(text, bad[:len(text)]), opts)


# -- reference counts and memory ---------------------------------------------------------------------

def _rich_document() -> dict:
    return {
        "_id": ObjectId(b"0123456789ab"), "s": "some text", "u": "unicode ✓", "i": 2**20, "l": Int64(2**40),
        "d": 3.25, "t": True, "n": None, "dt": datetime.datetime(2024, 5, 6, 7, 8, 9, 123000),
        "bin": Binary(b"\x01\x02\x03", 0x80), "old": Binary(b"abc", 2), "b": b"raw bytes",
        "uuid": uuid.UUID(int=2**100), "oid": ObjectId(b"abcdefghijkl"), "ts": Timestamp(2**31 + 5, 2**31 + 6),
        "dec": Decimal128("12345.6789"), "re": Regex("^a.c$", "imx"), "code": Code("f()"),
        "cws": Code("g()", {"v": [1, 2]}), "min": MinKey(), "max": MaxKey(), "sym": Symbol("sym"),
        "ptr": DBPointer("db.c", ObjectId(b"ABCDEFGHIJKL")), "ref": DBRef("c", 5, "db", extra=1),
        "undef": UNDEFINED, "dtms": DatetimeMS(2**62), "arr": [1, "two", 3.5, {"x": [[], {}]}, Int64(9)],
        "nested": {"a": {"b": {"c": ["deep", {"e": b"f"}]}}}, "tuple": (1, 2),
        "big_array": list(range(50)),
    }


RICH_OPTIONS = CodecOptions(uuid_representation=UuidRepresentation.STANDARD,
                            datetime_conversion=DatetimeConversion.DATETIME_AUTO, tz_aware=True)


def _walk(value: Any) -> Iterator[Any]:
    yield value
    if isinstance(value, dict):
        for item in value.values():
            yield from _walk(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _walk(item)
    elif isinstance(value, Code) and value.scope is not None:
        yield from _walk(value.scope)


#: Statically allocated objects carry counts near 10**9 on Python 3.11+.
_STATIC = 10**8


def _shared(obj: Any) -> bool:
    """Objects the interpreter shares (small ints, None, one-character str/bytes, ...): their counts
    move whenever anything anywhere refers to them, so they say nothing about leaks."""
    return (sys.getrefcount(obj) > _STATIC or obj is None or type(obj) is bool
            or (type(obj) is int and -5 <= obj <= 256) or (type(obj) in (str, bytes, tuple) and len(obj) <= 1))
_FRESH_TYPES = (dict, list, float, Int64, ObjectId, Binary, datetime.datetime, Timestamp, Decimal128, Regex, Code,
                DBRef, uuid.UUID, MinKey, MaxKey, Symbol, DBPointer, DatetimeMS)


@needs_c
def test_reference_counts_of_decoded_values() -> None:
    data = C_ENCODE(_rich_document(), False, RICH_OPTIONS)
    doc = C_DECODE(data, RICH_OPTIONS)
    assert sys.getrefcount(doc) == 2
    checked = 0
    for container in _walk(doc):
        values = container.values() if isinstance(container, dict) else container if isinstance(container, list) else ()
        for value in values:
            if _shared(value):
                continue
            if isinstance(value, _FRESH_TYPES) or type(value) in (str, bytes):
                # one reference from the container, one from ``value``, one from the call's argument
                assert sys.getrefcount(value) == 3, (value, sys.getrefcount(value))
                checked += 1
    assert checked > 30
    # What the C code stores in __slots__: one reference from the slot, one from the call's argument
    # (counted outside ``assert``: pytest's rewriting would hold the sub-expression in a temporary).
    slot_counts = [sys.getrefcount(doc["_id"].binary), sys.getrefcount(doc["dec"].bid),
                   sys.getrefcount(doc["ts"].time), sys.getrefcount(doc["ts"].inc),
                   sys.getrefcount(doc["cws"].scope), sys.getrefcount(doc["re"].pattern),
                   sys.getrefcount(doc["oid"].binary), sys.getrefcount(doc["ptr"].id.binary)]
    assert slot_counts == [2] * len(slot_counts)


@needs_c
def test_reference_counts_unchanged_by_many_calls() -> None:
    source = _rich_document()
    data = C_ENCODE(source, False, RICH_OPTIONS)
    bad = data[:40] + b"\xff" + data[41:]
    tracked = [data, bad, RICH_OPTIONS, *list(_walk(source))]
    tracked += [ObjectId, Int64, Binary, Code, Regex, Timestamp, Decimal128, DBRef, MinKey, MaxKey, dict, list]
    tracked = [obj for obj in tracked if not _shared(obj)]
    for _ in range(100):  # warm caches (interned names, type attribute caches)
        C_DECODE(data, RICH_OPTIONS)
        C_ENCODE(source, True, RICH_OPTIONS)
    gc.collect()
    before = [sys.getrefcount(obj) for obj in tracked]
    for _ in range(1000):
        C_DECODE(data, RICH_OPTIONS)
        C_ENCODE(source, False, RICH_OPTIONS)
        C_DECODE_ALL(data + data, RICH_OPTIONS)
        outcome(C_DECODE, bad, RICH_OPTIONS)
        outcome(C_ENCODE, {"x": source, "bad": object()}, False, RICH_OPTIONS)
        outcome(C_ENCODE, {"x": source, "$bad": 1}, True, RICH_OPTIONS)
    gc.collect()
    after = [sys.getrefcount(obj) for obj in tracked]
    assert [(repr(obj)[:60], b, a) for obj, b, a in zip(tracked, before, after) if b != a] == []


def _rss_kb() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


@needs_c
@pytest.mark.slow
@pytest.mark.one_pass  # pure codec: no gevent I/O
def test_no_memory_growth_over_100k_calls() -> None:
    source = _rich_document()
    data = C_ENCODE(source, False, RICH_OPTIONS)
    bad = [data[:cut] for cut in range(0, len(data), 97)] + [data.replace(b"some text", b"some \xfftxt")]

    def work(rounds: int) -> None:
        for i in range(rounds):
            C_DECODE(data, RICH_OPTIONS)
            C_ENCODE(source, False, RICH_OPTIONS)
            if i % 10 == 0:
                outcome(C_DECODE, bad[i % len(bad)], RICH_OPTIONS)
                outcome(C_ENCODE, {"x": source, "$bad": object()}, True, RICH_OPTIONS)

    work(2000)
    gc.collect()
    rss_before = _rss_kb()
    tracemalloc.start()
    try:
        work(5000)  # settle tracemalloc's own bookkeeping
        gc.collect()
        traced_before = tracemalloc.get_traced_memory()[0]
        work(100_000)
        gc.collect()
        traced_growth = tracemalloc.get_traced_memory()[0] - traced_before
    finally:
        tracemalloc.stop()
    rss_growth = _rss_kb() - rss_before
    # One leaked object per call would be several megabytes here.
    assert traced_growth < 64 * 1024, traced_growth
    assert rss_growth < 16 * 1024, rss_growth


@needs_c
def test_rich_document_round_trips_identically() -> None:
    source = _rich_document()
    for opts in (RICH_OPTIONS, RICH_OPTIONS.with_options(tz_aware=False), RICH_OPTIONS.with_options(
            document_class=PlainDoc, uuid_representation=UuidRepresentation.JAVA_LEGACY)):
        for check_keys in (False, True):
            data = compare_encode(source, check_keys, opts)[1]
            compare_decode(data, opts)
