"""bson-corpus: round trips between canonical/degenerate BSON, native values and Extended JSON.

The assertions are the spec's "codec with a native representation" list
(54-bson-corpus.md, "Testing validity"). Deprecated types decode to their own
classes (Symbol, DBPointer, UNDEFINED), so they round-trip exactly and the
``converted_*`` forms (a lossy mapping to modern types) do not apply to us.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from greenmongo import bson
from greenmongo.bson import json_util
from greenmongo.errors import InvalidBSON, InvalidDocument
from spec.support import params

CORPUS = "bson-corpus/tests"

# Y10K dates and friends must decode: the corpus covers BSON's whole datetime range.
CODEC_OPTIONS = bson.CodecOptions(tz_aware=True, datetime_conversion=bson.DatetimeConversion.DATETIME_AUTO)
CANONICAL = json_util.CANONICAL_JSON_OPTIONS.with_options(
    tz_aware=True, datetime_conversion=bson.DatetimeConversion.DATETIME_AUTO)
RELAXED = json_util.RELAXED_JSON_OPTIONS.with_options(
    tz_aware=True, datetime_conversion=bson.DatetimeConversion.DATETIME_AUTO)


def _cases(kind: str):
    def extract(path, data):
        for case in data.get(kind, []):
            yield f"{kind}: {case['description']}", dict(case, bson_type=data["bson_type"],
                                                        test_key=data.get("test_key"))
    return extract


def _normalized_json(text: str) -> Any:
    """Parse JSON keeping int vs float apart (1 vs 1.0 differ in Extended JSON), ignoring key order."""
    return json.loads(text, parse_float=lambda s: ("float", float(s)), parse_int=lambda s: ("int", int(s)))


def _bytes(hex_string: str) -> bytes:
    return bytes.fromhex(hex_string)


def _to_bson(native: Any) -> bytes:
    return bson.encode(native, codec_options=CODEC_OPTIONS)


def _from_bson(data: bytes) -> Any:
    return bson.decode(data, codec_options=CODEC_OPTIONS)


@pytest.mark.parametrize("case", params(CORPUS, _cases("valid")))
def test_valid(case: dict) -> None:
    cB = _bytes(case["canonical_bson"])
    cEJ = _normalized_json(case["canonical_extjson"])
    lossy = case.get("lossy", False)

    native = _from_bson(cB)
    assert _to_bson(native) == cB, "native_to_bson(bson_to_native(cB)) != cB"
    assert _normalized_json(json_util.dumps(native, json_options=CANONICAL)) == cEJ, \
        "native_to_canonical_extended_json(bson_to_native(cB)) != cEJ"
    if "relaxed_extjson" in case:
        rEJ = _normalized_json(case["relaxed_extjson"])
        assert _normalized_json(json_util.dumps(native, json_options=RELAXED)) == rEJ, \
            "native_to_relaxed_extended_json(bson_to_native(cB)) != rEJ"
        from_relaxed = json_util.loads(case["relaxed_extjson"], json_options=RELAXED)
        assert _normalized_json(json_util.dumps(from_relaxed, json_options=RELAXED)) == rEJ, \
            "native_to_relaxed_extended_json(json_to_native(rEJ)) != rEJ"

    from_canonical = json_util.loads(case["canonical_extjson"], json_options=CANONICAL)
    assert _normalized_json(json_util.dumps(from_canonical, json_options=CANONICAL)) == cEJ, \
        "native_to_canonical_extended_json(json_to_native(cEJ)) != cEJ"
    if not lossy:
        assert _to_bson(from_canonical) == cB, "native_to_bson(json_to_native(cEJ)) != cB"

    if "degenerate_bson" in case:
        dB = _bytes(case["degenerate_bson"])
        assert _to_bson(_from_bson(dB)) == cB, "native_to_bson(bson_to_native(dB)) != cB"
    if "degenerate_extjson" in case:
        from_degenerate = json_util.loads(case["degenerate_extjson"], json_options=CANONICAL)
        assert _normalized_json(json_util.dumps(from_degenerate, json_options=CANONICAL)) == cEJ, \
            "native_to_canonical_extended_json(json_to_native(dEJ)) != cEJ"
        if not lossy:
            assert _to_bson(from_degenerate) == cB, "native_to_bson(json_to_native(dEJ)) != cB"


@pytest.mark.parametrize("case", params(CORPUS, _cases("decodeErrors")))
def test_decode_error(case: dict) -> None:
    data = _bytes(case["bson"])
    with pytest.raises(InvalidBSON):
        _from_bson(data)
    assert bson.is_valid(data) is False


@pytest.mark.parametrize("case", params(CORPUS, _cases("parseErrors")))
def test_parse_error(case: dict) -> None:
    text = case["string"]
    if case["bson_type"] == "0x13":
        # Unparseable strings are ValueErrors; unrepresentable values are InvalidDocument.
        with pytest.raises((ValueError, InvalidDocument)):
            bson.Decimal128(text)
    else:
        # Top-level documents and type-specific wrappers: the Extended JSON parser must refuse them.
        with pytest.raises(ValueError):
            json_util.loads(text, json_options=CANONICAL)
