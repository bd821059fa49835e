"""ClientCore: the one object every API handle of a client runs through.

MongoClient, Database, Collection, the cursors, ChangeStream and ClientSession hold the core and
call ``execute``; nothing above the engine touches the topology, the executor or the session pool.
The core owns what a client is at run time: the topology and the executor on it, the server-session
pool, the cluster clock, the killCursors queued by garbage-collected cursors, and the guards every
operation passes (the thread that owns the client's hub, a fork since the last use, close()).

A client belongs to the gevent hub of the OS thread that created it: its greenlets, pools and events
live on that hub, so use from another OS thread fails at once with InvalidOperation instead of
hanging or raising "cannot switch to a different thread". After ``os.fork()`` a child drops what it
inherited (sockets, pools, monitor greenlets) and reconnects on first use.
"""

from __future__ import annotations

import atexit
import os
import weakref
from collections import deque
from typing import Any, Callable, Iterable, Optional

from greenmongo.engine.deadline import LEGACY, Deadline
from greenmongo.engine.executor import Executor, OperationSpan
from greenmongo.engine.protocols import AutoEncryption
from greenmongo.engine.server_session import ClusterClock, ServerSession, ServerSessionPool, process_id
from greenmongo.engine.session_state import SessionState
from greenmongo.errors import InvalidOperation
from greenmongo.hub.waiting import current_hub, on_hub
from greenmongo.logs.tracing import make_tracer
from greenmongo.operations.base import Operation
from greenmongo.operations.cursor_state import CursorState, KillCursorsOperation
from greenmongo.options.client_options import ClientOptions
from greenmongo.options.read_preferences import ServerMode
from greenmongo.pool.model import address_text
from greenmongo.sdam.address import Address
from greenmongo.topology.topology import Topology, abandon
from greenmongo.wire import compression

_LIVE_CORES: "weakref.WeakSet[ClientCore]" = weakref.WeakSet()
#: Kills queued for servers that are down are kept, up to this many.
MAX_PENDING_KILLS = 1000


