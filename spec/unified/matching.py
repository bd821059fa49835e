"""The unified format's rules for matching an expected value against an actual one.

Pure: no driver import. The driver's BSON classes come in as a ``BsonTypes``
(for ``$$type``), the entity map as an ``EntityLookup`` (for ``$$matchesEntity``
and ``$$sessionLsid``) and the Extended JSON parser as a function (for
``$$matchAsDocument``).

Rules (spec 51, "Evaluating Matches"): a root-level document may hold keys
the expected one does not, a nested one may not; key order never matters;
arrays match element by element and must have the same length; numbers match
across int32, int64 and double when their values are equal (never bool, never
Decimal128); a document whose first and only key starts with ``$$`` is an
operator. Failures raise ``MatchError`` naming the path.
"""

from __future__ import annotations

import datetime
import re
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Optional, Protocol

from spec.unified.outcomes import MatchError, TestFileError


class _Missing:
    """An absent value (a key not in the actual document, an operation that returned nothing)."""

    _instance: Optional["_Missing"] = None

    def __new__(cls) -> "_Missing":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "<missing>"

    def __bool__(self) -> bool:
        return False


MISSING = _Missing()

NUMBER_TYPES = ("int", "long", "double", "decimal")
TYPE_ALIASES = {"number": NUMBER_TYPES}
KNOWN_TYPES = frozenset((
    "double", "string", "object", "array", "binData", "undefined", "objectId", "bool", "date", "null",
    "regex", "dbPointer", "javascript", "symbol", "javascriptWithScope", "int", "timestamp", "long",
    "decimal", "minKey", "maxKey", "number",
))
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_HEX = re.compile(r"^(?:[0-9a-fA-F]{2})*$")


class EntityLookup(Protocol):
    def entity_value(self, name: str) -> Any:
        """A BSON entity's value (raises TestFileError when undefined or not BSON)."""

    def session_lsid(self, name: str) -> Any:
        """A session entity's logical session id document."""


def operator_of(value: Any) -> Optional[str]:
    """The ``$$`` operator name when ``value`` is an operator document, else None."""
    if isinstance(value, Mapping) and len(value) == 1:
        (key,) = value.keys()
        if isinstance(key, str) and key.startswith("$$"):
            return key
    return None


