"""Event classes and listener base classes (command, connection pool, topology), PyMongo-shaped.

Each family lives in its own module; this package re-exports the public names so
``from greenmongo import monitoring; monitoring.ServerListener`` works as in PyMongo.
"""

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
    TopologyListener,
    TopologyOpenedEvent,
)

__all__ = [
    "CommandFailedEvent", "CommandListener", "CommandStartedEvent", "CommandSucceededEvent",
    "ConnectionCheckedInEvent", "ConnectionCheckedOutEvent", "ConnectionCheckOutFailedEvent",
    "ConnectionCheckOutFailedReason", "ConnectionCheckOutStartedEvent", "ConnectionClosedEvent",
    "ConnectionClosedReason", "ConnectionCreatedEvent", "ConnectionPoolListener", "ConnectionReadyEvent",
    "PoolClearedEvent", "PoolClosedEvent", "PoolCreatedEvent", "PoolReadyEvent",
    "ServerClosedEvent", "ServerDescriptionChangedEvent", "ServerHeartbeatFailedEvent",
    "ServerHeartbeatListener", "ServerHeartbeatStartedEvent", "ServerHeartbeatSucceededEvent",
    "ServerListener", "ServerOpeningEvent", "TopologyClosedEvent", "TopologyDescriptionChangedEvent",
    "TopologyListener", "TopologyOpenedEvent",
]