class ClientCore:
    """Topology + executor + server sessions + cluster clock + kill queue + the fork/thread guard."""

    def __init__(self, options: ClientOptions) -> None:
        self.options = options
        compression.preload(options.compressors)
        #: OpenTelemetry spans (``logs/tracing.py``); None when this client does not trace.
        self.tracer = make_tracer(options.tracing)
        self._hub = current_hub()
        self._pid = process_id()
        self.closed = False
        self._pending_kills: deque[tuple[Address, str, int]] = deque()
        #: Pinned cursors abandoned without I/O (load-balanced mode): (their killCursors or None, the pin).
        self._pending_pins: deque[tuple[Optional[KillCursorsOperation], Any]] = deque()
        self.server_sessions = ServerSessionPool()
        self.clock = ClusterClock()
        self._encrypter: Optional[AutoEncryption] = None
        self._new_topology()
        _LIVE_CORES.add(self)

    def _new_topology(self) -> None:
        """A topology (not opened yet) and the executor that runs operations on it."""
        self.topology = Topology.from_options(self.options)
        options = self.options
        self.executor = Executor(self.topology, options.event_listeners, retry_reads=options.retry_reads,
                                 retry_writes=options.retry_writes, sessions=self, clock=self.clock,
                                 max_adaptive_retries=options.max_adaptive_retries,
                                 enable_overload_retargeting=bool(options.enable_overload_retargeting),
                                 tracer=self.tracer)
        self.executor.encrypter = self._encrypter

    # -- the guard every operation passes ---------------------------------------------------

    def check_usable(self, session: Optional[SessionState] = None, deadline: Deadline = LEGACY) -> None:
        """Wrong thread, closed client, fork, a foreign or ended session; then send queued kills (within
        the caller's ``deadline``: its operation must not wait past its timeoutMS on their behalf)."""
        if not on_hub(self._hub):
            raise InvalidOperation(
                "this MongoClient belongs to the gevent hub of the thread that created it and cannot be "
                "used from another OS thread; create one client per thread (greenlets may share one)")
        if self._pid != process_id():  # (no system call per operation)
            self.after_fork()
        if self.closed:
            raise InvalidOperation("Cannot use MongoClient after close")
        if session is not None:
            if session.source is not self:
                raise InvalidOperation("Can only use session with the MongoClient that started it")
            session.check_not_ended()
        if self._pending_kills or self._pending_pins:
            self._flush_kills(deadline)

    def execute(self, operation: Operation[Any], *, session: Optional[SessionState] = None,
                address: Optional[Address] = None, read_preference: Optional[ServerMode] = None,
                deadline: Deadline = LEGACY) -> Any:
        """Check the client is usable, then run ``operation`` (see ``Executor.execute``)."""
        self.check_usable(session, deadline)
        return self.executor.execute(operation, address=address, read_preference=read_preference, session=session,
                                     deadline=deadline)

    @property
    def encrypter(self) -> Optional[AutoEncryption]:
        """Automatic encryption (``crypt.auto.AutoEncrypter``), set by a MongoClient with auto_encryption_opts;
        the executor (rebuilt after a fork) always runs with this one."""
        return self._encrypter

    @encrypter.setter
    def encrypter(self, encrypter: Optional[AutoEncryption]) -> None:
        self._encrypter = self.executor.encrypter = encrypter

    def operation_span(self) -> OperationSpan:
        """``with core.operation_span():`` the commands of one driver operation (a bulk write's batches) share
        one OpenTelemetry operation span (no-op unless the client traces)."""
        return self.executor.operation_span()

    def execute_batches(self, bulk: Any, session: Optional[SessionState] = None,
                        run_batch: Optional[Callable[[Any], Any]] = None, deadline: Deadline = LEGACY) -> None:
        """A bulk write's batches, each selected and sent on its own, all within one ``deadline``."""
        self.check_usable(session, deadline)
        executor = self.executor
        executor.execute_batches(
            bulk, run_batch or (lambda batch: executor.execute(batch, session=session, deadline=deadline)), deadline)

    def get_more(self, state: CursorState, deadline: Deadline = LEGACY) -> list:
        """One getMore on the server holding the cursor, with the cursor's session (and, load balanced, on
        its pinned connection, given back once the server says the cursor is exhausted)."""
        self.check_usable(deadline=deadline)
        batch = self.executor.execute(state.get_more_operation(), address=state.address, session=state.session,
                                      deadline=deadline, pin=state.pin)
        if state.cursor_id == 0:
            release_pin(state)
        return batch

    def drain(self, state: Optional[CursorState], on_batch: Callable[[list], None],
              deadline: Deadline = LEGACY) -> None:
        """Every remaining batch of a cursor the engine opened (a client bulkWrite's results), then
        kill what is left and release its implicit session, whatever happens on the way."""
        if state is None:
            return
        try:
            while state.needs_get_more:
                on_batch(self.get_more(state, deadline))
        finally:
            kill = state.close()
            try:
                if kill is not None:
                    self.kill_cursor(kill, state, deadline.refreshed())
            finally:
                release_pin(state)
            session, state.session = state.session, None
            if session is not None and session.implicit:
                session.end()

    def kill_cursor(self, kill: KillCursorsOperation, state: CursorState, deadline: Deadline = LEGACY, *,
                    release: bool = True) -> None:
        """killCursors now, in the calling greenlet; an interruption queues it instead. A pinned cursor's
        goes over its connection (none if that connection broke: the Load Balancer spec), which is then given
        back whatever happened (unless ``release`` is False: the cursor keeps it until it is closed)."""
        pin = state.pin
        try:
            if pin is None or not pin.broken:
                self.executor.execute(kill, address=state.address, session=state.session, deadline=deadline,
                                      pin=pin)
        except Exception:
            pass  # the server reaps an abandoned cursor on its own
        except BaseException:
            if pin is None or not pin.broken:
                self.queue_kill(state.address, kill)
            release_pin(state)  # interrupted: the cursor lets go of its connection now
            raise
        if release:
            release_pin(state)

    # -- sessions ---------------------------------------------------------------------------------

    def new_session(self, *, causal_consistency: bool, snapshot: bool,
                    default_timeout: Optional[float] = None) -> SessionState:
        """An explicit session; ``default_timeout`` (seconds) is its defaultTimeoutMS, else the client's."""
        self.check_usable()
        return SessionState(self, implicit=False, causal_consistency=causal_consistency, snapshot=snapshot,
                            default_timeout=self.options.timeout if default_timeout is None else default_timeout)

    def implicit_session(self) -> SessionState:
        """Implicit sessions are never causally consistent (no afterClusterTime on getMores or resumes)."""
        return SessionState(self, implicit=True, causal_consistency=False, snapshot=False)

    def take_server_session(self) -> ServerSession:
        return self.server_sessions.get(self.topology.description.logical_session_timeout_minutes)

    def return_server_session(self, server_session: ServerSession) -> None:
        if not self.closed:
            self.server_sessions.put(server_session, self.topology.description.logical_session_timeout_minutes)

    # -- killCursors queued without I/O ---------------------------------------------------------------

    def queue_kill(self, address: Optional[Address], kill: Optional[KillCursorsOperation], pin: Any = None) -> None:
        """From a cursor's ``__del__`` or an interrupted greenlet: sent with the next operation (no I/O, no
        listener call here). A pinned cursor's ``pin`` goes too: its killCursors goes over it (unless it
        broke) and it is given back then."""
        if pin is not None:
            if self.closed:
                pin.conn.close()  # the pool is closed: nothing will reuse it (no listener call from here)
                return
            self._pending_pins.append((kill, pin))
            return
        if address is None or self.closed or kill is None:
            return
        namespace = f"{kill.dbname}.{kill.collection}"
        for cursor_id in kill.cursor_ids:
            if not cursor_id:
                continue
            if len(self._pending_kills) >= MAX_PENDING_KILLS:
                self._pending_kills.popleft()  # a server long gone: it reaps its cursors itself
            self._pending_kills.append((address, namespace, cursor_id))

    def queue_release(self, pin: Any) -> None:
        """A pinned connection whose owner was dropped (a session garbage collected mid-transaction): given
        back with the next operation (no I/O, no listener call here)."""
        self.queue_kill(None, None, pin)

    def _flush_kills(self, deadline: Deadline = LEGACY) -> None:
        """Send queued kills to servers that are known now; keep the others for later, never wait.

        Under the caller's timeoutMS they share its ``deadline``; those it leaves no time for stay queued.
        Pinned cursors' kills go first, each over its own connection, which is given back whatever happens.
        """
        while self._pending_pins:
            kill, pin = self._pending_pins.popleft()
            try:
                if kill is not None and not pin.broken and not deadline.expired():
                    self.executor.execute(kill, address=pin.server.address, deadline=deadline, pin=pin)
            except Exception:
                pass  # the server reaps an abandoned cursor on its own
            finally:
                pin.release()
        waiting = []
        while self._pending_kills:
            if deadline.expired():
                break  # the caller's time is up: the rest goes out with a later operation
            address, namespace, cursor_id = self._pending_kills.popleft()
            known = self.topology.description.server_descriptions().get(address)
            if known is None:
                continue  # no longer part of the deployment
            if not known.is_server_type_known:
                waiting.append((address, namespace, cursor_id))
                continue
            dbname, _, collection = namespace.partition(".")
            try:
                self.executor.execute(KillCursorsOperation(dbname, collection, [cursor_id]), address=address,
                                      deadline=deadline)
            except Exception as exc:
                if getattr(exc, "timeout", False) and deadline.csot:
                    waiting.append((address, namespace, cursor_id))  # out of the caller's time: later
                # otherwise let it go: the server reaps abandoned cursors itself after 10 minutes
        self._pending_kills.extend(waiting)

    @property
    def pending_kills(self) -> int:
        """How many killCursors (and pinned connections) wait for a later operation (observability, tests)."""
        return len(self._pending_kills) + len(self._pending_pins)

    def pool_stats(self) -> dict[str, dict[str, Any]]:
        """Per server ("host:port"): its pool's size, in_use (and by cursors, transactions), available,
        pending, waiters, longest_wait (s), generation, max_pool_size, state. No I/O, no switch."""
        out: dict[str, dict[str, Any]] = {}
        for address, server in self.topology.servers().items():
            stats = server.pool.stats()
            out[address_text(address)] = {
                "size": stats.total, "in_use": stats.in_use, "available": stats.available,
                "pending": stats.pending, "waiters": stats.waiters, "generation": stats.generation,
                "max_pool_size": stats.max_pool_size, "in_use_by_cursors": stats.in_use_by_cursors,
                "in_use_by_transactions": stats.in_use_by_transactions, "longest_wait": stats.longest_wait,
                "state": stats.state,
            }
        return out

    def pool_holders(self, limit: Optional[int] = None) -> list[dict[str, Any]]:
        """Checked-out connections of every pool with who holds them, longest held first (pool debug mode)."""
        found = [info for server in self.topology.servers().values() for info in server.pool.holders(limit)]
        found.sort(key=lambda info: info["held_for"], reverse=True)
        return found if limit is None else found[:limit]

    # -- lifecycle ----------------------------------------------------------------------------------

    def open(self) -> None:
        self.topology.open()

    def close(self) -> None:
        """Stop every monitor and pool greenlet and close every connection; idempotent."""
        if self.closed:
            return
        self.closed = True
        _LIVE_CORES.discard(self)
        if on_hub(self._hub):
            self._flush_kills()
        self.topology.close()
        if self._encrypter is not None:
            self._encrypter.close()

    def after_fork(self) -> None:
        """In a forked child: drop the parent's monitors, pools and sockets; reconnect on first use.

        Nothing inherited is used again (a child reading a socket the parent also reads would steal
        its replies); the new topology opens lazily, at the child's first server selection.
        """
        self._pid = process_id()
        self._pending_kills.clear()
        self._pending_pins.clear()  # the parent's connections: the child's pools never see them
        self.server_sessions.clear()  # the parent's server sessions stay the parent's
        old = self.topology
        self._new_topology()
        abandon(old)  # stop the inherited greenlets without blocking; the pools' fork hooks drop sockets

    @property
    def forked(self) -> bool:
        return self._pid != process_id()

    @property
    def owned_by_this_thread(self) -> bool:
        return on_hub(self._hub)


def release_pin(state: CursorState) -> None:
    """Give a cursor's pinned connection back (synchronous, no I/O); nothing if it has none."""
    pin, state.pin = state.pin, None
    if pin is not None:
        pin.release()


def _forget_parents_clients() -> None:
    for core in list(_LIVE_CORES):
        if core.forked:
            core.after_fork()


os.register_at_fork(after_in_child=_forget_parents_clients)


def _close_all(cores: Iterable[ClientCore]) -> None:
    """At interpreter exit: close what is still open, quietly (the hub may already be gone)."""
    for core in list(cores):
        if core.forked or not core.owned_by_this_thread:
            continue
        try:
            core.close()
        except Exception:
            pass


atexit.register(lambda: _close_all(_LIVE_CORES))
