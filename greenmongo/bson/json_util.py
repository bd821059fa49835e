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
import binascii
import datetime
import json
import math
import re
import uuid
from collections.abc import Mapping
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

from greenmongo.bson.binary import (
    OLD_UUID_SUBTYPE,
    UUID_SUBTYPE,
    Binary,
    BinaryVector,
    UuidRepresentation,
)
from greenmongo.bson.code import Code
from greenmongo.bson.codec_options import CodecOptions
from greenmongo.bson.datetime_ms import DatetimeConversion, DatetimeMS, datetime_to_millis
from greenmongo.bson.dbref import DBRef
from greenmongo.bson.decimal128 import Decimal128
from greenmongo.bson.deprecated import UNDEFINED, DBPointer, Symbol, Undefined
from greenmongo.bson.int64 import Int64
from greenmongo.bson.min_max import MaxKey, MinKey
from greenmongo.bson.objectid import ObjectId
from greenmongo.bson.regex import Regex, int_flags_to_str
from greenmongo.bson.timestamp import Timestamp
from greenmongo.errors import InvalidDocument

__all__ = [
    "JSONMode", "DatetimeRepresentation", "JSONOptions", "LEGACY_JSON_OPTIONS", "RELAXED_JSON_OPTIONS",
    "CANONICAL_JSON_OPTIONS", "DEFAULT_JSON_OPTIONS", "dumps", "loads", "object_hook", "object_pairs_hook",
    "default",
]

_UTC = datetime.timezone.utc
_EPOCH_NAIVE = datetime.datetime(1970, 1, 1)
_EPOCH_ORDINAL = _EPOCH_NAIVE.toordinal()
_MIN_DATETIME_MS = -62135596800000   # 0001-01-01T00:00:00Z
_MAX_DATETIME_MS = 253402300799999   # 9999-12-31T23:59:59.999Z
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_UINT32_MAX = 2**32 - 1
_RE_TYPE = type(re.compile(""))


class JSONMode:
    """Which Extended JSON format ``dumps`` writes (and whether ``loads`` accepts legacy forms)."""

    LEGACY = 0
    """PyMongo's pre-spec format; ``loads`` also accepts legacy input forms in this mode."""
    RELAXED = 1
    """Relaxed Extended JSON v2: readable, numbers as JSON numbers. The default."""
    CANONICAL = 2
    """Canonical Extended JSON v2: every BSON type preserved."""


class DatetimeRepresentation:
    """How ``dumps`` writes datetimes."""

    LEGACY = 0
    """``{"$date": <ms since the epoch>}``."""
    NUMBERLONG = 1
    """``{"$date": {"$numberLong": "<ms since the epoch>"}}``."""
    ISO8601 = 2
    """``{"$date": "<ISO-8601, UTC>"}`` for years 1970-9999, NUMBERLONG otherwise."""


_JSON_FIELDS = ("strict_number_long", "datetime_representation", "strict_uuid", "json_mode")


