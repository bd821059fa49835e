"""The Topology: the driver's live view of the deployment, kept current by monitor greenlets.

It owns the current :class:`~greenmongo.sdam.TopologyDescription` (immutable,
replaced on every change, read without a lock) and one
:class:`~greenmongo.topology.server.Server` per address. Everything that
changes the description - a monitor's check, an application error, an SRV
rescan, open and close - runs the pure SDAM core under one lock and applies
its side effects there: start or stop servers, mark pools ready, clear them,
request checks. Each change then sets (and replaces) a ``gevent.event.Event``,
which is what ``select_server`` waits on: no polling, no timers while nothing
changes. The SDAM events and log messages of a change (and the CMAP ones of its
pools) are queued under the lock and delivered after it is released, through the
topology's :class:`~greenmongo.hub.publisher.OrderedPublisher` that its monitors
and pools share: in the order of the changes, one at a time, and no listener
ever runs while the lock is held - a slow listener holds neither an operation's
error handling nor a monitor's next update.

Load-balanced mode has one LoadBalancer server and no monitor. An unclosed
Topology never keeps the hub alive, and one dropped without ``close()`` has
its greenlets stopped by a finalizer (they hold it only by weak reference).
The flip side: a greenlet that waits *only* for monitor activity must bound
its wait with an ordinary (referenced) timeout, as ``select_server`` always
does, or gevent may see nothing left to run and raise LoopExit.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import weakref
from contextlib import contextmanager
from time import monotonic
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

import gevent
from gevent.event import Event
from gevent.lock import RLock

from greenmongo.auth import AuthCache, Authenticator
from greenmongo.bson.objectid import ObjectId
from greenmongo.errors import (
    ConfigurationError,
    InvalidOperation,
    OperationFailure,
    ServerSelectionTimeoutError,
)
from greenmongo.hub.publisher import OrderedPublisher
from greenmongo.logs.topology import SERVER_SELECTION_LOGGER, SelectionLogger, TopologyLogger
from greenmongo.monitoring.topology import publish_all
from greenmongo.net.connect import load_tls
from greenmongo.net.handshake import open_connection
from greenmongo.options.connection_settings import ConnectionSettings
from greenmongo.options.credentials import MongoCredential
from greenmongo.pool import Pool, PoolOptions
from greenmongo.sdam import events as sdam_events
from greenmongo.sdam.address import Address, format_address
from greenmongo.sdam.errors import ApplicationError, ErrorDecision, decide_application_error
from greenmongo.sdam.selection import choose_server, select_servers
from greenmongo.sdam.server_description import ServerDescription
from greenmongo.sdam.server_type import DATA_BEARING_TYPES
from greenmongo.sdam.settings import TopologySettings
from greenmongo.sdam.topology_description import TopologyDescription
from greenmongo.sdam.topology_type import TopologyType
from greenmongo.sdam.update import TopologyUpdate, apply_srv_hosts, describe, plan_update
from greenmongo.topology.monitor import Monitor, MonitorSettings, streaming_enabled
from greenmongo.topology.server import Server, pooled_connection_factory
from greenmongo.topology.srv_poller import MIN_RESCAN_INTERVAL, SrvPoller

DEFAULT_SERVER_SELECTION_TIMEOUT = 30.0
IGNORED = ErrorDecision(ignored=True)

ServerSelector = Callable[[List[ServerDescription]], List[ServerDescription]]


def _new_topology_id() -> ObjectId:
    return ObjectId()


class Topology:
    """Monitors a deployment and selects servers for operations.

    No I/O happens until :meth:`open` (called by the first ``select_server``
    if not before). Times are in seconds.
    """

    def __init__(
        self,
        settings: TopologySettings,
        *,
        connection_settings: Optional[ConnectionSettings] = None,
        pool_options: Optional[PoolOptions] = None,
        credentials: Optional[MongoCredential] = None,
        event_listeners: Iterable[Any] = (),
        server_selection_timeout: float = DEFAULT_SERVER_SELECTION_TIMEOUT,
        server_monitoring_mode: str = "auto",
        server_selector: Optional[ServerSelector] = None,
        srv_host: Optional[str] = None,
        srv_service_name: str = "mongodb",
        srv_resolver: Any = None,
        srv_min_rescan_interval: float = MIN_RESCAN_INTERVAL,
        topology_id: Optional[ObjectId] = None,
        rng: Optional[random.Random] = None,
    ) -> None:
        """``credentials`` (a MongoCredential) authenticates application connections, never monitors.

        ``srv_host`` turns on SRV polling (for Sharded/Unknown topologies, not
        load-balanced ones) through ``srv_resolver`` (default: the process-wide
        ``greenmongo.net.dns`` resolver). ``srv_min_rescan_interval`` is the
        spec's 60 s floor; tests lower it.
        """
        self._settings = settings
        connection_settings = connection_settings or ConnectionSettings()
        if connection_settings.load_balanced != settings.load_balanced:  # the handshake must say loadBalanced
            connection_settings = dataclasses.replace(connection_settings, load_balanced=settings.load_balanced)
        self._connection_settings = connection_settings
        if connection_settings.tls is not None:
            load_tls()  # here, not in the first connection's greenlet (see load_tls)
        self._pool_options = pool_options or PoolOptions(load_balanced=settings.load_balanced)
        if self._pool_options.load_balanced != settings.load_balanced:
            raise ConfigurationError("pool_options.load_balanced must match the topology's loadBalanced setting")
        # The client's authentication state (SCRAM keys, cloud credentials, OIDC tokens), one per topology.
        self._credentials = (credentials._replace(cache=AuthCache())
                             if credentials is not None and credentials.cache is None else credentials)
        self._listeners: Tuple[Any, ...] = tuple(event_listeners)
        self._selection_timeout = server_selection_timeout
        self._server_selector = server_selector
        self._streaming = streaming_enabled(server_monitoring_mode)
        self._srv_host = srv_host
        self._srv_service_name = srv_service_name
        self._srv_resolver = srv_resolver
        self._srv_min_rescan_interval = srv_min_rescan_interval
        self._id = topology_id if topology_id is not None else _new_topology_id()
        self._rng = rng or random.Random()
        self._logger = TopologyLogger(self._id)

        connect_timeout = self._connection_settings.connect_timeout
        monitor_connection = dataclasses.replace(self._connection_settings, socket_timeout=connect_timeout)
        self._monitor_settings = MonitorSettings(
            heartbeat_frequency=settings.heartbeat_frequency, connect_timeout=connect_timeout,
            streaming=self._streaming, connect=lambda address: open_connection(address, monitor_connection))

        self._lock = RLock()
        self._publisher = OrderedPublisher()  # every listener call of this topology, its monitors and pools
        self._description = TopologyDescription.initial(settings)
        self._servers: Dict[Address, Server] = {}
        self._changed = Event()
        self._selection_cache_for: Optional[TopologyDescription] = None
        self._selection_cache: Dict[Any, List[ServerDescription]] = {}
        self._opened = False
        self._closed = False
        self._srv_poller: List[SrvPoller] = []  # zero or one; a list the finalizer can share
        self._finalizer: Optional[weakref.finalize] = None

    @classmethod
    def from_options(cls, options: Any, **overrides: Any) -> "Topology":
        """A Topology configured from ``greenmongo.options.ClientOptions`` (keywords override)."""
        arguments: Dict[str, Any] = dict(
            connection_settings=options.connection_settings(),
            pool_options=PoolOptions(
                max_pool_size=options.max_pool_size or 0, min_pool_size=options.min_pool_size,
                max_idle_time=options.max_idle_time_seconds, wait_queue_timeout=options.wait_queue_timeout,
                max_connecting=options.max_connecting, load_balanced=options.load_balanced,
                debug=options.pool_debug),
            credentials=options.credentials,
            event_listeners=options.event_listeners,
            server_selection_timeout=options.server_selection_timeout,
            server_monitoring_mode=options.server_monitoring_mode,
            server_selector=options.server_selector,
            srv_host=options.srv_host,
            srv_service_name=options.srv_service_name,
        )
        arguments.update(overrides)
        return cls(options.topology_settings(), **arguments)

    # -- state --------------------------------------------------------------------------

    @property
    def topology_id(self) -> Any:
        return self._id

    @property
    def selection_timeout(self) -> float:
        """serverSelectionTimeoutMS in seconds."""
        return self._selection_timeout

    @property
    def description(self) -> TopologyDescription:
        """The current description (immutable: hold on to it for a consistent view)."""
        return self._description

    @property
    def settings(self) -> TopologySettings:
        return self._settings

    @property
    def opened(self) -> bool:
        return self._opened

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def streaming(self) -> bool:
        """Whether monitors use the streaming protocol where servers support it."""
        return self._streaming

    def get_server(self, address: Address) -> Optional[Server]:
        return self._servers.get(address)

    def servers(self) -> Dict[Address, Server]:
        return dict(self._servers)

    def greenlets(self) -> List[gevent.Greenlet]:
        """Live greenlets this topology runs (monitors, RTT monitors, SRV poller)."""
        out: List[gevent.Greenlet] = []
        for server in self._servers.values():
            out.extend(server.greenlets())
        for poller in self._srv_poller:
            if poller.greenlet is not None:
                out.append(poller.greenlet)
        return [g for g in out if not g.dead]

    def __repr__(self) -> str:
        return f"<Topology {self._id} {self._description!r}>"

    # -- open and close -----------------------------------------------------------------

    def open(self) -> None:
        """Start monitoring (idempotent). Raises InvalidOperation after close()."""
        if self._closed:
            raise InvalidOperation("Cannot use a Topology after close()")
        if self._opened:
            return
        with self._changing():
            if self._opened or self._closed:
                return
            self._opened = True
            initial = self._description
            self._emit(sdam_events.opening_events(self._id, initial))
            created = [self._add_server(address) for address in initial.addresses]
            if self._settings.load_balanced:
                address = initial.addresses[0]
                self._commit(plan_update(initial, ServerDescription.load_balancer(address)),
                             self._servers.get(address))
            for server in created:
                if server.monitor is not None:
                    server.monitor.start()
            if self._srv_host is not None and not self._settings.load_balanced:
                self._start_srv_poller()
            finalizer = weakref.finalize(self, _abandon, self._servers, self._srv_poller)
            finalizer.atexit = False
            self._finalizer = finalizer

    def close(self, join_timeout: float = 5.0) -> None:
        """Stop every greenlet, close every pool, publish the closing events (idempotent).

        The greenlets are interrupted, then awaited (up to ``join_timeout``
        seconds; it takes one turn of the hub, not a heartbeat) so that their
        last heartbeat events come before the closing events.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            greenlets = self.greenlets()
            if self._finalizer is not None:
                self._finalizer.detach()
            for poller in self._srv_poller:
                poller.stop()
            for server in self._servers.values():
                server.stop_monitoring()
        me = gevent.getcurrent()
        try:
            gevent.joinall([g for g in greenlets if g is not me], timeout=join_timeout)
        finally:  # even if close() itself is interrupted, the pools close and the events go out
            self._finish_close()

    def _finish_close(self) -> None:
        with self._changing():
            servers = list(self._servers.values())
            for server in servers:
                server.pool.close()
            current = self._description
            self._servers.clear()
            self._description = current.closed()
            if self._opened:
                self._emit(sdam_events.closing_events(self._id, current))
            self._notify()

    def __enter__(self) -> "Topology":
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- server selection --------------------------------------------------------------------

    def select_server(
        self,
        read_preference: Any = None,
        *,
        is_write: bool = False,
        server_selector: Optional[ServerSelector] = None,
        deprioritized: Iterable[Any] = (),
        timeout: Optional[float] = None,
        deadline: Optional[float] = None,
        operation: Optional[str] = None,
        operation_id: Optional[int] = None,
    ) -> Server:
        """A suitable server for one operation, waiting for the topology to change if there is none.

        ``read_preference`` is any object with ``mode``/``tag_sets``/``max_staleness``
        (None: primary), or a server selector function (then reads use any
        suitable server it keeps, as with ``server_selector``); writes pass ``is_write=True``. ``deprioritized``
        addresses (servers a retry already failed on) are used only if nothing
        else suits. The wait ends at ``timeout`` seconds (default
        serverSelectionTimeoutMS; 0 = try once) or the monotonic ``deadline``,
        whichever is first, with ServerSelectionTimeoutError. The returned
        server's operation count is incremented: call ``server.end_operation()``
        when the operation is over (or use :meth:`operation_server`).
        """
        if callable(read_preference) and not hasattr(read_preference, "mode"):
            if server_selector is not None:
                raise ConfigurationError("pass a selector function either positionally or as server_selector")
            read_preference, server_selector = _ANY_READ, read_preference
        selector = self._combined_selector(server_selector)
        deprioritized = tuple(deprioritized)
        # The suitable servers are a pure function of the description and these arguments: remember them
        # per description (not with a selector function, which may be impure).
        cache_key = (read_preference, is_write) if selector is None and not deprioritized else None
        if cache_key is not None:
            try:
                hash(cache_key)
            except TypeError:
                cache_key = None

        def candidates(description: TopologyDescription) -> List[ServerDescription]:
            if cache_key is not None:
                if description is not self._selection_cache_for:
                    self._selection_cache_for, self._selection_cache = description, {}
                found = self._selection_cache.get(cache_key)
                if found is not None:
                    return found
            found = select_servers(description, read_preference, is_write=is_write, deprioritized=deprioritized,
                                   server_selector=selector)
            if cache_key is not None and found:
                self._selection_cache[cache_key] = found
            return found

        return self._select(candidates, lambda: _criteria(read_preference, is_write, selector is not None), timeout,
                            deadline, operation, operation_id)

    def select_server_by_address(self, address: Address, *, timeout: Optional[float] = None,
                                 deadline: Optional[float] = None, operation: Optional[str] = None,
                                 operation_id: Optional[int] = None) -> Server:
        """The server at ``address`` once it is known and data-bearing (getMore, killCursors, pinning)."""

        def candidates(description: TopologyDescription) -> List[ServerDescription]:
            description.check_compatible()
            found = description.get(address)
            if found is None:
                return []
            usable = found.server_type in DATA_BEARING_TYPES or (
                description.topology_type is TopologyType.Single and found.is_server_type_known)
            return [found] if usable else []

        return self._select(candidates, lambda: f"server {format_address(address)}", timeout, deadline, operation,
                            operation_id)

    @contextmanager
    def operation_server(self, read_preference: Any = None, **kwargs: Any) -> Iterator[Server]:
        """``with topology.operation_server(rp, is_write=...) as server:`` - ends the operation for you."""
        server = self.select_server(read_preference, **kwargs)
        try:
            yield server
        finally:
            server.end_operation()

    def _combined_selector(self, selector: Optional[ServerSelector]) -> Optional[ServerSelector]:
        client_selector = self._server_selector
        if client_selector is None or selector is None:
            return selector or client_selector

        def both(servers: List[ServerDescription]) -> List[ServerDescription]:
            chosen = list(selector(servers))
            return list(client_selector(chosen)) if chosen else chosen

        return both

    def _select(self, candidates: Callable[[TopologyDescription], List[ServerDescription]],
                describe_criteria: Callable[[], str], timeout: Optional[float], deadline: Optional[float],
                operation: Optional[str], operation_id: Optional[int]) -> Server:
        """``describe_criteria()`` names what is selected, for logs and the timeout error (built only then)."""
        self.open()
        if not self._closed and not SERVER_SELECTION_LOGGER.isEnabledFor(logging.DEBUG):
            # The usual case: no selection log messages (all DEBUG, but the INFO one of a wait) and a suitable
            # server known now. Anything else (no server yet, logging on) goes the full way below.
            server = self._choose(candidates(self._description))
            if server is not None:
                server.begin_operation()
                return server
        if timeout is None:
            timeout = self._selection_timeout
        started = monotonic()
        end = started + timeout
        if deadline is not None and deadline < end:
            end = deadline
            timeout = max(deadline - started, 0.0)  # what the operation's timeoutMS left: the limit that acts
        log = SelectionLogger(describe_criteria() if SERVER_SELECTION_LOGGER.isEnabledFor(logging.INFO) else "",
                              operation, operation_id)
        if log.enabled():
            log.started(self._description)
        waiting_logged = False
        while True:
            changed = self._changed  # taken before reading the description: no change can be missed
            description = self._description
            if self._closed:
                raise self._selection_failed(log, description,
                                             InvalidOperation("Cannot use a Topology after close()"))
            try:
                found = candidates(description)
            except ConfigurationError as exc:  # waiting cannot help: fail now
                self._selection_failed(log, description, exc)
                raise
            server = self._choose(found)
            if server is not None:
                server.begin_operation()
                if log.enabled():
                    log.succeeded(description, server.address)
                return server
            remaining = end - monotonic()
            if remaining <= 0:
                error = self._selection_failed(log, description, _selection_timeout_error(
                    description, describe_criteria(), timeout))
                # The error's traceback holds this frame. A description here may hold an operation's error
                # that a retry chains to this one (its cause): these locals would close a reference cycle.
                del description, found
                try:
                    raise error
                finally:
                    del error
            self.request_check_all()
            if not waiting_logged and log.enabled(20):
                log.waiting(description, remaining)
                waiting_logged = True
            changed.wait(remaining)

    def _choose(self, found: List[ServerDescription]) -> Optional[Server]:
        servers = self._servers
        if len(found) == 1:  # the usual case (one primary): nothing to choose between
            return servers.get(found[0].address)
        present = [sd for sd in found if sd.address in servers]
        chosen = choose_server(present, lambda address: servers[address].operation_count, self._rng)
        return servers.get(chosen.address) if chosen is not None else None

    @staticmethod
    def _selection_failed(log: SelectionLogger, description: TopologyDescription,
                          error: BaseException) -> BaseException:
        if log.enabled():
            log.failed(description, error)
        return error

    def request_check_all(self) -> None:
        """Ask every monitor for an immediate check (each still honours the 500 ms minimum)."""
        for server in list(self._servers.values()):
            server.request_check()

    # -- errors from operations --------------------------------------------------------------

    def handle_application_error(
        self,
        address: Address,
        error: BaseException,
        *,
        generation: int,
        completed_handshake: bool,
        max_wire_version: Optional[int] = None,
        service_id: Optional[ObjectId] = None,
        reply: Optional[Mapping[str, Any]] = None,
        is_auth_error: bool = False,
    ) -> ErrorDecision:
        """SDAM's handling of an error an operation hit on ``address``; returns what was decided.

        ``generation`` is the connection's pool generation (the pool's, from
        before a failed connection attempt). State-change errors mark the
        server Unknown and request a check; network errors mark it Unknown,
        clear its pool and cancel the monitor's check; stale errors change nothing.
        """
        with self._changing():
            server = self._servers.get(address)
            if server is None or self._closed:
                return IGNORED
            # The pool's current generation, as far as this connection's is concerned.
            pool_generation = generation + 1 if server.pool.stale(generation, service_id) else generation
            app_error = ApplicationError.from_exception(
                address, error, generation=generation, completed_handshake=completed_handshake,
                max_wire_version=max_wire_version, is_auth_error=is_auth_error, service_id=service_id,
                reply=reply)
            decision = decide_application_error(self._description, pool_generation, app_error)
            if decision.ignored:
                return decision
            if decision.unknown is not None:
                self._commit(plan_update(self._description, decision.unknown), server)
            if decision.clear_pool:
                server.pool.clear(service_id=decision.service_id, cause=error)
            if decision.request_check:
                server.request_check()
            if decision.cancel_check:
                server.cancel_check()
            return decision

    # -- called by monitors and the SRV poller --------------------------------------------------

    def _apply_check(self, monitor: Monitor, description: ServerDescription, failure: Any) -> None:
        """A monitor's check outcome; ``failure`` is its CheckFailureDecision (None on success)."""
        with self._changing():
            if self._closed:
                return
            server = self._servers.get(monitor.address)
            if server is None or server.monitor is not monitor:
                return  # the server left the topology while the check ran
            update = plan_update(self._description, description)
            self._commit(update, server)
            if failure is not None and failure.clear_pool and update.applied:
                server.pool.clear(interrupt_in_use_connections=failure.interrupt_in_use, cause=description.error)

    def apply_srv_hosts(self, hosts: Sequence[Address]) -> None:
        """An SRV rescan's verified hosts: drop the gone, add the new (up to srvMaxHosts)."""
        with self._changing():
            if self._closed:
                return
            previous = self._description
            new = apply_srv_hosts(previous, hosts, self._rng)
            if new is previous:
                return
            self._description = new
            removed = [self._servers.pop(a) for a in previous.addresses if a not in new and a in self._servers]
            self._emit(sdam_events.replacement_events(self._id, previous, new))
            added = [self._add_server(a) for a in new.addresses if a not in previous]
            for server in removed:
                server.close()
            for server in added:
                if server.monitor is not None:
                    server.monitor.start()
            self._notify()

    # -- applying changes (lock held) ------------------------------------------------------------

    @contextmanager
    def _changing(self) -> Iterator[None]:
        """The lock for one change; the listener calls it queues are delivered once it is released."""
        with self._publisher.batch():
            with self._lock:
                yield

    def _commit(self, update: TopologyUpdate, server: Optional[Server]) -> None:
        """Install ``update`` and carry out its side effects, in the order SDAM requires."""
        if not update.applied:
            return
        if update.mark_pool_ready and server is not None and not server.closed:
            server.pool.ready()  # before anyone can select the server in its new state
        self._description = update.description
        removed = [self._servers.pop(a) for a in update.removed if a in self._servers]
        self._emit(sdam_events.update_events(self._id, update))
        added = [self._add_server(address) for address in update.added]
        for gone in removed:
            gone.close()
        for new in added:
            if new.monitor is not None:
                new.monitor.start()
        for address in update.demoted_primaries:
            demoted = self._servers.get(address)
            if demoted is not None:
                demoted.request_check()
        for address in update.pools_to_clear:
            stale = self._servers.get(address)
            if stale is not None:
                stale.pool.clear()
        self._notify()

    def _notify(self) -> None:
        """Wake every select_server waiting for a change (and give later ones a fresh Event)."""
        fired, self._changed = self._changed, Event()
        fired.set()

    def _emit(self, events: Sequence[Any]) -> None:
        """Queue SDAM events (and their log messages) for delivery after the change (see _changing)."""
        if not events:
            return
        logger = self._logger if self._logger.enabled() else None
        if self._listeners or logger is not None:
            self._publisher.publish(_deliver_events, self._listeners, logger, tuple(events))

    def _add_server(self, address: Address) -> Server:
        """Create (not start) the Server for a new address."""
        credentials = self._credentials
        make_authenticator = None
        if credentials is not None:
            def make_authenticator() -> Any:
                return Authenticator(credentials)

        settings = self._connection_settings

        def open_pooled(address: Address, **kwargs: Any) -> Any:
            return open_connection(address, settings, **kwargs)

        server_box: List[Any] = []

        def on_populate_error(error: BaseException) -> None:
            target = server_box[0]() if server_box else None
            if target is not None:  # a minPoolSize connection failed to establish: as for a checkout
                target.handle_error(error, None, completed_handshake=False,
                                    is_auth_error=isinstance(error, OperationFailure))

        pool = Pool(address, pooled_connection_factory(address, open_pooled, make_authenticator),
                    self._pool_options, self._listeners, on_populate_error=on_populate_error,
                    publisher=self._publisher)
        monitor = None
        if not self._settings.load_balanced:
            monitor = Monitor(address, self, self._monitor_settings, self._listeners, self._logger,
                              publisher=self._publisher)
        server = Server(address, self, pool, monitor)
        server_box.append(weakref.ref(server))
        self._servers[address] = server
        return server

    def _start_srv_poller(self) -> None:
        resolver = self._srv_resolver
        if resolver is None:
            from greenmongo.net.dns import default_resolver

            resolver = default_resolver()
        assert self._srv_host is not None  # started only for a mongodb+srv URI
        poller = SrvPoller(self, self._srv_host, resolver, service_name=self._srv_service_name,
                           heartbeat_frequency=self._settings.heartbeat_frequency,
                           dns_timeout=self._connection_settings.connect_timeout,
                           min_interval=self._srv_min_rescan_interval)
        self._srv_poller.append(poller)
        poller.start()


