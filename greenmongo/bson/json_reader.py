"""The Extended JSON parser: a raw JSON tree (objects as tuples of pairs) to BSON-native values.

Each ``$``-wrapper must carry exactly its spec-defined keys with values of the right JSON type;
anything else is a ``ValueError`` naming the wrapper and the problem.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import math
import re
import uuid
from collections.abc import Mapping
from typing import Any, Callable, Dict, FrozenSet, Optional, Tuple

from greenmongo.bson.binary import (
    OLD_UUID_SUBTYPE,
    UUID_SUBTYPE,
    Binary,
    UuidRepresentation,
)
from greenmongo.bson.code import Code
from greenmongo.bson.datetime_ms import DatetimeConversion, DatetimeMS
from greenmongo.bson.dbref import DBRef
from greenmongo.bson.decimal128 import Decimal128
from greenmongo.bson.deprecated import UNDEFINED, DBPointer, Symbol, Undefined
from greenmongo.bson.int64 import Int64
from greenmongo.bson.min_max import MaxKey, MinKey
from greenmongo.bson.objectid import ObjectId
from greenmongo.bson.regex import Regex
from greenmongo.bson.timestamp import Timestamp
from greenmongo.errors import InvalidDocument


from greenmongo.bson.json_options import (
    _EPOCH_NAIVE,
    _EPOCH_ORDINAL,
    _INT32_MAX,
    _INT32_MIN,
    _INT64_MAX,
    _INT64_MIN,
    _MAX_DATETIME_MS,
    _MIN_DATETIME_MS,
    _UINT32_MAX,
    _UTC,
    JSONMode,
    JSONOptions,
)


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


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON (write {{\"$numberDouble\": \"{name}\"}} instead)")


def _show(value: Any) -> str:
    """A raw JSON value for an error message (objects are tuples of pairs internally)."""
    if type(value) is tuple:
        return "an object"
    if type(value) is list:
        return "an array"
    return repr(value)


def _bad(wrapper: str, problem: str) -> ValueError:
    return ValueError(f"invalid Extended JSON {wrapper}: {problem}")


def _exact_keys(fields: Dict[str, Any], wrapper: str, keys: FrozenSet[str], names: Tuple[str, ...]) -> None:
    if fields.keys() != keys:
        raise _bad(wrapper, f"the object must have exactly the keys {list(names)}, not {list(fields)}")


_BINARY_KEYS = frozenset(("base64", "subType"))
_TIMESTAMP_KEYS = frozenset(("t", "i"))
_REGEX_KEYS = frozenset(("pattern", "options"))
_POINTER_KEYS = frozenset(("$ref", "$id"))
_CODE_W_SCOPE_KEYS = frozenset(("$code", "$scope"))
_LEGACY_BINARY_KEYS = frozenset(("$binary", "$type"))
_NUMBER_LONG_KEYS = frozenset(("$numberLong",))
#: Parsed JSON values that are already final (ints are not: they need a range check).
_LEAF_TYPES = frozenset((str, float, bool, type(None)))


class _Reader:
    """Turns the raw JSON tree into BSON-native values under one JSONOptions.

    ``hooked`` is for the json object hooks, which see children already
    converted (objects as documents or BSON values instead of tuples of pairs).
    """

    __slots__ = ("opts", "legacy", "canonical", "hooked", "document_class", "plain_dict", "raw_document")

    def __init__(self, opts: JSONOptions, hooked: bool) -> None:
        self.opts = opts
        self.legacy = opts.json_mode == JSONMode.LEGACY
        self.canonical = opts.json_mode == JSONMode.CANONICAL
        self.hooked = hooked
        # dict, a MutableMapping subclass or RawBSONDocument (whose constructor takes the bytes).
        self.document_class: Any = opts.document_class
        self.plain_dict = opts.document_class is dict
        self.raw_document = getattr(opts.document_class, "_type_marker", None) == 101

    def top(self, tree: Any) -> Any:
        """The whole text's value. A top-level one-key wrapper converts like a nested one, as PyMongo's
        (``loads(dumps(ObjectId()))`` is the ObjectId, ``loads(dumps(datetime))`` the datetime); any
        other object is a document (a top-level ``{"$ref": ..., "$id": ...}`` too: the bson corpus reads
        the top level as a BSON document)."""
        if type(tree) is tuple and len(tree) != 1:
            return self.object(tree, top=True)
        return self.value(tree)

    def value(self, value: Any) -> Any:
        kind = type(value)
        if kind is tuple:
            if len(value) == 1:
                # The common case, a one-key wrapper: no dict, no key scan.
                key, item = value[0]
                handler = _SINGLE_KEY_WRAPPERS.get(key)
                if handler is not None:
                    result = handler(self, item)
                    return self.document(value) if result is _NOT_A_WRAPPER else result
            return self.object(value, top=False)
        if kind is list:
            value_of = self.value
            return [item if type(item) in _LEAF_TYPES else value_of(item) for item in value]
        if kind is int and not _INT64_MIN <= value <= _INT64_MAX:
            return float(value)  # the spec: integers no BSON integer holds become doubles
        return value

    def object(self, pairs: Tuple[Tuple[str, Any], ...], top: bool) -> Any:
        """A JSON object other than a one-key wrapper (``value`` handles those)."""
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
            return {key: item if type(item) in _LEAF_TYPES else value(item) for key, item in pairs}
        if self.raw_document:
            from greenmongo.bson.codec import encode

            return self.document_class(encode({key: value(item) for key, item in pairs},
                                              codec_options=self.opts), self.opts)
        return self.document_class([(key, value(item)) for key, item in pairs])

    def fields(self, value: Any, wrapper: str, keys: FrozenSet[str], names: Tuple[str, ...]) -> Dict[str, Any]:
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
        """Binary data as PyMongo's json_util returns it: bytes for subtype 0; for UUID data (subtype 3
        or 4, 16 bytes) a uuid.UUID whenever a uuidRepresentation is set - subtype 4 read as STANDARD,
        subtype 3 in the legacy representation chosen (PYTHON_LEGACY under STANDARD) - and Binary under
        UNSPECIFIED. Laxer than BSON decoding, which returns a UUID only for the subtype the
        representation writes: Extended JSON read back with a legacy representation (MongoEngine's
        from_json) gets its UUIDs back."""
        if subtype == 0:
            return data
        representation = self.opts.uuid_representation
        if len(data) == 16 and subtype in (UUID_SUBTYPE, OLD_UUID_SUBTYPE) and \
                representation != UuidRepresentation.UNSPECIFIED:
            if subtype == UUID_SUBTYPE:
                return uuid.UUID(bytes=data)
            if representation == UuidRepresentation.STANDARD:
                representation = UuidRepresentation.PYTHON_LEGACY
            return Binary(data, subtype).as_uuid(representation)
        return Binary(data, subtype)

    def uuid(self, text: Any) -> Any:
        match = _UUID_TEXT.fullmatch(text) if type(text) is str else None
        if match is None:
            raise _bad("$uuid", f"expected a UUID as 8-4-4-4-12 hex digits, not {_show(text)}")
        hex_digits = "".join(group for group in match.groups() if group)
        return self.binary_value(bytes.fromhex(hex_digits), UUID_SUBTYPE)

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
        if type(value) is int and not self.canonical:
            # {"$date": <millis>}: what LEGACY mode writes (and MongoDB's tools wrote before Extended JSON
            # v2); PyMongo reads it in every mode, greenmongo in all but CANONICAL, which parses as
            # strictly as the bson corpus asks ("Bad $date (number, not string or hash)").
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

