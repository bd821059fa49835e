"""greenmongo.bson against PyMongo 4.20's ``bson``: every public module, name and signature, and behaviour.

``install_as_pymongo()`` serves greenmongo.bson as ``bson``, so code written for PyMongo must find
every module and name it imports there, call it with PyMongo's arguments and see PyMongo's
behaviour. The real ``bson`` (installed with the test extras) is imported here as the reference
(greenmongo itself never imports it); the API checks skip without it, the behaviour tests of
greenmongo's own semantics do not.

Where greenmongo differs on purpose, the difference is listed in ``DELIBERATE_DIFFERENCES`` with its
reason, and a test shows it is real (so the list cannot go stale).
"""

from __future__ import annotations

import __future__

import array
import copy
import datetime
import decimal
import importlib
import inspect
import io
import itertools
import json
import mmap
import pickle
import pkgutil
import re
import sys
import typing
import uuid
import warnings
from collections import OrderedDict
from types import ModuleType
from typing import Any, Iterator

import pytest

import greenmongo.bson as gbson
from greenmongo.bson import codec, json_util
from greenmongo.bson.codec_options import DEFAULT_CODEC_OPTIONS, CodecOptions, TypeRegistry
from greenmongo.bson.raw_bson import DEFAULT_RAW_BSON_OPTIONS, RawBSONDocument
from greenmongo.bson.son import SON
from greenmongo.bson.tz_util import FixedOffset, utc
from greenmongo.errors import InvalidDocument, PyMongoError
from tests.api_compare import class_methods, incompatibilities, signature, signature_problems

pytestmark = pytest.mark.one_pass

#: What greenmongo.bson does differently from PyMongo's bson on purpose, and why. Each key is used
#: by a test below that shows the difference (or fails when it disappears).
DELIBERATE_DIFFERENCES: dict[str, str] = {
    "deprecated-types": "symbol, undefined and DBPointer decode to greenmongo's Symbol, UNDEFINED and DBPointer and "
                        "re-encode byte for byte; PyMongo maps them lossily to str, None and DBRef",
    "bson-error-base": "BSONError derives from PyMongoError: greenmongo has one exception hierarchy "
                       "(PyMongo's BSONError derives from Exception only)",
    "tz-util-utc": "tz_util.utc is datetime.timezone.utc (PyMongo: FixedOffset(0, 'UTC')); it is the tzinfo of "
                   "decoded tz-aware datetimes in both, so `dt.tzinfo is bson.tz_util.utc` holds either way",
    "int64-repr": "repr(Int64(7)) is 'Int64(7)' (PyMongo: '7'); str() and format() give the number, as PyMongo's",
    "regex-flags": "Regex.flags is a plain int, so the repr shows a number (PyMongo: a re.RegexFlag)",
    "raw-bytes": "RawBSONDocument.raw is always bytes (PyMongo 4.18+ may hand out memoryview slices of 4 KiB+ "
                 "documents); bytes(doc.raw) is the same either way",
    "invalid-document-message": "InvalidDocument messages are greenmongo's own, without PyMongo's 'Invalid document: ' "
                                "prefix; InvalidDocument.document is set as PyMongo sets it",
    "any-buffer": "is_valid accepts any bytes-like buffer (PyMongo: bytes only, else TypeError); decode and friends "
                  "accept the same buffers as PyMongo's",
    "bytearray-binary": "a bytearray/memoryview value encodes as Binary subtype 0 (PyMongo refuses it), and "
                        "json_util writes it as $binary to match (PyMongo writes a list of ints)",
    "json-uuid-text": "strict_uuid=False writes {'$uuid': <hyphenated text>}, the Extended JSON spec's form "
                      "(PyMongo: 32 hex digits)",
    "json-date-utc": "relaxed $date strings are written in UTC ('Z'); PyMongo keeps the value's own offset "
                     "(both are RFC 3339, the same instant)",
    "json-int64-range": "an int outside 64 bits raises OverflowError in RELAXED/CANONICAL (no BSON type holds it); "
                        "PyMongo writes the bare number",
    "json-legacy-nonfinite": "LEGACY mode writes NaN/Infinity as $numberDouble; PyMongo writes bare NaN, "
                             "which is not JSON",
    "json-type-registry": "json_util honours a JSONOptions type_registry (encoders and fallback_encoder); "
                          "PyMongo's json_util ignores it",
    "json-relaxed-strict-uuid": "JSONOptions(json_mode=RELAXED, strict_uuid=False) is accepted and writes $uuid; "
                                "PyMongo refuses the combination",
    "vector-padding-bits": "decoding a PACKED_BIT vector whose ignored bits are set raises ValueError (the vector "
                           "spec); PyMongo 4 only warns (DeprecationWarning)",
    "get-size-estimates": "json_util.get_size has PyMongo's contract (an Extended JSON size estimate that stops "
                          "at max_size) with greenmongo's own estimates",
}

#: Signature differences kept: greenmongo accepts every call PyMongo's signature accepts.
SIGNATURE_DIFFERENCES: dict[str, str] = {
    "encode": "codec_options defaults to None, meaning DEFAULT_CODEC_OPTIONS (PyMongo's default object)",
    "DatetimeMS.as_datetime": "codec_options defaults to None, meaning DEFAULT_CODEC_OPTIONS (codec_options "
                              "imports datetime_ms, so its default object cannot be named there)",
}

#: Names PyMongo's modules have only because they import them from the standard library or typing
#: (``from typing import Any``): not bson API. Found by identity with the standard library object.
_THIRD_PARTY_ROOTS = {"typing_extensions"}


def _reference_bson() -> ModuleType:
    real = pytest.importorskip("bson")
    if real.__name__ != "bson" or not hasattr(real, "_cbson") and not hasattr(real, "_dict_to_bson"):
        pytest.skip("the importable bson is not PyMongo's (install_as_pymongo() active in this process?)")
    return real


@pytest.fixture(scope="module")
def pm() -> ModuleType:
    return _reference_bson()


def _pymongo_module_names(pm: ModuleType) -> list[str]:
    return sorted(info.name for info in pkgutil.iter_modules(pm.__path__) if not info.name.startswith("_"))


def _stdlib_import(name: str, obj: Any) -> bool:
    """``obj`` is PyMongo's import of a standard library (or typing_extensions) object, not a bson name."""
    if isinstance(obj, ModuleType):
        return True
    if isinstance(obj, __future__._Feature):  # from __future__ import annotations
        return True
    if name == "TYPE_CHECKING":
        return obj is typing.TYPE_CHECKING
    home = getattr(obj, "__module__", None)
    if not isinstance(home, str) or home.startswith("bson"):
        return False
    root = home.partition(".")[0]
    if root not in sys.stdlib_module_names and root not in _THIRD_PARTY_ROOTS:
        return False
    return getattr(importlib.import_module(home), name, None) is obj


