"""PyMongo's import path ``pymongo.topology_description``: TopologyDescription and the SDAM update function.

The classes live in ``greenmongo.sdam``; ``updated_topology_description(description, server_description)``
is greenmongo's ``sdam.update.apply_server_description`` (the SDAM spec's transition table).
"""

from __future__ import annotations

from greenmongo.sdam.server_description import ServerDescription
from greenmongo.sdam.topology_description import TopologyDescription
from greenmongo.sdam.topology_type import TOPOLOGY_TYPE
from greenmongo.sdam.update import apply_server_description

#: The topology types whose SRV records are polled for new mongoses (the SRV polling spec).
SRV_POLLING_TOPOLOGIES: tuple[int, int] = (TOPOLOGY_TYPE.Unknown, TOPOLOGY_TYPE.Sharded)


def updated_topology_description(topology_description: TopologyDescription,
                                 server_description: ServerDescription) -> TopologyDescription:
    """The description after one server's new description (a check outcome, or Unknown after an error)."""
    return apply_server_description(topology_description, server_description)


__all__ = ["SRV_POLLING_TOPOLOGIES", "TOPOLOGY_TYPE", "TopologyDescription", "updated_topology_description"]
