"""The BSON encoder and decoder, in pure Python.

Built for speed without a C extension: precompiled ``struct`` functions bound
to module globals, the common types (str, int, float, dict, list, bool, None)
handled inline, the rest through dispatch tables keyed by exact type (then by
``_type_marker``, then by ``isinstance`` as the slow path). A C accelerator can
later replace ``encode_document`` / ``decode_document`` behind the same
signatures.

Decoding validates as it goes: every length is checked against its enclosing
bounds, so malformed input raises ``InvalidBSON`` naming the problem and the
byte offset, never another exception type.
"""

from __future__ import annotations

import datetime
import re
import struct
import uuid
from collections.abc import Mapping as _MappingABC
from typing import Any, Callable, Iterator, Mapping, Optional

from greenmongo.bson.binary import (
    OLD_BINARY_SUBTYPE,
    OLD_UUID_SUBTYPE,
    UUID_SUBTYPE,
    Binary,
    UuidRepresentation,
)
from greenmongo.bson.code import Code
from greenmongo.bson.codec_options import DEFAULT_CODEC_OPTIONS, CodecOptions
from greenmongo.bson.datetime_ms import (
    EPOCH_AWARE,
    EPOCH_NAIVE,
    DatetimeConversion,
    DatetimeMS,
    datetime_to_millis,
)
from greenmongo.bson.dbref import DBRef
from greenmongo.bson.decimal128 import Decimal128
from greenmongo.bson.deprecated import UNDEFINED, DBPointer, Symbol, Undefined
from greenmongo.bson.int64 import Int64
from greenmongo.bson.min_max import MaxKey, MinKey
from greenmongo.bson.objectid import ObjectId
from greenmongo.bson.regex import Regex, int_flags_to_str
from greenmongo.bson.timestamp import Timestamp
from greenmongo.errors import InvalidBSON, InvalidDocument

_PACK_INT = struct.Struct("<i").pack
_PACK_LONG = struct.Struct("<q").pack
_PACK_DOUBLE = struct.Struct("<d").pack
_PACK_UINT_PAIR = struct.Struct("<II").pack
_UNPACK_INT_FROM = struct.Struct("<i").unpack_from
_UNPACK_LONG_FROM = struct.Struct("<q").unpack_from
_UNPACK_DOUBLE_FROM = struct.Struct("<d").unpack_from
_UNPACK_UINT_PAIR_FROM = struct.Struct("<II").unpack_from

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

#: Deep enough for anything a server stores (it caps nesting near 200); a guard against depth bombs.
MAX_NESTING_DEPTH = 400

#: Array keys are the decimal indexes: build the common ones once.
_INDEX_KEYS = [str(i).encode() + b"\x00" for i in range(1024)]

_RE_TYPE = type(re.compile(""))
_UTC = datetime.timezone.utc


# =============================================================================
# Encoding
# =============================================================================

#: str key -> its cstring bytes. Field names repeat across documents, so this saves most key
#: encoding; bounded so a stream of unique keys cannot grow it without limit.
_KEY_CACHE: dict[str, bytes] = {}
_KEY_CACHE_MAX = 8192
_NO_CACHE_GET = {}.get  # with check_keys every key takes the validating path


def _key_cstring(key: Any, check_keys: bool) -> bytes:
    """The element name as a NUL-terminated cstring, validated (slow path: cache misses and check_keys)."""
    if not isinstance(key, str):
        raise InvalidDocument(f"documents must have only string keys, key was {key!r}")
    if check_keys:
        if key.startswith("$"):
            raise InvalidDocument(f"key {key!r} must not start with '$'")
        if "." in key:
            raise InvalidDocument(f"key {key!r} must not contain '.'")
    name = _encode_text(key, "key")
    if b"\x00" in name:
        raise InvalidDocument(f"key {key!r} must not contain a NUL character")
    cstring = name + b"\x00"
    if not check_keys and type(key) is str:
        if len(_KEY_CACHE) >= _KEY_CACHE_MAX:
            _KEY_CACHE.clear()
        _KEY_CACHE[key] = cstring
    return cstring


