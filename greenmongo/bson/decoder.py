"""The BSON decoder, in pure Python.

Decoding validates as it goes: every length is checked against its enclosing bounds, so
malformed input raises ``_Malformed`` (turned into ``InvalidBSON`` by the public entry points)
naming the problem and the byte offset, never another exception type. The common types are
decoded inline in the element loops; the rest through ``_DECODERS``. A C accelerator can
replace ``decode_document`` behind the same signature.
"""

from __future__ import annotations

import datetime
import struct
import uuid
import warnings
from collections.abc import Callable, MutableMapping
from typing import Any

from greenmongo.bson._extension import import_speedups
from greenmongo.bson.binary import (
    OLD_BINARY_SUBTYPE,
    OLD_UUID_SUBTYPE,
    UUID_SUBTYPE,
    Binary,
    UuidRepresentation,
)
from greenmongo.bson.code import Code
from greenmongo.bson.codec_options import CodecOptions
from greenmongo.bson.datetime_ms import (
    EPOCH_AWARE,
    EPOCH_NAIVE,
    DatetimeConversion,
    DatetimeMS,
)
from greenmongo.bson.dbref import DBRef
from greenmongo.bson.decimal128 import Decimal128
from greenmongo.bson.deprecated import UNDEFINED, DBPointer, Symbol
from greenmongo.bson.int64 import Int64
from greenmongo.bson.limits import MAX_NESTING_DEPTH
from greenmongo.bson.min_max import MaxKey, MinKey
from greenmongo.bson.objectid import ObjectId
from greenmongo.bson.regex import Regex
from greenmongo.bson.timestamp import Timestamp

_UNPACK_INT_FROM = struct.Struct("<i").unpack_from
_UNPACK_LONG_FROM = struct.Struct("<q").unpack_from
_UNPACK_DOUBLE_FROM = struct.Struct("<d").unpack_from
_UNPACK_UINT_PAIR_FROM = struct.Struct("<II").unpack_from


class _Malformed(Exception):
    """Internal: a structural problem found while decoding; becomes InvalidBSON with context."""


def _fail(message: str, position: int) -> _Malformed:
    return _Malformed(f"{message} at byte {position}")


def _read_cstring(data: bytes, pos: int, end: int, kind: str, name: str) -> tuple[str, int]:
    """A NUL-terminated UTF-8 string; ``kind``/``name`` only describe it in errors (built lazily)."""
    nul = data.find(b"\x00", pos, end)
    if nul < 0:
        raise _fail(f"{kind} {name!r} is not NUL-terminated", pos)
    try:
        return data[pos:nul].decode("utf-8"), nul + 1
    except UnicodeDecodeError as exc:
        raise _fail(f"{kind} {name!r} is not valid UTF-8 ({exc.reason})", pos + exc.start) from None


def _read_string(data: bytes, pos: int, end: int, opts: CodecOptions, kind: str, name: str) -> tuple[str, int]:
    """A length-prefixed BSON string, bounds-checked against ``end``."""
    if pos + 4 > end:
        raise _fail(f"{kind} {name!r} length runs past the end of its document", pos)
    length = _UNPACK_INT_FROM(data, pos)[0]
    start = pos + 4
    stop = start + length
    if length < 1 or stop > end:
        raise _fail(f"{kind} {name!r} has invalid length {length}", pos)
    if data[stop - 1] != 0:
        raise _fail(f"{kind} {name!r} is not NUL-terminated", stop - 1)
    try:
        return data[start:stop - 1].decode("utf-8", opts.unicode_decode_error_handler), stop
    except UnicodeDecodeError as exc:
        raise _fail(f"{kind} {name!r} is not valid UTF-8 ({exc.reason})", start + exc.start) from None


def _document_bounds(data: bytes, pos: int, end: int, kind: str, name: str) -> int:
    """Validate the length prefix and trailing NUL of an embedded document; return its end."""
    if pos + 5 > end:
        raise _fail(f"{kind} {name!r} is truncated", pos)
    length: int = _UNPACK_INT_FROM(data, pos)[0]
    stop = pos + length
    if length < 5 or stop > end:
        raise _fail(f"{kind} {name!r} has invalid length {length}", pos)
    if data[stop - 1] != 0:
        raise _fail(f"{kind} {name!r} is not NUL-terminated", stop - 1)
    return stop