class _AnyMember:
    """The read preference under a bare selector function: any readable member (nearest)."""

    mode = 4
    tag_sets: Tuple[Dict[str, str], ...] = ({},)
    max_staleness = -1

    def __repr__(self) -> str:
        return "Nearest()"


_ANY_READ = _AnyMember()


def _deliver_events(listeners: Sequence[Any], logger: Optional[TopologyLogger], events: Sequence[Any]) -> None:
    if listeners:
        publish_all(listeners, events)
    if logger is not None:
        for event in events:
            logger.event(event)


def _abandon(servers: Dict[Address, Server], pollers: List[SrvPoller]) -> None:
    """Finalizer of a Topology dropped without close(): stop its greenlets (never blocks)."""
    for poller in pollers:
        poller.stop()
    for server in list(servers.values()):
        server.stop_monitoring()


def abandon(topology: "Topology") -> None:
    """Stop an inherited topology's greenlets without blocking or closing its sockets (after fork)."""
    _abandon(topology._servers, topology._srv_poller)


def _criteria(read_preference: Any, is_write: bool, custom: bool) -> str:
    if is_write:
        text = "writes"
    elif read_preference is None:
        text = "read preference Primary()"
    else:
        text = f"read preference {read_preference!r}"
    return text + (" and a custom server selector" if custom else "")


def _selection_timeout_error(description: TopologyDescription, criteria: str,
                             timeout: float) -> ServerSelectionTimeoutError:
    """Server Selection's error: what matched nothing, or why no server is known."""
    servers = list(description.server_descriptions().values())
    if any(sd.is_server_type_known for sd in servers):
        reason = f"No servers match {criteria}"
    else:
        errors = list(dict.fromkeys(str(sd.error) for sd in servers if sd.error is not None))
        reason = ", ".join(errors) if errors else "No servers found yet"
    return ServerSelectionTimeoutError(
        f"{reason}, Timeout: {timeout:g}s, Topology Description: {describe(description)}")
