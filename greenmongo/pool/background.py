"""Background maintenance: the minPoolSize population and the perished-connection sweep.

One greenlet per pool waits on a ``gevent.event.Event`` *without* a timeout and is woken
by the pool's state changes (ready, clear, a connection leaving) and by an *unreferenced*
loop timer; neither keeps ``gevent.get_hub().join()`` or the process alive, whether or not
the pool is ever closed. The greenlet holds its pool by weak reference only, so a pool
dropped without ``close()`` is collected and its greenlet killed by a finalizer.

Population runs in short-lived greenlets (at most maxConnecting at a time); each reserves
its pending slot when it starts, so killing one that never started leaks nothing.
"""

from __future__ import annotations

import weakref
from collections import deque
from typing import TYPE_CHECKING, Any, Optional

import gevent
from gevent.event import Event
from gevent.hub import get_hub

from greenmongo.logs.pool import CONNECTION_LOGGER
from greenmongo.pool.model import PoolState

if TYPE_CHECKING:
    from greenmongo.pool.core import Pool

_DEFAULT_MAINTENANCE_INTERVAL = 10.0  # seconds between idle sweeps / minPoolSize retries


class BackgroundMaintenance:
    """Mixin of :class:`greenmongo.pool.core.Pool`: the background half of the pool."""


    def _start_maintenance(self) -> None:
        interval = self.opts.maintenance_interval
        if self._maintenance is not None or self._state == PoolState.CLOSED:
            return
        if interval is not None and interval < 0:
            return  # never run (test format: backgroundThreadIntervalMS = -1)
        self._wake = wake = Event()
        self._maintenance = glet = gevent.spawn(_maintenance_loop, weakref.ref(self), wake)
        if interval is None and (self._min_pool_size or self._max_idle):
            interval = min(self._max_idle or _DEFAULT_MAINTENANCE_INTERVAL, _DEFAULT_MAINTENANCE_INTERVAL)
        if interval:
            # Unreferenced: this timer never keeps the loop (hub.join(), the process) alive.
            self._timer = get_hub().loop.timer(interval, interval, ref=False)
            self._timer.start(wake.set)
        # If the pool is dropped without close(), stop the timer and end the greenlet.
        finalizer = weakref.finalize(self, _stop_background, self._timer, glet, wake)
        finalizer.atexit = False

    def _stop_maintenance(self) -> None:
        _stop_background(self._timer, self._maintenance, self._wake)
        self._timer = None

    def _wake_maintenance(self) -> None:
        if self._wake is not None:
            self._wake.set()

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
        perished = []
        if self._available:
            keep = deque()
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


def _maintenance_loop(pool_ref: "weakref.ref[Pool]", wake: Event) -> None:
    """The background greenlet. Waits without a timeout, so it never pins the hub."""
    while True:
        wake.wait()
        wake.clear()
        pool = pool_ref()
        if pool is None or pool._state == PoolState.CLOSED:
            return
        try:
            pool._run_maintenance()
        except Exception:
            CONNECTION_LOGGER.exception("connection pool maintenance failed for %r", pool.address)
        finally:
            pool = None


def _stop_background(timer: Any, glet: Any, wake: Optional[Event]) -> None:
    if timer is not None:
        timer.stop()
        timer.close()
    if wake is not None:
        wake.set()  # the loop sees the closed (or vanished) pool and returns
    if glet is not None and not glet.dead and glet is not gevent.getcurrent():
        glet.kill(block=False)
