"""MongoDB Extended JSON v2 (canonical and relaxed) on top of the standard ``json`` module.

``dumps`` turns BSON-native Python values into Extended JSON text; ``loads``
turns Extended JSON text into them. The output format is chosen by
``JSONOptions.json_mode``: RELAXED (the default, readable), CANONICAL (type
preserving) or LEGACY (PyMongo's old format, for interoperability only).

Parsing follows the spec's rules for type wrappers: an object holding any
wrapper key (``$numberInt``, ``$binary``, ...) must hold exactly that
wrapper's keys with values of the right JSON type, or it is an error; an
object whose ``$``-keys match no wrapper stays a plain document; an object
that looks like a DBRef but is not one stays a plain document. The top-level
object of ``loads`` is always a document, never a wrapper. Legacy input forms
(``{"$binary": "...", "$type": "00"}``, ``{"$regex": "...", "$options": ""}``,
``{"$date": <int>}``, the ``NaN``/``Infinity`` literals) are accepted only
with ``json_mode=JSONMode.LEGACY``, as the spec requires.

``dumps`` takes what PyMongo's does: any object with ``items()`` is written as
a document and any other iterable but ``str``/``bytes`` (a cursor, a generator,
a set, ``map``/``filter`` objects, dict views) as an array; a value that is
neither and has no BSON equivalent is handed to ``json.dumps`` unchanged, so a
``default=`` keyword argument (``dumps(doc, default=str)``) sees it.

Errors: every malformed input makes ``loads`` raise ``ValueError`` (JSON
syntax errors are its subclass ``json.JSONDecodeError``). ``dumps`` raises
``TypeError`` for a value with no JSON form (from ``json.dumps``, unless its
``default`` handles it), ``OverflowError`` for an int outside BSON's 64-bit
range (outside LEGACY mode), and ``ValueError`` for a native ``uuid.UUID``
with ``strict_uuid`` under ``UuidRepresentation.UNSPECIFIED`` (as BSON
encoding does).

Deliberate differences from PyMongo: ``$uuid`` is written in the spec's
hyphenated form; relaxed ``$date`` strings are normalised to UTC (``Z``); an
int outside 64 bits is an OverflowError outside LEGACY mode; non-finite doubles
stay ``$numberDouble`` in LEGACY mode (PyMongo writes bare ``NaN``, which is not
JSON); a ``bytearray``/``memoryview`` is written as ``$binary`` (greenmongo's
BSON encoder stores them as Binary; PyMongo writes a list of ints); a
JSONOptions ``type_registry`` is honoured.
"""

from __future__ import annotations

import base64
import datetime
import json
import math
import uuid
from collections.abc import Mapping
from typing import Any, Callable, Dict, Sequence, Tuple

from greenmongo.bson.binary import (  # noqa: F401  (ALL_UUID_SUBTYPES, UUID_SUBTYPE: PyMongo's names here)
    ALL_UUID_SUBTYPES,
    UUID_SUBTYPE,
    Binary,
    BinaryVector,
    UuidRepresentation,
)
from greenmongo.bson.code import Code
from greenmongo.bson.codec_options import CodecOptions  # noqa: F401  (PyMongo's name here)
from greenmongo.bson.datetime_ms import (  # noqa: F401  (DatetimeConversion, EPOCH_AWARE: PyMongo's names here)
    EPOCH_AWARE,
    DatetimeConversion,
    DatetimeMS,
    datetime_to_millis,
)
from greenmongo.bson.dbref import DBRef
from greenmongo.bson.decimal128 import Decimal128
from greenmongo.bson.deprecated import DBPointer, Symbol, Undefined
from greenmongo.bson.int64 import Int64
from greenmongo.bson.min_max import MaxKey, MinKey
from greenmongo.bson.objectid import ObjectId
from greenmongo.bson.regex import Regex, int_flags_to_str
from greenmongo.bson.timestamp import Timestamp
from greenmongo.bson.tz_util import utc  # noqa: F401  (PyMongo's name here)
from greenmongo.bson.json_options import (  # noqa: F401  (re-exported)
    CANONICAL_JSON_OPTIONS,
    DEFAULT_JSON_OPTIONS,
    LEGACY_JSON_OPTIONS,
    RELAXED_JSON_OPTIONS,
    DatetimeRepresentation,
    JSONMode,
    JSONOptions,
    _EPOCH_NAIVE,
    _INT32_MAX,
    _INT32_MIN,
    _INT64_MAX,
    _INT64_MIN,
    _MAX_DATETIME_MS,
    _MIN_DATETIME_MS,
    _RE_TYPE,
    _UTC,
)
from greenmongo.bson.son import RE_TYPE  # noqa: F401  (PyMongo's name here)

