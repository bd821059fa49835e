"""The Pool: checkout, check-in, clear, ready, close and the synchronous bookkeeping behind them.

See the package docstring for why there is no lock and how each switch point is made safe.
"""

from __future__ import annotations

import os
from collections import deque
from time import monotonic
from typing import Any, Callable, Deque, Dict, Generic, Iterable, List, Optional, Set, Tuple

import gevent

from greenmongo.errors import InvalidOperation, PoolClearedError, WaitQueueTimeoutError
from greenmongo.hub.publisher import OrderedPublisher
from greenmongo.hub.waiting import Interrupted, Interruptible, wait_woken
from greenmongo.logs.pool import ConnectionLogger
from greenmongo.monitoring.pool import ConnectionCheckOutFailedReason as _Failed
from greenmongo.monitoring.pool import ConnectionClosedReason as _Closed
from greenmongo.monitoring.pool import _PoolEventPublisher
from greenmongo.pool.background import BackgroundMaintenance, MaintenanceWorker
from greenmongo.pool.diagnostics import (
    TOP_HOLDERS,
    Holder,
    exhaustion_details,
    exhaustion_text,
    holder_info,
    holders_text,
)
from greenmongo.pool.events import PoolEvents
from greenmongo.bson.objectid import ObjectId
from greenmongo.pool.model import (
    ConnectionFactory,
    ConnT,
    PoolClosedError,
    PooledConnection,
    PoolOptions,
    PoolState,
    PoolStats,
    address_text,
    close_quietly,
)
from greenmongo.pool.waitqueue import FAILED, GONE, HANDED_CONNECTION, HANDED_SLOT, WAITING, WaitQueueEntry
from greenmongo.sdam.address import Address

SLOT_RESERVED: Any = object()  # what a checkout holds when it must establish a connection itself


class _Interrupted(Interrupted):
    """Thrown into a greenlet establishing a connection that ``clear(interrupt...)`` cancelled."""


_fork_epoch = 0