def decode_document(data: bytes, pos: int, end: int, opts: CodecOptions, depth: int = 0) -> Any:
    """Decode the elements of the document occupying ``data[pos:end]`` (its envelope already checked).

    The common types are decoded inline (each avoided call is measurable); the rest go through
    ``_DECODERS``. Every read is bounds-checked against ``last``, the offset of the closing NUL.
    """
    if depth > MAX_NESTING_DEPTH:
        raise _fail(f"documents nest deeper than {MAX_NESTING_DEPTH} levels", pos)
    # dict, a MutableMapping subclass or RawBSONDocument (whose constructor takes the bytes).
    doc_class: Any = opts.document_class
    doc: MutableMapping[str, Any]
    if doc_class is dict:
        doc = {}
    elif getattr(doc_class, "_type_marker", None) == 101:  # RawBSONDocument: stays raw, decoded lazily
        if depth >= 0:
            return doc_class(data[pos:end], opts)
        doc = {}  # depth -1: a RawBSONDocument inflating its own top level
    else:
        doc = doc_class()
    pos += 4
    last = end - 1
    handler = opts.unicode_decode_error_handler
    unpack_int = _UNPACK_INT_FROM
    find = data.find
    depth1 = depth + 1
    while pos < last:
        element_type = data[pos]
        nul = find(b"\x00", pos + 1, last)
        if nul < 0:
            raise _fail("element name is not NUL-terminated", pos + 1)
        try:
            name = data[pos + 1:nul].decode()
        except UnicodeDecodeError as exc:
            raise _fail(f"element name is not valid UTF-8 ({exc.reason})", pos + 1 + exc.start) from None
        pos = nul + 1
        if element_type == 0x02:  # string
            if pos + 4 > last:
                raise _fail(f"string {name!r} is truncated", pos)
            length = unpack_int(data, pos)[0]
            stop = pos + 4 + length
            if length < 1 or stop > last or data[stop - 1] != 0:
                raise _fail(f"string {name!r} has invalid length {length} or no NUL", pos)
            try:
                doc[name] = data[pos + 4:stop - 1].decode("utf-8", handler)
            except UnicodeDecodeError as exc:
                raise _fail(f"string {name!r} is not valid UTF-8 ({exc.reason})", pos + 4 + exc.start) from None
            pos = stop
        elif element_type == 0x10:  # int32
            if pos + 4 > last:
                raise _fail(f"int32 {name!r} is truncated", pos)
            doc[name] = unpack_int(data, pos)[0]
            pos += 4
        elif element_type == 0x03:  # embedded document
            if pos + 5 > last:
                raise _fail(f"document {name!r} is truncated", pos)
            stop = pos + unpack_int(data, pos)[0]
            if stop < pos + 5 or stop > last or data[stop - 1] != 0:
                raise _fail(f"document {name!r} has an invalid length or no terminating NUL", pos)
            doc[name] = decode_document(data, pos, stop, opts, depth1)
            pos = stop
        elif element_type == 0x01:  # double
            if pos + 8 > last:
                raise _fail(f"double {name!r} is truncated", pos)
            doc[name] = _UNPACK_DOUBLE_FROM(data, pos)[0]
            pos += 8
        elif element_type == 0x08:  # bool
            byte = data[pos] if pos < last else -1
            if byte == 1:
                doc[name] = True
            elif byte == 0:
                doc[name] = False
            else:
                raise _fail(f"boolean {name!r} is truncated or not 0/1", pos)
            pos += 1
        elif element_type == 0x12:  # int64
            if pos + 8 > last:
                raise _fail(f"int64 {name!r} is truncated", pos)
            doc[name] = Int64(_UNPACK_LONG_FROM(data, pos)[0])
            pos += 8
        elif element_type == 0x04:  # array
            if pos + 5 > last:
                raise _fail(f"array {name!r} is truncated", pos)
            stop = pos + unpack_int(data, pos)[0]
            if stop < pos + 5 or stop > last or data[stop - 1] != 0:
                raise _fail(f"array {name!r} has an invalid length or no terminating NUL", pos)
            doc[name] = decode_array(data, pos, stop, opts, depth1)
            pos = stop
        elif element_type == 0x07:  # ObjectId
            if pos + 12 > last:
                raise _fail(f"ObjectId {name!r} is truncated", pos)
            doc[name] = ObjectId._from_bytes(data[pos:pos + 12])
            pos += 12
        elif element_type == 0x0A:  # null
            doc[name] = None
        else:
            decoder = _DECODERS.get(element_type)
            if decoder is None:
                raise _fail(f"unknown BSON type 0x{element_type:02x} for field {name!r}", nul - len(name) - 1)
            doc[name], pos = decoder(data, pos, last, opts, name, depth)
    if pos != last:
        raise _fail("element runs past the end of its document", pos)
    decoders = opts.type_registry._decoder_map
    if decoders:
        _apply_decoders(doc, decoders)
    if depth > 0 and "$ref" in doc:  # an embedded document may be a DBRef; the top level never is
        return _maybe_dbref(doc)
    return doc


