"""The BSON encoder, in pure Python.

Built for speed without a C extension: pieces go into one flat list joined once per
document, the common types (str, int, float, dict, bool, Int64, list, None) are handled
inline, the rest through a dispatch table keyed by exact type, then ``_type_marker``
(subclasses of our types), then the TypeRegistry, then ``isinstance``. A C accelerator can
replace ``encode_document`` behind the same signature.
"""

from __future__ import annotations

import datetime
import re
import struct
import uuid
import warnings
from collections.abc import Callable
from collections.abc import Mapping as _MappingABC
from typing import TYPE_CHECKING, Any

from greenmongo.bson._extension import import_speedups
from greenmongo.bson.binary import (
    OLD_BINARY_SUBTYPE,
    Binary,
    UuidRepresentation,
)
from greenmongo.bson.code import Code
from greenmongo.bson.codec_options import CodecOptions
from greenmongo.bson.datetime_ms import (
    DatetimeMS,
    datetime_to_millis,
)
from greenmongo.bson.dbref import DBRef
from greenmongo.bson.decimal128 import Decimal128
from greenmongo.bson.deprecated import DBPointer, Symbol, Undefined
from greenmongo.bson.int64 import Int64
from greenmongo.bson.limits import MAX_NESTING_DEPTH
from greenmongo.bson.min_max import MaxKey, MinKey
from greenmongo.bson.objectid import ObjectId
from greenmongo.bson.regex import Regex, int_flags_to_str
from greenmongo.bson.timestamp import Timestamp
from greenmongo.errors import InvalidDocument

if TYPE_CHECKING:
    from greenmongo.bson.raw import RawBSONDocument


_PACK_INT = struct.Struct("<i").pack
_PACK_LONG = struct.Struct("<q").pack
_PACK_DOUBLE = struct.Struct("<d").pack
_PACK_UINT_PAIR = struct.Struct("<II").pack

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


#: Array keys are the decimal indexes: build the common ones once.
_INDEX_KEYS = [str(i).encode() + b"\x00" for i in range(1024)]

_RE_TYPE = type(re.compile(""))


#: str key -> its cstring bytes. Field names repeat across documents, so this saves most key
#: encoding; bounded so a stream of unique keys cannot grow it without limit.
_KEY_CACHE: dict[str, bytes] = {}
_KEY_CACHE_MAX = 8192
_NO_CACHE_GET = dict[str, bytes]().get  # with check_keys every key takes the validating path


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
    # A full cache stops growing rather than being cleared: a stream of unique keys (one huge
    # document, or generated field names) would otherwise flush the keys that do repeat.
    if not check_keys and type(key) is str and len(_KEY_CACHE) < _KEY_CACHE_MAX:
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
            raw: bytes = doc.raw
            return raw
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
        rest = dict(items)  # a C-level copy is cheaper than filtering every key in Python
        del rest["_id"]
        items = rest.items()
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
    if representation == UuidRepresentation.UNSPECIFIED:  # ValueError, as PyMongo raises
        raise ValueError(
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
    scope_bson = encode_document(scope, False, opts, False, depth)
    return b"".join((b"\x0f", name, _PACK_INT(len(data) + len(scope_bson) + 9), _PACK_INT(len(data) + 1), data,
                     b"\x00", scope_bson))


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


def _enc_raw(name: bytes, value: RawBSONDocument, *_: Any) -> bytes:
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




# -- the optional C accelerator (_speedups.c) -------------------------------------------------------
# It reimplements encode_document with the same bytes and errors, calling _element above for any
# value it does not handle. ``_py_encode_document`` stays the pure entry point (tests compare the
# two). GREENMONGO_NO_EXTENSIONS=1 forces the pure path.

_py_encode_document = encode_document


def _load_speedups() -> Any:
    _speedups = import_speedups()
    if _speedups is None:
        return None
    from greenmongo.bson.deprecated import UNDEFINED
    from greenmongo.bson.regex import _FLAG_BITS

    try:
        _speedups._init_encoder({
            "InvalidDocument": InvalidDocument, "struct_error": struct.error, "_element": _element,
            "encode_document": _py_encode_document, "_RE_TYPE": _RE_TYPE, "Mapping": _MappingABC,
            "MAX_NESTING_DEPTH": MAX_NESTING_DEPTH, "ObjectId": ObjectId, "Int64": Int64, "Timestamp": Timestamp,
            "Binary": Binary, "Decimal128": Decimal128, "Regex": Regex, "Code": Code, "DBRef": DBRef,
            "MinKey": MinKey, "MaxKey": MaxKey, "Symbol": Symbol, "DBPointer": DBPointer, "UNDEFINED": UNDEFINED,
            "DatetimeMS": DatetimeMS, "UUID": uuid.UUID, "_FLAG_BITS": _FLAG_BITS,
        })
    except Exception as exc:  # a module built from other sources than these: stay correct, say so
        warnings.warn(f"greenmongo.bson: C extension disabled, using the pure-Python codec: {exc}",
                      RuntimeWarning, stacklevel=2)
        return None
    return _speedups


_speedups = _load_speedups()
if _speedups is not None:
    encode_document = _speedups.encode_document  # noqa: F811
