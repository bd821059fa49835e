"""The SDAM ServerType enum, with PyMongo's member names and values.

``PossiblePrimary`` is deliberately absent: the SDAM spec says multi-threaded
and asynchronous clients do not need it and treat it as ``Unknown`` (its only
job is to order a single-threaded client's scan).
"""

from __future__ import annotations

import enum


class ServerType(enum.IntEnum):
    Unknown = 0
    Mongos = 1
    RSPrimary = 2
    RSSecondary = 3
    RSArbiter = 4
    RSOther = 5
    RSGhost = 6
    Standalone = 7
    LoadBalancer = 8


#: PyMongo's spelling (``SERVER_TYPE.RSPrimary``).
SERVER_TYPE = ServerType

#: Types a client can read application data from (SDAM "Data-Bearing Server Type").
DATA_BEARING_TYPES = frozenset({
    ServerType.Mongos, ServerType.RSPrimary, ServerType.RSSecondary,
    ServerType.Standalone, ServerType.LoadBalancer,
})

#: Replica-set member types that carry a host list (RSGhost does not).
RS_MEMBER_TYPES = frozenset({
    ServerType.RSPrimary, ServerType.RSSecondary, ServerType.RSArbiter, ServerType.RSOther,
})