def _apply_decoders(container: Any, decoders: dict[Any, Callable[[Any], Any]]) -> None:
    """Custom TypeDecoders, applied to a freshly decoded document's (or list's) own values."""
    pairs = enumerate(container) if isinstance(container, list) else list(container.items())
    for key, value in pairs:
        transform = decoders.get(type(value))
        if transform is not None:
            container[key] = transform(value)


def decode_array(data: bytes, pos: int, end: int, opts: CodecOptions, depth: int) -> list[Any]:
    """Arrays decode like documents but keep only the values (keys are not checked, per the corpus)."""
    if depth > MAX_NESTING_DEPTH:
        raise _fail(f"documents nest deeper than {MAX_NESTING_DEPTH} levels", pos)
    values: list[Any] = []
    append = values.append
    pos += 4
    last = end - 1
    handler = opts.unicode_decode_error_handler
    unpack_int = _UNPACK_INT_FROM
    find = data.find
    depth1 = depth + 1
    while pos < last:
        element_type = data[pos]
        nul = find(b"\x00", pos + 1, last)
        if nul < 0:
            raise _fail("array index is not NUL-terminated", pos + 1)
        pos = nul + 1
        if element_type == 0x02:
            if pos + 4 > last:
                raise _fail("string in array is truncated", pos)
            length = unpack_int(data, pos)[0]
            stop = pos + 4 + length
            if length < 1 or stop > last or data[stop - 1] != 0:
                raise _fail(f"string in array has invalid length {length} or no NUL", pos)
            try:
                append(data[pos + 4:stop - 1].decode("utf-8", handler))
            except UnicodeDecodeError as exc:
                raise _fail(f"string in array is not valid UTF-8 ({exc.reason})", pos + 4 + exc.start) from None
            pos = stop
        elif element_type == 0x10:
            if pos + 4 > last:
                raise _fail("int32 in array is truncated", pos)
            append(unpack_int(data, pos)[0])
            pos += 4
        elif element_type == 0x03:
            if pos + 5 > last:
                raise _fail("document in array is truncated", pos)
            stop = pos + unpack_int(data, pos)[0]
            if stop < pos + 5 or stop > last or data[stop - 1] != 0:
                raise _fail("document in array has an invalid length or no terminating NUL", pos)
            append(decode_document(data, pos, stop, opts, depth1))
            pos = stop
        elif element_type == 0x01:
            if pos + 8 > last:
                raise _fail("double in array is truncated", pos)
            append(_UNPACK_DOUBLE_FROM(data, pos)[0])
            pos += 8
        else:
            decoder = _DECODERS.get(element_type)
            if decoder is None:
                raise _fail(f"unknown BSON type 0x{element_type:02x} in array", nul - 1)
            value, pos = decoder(data, pos, last, opts, "array element", depth)
            append(value)
    if pos != last:
        raise _fail("element runs past the end of its array", pos)
    decoders = opts.type_registry._decoder_map
    if decoders:
        _apply_decoders(values, decoders)
    return values


