"""What the SDAM core needs of a read preference, and the primary one (writes, reads that name none).

The options layer's ReadPreference classes satisfy ``ReadPreferenceLike``; the pure core never imports
them (options sits above sdam).
"""

from __future__ import annotations

from typing import Any, Mapping, Protocol, Sequence

PRIMARY, PRIMARY_PREFERRED, SECONDARY, SECONDARY_PREFERRED, NEAREST = range(5)


class ReadPreferenceLike(Protocol):
    """What selection reads of a read preference (``options.read_preferences.ServerMode``)."""

    @property
    def mode(self) -> int: ...

    @property
    def tag_sets(self) -> Sequence[Mapping[str, Any]]: ...

    @property
    def max_staleness(self) -> int: ...


class _Primary:
    """The read preference of writes and of reads that name none."""

    mode = PRIMARY
    tag_sets: Sequence[Mapping[str, Any]] = ({},)
    max_staleness = -1

    def __repr__(self) -> str:
        return "Primary()"


PRIMARY_READ_PREFERENCE: ReadPreferenceLike = _Primary()