def _encode_text(value: str, what: str) -> bytes:
    try:
        return value.encode("utf-8", "strict")
    except UnicodeEncodeError as exc:
        raise InvalidDocument(f"{what} {value!r} is not valid UTF-8: {exc.reason}") from None


def encode_document(doc: Any, check_keys: bool, opts: CodecOptions, top_level: bool = True,
                    depth: int = 0) -> bytes:
    """BSON bytes for one document (a Mapping or RawBSONDocument).

    Pieces go into one flat list joined once at the end: cheaper than concatenating each element.
    """
    if type(doc) is not dict:
        if getattr(doc, "_type_marker", None) == 101:  # RawBSONDocument: already BSON
            return doc.raw
        if not isinstance(doc, _MappingABC) and not hasattr(doc, "items"):
            raise TypeError(f"encoder expected a mapping type but got {doc!r}")
    if not doc:
        return b"\x05\x00\x00\x00\x00"
    if depth > MAX_NESTING_DEPTH:
        raise InvalidDocument(f"document nests deeper than {MAX_NESTING_DEPTH} levels (a reference cycle?)")
    parts: list[bytes] = [b""]
    append = parts.append
    items = doc.items()
    if top_level and "_id" in doc and next(iter(doc)) != "_id":  # the server wants _id first
        append(_element(b"_id\x00", doc["_id"], check_keys, opts, depth + 1))
        items = [(k, v) for k, v in items if k != "_id"]
    key_get = _NO_CACHE_GET if check_keys else _KEY_CACHE.get
    pack_int = _PACK_INT
    pack_double = _PACK_DOUBLE
    pack_long = _PACK_LONG
    encoders_get = _ENCODERS.get
    depth1 = depth + 1
    for key, value in items:
        name = key_get(key)
        if name is None:
            name = _key_cstring(key, check_keys)
        t = type(value)
        if t is str:
            try:
                data = value.encode()
            except UnicodeEncodeError:
                data = _encode_text(value, "string")
            append(b"\x02")
            append(name)
            append(pack_int(len(data) + 1))
            append(data)
            append(b"\x00")
        elif t is int:
            if -2147483648 <= value <= 2147483647:
                append(b"\x10")
                append(name)
                append(pack_int(value))
            else:
                append(_enc_int64(name, value))
        elif t is float:
            append(b"\x01")
            append(name)
            append(pack_double(value))
        elif t is dict:
            append(b"\x03")
            append(name)
            append(encode_document(value, check_keys, opts, False, depth1))
        elif t is bool:
            append(b"\x08")
            append(name)
            append(b"\x01" if value else b"\x00")
        elif t is Int64:
            append(b"\x12")
            append(name)
            append(pack_long(value))
        elif t is list:
            append(b"\x04")
            append(name)
            append(_encode_array(value, check_keys, opts, depth1))
        elif value is None:
            append(b"\x0a")
            append(name)
        else:
            encoder = encoders_get(t)
            if encoder is not None:
                append(encoder(name, value, check_keys, opts, depth1))
            else:
                append(_element(name, value, check_keys, opts, depth1))
    append(b"\x00")
    body = b"".join(parts)
    return pack_int(len(body) + 4) + body


def _encode_array(values: Any, check_keys: bool, opts: CodecOptions, depth: int) -> bytes:
    if depth > MAX_NESTING_DEPTH:
        raise InvalidDocument(f"document nests deeper than {MAX_NESTING_DEPTH} levels (a reference cycle?)")
    parts: list[bytes] = []
    append = parts.append
    pack_int = _PACK_INT
    index_keys = _INDEX_KEYS
    depth1 = depth + 1
    for i, value in enumerate(values):
        name = index_keys[i] if i < 1024 else str(i).encode() + b"\x00"
        t = type(value)
        if t is str:
            try:
                data = value.encode()
            except UnicodeEncodeError:
                data = _encode_text(value, "string")
            append(b"\x02")
            append(name)
            append(pack_int(len(data) + 1))
            append(data)
            append(b"\x00")
        elif t is int and -2147483648 <= value <= 2147483647:
            append(b"\x10")
            append(name)
            append(pack_int(value))
        elif t is float:
            append(b"\x01")
            append(name)
            append(_PACK_DOUBLE(value))
        elif t is dict:
            append(b"\x03")
            append(name)
            append(encode_document(value, check_keys, opts, False, depth1))
        else:
            append(_element(name, value, check_keys, opts, depth1))
    append(b"\x00")
    body = b"".join(parts)
    return pack_int(len(body) + 4) + body


