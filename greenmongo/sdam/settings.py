"""Client-side constants and the few topology options the pure SDAM core needs.

The Topology (I/O layer) builds one :class:`TopologySettings` from the parsed
URI and keyword options; everything in ``greenmongo.sdam`` reads only this.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from greenmongo.sdam.address import Address
from greenmongo.sdam.topology_type import TopologyType
from greenmongo.wire.versions import (  # re-exported: the SDAM core reads them from here
    CLIENT_MAX_WIRE_VERSION as CLIENT_MAX_WIRE_VERSION,
    CLIENT_MIN_SERVER_VERSION as CLIENT_MIN_SERVER_VERSION,
    CLIENT_MIN_WIRE_VERSION as CLIENT_MIN_WIRE_VERSION,
)

#: Server Monitoring: the shortest allowed wait between checks of one server (not configurable).
MIN_HEARTBEAT_FREQUENCY = 0.5
#: SDAM default for multi-threaded/asynchronous clients, in seconds.
DEFAULT_HEARTBEAT_FREQUENCY = 10.0
#: Server Selection default latency window, in milliseconds.
DEFAULT_LOCAL_THRESHOLD_MS = 15.0
#: Max Staleness: an idle primary writes a no-op this often (milliseconds).
IDLE_WRITE_PERIOD_MS = 10_000
#: Max Staleness: the smallest maxStalenessSeconds a replica set accepts.
SMALLEST_MAX_STALENESS_SECONDS = 90


DRIVER_NAME = "greenmongo"


@dataclass(frozen=True)
class TopologySettings:
    """What the SDAM state machine and server selection need to know about the client's options."""

    seeds: Tuple[Address, ...] = (("localhost", 27017),)
    replica_set_name: Optional[str] = None
    direct_connection: bool = False
    load_balanced: bool = False
    #: seconds between checks of one server
    heartbeat_frequency: float = DEFAULT_HEARTBEAT_FREQUENCY
    local_threshold_ms: float = DEFAULT_LOCAL_THRESHOLD_MS
    srv_max_hosts: int = 0
    client_min_wire_version: int = CLIENT_MIN_WIRE_VERSION
    client_max_wire_version: int = CLIENT_MAX_WIRE_VERSION

    def initial_topology_type(self) -> TopologyType:
        """SDAM "Initial TopologyType": loadBalanced, directConnection and replicaSet decide."""
        if self.load_balanced:
            return TopologyType.LoadBalanced
        if self.direct_connection:
            return TopologyType.Single
        if self.replica_set_name is not None:
            return TopologyType.ReplicaSetNoPrimary
        return TopologyType.Unknown