class Matcher:
    """Evaluates expected values against actual ones; see the module docstring for the rules."""

    def __init__(self, types: Any, entities: Optional[EntityLookup] = None,
                 json_loads: Optional[Callable[[str], Any]] = None) -> None:
        self.types = types
        self.entities = entities
        self.json_loads = json_loads

    # -- public entry points -------------------------------------------------

    def match(self, expected: Any, actual: Any, *, root: bool = True, path: str = "$") -> None:
        """Raise MatchError unless ``actual`` matches ``expected`` (a root-level value by default)."""
        self._match(expected, actual, root, path)

    def match_documents(self, expected: Sequence[Any], actual: Sequence[Any], path: str = "$") -> None:
        """An array whose elements are each root-level documents (find, aggregate, cursor results)."""
        if not _is_array(actual):
            raise MatchError(f"{path}: expected an array of {len(expected)} documents, got {_show(actual)}")
        if len(expected) != len(actual):
            raise MatchError(f"{path}: expected {len(expected)} documents, got {len(actual)}: {_show(actual)}")
        for index, (want, got) in enumerate(zip(expected, actual)):
            self._match(want, got, True, f"{path}[{index}]")

    def matches(self, expected: Any, actual: Any, *, root: bool = True) -> bool:
        try:
            self._match(expected, actual, root, "$")
        except MatchError:
            return False
        return True

    # -- the algorithm -------------------------------------------------------

    def _match(self, expected: Any, actual: Any, root: bool, path: str) -> None:
        if isinstance(expected, Mapping):
            operator = operator_of(expected)
            if operator is not None:
                self._operator(operator, expected[operator], actual, root, path)
                return
            self._match_document(expected, actual, root, path)
            return
        if _is_array(expected):
            if not _is_array(actual):
                raise MatchError(f"{path}: expected an array, got {_show(actual)}")
            if len(expected) != len(actual):
                raise MatchError(f"{path}: expected {len(expected)} elements, got {len(actual)}: {_show(actual)}")
            for index, (want, got) in enumerate(zip(expected, actual)):
                self._match(want, got, False, f"{path}[{index}]")
            return
        if actual is MISSING:
            raise MatchError(f"{path}: expected {expected!r}, got nothing")
        if not values_equal(expected, actual):
            raise MatchError(f"{path}: expected {_show(expected)}, got {_show(actual)}")

    def _match_document(self, expected: Mapping, actual: Any, root: bool, path: str) -> None:
        if not isinstance(actual, Mapping):
            raise MatchError(f"{path}: expected a document, got {_show(actual)}")
        for key, want in expected.items():
            here = f"{path}.{key}"
            operator = operator_of(want)
            if operator == "$$exists":
                if bool(want[operator]) != (key in actual):
                    raise MatchError(f"{here}: expected the key to {'exist' if want[operator] else 'be absent'}"
                                     f" in {_show(actual)}")
                continue
            if operator == "$$unsetOrMatches" and key not in actual:
                continue
            if key not in actual:
                raise MatchError(f"{here}: missing from {_show(actual)}")
            self._match(want, actual[key], False, here)
        if not root:
            extra = [key for key in actual if key not in expected]
            if extra:
                raise MatchError(f"{path}: unexpected keys {extra} in nested document {_show(actual)}")

    def _operator(self, name: str, argument: Any, actual: Any, root: bool, path: str) -> None:
        if name == "$$exists":
            if bool(argument) != (actual is not MISSING):
                raise MatchError(f"{path}: expected the value to {'exist' if argument else 'be absent'}")
        elif name == "$$type":
            self._match_type(argument, actual, path)
        elif name == "$$unsetOrMatches":
            if actual is MISSING:
                return
            self._match(argument, actual, root, path)
        elif name == "$$matchesEntity":
            self._match(self._lookup().entity_value(argument), actual, root, path)
        elif name == "$$matchesHexBytes":
            self._match_hex_bytes(argument, actual, path)
        elif name == "$$sessionLsid":
            lsid = self._lookup().session_lsid(argument)
            self._match(lsid, actual, False, path)
        elif name == "$$lte":
            self._match_lte(argument, actual, path)
        elif name == "$$matchAsDocument":
            self._match(argument, self._parse_document(actual, path), False, path)
        elif name == "$$matchAsRoot":
            if not isinstance(argument, Mapping):
                raise TestFileError(f"{path}: $$matchAsRoot needs a document, got {argument!r}")
            self._match_document(argument, actual, True, path)
        elif name == "$$placeholder":
            raise TestFileError(f"{path}: $$placeholder is not a matching operator")
        else:
            raise TestFileError(f"{path}: unknown matching operator {name}")

    def _lookup(self) -> EntityLookup:
        if self.entities is None:
            raise TestFileError("this matcher has no entity map")
        return self.entities

    def _match_type(self, argument: Any, actual: Any, path: str) -> None:
        names = [argument] if isinstance(argument, str) else list(argument)
        wanted: set[str] = set()
        for name in names:
            if name not in KNOWN_TYPES:
                raise TestFileError(f"{path}: unknown $$type {name!r}")
            wanted.update(TYPE_ALIASES.get(name, (name,)))
        if actual is MISSING:
            raise MatchError(f"{path}: expected a value of type {names}, got nothing")
        got = bson_type_names(actual, self.types)
        if not got & wanted:
            raise MatchError(f"{path}: expected type {names}, got {sorted(got)} ({_show(actual)})")

    def _match_hex_bytes(self, argument: Any, actual: Any, path: str) -> None:
        if not isinstance(argument, str) or not _HEX.match(argument):
            raise TestFileError(f"{path}: malformed $$matchesHexBytes {argument!r}")
        want = bytes.fromhex(argument)
        if isinstance(actual, str):
            actual = actual.encode("latin-1")
        if not isinstance(actual, (bytes, bytearray, memoryview)) or bytes(actual) != want:
            raise MatchError(f"{path}: expected bytes {argument}, got {_show(actual)}")

    def _match_lte(self, argument: Any, actual: Any, path: str) -> None:
        if not is_number(argument):
            raise TestFileError(f"{path}: $$lte needs a number, got {argument!r}")
        if not is_number(actual) or not actual <= argument:
            raise MatchError(f"{path}: expected a number <= {argument}, got {_show(actual)}")

    def _parse_document(self, actual: Any, path: str) -> Mapping:
        if not isinstance(actual, str):
            raise MatchError(f"{path}: $$matchAsDocument expects an Extended JSON string, got {_show(actual)}")
        if self.json_loads is None:
            raise TestFileError("this matcher has no Extended JSON parser")
        try:
            parsed = self.json_loads(actual)
        except Exception as exc:
            raise MatchError(f"{path}: $$matchAsDocument could not parse {actual!r}: {exc}") from exc
        if not isinstance(parsed, Mapping):
            raise MatchError(f"{path}: $$matchAsDocument expects a JSON object, got {actual!r}")
        return parsed


