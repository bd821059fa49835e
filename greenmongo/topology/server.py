"""A Server: one address's pool, monitor and operation count, and where operations report errors.

The operation executor gets a Server from ``Topology.select_server`` (its
operation count already incremented), checks a connection out with
:meth:`Server.checkout`, reports failures with :meth:`Server.handle_error`
and finally calls :meth:`Server.end_operation`. The SDAM decisions
themselves are pure (``greenmongo.sdam.errors``); the Topology applies them
under its lock so pool clears stay ordered with description changes.
"""

from __future__ import annotations

import weakref
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Optional

from greenmongo.errors import (
    ConnectionFailure,
    OperationFailure,
    PoolClearedError,
    PoolClosedError,
    WaitQueueTimeoutError,
)
from greenmongo.sdam.address import Address, format_address
from greenmongo.sdam.errors import ErrorDecision, add_backpressure_labels
from greenmongo.sdam.server_description import ServerDescription

if TYPE_CHECKING:
    from greenmongo.net.connection import Connection
    from greenmongo.pool.core import Pool

NOTHING = ErrorDecision()

#: Errors of the pool itself: never an SDAM event (CMAP: a paused pool's error must not mark Unknown).
_POOL_ERRORS = (PoolClearedError, PoolClosedError, WaitQueueTimeoutError)


class _AuthTracker:
    """Wraps an Authenticator to remember whether authentication had begun when an error came."""

    __slots__ = ("_inner", "started", "service_id")

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.started = False
        self.service_id: Any = None

    def handshake_fields(self) -> Mapping[str, Any]:
        return self._inner.handshake_fields()

    def authenticate(self, conn: Any, hello_reply: Mapping[str, Any]) -> None:
        self.started = True
        self.service_id = getattr(conn, "service_id", None)
        self._inner.authenticate(conn, hello_reply)


def pooled_connection_factory(address: Address, open_connection: Callable[..., Any],
                              make_authenticator: Optional[Callable[[], Any]]) -> Callable[..., Any]:
    """The pool's factory: connect + handshake (+ auth), labelling establishment network errors.

    A network error or timeout before authentication starts gets the
    SystemOverloadedError/RetryableError labels (client backpressure): SDAM
    then leaves the server and its pool alone. Errors during authentication
    are left unlabelled and mark the server Unknown; in load-balanced mode they carry the serviceId
    the handshake named (``_service_id``), whose connections SDAM then clears.
    """
    def factory(connection_id: int, deadline: Optional[float] = None) -> Any:
        tracker = _AuthTracker(make_authenticator()) if make_authenticator is not None else None
        try:
            return open_connection(address, authenticator=tracker, conn_id=connection_id, deadline=deadline)
        except ConnectionFailure as exc:
            if tracker is None or not tracker.started:
                add_backpressure_labels(exc)
            elif tracker.service_id is not None:
                exc._service_id = tracker.service_id  # type: ignore[attr-defined]
            raise
        except OperationFailure as exc:
            if tracker is not None and tracker.started and tracker.service_id is not None:
                exc._service_id = tracker.service_id  # type: ignore[attr-defined]
            raise

    return factory


class PinnedConnection:
    """A connection a cursor or a transaction keeps checked out between its commands (Load Balancer spec:
    every command of a cursor or transaction must reach the same service behind the load balancer).

    ``release()`` checks it back in, once; it is synchronous and sends nothing, so it is safe in
    ``finally`` blocks and in a greenlet that is being killed. The executor runs commands on ``conn``
    without checking it out again (one CMAP checkout and check-in per pin).
    """

    __slots__ = ("server", "conn", "kind", "released")

    def __init__(self, server: "Server", conn: "Connection", kind: str) -> None:
        self.server = server
        self.conn = conn
        self.kind = kind  # "cursor" or "transaction": what the pool counts it as
        self.released = False

    @property
    def broken(self) -> bool:
        """The connection was closed (a network error, an interruption mid-command): send nothing more on it."""
        return self.conn.closed

    def release(self) -> None:
        if self.released:
            return
        self.released = True
        self.server.check_in(self.conn)

    def __repr__(self) -> str:
        state = "released" if self.released else "broken" if self.broken else "held"
        return f"<PinnedConnection {self.kind} conn={getattr(self.conn, 'id', '?')} {state}>"


