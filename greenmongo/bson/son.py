"""SON: PyMongo's ordered ``dict`` subclass, for documents whose key order matters (commands).

A plain ``dict`` keeps insertion order too; SON exists because code written for PyMongo builds
commands and sort specifications with it and relies on its extra semantics:

- ``==`` against another SON is order-sensitive, against any other mapping order-insensitive
  (through :meth:`SON.to_dict`, recursively);
- ``copy()`` returns a SON, ``values()`` a list, ``popitem()`` removes the *first* pair,
  ``setdefault`` needs its default;
- ``has_key``/``iterkeys``/``itervalues`` still work, with a DeprecationWarning.

The order lives in the dict itself (insertion-ordered), not in a second key list: a SON filled
through ``dict`` methods or by C code that bypasses ``__setitem__`` cannot fall out of step.
"""

from __future__ import annotations

import copy
import re
import warnings
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, TypeVar

#: The type of a compiled regular expression (``re.Pattern``), PyMongo's name for it.
RE_TYPE = type(re.compile(""))

_Key = TypeVar("_Key")
_Value = TypeVar("_Value")
_T = TypeVar("_T")

_MISSING: Any = object()


class SON(dict[_Key, _Value]):
    """An ordered dictionary with PyMongo's SON semantics (see the module docstring)."""

    def __init__(self, data: Mapping[_Key, _Value] | Iterable[tuple[_Key, _Value]] | None = None,
                 **kwargs: Any) -> None:
        dict.__init__(self)
        self.update(data)
        self.update(kwargs)

    def __repr__(self) -> str:
        return "SON([{}])".format(", ".join(f"({key!r}, {value!r})" for key, value in self.items()))

    def copy(self) -> SON[_Key, _Value]:
        other: SON[_Key, _Value] = SON()
        other.update(self)
        return other

    def has_key(self, key: _Key) -> bool:
        warnings.warn("SON.has_key() is deprecated, use the in operator instead",
                      DeprecationWarning, stacklevel=2)
        return key in self

    def iterkeys(self) -> Iterator[_Key]:
        warnings.warn("SON.iterkeys() is deprecated, use the keys() method instead",
                      DeprecationWarning, stacklevel=2)
        return iter(self)

    def itervalues(self) -> Iterator[_Value]:
        warnings.warn("SON.itervalues() is deprecated, use the values() method instead",
                      DeprecationWarning, stacklevel=2)
        return iter(dict.values(self))

    def values(self) -> list[_Value]:  # type: ignore[override]
        """A list (PyMongo's SON returns a list, not a view)."""
        return list(dict.values(self))

    def setdefault(self, key: _Key, default: _Value) -> _Value:
        try:
            return self[key]
        except KeyError:
            self[key] = default
            return default

    def pop(self, key: _Key, *args: _Value | _T) -> _Value | _T:
        if len(args) > 1:
            raise TypeError(f"pop expected at most 2 arguments, got {1 + len(args)}")
        try:
            value = self[key]
        except KeyError:
            if args:
                return args[0]
            raise
        del self[key]
        return value

    def popitem(self) -> tuple[_Key, _Value]:
        """Remove and return the *first* pair (a dict's ``popitem`` takes the last)."""
        for key in self:
            value = self[key]
            del self[key]
            return key, value
        raise KeyError("container is empty")

    def update(self, other: Any = None, **kwargs: _Value) -> None:
        """Like ``dict.update``, but every pair goes through ``__setitem__`` (subclasses see them)."""
        if other is None:
            pass
        elif hasattr(other, "items"):
            for key, value in other.items():
                self[key] = value
        elif hasattr(other, "keys"):
            for key in other.keys():
                self[key] = other[key]
        else:
            for key, value in other:
                self[key] = value
        for key, value in kwargs.items():
            self[key] = value  # type: ignore[index]

    def get(self, key: _Key, default: _Value | _T | None = None) -> _Value | _T | None:  # type: ignore[override]
        try:
            return self[key]
        except KeyError:
            return default

    def __eq__(self, other: object) -> bool:
        """Order-sensitive against a SON, order-insensitive (via :meth:`to_dict`) against the rest."""
        if isinstance(other, SON):
            return len(self) == len(other) and list(self.items()) == list(other.items())
        return self.to_dict() == other

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None

    def to_dict(self) -> dict[_Key, _Value]:
        """A plain ``dict`` copy, with nested mappings (in lists too) converted to dicts."""
        plain: dict[_Key, _Value] = _plain(self)
        return plain

    def __deepcopy__(self, memo: dict[int, Any]) -> SON[_Key, _Value]:
        found = memo.get(id(self), _MISSING)
        if found is not _MISSING:
            copied: SON[_Key, _Value] = found
            return copied
        out: SON[_Key, _Value] = SON()
        memo[id(self)] = out
        for key, value in self.items():
            # Compiled patterns are shared, not copied (PyMongo's rule).
            out[key] = value if isinstance(value, RE_TYPE) else copy.deepcopy(value, memo)
        return out


def _plain(value: Any) -> Any:
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    return value


__all__ = ["RE_TYPE", "SON"]