__all__ = [
    "JSONMode", "DatetimeRepresentation", "JSONOptions", "LEGACY_JSON_OPTIONS", "RELAXED_JSON_OPTIONS",
    "CANONICAL_JSON_OPTIONS", "DEFAULT_JSON_OPTIONS", "dumps", "loads", "object_hook", "object_pairs_hook",
    "default", "get_size",
]


# =============================================================================
# Generating: Python values -> JSON-able structures -> text
# =============================================================================

def dumps(obj: Any, *args: Any, json_options: JSONOptions = DEFAULT_JSON_OPTIONS, **kwargs: Any) -> str:
    """Extended JSON text for ``obj``; ``args``/``kwargs`` go to ``json.dumps`` (indent, default...).

    Mappings (anything with ``items()``) become objects, other iterables arrays (see the module
    docstring); a value with no BSON form reaches ``json.dumps`` (and its ``default``) unchanged.
    """
    try:
        converted = _to_json(obj, json_options)
    except RecursionError:
        raise ValueError("the value nests too deeply for Extended JSON (a reference cycle?)") from None
    return json.dumps(converted, *args, **kwargs)


def default(obj: Any, json_options: JSONOptions = DEFAULT_JSON_OPTIONS) -> Any:
    """For ``json.dumps(default=...)``: the JSON-able form of one BSON value.

    Raises TypeError for anything that is not a BSON value (containers and other iterables
    included, as PyMongo's does: ``json`` handles dicts and lists itself, and only
    :func:`dumps` turns other iterables into arrays). ``json`` never calls it for str/int
    subclasses (Code, Symbol, Int64), so prefer :func:`dumps`, which handles every type.
    """
    converted = _value_to_json(obj, json_options)
    if converted is _NOT_BSON:
        raise TypeError(f"{obj!r} is not JSON serializable")
    return converted


_NOT_BSON: Any = object()


def _to_json(obj: Any, opts: JSONOptions) -> Any:
    """``obj`` as JSON-able structures: a BSON value by its type; else, as PyMongo's ``dumps`` does,
    anything with ``items()`` as an object and any other iterable (not str/bytes) as an array; else
    the registry's fallback encoder; else ``obj`` itself, for ``json.dumps`` to judge."""
    kind = type(obj)
    if kind is str or kind is bool or obj is None:
        return obj
    if kind is dict:
        return {key: _to_json(value, opts) for key, value in obj.items()}
    if kind is list or kind is tuple:
        return [_to_json(value, opts) for value in obj]
    converter = _CONVERTERS.get(kind)
    if converter is not None:
        return converter(obj, opts)
    converted = _value_to_json(obj, opts)
    if converted is not _NOT_BSON:
        return converted
    if hasattr(obj, "items"):
        return {key: _to_json(value, opts) for key, value in obj.items()}
    if hasattr(obj, "__iter__") and not isinstance(obj, (str, bytes)):
        return [_to_json(value, opts) for value in obj]
    fallback = opts.type_registry._fallback_encoder
    if fallback is not None:
        return _to_json(fallback(obj), opts)
    return obj  # json.dumps's own rules (and its ``default``) decide


