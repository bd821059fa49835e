"""WriteConcern (Read and Write Concern spec): w, wtimeout, j (and PyMongo's deprecated fsync)."""

from __future__ import annotations

from typing import Any, Optional, Union

from greenmongo.errors import ConfigurationError


class WriteConcern:
    """Immutable write concern; ``WriteConcern()`` is the server default and is never sent.

    ``w=0`` with ``j=True`` (or ``fsync=True``) is inconsistent and raises, as the spec requires.
    """

    __slots__ = ("_document", "_acknowledged")

    def __init__(self, w: Optional[Union[int, str]] = None, wtimeout: Optional[int] = None,
                 j: Optional[bool] = None, fsync: Optional[bool] = None) -> None:
        document: dict[str, Any] = {}
        if w is not None:
            if isinstance(w, bool) or not isinstance(w, (int, str)):
                raise ConfigurationError(f"w must be a non-negative integer or a string, not {type(w).__name__}")
            if isinstance(w, int) and w < 0:
                raise ConfigurationError(f"w must be a non-negative integer or a string, not {w}")
            document["w"] = w
        if wtimeout is not None:
            if isinstance(wtimeout, bool) or not isinstance(wtimeout, int):
                raise ConfigurationError(f"wtimeout must be a non-negative integer, not {type(wtimeout).__name__}")
            if wtimeout < 0:
                raise ConfigurationError(f"wtimeout must be a non-negative integer, not {wtimeout}")
            document["wtimeout"] = wtimeout
        for name, value in (("j", j), ("fsync", fsync)):
            if value is None:
                continue
            if not isinstance(value, bool):
                raise ConfigurationError(f"{name} must be True or False, not {type(value).__name__}")
            document[name] = value
        if document.get("w") == 0 and (document.get("j") or document.get("fsync")):
            raise ConfigurationError("Cannot combine w=0 (unacknowledged) with j=True or fsync=True")
        self._document = document
        self._acknowledged = document.get("w") != 0

    @property
    def document(self) -> dict[str, Any]:
        """The ``writeConcern`` command field (a copy; empty for the server default)."""
        return dict(self._document)

    @property
    def acknowledged(self) -> bool:
        """False only for ``w=0`` (without j/fsync): the server sends no reply worth waiting for."""
        return self._acknowledged

    @property
    def is_server_default(self) -> bool:
        return not self._document

    def __eq__(self, other: object) -> bool:
        if isinstance(other, WriteConcern):
            return self._document == other._document
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._document.items())))

    def __repr__(self) -> str:
        return "WriteConcern({})".format(", ".join(f"{k}={v!r}" for k, v in self._document.items()))


DEFAULT_WRITE_CONCERN = WriteConcern()

__all__ = ["DEFAULT_WRITE_CONCERN", "WriteConcern"]