class Server:
    """One server of a Topology: its pool, its monitor (none in load-balanced mode) and operation count."""

    def __init__(self, address: Address, topology: Any, pool: "Pool[Connection]", monitor: Any = None) -> None:
        self.address = address
        self._topology_ref = weakref.ref(topology)
        self.pool = pool
        self.monitor = monitor
        self._operation_count = 0
        self._closed = False

    def __repr__(self) -> str:
        return f"<Server {format_address(self.address)} operations={self._operation_count}>"

    # -- state ------------------------------------------------------------------------

    @property
    def description(self) -> ServerDescription:
        """The topology's current description of this server (Unknown once it left the topology)."""
        topology = self._topology_ref()
        found = topology.description.get(self.address) if topology is not None else None
        return found if found is not None else ServerDescription(self.address)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def operation_count(self) -> int:
        """Operations selected for this server and not yet ended (Server Selection's operationCount)."""
        return self._operation_count

    def begin_operation(self) -> None:
        self._operation_count += 1

    def end_operation(self) -> None:
        """Call exactly once per successful ``select_server``, however the operation ended."""
        if self._operation_count > 0:
            self._operation_count -= 1

    # -- connections --------------------------------------------------------------------

    @contextmanager
    def checkout(self, deadline: Optional[float] = None) -> Iterator["Connection"]:
        """``with server.checkout() as conn:`` - establishment errors are reported to SDAM first.

        Pool errors (cleared, closed, wait-queue timeout) are raised as they are.
        An error the block raises while using the connection is *not* handled
        here: call :meth:`handle_error` with the connection inside the block,
        before it is checked in, so the error is judged by its generation.
        """
        conn = self.check_out(deadline)
        try:
            yield conn
        finally:
            self.pool.check_in(conn)

    def check_out(self, deadline: Optional[float] = None, use: Optional[str] = None) -> "Connection":
        """A connection from the pool (see :meth:`checkout`); the caller checks it in or pins it. ``use``
        ("cursor", "transaction", None: other) is what the pool counts it as in use for until check-in.

        A failed establishment goes to SDAM from inside the pool, before its ConnectionClosedEvent and
        ConnectionCheckOutFailedEvent (so a PoolClearedEvent comes first, as in PyMongo and the spec tests).
        """
        generation = self.pool.generation
        reported: list = []

        def on_error(exc: BaseException) -> None:
            if isinstance(exc, (ConnectionFailure, OperationFailure)) and not isinstance(exc, _POOL_ERRORS):
                reported.append(exc)
                self._establishment_failed(exc, generation)

        try:
            return self.pool.check_out(deadline, on_error, use)
        except _POOL_ERRORS:
            raise
        except (ConnectionFailure, OperationFailure) as exc:
            if not any(exc is seen for seen in reported):
                self._establishment_failed(exc, generation)
            raise
        finally:
            reported.clear()  # the error raised holds this frame in its traceback: no cycle through the list

    def _establishment_failed(self, exc: BaseException, generation: int) -> None:
        self.handle_error(exc, None, completed_handshake=False, generation=generation,
                          is_auth_error=isinstance(exc, OperationFailure),
                          service_id=getattr(exc, "_service_id", None))

    def check_in(self, conn: "Connection") -> None:
        self.pool.check_in(conn)

    def pin(self, conn: "Connection", kind: str) -> "PinnedConnection":
        """Hand a checked-out connection to a cursor or a transaction (``kind``), load-balanced mode: it
        stays checked out, counted as theirs, until the pin is released."""
        self.pool.mark_pinned(conn, kind)
        return PinnedConnection(self, conn, kind)

    def handle_error(
        self,
        error: BaseException,
        conn: Optional["Connection"] = None,
        *,
        completed_handshake: bool = True,
        reply: Optional[Mapping[str, Any]] = None,
        generation: Optional[int] = None,
        is_auth_error: bool = False,
        service_id: Any = None,
    ) -> ErrorDecision:
        """Apply SDAM's handling of an application error (mark Unknown, clear the pool, check now...).

        ``conn`` is the checked-out connection the error happened on (its
        generation, wire version and serviceId matter); None for an error
        while establishing one, with ``generation`` the pool's generation
        from before the attempt (``service_id``: the service the failed connection's handshake named,
        if it got that far; load-balanced mode).
        """
        if isinstance(error, _POOL_ERRORS):
            return NOTHING
        topology = self._topology_ref()
        if topology is None:
            return NOTHING
        max_wire_version = None
        if conn is not None:
            max_wire_version = getattr(conn, "max_wire_version", None)
            service_id = getattr(conn, "service_id", None)
            if generation is None:
                try:
                    generation = self.pool.describe(conn).generation
                except Exception:
                    generation = None
        if generation is None:
            generation = self.pool.generation
        if conn is None and service_id is not None:
            generation = self.pool.service_generation(service_id)
        return topology.handle_application_error(
            self.address, error, generation=generation, completed_handshake=completed_handshake,
            max_wire_version=max_wire_version, service_id=service_id, reply=reply, is_auth_error=is_auth_error)

    # -- monitoring -----------------------------------------------------------------------

    def request_check(self) -> None:
        if self.monitor is not None:
            self.monitor.request_check()

    def cancel_check(self) -> None:
        if self.monitor is not None:
            self.monitor.cancel_check()

    def greenlets(self) -> tuple:
        return self.monitor.greenlets if self.monitor is not None else ()

    def stop_monitoring(self) -> None:
        if self.monitor is not None:
            self.monitor.stop()

    def close(self) -> None:
        """Stop the monitor (non-blocking) and close the pool; idempotent."""
        if self._closed:
            return
        self._closed = True
        self.stop_monitoring()
        self.pool.close()