def _value_to_json(obj: Any, opts: JSONOptions) -> Any:
    """The JSON form of one BSON value, or ``_NOT_BSON``."""
    kind = type(obj)
    if kind is str or kind is bool or obj is None:
        return obj
    converter = _CONVERTERS.get(kind)
    if converter is not None:
        return converter(obj, opts)
    marker = getattr(obj, "_type_marker", None)
    if isinstance(marker, int):
        converter = _MARKER_CONVERTERS.get(marker)
        if converter is not None:
            return converter(obj, opts)
    registry = opts.type_registry
    transform = registry._encoder_map.get(kind) if registry._encoder_map else None
    if transform is not None:
        return _to_json(transform(obj), opts)
    for base, converter in _ISINSTANCE_CONVERTERS:
        if isinstance(obj, base):
            return converter(obj, opts)
    return _NOT_BSON


def _mapping_to_json(obj: Mapping[str, Any], opts: JSONOptions) -> Dict[str, Any]:
    return {key: _to_json(value, opts) for key, value in obj.items()}


def _int_to_json(obj: int, opts: JSONOptions) -> Any:
    value = int(obj)
    if opts.json_mode == JSONMode.LEGACY:
        return value
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise OverflowError(f"{value} does not fit in BSON's 64-bit integer")
    if opts.json_mode == JSONMode.CANONICAL:
        if _INT32_MIN <= value <= _INT32_MAX:
            return {"$numberInt": str(value)}
        return {"$numberLong": str(value)}
    return value


def _int64_to_json(obj: Int64, opts: JSONOptions) -> Any:
    value = int(obj)
    if opts.strict_number_long:
        return {"$numberLong": str(value)}
    return value


def _double_text(value: float) -> str:
    if value != value:
        return "NaN"
    if value == math.inf:
        return "Infinity"
    if value == -math.inf:
        return "-Infinity"
    text = repr(value)
    return text.replace("e", "E") if "e" in text else text


def _float_to_json(obj: float, opts: JSONOptions) -> Any:
    value = float(obj)
    if opts.json_mode == JSONMode.CANONICAL or not math.isfinite(value):
        return {"$numberDouble": _double_text(value)}
    return value


def _binary_to_json(data: bytes, subtype: int, opts: JSONOptions) -> Dict[str, Any]:
    text = base64.b64encode(data).decode("ascii")
    subtype_hex = f"{subtype:02x}"
    if opts.json_mode == JSONMode.LEGACY:
        return {"$binary": text, "$type": subtype_hex}
    return {"$binary": {"base64": text, "subType": subtype_hex}}


def _bytes_to_json(obj: Any, opts: JSONOptions) -> Dict[str, Any]:
    return _binary_to_json(bytes(obj), 0, opts)


def _binary_type_to_json(obj: Binary, opts: JSONOptions) -> Dict[str, Any]:
    return _binary_to_json(bytes(obj), obj.subtype, opts)


def _vector_to_json(obj: BinaryVector, opts: JSONOptions) -> Dict[str, Any]:
    return _binary_type_to_json(Binary.from_vector(obj), opts)


def _uuid_to_json(obj: uuid.UUID, opts: JSONOptions) -> Dict[str, Any]:
    if not opts.strict_uuid:
        return {"$uuid": str(obj)}
    if opts.uuid_representation == UuidRepresentation.UNSPECIFIED:
        raise ValueError(
            "cannot write a native uuid.UUID with UuidRepresentation.UNSPECIFIED: set uuid_representation in "
            "JSONOptions (e.g. UuidRepresentation.STANDARD), or wrap it with Binary.from_uuid()")
    return _binary_type_to_json(Binary.from_uuid(obj, opts.uuid_representation), opts)


def _millis_to_json(millis: int, opts: JSONOptions) -> Dict[str, Any]:
    representation = opts.datetime_representation
    if representation == DatetimeRepresentation.ISO8601 and 0 <= millis <= _MAX_DATETIME_MS:
        return {"$date": _iso_text(millis)}
    if representation == DatetimeRepresentation.LEGACY:
        return {"$date": millis}
    return {"$date": {"$numberLong": str(millis)}}


def _iso_text(millis: int) -> str:
    seconds, fraction = divmod(millis, 1000)
    moment = _EPOCH_NAIVE + datetime.timedelta(seconds=seconds)
    text = (f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}"
            f"T{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}")
    return f"{text}.{fraction:03d}Z" if fraction else text + "Z"


