"""Read preference, read concern and write concern built from merged client options."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from greenmongo.options.read_concern import ReadConcern
from greenmongo.options.read_preferences import ServerMode, make_read_preference
from greenmongo.options.write_concern import WriteConcern


def read_preference_from(options: Mapping[str, Any]) -> ServerMode:
    """``read_preference`` (an object) wins; else readPreference + readPreferenceTags + maxStalenessSeconds."""
    explicit: Optional[ServerMode] = options.get("read_preference")  # validated: a ServerMode
    if explicit is not None:
        return explicit
    tag_sets = options.get("readPreferenceTags") or None
    return make_read_preference(options.get("readPreference") or "primary", tag_sets,
                                options.get("maxStalenessSeconds", -1) or -1)


def read_concern_from(options: Mapping[str, Any]) -> ReadConcern:
    return ReadConcern(options.get("readConcernLevel"))


def write_concern_from(options: Mapping[str, Any]) -> WriteConcern:
    wtimeout = options.get("wTimeoutMS")
    if isinstance(wtimeout, float) and wtimeout.is_integer():
        wtimeout = int(wtimeout)
    return WriteConcern(w=options.get("w"), wtimeout=wtimeout, j=options.get("journal"),
                        fsync=options.get("fsync"))


__all__ = ["read_concern_from", "read_preference_from", "write_concern_from"]
