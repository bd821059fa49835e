"""Immutable TopologyDescription: the client's whole view of the deployment.

Readers take a reference to the current description and read it without a
lock; the Topology replaces it (never mutates it) after each update. The
state machine that produces new descriptions is in ``greenmongo.sdam.update``.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from greenmongo.bson.objectid import ObjectId
from greenmongo.errors import ConfigurationError
from greenmongo.sdam.address import Address, format_address
from greenmongo.sdam.server_description import ServerDescription
from greenmongo.sdam.server_type import DATA_BEARING_TYPES, ServerType
from greenmongo.sdam.settings import CLIENT_MIN_SERVER_VERSION, DRIVER_NAME, TopologySettings
from greenmongo.sdam.topology_type import TopologyType
from greenmongo.sdam.read_preference import PRIMARY_READ_PREFERENCE, ReadPreferenceLike


class TopologyDescription:
    """Type, replica set identity, and one ServerDescription per monitored address."""

    __slots__ = ("_topology_type", "_servers", "_replica_set_name", "_max_set_version",
                 "_max_election_id", "_settings", "_compatibility_error", "_ls_timeout_minutes")

    def __init__(
        self,
        topology_type: TopologyType,
        server_descriptions: Mapping[Address, ServerDescription],
        replica_set_name: Optional[str],
        max_set_version: Optional[int],
        max_election_id: Optional[ObjectId],
        topology_settings: TopologySettings,
    ) -> None:
        self._topology_type = topology_type
        self._servers: Dict[Address, ServerDescription] = dict(server_descriptions)
        self._replica_set_name = replica_set_name
        self._max_set_version = max_set_version
        self._max_election_id = max_election_id
        self._settings = topology_settings
        self._compatibility_error = self._find_compatibility_error()
        self._ls_timeout_minutes = self._smallest_session_timeout()

    @classmethod
    def initial(cls, settings: TopologySettings) -> "TopologyDescription":
        """The description a new client starts from: every seed Unknown, type from the options."""
        servers = {address: ServerDescription(address) for address in settings.seeds}
        return cls(settings.initial_topology_type(), servers, settings.replica_set_name,
                   None, None, settings)

    @classmethod
    def empty(cls, settings: TopologySettings) -> "TopologyDescription":
        """Type Unknown with no servers: the "previous" description of the first change event."""
        return cls(TopologyType.Unknown, {}, None, None, None, settings)

    def replace(self, **changes: Any) -> "TopologyDescription":
        """A new description with some of the constructor arguments changed."""
        args: Dict[str, Any] = dict(
            topology_type=self._topology_type, server_descriptions=self._servers,
            replica_set_name=self._replica_set_name, max_set_version=self._max_set_version,
            max_election_id=self._max_election_id, topology_settings=self._settings,
        )
        args.update(changes)
        return TopologyDescription(**args)

    def closed(self) -> "TopologyDescription":
        """What a closing client publishes last: type Unknown and no servers."""
        return self.replace(topology_type=TopologyType.Unknown, server_descriptions={})

    def reset(self) -> "TopologyDescription":
        """Every server marked Unknown (keeping its topologyVersion); a primary-less replica set."""
        topology_type = self._topology_type
        if topology_type is TopologyType.ReplicaSetWithPrimary:
            topology_type = TopologyType.ReplicaSetNoPrimary
        servers = {address: sd.to_unknown() for address, sd in self._servers.items()}
        return self.replace(topology_type=topology_type, server_descriptions=servers)

    # -- fields -----------------------------------------------------------

    @property
    def topology_type(self) -> TopologyType:
        return self._topology_type

    @property
    def topology_type_name(self) -> str:
        return self._topology_type.name

    @property
    def replica_set_name(self) -> Optional[str]:
        return self._replica_set_name

    @property
    def max_set_version(self) -> Optional[int]:
        return self._max_set_version

    @property
    def max_election_id(self) -> Optional[ObjectId]:
        return self._max_election_id

    @property
    def settings(self) -> TopologySettings:
        return self._settings

    @property
    def heartbeat_frequency(self) -> float:
        return self._settings.heartbeat_frequency

    @property
    def srv_max_hosts(self) -> int:
        return self._settings.srv_max_hosts

    @property
    def logical_session_timeout_minutes(self) -> Optional[int]:
        return self._ls_timeout_minutes

    @property
    def compatible(self) -> bool:
        return self._compatibility_error is None

    @property
    def compatibility_error(self) -> Optional[str]:
        return self._compatibility_error

    def check_compatible(self) -> None:
        """Raise ConfigurationError when any server's wire range misses the driver's."""
        if self._compatibility_error is not None:
            raise ConfigurationError(self._compatibility_error)

    # -- servers ----------------------------------------------------------

    def server_descriptions(self) -> Dict[Address, ServerDescription]:
        """A copy of the address -> ServerDescription map, in discovery order."""
        return dict(self._servers)

    def has_server(self, address: Address) -> bool:
        return address in self._servers

    def get(self, address: Address) -> Optional[ServerDescription]:
        return self._servers.get(address)

    def __getitem__(self, address: Address) -> ServerDescription:
        return self._servers[address]

    def __contains__(self, address: object) -> bool:
        return address in self._servers

    @property
    def addresses(self) -> List[Address]:
        return list(self._servers)

    @property
    def known_servers(self) -> List[ServerDescription]:
        return [sd for sd in self._servers.values() if sd.is_server_type_known]

    @property
    def has_known_servers(self) -> bool:
        return any(sd.is_server_type_known for sd in self._servers.values())

    @property
    def readable_servers(self) -> List[ServerDescription]:
        return [sd for sd in self._servers.values() if sd.is_readable]

    @property
    def primary(self) -> Optional[ServerDescription]:
        for sd in self._servers.values():
            if sd.server_type is ServerType.RSPrimary:
                return sd
        return None

    @property
    def candidate_servers(self) -> List[ServerDescription]:
        """The servers selection starts from: the known ones (PyMongo's name)."""
        return self.known_servers

    @property
    def common_wire_version(self) -> Optional[int]:
        """The smallest maxWireVersion among known servers (None when none is known)."""
        versions = [sd.max_wire_version for sd in self.known_servers if sd.max_wire_version is not None]
        return min(versions) if versions else None

    # -- PyMongo's selection helpers -----------------------------------------

    def apply_selector(
        self,
        selector: Any,
        address: Optional[Address] = None,
        custom_selector: Optional[Callable[[List[ServerDescription]], List[ServerDescription]]] = None,
        deprioritized_servers: Optional[Sequence[ServerDescription]] = None,
    ) -> List[ServerDescription]:
        """The servers a read with ``selector`` (a read preference) could use now, after
        ``custom_selector`` and the latency window; ``address`` asks for that server only (if known).

        PyMongo's rules: none while the topology type is Unknown, every known server of a Single or
        LoadBalanced topology, the read preference ignored for a sharded cluster. ConfigurationError
        for a read preference this topology cannot serve (max staleness). greenmongo's selectors are
        read preferences; a PyMongo-internal ``Selection`` callable raises TypeError.
        """
        from greenmongo.sdam.selection import latency_window, suitable_servers, validate_read_preference

        if not hasattr(selector, "mode") or not hasattr(selector, "tag_sets"):
            raise TypeError(f"selector must be a read preference (such as ReadPreference.SECONDARY), not {selector!r}")
        if self._topology_type is TopologyType.Unknown:
            return []
        if self._topology_type in (TopologyType.Single, TopologyType.LoadBalanced):
            return self.known_servers
        if address:
            server = self._servers.get(address)
            return [server] if server is not None and server.is_server_type_known else []
        if self._topology_type is not TopologyType.Sharded:
            validate_read_preference(self, selector)
        servers = suitable_servers(self, selector, deprioritized=deprioritized_servers)
        if custom_selector is not None and servers:
            servers = list(custom_selector(servers))
        return latency_window(servers, self._settings.local_threshold_ms)

    def has_readable_server(self, read_preference: ReadPreferenceLike = PRIMARY_READ_PREFERENCE) -> bool:
        """Whether a read with ``read_preference`` could run without waiting (always True for a single
        server the client connected to directly, once it is known)."""
        if not hasattr(read_preference, "mode") or not hasattr(read_preference, "tag_sets"):
            raise TypeError(f"{read_preference!r} is not a read preference")
        return any(self.apply_selector(read_preference))

    def has_writable_server(self) -> bool:
        """Whether a write could run without waiting (a primary, a mongos, a standalone...)."""
        return self.has_readable_server()

    def reset_server(self, address: Address) -> "TopologyDescription":
        """A new description in which the server at ``address`` is Unknown (and the type follows)."""
        from greenmongo.sdam.update import apply_server_description

        return apply_server_description(self, self._servers[address].to_unknown())

    # -- derived at construction -----------------------------------------

    def _find_compatibility_error(self) -> Optional[str]:
        if self._topology_type is TopologyType.LoadBalanced:
            return None
        low, high = self._settings.client_min_wire_version, self._settings.client_max_wire_version
        for sd in self._servers.values():
            if not sd.is_server_type_known or sd.server_type is ServerType.LoadBalancer:
                continue
            server_min = sd.min_wire_version or 0
            server_max = sd.max_wire_version or 0
            where = format_address(sd.address)
            if server_min > high:
                return (f"Server at {where} requires wire version {server_min}, but this version "
                        f"of {DRIVER_NAME} only supports up to {high}.")
            if server_max < low:
                return (f"Server at {where} reports wire version {server_max}, but this version "
                        f"of {DRIVER_NAME} requires at least {low} (MongoDB {CLIENT_MIN_SERVER_VERSION}).")
        return None

    def _smallest_session_timeout(self) -> Optional[int]:
        if self._topology_type is TopologyType.LoadBalanced:
            return None  # Load Balancer spec: ignore logicalSessionTimeoutMinutes
        smallest: Optional[int] = None
        for sd in self._servers.values():
            if sd.server_type not in DATA_BEARING_TYPES:
                continue
            if sd.logical_session_timeout_minutes is None:
                return None
            if smallest is None or sd.logical_session_timeout_minutes < smallest:
                smallest = sd.logical_session_timeout_minutes
        return smallest

    # -- equality and display ----------------------------------------------

    def __eq__(self, other: Any) -> bool:
        """Equal when nothing an event listener could see has changed."""
        if not isinstance(other, TopologyDescription):
            return NotImplemented
        return (self._topology_type == other._topology_type
                and self._replica_set_name == other._replica_set_name
                and self._max_set_version == other._max_set_version
                and self._max_election_id == other._max_election_id
                and self._compatibility_error == other._compatibility_error
                and self._ls_timeout_minutes == other._ls_timeout_minutes
                and list(self._servers) == list(other._servers)
                and all(self._servers[a] == other._servers[a] for a in self._servers))

    def __ne__(self, other: Any) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        servers = ", ".join(repr(sd) for sd in self._servers.values())
        name = f", replica_set_name: {self._replica_set_name!r}" if self._replica_set_name else ""
        return f"<TopologyDescription type: {self.topology_type_name}{name}, servers: [{servers}]>"