class JSONOptions(CodecOptions):
    """Options for ``dumps``/``loads``: the output mode plus the CodecOptions fields.

    ``strict_number_long``: write Int64 as ``$numberLong`` (forced True in
    CANONICAL, False in RELAXED). ``datetime_representation``: see
    :class:`DatetimeRepresentation` (forced NUMBERLONG in CANONICAL, ISO8601 in
    RELAXED). ``strict_uuid``: write a native ``uuid.UUID`` as ``$binary`` using
    ``uuid_representation`` (default True); False writes ``{"$uuid": ...}``.
    ``document_class``, ``tz_aware``, ``tzinfo``, ``uuid_representation`` and
    ``datetime_conversion`` shape what ``loads`` returns, as they do for BSON.
    """

    json_mode: int
    strict_number_long: bool
    datetime_representation: int
    strict_uuid: bool

    def __new__(cls, strict_number_long: Optional[bool] = None, datetime_representation: Optional[int] = None,
                strict_uuid: Optional[bool] = None, json_mode: int = JSONMode.RELAXED,
                *args: Any, **kwargs: Any) -> "JSONOptions":
        if kwargs.get("tz_aware") and kwargs.get("tzinfo") is None:
            kwargs["tzinfo"] = _UTC
        if json_mode not in (JSONMode.LEGACY, JSONMode.RELAXED, JSONMode.CANONICAL):
            raise ValueError(f"json_mode must be one of JSONMode.LEGACY, RELAXED or CANONICAL, not {json_mode!r}")
        if datetime_representation not in (None, DatetimeRepresentation.LEGACY,
                                           DatetimeRepresentation.NUMBERLONG, DatetimeRepresentation.ISO8601):
            raise ValueError("datetime_representation must be one of LEGACY, NUMBERLONG or ISO8601 "
                             "from DatetimeRepresentation")
        self = super().__new__(cls, *args, **kwargs)
        self._json_arguments = (strict_number_long, datetime_representation, strict_uuid, json_mode)
        self.json_mode = json_mode
        if json_mode == JSONMode.CANONICAL:
            if strict_number_long is False:
                raise ValueError("strict_number_long cannot be False with JSONMode.CANONICAL")
            if datetime_representation not in (None, DatetimeRepresentation.NUMBERLONG):
                raise ValueError("datetime_representation must be NUMBERLONG with JSONMode.CANONICAL")
            if strict_uuid is False:
                raise ValueError("strict_uuid cannot be False with JSONMode.CANONICAL")
            self.strict_number_long = True
            self.datetime_representation = DatetimeRepresentation.NUMBERLONG
            self.strict_uuid = True
        elif json_mode == JSONMode.RELAXED:
            if strict_number_long:
                raise ValueError("strict_number_long cannot be True with JSONMode.RELAXED")
            if datetime_representation not in (None, DatetimeRepresentation.ISO8601):
                raise ValueError("datetime_representation must be ISO8601 with JSONMode.RELAXED")
            self.strict_number_long = False
            self.datetime_representation = DatetimeRepresentation.ISO8601
            self.strict_uuid = True if strict_uuid is None else bool(strict_uuid)
        else:
            self.strict_number_long = bool(strict_number_long)
            self.datetime_representation = (DatetimeRepresentation.LEGACY if datetime_representation is None
                                            else datetime_representation)
            self.strict_uuid = True if strict_uuid is None else bool(strict_uuid)
        return self

    def _all_arguments(self) -> Dict[str, Any]:
        arguments = self._asdict()
        arguments.update(zip(_JSON_FIELDS, self._json_arguments))
        return arguments

    def with_options(self, **kwargs: Any) -> "JSONOptions":
        """A copy with some options changed; derived settings follow a changed ``json_mode``."""
        arguments = self._all_arguments()
        arguments.update(kwargs)
        return JSONOptions(**arguments)

    def __reduce__(self) -> Any:
        return (_rebuild_json_options, (self._all_arguments(),))

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, JSONOptions):
            return tuple(self) == tuple(other) and self._json_values() == other._json_values()
        return NotImplemented

    def __ne__(self, other: Any) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __hash__(self) -> int:
        return hash((tuple(self), self._json_values()))

    def _json_values(self) -> Tuple[Any, ...]:
        return tuple(getattr(self, name) for name in _JSON_FIELDS)

    def __repr__(self) -> str:
        codec = CodecOptions.__repr__(self)[len("CodecOptions("):-1]
        return (f"JSONOptions(strict_number_long={self.strict_number_long!r}, "
                f"datetime_representation={self.datetime_representation!r}, "
                f"strict_uuid={self.strict_uuid!r}, json_mode={self.json_mode!r}, {codec})")


def _rebuild_json_options(arguments: Dict[str, Any]) -> JSONOptions:
    return JSONOptions(**arguments)


LEGACY_JSON_OPTIONS = JSONOptions(json_mode=JSONMode.LEGACY, uuid_representation=UuidRepresentation.PYTHON_LEGACY)
RELAXED_JSON_OPTIONS = JSONOptions(json_mode=JSONMode.RELAXED)
CANONICAL_JSON_OPTIONS = JSONOptions(json_mode=JSONMode.CANONICAL)
DEFAULT_JSON_OPTIONS = RELAXED_JSON_OPTIONS


