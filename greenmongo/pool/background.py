"""Background maintenance: the minPoolSize population and the perished-connection sweep.

One :class:`~greenmongo.hub.worker.BackgroundWorker` per pool sleeps (an unreferenced
timer every maintenance interval, none when there is nothing periodic to do) and is woken
by the pool's state changes (ready, clear, a connection leaving); nothing it does keeps
``gevent.get_hub().join()`` or the process alive, whether or not the pool is ever closed.
It holds its pool by weak reference only, so a pool dropped without ``close()`` is
collected and a finalizer stops the worker. ``close()`` stops it too, interrupting a
maintenance run in progress.

Population runs in short-lived greenlets (at most maxConnecting at a time); each reserves
its pending slot when it starts, so killing one that never started leaks nothing.
"""

from __future__ import annotations

import weakref
from collections import deque
from typing import Any, Callable, Deque, List, Optional, Set, Tuple

import gevent

from greenmongo.hub.worker import BackgroundWorker
from greenmongo.logs.pool import CONNECTION_LOGGER
from greenmongo.pool.model import PooledConnection, PoolOptions, PoolState
from greenmongo.sdam.address import Address

_DEFAULT_MAINTENANCE_INTERVAL = 10.0  # seconds between idle sweeps / minPoolSize retries


class MaintenanceWorker(BackgroundWorker):
    """The pool's background greenlet: a maintenance run per wake-up or interval."""

    stop_reason = "pool closed"

    def __init__(self, pool: "BackgroundMaintenance", interval: Optional[float]) -> None:
        super().__init__()
        self._pool_ref = weakref.ref(pool)
        self._interval = interval

    def run(self) -> None:
        while True:
            self.sleep(self._interval)
            pool = self._pool_ref()
            if self._stopped or pool is None or pool._state == PoolState.CLOSED:
                return
            try:
                with self.interruptible():  # close() may end a run (its listener calls) at once
                    pool._run_maintenance()
            except Exception:
                CONNECTION_LOGGER.exception("connection pool maintenance failed for %r", pool.address)
            finally:
                pool = None


class BackgroundMaintenance:
    """Mixin of :class:`greenmongo.pool.core.Pool`: the background half of the pool."""

    # Provided by Pool (core.py) and PoolEvents (events.py).
    address: Address
    opts: PoolOptions
    _state: str
    _min_pool_size: int
    _max_pool_size: int
    _max_connecting: int
    _max_idle: Optional[float]
    _total: int
    _pending: int
    _pending_for_pool: int
    _populating_enabled: bool
    _available: Deque[PooledConnection]
    _populators: Set[gevent.Greenlet]
    _populators_starting: Set[gevent.Greenlet]
    _on_populate_error: Optional[Callable[[BaseException], None]]
    _perished_reason: Callable[[PooledConnection], Optional[str]]
    _forget: Callable[[PooledConnection], None]
    _close_perished: Callable[[List[Tuple[PooledConnection, str]]], None]
    _new_record: Callable[[], PooledConnection]
    _establish: Callable[[PooledConnection, Optional[Callable[[BaseException], None]]], Any]
    _keep_or_close: Callable[[PooledConnection], Optional[str]]
    _dispatch_slots: Callable[[], None]
    _event_ready: Callable[[PooledConnection], None]
    _event_closed: Callable[[int, str], None]

    _background: Optional[MaintenanceWorker]

    def _start_maintenance(self) -> None:
        interval = self.opts.maintenance_interval
        if self._background is not None or self._state == PoolState.CLOSED:
            return
        if interval is not None and interval < 0:
            return  # never run (test format: backgroundThreadIntervalMS = -1)
        if interval is None and (self._min_pool_size or self._max_idle):
            interval = min(self._max_idle or _DEFAULT_MAINTENANCE_INTERVAL, _DEFAULT_MAINTENANCE_INTERVAL)
        self._background = worker = MaintenanceWorker(self, interval or None)
        worker.start()
        # If the pool is dropped without close(), end the greenlet.
        finalizer = weakref.finalize(self, worker.stop)
        finalizer.atexit = False

    def _stop_maintenance(self) -> None:
        if self._background is not None:
            self._background.stop()

    def _wake_maintenance(self) -> None:
        if self._background is not None:
            self._background.wake()

    @property
    def _maintenance(self) -> Optional[gevent.Greenlet]:
        """The maintenance greenlet (None before the first ready(), or when it never runs)."""
        return self._background.greenlet if self._background is not None else None

    def _needs_population(self) -> bool:
        upcoming = self._total + len(self._populators_starting)
        return (self._state == PoolState.READY and self._populating_enabled
                and upcoming < self._min_pool_size
                and self._pending + len(self._populators_starting) < self._max_connecting
                and (not self._max_pool_size or upcoming < self._max_pool_size))

    def _run_maintenance(self) -> None:
        """One background run: close perished available connections, then top up minPoolSize.

        Does what is possible now and returns; it never waits for a slot.
        """
        perished: List[Tuple[PooledConnection, str]] = []
        if self._available:
            keep: Deque[PooledConnection] = deque()
            for record in self._available:
                reason = self._perished_reason(record)
                if reason is None:
                    keep.append(record)
                else:
                    perished.append((record, reason))
            if perished:
                self._available = keep
                for record, _ in perished:
                    self._forget(record)
        while self._needs_population():
            glet = gevent.Greenlet(self._populate_one)
            self._populators_starting.add(glet)
            glet.start()
        if perished:
            self._close_perished(perished)

    def _populate_one(self) -> None:
        me = gevent.getcurrent()
        self._populators_starting.discard(me)
        if not self._needs_population():
            return
        record = self._new_record()
        record.for_pool = True
        self._pending += 1
        self._pending_for_pool += 1
        self._total += 1
        self._populators.add(me)
        try:
            try:
                self._establish(record, self._populate_failed)
            except BaseException:
                return  # already accounted for and announced by _establish
            # Established: make it available (or hand it to a waiter) and free the
            # connecting slot in one step, before any listener runs.
            self._pending -= 1
            self._pending_for_pool -= 1
            reason = self._keep_or_close(record)
            self._dispatch_slots()
            self._event_ready(record)
            if reason is not None:
                self._event_closed(record.id, reason)
        finally:
            self._populators.discard(me)
            if self._needs_population():
                self._wake_maintenance()

    def _populate_failed(self, error: BaseException) -> None:
        if self._on_populate_error is not None:
            self._on_populate_error(error)