def _datetime_to_json(obj: datetime.datetime, opts: JSONOptions) -> Dict[str, Any]:
    return _millis_to_json(datetime_to_millis(obj), opts)


def _datetime_ms_to_json(obj: DatetimeMS, opts: JSONOptions) -> Dict[str, Any]:
    return _millis_to_json(int(obj), opts)


def _regex_to_json(obj: Any, opts: JSONOptions) -> Dict[str, Any]:
    flags = obj.flags
    letters = "".join(sorted(flags if isinstance(flags, str) else int_flags_to_str(flags)))
    pattern = obj.pattern
    if isinstance(pattern, bytes):
        pattern = pattern.decode("utf-8")
    if opts.json_mode == JSONMode.LEGACY:
        return {"$regex": pattern, "$options": letters}
    return {"$regularExpression": {"pattern": pattern, "options": letters}}


def _code_to_json(obj: Code, opts: JSONOptions) -> Dict[str, Any]:
    if obj.scope is None:
        return {"$code": str(obj)}
    return {"$code": str(obj), "$scope": _to_json(obj.scope, opts)}


def _dbref_to_json(obj: DBRef, opts: JSONOptions) -> Dict[str, Any]:
    return _mapping_to_json(obj.as_doc(), opts)


def _dbpointer_to_json(obj: DBPointer, opts: JSONOptions) -> Dict[str, Any]:
    return {"$dbPointer": {"$ref": obj.namespace, "$id": {"$oid": str(obj.id)}}}


_CONVERTERS: Dict[type, Callable[[Any, JSONOptions], Any]] = {
    int: _int_to_json,
    float: _float_to_json,
    bytes: _bytes_to_json,
    datetime.datetime: _datetime_to_json,
    uuid.UUID: _uuid_to_json,
    _RE_TYPE: _regex_to_json,
    Binary: _binary_type_to_json,
    BinaryVector: _vector_to_json,
    Code: _code_to_json,
    DatetimeMS: _datetime_ms_to_json,
    DBPointer: _dbpointer_to_json,
    DBRef: _dbref_to_json,
    Decimal128: lambda obj, opts: {"$numberDecimal": str(obj)},
    Int64: _int64_to_json,
    MaxKey: lambda obj, opts: {"$maxKey": 1},
    MinKey: lambda obj, opts: {"$minKey": 1},
    ObjectId: lambda obj, opts: {"$oid": str(obj)},
    Regex: _regex_to_json,
    Symbol: lambda obj, opts: {"$symbol": str(obj)},
    Timestamp: lambda obj, opts: {"$timestamp": {"t": obj.time, "i": obj.inc}},
    Undefined: lambda obj, opts: {"$undefined": True},
}

#: ``_type_marker`` -> converter, for subclasses of the BSON types.
_MARKER_CONVERTERS: Dict[int, Callable[[Any, JSONOptions], Any]] = {
    5: _binary_type_to_json, 6: _CONVERTERS[Undefined], 7: _CONVERTERS[ObjectId], 9: _datetime_ms_to_json,
    11: _regex_to_json, 12: _dbpointer_to_json, 13: _code_to_json, 14: _CONVERTERS[Symbol],
    17: _CONVERTERS[Timestamp], 18: _int64_to_json, 19: _CONVERTERS[Decimal128], 100: _dbref_to_json,
    101: _mapping_to_json, 127: _CONVERTERS[MaxKey], 255: _CONVERTERS[MinKey],
}

# Subclasses of the builtins, most specific first (bool before int).
_ISINSTANCE_CONVERTERS: Tuple[Tuple[type, Callable[[Any, JSONOptions], Any]], ...] = (
    (bool, lambda obj, opts: bool(obj)), (int, _int_to_json), (float, _float_to_json),
    (str, lambda obj, opts: str(obj)), (bytes, _bytes_to_json), (bytearray, _bytes_to_json),
    (memoryview, _bytes_to_json), (datetime.datetime, _datetime_to_json), (uuid.UUID, _uuid_to_json),
)


# =============================================================================
# Size estimate (PyMongo's ``get_size``, for truncating logged documents)
# =============================================================================

