"""Event classes and listener base classes (connection pool, topology), PyMongo-shaped.

Each family lives in its own module; this package re-exports the public names so
``from greenmongo import monitoring; monitoring.ServerListener`` works as in PyMongo.
"""

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
    "ServerClosedEvent", "ServerDescriptionChangedEvent", "ServerHeartbeatFailedEvent",
    "ServerHeartbeatListener", "ServerHeartbeatStartedEvent", "ServerHeartbeatSucceededEvent",
    "ServerListener", "ServerOpeningEvent", "TopologyClosedEvent", "TopologyDescriptionChangedEvent",
    "TopologyListener", "TopologyOpenedEvent",
]
