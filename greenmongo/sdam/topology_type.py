"""The SDAM TopologyType enum, with PyMongo's member names and values."""

from __future__ import annotations

import enum


class TopologyType(enum.IntEnum):
    Single = 0
    ReplicaSetNoPrimary = 1
    ReplicaSetWithPrimary = 2
    Sharded = 3
    Unknown = 4
    LoadBalanced = 5


#: PyMongo's spelling (``TOPOLOGY_TYPE.Sharded``).
TOPOLOGY_TYPE = TopologyType

REPLICA_SET_TYPES = frozenset({TopologyType.ReplicaSetNoPrimary, TopologyType.ReplicaSetWithPrimary})