def _public_names(module: ModuleType) -> set[str]:
    return {name for name in vars(module) if not name.startswith("_")} | set(getattr(module, "__all__", ()))


_CLASS_REPR = re.compile(r"<class '(?:[\w.]+\.)?(\w+)'>")
_SCALARS = (int, float, str, bytes, bool, type(None), datetime.datetime)


def _same_value(theirs: Any, mine: Any) -> bool:
    """Constants compare equal: scalars and tuples of them by value, option tuples by repr."""
    if type(theirs) in _SCALARS:
        return theirs == mine
    if type(theirs) in (tuple, frozenset) and all(type(item) in _SCALARS for item in theirs):
        return theirs == mine
    if isinstance(theirs, tuple):  # CodecOptions / JSONOptions presets: classes by name, not module
        return _CLASS_REPR.sub(r"\1", repr(theirs)) == _CLASS_REPR.sub(r"\1", repr(mine))
    return True


# =============================================================================
# The API surface
# =============================================================================

def test_every_public_module_exists(pm: ModuleType) -> None:
    names = _pymongo_module_names(pm)
    assert {"son", "raw_bson", "json_util", "errors", "tz_util", "typings", "min_key", "max_key"} <= set(names)
    missing = []
    for name in names:
        try:
            importlib.import_module(f"greenmongo.bson.{name}")
        except ImportError:
            missing.append(name)
    assert missing == []


def test_import_bson_exposes_the_same_submodules(pm: ModuleType) -> None:
    # PyMongo's ``import bson`` loads some submodules, so ``bson.errors.InvalidId`` works without an import.
    exposed = {name for name in _pymongo_module_names(pm) if isinstance(getattr(pm, name, None), ModuleType)}
    assert {"errors", "son", "objectid"} <= exposed
    assert {name for name in exposed if not isinstance(getattr(gbson, name, None), ModuleType)} == set()


def _module_pairs(pm: ModuleType) -> Iterator[tuple[str, ModuleType, ModuleType]]:
    yield "bson", pm, gbson
    for name in _pymongo_module_names(pm):
        yield (f"bson.{name}", importlib.import_module(f"bson.{name}"),
               importlib.import_module(f"greenmongo.bson.{name}"))


def test_every_public_name_exists(pm: ModuleType) -> None:
    """Every name PyMongo's modules define or re-export (not stdlib/typing imports), of the same kind."""
    missing, wrong_kind, wrong_value, checked = [], [], [], 0
    for label, pmod, gmod in _module_pairs(pm):
        for name in sorted(_public_names(pmod)):
            obj = getattr(pmod, name)
            if _stdlib_import(name, obj):
                continue
            checked += 1
            if not hasattr(gmod, name):
                missing.append(f"{label}.{name}")
                continue
            mine = getattr(gmod, name)
            if inspect.isclass(obj) != inspect.isclass(mine) or callable(obj) != callable(mine):
                wrong_kind.append(f"{label}.{name}")
            elif not inspect.isclass(obj) and not callable(obj) and not _same_value(obj, mine):
                wrong_value.append(f"{label}.{name}: {obj!r} != {mine!r}")
    assert checked > 150  # the comparison really ran over PyMongo's API (166 names in 4.20.1)
    assert missing == []
    assert wrong_kind == []
    assert wrong_value == []


def test_every_class_attribute_exists(pm: ModuleType) -> None:
    """Public methods, properties and class constants of PyMongo's classes (and their bson bases)."""
    missing, checked = [], 0  # (this is what finds a missing property such as InvalidDocument.document)
    for label, pmod, gmod in _module_pairs(pm):
        for name in sorted(_public_names(pmod)):
            theirs, mine = getattr(pmod, name), getattr(gmod, name, None)
            if not inspect.isclass(theirs) or _stdlib_import(name, theirs) or mine is None:
                continue
            for klass in theirs.__mro__:
                if not klass.__module__.startswith("bson"):
                    continue
                for attr in vars(klass):
                    if attr.startswith("_"):  # protocols (pickling, copying) are checked by behaviour below
                        continue
                    checked += 1
                    if not hasattr(mine, attr):
                        missing.append(f"{label}.{name}.{attr}")
    assert checked > 150
    assert sorted(set(missing)) == []


def test_all_lists_match(pm: ModuleType) -> None:
    for label, pmod, gmod in _module_pairs(pm):
        if hasattr(pmod, "__all__"):
            assert set(pmod.__all__) <= set(getattr(gmod, "__all__", _public_names(gmod))), label
    assert set(pm.__all__) <= set(gbson.__all__)


def test_every_deliberate_difference_is_shown_by_a_test() -> None:
    source = inspect.getsource(sys.modules[__name__])
    unused = [key for key in DELIBERATE_DIFFERENCES if source.count(f'DELIBERATE_DIFFERENCES["{key}"]') < 1]
    assert unused == []


def test_stdlib_imports_are_not_required() -> None:
    """The filter only drops standard library objects, never a bson-defined one."""
    assert _stdlib_import("Any", typing.Any) and _stdlib_import("UUID", uuid.UUID)
    assert _stdlib_import("TYPE_CHECKING", False) and _stdlib_import("annotations", __future__.annotations)
    assert not _stdlib_import("RE_TYPE", re.Pattern)  # PyMongo's alias for a stdlib type is a bson name
    assert not _stdlib_import("SON", SON) and not _stdlib_import("EPOCH_AWARE", gbson.EPOCH_AWARE)


# -- signatures (compared by tests/api_compare.py) ----------------------------------------

def _callables(pm: ModuleType) -> Iterator[tuple[str, Any, Any]]:
    seen: set[int] = set()
    for label, pmod, gmod in _module_pairs(pm):
        for name in sorted(_public_names(pmod)):
            obj, mine = getattr(pmod, name), getattr(gmod, name, None)
            if mine is None or _stdlib_import(name, obj) or id(obj) in seen:
                continue
            seen.add(id(obj))
            short = label.partition(".")[2]
            qualname = f"{short}.{name}" if short and short not in ("son",) and not inspect.isclass(obj) else name
            if inspect.isclass(obj):
                yield name, obj, mine
                yield from class_methods(name, obj, mine)
            elif callable(obj):
                yield qualname, obj, mine


def test_signatures_accept_pymongo_calls(pm: ModuleType) -> None:
    """Every public callable binds PyMongo's positional and keyword calls the same way."""
    problems, compared = signature_problems(_callables(pm), SIGNATURE_DIFFERENCES)
    assert compared > 90  # 98 callables in 4.20.1
    assert problems == {}


