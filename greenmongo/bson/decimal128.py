"""BSON Decimal128: an immutable IEEE 754-2008 decimal128 value in BID encoding.

The conversions follow the BSON Decimal128 spec rather than the ``decimal``
module's context, so clamping, exact rounding and the overflow/underflow
rules are the spec's and never depend on a thread's decimal context.

Errors, by design:

* a string that is not a numeric string of the spec's grammar raises
  ``ValueError``;
* a well-formed value that Decimal128 cannot hold exactly (overflow,
  underflow, or rounding that would drop a non-zero digit) raises
  ``greenmongo.errors.InvalidDocument``;
* a constructor argument of the wrong type raises ``TypeError``.

NaN payloads and signs are kept in the 16 bytes (``from_bid``/``bid`` round
trip exactly) but every NaN prints as ``NaN``, as the spec's table requires.
"""

from __future__ import annotations

import decimal
import re
import struct
from typing import Any, List, Tuple, Union

from greenmongo.bson.codec_options import TypeDecoder, TypeEncoder
from greenmongo.errors import InvalidDocument

__all__ = ["Decimal128", "create_decimal128_context"]

_PACK_BID = struct.Struct("<QQ").pack
_UNPACK_BID = struct.Struct("<QQ").unpack

_MAX_DIGITS = 34
_EXPONENT_BIAS = 6176
_MIN_EXPONENT = -6176          # Etiny: the exponent of the smallest subnormal
_MAX_EXPONENT = 6111           # Emax - (precision - 1)
_MAX_COEFFICIENT = 10 ** _MAX_DIGITS - 1
_MASK64 = (1 << 64) - 1
_SIGN_BIT = 1 << 63
_COEFFICIENT_HIGH_MASK = (1 << 49) - 1

# Canonical special values, as the high 64 bits (the low 64 bits are zero).
_HIGH_NAN = 0x7C00000000000000
_HIGH_SNAN = 0x7E00000000000000
_HIGH_INFINITY = 0x7800000000000000

# Exponents longer than this many digits are far outside any representable
# range; they are replaced by a sentinel so int() never sees a huge string.
_MAX_EXPONENT_DIGITS = 12
_HUGE_EXPONENT = 10 ** _MAX_EXPONENT_DIGITS

_FINITE = re.compile(
    r"([+-]?)(?:([0-9]+)(?:\.([0-9]*))?|\.([0-9]+))(?:[eE]([+-]?)([0-9]+))?",
    re.ASCII,
)
_SPECIALS = {
    "inf": _HIGH_INFINITY,
    "infinity": _HIGH_INFINITY,
    "nan": _HIGH_NAN,
    "snan": _HIGH_SNAN,
}


def create_decimal128_context() -> decimal.Context:
    """A ``decimal`` context whose limits match Decimal128 (for users doing arithmetic)."""
    return decimal.Context(
        prec=_MAX_DIGITS,
        Emin=-6143,
        Emax=6144,
        clamp=1,
        rounding=decimal.ROUND_HALF_EVEN,
        traps=[decimal.InvalidOperation, decimal.Overflow, decimal.Inexact],
    )


def _finite_to_bid(negative: bool, digits: str, exponent: int, source: Any) -> bytes:
    """Encode sign * int(digits) * 10**exponent, clamping and rounding only when exact."""
    digits = digits.lstrip("0")
    if not digits:
        # Zero: clamping the exponent never changes the value.
        if exponent < _MIN_EXPONENT:
            exponent = _MIN_EXPONENT
        elif exponent > _MAX_EXPONENT:
            exponent = _MAX_EXPONENT
        coefficient = 0
    else:
        length = len(digits)
        trailing_zeros = length - len(digits.rstrip("0"))
        if length > _MAX_DIGITS:
            drop = length - _MAX_DIGITS
            if drop > trailing_zeros:
                raise InvalidDocument(
                    f"{source!r} cannot be represented as Decimal128: it needs more than "
                    f"{_MAX_DIGITS} significant digits (inexact rounding)")
            digits = digits[:_MAX_DIGITS]
            exponent += drop
            trailing_zeros -= drop
            length = _MAX_DIGITS
        if exponent < _MIN_EXPONENT:
            drop = _MIN_EXPONENT - exponent
            if drop > trailing_zeros:
                raise InvalidDocument(
                    f"{source!r} cannot be represented as Decimal128: underflow (inexact rounding "
                    f"below 1E{_MIN_EXPONENT})")
            digits = digits[:length - drop]
            exponent = _MIN_EXPONENT
            length -= drop
        if exponent > _MAX_EXPONENT:
            pad = exponent - _MAX_EXPONENT
            if length + pad > _MAX_DIGITS:
                raise InvalidDocument(f"{source!r} cannot be represented as Decimal128: overflow")
            digits += "0" * pad
            exponent = _MAX_EXPONENT
        coefficient = int(digits)
    high = ((exponent + _EXPONENT_BIAS) << 49) | (coefficient >> 64)
    if negative:
        high |= _SIGN_BIT
    return _PACK_BID(coefficient & _MASK64, high)


