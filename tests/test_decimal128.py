"""Decimal128: string/BID/decimal.Decimal conversions, clamping, overflow, NaN handling, value semantics."""

from __future__ import annotations

import copy
import decimal
import pickle
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from greenmongo.bson.decimal128 import Decimal128, create_decimal128_context
from greenmongo.errors import InvalidDocument


def _bid(high: int, low: int = 0) -> bytes:
    return struct.pack("<QQ", low, high)


def _parts(value: Decimal128) -> tuple[int, int]:
    low, high = struct.unpack("<QQ", value.bid)
    return high, low


# -- strings in, canonical strings out --------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("0", "0"),
    ("-0", "-0"),
    ("-0.0", "-0.0"),
    ("0.000", "0.000"),
    ("1", "1"),
    ("+1", "1"),
    ("12.70", "12.70"),
    ("017.", "17"),
    (".5", "0.5"),
    ("4E+9", "4E+9"),
    ("0.73e-7", "7.3E-8"),
    ("1E3", "1E+3"),
    ("100E-10", "1.00E-8"),
    ("0.000001", "0.000001"),
    ("0.0000001", "1E-7"),
    ("123456789012345678901234567890123.4", "123456789012345678901234567890123.4"),
    ("1234567890123456789012345678901234", "1234567890123456789012345678901234"),
    ("0E+6000", "0E+6000"),
    ("-1.00E-8", "-1.00E-8"),
    ("9.999999999999999999999999999999999E+6144", "9.999999999999999999999999999999999E+6144"),
    ("1E-6176", "1E-6176"),
    ("Inf", "Infinity"),
    ("-infinity", "-Infinity"),
    ("+INFINITY", "Infinity"),
    ("NaN", "NaN"),
    ("-nan", "NaN"),
    ("sNaN", "NaN"),
])
def test_string_round_trip_to_canonical_text(text: str, expected: str) -> None:
    value = Decimal128(text)
    assert str(value) == expected
    assert Decimal128(str(value)) == value or expected == "NaN"


def test_known_bid_layouts() -> None:
    assert Decimal128("0").bid == _bid(0x3040000000000000)
    assert Decimal128("-0").bid == _bid(0xB040000000000000)
    assert Decimal128("1").bid == _bid(0x3040000000000000, 1)
    assert Decimal128("Infinity").bid == _bid(0x7800000000000000)
    assert Decimal128("-Infinity").bid == _bid(0xF800000000000000)
    assert Decimal128("NaN").bid == _bid(0x7C00000000000000)
    assert Decimal128("-NaN").bid == _bid(0xFC00000000000000)
    assert Decimal128("sNaN").bid == _bid(0x7E00000000000000)
    assert Decimal128("-sNaN").bid == _bid(0xFE00000000000000)


# -- clamping, exact rounding, overflow, underflow ---------------------------

def test_clamping_pads_the_coefficient_without_error() -> None:
    value = Decimal128("1E6112")
    assert str(value) == "1.0E+6112"
    assert _parts(value) == ((6111 + 6176) << 49, 10)
    assert str(Decimal128("1E+6144")) == "1.000000000000000000000000000000000E+6144"


@pytest.mark.parametrize("text, expected", [
    ("0E+2147483647", "0E+6111"),
    ("-0E+2147483647", "-0E+6111"),
    ("0E-2147483647", "0E-6176"),
    ("-0E-99999999999999999999999", "-0E-6176"),
    ("0E+" + "9" * 5000, "0E+6111"),
])
def test_zeros_clamp_to_the_exponent_range(text: str, expected: str) -> None:
    assert str(Decimal128(text)) == expected


def test_exact_rounding_drops_only_zeros() -> None:
    assert str(Decimal128("1" + "0" * 1000)) == "1.000000000000000000000000000000000E+1000"
    assert str(Decimal128("10E-6177")) == "1E-6176"
    assert str(Decimal128("12345678901234567890123456789012340")) == "1.234567890123456789012345678901234E+34"


@pytest.mark.parametrize("text", [
    "1E6145",                                  # 10 ** 6145 needs 35 digits after clamping
    "-7e10000",
    "1" + "0" * 6200,
    "1E+" + "9" * 40,
    "12345678901234567890123456789012345E6111",
])
def test_overflow_is_an_error(text: str) -> None:
    with pytest.raises(InvalidDocument, match="overflow|significant digits"):
        Decimal128(text)


