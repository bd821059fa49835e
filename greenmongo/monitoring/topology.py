"""SDAM events and listener base classes, shaped like PyMongo's ``pymongo.monitoring``.

Events are plain immutable value objects; the Topology and its monitors build
them (see ``greenmongo.sdam.events``) and hand them to
:func:`publish` with the registered listeners.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable, Mapping, Optional, Sequence, Tuple

_LOGGER = logging.getLogger("greenmongo.topology")

Address = Tuple[str, Optional[int]]


# -- listener bases ------------------------------------------------------------

class _EventListener:
    """Base of every SDAM listener (PyMongo spells it the same)."""


class ServerListener(_EventListener):
    """Subclass and override to follow each server's lifecycle."""

    def opened(self, event: "ServerOpeningEvent") -> None:
        raise NotImplementedError

    def description_changed(self, event: "ServerDescriptionChangedEvent") -> None:
        raise NotImplementedError

    def closed(self, event: "ServerClosedEvent") -> None:
        raise NotImplementedError


class TopologyListener(_EventListener):
    """Subclass and override to follow the topology's lifecycle."""

    def opened(self, event: "TopologyOpenedEvent") -> None:
        raise NotImplementedError

    def description_changed(self, event: "TopologyDescriptionChangedEvent") -> None:
        raise NotImplementedError

    def closed(self, event: "TopologyClosedEvent") -> None:
        raise NotImplementedError


class ServerHeartbeatListener(_EventListener):
    """Subclass and override to follow every monitor check."""

    def started(self, event: "ServerHeartbeatStartedEvent") -> None:
        raise NotImplementedError

    def succeeded(self, event: "ServerHeartbeatSucceededEvent") -> None:
        raise NotImplementedError

    def failed(self, event: "ServerHeartbeatFailedEvent") -> None:
        raise NotImplementedError


# -- topology and server events ---------------------------------------------------

class TopologyEvent:
    """Base of the topology events (opened, description changed, closed)."""

    __slots__ = ("__topology_id",)

    def __init__(self, topology_id: Any) -> None:
        self.__topology_id = topology_id

    @property
    def topology_id(self) -> Any:
        """Unique for the Topology (an ObjectId), stable for its whole life."""
        return self.__topology_id

    def __repr__(self) -> str:
        return f"<{self.__class__.__name__} topology_id: {self.topology_id}>"


class TopologyOpenedEvent(TopologyEvent):
    """The first SDAM event of a topology."""

    __slots__ = ()


class TopologyClosedEvent(TopologyEvent):
    """The last SDAM event of a topology."""

    __slots__ = ()


class TopologyDescriptionChangedEvent(TopologyEvent):
    """The TopologyDescription changed (by anything a listener could see)."""

    __slots__ = ("__previous", "__new")

    def __init__(self, previous_description: Any, new_description: Any, topology_id: Any) -> None:
        super().__init__(topology_id)
        self.__previous = previous_description
        self.__new = new_description

    @property
    def previous_description(self) -> Any:
        return self.__previous

    @property
    def new_description(self) -> Any:
        return self.__new

    def __repr__(self) -> str:
        return (f"<{self.__class__.__name__} topology_id: {self.topology_id} "
                f"changed from: {self.__previous}, to: {self.__new}>")


_TopologyEvent = TopologyEvent  # the name before it was public


class _ServerEvent:
    __slots__ = ("__server_address", "__topology_id")

    def __init__(self, server_address: Address, topology_id: Any) -> None:
        self.__server_address = server_address
        self.__topology_id = topology_id

    @property
    def server_address(self) -> Address:
        return self.__server_address

    @property
    def topology_id(self) -> Any:
        return self.__topology_id

    def __repr__(self) -> str:
        return f"<{self.__class__.__name__} {self.server_address} topology_id: {self.topology_id}>"


class ServerOpeningEvent(_ServerEvent):
    """A server joined the topology (before its monitor connects)."""

    __slots__ = ()


class ServerClosedEvent(_ServerEvent):
    """A server left the topology and its monitor stopped."""

    __slots__ = ()


class ServerDescriptionChangedEvent(_ServerEvent):
    """A server's description changed in a field SDAM compares (not for RTT alone)."""

    __slots__ = ("__previous", "__new")

    def __init__(self, previous_description: Any, new_description: Any,
                 server_address: Address, topology_id: Any) -> None:
        super().__init__(server_address, topology_id)
        self.__previous = previous_description
        self.__new = new_description

    @property
    def previous_description(self) -> Any:
        return self.__previous

    @property
    def new_description(self) -> Any:
        return self.__new

    def __repr__(self) -> str:
        return (f"<{self.__class__.__name__} {self.server_address} changed from: "
                f"{self.__previous}, to: {self.__new}>")