# Each encoder takes (name, value, check_keys, opts, depth) and returns the whole element,
# where ``name`` is the key's NUL-terminated cstring.

def _enc_float(name: bytes, value: Any, *_: Any) -> bytes:
    return b"\x01" + name + _PACK_DOUBLE(value)


def _enc_str(name: bytes, value: str, *_: Any) -> bytes:
    data = _encode_text(value, "string")
    return b"\x02" + name + _PACK_INT(len(data) + 1) + data + b"\x00"


def _enc_symbol(name: bytes, value: str, *_: Any) -> bytes:
    data = _encode_text(value, "symbol")
    return b"\x0e" + name + _PACK_INT(len(data) + 1) + data + b"\x00"


def _enc_mapping(name: bytes, value: Any, check_keys: bool, opts: CodecOptions, depth: int) -> bytes:
    return b"\x03" + name + encode_document(value, check_keys, opts, False, depth)


def _enc_list(name: bytes, value: Any, check_keys: bool, opts: CodecOptions, depth: int) -> bytes:
    return b"\x04" + name + _encode_array(value, check_keys, opts, depth)


def _enc_bytes(name: bytes, value: bytes, *_: Any) -> bytes:
    return b"\x05" + name + _PACK_INT(len(value)) + b"\x00" + bytes(value)


_SUBTYPE_BYTES = [bytes((i,)) for i in range(256)]


def _enc_binary(name: bytes, value: Binary, *_: Any) -> bytes:
    subtype = value.subtype
    if subtype == OLD_BINARY_SUBTYPE:
        return b"\x05" + name + _PACK_INT(len(value) + 4) + b"\x02" + _PACK_INT(len(value)) + value
    return b"\x05" + name + _PACK_INT(len(value)) + _SUBTYPE_BYTES[subtype] + value


def _enc_uuid(name: bytes, value: uuid.UUID, check_keys: bool, opts: CodecOptions, depth: int) -> bytes:
    representation = opts.uuid_representation
    if representation == UuidRepresentation.UNSPECIFIED:
        raise InvalidDocument(
            "cannot encode a native uuid.UUID with UuidRepresentation.UNSPECIFIED: set uuid_representation "
            "in CodecOptions (or uuidRepresentation in the URI), or wrap it with Binary.from_uuid()")
    return _enc_binary(name, Binary.from_uuid(value, representation))


def _enc_objectid(name: bytes, value: ObjectId, *_: Any) -> bytes:
    return b"\x07" + name + value.binary


def _enc_bool(name: bytes, value: bool, *_: Any) -> bytes:
    return b"\x08" + name + (b"\x01" if value else b"\x00")


def _enc_datetime(name: bytes, value: datetime.datetime, *_: Any) -> bytes:
    return b"\x09" + name + _PACK_LONG(datetime_to_millis(value))


def _enc_datetime_ms(name: bytes, value: DatetimeMS, *_: Any) -> bytes:
    return b"\x09" + name + _PACK_LONG(int(value))


def _enc_none(name: bytes, *_: Any) -> bytes:
    return b"\x0a" + name


def _cstring(value: str, what: str) -> bytes:
    data = _encode_text(value, what)
    if b"\x00" in data:
        raise InvalidDocument(f"{what} {value!r} must not contain a NUL character")
    return data + b"\x00"


def _enc_regex(name: bytes, value: Any, *_: Any) -> bytes:
    flags = value.flags
    letters = "".join(sorted(flags)) if isinstance(flags, str) else int_flags_to_str(flags)
    pattern = value.pattern
    if isinstance(pattern, bytes):
        pattern = pattern.decode("utf-8")
    return b"\x0b" + name + _cstring(pattern, "regex pattern") + _cstring(letters, "regex flags")