# =============================================================================
# Generating: Python values -> JSON-able structures -> text
# =============================================================================

def dumps(obj: Any, *args: Any, json_options: JSONOptions = DEFAULT_JSON_OPTIONS, **kwargs: Any) -> str:
    """Extended JSON text for ``obj``; ``args``/``kwargs`` go to ``json.dumps`` (indent, sort_keys...)."""
    return json.dumps(_to_json(obj, json_options), *args, **kwargs)


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


def object_pairs_hook(pairs: Sequence[Tuple[str, Any]], json_options: JSONOptions = DEFAULT_JSON_OPTIONS) -> Any:
    """For ``json.loads(object_pairs_hook=...)``: one object's pairs to a document or BSON value.

    Unlike :func:`loads`, a hook cannot tell the top-level object from the
    others, so a top-level type wrapper is converted too.
    """
    return _Reader(json_options, hooked=True).object(tuple(pairs), top=False)


def object_hook(dct: Mapping[str, Any], json_options: JSONOptions = DEFAULT_JSON_OPTIONS) -> Any:
    """For ``json.loads(object_hook=...)``: one decoded object to a document or BSON value."""
    return _Reader(json_options, hooked=True).object(tuple(dct.items()), top=False)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON (write {{\"$numberDouble\": \"{name}\"}} instead)")


_OBJECTID_TEXT = re.compile(r"[0-9a-fA-F]{24}", re.ASCII)
_INTEGER_TEXT = re.compile(r"-?[0-9]+", re.ASCII)
_DOUBLE_TEXT = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
_DOUBLE_SPECIALS = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}
_SUBTYPE_TEXT = re.compile(r"[0-9a-fA-F]{1,2}", re.ASCII)
_UUID_TEXT = re.compile(
    r"(?:urn:uuid:)?(?:([0-9a-fA-F]{8})-([0-9a-fA-F]{4})-([0-9a-fA-F]{4})-([0-9a-fA-F]{4})-([0-9a-fA-F]{12})"
    r"|([0-9a-fA-F]{32}))",
    re.ASCII | re.IGNORECASE,
)
_ISO_TEXT = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2})(?::([0-9]{2})(?:\.([0-9]+))?)?"
    r"([Zz]|[+-][0-9]{2}(?::?[0-9]{2})?)?",
    re.ASCII,
)
_NOT_A_WRAPPER = object()
_DBREF_KEYS = ("$ref", "$id", "$db")


def _show(value: Any) -> str:
    """A raw JSON value for an error message (objects are tuples of pairs internally)."""
    if type(value) is tuple:
        return "an object"
    if type(value) is list:
        return "an array"
    return repr(value)


def _bad(wrapper: str, problem: str) -> ValueError:
    return ValueError(f"invalid Extended JSON {wrapper}: {problem}")


def _exact_keys(fields: Dict[str, Any], wrapper: str, keys: frozenset, names: Tuple[str, ...]) -> None:
    if fields.keys() != keys:
        raise _bad(wrapper, f"the object must have exactly the keys {list(names)}, not {list(fields)}")


_BINARY_KEYS = frozenset(("base64", "subType"))
_TIMESTAMP_KEYS = frozenset(("t", "i"))
_REGEX_KEYS = frozenset(("pattern", "options"))
_POINTER_KEYS = frozenset(("$ref", "$id"))
_CODE_W_SCOPE_KEYS = frozenset(("$code", "$scope"))
_LEGACY_BINARY_KEYS = frozenset(("$binary", "$type"))
_NUMBER_LONG_KEYS = frozenset(("$numberLong",))