# -- heartbeat events ----------------------------------------------------------------

class _ServerHeartbeatEvent:
    __slots__ = ("__connection_id", "__awaited")

    def __init__(self, connection_id: Address, awaited: bool = False) -> None:
        self.__connection_id = connection_id
        self.__awaited = awaited

    @property
    def connection_id(self) -> Address:
        """The monitored server's address."""
        return self.__connection_id

    @property
    def awaited(self) -> bool:
        """True for a streaming (awaitable hello) check: its duration includes the server's wait."""
        return self.__awaited

    def __repr__(self) -> str:
        return f"<{self.__class__.__name__} {self.connection_id} awaited: {self.awaited}>"


class ServerHeartbeatStartedEvent(_ServerHeartbeatEvent):
    """A monitor is about to send hello (or open its connection to do so)."""

    __slots__ = ()


class HelloReply(dict):
    """A hello reply as heartbeat events carry it: the document itself, plus ``document`` (a copy), the
    attribute PyMongo's ``Hello`` reply object is read through (``event.reply.document``)."""

    __slots__ = ()

    @property
    def document(self) -> dict:
        return dict(self)


class ServerHeartbeatSucceededEvent(_ServerHeartbeatEvent):
    """A monitor's hello succeeded; ``duration`` in seconds, ``reply`` the hello reply (a HelloReply)."""

    __slots__ = ("__duration", "__reply")

    def __init__(self, duration: float, reply: Any, connection_id: Address, awaited: bool = False) -> None:
        super().__init__(connection_id, awaited)
        self.__duration = duration
        self.__reply = reply if isinstance(reply, HelloReply) or not isinstance(reply, Mapping) else HelloReply(reply)

    @property
    def duration(self) -> float:
        return self.__duration

    @property
    def reply(self) -> Any:
        return self.__reply

    def __repr__(self) -> str:
        return (f"<{self.__class__.__name__} {self.connection_id} duration: {self.duration}, "
                f"awaited: {self.awaited}, reply: {self.reply}>")


class ServerHeartbeatFailedEvent(_ServerHeartbeatEvent):
    """A monitor's hello failed; ``reply`` is the exception, ``duration`` in seconds."""

    __slots__ = ("__duration", "__reply")

    def __init__(self, duration: float, reply: Exception, connection_id: Address, awaited: bool = False) -> None:
        super().__init__(connection_id, awaited)
        self.__duration = duration
        self.__reply = reply

    @property
    def duration(self) -> float:
        return self.__duration

    @property
    def reply(self) -> Exception:
        return self.__reply

    def __repr__(self) -> str:
        return (f"<{self.__class__.__name__} {self.connection_id} duration: {self.duration}, "
                f"awaited: {self.awaited}, reply: {self.reply!r}>")


# -- dispatch ------------------------------------------------------------------------

_DISPATCH = {
    TopologyOpenedEvent: (TopologyListener, "opened"),
    TopologyDescriptionChangedEvent: (TopologyListener, "description_changed"),
    TopologyClosedEvent: (TopologyListener, "closed"),
    ServerOpeningEvent: (ServerListener, "opened"),
    ServerDescriptionChangedEvent: (ServerListener, "description_changed"),
    ServerClosedEvent: (ServerListener, "closed"),
    ServerHeartbeatStartedEvent: (ServerHeartbeatListener, "started"),
    ServerHeartbeatSucceededEvent: (ServerHeartbeatListener, "succeeded"),
    ServerHeartbeatFailedEvent: (ServerHeartbeatListener, "failed"),
}


def publish(listeners: Iterable[_EventListener], event: Any) -> None:
    """Deliver ``event`` to each listener of the matching kind, in order.

    A listener that raises is logged and skipped: monitoring must never break
    the driver.
    """
    kind, method = _DISPATCH[type(event)]
    for listener in listeners:
        if isinstance(listener, kind):
            try:
                getattr(listener, method)(event)
            except Exception:
                _LOGGER.exception("SDAM listener %r raised on %r", listener, event)


def publish_all(listeners: Sequence[_EventListener], events: Iterable[Any]) -> None:
    for event in events:
        publish(listeners, event)


__all__ = [
    "ServerListener", "TopologyListener", "ServerHeartbeatListener",
    "TopologyOpenedEvent", "TopologyClosedEvent", "TopologyDescriptionChangedEvent",
    "ServerOpeningEvent", "ServerClosedEvent", "ServerDescriptionChangedEvent",
    "ServerHeartbeatStartedEvent", "ServerHeartbeatSucceededEvent", "ServerHeartbeatFailedEvent",
    "publish", "publish_all",
]