# Approximate relaxed Extended JSON lengths of the fixed-size values.
_FIXED_SIZES: Dict[type, int] = {
    ObjectId: 36, bool: 5, type(None): 4, datetime.datetime: 36, Timestamp: 45, MinKey: 14, MaxKey: 14,
    uuid.UUID: 80, DatetimeMS: 36, Undefined: 18,
}


def get_size(obj: Any, max_size: int, current_size: int = 0) -> int:
    """``current_size`` plus an estimate of ``obj``'s Extended JSON length, cut short at ``max_size``.

    An estimate, cheap enough to decide whether a logged document needs truncating: containers add
    their keys and values one by one and stop as soon as the total reaches ``max_size`` (so a huge
    or endless iterable costs no more than ``max_size`` allows). The numbers are greenmongo's own,
    not PyMongo's.
    """
    if current_size >= max_size:
        return current_size
    kind = type(obj)
    fixed = _FIXED_SIZES.get(kind)
    if fixed is not None:
        return current_size + fixed
    if isinstance(obj, Code):  # before str: a Code is a str
        size = current_size + len(obj) + 12
        return size if obj.scope is None else get_size(obj.scope, max_size, size + 10)
    if isinstance(obj, (str, Symbol)):
        return current_size + len(obj) + 2
    if isinstance(obj, (int, float, Decimal128)):
        return current_size + len(str(obj)) + (22 if kind is Decimal128 else 0)
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return current_size + 4 * ((len(obj) + 2) // 3) + 40
    if isinstance(obj, (Regex, _RE_TYPE)):
        return current_size + len(obj.pattern) + 50
    if isinstance(obj, DBRef):
        return get_size(obj.as_doc(), max_size, current_size)
    if hasattr(obj, "items"):
        size = current_size + 2
        for key, value in obj.items():
            size = get_size(value, max_size, size + len(str(key)) + 4)
            if size >= max_size:
                break
        return size
    if hasattr(obj, "__iter__"):
        size = current_size + 2
        for value in obj:
            size = get_size(value, max_size, size + 2)
            if size >= max_size:
                break
        return size
    return current_size + len(repr(obj))


# =============================================================================
# Parsing: text -> raw JSON tree (objects as tuples of pairs) -> BSON-native values
# =============================================================================

def loads(s: Any, *args: Any, json_options: JSONOptions = DEFAULT_JSON_OPTIONS, **kwargs: Any) -> Any:
    """Parse Extended JSON (canonical or relaxed; legacy forms too in LEGACY mode).

    ``args``/``kwargs`` go to ``json.loads``, except the object hooks, which
    this function supplies. Raises ``ValueError`` on any malformed input.
    """
    kwargs.pop("object_hook", None)
    kwargs["object_pairs_hook"] = tuple
    if json_options.json_mode != JSONMode.LEGACY:
        from greenmongo.bson.json_reader import _reject_constant  # the reader loads with the first loads()

        kwargs.setdefault("parse_constant", _reject_constant)
    try:
        tree = json.loads(s, *args, **kwargs)
        from greenmongo.bson.json_reader import _Reader

        return _Reader(json_options, hooked=False).top(tree)
    except RecursionError:
        raise ValueError("Extended JSON input nests too deeply") from None


def object_pairs_hook(pairs: Sequence[Tuple[str, Any]],
                      json_options: JSONOptions = DEFAULT_JSON_OPTIONS) -> Any:
    """For ``json.loads(object_pairs_hook=...)``: one object's pairs to a document or BSON value.

    Unlike :func:`loads`, a hook cannot tell the top-level object from the
    others, so a top-level type wrapper is converted too.
    """
    from greenmongo.bson.json_reader import _Reader

    return _Reader(json_options, hooked=True).value(tuple(pairs))


def object_hook(dct: Mapping[str, Any], json_options: JSONOptions = DEFAULT_JSON_OPTIONS) -> Any:
    """For ``json.loads(object_hook=...)``: one decoded object to a document or BSON value."""
    from greenmongo.bson.json_reader import _Reader

    return _Reader(json_options, hooked=True).value(tuple(dct.items()))




