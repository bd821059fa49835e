"""Pure server selection: which servers suit an operation, the latency window, the final pick.

The waiting loop (request a check, wait on the topology's change event, time
out) lives in the I/O layer and calls :func:`select_servers` then
:func:`choose_server` each time the description changes.

A read preference is any object with ``mode`` (0 primary, 1 primaryPreferred,
2 secondary, 3 secondaryPreferred, 4 nearest), ``tag_sets`` (a list of dicts)
and ``max_staleness`` (seconds, -1 for none), like PyMongo's read preferences.
"""

from __future__ import annotations

import random
from typing import (
    Any,
    Callable,
    Iterable,
    List,
    Mapping,
    Optional,
    Sequence,
    Set,
    Union,
)

from greenmongo.errors import ConfigurationError
from greenmongo.sdam.address import Address
from greenmongo.sdam.read_preference import (  # noqa: F401
    NEAREST,
    PRIMARY,
    PRIMARY_PREFERRED,
    PRIMARY_READ_PREFERENCE,
    SECONDARY,
    SECONDARY_PREFERRED,
    ReadPreferenceLike,
)
from greenmongo.sdam.server_description import ServerDescription
from greenmongo.sdam.server_type import ServerType
from greenmongo.sdam.settings import IDLE_WRITE_PERIOD_MS, SMALLEST_MAX_STALENESS_SECONDS
from greenmongo.sdam.topology_description import TopologyDescription
from greenmongo.sdam.topology_type import REPLICA_SET_TYPES, TopologyType
from greenmongo.wire.versions import MAX_STALENESS_MIN_WIRE_VERSION




ServerSelector = Callable[[List[ServerDescription]], List[ServerDescription]]
Deprioritized = Iterable[Union[Address, ServerDescription]]




# -- validation ------------------------------------------------------------

def validate_read_preference(description: TopologyDescription, read_preference: ReadPreferenceLike) -> None:
    """Raise ConfigurationError for a read preference this topology cannot serve.

    Server Selection and Max Staleness: no tag sets or maxStalenessSeconds with
    mode primary; in a replica set maxStalenessSeconds must be at least 90 and at
    least heartbeatFrequencyMS + idleWritePeriodMS.
    """
    mode, max_staleness = read_preference.mode, read_preference.max_staleness
    has_staleness = max_staleness is not None and max_staleness != -1
    if mode == PRIMARY:
        if has_staleness:
            raise ConfigurationError("read preference mode primary cannot be combined with maxStalenessSeconds")
        if any(tag_set for tag_set in (read_preference.tag_sets or ())):
            raise ConfigurationError("read preference mode primary cannot be combined with tag sets")
    if not has_staleness:
        return
    settings = description.settings
    if settings.client_min_wire_version < MAX_STALENESS_MIN_WIRE_VERSION:
        for sd in description.known_servers:
            if (sd.max_wire_version or 0) < MAX_STALENESS_MIN_WIRE_VERSION:
                raise ConfigurationError("maxStalenessSeconds requires MongoDB 3.4+ on every server")
    if description.topology_type in REPLICA_SET_TYPES:
        heartbeat_ms = description.heartbeat_frequency * 1000
        smallest = max(SMALLEST_MAX_STALENESS_SECONDS, (heartbeat_ms + IDLE_WRITE_PERIOD_MS) / 1000)
        if max_staleness < smallest:
            raise ConfigurationError(
                f"maxStalenessSeconds must be at least heartbeatFrequencyMS + {IDLE_WRITE_PERIOD_MS} ms "
                f"and at least {SMALLEST_MAX_STALENESS_SECONDS} seconds: it must be at least "
                f"{smallest:g} here, got {max_staleness}")


# -- staleness and tags ----------------------------------------------------

def staleness(description: TopologyDescription, server: ServerDescription) -> float:
    """Max Staleness estimate for a secondary, in seconds (0 for every other type)."""
    if server.server_type is not ServerType.RSSecondary:
        return 0.0
    heartbeat = description.heartbeat_frequency
    primary = description.primary
    own_write = server.last_write_date or 0.0
    if primary is not None:
        primary_write = primary.last_write_date or 0.0
        return ((server.last_update_time - own_write)
                - (primary.last_update_time - primary_write) + heartbeat)
    secondaries = [sd for sd in description.server_descriptions().values()
                   if sd.server_type is ServerType.RSSecondary]
    freshest = max((sd.last_write_date or 0.0) for sd in secondaries)
    return freshest - own_write + heartbeat


def _fresh_enough(description: TopologyDescription, servers: List[ServerDescription],
                  max_staleness: Optional[int]) -> List[ServerDescription]:
    if max_staleness is None or max_staleness == -1:
        return servers
    # Compare at microsecond resolution so float noise cannot flip an exact boundary.
    return [sd for sd in servers if round(staleness(description, sd), 6) <= max_staleness]


def _matching_tags(servers: List[ServerDescription],
                   tag_sets: Optional[Sequence[Mapping[str, Any]]]) -> List[ServerDescription]:
    """The servers matching the first tag set that matches any; all servers for no tag sets."""
    if not tag_sets:
        return servers
    for tag_set in tag_sets:
        matched = [sd for sd in servers if all(sd.tags.get(k) == v for k, v in tag_set.items())]
        if matched:
            return matched
    return []


# -- suitability by topology type -------------------------------------------

