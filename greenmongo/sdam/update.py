"""The SDAM state machine: (TopologyDescription, ServerDescription) -> new TopologyDescription.

``apply_server_description`` is the spec's ``onServerDescriptionChanged`` minus
its side effects; ``plan_update`` also reports those side effects (servers to
start or stop monitoring, pools to mark ready or clear, checks to request) so
the I/O layer can carry them out under the same lock, and so the spec harness
runs the very same code.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Optional, Tuple

from greenmongo.errors import AutoReconnect
from greenmongo.sdam.address import Address, format_address
from greenmongo.sdam.server_description import ServerDescription, compare_topology_versions
from greenmongo.sdam.server_type import DATA_BEARING_TYPES, RS_MEMBER_TYPES, ServerType
from greenmongo.sdam.topology_description import TopologyDescription
from greenmongo.sdam.topology_type import TopologyType
from greenmongo.wire.versions import WIRE_4_2, WIRE_6_0

STALE_PRIMARY_MESSAGE = "primary marked stale due to electionId/setVersion mismatch"
NEWER_PRIMARY_MESSAGE = "primary marked stale due to discovery of newer primary"


def is_stale_server_description(description: TopologyDescription, server: ServerDescription) -> bool:
    """True when the current description's topologyVersion is newer than the incoming one's."""
    current = description.get(server.address)
    if current is None:
        return False
    return compare_topology_versions(current.topology_version, server.topology_version) > 0


def apply_server_description(description: TopologyDescription,
                             server: ServerDescription) -> TopologyDescription:
    """The new TopologyDescription after one check outcome (or a server marked Unknown by an error).

    Returns ``description`` itself, unchanged, when the outcome must be
    ignored: its server is no longer in the topology, or it carries an older
    topologyVersion than the description it would replace.
    """
    if server.address not in description or is_stale_server_description(description, server):
        return description
    return _Transition(description, server).run()


class _Transition:
    """One pass of the spec's TopologyType table over a mutable working copy."""

    def __init__(self, description: TopologyDescription, server: ServerDescription) -> None:
        self.description = description
        self.server = server
        self.settings = description.settings
        self.topology_type = description.topology_type
        self.servers: Dict[Address, ServerDescription] = description.server_descriptions()
        self.set_name = description.replica_set_name
        self.max_set_version = description.max_set_version
        self.max_election_id = description.max_election_id

    def run(self) -> TopologyDescription:
        server = self.server
        self.servers[server.address] = server
        kind = server.server_type
        topology_type = self.topology_type

        if topology_type is TopologyType.Single:
            expected = self.settings.replica_set_name
            if expected is not None and server.replica_set_name != expected:
                self.mark_unknown(server.address, f"replica set name mismatch: expected {expected!r}, "
                                                  f"server reported {server.replica_set_name!r}")
        elif topology_type is TopologyType.LoadBalanced:
            pass
        elif topology_type is TopologyType.Unknown:
            if kind is ServerType.Standalone:
                self.update_unknown_with_standalone()
            elif kind is ServerType.Mongos:
                self.topology_type = TopologyType.Sharded
            elif kind is ServerType.RSPrimary:
                self.topology_type = TopologyType.ReplicaSetWithPrimary
                self.update_rs_from_primary()
            elif kind in RS_MEMBER_TYPES:
                self.topology_type = TopologyType.ReplicaSetNoPrimary
                self.update_rs_without_primary()
        elif topology_type is TopologyType.Sharded:
            if kind not in (ServerType.Unknown, ServerType.Mongos):
                self.remove(server.address)
        elif topology_type is TopologyType.ReplicaSetNoPrimary:
            if kind in (ServerType.Standalone, ServerType.Mongos):
                self.remove(server.address)
            elif kind is ServerType.RSPrimary:
                self.topology_type = TopologyType.ReplicaSetWithPrimary
                self.update_rs_from_primary()
            elif kind in RS_MEMBER_TYPES:
                self.update_rs_without_primary()
        elif topology_type is TopologyType.ReplicaSetWithPrimary:
            if kind in (ServerType.Standalone, ServerType.Mongos):
                self.remove(server.address)
                self.check_if_has_primary()
            elif kind is ServerType.RSPrimary:
                self.update_rs_from_primary()
            elif kind in RS_MEMBER_TYPES:
                self.update_rs_with_primary_from_member()
            else:  # Unknown, RSGhost
                self.check_if_has_primary()

        return TopologyDescription(self.topology_type, self.servers, self.set_name,
                                   self.max_set_version, self.max_election_id, self.settings)

    # -- the spec's subroutines --------------------------------------------

    def remove(self, address: Address) -> None:
        self.servers.pop(address, None)

    def mark_unknown(self, address: Address, message: str) -> None:
        self.servers[address] = ServerDescription(address, error=AutoReconnect(message))

    def check_if_has_primary(self) -> None:
        has_primary = any(sd.server_type is ServerType.RSPrimary for sd in self.servers.values())
        self.topology_type = (TopologyType.ReplicaSetWithPrimary if has_primary
                              else TopologyType.ReplicaSetNoPrimary)

    def add_members(self) -> None:
        for address in self.server.member_addresses():
            if address not in self.servers:
                self.servers[address] = ServerDescription(address)

    def update_unknown_with_standalone(self) -> None:
        if len(self.settings.seeds) == 1:
            self.topology_type = TopologyType.Single
        else:
            self.remove(self.server.address)

    def update_rs_without_primary(self) -> None:
        server = self.server
        if self.set_name is None:
            self.set_name = server.replica_set_name
        elif self.set_name != server.replica_set_name:
            self.remove(server.address)
            return
        self.add_members()
        # description.primary would mark a PossiblePrimary: not needed by a multi-threaded client.
        if server.me is not None and server.address != server.me:
            self.remove(server.address)

    def update_rs_with_primary_from_member(self) -> None:
        server = self.server
        if self.set_name != server.replica_set_name or (
                server.me is not None and server.address != server.me):
            self.remove(server.address)
        self.check_if_has_primary()

    def update_rs_from_primary(self) -> None:
        server = self.server
        if self.set_name is None:
            self.set_name = server.replica_set_name
        elif self.set_name != server.replica_set_name:
            self.remove(server.address)
            self.check_if_has_primary()
            return

        if not self.accept_election(server):
            self.mark_unknown(server.address, STALE_PRIMARY_MESSAGE)
            self.check_if_has_primary()
            return

        for address, sd in list(self.servers.items()):
            if address != server.address and sd.server_type is ServerType.RSPrimary:
                self.mark_unknown(address, NEWER_PRIMARY_MESSAGE)

        self.add_members()
        members = server.all_hosts
        for address in list(self.servers):
            if address not in members:
                self.remove(address)
        self.check_if_has_primary()

    def accept_election(self, server: ServerDescription) -> bool:
        """Record the primary's (electionId, setVersion); False when it is a stale primary."""
        election_id, set_version = server.election_id, server.set_version
        if (server.max_wire_version or 0) >= WIRE_6_0:
            # electionId first, then setVersion; null sorts before any value.
            if (_nullable(election_id), _nullable(set_version)) >= (
                    _nullable(self.max_election_id), _nullable(self.max_set_version)):
                self.max_election_id, self.max_set_version = election_id, set_version
                return True
            return False
        # Before 6.0: setVersion first, then electionId, and only when both are present.
        if set_version is not None and election_id is not None:
            if (self.max_set_version is not None and self.max_election_id is not None and (
                    self.max_set_version > set_version
                    or (self.max_set_version == set_version and self.max_election_id > election_id))):
                return False
            self.max_election_id = election_id
        if set_version is not None and (self.max_set_version is None or set_version > self.max_set_version):
            self.max_set_version = set_version
        return True


