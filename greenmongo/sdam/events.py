"""Which SDAM events a topology change publishes, and in what order (pure).

The Topology publishes the returned lists with
``greenmongo.monitoring.topology.publish_all`` while it holds its lock, so
events for one topology are never interleaved.
"""

from __future__ import annotations

from typing import Any, List

from greenmongo.bson.objectid import ObjectId
from greenmongo.monitoring.topology import (
    ServerClosedEvent,
    ServerDescriptionChangedEvent,
    ServerOpeningEvent,
    TopologyClosedEvent,
    TopologyDescriptionChangedEvent,
    TopologyOpenedEvent,
)
from greenmongo.sdam.topology_description import TopologyDescription
from greenmongo.sdam.update import TopologyUpdate


def opening_events(topology_id: ObjectId, initial: TopologyDescription) -> List[Any]:
    """TopologyOpened, the change from "Unknown, no servers" to ``initial``, then ServerOpening per seed."""
    events: List[Any] = [
        TopologyOpenedEvent(topology_id),
        TopologyDescriptionChangedEvent(TopologyDescription.empty(initial.settings), initial, topology_id),
    ]
    events.extend(ServerOpeningEvent(address, topology_id) for address in initial.addresses)
    return events


def update_events(topology_id: ObjectId, update: TopologyUpdate) -> List[Any]:
    """ServerDescriptionChanged (if the (=) fields differ), ServerOpening/Closed, TopologyDescriptionChanged."""
    if not update.applied:
        return []
    events: List[Any] = []
    if update.server_changed:
        events.append(ServerDescriptionChangedEvent(
            update.previous_server, update.new_server, update.server.address, topology_id))
    events.extend(ServerOpeningEvent(address, topology_id) for address in update.added)
    events.extend(ServerClosedEvent(address, topology_id) for address in update.removed)
    if update.topology_changed:
        events.append(TopologyDescriptionChangedEvent(update.previous, update.description, topology_id))
    return events


def replacement_events(topology_id: ObjectId, previous: TopologyDescription,
                       new: TopologyDescription) -> List[Any]:
    """Events for a change not caused by one server's check (SRV rescan, reset): openings, closings, change."""
    events: List[Any] = [ServerOpeningEvent(a, topology_id) for a in new.addresses if a not in previous]
    events.extend(ServerClosedEvent(a, topology_id) for a in previous.addresses if a not in new)
    if previous != new:
        events.append(TopologyDescriptionChangedEvent(previous, new, topology_id))
    return events


def closing_events(topology_id: ObjectId, current: TopologyDescription) -> List[Any]:
    """ServerClosed per server, the change to "Unknown, no servers", then TopologyClosed."""
    closed = current.closed()
    events: List[Any] = [ServerClosedEvent(address, topology_id) for address in current.addresses]
    events.append(TopologyDescriptionChangedEvent(current, closed, topology_id))
    events.append(TopologyClosedEvent(topology_id))
    return events