def _enc_dbpointer(name: bytes, value: DBPointer, *_: Any) -> bytes:
    data = _encode_text(value.namespace, "DBPointer namespace")
    return b"\x0c" + name + _PACK_INT(len(data) + 1) + data + b"\x00" + value.id.binary


def _enc_code(name: bytes, value: Code, check_keys: bool, opts: CodecOptions, depth: int) -> bytes:
    try:
        data = value.encode()
    except UnicodeEncodeError:
        data = _encode_text(value, "code")
    scope = value.scope
    if scope is None:
        return b"\x0d" + name + _PACK_INT(len(data) + 1) + data + b"\x00"
    scope = encode_document(scope, False, opts, False, depth)
    return b"".join((b"\x0f", name, _PACK_INT(len(data) + len(scope) + 9), _PACK_INT(len(data) + 1), data,
                     b"\x00", scope))


def _enc_int(name: bytes, value: int, *_: Any) -> bytes:
    if _INT32_MIN <= value <= _INT32_MAX:
        return b"\x10" + name + _PACK_INT(value)
    return _enc_int64(name, value)


def _enc_int64(name: bytes, value: int, *_: Any) -> bytes:
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise OverflowError("BSON can only handle up to 8-byte ints")
    return b"\x12" + name + _PACK_LONG(value)


def _enc_timestamp(name: bytes, value: Timestamp, *_: Any) -> bytes:
    return b"\x11" + name + _PACK_UINT_PAIR(*value._inc_time())


def _enc_decimal128(name: bytes, value: Decimal128, *_: Any) -> bytes:
    return b"\x13" + name + value.bid


def _enc_minkey(name: bytes, *_: Any) -> bytes:
    return b"\xff" + name


def _enc_maxkey(name: bytes, *_: Any) -> bytes:
    return b"\x7f" + name


def _enc_undefined(name: bytes, *_: Any) -> bytes:
    return b"\x06" + name


def _enc_dbref(name: bytes, value: DBRef, check_keys: bool, opts: CodecOptions, depth: int) -> bytes:
    return b"\x03" + name + encode_document(value.as_doc(), False, opts, False, depth)


def _enc_raw(name: bytes, value: Any, *_: Any) -> bytes:
    return b"\x03" + name + value.raw


#: Exact Python type -> element encoder.
_ENCODERS: dict[type, Callable[..., bytes]] = {
    bool: _enc_bool,
    bytes: _enc_bytes,
    datetime.datetime: _enc_datetime,
    dict: _enc_mapping,
    float: _enc_float,
    int: _enc_int,
    list: _enc_list,
    str: _enc_str,
    tuple: _enc_list,
    type(None): _enc_none,
    uuid.UUID: _enc_uuid,
    Binary: _enc_binary,
    Code: _enc_code,
    DBPointer: _enc_dbpointer,
    DBRef: _enc_dbref,
    DatetimeMS: _enc_datetime_ms,
    Decimal128: _enc_decimal128,
    Int64: _enc_int64,
    MaxKey: _enc_maxkey,
    MinKey: _enc_minkey,
    ObjectId: _enc_objectid,
    Regex: _enc_regex,
    _RE_TYPE: _enc_regex,
    Symbol: _enc_symbol,
    Timestamp: _enc_timestamp,
    Undefined: _enc_undefined,
}

#: ``_type_marker`` -> encoder, for subclasses of our own types.
_MARKERS: dict[int, Callable[..., bytes]] = {
    5: _enc_binary, 6: _enc_undefined, 7: _enc_objectid, 9: _enc_datetime_ms, 11: _enc_regex,
    12: _enc_dbpointer, 13: _enc_code, 14: _enc_symbol, 17: _enc_timestamp, 18: _enc_int64,
    19: _enc_decimal128, 100: _enc_dbref, 127: _enc_maxkey, 255: _enc_minkey,
}

