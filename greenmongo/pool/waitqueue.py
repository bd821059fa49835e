"""Wait-queue entries: one per checkout that could not be served at once.

The queue itself is a plain deque owned by the pool. Serving an entry is synchronous
(set ``outcome``/``value``) and its wake-up is a ``loop.run_callback``: FIFO, and never a
switch for the greenlet that serves it. A ``gevent.hub.Waiter`` is used because a wake-up
that arrives after its greenlet stopped waiting (timed out, killed) is harmlessly stored.
"""

from __future__ import annotations

from time import monotonic
from typing import Any, Optional

from gevent.hub import Waiter

WAITING = 0  # still in the queue
# What a waiter ended up with (``WaitQueueEntry.outcome``).
HANDED_CONNECTION = 1  # a connection was handed to it (already counted as in use)
HANDED_SLOT = 2  # a pending-connection slot was reserved for it
FAILED = 3  # the pool was cleared / closed under it
GONE = 4  # it left (timed out, killed) and gave back what it had


class WaitQueueEntry:
    """One checkout waiting in the queue; whoever serves it fills ``outcome``/``value`` and wakes it."""

    __slots__ = ("waiter", "outcome", "value", "reason", "since")

    def __init__(self) -> None:
        self.since = monotonic()  # when it joined the queue (the longest current wait is the head's)
        self.waiter = Waiter()
        self.outcome = WAITING
        self.value: Any = None
        self.reason: Optional[str] = None

    def wake(self) -> None:
        # Waiter.switch must run in the hub; run_callback never switches the caller.
        self.waiter.hub.loop.run_callback(self.waiter.switch, None)