def _string_to_bid(value: str) -> bytes:
    match = _FINITE.fullmatch(value)
    if match is None:
        lowered = value.lower()
        negative = lowered.startswith("-")
        name = lowered[1:] if lowered[:1] in ("-", "+") else lowered
        high = _SPECIALS.get(name)
        if high is None:
            raise ValueError(f"{value!r} is not a valid Decimal128 string")
        return _PACK_BID(0, high | _SIGN_BIT if negative else high)
    sign, integral, fraction, fraction_only, exponent_sign, exponent_digits = match.groups()
    if fraction_only is not None:
        integral, fraction = "", fraction_only
    elif fraction is None:
        fraction = ""
    exponent = 0
    if exponent_digits is not None:
        exponent_digits = exponent_digits.lstrip("0")
        if len(exponent_digits) > _MAX_EXPONENT_DIGITS:
            exponent = _HUGE_EXPONENT
        else:
            exponent = int(exponent_digits or "0")
        if exponent_sign == "-":
            exponent = -exponent
    return _finite_to_bid(sign == "-", integral + fraction, exponent - len(fraction), value)


def _decimal_to_bid(value: decimal.Decimal) -> bytes:
    sign, digit_tuple, exponent = value.as_tuple()
    if exponent == "F":
        high = _HIGH_INFINITY
    elif exponent == "n":
        high = _HIGH_NAN
    elif exponent == "N":
        high = _HIGH_SNAN
    else:
        return _finite_to_bid(bool(sign), "".join(map(str, digit_tuple)), exponent, value)
    return _PACK_BID(0, high | _SIGN_BIT if sign else high)


def _parts(bid: bytes) -> Tuple[bool, str, int, int]:
    """(negative, kind, coefficient, exponent); kind is 'F' finite, 'I' infinity, 'n'/'N' NaN/sNaN."""
    low, high = _UNPACK_BID(bid)
    negative = high >= _SIGN_BIT
    combination = (high >> 58) & 0x1F
    if combination == 0x1F:
        return negative, "N" if (high >> 57) & 1 else "n", 0, 0
    if combination == 0x1E:
        return negative, "I", 0, 0
    if (high >> 61) & 3 == 3:
        # The "11" form implies a coefficient of at least 2**113, above 10**34 - 1:
        # non-canonical, so the value is zero with this exponent.
        return negative, "F", 0, ((high >> 47) & 0x3FFF) - _EXPONENT_BIAS
    coefficient = ((high & _COEFFICIENT_HIGH_MASK) << 64) | low
    if coefficient > _MAX_COEFFICIENT:
        coefficient = 0
    return negative, "F", coefficient, ((high >> 49) & 0x3FFF) - _EXPONENT_BIAS


def _bid_to_string(bid: bytes) -> str:
    negative, kind, coefficient, exponent = _parts(bid)
    if kind != "F":
        if kind == "I":
            return "-Infinity" if negative else "Infinity"
        return "NaN"
    digits = str(coefficient)
    if exponent == 0:
        text = digits
    else:
        adjusted = exponent + len(digits) - 1
        if exponent > 0 or adjusted < -6:
            if len(digits) > 1:
                digits = digits[0] + "." + digits[1:]
            text = f"{digits}E+{adjusted}" if adjusted >= 0 else f"{digits}E{adjusted}"
        else:
            point = len(digits) + exponent
            if point > 0:
                text = digits[:point] + "." + digits[point:]
            else:
                text = "0." + "0" * -point + digits
    return "-" + text if negative else text