def _nullable(value: Any) -> Tuple[Any, ...]:
    """Sort key where None is less than every value."""
    return (0,) if value is None else (1, value)


@dataclass(frozen=True)
class TopologyUpdate:
    """One processed ServerDescription: the new description plus the side effects it asks for."""

    previous: TopologyDescription
    description: TopologyDescription
    server: ServerDescription

    @property
    def applied(self) -> bool:
        """False when the outcome was ignored (removed server, stale topologyVersion)."""
        return self.description is not self.previous

    @property
    def previous_server(self) -> Optional[ServerDescription]:
        return self.previous.get(self.server.address)

    @property
    def new_server(self) -> ServerDescription:
        """What the topology now holds for the address (the incoming one if it was removed)."""
        return self.description.get(self.server.address) or self.server

    @property
    def server_changed(self) -> bool:
        """Publish a ServerDescriptionChangedEvent (the (=) fields differ)."""
        return self.applied and self.previous_server != self.new_server

    @property
    def topology_changed(self) -> bool:
        return self.applied and self.previous != self.description

    @property
    def added(self) -> Tuple[Address, ...]:
        """Servers to start monitoring."""
        return tuple(a for a in self.description.addresses if a not in self.previous)

    @property
    def removed(self) -> Tuple[Address, ...]:
        """Servers to stop monitoring (and whose pools to close)."""
        return tuple(a for a in self.previous.addresses if a not in self.description)

    @property
    def mark_pool_ready(self) -> bool:
        """CMAP: a successful check of a data-bearing server (or any known server when direct)."""
        kind = self.server.server_type
        return self.applied and self.server.address in self.description and (
            kind in DATA_BEARING_TYPES
            or (kind is not ServerType.Unknown and self.description.topology_type is TopologyType.Single))

    @property
    def demoted_primaries(self) -> Tuple[Address, ...]:
        """Old primaries invalidated by a newer one: request an immediate check of each."""
        out = []
        for address, old in self.previous.server_descriptions().items():
            new = self.description.get(address)
            if (address != self.server.address and old.server_type is ServerType.RSPrimary
                    and new is not None and new.server_type is ServerType.Unknown):
                out.append(address)
        return tuple(out)

    @property
    def pools_to_clear(self) -> Tuple[Address, ...]:
        """Demoted primaries older than 4.2 closed their sockets: their pools must be cleared."""
        return tuple(a for a in self.demoted_primaries
                     if (self.previous[a].max_wire_version or 0) < WIRE_4_2)


