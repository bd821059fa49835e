"""Event classes and listener base classes (command, connection pool, topology), PyMongo-shaped.

Each family lives in its own module; this package re-exports the public names so
``from greenmongo import monitoring; monitoring.ServerListener`` works as in PyMongo, and keeps the
process-wide listeners ``register()`` adds: every client created afterwards delivers its events to
them (before its own ``event_listeners``), as PyMongo's do.
"""

from typing import Any

from greenmongo.monitoring.command import (
    CommandFailedEvent,
    CommandListener,
    CommandStartedEvent,
    CommandSucceededEvent,
)
from greenmongo.monitoring.pool import (
    ConnectionCheckedInEvent,
    ConnectionCheckedOutEvent,
    ConnectionCheckOutFailedEvent,
    ConnectionCheckOutFailedReason,
    ConnectionCheckOutStartedEvent,
    ConnectionClosedEvent,
    ConnectionClosedReason,
    ConnectionCreatedEvent,
    ConnectionPoolListener,
    ConnectionReadyEvent,
    PoolClearedEvent,
    PoolClosedEvent,
    PoolCreatedEvent,
    PoolReadyEvent,
)
from greenmongo.monitoring.topology import (
    ServerClosedEvent,
    ServerDescriptionChangedEvent,
    ServerHeartbeatFailedEvent,
    ServerHeartbeatListener,
    ServerHeartbeatStartedEvent,
    ServerHeartbeatSucceededEvent,
    ServerListener,
    ServerOpeningEvent,
    TopologyClosedEvent,
    TopologyDescriptionChangedEvent,
    TopologyEvent,
    TopologyListener,
    TopologyOpenedEvent,
    _EventListener,
)

_REGISTERED: list = []


def register(listener: _EventListener) -> None:
    """Add a process-wide listener (a CommandListener, ServerHeartbeatListener, ServerListener,
    TopologyListener or ConnectionPoolListener): clients created from now on send it their events.
    Clients that already exist are not affected."""
    if not isinstance(listener, _EventListener):
        raise TypeError(f"Listeners for {listener} must be either a CommandListener, ServerHeartbeatListener, "
                        f"ServerListener, TopologyListener, or ConnectionPoolListener, not {type(listener)}")
    _REGISTERED.append(listener)


def registered_listeners() -> tuple[Any, ...]:
    """The listeners ``register()`` added so far, oldest first (a snapshot a new client keeps)."""
    return tuple(_REGISTERED)


__all__ = [
    "CommandFailedEvent", "CommandListener", "CommandStartedEvent", "CommandSucceededEvent",
    "ConnectionCheckedInEvent", "ConnectionCheckedOutEvent", "ConnectionCheckOutFailedEvent",
    "ConnectionCheckOutFailedReason", "ConnectionCheckOutStartedEvent", "ConnectionClosedEvent",
    "ConnectionClosedReason", "ConnectionCreatedEvent", "ConnectionPoolListener", "ConnectionReadyEvent",
    "PoolClearedEvent", "PoolClosedEvent", "PoolCreatedEvent", "PoolReadyEvent",
    "ServerClosedEvent", "ServerDescriptionChangedEvent", "ServerHeartbeatFailedEvent",
    "ServerHeartbeatListener", "ServerHeartbeatStartedEvent", "ServerHeartbeatSucceededEvent",
    "ServerListener", "ServerOpeningEvent", "TopologyClosedEvent", "TopologyDescriptionChangedEvent",
    "TopologyEvent", "TopologyListener", "TopologyOpenedEvent", "register",
]