class _Reader:
    """Turns the raw JSON tree into BSON-native values under one JSONOptions.

    ``hooked`` is for the json object hooks, which see children already
    converted (objects as documents or BSON values instead of tuples of pairs).
    """

    __slots__ = ("opts", "legacy", "hooked", "document_class", "plain_dict", "raw_document")

    def __init__(self, opts: JSONOptions, hooked: bool) -> None:
        self.opts = opts
        self.legacy = opts.json_mode == JSONMode.LEGACY
        self.hooked = hooked
        self.document_class = opts.document_class
        self.plain_dict = opts.document_class is dict
        self.raw_document = getattr(opts.document_class, "_type_marker", None) == 101

    def top(self, tree: Any) -> Any:
        if type(tree) is tuple:
            return self.object(tree, top=True)
        return self.value(tree)

    def value(self, value: Any) -> Any:
        kind = type(value)
        if kind is tuple:
            return self.object(value, top=False)
        if kind is list:
            return [self.value(item) for item in value]
        if kind is int and not _INT64_MIN <= value <= _INT64_MAX:
            return float(value)  # the spec: integers no BSON integer holds become doubles
        return value

    def object(self, pairs: Tuple[Tuple[str, Any], ...], top: bool) -> Any:
        if len(pairs) == 1 and not top:
            # The common case, a one-key wrapper: no dict, no key scan.
            key, item = pairs[0]
            handler = _SINGLE_KEY_WRAPPERS.get(key)
            if handler is not None:
                result = handler(self, item)
                return self.document(pairs) if result is _NOT_A_WRAPPER else result
        if pairs:
            raw = dict(pairs)
            joined = "\x00".join(raw)
            if joined.count("\x00") != len(raw) - 1:
                key = next(key for key in raw if "\x00" in key)
                raise ValueError(f"invalid Extended JSON: key {key!r} contains a NUL character")
            if not top and (joined[:1] == "$" or "\x00$" in joined):
                result = self.wrapper(raw, pairs)
                if result is not _NOT_A_WRAPPER:
                    return result
        return self.document(pairs)

    def document(self, pairs: Tuple[Tuple[str, Any], ...]) -> Any:
        value = self.value
        if self.plain_dict:
            return {key: value(item) for key, item in pairs}
        if self.raw_document:
            from greenmongo.bson.codec import encode

            return self.document_class(encode({key: value(item) for key, item in pairs},
                                              codec_options=self.opts), self.opts)
        return self.document_class([(key, value(item)) for key, item in pairs])

    def fields(self, value: Any, wrapper: str, keys: frozenset, names: Tuple[str, ...]) -> Dict[str, Any]:
        """The fields of the JSON object inside a wrapper, which must be exactly ``keys``."""
        if type(value) is tuple or (self.hooked and isinstance(value, Mapping)):
            fields = dict(value)
            _exact_keys(fields, wrapper, keys, names)
            return fields
        raise _bad(wrapper, f"expected an object with {' and '.join(names)}, not {_show(value)}")

    def wrapper(self, raw: Dict[str, Any], pairs: Tuple[Tuple[str, Any], ...]) -> Any:
        """The BSON value for an object with ``$`` keys; _NOT_A_WRAPPER when it is just a document."""
        if "$ref" in raw and "$id" in raw:
            dbref = self.dbref(raw, pairs)
            if dbref is not None:
                return dbref
        for key in raw:
            handler = _MULTI_KEY_WRAPPERS.get(key)
            if handler is not None:
                result = handler(self, raw)
                if result is not _NOT_A_WRAPPER:
                    return result
            elif key in _SINGLE_KEY_WRAPPERS:
                raise _bad(key, f"the object must have only the key {key!r}, not {list(raw)}")
        return _NOT_A_WRAPPER

    def dbref(self, raw: Dict[str, Any], pairs: Tuple[Tuple[str, Any], ...]) -> Optional[DBRef]:
        """A DBRef, or None when the object only resembles one (then it stays a document)."""
        collection = raw["$ref"]
        database = raw.get("$db")
        if type(collection) is not str or ("$db" in raw and type(database) is not str):
            return None
        extra = {key: self.value(item) for key, item in pairs if key not in _DBREF_KEYS}
        return DBRef(collection, self.value(raw["$id"]), database, _extra=extra)

    # -- one-key wrappers: each takes the value of its key -----------------------

    def oid(self, text: Any) -> ObjectId:
        if type(text) is not str or not _OBJECTID_TEXT.fullmatch(text):
            raise _bad("$oid", f"expected a 24-character hex string, not {_show(text)}")
        return ObjectId(text)

    def symbol(self, text: Any) -> Symbol:
        if type(text) is not str:
            raise _bad("$symbol", f"expected a string, not {_show(text)}")
        return Symbol(text)

    def number_int(self, text: Any) -> int:
        if type(text) is not str or not _INTEGER_TEXT.fullmatch(text):
            raise _bad("$numberInt", f"expected an integer as a string, not {_show(text)}")
        value = int(text)
        if not _INT32_MIN <= value <= _INT32_MAX:
            raise _bad("$numberInt", f"{text} does not fit in 32 bits")
        return value

    def number_long(self, text: Any) -> Int64:
        return Int64(_int64_text(text, "$numberLong"))

    def number_double(self, text: Any) -> float:
        if type(text) is not str:
            raise _bad("$numberDouble", f"expected a string, not {_show(text)}")
        special = _DOUBLE_SPECIALS.get(text)
        if special is not None:
            return special
        if not _DOUBLE_TEXT.fullmatch(text):
            raise _bad("$numberDouble", f"{text!r} is not a decimal number, Infinity, -Infinity or NaN")
        return float(text)

    def number_decimal(self, text: Any) -> Decimal128:
        if type(text) is not str:
            raise _bad("$numberDecimal", f"expected a string, not {_show(text)}")
        try:
            return Decimal128(text)
        except (ValueError, InvalidDocument) as exc:
            raise _bad("$numberDecimal", str(exc)) from None

    def binary(self, payload: Any) -> Any:
        fields = self.fields(payload, "$binary", _BINARY_KEYS, ("base64", "subType"))
        if type(fields["base64"]) is not str:
            raise _bad("$binary", f"base64 must be a string, not {_show(fields['base64'])}")
        return self.binary_value(_base64(fields["base64"]), _subtype(fields["subType"]))

    def binary_value(self, data: bytes, subtype: int) -> Any:
        """Binary data as BSON decoding would return it: bytes, Binary, or a UUID per the options."""
        if subtype == 0:
            return data
        if len(data) == 16 and subtype in (UUID_SUBTYPE, OLD_UUID_SUBTYPE):
            representation = self.opts.uuid_representation
            if subtype == UUID_SUBTYPE and representation == UuidRepresentation.STANDARD:
                return uuid.UUID(bytes=data)
            if subtype == OLD_UUID_SUBTYPE and representation in (
                    UuidRepresentation.PYTHON_LEGACY, UuidRepresentation.JAVA_LEGACY,
                    UuidRepresentation.CSHARP_LEGACY):
                return Binary(data, subtype).as_uuid(representation)
        return Binary(data, subtype)

    def uuid(self, text: Any) -> Any:
        match = _UUID_TEXT.fullmatch(text) if type(text) is str else None
        if match is None:
            raise _bad("$uuid", f"expected a UUID as 8-4-4-4-12 hex digits, not {_show(text)}")
        return self.binary_value(bytes.fromhex("".join(group for group in match.groups() if group)), UUID_SUBTYPE)

    def code(self, text: Any) -> Code:
        if type(text) is not str:
            raise _bad("$code", f"expected a string, not {_show(text)}")
        return Code(text)

    def timestamp(self, value: Any) -> Timestamp:
        fields = self.fields(value, "$timestamp", _TIMESTAMP_KEYS, ("t", "i"))
        for name in ("t", "i"):
            number = fields[name]
            if type(number) is not int or not 0 <= number <= _UINT32_MAX:
                raise _bad("$timestamp", f"{name} must be an integer in [0, 2**32), not {_show(number)}")
        return Timestamp(fields["t"], fields["i"])

    def regular_expression(self, value: Any) -> Regex:
        fields = self.fields(value, "$regularExpression", _REGEX_KEYS, ("pattern", "options"))
        return _regex(fields["pattern"], fields["options"], "$regularExpression")

    def legacy_regex(self, pattern: Any) -> Any:
        # {"$regex": {...}} is the query operator: a document, as the spec requires.
        if not self.legacy or type(pattern) is not str:
            return _NOT_A_WRAPPER
        return _regex(pattern, "", "$regex")

    def db_pointer(self, value: Any) -> DBPointer:
        if self.hooked and isinstance(value, DBRef):
            value = value.as_doc()
        fields = self.fields(value, "$dbPointer", _POINTER_KEYS, ("$ref", "$id"))
        namespace, oid = fields["$ref"], self.value(fields["$id"])
        if type(namespace) is not str:
            raise _bad("$dbPointer", f"$ref must be a string, not {_show(namespace)}")
        if not isinstance(oid, ObjectId):
            raise _bad("$dbPointer", f"$id must be an ObjectId ({{\"$oid\": ...}}), not {_show(oid)}")
        return DBPointer(namespace, oid)

    def date(self, value: Any) -> Any:
        if type(value) is str:
            return self.millis_value(_iso_millis(value))
        if type(value) is tuple or (self.hooked and isinstance(value, Mapping)):
            fields = self.fields(value, "$date", _NUMBER_LONG_KEYS, ("$numberLong",))
            return self.millis_value(_int64_text(fields["$numberLong"], "$date"))
        if self.hooked and type(value) is Int64:
            return self.millis_value(int(value))
        if self.legacy and type(value) is int:
            return self.millis_value(value)
        raise _bad("$date", f"expected an ISO-8601 string or {{\"$numberLong\": ...}}, not {_show(value)}")

    def millis_value(self, millis: int) -> Any:
        """A datetime (or DatetimeMS) per datetime_conversion, as BSON decoding would give."""
        opts = self.opts
        conversion = opts.datetime_conversion
        if conversion == DatetimeConversion.DATETIME_MS:
            return DatetimeMS(millis)
        if not _MIN_DATETIME_MS <= millis <= _MAX_DATETIME_MS:
            if conversion == DatetimeConversion.DATETIME_AUTO:
                return DatetimeMS(millis)
            if conversion != DatetimeConversion.DATETIME_CLAMP:
                raise _bad("$date", f"{millis} ms is outside datetime.datetime's range; parse with "
                                    "datetime_conversion=DatetimeConversion.DATETIME_AUTO or DATETIME_MS")
            millis = min(max(millis, _MIN_DATETIME_MS), _MAX_DATETIME_MS)
        moment = _EPOCH_NAIVE + datetime.timedelta(milliseconds=millis)
        if not opts.tz_aware:
            return moment
        moment = moment.replace(tzinfo=_UTC)
        if opts.tzinfo is not None and opts.tzinfo is not _UTC:
            try:
                moment = moment.astimezone(opts.tzinfo)
            except OverflowError:
                raise _bad("$date", f"{millis} ms overflows in time zone {opts.tzinfo}") from None
        return moment

    def min_key(self, value: Any) -> MinKey:
        if type(value) is not int or value != 1:
            raise _bad("$minKey", f"the value must be 1, not {_show(value)}")
        return MinKey()

    def max_key(self, value: Any) -> MaxKey:
        if type(value) is not int or value != 1:
            raise _bad("$maxKey", f"the value must be 1, not {_show(value)}")
        return MaxKey()

    def undefined(self, value: Any) -> Undefined:
        if value is not True:
            raise _bad("$undefined", f"the value must be true, not {_show(value)}")
        return UNDEFINED

    # -- wrappers with more than one key: each takes the whole object -------------

    def binary_with_type(self, raw: Dict[str, Any]) -> Any:
        if not self.legacy or raw.keys() != _LEGACY_BINARY_KEYS or type(raw["$binary"]) is not str:
            raise _bad("$binary", f"the object must have only the key '$binary', not {list(raw)}")
        subtype = raw["$type"]
        return self.binary_value(_base64(raw["$binary"]), _subtype(f"{subtype:02x}" if type(subtype) is int
                                                                   else subtype))

    def code_with_scope(self, raw: Dict[str, Any]) -> Code:
        _exact_keys(raw, "$code", _CODE_W_SCOPE_KEYS, ("$code", "$scope"))
        code, scope = self.code(raw["$code"]), raw["$scope"]
        if type(scope) is tuple:
            scope = self.object(scope, top=True)  # a document by definition, never a wrapper
        elif not (self.hooked and isinstance(scope, Mapping)):
            raise _bad("$scope", f"expected a document, not {_show(scope)}")
        return Code(code, scope)

    def regex_with_options(self, raw: Dict[str, Any]) -> Any:
        pattern = raw["$regex"]
        if not self.legacy or type(pattern) is not str or raw.keys() != {"$regex", "$options"}:
            return _NOT_A_WRAPPER
        return _regex(pattern, raw["$options"], "$regex")