def _maybe_dbref(doc: Any) -> Any:
    """A subdocument with a string $ref, an $id, and (if present) a string $db is a DBRef (DBRef spec)."""
    if not isinstance(doc, dict):
        return doc
    ref = doc.get("$ref")
    if type(ref) is not str or "$id" not in doc:
        return doc
    database = doc.get("$db")
    if "$db" in doc and type(database) is not str:
        return doc
    extra = {k: v for k, v in doc.items() if k not in ("$ref", "$id", "$db")}
    return DBRef(ref, doc["$id"], database, _extra=extra)


# Each decoder takes (data, pos, end, opts, name, depth) and returns (value, new_pos);
# ``end`` is the offset of the enclosing document's terminating NUL.

def _dec_double(data: bytes, pos: int, end: int, opts: CodecOptions, name: str, depth: int) -> Any:
    if pos + 8 > end:
        raise _fail(f"double {name!r} is truncated", pos)
    return _UNPACK_DOUBLE_FROM(data, pos)[0], pos + 8


def _dec_string(data: bytes, pos: int, end: int, opts: CodecOptions, name: str, depth: int) -> Any:
    return _read_string(data, pos, end, opts, "string", name)


def _dec_document(data: bytes, pos: int, end: int, opts: CodecOptions, name: str, depth: int) -> Any:
    stop = _document_bounds(data, pos, end, "document", name)
    return decode_document(data, pos, stop, opts, depth + 1), stop


def _dec_array(data: bytes, pos: int, end: int, opts: CodecOptions, name: str, depth: int) -> Any:
    stop = _document_bounds(data, pos, end, "array", name)
    return decode_array(data, pos, stop, opts, depth + 1), stop


def _dec_binary(data: bytes, pos: int, end: int, opts: CodecOptions, name: str, depth: int) -> Any:
    if pos + 5 > end:
        raise _fail(f"binary {name!r} is truncated", pos)
    length = _UNPACK_INT_FROM(data, pos)[0]
    subtype = data[pos + 4]
    start = pos + 5
    stop = start + length
    if length < 0 or stop > end:
        raise _fail(f"binary {name!r} has invalid length {length}", pos)
    if subtype == OLD_BINARY_SUBTYPE:
        if length < 4:
            raise _fail(f"old binary {name!r} is too short for its inner length", pos)
        inner = _UNPACK_INT_FROM(data, start)[0]
        if inner != length - 4:
            raise _fail(f"old binary {name!r} inner length {inner} does not match {length - 4}", start)
        start += 4
    value = data[start:stop]
    if subtype == 0:
        return value, stop
    if length == 16 and subtype in (UUID_SUBTYPE, OLD_UUID_SUBTYPE):
        representation = opts.uuid_representation
        if subtype == UUID_SUBTYPE and representation == UuidRepresentation.STANDARD:
            return uuid.UUID(bytes=value), stop
        if subtype == OLD_UUID_SUBTYPE and representation in (
                UuidRepresentation.PYTHON_LEGACY, UuidRepresentation.JAVA_LEGACY,
                UuidRepresentation.CSHARP_LEGACY):
            return Binary(value, subtype).as_uuid(representation), stop
    return Binary(value, subtype), stop


def _dec_undefined(data: bytes, pos: int, end: int, opts: CodecOptions, name: str, depth: int) -> Any:
    return UNDEFINED, pos


def _dec_objectid(data: bytes, pos: int, end: int, opts: CodecOptions, name: str, depth: int) -> Any:
    if pos + 12 > end:
        raise _fail(f"ObjectId {name!r} is truncated", pos)
    return ObjectId._from_bytes(data[pos:pos + 12]), pos + 12


def _dec_bool(data: bytes, pos: int, end: int, opts: CodecOptions, name: str, depth: int) -> Any:
    if pos + 1 > end:
        raise _fail(f"boolean {name!r} is truncated", pos)
    byte = data[pos]
    if byte > 1:
        raise _fail(f"boolean {name!r} has invalid value {byte}", pos)
    return byte == 1, pos + 1