#: Types that decide their own encoding; a TypeRegistry may not override them.
BUILTIN_ENCODED_TYPES = tuple(_ENCODERS)

# isinstance fallbacks, most specific first (bool before int).
_ISINSTANCE_ORDER: tuple[tuple[type, Callable[..., bytes]], ...] = (
    (bool, _enc_bool), (int, _enc_int), (float, _enc_float), (str, _enc_str), (bytes, _enc_bytes),
    (datetime.datetime, _enc_datetime), (uuid.UUID, _enc_uuid), (_MappingABC, _enc_mapping),
    (list, _enc_list), (tuple, _enc_list), (bytearray, _enc_bytes), (memoryview, _enc_bytes),
)


def _element(name: bytes, value: Any, check_keys: bool, opts: CodecOptions, depth: int) -> bytes:
    """Encode one element of any type: exact type, marker, custom encoder, isinstance, fallback."""
    encoder = _ENCODERS.get(type(value))
    if encoder is not None:
        return encoder(name, value, check_keys, opts, depth)
    marker = getattr(value, "_type_marker", None)
    if isinstance(marker, int) and marker in _MARKERS:
        return _MARKERS[marker](name, value, check_keys, opts, depth)
    if marker == 101:  # RawBSONDocument
        return _enc_raw(name, value)
    registry = opts.type_registry
    if registry._encoder_map:
        transform = registry._encoder_map.get(type(value))
        if transform is not None:
            return _element_no_custom(name, transform(value), check_keys, opts, depth)
    for base, encoder in _ISINSTANCE_ORDER:
        if isinstance(value, base):
            return encoder(name, value, check_keys, opts, depth)
    if registry._fallback_encoder is not None:
        return _element_no_custom(name, registry._fallback_encoder(value), check_keys, opts, depth)
    raise InvalidDocument(f"cannot encode object: {value!r}, of type: {type(value)}")


def _element_no_custom(name: bytes, value: Any, check_keys: bool, opts: CodecOptions, depth: int) -> bytes:
    """Encode the output of a custom encoder without consulting the registry again (no loops)."""
    encoder = _ENCODERS.get(type(value))
    if encoder is not None:
        return encoder(name, value, check_keys, opts, depth)
    marker = getattr(value, "_type_marker", None)
    if isinstance(marker, int) and marker in _MARKERS:
        return _MARKERS[marker](name, value, check_keys, opts, depth)
    for base, encoder in _ISINSTANCE_ORDER:
        if isinstance(value, base):
            return encoder(name, value, check_keys, opts, depth)
    raise InvalidDocument(f"cannot encode object: {value!r}, of type: {type(value)}")


# =============================================================================
# Decoding
# =============================================================================

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
    length = _UNPACK_INT_FROM(data, pos)[0]
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
    doc_class = opts.document_class
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


def _apply_decoders(container: Any, decoders: dict) -> None:
    """Custom TypeDecoders, applied to a freshly decoded document's (or list's) own values."""
    pairs = enumerate(container) if isinstance(container, list) else list(container.items())
    for key, value in pairs:
        transform = decoders.get(type(value))
        if transform is not None:
            container[key] = transform(value)


def decode_array(data: bytes, pos: int, end: int, opts: CodecOptions, depth: int) -> list:
    """Arrays decode like documents but keep only the values (keys are not checked, per the corpus)."""
    if depth > MAX_NESTING_DEPTH:
        raise _fail(f"documents nest deeper than {MAX_NESTING_DEPTH} levels", pos)
    values: list = []
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


# =============================================================================
# Public entry points (re-exported by greenmongo.bson)
# =============================================================================

def _as_bytes(data: Any) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"BSON data must be bytes, bytearray or memoryview, not {type(data).__name__}")


def _check_options(codec_options: Any) -> CodecOptions:
    if codec_options is None:
        return DEFAULT_CODEC_OPTIONS
    if not isinstance(codec_options, CodecOptions):
        raise TypeError("codec_options must be an instance of CodecOptions")
    return codec_options