@pytest.mark.parametrize("text", [
    "1E-6177",
    "-1.5E-6176",
    "1E-" + "9" * 40,
    "12345678901234567890123456789012345",     # 35 significant digits
    "1.11111111111111111111111111111234650",
])
def test_inexact_rounding_and_underflow_are_errors(text: str) -> None:
    with pytest.raises(InvalidDocument):
        Decimal128(text)


@pytest.mark.parametrize("text", [
    "", " 1", "1 ", "+", "-", ".", "-.", "1e", "e1", "E+1", "1..2", "1.2.3", "1e1.0", "1e++1", "Infi",
    "NaNs", "NaN1", "0sNaN", ".NaN", "9Inf", "1,5", "٣", "1\n", "0x10", "1_000", "nul",
])
def test_unparseable_strings_raise_value_error(text: str) -> None:
    with pytest.raises(ValueError, match="not a valid Decimal128 string"):
        Decimal128(text)


# -- BID decoding: non-canonical forms and NaN payloads ----------------------

def test_non_canonical_coefficient_reads_as_zero_keeping_exponent() -> None:
    too_big = Decimal128.from_bid(_bid(0x3041ED09BEAD87C0, 0x378D8E6400000000))  # 10**34, exponent 0
    assert str(too_big) == "0"
    implied_prefix = Decimal128.from_bid(bytes.fromhex("FFFFFFFFFFFFFFFFFFFFFFFFFFFF116C"))
    assert str(implied_prefix) == "0E+3"
    negative = Decimal128.from_bid(_bid(0xEC10000000000000, 0xDCBA9876543210DE))
    assert str(negative) == "-0"


def test_nan_payload_and_sign_are_kept_in_bytes_but_not_in_text() -> None:
    payload = Decimal128.from_bid(_bid(0x7E00000000000000, 0x12))
    assert str(payload) == "NaN"
    assert repr(payload) == "Decimal128('NaN')"
    assert payload.bid == _bid(0x7E00000000000000, 0x12)
    assert payload != Decimal128("NaN")  # equality is by the 16 bytes
    negative = Decimal128.from_bid(_bid(0xFC00000000000000))
    assert str(negative) == "NaN"
    assert negative.to_decimal().is_nan() and negative.to_decimal().is_signed()
    assert payload.to_decimal().is_snan()


# -- decimal.Decimal ----------------------------------------------------------

@pytest.mark.parametrize("text", [
    "0", "-0", "1.00", "-1.00E-8", "1234567890123456789012345678901234",
    "9.999999999999999999999999999999999E+6144",
    "1E-6176", "-1E-6176", "0E+6111", "0E-6176", "Infinity", "-Infinity", "12.5E+300",
])
def test_decimal_round_trip_is_exact(text: str) -> None:
    value = Decimal128(text)
    as_decimal = value.to_decimal()
    assert as_decimal.as_tuple() == decimal.Decimal(text).as_tuple()
    assert Decimal128(as_decimal) == value


def test_from_decimal_specials() -> None:
    assert Decimal128(decimal.Decimal("NaN")).bid == Decimal128("NaN").bid
    assert Decimal128(decimal.Decimal("-NaN")).bid == Decimal128("-NaN").bid
    assert Decimal128(decimal.Decimal("sNaN")).bid == Decimal128("sNaN").bid
    assert Decimal128(decimal.Decimal("NaN123")).bid == Decimal128("NaN").bid  # payload dropped
    assert str(Decimal128(decimal.Decimal("-Infinity"))) == "-Infinity"
    assert str(Decimal128(decimal.Decimal("1E+6112"))) == "1.0E+6112"


def test_from_decimal_out_of_range_is_an_error() -> None:
    with pytest.raises(InvalidDocument):
        Decimal128(decimal.Decimal("1E+7000"))
    with pytest.raises(InvalidDocument):
        Decimal128(decimal.Decimal("1E-7000"))
    with pytest.raises(InvalidDocument):
        Decimal128(decimal.Decimal("1." + "1" * 40))


def test_to_decimal_specials() -> None:
    assert str(Decimal128("Infinity").to_decimal()) == "Infinity"
    assert str(Decimal128("-Infinity").to_decimal()) == "-Infinity"
    assert Decimal128("NaN").to_decimal().is_qnan()
    assert Decimal128("-0").to_decimal().as_tuple() == (1, (0,), 0)