def _dec_datetime(data: bytes, pos: int, end: int, opts: CodecOptions, name: str, depth: int) -> Any:
    if pos + 8 > end:
        raise _fail(f"datetime {name!r} is truncated", pos)
    millis = _UNPACK_LONG_FROM(data, pos)[0]
    return _millis_to_value(millis, opts, name, pos), pos + 8


_MIN_DATETIME_MS = -62135596800000
_MAX_DATETIME_MS = 253402300799999


def _millis_to_value(millis: int, opts: CodecOptions, name: str, pos: int) -> Any:
    conversion = opts.datetime_conversion
    if conversion == DatetimeConversion.DATETIME_MS:
        return DatetimeMS(millis)
    if not _MIN_DATETIME_MS <= millis <= _MAX_DATETIME_MS:
        if conversion == DatetimeConversion.DATETIME_AUTO:
            return DatetimeMS(millis)
        if conversion == DatetimeConversion.DATETIME_CLAMP:
            millis = min(max(millis, _MIN_DATETIME_MS), _MAX_DATETIME_MS)
        else:
            raise _fail(f"datetime {name!r} ({millis} ms) is out of datetime.datetime's range; decode it "
                        "with CodecOptions(datetime_conversion=DatetimeConversion.DATETIME_AUTO) or "
                        "DATETIME_MS", pos)
    seconds, ms = divmod(millis, 1000)
    delta = datetime.timedelta(seconds=seconds, milliseconds=ms)
    if opts.tz_aware:
        value = EPOCH_AWARE + delta
        if opts.tzinfo is not None:
            try:
                value = value.astimezone(opts.tzinfo)
            except OverflowError:
                raise _fail(f"datetime {name!r} overflows in time zone {opts.tzinfo}", pos) from None
        return value
    return EPOCH_NAIVE + delta


def _dec_null(data: bytes, pos: int, end: int, opts: CodecOptions, name: str, depth: int) -> Any:
    return None, pos


def _dec_regex(data: bytes, pos: int, end: int, opts: CodecOptions, name: str, depth: int) -> Any:
    pattern, pos = _read_cstring(data, pos, end, "regex pattern", name)
    flags, pos = _read_cstring(data, pos, end, "regex flags", name)
    return Regex(pattern, flags), pos


def _dec_dbpointer(data: bytes, pos: int, end: int, opts: CodecOptions, name: str, depth: int) -> Any:
    namespace, pos = _read_string(data, pos, end, opts, "DBPointer namespace", name)
    if pos + 12 > end:
        raise _fail(f"DBPointer {name!r} ObjectId is truncated", pos)
    return DBPointer(namespace, ObjectId._from_bytes(data[pos:pos + 12])), pos + 12


def _dec_code(data: bytes, pos: int, end: int, opts: CodecOptions, name: str, depth: int) -> Any:
    code, pos = _read_string(data, pos, end, opts, "code", name)
    return Code._from_wire(code, None), pos


def _dec_symbol(data: bytes, pos: int, end: int, opts: CodecOptions, name: str, depth: int) -> Any:
    text, pos = _read_string(data, pos, end, opts, "symbol", name)
    return Symbol(text), pos


def _dec_code_w_scope(data: bytes, pos: int, end: int, opts: CodecOptions, name: str, depth: int) -> Any:
    if pos + 4 > end:
        raise _fail(f"code with scope {name!r} is truncated", pos)
    total = _UNPACK_INT_FROM(data, pos)[0]
    stop = pos + total
    if total < 14 or stop > end:
        raise _fail(f"code with scope {name!r} has invalid length {total}", pos)
    code, scope_pos = _read_string(data, pos + 4, stop, opts, "code with scope", name)
    scope_end = _document_bounds(data, scope_pos, stop, "scope of", name)
    if scope_end != stop:
        raise _fail(f"code with scope {name!r} length {total} does not match its contents", pos)
    scope = decode_document(data, scope_pos, scope_end, opts, depth + 1)
    if type(scope) is DBRef:  # a scope is a plain document even when it looks like a DBRef
        scope = scope.as_doc()
    return Code._from_wire(code, scope), stop