def _after_fork_in_child() -> None:
    global _fork_epoch
    _fork_epoch += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class Pool(PoolEvents, BackgroundMaintenance, Generic[ConnT]):
    """A CMAP connection pool for one server address. Starts paused; ``ready()`` opens it.

    Generic in the connection type its factory makes (``check_out`` returns one)."""

    def __init__(
        self,
        address: Address,
        factory: ConnectionFactory[ConnT],
        options: Optional[PoolOptions] = None,
        event_listeners: Optional[Iterable[Any]] = None,
        on_populate_error: Optional[Callable[[BaseException], None]] = None,
        publisher: Optional[OrderedPublisher] = None,
    ) -> None:
        """``on_populate_error(error)`` is the SDAM hook for a failed background (minPoolSize)
        establishment; it runs before that connection's ConnectionClosedEvent. ``publisher``
        delivers the pool's listener and log calls (a topology passes its own, so they stay in
        order with its SDAM events and never run under its lock)."""
        self.address = address
        self.opts = opts = options or PoolOptions()
        self._factory = factory
        self._on_populate_error = on_populate_error
        self._max_pool_size = opts.max_pool_size
        self._min_pool_size = opts.min_pool_size
        self._max_connecting = opts.max_connecting
        self._max_idle = opts.max_idle_time
        self._load_balanced = opts.load_balanced
        self._debug = opts.debug
        self._publisher = _PoolEventPublisher(address, event_listeners)
        self._publish = bool(self._publisher)
        self._out = (publisher or OrderedPublisher()).publish
        self._log = ConnectionLogger(address)

        self._state = PoolState.PAUSED
        self._generation = 0
        self._service_generations: Dict[ObjectId, List[int]] = {}  # service_id -> [generation, connections]
        self._next_id = 1
        self._total = 0  # pending + available + in use (and handed to a waiter)
        self._pending = 0  # being established (slots reserved included)
        self._pending_for_pool = 0  # of which by the background: each will serve a waiter
        self._available: Deque[PooledConnection] = deque()  # most recently used on the right
        self._in_use: Dict[int, PooledConnection] = {}  # id(conn) -> record
        self._waiters: Deque[WaitQueueEntry] = deque()
        self._establishing: Dict[PooledConnection, Interruptible] = {}  # record -> its establishment
        self._clear_cause: Optional[str] = None  # text only: the error itself would keep its frames alive
        self._uses = {"cursor": 0, "transaction": 0}  # in-use connections by what they are in use for
        self._fork_epoch = _fork_epoch

        # Background maintenance: created on the first ready().
        self._populating_enabled = False
        self._background: Optional[MaintenanceWorker] = None
        self._populators: Set[gevent.Greenlet] = set()  # greenlets establishing for minPoolSize
        self._populators_starting: Set[gevent.Greenlet] = set()  # spawned, not yet counted as pending

        if self._publish:
            self._out(self._publisher.pool_created, opts.non_default_options)
        if self._log.enabled():
            self._out(self._log.pool_created, opts.non_default_options)

    # -- public API -----------------------------------------------------------

    @property
    def state(self) -> str:
        return self._state

    @property
    def generation(self) -> int:
        return self._generation

    @property
    def closed(self) -> bool:
        return self._state == PoolState.CLOSED

    def stats(self) -> PoolStats:
        """The counters now: synchronous, no allocation beyond the snapshot (cheap to poll)."""
        return PoolStats(state=self._state, generation=self._generation, total=self._total,
                         available=len(self._available), pending=self._pending,
                         in_use=len(self._in_use), waiters=len(self._waiters),
                         establishing=len(self._establishing),
                         populators=len(self._populators) + len(self._populators_starting),
                         max_pool_size=self._max_pool_size, in_use_by_cursors=self._uses["cursor"],
                         in_use_by_transactions=self._uses["transaction"], longest_wait=self._longest_wait())

    def holders(self, limit: Optional[int] = None) -> List[Dict[str, Any]]:
        """Checked-out connections with who holds them, longest held first (pool debug mode; [] when off):
        each a dict of address, connection_id, use, greenlet, greenlet_alive, held_for (s), api, stack."""
        now = monotonic()
        held = sorted((record for record in self._in_use.values() if record.holder is not None),
                      key=lambda record: record.holder.since)
        if limit is not None:
            held = held[:limit]
        return [holder_info(record, self.address, now) for record in held]

    def describe(self, conn: ConnT) -> PooledConnection:
        """The pool's record of a checked-out connection (id, generation, service_id, use, holder)."""
        record = self._in_use.get(id(conn))
        if record is None or record.conn is not conn:
            raise InvalidOperation("connection is not checked out from this pool")
        return record

    def stale(self, generation: int, service_id: Optional[ObjectId] = None) -> bool:
        """True if a connection of ``generation`` (for ``service_id``) predates a clear."""
        if self._load_balanced and service_id is not None:
            entry = self._service_generations.get(service_id)
            return entry is not None and generation != entry[0]
        return generation != self._generation

    def service_generation(self, service_id: ObjectId) -> int:
        """The current generation of ``service_id``'s connections (load-balanced mode; 0 for a new service)."""
        entry = self._service_generations.get(service_id)
        return entry[0] if entry is not None else 0

    def mark_pinned(self, conn: ConnT, kind: Optional[str]) -> None:
        """Record that a cursor or transaction owns ``conn`` (load-balanced mode), or no longer does."""
        self._set_use(self.describe(conn), kind)

    def _set_use(self, record: PooledConnection, use: Optional[str]) -> None:
        if record.use:
            self._uses[record.use] -= 1
        record.use = use
        if use:
            self._uses[use] = self._uses.get(use, 0) + 1

    def checkout(self, deadline: Optional[float] = None) -> "_Checkout[ConnT]":
        """``with pool.checkout() as conn:`` -- checks the connection back in however the block ends."""
        return _Checkout(self, deadline)

    def check_out(self, deadline: Optional[float] = None,
                  on_error: Optional[Callable[[BaseException], None]] = None, use: Optional[str] = None) -> ConnT:
        """A ready connection, in wait-queue order.

        ``deadline`` (``time.monotonic()`` based: what an operation's timeoutMS leaves for selection and
        checkout) replaces waitQueueTimeoutMS for the wait and also bounds establishing a connection
        for this checkout (the factory gets it); without one, waitQueueTimeoutMS bounds the wait.
        Raises WaitQueueTimeoutError, PoolClearedError (retryable), PoolClosedError,
        or the factory's error; ``on_error(error)`` (SDAM's handling) runs first, before the failed
        connection's ConnectionClosedEvent and the ConnectionCheckOutFailedEvent, as in PyMongo.
        ``use`` ("cursor", "transaction" or None) is what the connection is counted as in use for.
        """
        if self._fork_epoch != _fork_epoch:
            self._reset_after_fork()
        instrumented = self._publish or self._log.enabled()
        started = monotonic() if instrumented else 0.0
        if instrumented:
            self._event_checkout_started()
        record = self._acquire(deadline, started, instrumented, on_error)
        if use:
            self._set_use(record, use)
        if self._debug:
            record.holder = Holder.capture()
        if instrumented:
            try:
                self._event_checked_out(record.id, monotonic() - started)
            except BaseException:
                self.check_in(record.conn)
                raise
        conn: ConnT = record.conn
        return conn

    def check_in(self, conn: ConnT) -> None:
        """Return a checked-out connection; closes it if perished or if the pool is closed."""
        record = self._in_use.pop(id(conn), None)
        if record is None:
            raise InvalidOperation("connection was not checked out from this pool")
        if record.use:
            self._uses[record.use] -= 1
            record.use = None
        record.holder = None
        reason = self._keep_or_close(record)
        if self._publish or self._log.enabled():
            try:
                self._event_checked_in(record.id)
            finally:
                if reason is not None:
                    self._event_closed(record.id, reason)

    def ready(self) -> None:
        """paused -> ready: checkouts and background population may proceed."""
        if self._state != PoolState.PAUSED:
            return
        self._state = PoolState.READY
        try:
            if self._publish:
                self._out(self._publisher.pool_ready)
            if self._log.enabled():
                self._out(self._log.pool_ready)
        finally:
            # Only now may the background create connections: nobody can observe
            # its work before the PoolReadyEvent.
            self._populating_enabled = True
            self._start_maintenance()
            self._dispatch_slots()
            self._wake_maintenance()

    def clear(self, interrupt_in_use_connections: bool = False, service_id: Optional[ObjectId] = None,
              cause: Optional[BaseException] = None) -> None:
        """Mark every current connection stale; pause the pool and fail its waiters.

        Load-balanced pools bump the generation of ``service_id`` (all services if None)
        and neither pause nor fail waiters. ``interrupt_in_use_connections`` also closes
        in-use connections and cancels pending establishments of the old generation(s).
        ``cause`` (the error that triggered the clear) goes into PoolClearedError messages.
        """
        if self._state == PoolState.CLOSED:
            return
        old_generation = self._generation
        announce = True
        if self._load_balanced:
            if service_id is None:
                self._generation += 1
                for entry in self._service_generations.values():
                    entry[0] += 1
            else:
                found = self._service_generations.get(service_id)
                if found is not None:
                    found[0] += 1
        else:
            self._generation += 1
            announce = self._state != PoolState.PAUSED
            self._state = PoolState.PAUSED
            self._populating_enabled = False
            self._clear_cause = None if cause is None else str(cause)
            self._fail_waiters(_Failed.CONN_ERROR, self._cleared_error)
        if interrupt_in_use_connections:
            self._interrupt(old_generation, service_id)
        self._wake_maintenance()  # close perished available connections promptly
        if announce:
            if self._publish:
                self._out(self._publisher.pool_cleared, service_id, interrupt_in_use_connections)
            if self._log.enabled():
                self._out(self._log.pool_cleared, service_id)

    def close(self) -> None:
        """Close available connections, fail waiters, stop the background; for good."""
        if self._state == PoolState.CLOSED:
            return
        self._state = PoolState.CLOSED
        self._populating_enabled = False
        records = list(self._available)
        self._available.clear()
        for record in records:
            self._forget(record)
        self._fail_waiters(_Failed.POOL_CLOSED, self._closed_error)
        for glet in list(self._populators) + list(self._populators_starting):
            glet.kill(block=False)
        self._populators_starting.clear()  # killed before starting: they never reserve anything
        self._stop_maintenance()
        for record in records:
            close_quietly(record.conn)
        try:
            for record in records:
                self._event_closed(record.id, _Closed.POOL_CLOSED)
        finally:
            if self._publish:
                self._out(self._publisher.pool_closed)
            if self._log.enabled():
                self._out(self._log.pool_closed)

    def __repr__(self) -> str:
        return f"<Pool {self.address!r} {self._state} total={self._total} in_use={len(self._in_use)}>"

    # -- checkout internals -------------------------------------------------------

    def _acquire(self, deadline: Optional[float], started: float, instrumented: bool,
                 on_error: Optional[Callable[[BaseException], None]] = None) -> PooledConnection:
        got: Any = None  # a record, SLOT_RESERVED, or None
        while True:
            if self._state != PoolState.READY:
                raise self._fail_checkout_not_ready(started)
            got = None
            perished: List[Tuple[PooledConnection, str]] = []
            if not self._waiters:
                # Fast path: nobody queued ahead of us, so we may take without waiting.
                available = self._available
                while available:
                    record = available.pop()
                    reason = self._perished_reason(record)
                    if reason is None:
                        self._in_use[id(record.conn)] = record
                        got = record
                        break
                    self._forget(record)
                    perished.append((record, reason))
                # A connecting slot is reserved only when no listener call is due first: the
                # ConnectionClosed events of perished connections never run while we hold one.
                if got is None and not perished and self._can_create() and not self._pending_for_pool:
                    self._pending += 1
                    self._total += 1
                    got = SLOT_RESERVED
            if perished:
                try:
                    self._close_perished(perished)
                except BaseException:
                    self._give_back(got)
                    raise
                if got is None:
                    continue  # the listeners may have switched: look again from the start
            break
        if got is None:
            got = self._wait(deadline, started)
        if got is SLOT_RESERVED:
            return self._establish_for_checkout(started, deadline, on_error)
        checked_out: PooledConnection = got
        return checked_out

    def _wait(self, deadline: Optional[float], started: float) -> Any:
        """Queue up; returns a record (already in use) or SLOT_RESERVED. Kill-safe at the one switch."""
        timeout = self.opts.wait_queue_timeout if deadline is None else deadline - monotonic()
        entry = WaitQueueEntry()
        self._waiters.append(entry)
        try:
            woken = wait_woken(entry.waiter, timeout)
        except BaseException as exc:
            self._abandon(entry)
            self._fail_checkout_quietly(exc, started)
            raise
        # Timed out unless served in the same loop turn as the timer fired (then keep what we got).
        if not woken and entry.outcome not in (HANDED_CONNECTION, HANDED_SLOT, FAILED):
            self._abandon(entry)
            raise self._timed_out(started, entry, deadline)
        if entry.outcome == HANDED_SLOT and deadline is not None and monotonic() >= deadline:
            # Handed a connecting slot after the operation's deadline (its timer had not run yet): there is no
            # time to connect, so the slot goes to the next waiter and this checkout timed out in the queue.
            self._abandon(entry)
            raise self._timed_out(started, entry, deadline)
        if entry.outcome == FAILED:
            entry.outcome = GONE
            # Taken off the entry: the error's traceback holds this frame, and through it the entry.
            error, entry.value = entry.value, None
            try:
                raise self._fail_checkout(entry.reason or _Failed.CONN_ERROR, started, error)
            finally:
                del error
        if self._state != PoolState.READY:
            # Served, then the pool was cleared or closed before we ran: give it back.
            self._abandon(entry)
            raise self._fail_checkout_not_ready(started)
        got = entry.value if entry.outcome == HANDED_CONNECTION else SLOT_RESERVED
        entry.outcome = GONE
        entry.value = None
        return got

    def _abandon(self, entry: WaitQueueEntry) -> None:
        """Synchronously undo whatever ``entry`` holds; it leaves the queue for good."""
        outcome, entry.outcome = entry.outcome, GONE
        record, entry.value = entry.value, None
        if outcome == WAITING:
            try:
                self._waiters.remove(entry)
            except ValueError:
                pass
        elif outcome == HANDED_CONNECTION:
            self._give_back(record)
        elif outcome == HANDED_SLOT:
            self._release_slot()

    def _give_back(self, got: Any) -> None:
        """Return, without events, a record or slot a checkout obtained but never handed out."""
        if got is SLOT_RESERVED:
            self._release_slot()
        elif got is not None:
            if self._in_use.pop(id(got.conn), None) is None:
                return
            if got.use:
                self._uses[got.use] -= 1
                got.use = None
            got.holder = None
            reason = self._return_reason(got)
            if reason is None:
                self._hand_off(got)
            else:
                self._forget(got)
                close_quietly(got.conn)
                self._event_closed_quietly(got.id, reason)

    def _establish_for_checkout(self, started: float, deadline: Optional[float] = None,
                                on_error: Optional[Callable[[BaseException], None]] = None) -> PooledConnection:
        record = self._new_record()
        try:
            conn = self._establish(record, on_error, deadline)
        except BaseException as exc:
            self._fail_checkout_quietly(exc, started, establishing=True)
            raise
        # Established: free the connecting slot before any listener runs.
        self._pending -= 1
        self._in_use[id(conn)] = record
        self._dispatch_slots()
        try:
            self._event_ready(record)
        except BaseException as exc:
            self._give_back(record)
            self._fail_checkout_quietly(exc, started, establishing=True)
            raise
        return record

    def _establish(self, record: PooledConnection, on_error: Optional[Callable[[BaseException], None]],
                   deadline: Optional[float] = None) -> Any:
        """Run the factory for a reserved pending slot.

        On success the slot stays pending (the caller finishes it synchronously).
        On any exception the slot is released, ``on_error`` runs, ConnectionClosed is
        emitted and the exception propagates (an interruption as PoolClearedError).
        """
        establishment = self._establishing[record] = Interruptible(gevent.getcurrent())
        failure: Optional[BaseException] = None
        interrupted = False
        try:
            self._event_created(record.id)
            if record.interrupted:
                raise _Interrupted()
            with establishment:  # clear(interrupt_in_use_connections=True) may throw into the factory
                # Background population never passes a deadline: only a checkout's establishment has one.
                conn = self._factory(record.id) if deadline is None else self._factory(record.id, deadline)
            if record.interrupted:
                close_quietly(conn)
                raise _Interrupted()
            record.conn = conn
            if self._load_balanced:
                self._adopt_service(record, getattr(conn, "service_id", None))
            return conn
        except _Interrupted:
            interrupted = True
            failure = PoolClearedError(
                f"Connection to {address_text(self.address)} interrupted due to server monitor timeout")
            raise failure from None
        except BaseException as exc:
            failure = exc
            raise
        finally:
            del self._establishing[record]
            del establishment  # it holds this greenlet, whose exception's traceback holds this frame
            if failure is not None:
                self._pending -= 1
                if record.for_pool:
                    self._pending_for_pool -= 1
                self._total -= 1
                self._dispatch_slots()
                try:
                    if on_error is not None and isinstance(failure, Exception) and not interrupted:
                        on_error(failure)
                finally:
                    self._event_closed_quietly(record.id, _Closed.ERROR, failure)
                    failure = None  # its traceback holds this frame: no reference cycle through the local

    def _adopt_service(self, record: PooledConnection, service_id: Optional[ObjectId]) -> None:
        if service_id is None:
            return  # a server that sent no serviceId: tracked by the pool-wide generation
        record.service_id = service_id
        entry = self._service_generations.get(service_id)
        if entry is None:
            entry = self._service_generations[service_id] = [0, 0]
        record.generation = entry[0]
        entry[1] += 1

    # -- bookkeeping (synchronous: never switches) ----------------------------------

    def _new_record(self) -> PooledConnection:
        record = PooledConnection(self._next_id, self._generation)
        self._next_id += 1
        return record

    def _can_create(self) -> bool:
        """Room for one more pending connection (maxConnecting) and connection (maxPoolSize)."""
        return (self._pending < self._max_connecting
                and (not self._max_pool_size or self._total < self._max_pool_size))

    def _perished_reason(self, record: PooledConnection) -> Optional[str]:
        if self.stale(record.generation, record.service_id):
            return _Closed.STALE
        if self._max_idle is not None and monotonic() - record.last_used > self._max_idle:
            return _Closed.IDLE
        if record.conn.closed:
            return _Closed.ERROR
        return None

    def _return_reason(self, record: PooledConnection) -> Optional[str]:
        if self._state == PoolState.CLOSED:
            return _Closed.POOL_CLOSED
        if record.interrupted:
            return _Closed.STALE
        if record.conn.closed:  # before staleness, as PyMongo: a network error clears the pool, then comes back
            return _Closed.ERROR
        if self.stale(record.generation, record.service_id):
            return _Closed.STALE
        return None

    def _keep_or_close(self, record: PooledConnection) -> Optional[str]:
        """After use: back in service with its idle clock reset (to a waiter, else available), or out
        of the pool's count and closed. Returns the reason it was closed, None if kept; the caller
        announces it."""
        reason = self._return_reason(record)
        if reason is None:
            record.last_used = monotonic()
            self._hand_off(record)
        else:
            self._forget(record)
            close_quietly(record.conn)
        return reason

    def _hand_off(self, record: PooledConnection) -> None:
        """A usable connection: to the first waiter if any, else onto the available stack."""
        if self._waiters and self._state == PoolState.READY:
            entry = self._waiters.popleft()
            self._in_use[id(record.conn)] = record
            entry.outcome = HANDED_CONNECTION
            entry.value = record
            entry.wake()
        else:
            self._available.append(record)

    def _forget(self, record: PooledConnection) -> None:
        """A connection leaves the pool's count (the caller closes it and announces it)."""
        self._total -= 1
        if record.service_id is not None:
            entry = self._service_generations.get(record.service_id)
            if entry is not None:
                entry[1] -= 1
                if entry[1] <= 0:
                    del self._service_generations[record.service_id]
        self._dispatch_slots()

    def _release_slot(self) -> None:
        self._pending -= 1
        self._total -= 1
        self._dispatch_slots()

    def _dispatch_slots(self) -> None:
        """Reserve connecting slots for waiters at the head of the queue, in order."""
        waiters = self._waiters
        # Connections the background is establishing will each go to a waiter: only the
        # waiters beyond those need a connection of their own (so nobody starts establishing
        # one while a minPoolSize connection is about to become available).
        while (len(waiters) > self._pending_for_pool and self._state == PoolState.READY
               and self._can_create()):
            entry = waiters.popleft()
            self._pending += 1
            self._total += 1
            entry.outcome = HANDED_SLOT
            entry.wake()
        if self._min_pool_size and self._total < self._min_pool_size:
            self._wake_maintenance()

    def _fail_waiters(self, reason: str, make_error: Callable[[], BaseException]) -> None:
        waiters, self._waiters = self._waiters, deque()
        for entry in waiters:
            entry.outcome = FAILED
            entry.reason = reason
            entry.value = make_error()
            entry.wake()

    def _interrupt(self, old_generation: int, service_id: Optional[ObjectId]) -> None:
        def targeted(record: PooledConnection) -> bool:
            if self._load_balanced and service_id is not None:
                return record.service_id == service_id
            return record.generation <= old_generation

        for record in list(self._in_use.values()):
            if targeted(record):
                record.interrupted = True
                close_quietly(record.conn)
        for record, establishment in list(self._establishing.items()):
            if self._load_balanced and service_id is not None:
                continue  # its service is unknown until the handshake ends
            record.interrupted = True  # seen after the factory returns, if the throw cannot land
            establishment.interrupt(_Interrupted)

    def _reset_after_fork(self) -> None:
        """In a forked child the parent's sockets are shared: never reuse them."""
        self._fork_epoch = _fork_epoch
        self._generation += 1
        records = list(self._available)
        self._available.clear()
        for record in records:
            self._forget(record)
            close_quietly(record.conn)

    # -- errors and checkout failure events ----------------------------------------

    def _cleared_error(self) -> PoolClearedError:
        where = address_text(self.address)
        if self._clear_cause is not None:
            return PoolClearedError(f"Connection pool for {where} was cleared because another "
                                    f"operation failed with: {self._clear_cause}")
        return PoolClearedError(f"Connection pool for {where} is paused")

    def _closed_error(self) -> BaseException:
        return PoolClosedError("Attempted to check out a connection from closed connection pool")

    def _longest_wait(self, now: Optional[float] = None) -> float:
        for entry in self._waiters:  # FIFO: the first still waiting has waited longest
            if entry.outcome == WAITING:
                return (monotonic() if now is None else now) - entry.since
        return 0.0

    def exhaustion_details(self, waited: float = 0.0) -> Dict[str, Any]:
        """What a WaitQueueTimeoutError reports: in-use counts by use, available, pending, the wait queue's
        length and its longest current wait (``waited``, a checkout that just left it, counts too)."""
        return exhaustion_details(self._max_pool_size, len(self._in_use), self._uses, len(self._available),
                                  self._pending, len(self._waiters), max(waited, self._longest_wait()))

    def _timed_out(self, started: float, entry: WaitQueueEntry, deadline: Optional[float]) -> BaseException:
        """The WaitQueueTimeoutError of a checkout that left the queue, announced with the same counts."""
        waited = monotonic() - entry.since
        details = self.exhaustion_details(waited)
        message = self._timeout_message(details, waited, by_deadline=deadline is not None)
        return self._fail_checkout(_Failed.TIMEOUT, started, WaitQueueTimeoutError(message), details)

    def _timeout_message(self, details: Dict[str, Any], waited: Optional[float] = None,
                         by_deadline: bool = False) -> str:
        """PyMongo's first sentence (the Load Balancer spec's in that mode), then who holds the connections:
        by cursors, transactions, other operations; what is available or being established; the wait queue;
        in debug mode the longest holders."""
        timeout = self.opts.wait_queue_timeout
        counts = (f"connections in use by cursors: {details['inUseByCursors']}, connections in use by "
                  f"transactions: {details['inUseByTransactions']}, connections in use by other operations: "
                  f"{details['inUseByOtherOperations']}")
        if self._load_balanced:
            text = (f"Timeout waiting for connection from the connection pool. maxPoolSize: {self._max_pool_size}, "
                    f"{counts}")
        else:
            text = (f"Timed out while checking out a connection from connection pool. address: "
                    f"{address_text(self.address)}, maxPoolSize: {self._max_pool_size}, {counts}")
        text += exhaustion_text(details, waited)
        if by_deadline:  # an operation's timeoutMS (CSOT) bounded the wait, not waitQueueTimeoutMS
            text += ", bounded by the operation's timeoutMS"
        elif timeout is not None:
            text += f", waitQueueTimeoutMS: {timeout * 1000.0:g}"
        if self._debug:
            text += holders_text(self.holders(TOP_HOLDERS), len(self._in_use))
        return text


class _Checkout(Generic[ConnT]):
    """The context manager behind ``Pool.checkout()``."""

    __slots__ = ("_pool", "_deadline", "_conn")

    def __init__(self, pool: Pool[ConnT], deadline: Optional[float]) -> None:
        self._pool = pool
        self._deadline = deadline
        self._conn: Optional[ConnT] = None

    def __enter__(self) -> ConnT:
        self._conn = self._pool.check_out(self._deadline)
        return self._conn

    def __exit__(self, *exc_info: Any) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            self._pool.check_in(conn)