# -- value helpers (pure functions, also used by the outcome comparison) ------

def _is_array(value: Any) -> bool:
    return isinstance(value, (list, tuple))


def is_number(value: Any) -> bool:
    """int32, int64 or double (bool and Decimal128 are not numbers for flexible comparisons)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _normalize(value: Any) -> Any:
    """Aware datetimes to naive UTC (the driver decodes naive UTC); Binary subtype 0 to bytes."""
    if isinstance(value, datetime.datetime) and value.tzinfo is not None:
        return value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    if isinstance(value, bytes) and getattr(value, "subtype", None) == 0:
        return bytes(value)
    return value


def values_equal(expected: Any, actual: Any) -> bool:
    """Scalar equality with flexible numerics; bools only equal bools."""
    if is_number(expected) and is_number(actual):
        return expected == actual
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(expected, bool) and isinstance(actual, bool) and expected == actual
    if is_number(expected) or is_number(actual):
        return False
    expected, actual = _normalize(expected), _normalize(actual)
    if isinstance(expected, (bytes, bytearray)) and isinstance(actual, (bytes, bytearray)):
        return (getattr(expected, "subtype", 0), bytes(expected)) == (getattr(actual, "subtype", 0), bytes(actual))
    try:
        return bool(expected == actual)
    except TypeError:
        return False


def documents_equal(expected: Any, actual: Any) -> bool:
    """Exact equality for collection outcomes: no operators, no extra keys, key order free."""
    if isinstance(expected, Mapping):
        if not isinstance(actual, Mapping) or set(expected.keys()) != set(actual.keys()):
            return False
        return all(documents_equal(expected[key], actual[key]) for key in expected)
    if _is_array(expected):
        return _is_array(actual) and len(expected) == len(actual) and all(
            documents_equal(want, got) for want, got in zip(expected, actual))
    if isinstance(actual, Mapping) or _is_array(actual):
        return False
    return values_equal(expected, actual)


def bson_type_names(value: Any, types: Any) -> set[str]:
    """The ``$type`` names that describe a Python value decoded from BSON."""

    def is_a(attr: str) -> bool:
        cls = getattr(types, attr, None)
        return cls is not None and isinstance(value, cls)

    if value is None:
        return {"null"}
    if isinstance(value, bool):
        return {"bool"}
    if is_a("Int64"):
        return {"long"}
    if isinstance(value, int):
        return {"int"} if _INT32_MIN <= value <= _INT32_MAX else {"long"}
    if isinstance(value, float):
        return {"double"}
    if is_a("Decimal128"):
        return {"decimal"}
    if is_a("Symbol"):
        return {"symbol"}
    if is_a("Code"):  # before str: Code is a str subclass
        return {"javascriptWithScope"} if getattr(value, "scope", None) is not None else {"javascript"}
    if isinstance(value, str):
        return {"string"}
    if is_a("ObjectId"):
        return {"objectId"}
    if is_a("Binary") or isinstance(value, (bytes, bytearray, uuid.UUID)):
        return {"binData"}
    if isinstance(value, datetime.datetime) or is_a("DatetimeMS"):
        return {"date"}
    if is_a("Timestamp"):
        return {"timestamp"}
    if is_a("Regex") or isinstance(value, re.Pattern):
        return {"regex"}
    if is_a("MinKey"):
        return {"minKey"}
    if is_a("MaxKey"):
        return {"maxKey"}
    if is_a("DBPointer"):
        return {"dbPointer"}
    if is_a("Undefined"):
        return {"undefined"}
    if is_a("DBRef") or isinstance(value, Mapping):
        return {"object"}
    if _is_array(value):
        return {"array"}
    return {type(value).__name__}


def _show(value: Any, limit: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