def test_signature_differences_are_still_real(pm: ModuleType) -> None:
    found = {qualname: incompatibilities(signature(theirs), signature(mine))
             for qualname, theirs, mine in _callables(pm) if qualname in SIGNATURE_DIFFERENCES}
    assert set(found) == set(SIGNATURE_DIFFERENCES)
    assert all(found.values()), found  # a listed difference that went away must leave the list


def test_incompatibility_checker_finds_breaks() -> None:
    def theirs(bson: bytes, flags: int = 0, *, mode: str = "a") -> None: ...

    def renamed(data: bytes, flags: int = 0, *, mode: str = "a") -> None: ...

    def no_default(bson: bytes, flags: int, *, mode: str = "a") -> None: ...

    def extra(bson: bytes, flags: int = 0, *, mode: str = "a", must: int) -> None: ...

    def fine(bson: bytes, flags: int = 0, *args: Any, mode: str = "a", **kwargs: Any) -> None: ...

    sig = inspect.signature
    assert incompatibilities(sig(theirs), sig(renamed)) == ["parameter 0 is 'data', not 'bson'"]
    assert incompatibilities(sig(theirs), sig(no_default)) == ["'flags' has no default"]
    assert incompatibilities(sig(theirs), sig(extra)) == ["extra required parameter 'must'"]
    assert incompatibilities(sig(theirs), sig(fine)) == []


# =============================================================================
# Behaviour: the top-level API
# =============================================================================

def test_type_bytes_and_constants(pm: ModuleType) -> None:
    for name in [n for n in pm.__all__ if n.startswith("BSON") and n != "BSON"]:
        assert getattr(gbson, name) == getattr(pm, name)
    encoded = gbson.encode({"a": 1.5, "b": "x"})
    assert encoded[4:5] == gbson.BSONNUM and encoded[4 + 3 + 8:4 + 3 + 8 + 1] == gbson.BSONSTR
    assert gbson.EPOCH_AWARE == pm.EPOCH_AWARE and gbson.EPOCH_NAIVE == pm.EPOCH_NAIVE
    assert gbson.EPOCH_AWARE.tzinfo is utc and gbson.EPOCH_NAIVE.tzinfo is None
    assert gbson.RE_TYPE is re.Pattern and gbson.ALL_UUID_SUBTYPES == (3, 4)


def test_bson_class_encodes_and_decodes(pm: ModuleType) -> None:
    document = {"_id": 1, "list": [1, {"x": None}], "s": "é"}
    data = gbson.BSON.encode(document)
    assert isinstance(data, gbson.BSON) and isinstance(data, bytes)
    assert bytes(data) == gbson.encode(document) == pm.BSON.encode(document)
    assert data.decode() == document
    ordered = data.decode(CodecOptions(document_class=SON))
    assert isinstance(ordered, SON) and list(ordered) == ["_id", "list", "s"]
    assert gbson.BSON(pm.BSON.encode(document)).decode() == document
    with pytest.raises(InvalidDocument):
        gbson.BSON.encode({"$bad": 1}, check_keys=True)
    with pytest.raises(TypeError):
        gbson.BSON.encode(document, codec_options={"tz_aware": True})


def test_gen_list_name_and_get_data_and_view(pm: ModuleType) -> None:
    assert list(itertools.islice(gbson.gen_list_name(), 1205)) == list(itertools.islice(pm.gen_list_name(), 1205))
    for value in (b"abc", bytearray(b"abc"), memoryview(b"abc"), array.array("B", b"abc")):
        data, view = gbson.get_data_and_view(value)
        their_data, their_view = pm.get_data_and_view(value)
        assert type(data) is type(their_data) and bytes(view) == bytes(their_view) == b"abc"
    kept = bytearray(b"xy")
    assert gbson.get_data_and_view(kept)[0] is kept  # bytes and bytearray are not copied


@pytest.mark.parametrize("path", ["c", "python"])
def test_decode_reads_any_buffer(path: str) -> None:
    decode = gbson.decode if path == "c" else codec._py_decode
    decode_all = gbson.decode_all if path == "c" else codec._py_decode_all
    if path == "c" and not gbson.has_c():
        pytest.skip("the C accelerator is not built")
    data = gbson.encode({"a": 1}) + gbson.encode({"b": 2})
    one = gbson.encode({"a": 1})
    with mmap.mmap(-1, len(one)) as mapped:
        mapped.write(one)
        assert decode(mapped) == {"a": 1}
    assert decode(array.array("B", one)) == {"a": 1}
    assert decode_all(array.array("B", data)) == [{"a": 1}, {"b": 2}]
    assert list(gbson.decode_iter(bytearray(data))) == [{"a": 1}, {"b": 2}]
    with pytest.raises(TypeError, match="bytes-like"):
        decode("not bytes")


def test_is_valid(pm: ModuleType) -> None:
    good, bad = gbson.encode({"a": 1}), gbson.encode({"a": 1})[:-1] + b"\x01"
    assert gbson.is_valid(bson=good) is pm.is_valid(good) is True
    assert gbson.is_valid(bad) is pm.is_valid(bad) is False
    with pytest.raises(TypeError):
        gbson.is_valid("text")
    # deliberate: any buffer is accepted where PyMongo raises TypeError
    assert DELIBERATE_DIFFERENCES["any-buffer"]
    assert gbson.is_valid(bytearray(good)) is True
    with pytest.raises(TypeError):
        pm.is_valid(bytearray(good))


@pytest.mark.parametrize("path", ["c", "python"])
def test_invalid_document_carries_the_document(path: str) -> None:
    encode = gbson.encode if path == "c" else codec._py_encode
    document = {"a": {"b": object()}}
    with pytest.raises(InvalidDocument) as caught:
        encode(document)
    assert caught.value.document is document
    with pytest.raises(InvalidDocument) as caught:
        encode({"$x": 1}, True)
    assert caught.value.document == {"$x": 1}
    assert InvalidDocument("why", {"k": 1}).document == {"k": 1} and InvalidDocument("why").document is None
    assert not InvalidDocument("why", {"k": 1}).error_labels
    assert DELIBERATE_DIFFERENCES["invalid-document-message"]
    assert str(caught.value) == "key '$x' must not start with '$'"  # PyMongo: "Invalid document: key ..."


