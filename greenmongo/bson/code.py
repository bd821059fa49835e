"""Code: JavaScript code, with an optional scope document (BSON code_w_scope)."""

from __future__ import annotations

from collections.abc import Mapping as _Mapping
from typing import Any, Mapping, Optional

from greenmongo.bson._slots import getstate_slots, setstate_slots


class Code(str):
    __slots__ = ("__scope",)
    __scope: Optional[Mapping[str, Any]]
    __getstate__ = getstate_slots
    __setstate__ = setstate_slots
    _type_marker = 13

    def __new__(cls, code: Any, scope: Optional[Mapping[str, Any]] = None, **kwargs: Any) -> "Code":
        if not isinstance(code, str):
            raise TypeError(f"code must be an instance of str, not {type(code).__name__}")
        self = str.__new__(cls, code)
        inherited = code.scope if isinstance(code, Code) else None
        if scope is not None:
            if type(scope) is not dict and not isinstance(scope, _Mapping):
                raise TypeError("scope must be a mapping")
            scope = scope if inherited is None else {**inherited, **scope}
        else:
            scope = inherited
        if kwargs:
            scope = {**(scope or {}), **kwargs}
        self.__scope = scope
        return self

    @classmethod
    def _from_wire(cls, code: str, scope: Optional[Mapping[str, Any]]) -> "Code":
        """Decoder fast path: the scope is a freshly decoded document."""
        self = str.__new__(cls, code)
        self.__scope = scope
        return self

    @property
    def scope(self) -> Optional[Mapping[str, Any]]:
        return self.__scope

    def __repr__(self) -> str:
        return f"Code({str.__repr__(self)}, {self.__scope!r})"

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, Code):
            return (self.__scope, str(self)) == (other.__scope, str(other))
        return False

    __hash__ = None  # type: ignore[assignment]

    def __ne__(self, other: Any) -> bool:
        return not self == other
