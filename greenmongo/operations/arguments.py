"""PyMongo-shaped arguments -> command fields, with PyMongo's argument errors.

Sort and index keys may be a mapping, a list of ``(key, direction)`` pairs or
of bare key names; projections a mapping or a list of field names; hints a
name or a key spec. Collations may be a mapping or a ``Collation``.
"""

from __future__ import annotations

from collections import abc
from typing import Any, Mapping, Optional, Sequence, Union

from greenmongo.bson.raw import RawBSONDocument
from greenmongo.errors import ConfigurationError

# Index key directions and types (PyMongo's names).
ASCENDING = 1
DESCENDING = -1
GEO2D = "2d"
GEOSPHERE = "2dsphere"
HASHED = "hashed"
TEXT = "text"

KeySpec = Union[str, Sequence[Any], Mapping[str, Any]]


def validate_is_mapping(name: str, value: Any) -> None:
    if not isinstance(value, abc.Mapping):
        raise TypeError(f"{name} must be an instance of dict, bson.son.SON, or any other type that inherits "
                        f"from collections.Mapping, not {type(value).__name__}")


def validate_is_document_type(name: str, value: Any) -> None:
    if type(value) is dict:  # the common case, without the ABC machinery (bulk inserts call this per document)
        return
    if not isinstance(value, (abc.MutableMapping, RawBSONDocument)):
        raise TypeError(f"{name} must be an instance of dict, bson.son.SON, bson.raw_bson.RawBSONDocument, or "
                        f"a type that inherits from collections.MutableMapping, not {type(value).__name__}")


def validate_boolean(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, not {type(value).__name__}")
    return value


def validate_optional_boolean(name: str, value: Any) -> Optional[bool]:
    return None if value is None else validate_boolean(name, value)


def validate_integer(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an instance of int, not {type(value).__name__}")
    return value


def validate_non_negative_integer(name: str, value: Any) -> int:
    number = validate_integer(name, value)
    if number < 0:
        raise ValueError(f"{name} must be >= 0")
    return number


def validate_optional_non_negative_integer(name: str, value: Any) -> Optional[int]:
    return None if value is None else validate_non_negative_integer(name, value)


def validate_list(name: str, value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(f"{name} must be a list, not {type(value).__name__}")
    return value


def _check_key_pair(key: Any, value: Any) -> None:
    if not isinstance(key, str):
        raise TypeError(f"first item in each key pair must be an instance of str, not {type(key).__name__}")
    if isinstance(value, bool) or not isinstance(value, (str, int, float, abc.Mapping)):
        raise TypeError("second item in each key pair must be 1, -1, '2d', or another valid MongoDB index "
                        f"specifier, not {type(value).__name__}")


def index_list(key_or_list: KeySpec, direction: Any = None) -> list[tuple[str, Any]]:
    """``(key, direction)`` pairs from a key (with an optional direction), a list or a mapping."""
    if direction is not None:
        if not isinstance(key_or_list, str):
            raise TypeError(f"Expected a string and a direction, not {type(key_or_list).__name__}")
        return [(key_or_list, direction)]
    if isinstance(key_or_list, str):
        return [(key_or_list, ASCENDING)]
    if isinstance(key_or_list, abc.ItemsView):
        return list(key_or_list)
    if isinstance(key_or_list, abc.Mapping):
        return list(key_or_list.items())
    if not isinstance(key_or_list, (list, tuple)):
        raise TypeError("if no direction is specified, key_or_list must be an instance of list, not "
                        f"{type(key_or_list).__name__}")
    pairs = []
    for item in key_or_list:
        if isinstance(item, str):
            pairs.append((item, ASCENDING))
        else:
            key, value = item
            pairs.append((key, value))
    return pairs


def index_document(spec: KeySpec) -> dict[str, Any]:
    """A key document (sort, index keys, hint) from a mapping or a list of pairs or names."""
    if not isinstance(spec, (list, tuple, abc.Mapping)):
        raise TypeError(f"must use a dictionary or a list of (key, direction) pairs, not: {spec!r}")
    if not len(spec):
        raise ValueError("key_or_list must not be empty")
    document: dict[str, Any] = {}
    items = spec.items() if isinstance(spec, abc.Mapping) else index_list(spec)
    for key, value in items:
        _check_key_pair(key, value)
        document[key] = value
    return document


def sort_document(sort: Optional[KeySpec]) -> Optional[dict[str, Any]]:
    """None stays None; a bare key name sorts ascending, like PyMongo's ``Cursor.sort("a")``."""
    if sort is None:
        return None
    if isinstance(sort, str):
        return {sort: ASCENDING}
    return index_document(sort)


def hint_value(hint: Optional[KeySpec]) -> Optional[Union[str, dict[str, Any]]]:
    """An index name stays a string; anything else becomes a key document."""
    if hint is None or isinstance(hint, str):
        return hint
    return index_document(hint)


def index_name(keys: KeySpec) -> str:
    """The server's default index name: ``{a: 1, b: -1}`` -> ``"a_1_b_-1"`` (Index Management spec)."""
    return "_".join(f"{key}_{value}" for key, value in index_list(keys))


def projection_document(projection: Any, name: str = "projection") -> Optional[Mapping[str, Any]]:
    """A projection from a mapping, or from a list/set of field names (each included)."""
    if projection is None or isinstance(projection, abc.Mapping):
        return projection
    if isinstance(projection, (abc.Sequence, abc.Set)) and not isinstance(projection, (str, bytes)):
        if not all(isinstance(field, str) for field in projection):
            raise TypeError(f"{name} must be a list of key names, each an instance of str")
        return dict.fromkeys(projection, 1)
    raise TypeError(f"{name} must be a mapping or list of key names")


def collation_document(collation: Any) -> Optional[Mapping[str, Any]]:
    """None, a mapping, or anything with a ``document`` mapping (``Collation``)."""
    if collation is None:
        return None
    if isinstance(collation, abc.Mapping):
        return dict(collation)
    document = getattr(collation, "document", None)
    if isinstance(document, abc.Mapping):
        return dict(document)
    raise TypeError("collation must be a dict, an instance of collation.Collation, or None")


def first_key(document: Mapping[str, Any]) -> Optional[str]:
    if isinstance(document, RawBSONDocument):
        for key in document:
            return key
        return None
    return next(iter(document), None)


def validate_update(update: Any) -> None:
    """An update document must be non-empty and start with an operator; a pipeline is a non-empty list.

    Only the first key is checked (CRUD spec): the server rejects documents
    that mix operators and fields.
    """
    if isinstance(update, list):
        if not update:
            raise ValueError("update must not be an empty list")
        return
    validate_is_mapping("update", update)
    if not update:
        raise ValueError("update cannot be empty")
    key = first_key(update)
    if not isinstance(key, str) or not key.startswith("$"):
        raise ValueError("update only works with $ operators")


def validate_replacement(replacement: Any) -> None:
    """A replacement document must not start with an operator (CRUD spec)."""
    validate_is_mapping("replacement", replacement)
    key = first_key(replacement)
    if isinstance(key, str) and key.startswith("$"):
        raise ValueError("replacement can not include $ operators")


def validate_array_filters(array_filters: Any) -> Optional[list[Any]]:
    if array_filters is None:
        return None
    if not isinstance(array_filters, list):
        raise TypeError(f"array_filters must be a list, not {type(array_filters).__name__}")
    return array_filters


def require_acknowledged_for(option: str, acknowledged: bool) -> None:
    if not acknowledged:
        raise ConfigurationError(f"{option} is unsupported for unacknowledged writes.")