def test_errors_module_is_the_driver_hierarchy(pm: ModuleType) -> None:
    from greenmongo import errors
    from greenmongo.bson import errors as bson_errors

    for name in ("BSONError", "InvalidBSON", "InvalidDocument", "InvalidId", "InvalidStringData"):
        assert getattr(bson_errors, name) is getattr(errors, name) is getattr(gbson.errors, name)
        mine, theirs = getattr(bson_errors, name), getattr(pm.errors, name)
        ours = [klass.__name__ for klass in mine.__mro__]
        chain = [klass.__name__ for klass in theirs.__mro__]
        assert [klass for klass in ours if klass in chain] == chain  # PyMongo's bases, in PyMongo's order
    assert DELIBERATE_DIFFERENCES["bson-error-base"]
    assert issubclass(bson_errors.BSONError, PyMongoError)
    assert not issubclass(pm.errors.BSONError, importlib.import_module("pymongo.errors").PyMongoError)


def test_uuid_under_unspecified_is_a_value_error(pm: ModuleType) -> None:
    value = uuid.UUID(int=1)
    with pytest.raises(ValueError) as theirs:
        pm.encode({"u": value})
    with pytest.raises(ValueError) as mine:
        gbson.encode({"u": value})
    assert "UNSPECIFIED" in str(theirs.value) and "UNSPECIFIED" in str(mine.value)
    for representation in (3, 4, 5, 6):
        assert gbson.encode({"u": value}, codec_options=CodecOptions(uuid_representation=representation)) == \
            pm.encode({"u": value}, codec_options=pm.CodecOptions(uuid_representation=representation))


def _element_doc(element: bytes) -> bytes:
    return (len(element) + 5).to_bytes(4, "little") + element + b"\x00"


def test_deprecated_types_round_trip(pm: ModuleType) -> None:
    assert DELIBERATE_DIFFERENCES["deprecated-types"]
    symbol = _element_doc(b"\x0ea\x00" + (2).to_bytes(4, "little") + b"x\x00")
    undefined = _element_doc(b"\x06a\x00")
    pointer = _element_doc(b"\x0ca\x00" + (4).to_bytes(4, "little") + b"a.b\x00" + bytes(12))
    mine = [gbson.decode(data)["a"] for data in (symbol, undefined, pointer)]
    assert [type(value) for value in mine] == [gbson.Symbol, gbson.Undefined, gbson.DBPointer]
    assert all(gbson.encode(gbson.decode(data)) == data for data in (symbol, undefined, pointer))
    theirs = [pm.decode(data)["a"] for data in (symbol, undefined, pointer)]
    assert [type(value).__name__ for value in theirs] == ["str", "NoneType", "DBRef"]


def test_bytearray_encodes_as_binary(pm: ModuleType) -> None:
    assert DELIBERATE_DIFFERENCES["bytearray-binary"]
    assert gbson.decode(gbson.encode({"b": bytearray(b"xy")})) == {"b": b"xy"}
    with pytest.raises(pm.errors.InvalidDocument):
        pm.encode({"b": bytearray(b"xy")})


def test_same_bytes_as_pymongo_for_every_shared_type(pm: ModuleType) -> None:
    def document(lib: Any, son: type) -> Any:
        return son([
            ("_id", lib.ObjectId("5f1e2d3c4b5a697887766554")), ("s", "x"), ("i", 5), ("l", lib.Int64(7)),
            ("big", 2**40), ("f", 1.5), ("b", True), ("n", None), ("d", datetime.datetime(2020, 1, 2, 3, 4, 5, 678000)),
            ("bin", lib.Binary(b"\x01\x02", 0x80)), ("by", b"ab"), ("code", lib.Code("x", {"a": 1})),
            ("re", lib.Regex("^a", "im")), ("pat", re.compile("ab", re.I)), ("ts", lib.Timestamp(1, 2)),
            ("dec", lib.Decimal128("1.10")), ("min", lib.MinKey()), ("max", lib.MaxKey()),
            ("ref", lib.DBRef("c", 1, "db", extra=2)), ("arr", [1, "a", {"x": 1}]), ("sub", son([("z", 1), ("a", 2)])),
            ("dms", lib.DatetimeMS(-5)), ("u", lib.Binary(uuid.UUID(int=5).bytes, 4))])

    mine, theirs = gbson.encode(document(gbson, SON)), pm.encode(document(pm, pm.son.SON))
    assert mine == theirs
    assert gbson.encode(gbson.decode(theirs)) == theirs


# =============================================================================
# SON
# =============================================================================

def _son_script(son_class: type) -> list:
    """The same operations on either library's SON; the observable results, as plain values."""
    out = []
    son = son_class([("b", 1), ("a", 2)], c=3)
    son["d"] = 4
    son["b"] = 10  # an existing key keeps its place
    out.append(list(son.items()))
    out.append(repr(son))
    out.append(son.values())
    out.append(son.popitem())  # the first pair
    out.append(son.pop("zz", "dflt"))
    out.append(son.setdefault("e", 5))
    out.append(son.setdefault("e", 6))
    out.append(son.get("missing"))
    son.update([("f", 6)])
    son.update({"g": 7}, h=8)
    son.update(OrderedDict(i=9))
    del son["c"]
    out.append(list(son))
    out.append(len(son))
    out.append(son == dict(reversed(list(son.items()))))  # order-insensitive against a dict
    out.append(son == son_class(reversed(list(son.items()))))  # order-sensitive against a SON
    out.append(son != son_class(son))
    out.append(type(son.copy()).__name__)
    nested = son_class([("x", son_class([("y", [son_class(z=1)])]))])
    out.append(nested.to_dict())
    out.append(type(nested.to_dict()["x"]["y"][0]).__name__)
    out.append(nested == {"x": {"y": [{"z": 1}]}})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out.append(son.has_key("a"))
        out.append(list(son.iterkeys()))
        out.append(list(son.itervalues()))
    out.append([w.category.__name__ for w in caught])
    empty = son_class()
    try:
        empty.popitem()
    except KeyError as exc:
        out.append(str(exc))
    try:
        son.pop("a", 1, 2)
    except TypeError as exc:
        out.append(type(exc).__name__)
    son.clear()
    out.append((len(son), list(son)))
    return out


def test_son_matches_pymongo(pm: ModuleType) -> None:
    assert _son_script(SON) == _son_script(pm.son.SON)


def test_son_semantics() -> None:
    son = SON([("b", 1), ("a", 2)])
    assert list(son) == ["b", "a"] and son.values() == [1, 2]
    assert son == {"a": 2, "b": 1} and {"a": 2, "b": 1} == son
    assert son != SON([("a", 2), ("b", 1)])
    assert son.popitem() == ("b", 1) and list(son) == ["a"]
    assert isinstance(son.copy(), SON) and son.copy() is not son
    with pytest.raises(TypeError):
        hash(son)
    assert SON[str, int] is not SON and SON[str, int]([("x", 1)]) == {"x": 1}  # generic, like PyMongo's


