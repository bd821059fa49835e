"""Listener calls delivered one at a time, in the order the changes behind them happened.

The SDAM logging and monitoring spec: events and log messages are published in the order their
changes are processed, and never concurrently for one topology. Listeners are user code that
may switch (or block on something the application controls), so a component must not call
them while it holds anything another greenlet could need (the topology's lock, a pool slot):
it changes its state, *queues* the calls, and releases what it holds before they run.

One :class:`OrderedPublisher` per topology (its monitors and pools share it). A publisher
delivers when nobody else is delivering - so when listeners do not switch, every call still
runs in the greenlet that caused it, before that greenlet goes on - and otherwise only queues:
whoever is delivering delivers it after what came before. A greenlet delivers only what it
queued itself (during a :meth:`~OrderedPublisher.batch`, or the one call it published); calls
queued meanwhile by others are handed to a short-lived delivery greenlet, so no greenlet is
held by other greenlets' listeners.
"""

from __future__ import annotations

import logging
import sys
from collections import deque
from contextlib import contextmanager
from typing import Any, Callable, Deque, Iterator, Tuple

import gevent

_LOGGER = logging.getLogger("greenmongo.monitoring")


class OrderedPublisher:
    """A FIFO of listener calls and a delivery token (held by at most one greenlet at a time)."""

    __slots__ = ("_queue", "_delivering", "__weakref__")

    def __init__(self) -> None:
        self._queue: Deque[Tuple[Callable[..., Any], Tuple[Any, ...]]] = deque()
        # The token. Invariant: not held => the queue is empty.
        self._delivering = False

    def publish(self, function: Callable[..., Any], *args: Any) -> None:
        """Call ``function(*args)`` in order: now, in this greenlet, unless a delivery is under way."""
        self._queue.append((function, args))
        if not self._delivering:
            self._delivering = True
            self._deliver(1)

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Queue what is published inside (e.g. under a lock) and deliver it on the way out.

        Enter it before taking the lock and leave it after releasing it: the calls run
        once the lock is free. Nested or concurrent batches only queue.
        """
        if self._delivering:
            yield
            return
        self._delivering = True
        try:
            yield
        finally:
            self._deliver(len(self._queue))

    @property
    def pending(self) -> int:
        """Calls queued and not yet delivered (diagnostics and tests)."""
        return len(self._queue)

    def _deliver(self, count: int) -> None:
        """With the token held: make ``count`` calls, then hand the rest (and the token) on."""
        queue = self._queue
        try:
            while count > 0 and queue:
                count -= 1
                function, args = queue.popleft()
                try:
                    function(*args)
                except Exception:
                    _LOGGER.exception("an event listener or log handler raised; delivery goes on")
        finally:
            if queue:  # queued by others meanwhile (or this greenlet was killed in a listener)
                gevent.spawn(self._deliver_all)
            else:
                self._delivering = False

    def _deliver_all(self) -> None:
        self._deliver(sys.maxsize)  # a delivery greenlet has nothing else to do: until the queue is empty
