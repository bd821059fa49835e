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

Errors: every malformed input makes ``loads`` raise ``ValueError`` (JSON
syntax errors are its subclass ``json.JSONDecodeError``). ``dumps`` raises
``TypeError`` for a value with no BSON equivalent, ``OverflowError`` for an
int outside BSON's 64-bit range, and ``ValueError`` for a native
``uuid.UUID`` under ``UuidRepresentation.UNSPECIFIED`` (as BSON encoding does).
"""

from __future__ import annotations

import base64
import datetime
import json
import math
import uuid
from collections.abc import Mapping
from typing import Any, Callable, Dict, Sequence, Tuple

from greenmongo.bson.binary import (
    Binary,
    BinaryVector,
    UuidRepresentation,
)
from greenmongo.bson.code import Code
from greenmongo.bson.datetime_ms import DatetimeMS, datetime_to_millis
from greenmongo.bson.dbref import DBRef
from greenmongo.bson.decimal128 import Decimal128
from greenmongo.bson.deprecated import DBPointer, Symbol, Undefined
from greenmongo.bson.int64 import Int64
from greenmongo.bson.min_max import MaxKey, MinKey
from greenmongo.bson.objectid import ObjectId
from greenmongo.bson.regex import Regex, int_flags_to_str
from greenmongo.bson.timestamp import Timestamp


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
from greenmongo.bson.json_reader import _Reader, _reject_constant

__all__ = [
    "JSONMode", "DatetimeRepresentation", "JSONOptions", "LEGACY_JSON_OPTIONS", "RELAXED_JSON_OPTIONS",
    "CANONICAL_JSON_OPTIONS", "DEFAULT_JSON_OPTIONS", "dumps", "loads", "object_hook", "object_pairs_hook",
    "default",
]


# =============================================================================
# Generating: Python values -> JSON-able structures -> text
# =============================================================================

def dumps(obj: Any, *args: Any, json_options: JSONOptions = DEFAULT_JSON_OPTIONS, **kwargs: Any) -> str:
    """Extended JSON text for ``obj``; ``args``/``kwargs`` go to ``json.dumps`` (indent, sort_keys...)."""
    try:
        converted = _to_json(obj, json_options)
    except RecursionError:
        raise ValueError("the value nests too deeply for Extended JSON (a reference cycle?)") from None
    return json.dumps(converted, *args, **kwargs)


def default(obj: Any, json_options: JSONOptions = DEFAULT_JSON_OPTIONS) -> Any:
    """For ``json.dumps(default=...)``: the JSON-able form of one BSON value.

    ``json`` never calls it for str/int subclasses (Code, Symbol, Int64), so
    prefer :func:`dumps`, which handles every type.
    """
    return _to_json(obj, json_options)


def _to_json(obj: Any, opts: JSONOptions) -> Any:
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
    if registry._fallback_encoder is not None:
        return _to_json(registry._fallback_encoder(obj), opts)
    raise TypeError(f"Object of type {kind.__name__} has no Extended JSON (BSON) representation: {obj!r}")


def _mapping_to_json(obj: Mapping, opts: JSONOptions) -> dict:
    return {key: _to_json(value, opts) for key, value in obj.items()}


def _sequence_to_json(obj: Sequence, opts: JSONOptions) -> list:
    return [_to_json(value, opts) for value in obj]


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


def _binary_to_json(data: bytes, subtype: int, opts: JSONOptions) -> dict:
    text = base64.b64encode(data).decode("ascii")
    subtype_hex = f"{subtype:02x}"
    if opts.json_mode == JSONMode.LEGACY:
        return {"$binary": text, "$type": subtype_hex}
    return {"$binary": {"base64": text, "subType": subtype_hex}}


def _bytes_to_json(obj: Any, opts: JSONOptions) -> dict:
    return _binary_to_json(bytes(obj), 0, opts)


def _binary_type_to_json(obj: Binary, opts: JSONOptions) -> dict:
    return _binary_to_json(bytes(obj), obj.subtype, opts)


def _vector_to_json(obj: BinaryVector, opts: JSONOptions) -> dict:
    return _binary_type_to_json(Binary.from_vector(obj), opts)


def _uuid_to_json(obj: uuid.UUID, opts: JSONOptions) -> dict:
    if not opts.strict_uuid:
        return {"$uuid": str(obj)}
    if opts.uuid_representation == UuidRepresentation.UNSPECIFIED:
        raise ValueError(
            "cannot write a native uuid.UUID with UuidRepresentation.UNSPECIFIED: set uuid_representation in "
            "JSONOptions (e.g. UuidRepresentation.STANDARD), or wrap it with Binary.from_uuid()")
    return _binary_type_to_json(Binary.from_uuid(obj, opts.uuid_representation), opts)


def _millis_to_json(millis: int, opts: JSONOptions) -> dict:
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


def _datetime_to_json(obj: datetime.datetime, opts: JSONOptions) -> dict:
    return _millis_to_json(datetime_to_millis(obj), opts)


def _datetime_ms_to_json(obj: DatetimeMS, opts: JSONOptions) -> dict:
    return _millis_to_json(int(obj), opts)


def _regex_to_json(obj: Any, opts: JSONOptions) -> dict:
    flags = obj.flags
    letters = "".join(sorted(flags if isinstance(flags, str) else int_flags_to_str(flags)))
    pattern = obj.pattern
    if isinstance(pattern, bytes):
        pattern = pattern.decode("utf-8")
    if opts.json_mode == JSONMode.LEGACY:
        return {"$regex": pattern, "$options": letters}
    return {"$regularExpression": {"pattern": pattern, "options": letters}}


def _code_to_json(obj: Code, opts: JSONOptions) -> dict:
    if obj.scope is None:
        return {"$code": str(obj)}
    return {"$code": str(obj), "$scope": _to_json(obj.scope, opts)}


def _dbref_to_json(obj: DBRef, opts: JSONOptions) -> dict:
    return _mapping_to_json(obj.as_doc(), opts)


def _dbpointer_to_json(obj: DBPointer, opts: JSONOptions) -> dict:
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
    (Mapping, _mapping_to_json), (list, _sequence_to_json), (tuple, _sequence_to_json),
)


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
        kwargs.setdefault("parse_constant", _reject_constant)
    try:
        tree = json.loads(s, *args, **kwargs)
        return _Reader(json_options, hooked=False).top(tree)
    except RecursionError:
        raise ValueError("Extended JSON input nests too deeply") from None


def object_pairs_hook(pairs: Sequence[Tuple[str, Any]],
                      json_options: JSONOptions = DEFAULT_JSON_OPTIONS) -> Any:
    """For ``json.loads(object_pairs_hook=...)``: one object's pairs to a document or BSON value.

    Unlike :func:`loads`, a hook cannot tell the top-level object from the
    others, so a top-level type wrapper is converted too.
    """
    return _Reader(json_options, hooked=True).value(tuple(pairs))


def object_hook(dct: Mapping[str, Any], json_options: JSONOptions = DEFAULT_JSON_OPTIONS) -> Any:
    """For ``json.loads(object_hook=...)``: one decoded object to a document or BSON value."""
    return _Reader(json_options, hooked=True).value(tuple(dct.items()))