def test_son_deepcopy_and_pickle() -> None:
    pattern = re.compile("a+")
    inner = [1, 2]
    son = SON([("p", pattern), ("l", inner), ("s", SON(x=1))])
    son["self"] = son
    copied = copy.deepcopy(son)
    assert isinstance(copied, SON) and copied["self"] is copied  # cycles kept
    assert copied["p"] is pattern and copied["l"] == inner and copied["l"] is not inner
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        plain = SON([("b", 1), ("a", SON(z=1))])
        loaded = pickle.loads(pickle.dumps(plain, protocol))
        assert loaded == plain and list(loaded) == ["b", "a"] and isinstance(loaded["a"], SON)


@pytest.mark.parametrize("path", ["c", "python"])
def test_son_as_document_class(path: str) -> None:
    decode = gbson.decode if path == "c" else codec._py_decode
    data = gbson.encode(SON([("b", 1), ("a", {"y": 1, "x": 2}), ("l", [{"q": 1}])]))
    for document_class in (SON, SON[str, Any]):
        doc = decode(data, CodecOptions(document_class=document_class))
        assert isinstance(doc, SON) and list(doc) == ["b", "a", "l"]
        assert isinstance(doc["a"], SON) and list(doc["a"]) == ["y", "x"] and isinstance(doc["l"][0], SON)
    assert type(decode(data, CodecOptions(document_class=dict[str, Any]))) is dict
    with pytest.raises(TypeError, match="MutableMapping"):
        CodecOptions(document_class=typing.Mapping)


# =============================================================================
# tz_util
# =============================================================================

def test_fixed_offset_matches_pymongo(pm: ModuleType) -> None:
    from bson import tz_util as theirs

    for offset in (90, -300, datetime.timedelta(hours=5, minutes=30), 0.5):
        mine, ref = FixedOffset(offset, "X"), theirs.FixedOffset(offset, "X")
        moment = datetime.datetime(2020, 5, 1, 12)
        assert mine.utcoffset(moment) == ref.utcoffset(moment) and mine.dst(moment) == ref.dst(moment)
        assert mine.tzname(None) == "X" and repr(mine) == repr(ref)
        assert moment.replace(tzinfo=mine).isoformat() == moment.replace(tzinfo=ref).isoformat()
        for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
            loaded = pickle.loads(pickle.dumps(mine, protocol))
            assert loaded.utcoffset(None) == mine.utcoffset(None) and loaded.tzname(None) == "X"
        assert copy.deepcopy(mine).utcoffset(None) == mine.utcoffset(None)


@pytest.mark.parametrize("path", ["c", "python"])
def test_decoded_datetimes_carry_tz_util_utc(path: str, pm: ModuleType) -> None:
    decode = gbson.decode if path == "c" else codec._py_decode
    data = gbson.encode({"d": datetime.datetime(2020, 1, 1, 12)})
    value = decode(data, CodecOptions(tz_aware=True))["d"]
    assert value.tzinfo is utc  # as PyMongo's decoded value's tzinfo is its bson.tz_util.utc
    assert pm.decode(data, pm.CodecOptions(tz_aware=True))["d"].tzinfo is pm.tz_util.utc
    assert value == pm.decode(data, pm.CodecOptions(tz_aware=True))["d"]
    assert DELIBERATE_DIFFERENCES["tz-util-utc"]
    assert utc is datetime.timezone.utc and not isinstance(pm.tz_util.utc, datetime.timezone)
    shifted = decode(data, CodecOptions(tz_aware=True, tzinfo=FixedOffset(60, "plus1")))["d"]
    assert shifted.hour == 13 and shifted.tzname() == "plus1"


# =============================================================================
# raw_bson
# =============================================================================

def test_raw_bson_document() -> None:
    assert DEFAULT_RAW_BSON_OPTIONS.document_class is RawBSONDocument
    assert DEFAULT_RAW_BSON_OPTIONS == DEFAULT_CODEC_OPTIONS.with_options(document_class=RawBSONDocument)
    data = gbson.encode({"a": {"b": [1, {"c": 2}]}, "z": 1})
    doc = RawBSONDocument(data)
    assert doc.raw == data and isinstance(doc.raw, bytes) and list(doc) == ["a", "z"]
    assert isinstance(doc["a"], RawBSONDocument) and doc["a"]["b"][1]["c"] == 2
    assert gbson.encode(doc) == data  # passes through
    assert gbson.decode(data, DEFAULT_RAW_BSON_OPTIONS) == doc
    with pytest.raises(TypeError):
        RawBSONDocument(data, DEFAULT_CODEC_OPTIONS)  # a dict document_class would stop being raw
    with pytest.raises(gbson.InvalidBSON):
        RawBSONDocument(data[:-1])

    class MyRaw(RawBSONDocument):
        pass

    mine = MyRaw(data, DEFAULT_CODEC_OPTIONS.with_options(document_class=MyRaw))
    assert type(mine["a"]) is MyRaw
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        loaded = pickle.loads(pickle.dumps(doc, protocol))
        assert loaded == doc and loaded["a"]["b"][0] == 1
    with pytest.raises(TypeError):
        hash(doc)


def test_raw_bson_matches_pymongo(pm: ModuleType) -> None:
    from bson import raw_bson as theirs

    data = gbson.encode({"a": {"b": 1}})
    assert dict(RawBSONDocument(data)["a"]) == dict(theirs.RawBSONDocument(data)["a"])
    with pytest.raises(TypeError):
        theirs.RawBSONDocument(data, pm.DEFAULT_CODEC_OPTIONS)
    assert DELIBERATE_DIFFERENCES["raw-bytes"]
    big = gbson.encode({"doc": {"blob": b"x" * 5000}})
    assert isinstance(gbson.decode(big, DEFAULT_RAW_BSON_OPTIONS)["doc"].raw, bytes)
    assert isinstance(pm.decode(big, theirs.DEFAULT_RAW_BSON_OPTIONS)["doc"].raw, memoryview)


# =============================================================================
# json_util
# =============================================================================

class _CursorLike:
    """Iterable only (no len, no items): what a Cursor looks like to dumps."""

    def __init__(self, docs: list) -> None:
        self._docs = docs

    def __iter__(self) -> Iterator:
        return iter(self._docs)


class _ItemsOnly:
    def items(self) -> list:
        return [("k", 1), ("j", [2])]