def _dec_int32(data: bytes, pos: int, end: int, opts: CodecOptions, name: str, depth: int) -> Any:
    if pos + 4 > end:
        raise _fail(f"int32 {name!r} is truncated", pos)
    return _UNPACK_INT_FROM(data, pos)[0], pos + 4


def _dec_timestamp(data: bytes, pos: int, end: int, opts: CodecOptions, name: str, depth: int) -> Any:
    if pos + 8 > end:
        raise _fail(f"timestamp {name!r} is truncated", pos)
    inc, time = _UNPACK_UINT_PAIR_FROM(data, pos)
    return Timestamp._from_wire(time, inc), pos + 8


def _dec_int64(data: bytes, pos: int, end: int, opts: CodecOptions, name: str, depth: int) -> Any:
    if pos + 8 > end:
        raise _fail(f"int64 {name!r} is truncated", pos)
    return Int64(_UNPACK_LONG_FROM(data, pos)[0]), pos + 8


def _dec_decimal128(data: bytes, pos: int, end: int, opts: CodecOptions, name: str, depth: int) -> Any:
    if pos + 16 > end:
        raise _fail(f"Decimal128 {name!r} is truncated", pos)
    return Decimal128.from_bid(data[pos:pos + 16]), pos + 16


def _dec_minkey(data: bytes, pos: int, end: int, opts: CodecOptions, name: str, depth: int) -> Any:
    return MinKey(), pos


def _dec_maxkey(data: bytes, pos: int, end: int, opts: CodecOptions, name: str, depth: int) -> Any:
    return MaxKey(), pos


_DECODERS: dict[int, Callable[..., tuple[Any, int]]] = {
    0x01: _dec_double, 0x02: _dec_string, 0x03: _dec_document, 0x04: _dec_array, 0x05: _dec_binary,
    0x06: _dec_undefined, 0x07: _dec_objectid, 0x08: _dec_bool, 0x09: _dec_datetime, 0x0A: _dec_null,
    0x0B: _dec_regex, 0x0C: _dec_dbpointer, 0x0D: _dec_code, 0x0E: _dec_symbol, 0x0F: _dec_code_w_scope,
    0x10: _dec_int32, 0x11: _dec_timestamp, 0x12: _dec_int64, 0x13: _dec_decimal128, 0xFF: _dec_minkey,
    0x7F: _dec_maxkey,
}




# -- the optional C accelerator (_speedups.c) -------------------------------------------------------
# It reimplements decode_document with the same values and errors, delegating to the functions above
# for anything it does not handle. ``_py_decode_document`` stays the pure entry point (tests compare
# the two). GREENMONGO_NO_EXTENSIONS=1 forces the pure path.

_py_decode_document = decode_document


def _load_speedups() -> Any:
    _speedups = import_speedups()
    if _speedups is None:
        return None
    from greenmongo.bson.regex import _FLAG_BITS

    try:
        _speedups._init_decoder({
            "_Malformed": _Malformed, "decode_document": _py_decode_document, "_apply_decoders": _apply_decoders,
            "_maybe_dbref": _maybe_dbref, "CodecOptions": CodecOptions, "MAX_NESTING_DEPTH": MAX_NESTING_DEPTH,
            "ObjectId": ObjectId, "Int64": Int64, "Timestamp": Timestamp, "Binary": Binary, "Decimal128": Decimal128,
            "Regex": Regex, "Code": Code, "DBRef": DBRef, "MinKey": MinKey, "MaxKey": MaxKey, "Symbol": Symbol,
            "DBPointer": DBPointer, "UNDEFINED": UNDEFINED, "DatetimeMS": DatetimeMS, "UUID": uuid.UUID,
            "_FLAG_BITS": _FLAG_BITS,
        })
    except Exception as exc:  # a module built from other sources than these: stay correct, say so
        warnings.warn(f"greenmongo.bson: C extension disabled, using the pure-Python codec: {exc}",
                      RuntimeWarning, stacklevel=2)
        return None
    return _speedups


_speedups = _load_speedups()
if _speedups is not None:
    decode_document = _speedups.decode_document  # noqa: F811