_SINGLE_KEY_WRAPPERS: Dict[str, Callable[[_Reader, Any], Any]] = {
    "$oid": _Reader.oid,
    "$symbol": _Reader.symbol,
    "$numberInt": _Reader.number_int,
    "$numberLong": _Reader.number_long,
    "$numberDouble": _Reader.number_double,
    "$numberDecimal": _Reader.number_decimal,
    "$binary": _Reader.binary,
    "$uuid": _Reader.uuid,
    "$code": _Reader.code,
    "$timestamp": _Reader.timestamp,
    "$regularExpression": _Reader.regular_expression,
    "$regex": _Reader.legacy_regex,
    "$dbPointer": _Reader.db_pointer,
    "$date": _Reader.date,
    "$minKey": _Reader.min_key,
    "$maxKey": _Reader.max_key,
    "$undefined": _Reader.undefined,
}

_MULTI_KEY_WRAPPERS: Dict[str, Callable[[_Reader, Dict[str, Any]], Any]] = {
    "$binary": _Reader.binary_with_type,
    "$code": _Reader.code_with_scope,
    "$scope": _Reader.code_with_scope,
    "$regex": _Reader.regex_with_options,
}


def _int64_text(text: Any, wrapper: str) -> int:
    if type(text) is not str or not _INTEGER_TEXT.fullmatch(text):
        raise _bad(wrapper, f"expected a 64-bit integer as a string, not {_show(text)}")
    value = int(text)
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise _bad(wrapper, f"{text} does not fit in 64 bits")
    return value


