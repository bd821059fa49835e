"""Connection pool (CMAP) events and their listener base class, shaped like PyMongo's.

A listener is any :class:`ConnectionPoolListener` in the ``event_listeners``
list a pool is given; every method receives one event object. Durations are
seconds (float), measured on the monotonic clock, as in PyMongo.

Listeners run synchronously in the greenlet that caused the event. The pool
calls them only when its own bookkeeping is already consistent, so a listener
that blocks, switches or is killed cannot corrupt the pool; an ``Exception``
raised by a listener is logged and swallowed, never propagated into the
driver.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable, Mapping, Optional, Sequence

from greenmongo.monitoring.topology import _EventListener

__all__ = [
    "ConnectionCheckOutFailedReason",
    "ConnectionClosedReason",
    "ConnectionPoolListener",
    "PoolCreatedEvent",
    "PoolReadyEvent",
    "PoolClearedEvent",
    "PoolClosedEvent",
    "ConnectionCreatedEvent",
    "ConnectionReadyEvent",
    "ConnectionClosedEvent",
    "ConnectionCheckOutStartedEvent",
    "ConnectionCheckOutFailedEvent",
    "ConnectionCheckedOutEvent",
    "ConnectionCheckedInEvent",
]

_LOGGER = logging.getLogger("greenmongo.monitoring")


class ConnectionClosedReason:
    """Why a connection left the pool (``ConnectionClosedEvent.reason``)."""

    STALE = "stale"
    """The pool was cleared after the connection was created."""

    IDLE = "idle"
    """The connection sat unused in the pool for longer than maxIdleTimeMS."""

    ERROR = "error"
    """The connection failed (network error, failed handshake, interruption)."""

    POOL_CLOSED = "poolClosed"
    """The pool was closed."""


class ConnectionCheckOutFailedReason:
    """Why a checkout failed (``ConnectionCheckOutFailedEvent.reason``)."""

    TIMEOUT = "timeout"
    """No connection within waitQueueTimeoutMS (or the operation's deadline)."""

    POOL_CLOSED = "poolClosed"
    """The pool was closed."""

    CONN_ERROR = "connectionError"
    """Establishing a connection failed, or the pool was paused / cleared."""


# -- events ------------------------------------------------------------------

class _PoolEvent:
    """Base of every pool event: the server address the pool belongs to."""

    __slots__ = ("__address",)

    def __init__(self, address: Any) -> None:
        self.__address = address

    @property
    def address(self) -> Any:
        """The (host, port) of the server this pool connects to."""
        return self.__address

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.__address!r})"


class PoolCreatedEvent(_PoolEvent):
    """A pool was created (it starts paused)."""

    __slots__ = ("__options",)

    def __init__(self, options: Mapping[str, Any], address: Any) -> None:
        super().__init__(address)
        self.__options = options

    @property
    def options(self) -> Mapping[str, Any]:
        """The pool options the user set (camelCase names, as in the URI)."""
        return self.__options

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.address!r}, {self.__options!r})"


class PoolReadyEvent(_PoolEvent):
    """The pool was marked ready: checkouts and background population may proceed."""

    __slots__ = ()


class PoolClearedEvent(_PoolEvent):
    """The pool's generation was bumped; in non-load-balanced mode it is now paused."""

    __slots__ = ("__service_id", "__interrupt_connections")

    def __init__(self, address: Any, service_id: Any = None, interrupt_connections: bool = False) -> None:
        super().__init__(address)
        self.__service_id = service_id
        self.__interrupt_connections = interrupt_connections

    @property
    def service_id(self) -> Any:
        """The serviceId cleared (load-balanced mode), else None."""
        return self.__service_id

    @property
    def interrupt_connections(self) -> bool:
        """Whether in-use and pending connections were interrupted by this clear."""
        return self.__interrupt_connections

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.address!r}, {self.__service_id!r}, "
                f"{self.__interrupt_connections!r})")


class PoolClosedEvent(_PoolEvent):
    """The pool was closed for good."""

    __slots__ = ()


class _ConnectionIdEvent(_PoolEvent):
    __slots__ = ("__connection_id",)

    def __init__(self, address: Any, connection_id: int) -> None:
        super().__init__(address)
        self.__connection_id = connection_id

    @property
    def connection_id(self) -> int:
        """The pool-assigned connection id (1, 2, 3, ... in creation order)."""
        return self.__connection_id

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.address!r}, {self.__connection_id!r})"


class _ConnectionDurationEvent(_ConnectionIdEvent):
    __slots__ = ("__duration",)

    def __init__(self, address: Any, connection_id: int, duration: Optional[float]) -> None:
        super().__init__(address, connection_id)
        self.__duration = duration

    @property
    def duration(self) -> Optional[float]:
        """Seconds, on the monotonic clock."""
        return self.__duration

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.address!r}, {self.connection_id!r}, {self.__duration!r})"


class ConnectionCreatedEvent(_ConnectionIdEvent):
    """A connection object was created; it is not established yet."""

    __slots__ = ()


class ConnectionReadyEvent(_ConnectionDurationEvent):
    """A connection finished connect + handshake + auth; ``duration`` since its creation."""

    __slots__ = ()


