"""The connection pool (CMAP) for one server, kill-safe by construction.

Why it is shaped this way
-------------------------
Under gevent every piece of code between two switch points runs atomically.
The pool exploits that instead of fighting it: all of its bookkeeping
(counters, the available deque, the wait queue, generations) is mutated only
in short synchronous sections that never switch, so there is no lock at all
and nothing a ``gevent.Timeout`` or ``kill()`` could interrupt half-way. The
only switch points are

* waiting in the wait queue (a ``gevent.hub.Waiter`` per waiting checkout),
* establishing a connection (the injected factory: connect, handshake, auth),
* calling event listeners and log handlers (user code that may switch).

Before each of them the pool's state is already consistent, and what a
greenlet holds across it (a reserved connecting slot, a handed-off
connection) is given back in ``finally`` / ``except BaseException``.
Listeners are only called once the state is consistent, and never while the
emitter holds something another greenlet may be waiting for - except
ConnectionCreated, which CMAP orders before the establishment its connecting
slot is for. Listener and log calls go through an ordered publisher (the
topology's, shared with its SDAM events): run at once in the emitting greenlet
when no other delivery is under way, otherwise queued behind it while the
emitter goes on - so a slow listener holds up no other checkout, and events
are never delivered out of order or two at a time.

Wait queue: a FIFO deque of waiters. Whoever frees something (a check-in, a
connection closing, an establishment finishing) serves the head of the queue
synchronously -- a checked-in connection is handed straight to the first
waiter (even one that only waits for a connecting slot), a freed slot is
reserved for it -- and schedules its wake-up with ``loop.run_callback``,
which runs in FIFO order and never switches the caller. A newcomer never
overtakes a waiter: the no-wait fast path is only taken when the queue is
empty. ``clear()`` fails every waiter at once with a retryable
``PoolClearedError``. A waiter that times out or is killed after being served
gives what it was handed back to the next waiter.

Connections and bookkeeping
---------------------------
The pool creates connections through an injected factory, ``factory(id) ->
connection``, which may block (switch) while it connects and handshakes. The
pool needs very little from a connection (:class:`PoolableConnection`):
``close()`` (non-blocking), ``closed`` and, in load-balanced mode,
``service_id`` after the handshake. Everything else -- id, generation,
last-use time, pinning -- lives in the pool's own :class:`PooledConnection`
record; ``check_out()`` returns the connection object itself and
:meth:`Pool.describe` gives its record while it is checked out. Nothing is
stamped on the connection.

Background maintenance (minPoolSize, closing perished idle connections) is a
:class:`~greenmongo.hub.worker.BackgroundWorker`: woken by the pool's own state
changes, and otherwise sleeping on an *unreferenced* timer, so it never keeps
``gevent.get_hub().join()`` (or the process) alive, closed or not. It holds
the pool only by weak reference and ends on ``close()``.

``clear(interrupt_in_use_connections=True)`` interrupts pending connections
through :class:`~greenmongo.hub.waiting.Interruptible` (one per establishment):
an internal exception thrown into the establishing greenlet from the hub, only
if at delivery time it is still inside the factory; in-use connections are
interrupted by closing them. ``close()`` kills the background's establishing
greenlets.

Layout: ``model`` (options, records, the connection Protocol), ``waitqueue`` (waiter
entries), ``core`` (the Pool), ``events`` (event and log emission), ``background``
(maintenance greenlet and minPoolSize population).
Not thread-safe: a pool belongs to one gevent hub (one OS thread).
"""

from greenmongo.pool.core import Pool
from greenmongo.pool.model import (
                                   ConnectionFactory,
                                   PoolableConnection,
                                   PoolClosedError,
                                   PooledConnection,
                                   PoolOptions,
                                   PoolState,
                                   PoolStats,
)

# PyMongo's ``pymongo.pool`` names: the connection class (greenmongo's lives in net/) and ORDERED_TYPES.
from collections import OrderedDict  # noqa: E402

from greenmongo.bson.son import SON  # noqa: E402
from greenmongo.net.connection import Connection  # noqa: E402,F401

#: Document classes whose key order PyMongo treats as meaningful.
ORDERED_TYPES = (SON, OrderedDict)

__all__ = ["Pool", "PoolOptions", "PoolStats", "PooledConnection", "PoolableConnection",
           "ConnectionFactory", "PoolClosedError", "PoolState"]
