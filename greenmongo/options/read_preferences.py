"""Read preference objects with PyMongo's names and shapes (Server Selection spec).

These only describe a preference; choosing servers is the server-selection
code's job, which reads ``mode``, ``tag_sets`` and ``max_staleness``. Objects
are immutable: accessors return fresh copies.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

from greenmongo.errors import ConfigurationError

_PRIMARY, _PRIMARY_PREFERRED, _SECONDARY, _SECONDARY_PREFERRED, _NEAREST = range(5)

#: The ``mode`` strings sent to mongos, indexed by ``mode``.
MONGOS_MODES = ("primary", "primaryPreferred", "secondary", "secondaryPreferred", "nearest")

TagSets = Sequence[Mapping[str, Any]]


def _freeze_tag_sets(tag_sets: Optional[TagSets]) -> Optional[tuple[tuple[tuple[str, Any], ...], ...]]:
    if tag_sets is None:
        return None
    if isinstance(tag_sets, (str, bytes, Mapping)) or not isinstance(tag_sets, Sequence):
        raise ConfigurationError(f"tag_sets must be a list of documents, not {type(tag_sets).__name__}")
    if not tag_sets:
        raise ConfigurationError("tag_sets must be None or contain at least one tag set (use [{}] for any)")
    frozen = []
    for tag_set in tag_sets:
        if not isinstance(tag_set, Mapping):
            raise ConfigurationError(f"each tag set must be a document, not {type(tag_set).__name__}")
        frozen.append(tuple(tag_set.items()))
    return tuple(frozen)


def _validate_max_staleness(max_staleness: Any) -> int:
    """-1 means no maximum; otherwise a positive whole number of seconds.

    The 90-second floor applies to replica sets only, so it is checked by
    server selection (and by the ``maxStalenessSeconds`` client option), not here.
    """
    if max_staleness is None:
        return -1
    if isinstance(max_staleness, bool) or not isinstance(max_staleness, int):
        raise ConfigurationError(f"max_staleness must be an integer, not {type(max_staleness).__name__}")
    if max_staleness == -1:
        return -1
    if max_staleness <= 0:
        raise ConfigurationError(f"max_staleness must be -1 or a positive integer, not {max_staleness}")
    return max_staleness


def _validate_hedge(hedge: Any) -> Optional[Dict[str, Any]]:
    if hedge is None:
        return None
    if not isinstance(hedge, Mapping):
        raise ConfigurationError(f"hedge must be a document, not {type(hedge).__name__}")
    return dict(hedge)


class ServerMode:
    """Base of the five read preferences: a mode plus optional tag sets, max staleness and hedge."""

    __slots__ = ("_mode", "_tag_sets", "_max_staleness", "_hedge", "_hash")
    _hash: int

    def __init__(self, mode: int, tag_sets: Optional[TagSets] = None, max_staleness: int = -1,
                 hedge: Optional[Mapping[str, Any]] = None) -> None:
        self._mode = mode
        self._tag_sets = _freeze_tag_sets(tag_sets)
        self._max_staleness = _validate_max_staleness(max_staleness)
        self._hedge = _validate_hedge(hedge)
        if mode == _PRIMARY:
            if self._tag_sets is not None and self.tag_sets != [{}]:
                raise ConfigurationError("Read preference primary cannot be combined with tags")
            if self._max_staleness != -1:
                raise ConfigurationError("Read preference primary cannot be combined with maxStalenessSeconds")
            if self._hedge is not None:
                raise ConfigurationError("Read preference primary cannot be combined with hedge")

    @property
    def name(self) -> str:
        """The class name, e.g. ``"PrimaryPreferred"`` (as in PyMongo)."""
        return type(self).__name__

    @property
    def mongos_mode(self) -> str:
        """The mode as the server spells it, e.g. ``"primaryPreferred"``."""
        return MONGOS_MODES[self._mode]

    @property
    def mode(self) -> int:
        """0 primary, 1 primaryPreferred, 2 secondary, 3 secondaryPreferred, 4 nearest."""
        return self._mode

    @property
    def tag_sets(self) -> list[dict[str, Any]]:
        """The tag sets in order; ``[{}]`` (matches any server) when none were given."""
        if self._tag_sets is None:
            return [{}]
        return [dict(tag_set) for tag_set in self._tag_sets]

    @property
    def max_staleness(self) -> int:
        """Maximum replication lag in seconds; -1 means no maximum."""
        return self._max_staleness

    @property
    def hedge(self) -> Optional[dict[str, Any]]:
        return dict(self._hedge) if self._hedge is not None else None

    @property
    def min_wire_version(self) -> int:
        """Servers below this wire version cannot honour the preference (maxStalenessSeconds needs 5)."""
        return 0 if self._max_staleness == -1 else 5

    @property
    def document(self) -> dict[str, Any]:
        """The ``$readPreference`` document (Server Selection spec, "Document structure")."""
        doc: dict[str, Any] = {"mode": self.mongos_mode}
        if self._tag_sets is not None and self._tag_sets != ((),):
            doc["tags"] = self.tag_sets
        if self._max_staleness != -1:
            doc["maxStalenessSeconds"] = self._max_staleness
        if self._hedge is not None:
            doc["hedge"] = dict(self._hedge)
        return doc

    def _key(self) -> Tuple[Any, ...]:
        return (self._mode, self._tag_sets or ((),), self._max_staleness,
                tuple(sorted(self._hedge.items())) if self._hedge is not None else None)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ServerMode):
            return self._key() == other._key()
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __hash__(self) -> int:
        # Immutable, and hashed twice per operation (the topology's selection cache): computed once. Not
        # pickled (__reduce__ rebuilds from the constructor), so no other process's string hashes leak in.
        try:
            return self._hash
        except AttributeError:
            pass
        try:
            value = hash(self._key())
        except TypeError:  # unhashable tag values
            value = hash((self._mode, self._max_staleness))
        self._hash = value
        return value

    def __repr__(self) -> str:
        tag_sets = self.tag_sets if self._tag_sets is not None else None
        return f"{self.name}(tag_sets={tag_sets!r}, max_staleness={self._max_staleness!r}, hedge={self._hedge!r})"

    def __reduce__(self) -> Tuple[Any, ...]:
        if self._mode == _PRIMARY:
            return type(self), ()
        tag_sets = self.tag_sets if self._tag_sets is not None else None
        return type(self), (tag_sets, self._max_staleness, self.hedge)


class Primary(ServerMode):
    """Read from the primary only."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(_PRIMARY)

    def __repr__(self) -> str:
        return "Primary()"


