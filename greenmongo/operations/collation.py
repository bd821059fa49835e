"""Collation (Collation spec) with PyMongo's class and constant names.

Only ``locale`` is required, and nothing is validated beyond types: unknown
options and values go to the server as given, for forward compatibility.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional


class CollationStrength:
    PRIMARY = 1
    SECONDARY = 2
    TERTIARY = 3
    QUATERNARY = 4
    IDENTICAL = 5


class CollationAlternate:
    NON_IGNORABLE = "non-ignorable"
    SHIFTED = "shifted"


class CollationMaxVariable:
    PUNCT = "punct"
    SPACE = "space"


class CollationCaseFirst:
    UPPER = "upper"
    LOWER = "lower"
    OFF = "off"


class Collation:
    """A collation document; ``document`` is what the server receives."""

    __slots__ = ("__document",)

    def __init__(self, locale: str, caseLevel: Optional[bool] = None, caseFirst: Optional[str] = None,
                 strength: Optional[int] = None, numericOrdering: Optional[bool] = None,
                 alternate: Optional[str] = None, maxVariable: Optional[str] = None,
                 normalization: Optional[bool] = None, backwards: Optional[bool] = None,
                 **kwargs: Any) -> None:
        if not isinstance(locale, str):
            raise TypeError(f"locale must be an instance of str, not {type(locale).__name__}")
        document: dict[str, Any] = {"locale": locale}
        for name, value, kind in (("caseLevel", caseLevel, bool), ("caseFirst", caseFirst, str),
                                  ("strength", strength, int), ("numericOrdering", numericOrdering, bool),
                                  ("alternate", alternate, str), ("maxVariable", maxVariable, str),
                                  ("normalization", normalization, bool), ("backwards", backwards, bool)):
            if value is None:
                continue
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                raise TypeError(f"{name} must be an instance of {kind.__name__}, not {type(value).__name__}")
            document[name] = value
        document.update(kwargs)
        self.__document = document

    @property
    def document(self) -> dict[str, Any]:
        return dict(self.__document)

    def __repr__(self) -> str:
        return "Collation({})".format(", ".join(f"{k}={v!r}" for k, v in self.__document.items()))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Collation):
            return self.__document == other.__document
        if isinstance(other, Mapping):
            return self.__document == dict(other)
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    __hash__ = None  # type: ignore[assignment]
