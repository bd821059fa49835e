"""ServerApi (Stable API spec): the declared API version, sent with every command."""

from __future__ import annotations

from typing import Any, Optional

from greenmongo.errors import ConfigurationError


class ServerApiVersion:
    """Known Stable API versions."""

    V1 = "1"


_KNOWN_VERSIONS = frozenset({ServerApiVersion.V1})


class ServerApi:
    """An immutable API declaration; ``strict`` and ``deprecation_errors`` are sent only when set."""

    __slots__ = ("_version", "_strict", "_deprecation_errors")

    def __init__(self, version: str, strict: Optional[bool] = None,
                 deprecation_errors: Optional[bool] = None) -> None:
        if version not in _KNOWN_VERSIONS:
            raise ConfigurationError(
                f"Unknown ServerApi version {version!r}; known versions: {', '.join(sorted(_KNOWN_VERSIONS))}")
        for name, value in (("strict", strict), ("deprecation_errors", deprecation_errors)):
            if value is not None and not isinstance(value, bool):
                raise ConfigurationError(f"ServerApi {name} must be True, False or None, not {type(value).__name__}")
        self._version = version
        self._strict = strict
        self._deprecation_errors = deprecation_errors

    @property
    def version(self) -> str:
        return self._version

    @property
    def strict(self) -> Optional[bool]:
        return self._strict

    @property
    def deprecation_errors(self) -> Optional[bool]:
        return self._deprecation_errors

    @property
    def document(self) -> dict[str, Any]:
        """The command fields this declaration adds: apiVersion, and apiStrict/apiDeprecationErrors if set."""
        doc: dict[str, Any] = {"apiVersion": self._version}
        if self._strict is not None:
            doc["apiStrict"] = self._strict
        if self._deprecation_errors is not None:
            doc["apiDeprecationErrors"] = self._deprecation_errors
        return doc

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ServerApi):
            return (self._version, self._strict, self._deprecation_errors) == (
                other._version, other._strict, other._deprecation_errors)
        return NotImplemented

    def __hash__(self) -> int:
        return hash((ServerApi, self._version, self._strict, self._deprecation_errors))

    def __repr__(self) -> str:
        return (f"ServerApi(version={self._version!r}, strict={self._strict!r}, "
                f"deprecation_errors={self._deprecation_errors!r})")


__all__ = ["ServerApi", "ServerApiVersion"]