class Decimal128:
    """An immutable BSON Decimal128 value (BSON type 0x13).

    Construct from a numeric ``str`` (the spec's grammar), a ``decimal.Decimal``
    or a ``(high, low)`` pair of unsigned 64-bit integers; use
    :meth:`from_bid` for the 16 wire bytes. No arithmetic is offered, by spec:
    use :meth:`to_decimal` and build a new value.
    """

    __slots__ = ("_bid",)
    _bid: bytes
    _type_marker = 19

    def __init__(self, value: Union[str, decimal.Decimal, Tuple[int, int], List[int], "Decimal128"]) -> None:
        if isinstance(value, str):
            bid = _string_to_bid(value)
        elif isinstance(value, decimal.Decimal):
            bid = _decimal_to_bid(value)
        elif isinstance(value, (tuple, list)):
            if len(value) != 2:
                raise ValueError("a Decimal128 tuple must be (high, low): two 64-bit unsigned integers")
            high, low = value
            if not all(isinstance(part, int) and not isinstance(part, bool) for part in (high, low)):
                raise TypeError("a Decimal128 tuple must hold two ints (high, low)")
            if not (0 <= high <= _MASK64 and 0 <= low <= _MASK64):
                raise ValueError("a Decimal128 (high, low) pair must hold unsigned 64-bit integers")
            bid = _PACK_BID(low, high)
        elif isinstance(value, Decimal128):
            bid = value._bid
        else:
            raise TypeError(
                f"cannot convert {type(value).__name__} to Decimal128: use a str, decimal.Decimal "
                "or a (high, low) tuple")
        _set_bid(self, bid)

    @classmethod
    def from_bid(cls, value: bytes) -> "Decimal128":
        """The value whose 16 BID bytes, little-endian as on the wire, are ``value``."""
        if not isinstance(value, bytes):
            if not isinstance(value, (bytearray, memoryview)):
                raise TypeError(f"Decimal128.from_bid needs bytes, not {type(value).__name__}")
            value = bytes(value)
        if len(value) != 16:
            raise ValueError(f"Decimal128.from_bid needs exactly 16 bytes, got {len(value)}")
        obj = _new(cls)
        _set_bid(obj, value)
        return obj

    @property
    def bid(self) -> bytes:
        """The 16 BID bytes, little-endian (low 64 bits first), as on the wire."""
        return self._bid

    def to_decimal(self) -> decimal.Decimal:
        """The exact ``decimal.Decimal`` (NaN sign and signalling kept, payload dropped)."""
        negative, kind, coefficient, exponent = _parts(self._bid)
        sign = 1 if negative else 0
        if kind == "F":
            return decimal.Decimal((sign, tuple(map(int, str(coefficient))), exponent))
        # NaN/sNaN/Infinity as Decimal's special-value tuple (typeshed knows only finite ones).
        return decimal.Decimal((sign, (), kind if kind != "I" else "F"))  # type: ignore[arg-type]

    def __str__(self) -> str:
        return _bid_to_string(self._bid)

    def __repr__(self) -> str:
        return f"Decimal128('{_bid_to_string(self._bid)}')"

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, Decimal128):
            return self._bid == other._bid
        return NotImplemented

    def __ne__(self, other: Any) -> bool:
        if isinstance(other, Decimal128):
            return self._bid != other._bid
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._bid)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Decimal128 is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Decimal128 is immutable")

    def __getstate__(self) -> bytes:
        return self._bid

    def __setstate__(self, state: bytes) -> None:
        if not isinstance(state, bytes) or len(state) != 16:
            raise ValueError("invalid pickled Decimal128 state")
        _set_bid(self, state)

    def __copy__(self) -> "Decimal128":
        return self

    def __deepcopy__(self, memo: Any) -> "Decimal128":
        return self


# The slot's descriptor: the one way to set _bid past the immutable __setattr__.
_set_bid = Decimal128._bid.__set__  # type: ignore[misc,attr-defined]
_new = object.__new__


class DecimalEncoder(TypeEncoder):
    """A TypeEncoder writing ``decimal.Decimal`` as Decimal128::

        CodecOptions(type_registry=TypeRegistry([DecimalEncoder()]))
    """

    @property
    def python_type(self) -> type:
        return decimal.Decimal

    def transform_python(self, value: Any) -> Decimal128:
        return Decimal128(value)


class DecimalDecoder(TypeDecoder):
    """A TypeDecoder reading Decimal128 as ``decimal.Decimal`` (pair it with DecimalEncoder)."""

    @property
    def bson_type(self) -> type:
        return Decimal128

    def transform_bson(self, value: Any) -> decimal.Decimal:
        result: decimal.Decimal = value.to_decimal()
        return result
