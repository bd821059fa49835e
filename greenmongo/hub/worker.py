"""One background greenlet's lifecycle: what every monitor, poller and pool maintainer shares.

A worker is a greenlet that sleeps almost all of its life and must never be the
reason an application cannot exit. So:

* its sleeps (:meth:`BackgroundWorker.sleep`) use unreferenced timers, woken early
  by :meth:`~BackgroundWorker.wake` (and always by :meth:`~BackgroundWorker.stop`);
* the I/O it wants to be able to abandon runs inside ``with self.interruptible():``,
  and :meth:`~BackgroundWorker.stop` throws :class:`WorkerStopped` into it only while
  it is still there (delivered from the hub, see :class:`~greenmongo.hub.waiting.Interruptible`);
  anywhere else, stop only wakes it and it ends at its next check of ``stopped``;
* what it serves (a topology, a pool) it should hold by weak reference, so that
  object can be collected and its finalizer stop the worker.

Subclasses implement :meth:`~BackgroundWorker.run` (the loop) and may override
:meth:`~BackgroundWorker.cleanup` (runs in the greenlet however it ends) and
:meth:`~BackgroundWorker.release` (runs in the stopping greenlet when the worker was not
in interruptible I/O: free what it holds now rather than when it next runs).
"""

from __future__ import annotations

from typing import Callable, Optional, Tuple

import gevent
from gevent.event import Event

from greenmongo.hub.waiting import Interrupted, Interruptible, wait_for


class WorkerStopped(Interrupted):
    """Thrown into a worker's greenlet that ``stop()`` found inside interruptible I/O."""


class BackgroundWorker:
    """start / wake / sleep / interruptible I/O / stop for one background greenlet."""

    #: The text of the WorkerStopped thrown by stop() (it may end up in an event or a log).
    stop_reason = "stopped"

    def __init__(self) -> None:
        self._wake = Event()  # wake() and stop()
        self._stopping = Event()  # stop() only
        self._stopped = False
        self._io = Interruptible()

    # -- control (any greenlet) ---------------------------------------------------------------

    @property
    def stopped(self) -> bool:
        return self._stopped

    @property
    def greenlet(self) -> Optional[gevent.Greenlet]:
        """The worker's greenlet once started (None before)."""
        return self._io.greenlet

    @property
    def greenlets(self) -> Tuple[gevent.Greenlet, ...]:
        """Every greenlet the worker runs (subclasses with helpers add theirs)."""
        glet = self._io.greenlet
        return (glet,) if glet is not None else ()

    def start(self) -> None:
        """Spawn the greenlet (once; never after stop())."""
        if self._io.greenlet is None and not self._stopped:
            self._io.greenlet = gevent.spawn(self._main)

    def wake(self) -> None:
        """End the current (or the next) wakeable sleep early. Never switches."""
        self._wake.set()

    def stop(self) -> None:
        """End the worker promptly; non-blocking and idempotent. Interrupts its interruptible I/O."""
        if self._stopped:
            return
        self._stopped = True
        self._stopping.set()
        self._wake.set()
        if not self.interrupt(self._stop_error):
            self.release()

    def interrupt(self, make_error: Callable[[], BaseException]) -> bool:
        """Throw ``make_error()`` into the greenlet if it is (still, at delivery) in interruptible I/O."""
        return self._io.interrupt(make_error)

    def _stop_error(self) -> BaseException:
        return WorkerStopped(self.stop_reason)

    # -- inside the greenlet -------------------------------------------------------------------

    def interruptible(self) -> Interruptible:
        """``with self.interruptible():`` - the span stop() (and :meth:`interrupt`) may throw into."""
        return self._io

    def sleep(self, timeout: Optional[float], *, wakeable: bool = True) -> bool:
        """Wait up to ``timeout`` seconds (None: until woken) without pinning the hub.

        A wakeable sleep ends at wake() or stop() and consumes the wake-up (a wake()
        made while the worker was busy ends its next sleep at once); otherwise only
        stop() ends it early. Returns True if it was ended early.
        """
        if not wakeable:
            return wait_for(self._stopping, timeout)
        woken = wait_for(self._wake, timeout)
        self._wake.clear()
        return woken

    def _main(self) -> None:
        try:
            self.run()
        except (WorkerStopped, gevent.GreenletExit):
            pass
        finally:
            self.cleanup()

    def run(self) -> None:
        """The worker's loop; return (or let stop() interrupt it) to end."""
        raise NotImplementedError

    def cleanup(self) -> None:
        """Runs in the worker's greenlet when it ends, however it ends."""

    def release(self) -> None:
        """Runs in the stopping greenlet when stop() could not interrupt the worker's I/O."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__}{' stopped' if self._stopped else ''}>"


__all__ = ["BackgroundWorker", "WorkerStopped"]