class PrimaryPreferred(ServerMode):
    """Read from the primary if available, otherwise from eligible secondaries."""

    __slots__ = ()

    def __init__(self, tag_sets: Optional[TagSets] = None, max_staleness: int = -1,
                 hedge: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(_PRIMARY_PREFERRED, tag_sets, max_staleness, hedge)


class Secondary(ServerMode):
    """Read from eligible secondaries only."""

    __slots__ = ()

    def __init__(self, tag_sets: Optional[TagSets] = None, max_staleness: int = -1,
                 hedge: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(_SECONDARY, tag_sets, max_staleness, hedge)


class SecondaryPreferred(ServerMode):
    """Read from eligible secondaries, or the primary when there are none."""

    __slots__ = ()

    def __init__(self, tag_sets: Optional[TagSets] = None, max_staleness: int = -1,
                 hedge: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(_SECONDARY_PREFERRED, tag_sets, max_staleness, hedge)


class Nearest(ServerMode):
    """Read from any eligible member within the latency window."""

    __slots__ = ()

    def __init__(self, tag_sets: Optional[TagSets] = None, max_staleness: int = -1,
                 hedge: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(_NEAREST, tag_sets, max_staleness, hedge)


_CLASSES = (Primary, PrimaryPreferred, Secondary, SecondaryPreferred, Nearest)


class ReadPreference:
    """The five modes as ready-made instances (no tags, no max staleness)."""

    PRIMARY = Primary()
    PRIMARY_PREFERRED = PrimaryPreferred()
    SECONDARY = Secondary()
    SECONDARY_PREFERRED = SecondaryPreferred()
    NEAREST = Nearest()


def read_pref_mode_from_name(name: str) -> int:
    """``"secondaryPreferred"`` -> 3."""
    try:
        return MONGOS_MODES.index(name)
    except ValueError:
        raise ConfigurationError(
            f"Invalid read preference {name!r}: must be one of {', '.join(MONGOS_MODES)}") from None


def make_read_preference(mode: Union[int, str], tag_sets: Optional[TagSets] = None, max_staleness: int = -1,
                         hedge: Optional[Mapping[str, Any]] = None) -> ServerMode:
    """Build the read preference for ``mode`` (an int or a mode name)."""
    if isinstance(mode, str):
        mode = read_pref_mode_from_name(mode)
    if isinstance(mode, bool) or not isinstance(mode, int) or not 0 <= mode < len(_CLASSES):
        raise ConfigurationError(f"Invalid read preference mode {mode!r}")
    if mode == _PRIMARY:
        if tag_sets not in (None, [{}], ({},)):
            raise ConfigurationError("Read preference primary cannot be combined with tags")
        if max_staleness not in (None, -1):
            raise ConfigurationError("Read preference primary cannot be combined with maxStalenessSeconds")
        if hedge is not None:
            raise ConfigurationError("Read preference primary cannot be combined with hedge")
        return Primary()
    # Not Primary (handled above): the other four all take these three (mypy sees all five classes).
    return _CLASSES[mode](tag_sets, max_staleness, hedge)  # type: ignore[call-arg]


__all__ = [
    "MONGOS_MODES", "Nearest", "Primary", "PrimaryPreferred", "ReadPreference", "Secondary",
    "SecondaryPreferred", "ServerMode", "make_read_preference", "read_pref_mode_from_name",
]
