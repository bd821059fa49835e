"""Every wait greenmongo does outside socket I/O, pools and topology greenlets, in one place.

Backoff sleeps, the hub-ownership check clients use to refuse other OS threads, deadline-bounded
calls, and waits and interruptions for background greenlets that never pin the hub.

A monitor waits almost all of its life: for the next heartbeat, for an
awaitable hello, for a request to check. If those waits used gevent's usual
referenced timers and socket watchers, an open topology would keep
``gevent.get_hub().join()`` (``gevent.wait()``) from ever returning. Here
every long wait uses an *unreferenced* timer, and the sockets of monitoring
connections get unreferenced watchers, so background work never counts as
"something to wait for" - whether or not the topology is ever closed.

Interruptions (cancel a check, stop a monitor) are thrown into the target
greenlet from the hub, and only if at delivery time it is still inside the
I/O we meant to interrupt: the same mechanism ``gevent.Timeout`` uses, and the
one ``greenmongo.pool`` uses to interrupt connection establishment.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, TypeVar

import gevent
from gevent.event import Event
from gevent.hub import _get_hub, get_hub
from gevent.timeout import Timeout

from greenmongo.errors import NetworkTimeout

T = TypeVar("T")


def sleep(seconds: float) -> None:
    """A cooperative sleep (retry backoff): other greenlets run meanwhile."""
    gevent.sleep(seconds)


def current_hub() -> Any:
    """The calling OS thread's hub (created if it has none): what a new client binds to."""
    return get_hub()


def on_hub(hub: Any) -> bool:
    """True when the caller runs on ``hub``'s OS thread; never creates a hub for a foreign thread."""
    return _get_hub() is hub


def wait_for(event: Event, timeout: Optional[float]) -> bool:
    """``event.wait(timeout)`` whose timer does not keep the hub alive; True if the event is set."""
    if event.is_set():
        return True
    if timeout is None:
        return bool(event.wait())
    if timeout <= 0:
        return False
    timer = Timeout(timeout, ref=False)
    timer.start()
    try:
        return bool(event.wait())
    except Timeout as exc:
        if exc is not timer:
            raise
        return False
    finally:
        timer.close()


def call_with_deadline(seconds: Optional[float], what: str, function: Callable[..., T], *args: Any,
                       **kwargs: Any) -> T:
    """Run ``function`` under an unreferenced timeout; expiry becomes NetworkTimeout.

    The function must be connection I/O that closes its connection when
    interrupted (greenmongo's Connection does), so nothing half-read remains.
    """
    if seconds is None:
        return function(*args, **kwargs)
    timer = Timeout(seconds, ref=False)
    timer.start()
    try:
        return function(*args, **kwargs)
    except Timeout as exc:
        if exc is not timer:
            raise
        raise NetworkTimeout(f"{what}: timed out after {seconds * 1000:.1f}ms") from None
    finally:
        timer.close()


def detach_from_hub(conn: Any) -> None:
    """Make a monitoring connection's socket watchers unreferenced (plain and TLS alike)."""
    conn.detach_from_hub()


class Interruptible:
    """Marks the span where a greenlet may be interrupted, and delivers interruptions into it."""

    __slots__ = ("greenlet", "active")

    def __init__(self) -> None:
        self.greenlet: Optional[gevent.Greenlet] = None
        self.active = False  # True only while the greenlet is inside interruptible I/O

    def interrupt(self, make_error: Callable[[], BaseException]) -> bool:
        """Throw ``make_error()`` into the greenlet if it is (still, at delivery) in interruptible I/O."""
        glet = self.greenlet
        if glet is None or glet.dead or not self.active or glet is gevent.getcurrent():
            return False
        get_hub().loop.run_callback(self._deliver, glet, make_error)
        return True

    def _deliver(self, glet: Any, make_error: Callable[[], BaseException]) -> None:
        # Runs in the hub: the target is suspended, so this check cannot race with it.
        if self.active and self.greenlet is glet and not glet.dead:
            glet.throw(make_error())
