"""Every wait greenmongo does on the gevent hub outside socket I/O, in one place.

Backoff sleeps, the hub-ownership check clients use to refuse other OS threads, deadline-bounded
calls, the pool's bounded wait-queue wait, and the waits and interruptions of background
greenlets that never pin the hub (:mod:`greenmongo.hub.worker` builds its workers on them).

A monitor waits almost all of its life: for the next heartbeat, for an
awaitable hello, for a request to check. If those waits used gevent's usual
referenced timers and socket watchers, an open topology would keep
``gevent.get_hub().join()`` (``gevent.wait()``) from ever returning. Here
every background wait uses an *unreferenced* timer, and the sockets of monitoring
connections get unreferenced watchers, so background work never counts as
"something to wait for" - whether or not the topology is ever closed. Waits an
application greenlet makes (a checkout in the wait queue) keep ordinary timers:
the caller is waiting for them.

Interruptions (cancel a check, stop a worker, cancel a pool's connection
establishment) are thrown into the target greenlet from the hub, and only if at
delivery time it is still inside the I/O we meant to interrupt: the same mechanism
``gevent.Timeout`` uses. :class:`Interruptible` is that mechanism; everything that
interrupts a greenlet uses it.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, TypeVar

import gevent
from gevent.event import Event
from gevent.lock import Semaphore
from gevent.hub import Waiter, _get_hub, get_hub
from gevent.timeout import Timeout

from greenmongo.errors import NetworkTimeout

T = TypeVar("T")

_EXPIRED: Any = object()


def sleep(seconds: float) -> None:
    """A cooperative sleep (retry backoff): other greenlets run meanwhile."""
    gevent.sleep(seconds)


def new_lock() -> Semaphore:
    """A lock that makes greenlets wait their turn (a gevent Semaphore: never blocks the hub)."""
    return Semaphore(1)


def current_hub() -> Any:
    """The calling OS thread's hub (created if it has none): what a new client binds to."""
    return get_hub()


def on_hub(hub: Any) -> bool:
    """True when the caller runs on ``hub``'s OS thread; never creates a hub for a foreign thread."""
    return _get_hub() is hub


def _within(seconds: float, ref: bool, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``function(*args, **kwargs)`` under a gevent Timeout; ``_EXPIRED`` if ours fired (others propagate)."""
    timer = Timeout(seconds, ref=ref)
    timer.start()
    try:
        return function(*args, **kwargs)
    except Timeout as exc:
        if exc is not timer:
            raise
        return _EXPIRED
    finally:
        timer.close()
        del timer  # an expired timer's traceback holds this frame: no reference cycle through its locals


def wait_for(event: Event, timeout: Optional[float]) -> bool:
    """``event.wait(timeout)`` whose timer does not keep the hub alive; True if the event is set.

    For background greenlets only: in a greenlet the application joins, an
    unreferenced wait alone is a LoopExit.
    """
    if event.is_set():
        return True
    if timeout is None:
        return bool(event.wait())
    if timeout <= 0:
        return False
    return _within(timeout, False, event.wait) is not _EXPIRED


def wait_woken(waiter: Waiter, timeout: Optional[float]) -> bool:
    """``waiter.get()`` bounded by an ordinary timer (the caller is waiting); False once it expired.

    A wake-up that comes after the expiry is stored in the Waiter and
    harmlessly forgotten; the caller decides from its own state whether it was
    served anyway (in the same loop turn as the expiry).
    """
    if timeout is None:
        waiter.get()
        return True
    return _within(max(timeout, 0.0), True, waiter.get) is not _EXPIRED


def call_with_deadline(seconds: Optional[float], what: str, function: Callable[..., T], *args: Any,
                       **kwargs: Any) -> T:
    """Run ``function`` under an unreferenced timeout; expiry becomes NetworkTimeout.

    The function must be connection I/O that closes its connection when
    interrupted (greenmongo's Connection does), so nothing half-read remains.
    """
    if seconds is None:
        return function(*args, **kwargs)
    result = _within(seconds, False, function, *args, **kwargs)
    if result is _EXPIRED:
        raise NetworkTimeout(f"{what}: timed out after {seconds * 1000:.1f}ms")
    return result


def detach_from_hub(conn: Any) -> None:
    """Make a monitoring connection's socket watchers unreferenced (plain and TLS alike)."""
    conn.detach_from_hub()


class Interrupted(BaseException):
    """Base of what greenmongo throws into a greenlet it interrupts.

    A BaseException so no ``except Exception`` on the way (a factory's error
    wrapping, a listener guard) can swallow it.
    """


class Interruptible:
    """Marks the span where a greenlet may be interrupted, and delivers interruptions into it.

    ``with guard:`` is the span (the guard's greenlet must be the one entering
    it); :meth:`interrupt`, from any other greenlet, throws an error into it
    from the hub - only if at delivery time it is still inside the span, so an
    interruption never lands in code that did not expect it.
    """

    __slots__ = ("greenlet", "active")

    def __init__(self, greenlet: Optional[Any] = None) -> None:
        self.greenlet: Optional[Any] = greenlet
        self.active = False  # True only while the greenlet is inside interruptible I/O

    def __enter__(self) -> "Interruptible":
        self.active = True
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.active = False

    def interrupt(self, make_error: Callable[[], BaseException]) -> bool:
        """Throw ``make_error()`` into the greenlet if it is (still, at delivery) in interruptible I/O.

        False, and nothing scheduled, when it is not in that span now (or is the caller).
        """
        glet = self.greenlet
        if glet is None or glet.dead or not self.active or glet is gevent.getcurrent():
            return False
        get_hub().loop.run_callback(self._deliver, glet, make_error)
        return True

    def _deliver(self, glet: Any, make_error: Callable[[], BaseException]) -> None:
        # Runs in the hub: the target is suspended, so this check cannot race with it.
        target = self.greenlet
        if self.active and target is not None and target is glet and not target.dead:
            target.throw(make_error())