def _decode_one(data: bytes, pos: int, end: int, opts: CodecOptions) -> tuple[Any, int]:
    """Decode the document starting at ``pos``; return it and the offset just past it."""
    try:
        if end - pos < 5:
            raise _fail(f"not enough data for a BSON document ({end - pos} bytes)", pos)
        length = _UNPACK_INT_FROM(data, pos)[0]
        if length < 5:
            raise _fail(f"document length {length} is below the minimum of 5", pos)
        stop = pos + length
        if stop > end:
            raise _fail(f"document length {length} exceeds the {end - pos} bytes available", pos)
        if data[stop - 1] != 0:
            raise _fail("document is not NUL-terminated", stop - 1)
        return decode_document(data, pos, stop, opts), stop
    except _Malformed as exc:
        raise InvalidBSON(str(exc)) from None
    except (struct.error, IndexError, ValueError, OverflowError, TypeError, RecursionError) as exc:
        # A type constructor refused a decoded value (e.g. an invalid Decimal128 bit pattern).
        raise InvalidBSON(f"invalid BSON in document at byte {pos}: {exc}") from None


def decode(data: Any, codec_options: Optional[CodecOptions] = None) -> Any:
    """Decode exactly one BSON document; trailing bytes are an error."""
    data = _as_bytes(data)
    opts = _check_options(codec_options)
    doc, stop = _decode_one(data, 0, len(data), opts)
    if stop != len(data):
        raise InvalidBSON(f"{len(data) - stop} bytes of trailing data after the document at byte {stop}")
    return doc


def decode_all(data: Any, codec_options: Optional[CodecOptions] = None) -> list:
    """Decode a buffer of concatenated BSON documents."""
    data = _as_bytes(data)
    opts = _check_options(codec_options)
    docs = []
    pos, end = 0, len(data)
    while pos < end:
        doc, pos = _decode_one(data, pos, end, opts)
        docs.append(doc)
    return docs


def decode_iter(data: Any, codec_options: Optional[CodecOptions] = None) -> Iterator[Any]:
    """Lazily decode concatenated BSON documents, one at a time."""
    data = _as_bytes(data)
    opts = _check_options(codec_options)
    pos, end = 0, len(data)
    while pos < end:
        doc, pos = _decode_one(data, pos, end, opts)
        yield doc


def decode_file_iter(file_obj: Any, codec_options: Optional[CodecOptions] = None) -> Iterator[Any]:
    """Decode documents from a binary file object, reading one document at a time."""
    opts = _check_options(codec_options)
    offset = 0
    while True:
        size_bytes = file_obj.read(4)
        if not size_bytes:
            return
        if len(size_bytes) != 4:
            raise InvalidBSON(f"cut off in the middle of a document length at byte {offset}")
        length = _UNPACK_INT_FROM(size_bytes, 0)[0]
        if length < 5:
            raise InvalidBSON(f"document length {length} is below the minimum of 5 at byte {offset}")
        rest = file_obj.read(length - 4)
        if len(rest) != length - 4:
            raise InvalidBSON(f"file ends inside the document that starts at byte {offset}")
        data = size_bytes + rest
        doc, _ = _decode_one(data, 0, length, opts)
        offset += length
        yield doc


def encode(document: Any, check_keys: bool = False, codec_options: Optional[CodecOptions] = None) -> bytes:
    """Encode a mapping as BSON. Top-level ``_id`` is written first, as the server expects."""
    opts = _check_options(codec_options)
    try:
        return encode_document(document, check_keys, opts)
    except RecursionError:
        raise InvalidDocument("document nests too deeply to encode (a reference cycle?)") from None
    except struct.error as exc:  # an Int64 (or subclass) outside 64 bits
        raise OverflowError(f"BSON can only handle up to 8-byte ints: {exc}") from None


def is_valid(data: Any) -> bool:
    """True if ``data`` is exactly one valid BSON document."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError("BSON data must be bytes, bytearray or memoryview")
    try:
        decode(data)
        return True
    except InvalidBSON:
        return False


def _millis_now() -> int:  # pragma: no cover - convenience for callers building dates
    return datetime_to_millis(datetime.datetime.now(_UTC))
