"""bson-binary-vector: subtype 9 vectors, encoded from (numbers, dtype, padding) and decoded back."""

from __future__ import annotations

import math
import struct

import pytest

from greenmongo import bson
from greenmongo.bson import Binary, BinaryVectorDtype
from spec.support import params


def _cases(path, data):
    for case in data["tests"]:
        yield case["description"], dict(case, test_key=data["test_key"])


def _number(value):
    if isinstance(value, dict):  # {"$numberDouble": "Infinity"} and friends
        return float(value["$numberDouble"])
    return value


def _float32(value: float) -> float:
    return struct.unpack("<f", struct.pack("<f", value))[0]


@pytest.mark.parametrize("case", params("bson-binary-vector/tests", _cases))
def test_vector(case: dict) -> None:
    dtype = BinaryVectorDtype(bytes.fromhex(case["dtype_hex"][2:]))
    padding = case.get("padding", 0)
    key = case["test_key"]
    vector = [_number(v) for v in case["vector"]] if "vector" in case else None

    if case["valid"]:
        canonical = bytes.fromhex(case["canonical_bson"])
        encoded = bson.encode({key: Binary.from_vector(vector, dtype, padding)})
        assert encoded == canonical
        decoded = bson.decode(canonical)[key].as_vector()
        assert decoded.dtype is dtype
        assert decoded.padding == padding
        if dtype is BinaryVectorDtype.FLOAT32:
            expected = [_float32(v) for v in vector]
            assert len(decoded.data) == len(expected)
            for got, want in zip(decoded.data, expected):
                assert got == want or (math.isnan(got) and math.isnan(want))
        else:
            assert decoded.data == vector
        return

    assert vector is not None or "canonical_bson" in case, "an invalid case must give something to reject"
    if vector is not None:
        with pytest.raises((ValueError, TypeError, struct.error)):
            Binary.from_vector(vector, dtype, padding)
    if "canonical_bson" in case:
        with pytest.raises(ValueError):
            bson.decode(bytes.fromhex(case["canonical_bson"]))[key].as_vector()