def plan_update(description: TopologyDescription, server: ServerDescription) -> TopologyUpdate:
    """``apply_server_description`` with its side effects spelled out for the caller."""
    return TopologyUpdate(description, apply_server_description(description, server), server)


def apply_srv_hosts(description: TopologyDescription, hosts: Iterable[Address],
                    rng: Optional[random.Random] = None) -> TopologyDescription:
    """An SRV rescan's verified hosts applied to a Sharded or Unknown topology (Polling SRV Records).

    Hosts that left are removed, hosts that stayed are untouched, new hosts are
    added as Unknown, at random while srvMaxHosts caps the topology's size. No
    hosts (a DNS failure) leaves the description as it is.
    """
    wanted = list(dict.fromkeys(hosts))
    if not wanted or description.topology_type not in (TopologyType.Sharded, TopologyType.Unknown):
        return description
    servers = {a: sd for a, sd in description.server_descriptions().items() if a in wanted}
    new_hosts = [a for a in wanted if a not in servers]
    limit = description.srv_max_hosts
    if limit > 0:
        room = max(0, limit - len(servers))
        if room < len(new_hosts):
            new_hosts = (rng or random).sample(new_hosts, room)
    for address in new_hosts:
        servers[address] = ServerDescription(address)
    return description.replace(server_descriptions=servers)


def describe(description: TopologyDescription) -> str:
    """A one-line summary for logs and ServerSelectionTimeoutError messages."""
    parts = []
    for sd in description.server_descriptions().values():
        text = f"{format_address(sd.address)}: {sd.server_type_name}"
        if sd.error is not None:
            text += f" ({sd.error})"
        parts.append(text)
    name = f", setName {description.replica_set_name!r}" if description.replica_set_name else ""
    return f"Topology type: {description.topology_type_name}{name}, servers: [{', '.join(parts)}]"