def _iterables() -> list:
    return [
        (doc for doc in [{"a": 1}, {"b": 2}]),
        map(str, [1, 2]),
        filter(None, [0, 1, 2]),
        {3},
        frozenset([4]),
        range(3),
        {"a": 1, "b": 2}.keys(),
        {"a": 1}.values(),
        {"a": 1}.items(),
        _CursorLike([{"x": 1}, {"y": [1, 2]}]),
        iter([1, 2]),
        zip([1, 2], "ab"),
        (1, (2, 3)),
        _ItemsOnly(),
        OrderedDict(b=1, a=2),
        {"nested": ((i, [i]) for i in range(2)), "set": {5}},
    ]


@pytest.mark.parametrize("index", range(len(_iterables())))
def test_dumps_iterables(index: int, pm: ModuleType) -> None:
    from bson import json_util as theirs

    for mode in ("RELAXED", "CANONICAL", "LEGACY"):
        mine = json_util.dumps({"v": _iterables()[index]}, json_options=getattr(json_util, f"{mode}_JSON_OPTIONS"))
        ref = theirs.dumps({"v": _iterables()[index]}, json_options=getattr(theirs, f"{mode}_JSON_OPTIONS"))
        assert mine == ref


def test_dumps_cursor_of_bson_values(pm: ModuleType) -> None:
    from bson import json_util as theirs

    def docs(lib: Any) -> Iterator:
        yield {"_id": lib.ObjectId("5f1e2d3c4b5a697887766554"), "n": lib.Int64(3)}
        yield {"when": datetime.datetime(2021, 1, 1), "d": lib.Decimal128("1.5"), "k": lib.MaxKey()}

    for mode in ("RELAXED", "CANONICAL", "LEGACY"):
        mine = json_util.dumps(_CursorLike(list(docs(gbson))), json_options=getattr(json_util, f"{mode}_JSON_OPTIONS"))
        ref = theirs.dumps(_CursorLike(list(docs(pm))), json_options=getattr(theirs, f"{mode}_JSON_OPTIONS"))
        assert mine == ref
    assert json.loads(json_util.dumps(docs(gbson)))[0]["_id"] == {"$oid": "5f1e2d3c4b5a697887766554"}


def test_dumps_unknown_values_reach_json_default(pm: ModuleType) -> None:
    from bson import json_util as theirs

    class Thing:
        def __repr__(self) -> str:
            return "Thing()"

    assert json_util.dumps({"t": Thing()}, default=repr) == theirs.dumps({"t": Thing()}, default=repr)
    with pytest.raises(TypeError, match="not JSON serializable"):
        json_util.dumps({"t": Thing()})
    assert json_util.dumps([1], indent=2, sort_keys=True) == theirs.dumps([1], indent=2, sort_keys=True)


def test_default_is_strict_like_pymongos(pm: ModuleType) -> None:
    from bson import json_util as theirs

    oid = "5f1e2d3c4b5a697887766554"
    assert json_util.default(gbson.ObjectId(oid)) == theirs.default(pm.ObjectId(oid)) == {"$oid": oid}
    for value in (object(), iter([1]), {1}):
        with pytest.raises(TypeError):
            json_util.default(value)
        with pytest.raises(TypeError):
            theirs.default(value)
    text = json.dumps({"id": gbson.ObjectId(oid)}, default=json_util.default)
    assert text == json.dumps({"id": pm.ObjectId(oid)}, default=theirs.default)


def test_loads_and_hooks(pm: ModuleType) -> None:
    from bson import json_util as theirs

    text = ('{"_id": {"$oid": "5f1e2d3c4b5a697887766554"}, "n": {"$numberLong": "5"}, '
            '"d": {"$date": "2020-01-01T00:00:00Z"}, "sub": {"b": 1, "a": {"$numberDecimal": "1.5"}}}')
    mine, ref = json_util.loads(text), theirs.loads(text)
    assert gbson.encode(mine) == pm.encode(ref)
    hooked = json.loads(text, object_hook=json_util.object_hook)
    assert gbson.encode(hooked) == pm.encode(json.loads(text, object_hook=theirs.object_hook))
    paired = json.loads(text, object_pairs_hook=json_util.object_pairs_hook)
    assert gbson.encode(paired) == pm.encode(json.loads(text, object_pairs_hook=theirs.object_pairs_hook))
    son_options = json_util.JSONOptions(document_class=SON)
    ordered = json_util.loads(text, json_options=son_options)
    assert isinstance(ordered, SON) and isinstance(ordered["sub"], SON) and list(ordered["sub"]) == ["b", "a"]
    aware = json_util.loads(text, json_options=json_util.JSONOptions(tz_aware=True))
    assert aware["d"] == datetime.datetime(2020, 1, 1, tzinfo=utc)
    assert json_util.loads(text.encode()) == mine  # bytes input, as json.loads takes


def _preset_fields(options: Any) -> tuple:
    return (options.json_mode, options.strict_number_long, options.datetime_representation, options.strict_uuid,
            options.uuid_representation, options.tz_aware, options.document_class, options.datetime_conversion)


def test_json_option_presets_match_pymongo(pm: ModuleType) -> None:
    from bson import json_util as theirs

    for name in ("CANONICAL_JSON_OPTIONS", "LEGACY_JSON_OPTIONS", "RELAXED_JSON_OPTIONS", "DEFAULT_JSON_OPTIONS"):
        assert _preset_fields(getattr(json_util, name)) == _preset_fields(getattr(theirs, name)), name
        assert repr(getattr(json_util, name)) == repr(getattr(theirs, name)), name
    built = [dict(json_mode=0, strict_number_long=True, datetime_representation=1),
             dict(json_mode=0, strict_uuid=True, uuid_representation=4), dict(tz_aware=True),
             dict(json_mode=2, tz_aware=True, tzinfo=FixedOffset(60, "x"))]
    for kwargs in built:
        mine, ref = json_util.JSONOptions(**kwargs), theirs.JSONOptions(**kwargs)
        assert _preset_fields(mine) == _preset_fields(ref), kwargs
        assert (mine.tzinfo is None) == (ref.tzinfo is None)
        try:
            switched = ref.with_options(json_mode=1)
        except ValueError:
            continue  # PyMongo keeps the derived settings and refuses the switch; greenmongo re-derives them
        assert _preset_fields(mine.with_options(json_mode=1)) == _preset_fields(switched)
    value = uuid.UUID(int=7)
    mine = json_util.LEGACY_JSON_OPTIONS.with_options(uuid_representation=4, strict_uuid=True)
    ref = theirs.LEGACY_JSON_OPTIONS.with_options(uuid_representation=4, strict_uuid=True)
    assert json_util.dumps(value, json_options=mine) == theirs.dumps(value, json_options=ref)