class ConnectionClosedEvent(_ConnectionIdEvent):
    """A connection left the pool; ``reason`` is a :class:`ConnectionClosedReason` value."""

    __slots__ = ("__reason",)

    def __init__(self, address: Any, connection_id: int, reason: str) -> None:
        super().__init__(address, connection_id)
        self.__reason = reason

    @property
    def reason(self) -> str:
        return self.__reason

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.address!r}, {self.connection_id!r}, {self.__reason!r})"


class ConnectionCheckOutStartedEvent(_PoolEvent):
    """A checkout began."""

    __slots__ = ()


class ConnectionCheckOutFailedEvent(_PoolEvent):
    """A checkout failed; ``reason`` is a :class:`ConnectionCheckOutFailedReason` value."""

    __slots__ = ("__reason", "__duration")

    def __init__(self, address: Any, reason: str, duration: Optional[float]) -> None:
        super().__init__(address)
        self.__reason = reason
        self.__duration = duration

    @property
    def reason(self) -> str:
        return self.__reason

    @property
    def duration(self) -> Optional[float]:
        """Seconds from checkout start to failure."""
        return self.__duration

    @property
    def connection_id(self) -> int:
        """Always 0: no connection was checked out (PyMongo gives the failed checkout this id too)."""
        return 0

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.address!r}, {self.__reason!r}, {self.__duration!r})"


class ConnectionCheckedOutEvent(_ConnectionDurationEvent):
    """A checkout succeeded; ``duration`` since the checkout started."""

    __slots__ = ()


class ConnectionCheckedInEvent(_ConnectionIdEvent):
    """A connection was returned to the pool."""

    __slots__ = ()


# -- listener ------------------------------------------------------------------

class ConnectionPoolListener(_EventListener):
    """Subclass and override the methods you care about; pass instances in ``event_listeners``."""

    def pool_created(self, event: PoolCreatedEvent) -> None:
        pass

    def pool_ready(self, event: PoolReadyEvent) -> None:
        pass

    def pool_cleared(self, event: PoolClearedEvent) -> None:
        pass

    def pool_closed(self, event: PoolClosedEvent) -> None:
        pass

    def connection_created(self, event: ConnectionCreatedEvent) -> None:
        pass

    def connection_ready(self, event: ConnectionReadyEvent) -> None:
        pass

    def connection_closed(self, event: ConnectionClosedEvent) -> None:
        pass

    def connection_check_out_started(self, event: ConnectionCheckOutStartedEvent) -> None:
        pass

    def connection_check_out_failed(self, event: ConnectionCheckOutFailedEvent) -> None:
        pass

    def connection_checked_out(self, event: ConnectionCheckedOutEvent) -> None:
        pass

    def connection_checked_in(self, event: ConnectionCheckedInEvent) -> None:
        pass


class _PoolEventPublisher:
    """Builds events and hands them to every pool listener of an ``event_listeners`` list.

    Other kinds of listener in the same list (command, server, topology) are
    ignored here, as in PyMongo where one list carries them all.
    """

    __slots__ = ("listeners", "address")

    def __init__(self, address: Any, event_listeners: Optional[Iterable[Any]]) -> None:
        self.address = address
        self.listeners: Sequence[ConnectionPoolListener] = tuple(
            lst for lst in (event_listeners or ()) if isinstance(lst, ConnectionPoolListener))

    def __bool__(self) -> bool:
        return bool(self.listeners)

    def _deliver(self, method: str, event: _PoolEvent) -> None:
        for listener in self.listeners:
            try:
                getattr(listener, method)(event)
            except Exception:
                _LOGGER.exception("%s.%s raised; the event was dropped for that listener",
                                  type(listener).__name__, method)

    def pool_created(self, options: Mapping[str, Any]) -> None:
        self._deliver("pool_created", PoolCreatedEvent(options, self.address))

    def pool_ready(self) -> None:
        self._deliver("pool_ready", PoolReadyEvent(self.address))

    def pool_cleared(self, service_id: Any, interrupt_connections: bool) -> None:
        self._deliver("pool_cleared", PoolClearedEvent(self.address, service_id, interrupt_connections))

    def pool_closed(self) -> None:
        self._deliver("pool_closed", PoolClosedEvent(self.address))

    def connection_created(self, connection_id: int) -> None:
        self._deliver("connection_created", ConnectionCreatedEvent(self.address, connection_id))

    def connection_ready(self, connection_id: int, duration: float) -> None:
        self._deliver("connection_ready", ConnectionReadyEvent(self.address, connection_id, duration))

    def connection_closed(self, connection_id: int, reason: str) -> None:
        self._deliver("connection_closed", ConnectionClosedEvent(self.address, connection_id, reason))

    def checkout_started(self) -> None:
        self._deliver("connection_check_out_started", ConnectionCheckOutStartedEvent(self.address))

    def checkout_failed(self, reason: str, duration: float) -> None:
        self._deliver("connection_check_out_failed",
                      ConnectionCheckOutFailedEvent(self.address, reason, duration))

    def checked_out(self, connection_id: int, duration: float) -> None:
        self._deliver("connection_checked_out",
                      ConnectionCheckedOutEvent(self.address, connection_id, duration))

    def checked_in(self, connection_id: int) -> None:
        self._deliver("connection_checked_in", ConnectionCheckedInEvent(self.address, connection_id))