def _secondaries(description: TopologyDescription, servers: List[ServerDescription],
                 read_preference: ReadPreferenceLike) -> List[ServerDescription]:
    secondaries = [sd for sd in servers if sd.server_type is ServerType.RSSecondary]
    fresh = _fresh_enough(description, secondaries, read_preference.max_staleness)
    return _matching_tags(fresh, read_preference.tag_sets)


def _replica_set_reads(description: TopologyDescription, servers: List[ServerDescription],
                       read_preference: ReadPreferenceLike) -> List[ServerDescription]:
    primary = [sd for sd in servers if sd.server_type is ServerType.RSPrimary]
    mode = read_preference.mode
    if mode == PRIMARY:
        return primary
    if mode == PRIMARY_PREFERRED:
        return primary or _secondaries(description, servers, read_preference)
    if mode == SECONDARY:
        return _secondaries(description, servers, read_preference)
    if mode == SECONDARY_PREFERRED:
        return _secondaries(description, servers, read_preference) or primary
    if mode == NEAREST:
        members = [sd for sd in servers
                   if sd.server_type in (ServerType.RSPrimary, ServerType.RSSecondary)]
        fresh = _fresh_enough(description, members, read_preference.max_staleness)
        return _matching_tags(fresh, read_preference.tag_sets)
    raise ConfigurationError(f"unknown read preference mode {mode!r}")


def _suitable(description: TopologyDescription, servers: List[ServerDescription],
              read_preference: ReadPreferenceLike, is_write: bool) -> List[ServerDescription]:
    topology_type = description.topology_type
    if topology_type is TopologyType.Unknown:
        return []
    if topology_type is TopologyType.Single:
        return [sd for sd in servers if sd.is_server_type_known]
    if topology_type is TopologyType.LoadBalanced:
        return [sd for sd in servers if sd.server_type is ServerType.LoadBalancer]
    if topology_type is TopologyType.Sharded:
        return [sd for sd in servers if sd.server_type is ServerType.Mongos]
    if is_write:
        return [sd for sd in servers if sd.server_type is ServerType.RSPrimary]
    return _replica_set_reads(description, servers, read_preference)


def _addresses(deprioritized: Optional[Deprioritized]) -> Set[Address]:
    out: Set[Address] = set()
    for item in deprioritized or ():
        out.add(item.address if isinstance(item, ServerDescription) else item)
    return out


def suitable_servers(
    description: TopologyDescription,
    read_preference: Optional[ReadPreferenceLike] = None,
    *,
    is_write: bool = False,
    deprioritized: Optional[Deprioritized] = None,
) -> List[ServerDescription]:
    """Servers suitable by topology type, operation and read preference (before the latency window).

    Deprioritized servers (those a retry already failed on) are used only when
    no other server is suitable.
    """
    read_preference = read_preference or PRIMARY_READ_PREFERENCE
    servers = list(description.server_descriptions().values())
    skip = _addresses(deprioritized)
    if skip:
        preferred = _suitable(description, [sd for sd in servers if sd.address not in skip],
                              read_preference, is_write)
        if preferred:
            return preferred
    return _suitable(description, servers, read_preference, is_write)


# -- latency window and the final choice -------------------------------------

def latency_window(servers: Sequence[ServerDescription], local_threshold_ms: float) -> List[ServerDescription]:
    """Servers whose average RTT is within localThresholdMS of the fastest one."""
    if len(servers) <= 1:
        return list(servers)
    rtts = [sd.round_trip_time or 0.0 for sd in servers]
    fastest = min(rtts)
    return [sd for sd, rtt in zip(servers, rtts)
            if round((rtt - fastest) * 1000, 6) <= local_threshold_ms]


def select_servers(
    description: TopologyDescription,
    read_preference: Optional[ReadPreferenceLike] = None,
    *,
    is_write: bool = False,
    deprioritized: Optional[Deprioritized] = None,
    server_selector: Optional[ServerSelector] = None,
    local_threshold_ms: Optional[float] = None,
) -> List[ServerDescription]:
    """The servers an operation may use now: empty means wait for the topology to change.

    Raises ConfigurationError when waiting cannot help: an incompatible wire
    version or an invalid read preference for this topology.
    """
    description.check_compatible()
    read_preference = read_preference or PRIMARY_READ_PREFERENCE
    if not is_write:
        validate_read_preference(description, read_preference)
    servers = suitable_servers(description, read_preference, is_write=is_write, deprioritized=deprioritized)
    if server_selector is not None and servers:
        servers = list(server_selector(servers))
    if local_threshold_ms is None:
        local_threshold_ms = description.settings.local_threshold_ms
    return latency_window(servers, local_threshold_ms)


def choose_server(
    candidates: Sequence[ServerDescription],
    operation_count: Callable[[Address], int],
    rng: Optional[random.Random] = None,
) -> Optional[ServerDescription]:
    """Power of two choices: of two random candidates, the one running fewer operations."""
    if not candidates:
        return None
    if len(candidates) == 1:
        return candidates[0]
    first, second = (rng or random).sample(list(candidates), 2)
    return first if operation_count(first.address) <= operation_count(second.address) else second


def has_readable_server(description: TopologyDescription,
                        read_preference: Optional[ReadPreferenceLike] = None) -> bool:
    """Whether a read with this preference could run without waiting (sessions support check)."""
    return bool(suitable_servers(description, read_preference))


def has_writable_server(description: TopologyDescription) -> bool:
    return bool(suitable_servers(description, is_write=True))