def _base64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise _bad("$binary", f"base64 payload is not valid base64 ({exc})") from None


def _subtype(text: Any) -> int:
    if type(text) is not str or not _SUBTYPE_TEXT.fullmatch(text):
        raise _bad("$binary", f"subType must be a 1- or 2-digit hex string, not {_show(text)}")
    return int(text, 16)


def _regex(pattern: Any, options: Any, wrapper: str) -> Regex:
    if type(pattern) is not str or type(options) is not str:
        raise _bad(wrapper, f"pattern and options must be strings, not {_show(pattern)} and {_show(options)}")
    if "\x00" in pattern or "\x00" in options:
        raise _bad(wrapper, "pattern and options must not contain a NUL character")
    return Regex(pattern, "".join(sorted(options)))


def _iso_millis(text: str) -> int:
    """Milliseconds since the epoch for an RFC 3339 date-time (sub-millisecond digits are dropped)."""
    match = _ISO_TEXT.fullmatch(text)
    if match is None:
        raise _bad("$date", f"{_show(text)} is not an ISO-8601 date-time such as 1970-01-01T00:00:00.000Z")
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    try:
        days = datetime.date(int(year), int(month), int(day)).toordinal() - _EPOCH_ORDINAL
    except ValueError as exc:
        raise _bad("$date", f"{_show(text)}: {exc}") from None
    hour, minute, second = int(hour), int(minute), int(second or 0)
    if hour > 23 or minute > 59 or second > 59:
        raise _bad("$date", f"{_show(text)} has an invalid time of day")
    offset_minutes = 0
    if zone and zone not in ("Z", "z"):
        digits = zone[1:].replace(":", "")
        offset_minutes = int(digits[:2]) * 60 + int(digits[2:] or 0)
        if zone[0] == "-":
            offset_minutes = -offset_minutes
    millis = int((fraction or "0")[:3].ljust(3, "0"))
    return ((((days * 24 + hour) * 60 + minute - offset_minutes) * 60) + second) * 1000 + millis