def test_json_deliberate_differences(pm: ModuleType) -> None:
    from bson import json_util as theirs

    value = uuid.UUID(int=7)
    assert DELIBERATE_DIFFERENCES["json-uuid-text"]
    assert json.loads(json_util.dumps(value, json_options=json_util.LEGACY_JSON_OPTIONS)) == {"$uuid": str(value)}
    assert json.loads(theirs.dumps(value, json_options=theirs.LEGACY_JSON_OPTIONS)) == {"$uuid": value.hex}
    moment = datetime.datetime(2020, 1, 1, 12, tzinfo=FixedOffset(60, "x"))
    assert DELIBERATE_DIFFERENCES["json-date-utc"]
    assert json.loads(json_util.dumps(moment)) == {"$date": "2020-01-01T11:00:00Z"}
    assert json.loads(theirs.dumps(moment)) == {"$date": "2020-01-01T12:00:00+0100"}
    assert DELIBERATE_DIFFERENCES["json-int64-range"]
    with pytest.raises(OverflowError):
        json_util.dumps(2**70)
    assert theirs.dumps(2**70) == str(2**70)
    assert DELIBERATE_DIFFERENCES["json-legacy-nonfinite"]
    assert json_util.dumps(float("nan"), json_options=json_util.LEGACY_JSON_OPTIONS) == '{"$numberDouble": "NaN"}'
    assert theirs.dumps(float("nan"), json_options=theirs.LEGACY_JSON_OPTIONS) == "NaN"
    assert DELIBERATE_DIFFERENCES["bytearray-binary"]
    assert json.loads(json_util.dumps(bytearray(b"\x01"))) == {"$binary": {"base64": "AQ==", "subType": "00"}}
    assert theirs.dumps(bytearray(b"\x01")) == "[1]"
    assert DELIBERATE_DIFFERENCES["json-relaxed-strict-uuid"]
    assert json_util.JSONOptions(strict_uuid=False).strict_uuid is False
    with pytest.raises(ValueError):
        theirs.JSONOptions(strict_uuid=False)


def test_json_type_registry() -> None:
    assert DELIBERATE_DIFFERENCES["json-type-registry"]

    class Money:
        def __init__(self, cents: int) -> None:
            self.cents = cents

    class MoneyEncoder(gbson.TypeEncoder):
        python_type = Money

        def transform_python(self, value: Money) -> Any:
            return gbson.Int64(value.cents)

    options = json_util.CANONICAL_JSON_OPTIONS.with_options(type_registry=TypeRegistry([MoneyEncoder()]))
    assert json.loads(json_util.dumps({"m": Money(5)}, json_options=options)) == {"m": {"$numberLong": "5"}}
    fallback = json_util.RELAXED_JSON_OPTIONS.with_options(type_registry=TypeRegistry(fallback_encoder=repr))
    assert json.loads(json_util.dumps({"s": {1}, "o": Money}, json_options=fallback)) == {"s": [1], "o": repr(Money)}


def test_get_size() -> None:
    assert DELIBERATE_DIFFERENCES["get-size-estimates"]
    document = {"a": "x" * 10, "b": [1, 2, 3], "c": gbson.ObjectId(), "d": {"e": datetime.datetime(2020, 1, 1)}}
    estimate = json_util.get_size(document, 10_000)
    assert abs(estimate - len(json_util.dumps(document))) < len(json_util.dumps(document)) // 4
    assert json_util.get_size(document, 10) >= 10  # stops once the limit is reached
    assert json_util.get_size(itertools.count(), 100) >= 100  # an endless iterable ends
    assert json_util.get_size("abc", 100, current_size=200) == 200  # already past the limit
    assert json_util.get_size({"k": "v" * 100}, 10_000) > json_util.get_size({"k": "v"}, 10_000)


# =============================================================================
# The rest of each module's API, behaviour first
# =============================================================================

def test_codec_options_like_pymongos(pm: ModuleType) -> None:
    assert repr(DEFAULT_CODEC_OPTIONS) == repr(pm.DEFAULT_CODEC_OPTIONS)
    assert str(gbson.DatetimeConversion.DATETIME_AUTO) == str(pm.DatetimeConversion.DATETIME_AUTO)
    assert gbson.DatetimeConversion.DATETIME_MS == 3 and isinstance(gbson.DatetimeConversion.DATETIME, int)
    registry = TypeRegistry(fallback_encoder=str)
    assert registry.fallback_encoder is str and TypeRegistry().fallback_encoder is None
    with pytest.raises(TypeError):
        CodecOptions(unicode_decode_error_handler=1)
    with pytest.raises(TypeError):
        pm.CodecOptions(unicode_decode_error_handler=1)


def test_decimal_codecs(pm: ModuleType) -> None:
    from greenmongo.bson.decimal128 import DecimalDecoder, DecimalEncoder

    options = CodecOptions(type_registry=TypeRegistry([DecimalEncoder(), DecimalDecoder()]))
    data = gbson.encode({"d": decimal.Decimal("1.10")}, codec_options=options)
    assert data == pm.encode({"d": decimal.Decimal("1.10")}, codec_options=pm.CodecOptions(
        type_registry=pm.codec_options.TypeRegistry([pm.decimal128.DecimalEncoder()])))
    assert gbson.decode(data, options) == {"d": decimal.Decimal("1.10")}
    assert gbson.decode(data) == {"d": gbson.Decimal128("1.10")}


def test_datetime_ms(pm: ModuleType) -> None:
    from greenmongo.bson.datetime_ms import DatetimeConversion, DatetimeMS

    assert DatetimeMS(5) < 6 and DatetimeMS(5) >= 5 and 4 < DatetimeMS(5) and DatetimeMS(5) > DatetimeMS(4)
    assert (pm.DatetimeMS(5) < 6) and (4 < pm.DatetimeMS(5))
    far = DatetimeMS(2**62)
    with pytest.raises(gbson.InvalidBSON):
        far.as_datetime()
    with pytest.raises(pm.errors.InvalidBSON):
        pm.DatetimeMS(2**62).as_datetime()
    assert far.as_datetime(CodecOptions(datetime_conversion=DatetimeConversion.DATETIME_AUTO)) == far
    assert far.as_datetime(CodecOptions(datetime_conversion=DatetimeConversion.DATETIME_CLAMP)).year == 9999
    assert DatetimeMS(1000).as_datetime(CodecOptions(tz_aware=True)) == pm.DatetimeMS(1000).as_datetime(
        pm.CodecOptions(tz_aware=True))
    assert importlib.import_module("greenmongo.bson.datetime_ms").CodecOptions is CodecOptions


