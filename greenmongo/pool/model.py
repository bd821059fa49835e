"""The pool's vocabulary: options, per-connection records, stats, and what a connection must offer."""

from __future__ import annotations

from time import monotonic
from typing import Any, Callable, Dict, Optional, Protocol, TypeVar

from greenmongo.bson.objectid import ObjectId
from greenmongo.errors import ConfigurationError
from greenmongo.errors import PoolClosedError as PoolClosedError  # re-exported by greenmongo.pool


class PoolableConnection(Protocol):
    """What the pool needs from a connection the factory returns."""

    @property
    def closed(self) -> bool:
        """True once the connection is unusable (closed, or failed on the network)."""

    def close(self) -> None:
        """Close the socket; must not block (the pool calls it from any greenlet)."""

    # Optional, read once after establishment in load-balanced mode:
    # service_id: Optional[ObjectId]


ConnT = TypeVar("ConnT", bound=PoolableConnection)

ConnectionFactory = Callable[..., ConnT]
"""``factory(connection_id[, deadline])`` connects, handshakes and authenticates; it may switch and may be
killed. A checkout under an operation's timeoutMS passes its monotonic ``deadline``; background
population calls it with the id alone."""


class PoolState:
    PAUSED = "paused"
    READY = "ready"
    CLOSED = "closed"


class PoolOptions:
    """The CMAP options of every pool of one client (durations in seconds, 0/None = no limit)."""

    __slots__ = ("max_pool_size", "min_pool_size", "max_idle_time", "wait_queue_timeout",
                 "max_connecting", "load_balanced", "maintenance_interval", "debug", "_non_default")

    def __init__(
        self,
        max_pool_size: int = 100,
        min_pool_size: int = 0,
        max_idle_time: Optional[float] = None,
        wait_queue_timeout: Optional[float] = None,
        max_connecting: int = 2,
        load_balanced: bool = False,
        maintenance_interval: Optional[float] = None,
        debug: bool = False,
    ) -> None:
        """``maintenance_interval``: seconds between background runs (None: the default,
        negative: never run -- the test format's ``backgroundThreadIntervalMS: -1``). ``debug``: record who
        holds each checked-out connection (``pool.diagnostics``; not a CMAP option, never in its events)."""
        if max_pool_size is None or max_pool_size < 0:
            raise ConfigurationError("maxPoolSize must be an integer >= 0")
        if min_pool_size < 0 or (max_pool_size and min_pool_size > max_pool_size):
            raise ConfigurationError("minPoolSize must be >= 0 and <= maxPoolSize")
        if max_connecting is None or max_connecting <= 0:
            raise ConfigurationError("maxConnecting must be an integer > 0")
        if max_idle_time is not None and max_idle_time < 0:
            raise ConfigurationError("maxIdleTimeMS must be >= 0")
        if wait_queue_timeout is not None and wait_queue_timeout < 0:
            raise ConfigurationError("waitQueueTimeoutMS must be >= 0")
        self.max_pool_size = int(max_pool_size)
        self.min_pool_size = int(min_pool_size)
        self.max_idle_time = max_idle_time or None
        self.wait_queue_timeout = wait_queue_timeout or None
        self.max_connecting = int(max_connecting)
        self.load_balanced = bool(load_balanced)
        self.maintenance_interval = maintenance_interval
        self.debug = bool(debug)
        options: Dict[str, Any] = {}
        if max_pool_size != 100:
            options["maxPoolSize"] = max_pool_size
        if min_pool_size:
            options["minPoolSize"] = min_pool_size
        if self.max_idle_time:
            options["maxIdleTimeMS"] = _ms(self.max_idle_time)
        if self.wait_queue_timeout:
            options["waitQueueTimeoutMS"] = _ms(self.wait_queue_timeout)
        if max_connecting != 2:
            options["maxConnecting"] = max_connecting
        self._non_default = options

    @property
    def non_default_options(self) -> Dict[str, Any]:
        """The options the user changed, by their URI names (for PoolCreatedEvent and its log)."""
        return dict(self._non_default)


def _ms(seconds: float) -> Any:
    value = seconds * 1000.0
    return int(value) if value == int(value) else value


class PooledConnection:
    """The pool's record of one connection: identity, generation, what it is in use for, who holds it."""

    __slots__ = ("conn", "id", "generation", "service_id", "created_at", "last_used", "use",
                 "interrupted", "for_pool", "holder")

    def __init__(self, connection_id: int, generation: int) -> None:
        self.conn: Any = None
        self.id = connection_id
        self.generation = generation
        self.service_id: Optional[ObjectId] = None
        self.created_at = monotonic()
        self.last_used = self.created_at
        # While checked out: "cursor" / "transaction" (a command of one, or a load-balanced pin), None: other.
        self.use: Optional[str] = None
        self.interrupted = False  # clear(interrupt_in_use_connections=True) reached it
        self.for_pool = False  # established by the background for minPoolSize, not for a checkout
        self.holder: Any = None  # pool debug mode: a diagnostics.Holder while checked out

    def __repr__(self) -> str:
        return f"<PooledConnection id={self.id} generation={self.generation} conn={self.conn!r}>"


class PoolStats:
    """A snapshot of a pool's counters (for tests, diagnostics, dashboards and benchmarks).

    ``total`` is the pool's size (pending + available + in use); ``in_use`` splits into
    ``in_use_by_cursors``, ``in_use_by_transactions`` and the rest; ``longest_wait`` is how long (seconds)
    the oldest checkout in the wait queue has waited, 0.0 with no waiters."""

    __slots__ = ("state", "generation", "total", "available", "pending", "in_use", "waiters",
                 "establishing", "populators", "max_pool_size", "in_use_by_cursors",
                 "in_use_by_transactions", "longest_wait")

    state: str
    generation: int
    total: int
    available: int
    pending: int
    in_use: int
    waiters: int
    establishing: int
    populators: int
    max_pool_size: int
    in_use_by_cursors: int
    in_use_by_transactions: int
    longest_wait: float

    def __init__(self, **values: Any) -> None:
        for key, value in values.items():
            setattr(self, key, value)

    def as_dict(self) -> Dict[str, Any]:
        return {key: getattr(self, key) for key in self.__slots__}

    def __repr__(self) -> str:
        return f"PoolStats({self.as_dict()})"


def close_quietly(conn: Any) -> None:
    """``conn.close()``, ignoring its errors: a connection being discarded has nothing left to say."""
    if conn is None:
        return
    try:
        conn.close()
    except Exception:
        pass


def address_text(address: Any) -> str:
    if isinstance(address, tuple) and len(address) == 2 and address[1] is not None:
        return f"{address[0]}:{address[1]}"
    return str(address if not isinstance(address, tuple) else address[0])