_CONTEXT = create_decimal128_context()
_finite_decimals = st.builds(
    lambda sign, digits, exponent: f"{sign}{digits}E{exponent}",
    st.sampled_from(["", "-", "+"]),
    st.from_regex(r"[0-9]{1,40}", fullmatch=True),
    st.integers(min_value=-6250, max_value=6200),
)


@settings(max_examples=400, deadline=None)
@given(_finite_decimals)
def test_string_conversion_matches_an_ieee_decimal128_context(text: str) -> None:
    """The decimal module with Decimal128's limits (clamp=1, traps on Inexact/Overflow) is the oracle."""
    try:
        expected = _CONTEXT.create_decimal(text)
    except (decimal.Inexact, decimal.Overflow, decimal.Underflow):
        with pytest.raises(InvalidDocument):
            Decimal128(text)
        return
    value = Decimal128(text)
    assert value.to_decimal().as_tuple() == expected.as_tuple()
    assert str(value) == _scientific(expected)
    assert Decimal128.from_bid(value.bid) == value


def _scientific(value: decimal.Decimal) -> str:
    """decimal's to-scientific-string, the same algorithm the spec copies."""
    return decimal.Context(capitals=1).to_sci_string(value)


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=16, max_size=16))
def test_any_16_bytes_decode_and_print_without_error(data: bytes) -> None:
    value = Decimal128.from_bid(data)
    text = str(value)
    assert value.bid == data
    if text != "NaN":
        # Every non-NaN value prints a string that parses back to the same number
        # (non-canonical zeros may come back with a clamped exponent).
        assert Decimal128(text).to_decimal() == value.to_decimal()


# -- construction and value semantics ----------------------------------------

def test_high_low_tuple() -> None:
    assert Decimal128((0x3040000000000000, 1)) == Decimal128("1")
    assert Decimal128([0x3040000000000000, 1]) == Decimal128("1")
    with pytest.raises(ValueError):
        Decimal128((1, 2, 3))
    with pytest.raises(ValueError):
        Decimal128((-1, 0))
    with pytest.raises(ValueError):
        Decimal128((2**64, 0))
    with pytest.raises(TypeError):
        Decimal128(("1", 0))


@pytest.mark.parametrize("bad", [1.5, 1, None, b"1"])
def test_unsupported_types(bad: object) -> None:
    with pytest.raises(TypeError):
        Decimal128(bad)  # type: ignore[arg-type]


def test_from_bid_validates() -> None:
    with pytest.raises(ValueError):
        Decimal128.from_bid(b"\x00" * 15)
    with pytest.raises(TypeError):
        Decimal128.from_bid("0" * 16)  # type: ignore[arg-type]
    assert Decimal128.from_bid(bytearray(Decimal128("7").bid)) == Decimal128("7")
    assert Decimal128.from_bid(memoryview(Decimal128("7").bid)) == Decimal128("7")


def test_equality_hash_repr_and_immutability() -> None:
    assert Decimal128("1.0") == Decimal128("1.0")
    assert Decimal128("1.0") != Decimal128("1.00")  # different representations, as the spec says
    assert Decimal128("1") != 1
    assert len({Decimal128("2"), Decimal128("2"), Decimal128("2.0")}) == 2
    assert repr(Decimal128("-1.5E+10")) == "Decimal128('-1.5E+10')"
    value = Decimal128("3")
    with pytest.raises(AttributeError):
        value._bid = b"\x00" * 16  # type: ignore[misc]
    with pytest.raises(AttributeError):
        value.other = 1  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        value + value  # type: ignore[operator]


def test_pickle_and_copy() -> None:
    for text in ("1.23", "-0", "NaN", "-Infinity", "9.999999999999999999999999999999999E+6144"):
        value = Decimal128(text)
        for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
            clone = pickle.loads(pickle.dumps(value, protocol))
            assert clone == value and clone.bid == value.bid
    value = Decimal128("5")
    assert copy.copy(value) is value and copy.deepcopy(value) is value


def test_context_helper_matches_the_format() -> None:
    ctx = create_decimal128_context()
    assert ctx.prec == 34 and ctx.Emax == 6144 and ctx.Emin == -6143 and ctx.clamp == 1