def test_int64_prints_as_a_number(pm: ModuleType) -> None:
    value = gbson.Int64(7)
    assert str(value) == str(pm.Int64(7)) == "7" and f"{value}" == "7" and f"{value:03d}" == "007"
    assert json.dumps(value) == "7" and "%s" % value == "7"
    assert DELIBERATE_DIFFERENCES["int64-repr"]
    assert repr(value) == "Int64(7)" and repr(pm.Int64(7)) == "7"


def test_regex_flags(pm: ModuleType) -> None:
    from greenmongo.bson.regex import RE_TYPE, str_flags_to_int

    assert str_flags_to_int(str_flags="imx") == pm.regex.str_flags_to_int("imx")
    assert RE_TYPE is re.Pattern
    assert gbson.Regex("a", "im").flags == pm.Regex("a", "im").flags
    assert DELIBERATE_DIFFERENCES["regex-flags"]
    assert type(gbson.Regex("a", "i").flags) is int and repr(gbson.Regex("a", "i")) == "Regex('a', 2)"


def test_binary_uuid_and_vectors(pm: ModuleType) -> None:
    value = uuid.UUID(int=9)
    assert gbson.Binary.from_uuid(uuid=value) == gbson.Binary.from_uuid(value, 4)
    assert bytes(gbson.Binary.from_uuid(uuid=value, uuid_representation=5)) == bytes(
        pm.Binary.from_uuid(uuid=value, uuid_representation=5))
    numpy = pytest.importorskip("numpy")
    int8 = gbson.BinaryVectorDtype.INT8
    array_in = numpy.array([1, -2, 3], dtype=numpy.int8)
    binary = gbson.Binary.from_vector(array_in, int8)
    assert bytes(binary) == bytes(pm.Binary.from_vector(array_in, pm.binary.BinaryVectorDtype.INT8))
    vector = binary.as_vector(return_numpy=True)
    assert isinstance(vector.data, numpy.ndarray) and vector.data.tolist() == [1, -2, 3]
    assert binary.as_vector() == gbson.BinaryVector([1, -2, 3], int8) == vector
    floats = gbson.Binary.from_vector(numpy.array([1.5, -2.25]), gbson.BinaryVectorDtype.FLOAT32)
    assert floats.as_vector(return_numpy=True).data.dtype == numpy.float32
    with pytest.raises(ValueError):
        gbson.Binary.from_vector(numpy.zeros((2, 2)), gbson.BinaryVectorDtype.FLOAT32)
    assert DELIBERATE_DIFFERENCES["vector-padding-bits"]
    bad = gbson.Binary(b"\x10\x03\xff", 9)
    with pytest.raises(ValueError, match="padding"):
        bad.as_vector()
    with pytest.warns(DeprecationWarning):
        pm.Binary(b"\x10\x03\xff", 9).as_vector()


def test_timestamp_objectid_and_keys(pm: ModuleType) -> None:
    from greenmongo.bson import max_key, min_key, timestamp

    assert timestamp.UPPERBOUND == pm.timestamp.UPPERBOUND == 2**32
    gbson.Timestamp(timestamp.UPPERBOUND - 1, 0)
    with pytest.raises(ValueError):
        gbson.Timestamp(timestamp.UPPERBOUND, 0)
    assert min_key.MinKey is gbson.MinKey and max_key.MaxKey is gbson.MaxKey
    assert min_key.MinKey() < 1 < max_key.MaxKey()
    assert importlib.import_module("greenmongo.bson.objectid").utc is utc


def test_dbref_as_doc_is_a_son(pm: ModuleType) -> None:
    doc = gbson.DBRef("c", 1, "d", x=2).as_doc()
    assert isinstance(doc, SON) and repr(doc) == repr(pm.DBRef("c", 1, "d", x=2).as_doc())
    assert gbson.encode({"r": gbson.DBRef("c", 1, x=2)}) == pm.encode({"r": pm.DBRef("c", 1, x=2)})


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_every_type_pickles(protocol: int) -> None:
    values = [gbson.MinKey(), gbson.MaxKey(), gbson.Int64(5), gbson.Timestamp(1, 2), gbson.ObjectId(),
              gbson.Code("x", {"a": 1}), gbson.Code("y"), gbson.DBRef("c", 1, "d", x=1), gbson.Binary(b"x", 5),
              gbson.Decimal128("1.5"), gbson.DatetimeMS(5), SON(a=1), gbson.DBPointer("a.b", gbson.ObjectId()),
              gbson.Symbol("s"), gbson.UNDEFINED, gbson.BinaryVector([1, 2], gbson.BinaryVectorDtype.INT8)]
    for value in values:
        loaded = pickle.loads(pickle.dumps(value, protocol))
        assert type(loaded) is type(value) and loaded == value, value
    regex = pickle.loads(pickle.dumps(gbson.Regex("a", "i"), protocol))
    assert (regex.pattern, regex.flags) == ("a", re.I)
    ref = pickle.loads(pickle.dumps(gbson.DBRef("c", 1, extra=2), protocol))
    assert ref.extra == 2 and copy.deepcopy(ref) == ref


def test_decode_file_iter_and_typings() -> None:
    stream = io.BytesIO(gbson.encode({"a": 1}) + gbson.encode({"b": 2}))
    assert list(gbson.decode_file_iter(stream, CodecOptions(document_class=SON))) == [SON(a=1), SON(b=2)]
    from greenmongo.bson import typings

    assert typings._DocumentType.__bound__ is not None and typing.get_origin(typings._ReadableBuffer) is typing.Union


def test_pymongo_import_paths_under_install_as_pymongo() -> None:
    """In a fresh interpreter (the finder changes process-wide imports): PyMongo-style imports work."""
    import subprocess
    import textwrap

    code = textwrap.dedent("""
        import greenmongo
        greenmongo.install_as_pymongo()
        import bson, bson.son, bson.raw_bson, bson.tz_util, bson.typings, bson.min_key, bson.max_key
        from bson import SON, BSON, json_util
        from bson.errors import InvalidId, InvalidDocument
        from bson.raw_bson import RawBSONDocument, DEFAULT_RAW_BSON_OPTIONS
        from bson.tz_util import utc, FixedOffset
        from bson.typings import _DocumentType
        import greenmongo.bson
        assert bson.errors.InvalidBSON is greenmongo.errors.InvalidBSON
        assert bson.son.SON is SON is greenmongo.bson.son.SON
        data = BSON.encode(SON([("b", 1), ("a", 2)]))
        assert list(data.decode(bson.CodecOptions(document_class=SON))) == ["b", "a"]
        assert json_util.dumps(x * 2 for x in range(3)) == "[0, 2, 4]"
        assert RawBSONDocument(data, DEFAULT_RAW_BSON_OPTIONS)["a"] == 2
        print("ok")
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
