"""ReadConcern (Read and Write Concern spec): a level, or the server's default when unset."""

from __future__ import annotations

from typing import Any, Optional

from greenmongo.errors import ConfigurationError


class ReadConcern:
    """Immutable read concern. ``ReadConcern()`` is the server default and is never sent.

    Unknown levels are accepted for forward compatibility: the server validates them.
    """

    __slots__ = ("_level",)

    def __init__(self, level: Optional[str] = None) -> None:
        if level is not None and not isinstance(level, str):
            raise ConfigurationError(f"read concern level must be a string or None, not {type(level).__name__}")
        self._level = level

    @property
    def level(self) -> Optional[str]:
        return self._level

    @property
    def document(self) -> dict[str, Any]:
        """The ``readConcern`` command field (empty for the server default)."""
        return {} if self._level is None else {"level": self._level}

    @property
    def is_server_default(self) -> bool:
        return self._level is None

    @property
    def ok_for_legacy(self) -> bool:
        """True when a server older than 3.2 (no readConcern support) can still honour it."""
        return self._level is None or self._level == "local"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ReadConcern):
            return self._level == other._level
        return NotImplemented

    def __hash__(self) -> int:
        return hash((ReadConcern, self._level))

    def __repr__(self) -> str:
        return f"ReadConcern(level={self._level!r})" if self._level is not None else "ReadConcern()"


DEFAULT_READ_CONCERN = ReadConcern()

__all__ = ["DEFAULT_READ_CONCERN", "ReadConcern"]
