"""Event and log emission for the pool, as a mixin of :class:`greenmongo.pool.core.Pool`.

Called only at points where the pool's state is already consistent: a listener or log
handler that switches, raises or is killed cannot leave a counter wrong. Every call goes
through the pool's :class:`~greenmongo.hub.publisher.OrderedPublisher` (its topology's):
delivered at once in the emitting greenlet unless a delivery is under way elsewhere, in
which case it is queued behind it and the emitter goes on.
"""

from __future__ import annotations

from time import monotonic
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from gevent.timeout import Timeout

from greenmongo.monitoring.pool import ConnectionCheckOutFailedReason as _Failed
from greenmongo.pool.model import PoolClosedError, PooledConnection, PoolState, close_quietly


class PoolEvents:
    """CheckOutFailed / Created / Ready / Closed / CheckedOut / CheckedIn emission helpers."""

    # Provided by Pool.
    _publish: bool
    _publisher: Any
    _out: Any  # OrderedPublisher.publish: listener and log calls go through it, in order
    _log: Any
    _state: str
    _closed_error: Callable[[], BaseException]
    _cleared_error: Callable[[], BaseException]
    exhaustion_details: Callable[..., Dict[str, Any]]

    def _fail_checkout_not_ready(self, started: float) -> BaseException:
        if self._state == PoolState.CLOSED:
            return self._fail_checkout(_Failed.POOL_CLOSED, started, self._closed_error())
        return self._fail_checkout(_Failed.CONN_ERROR, started, self._cleared_error())

    def _fail_checkout(self, reason: str, started: float, error: BaseException,
                       details: Optional[Mapping[str, Any]] = None) -> BaseException:
        """``details``: a timeout's exhaustion counts (``Pool.exhaustion_details``), added to its log message."""
        if self._publish or self._log.enabled():
            duration = monotonic() - started
            if self._publish:
                self._out(self._publisher.checkout_failed, reason, duration)
            if self._log.enabled():
                if reason == _Failed.TIMEOUT and details is None:
                    details = self.exhaustion_details(duration)
                self._out(self._log.checkout_failed, reason, duration,
                          error if reason == _Failed.CONN_ERROR else None, details)
        return error

    def _fail_checkout_quietly(self, exc: BaseException, started: float, establishing: bool = False) -> None:
        """CheckOutFailed for an error already propagating (never masks it with a listener's)."""
        if isinstance(exc, Timeout) and not establishing:
            reason = _Failed.TIMEOUT
        elif isinstance(exc, PoolClosedError):
            reason = _Failed.POOL_CLOSED
        else:
            reason = _Failed.CONN_ERROR
        try:
            self._fail_checkout(reason, started, exc)
        except Exception:
            pass

    # -- events (called only when the state is consistent) ------------------------

    def _event_checkout_started(self) -> None:
        if self._publish:
            self._out(self._publisher.checkout_started)
        if self._log.enabled():
            self._out(self._log.checkout_started)

    def _event_checked_out(self, connection_id: int, duration: float) -> None:
        if self._publish:
            self._out(self._publisher.checked_out, connection_id, duration)
        if self._log.enabled():
            self._out(self._log.checked_out, connection_id, duration)

    def _event_checked_in(self, connection_id: int) -> None:
        if self._publish:
            self._out(self._publisher.checked_in, connection_id)
        if self._log.enabled():
            self._out(self._log.checked_in, connection_id)

    def _event_created(self, connection_id: int) -> None:
        if self._publish:
            self._out(self._publisher.connection_created, connection_id)
        if self._log.enabled():
            self._out(self._log.connection_created, connection_id)

    def _event_ready(self, record: PooledConnection) -> None:
        if self._publish or self._log.enabled():
            duration = monotonic() - record.created_at
            if self._publish:
                self._out(self._publisher.connection_ready, record.id, duration)
            if self._log.enabled():
                self._out(self._log.connection_ready, record.id, duration)

    def _event_closed(self, connection_id: int, reason: str, error: Optional[BaseException] = None) -> None:
        if self._publish:
            self._out(self._publisher.connection_closed, connection_id, reason)
        if self._log.enabled():
            self._out(self._log.connection_closed, connection_id, reason, error)

    def _event_closed_quietly(self, connection_id: int, reason: str,
                              error: Optional[BaseException] = None) -> None:
        try:
            self._event_closed(connection_id, reason, error)
        except Exception:
            pass

    def _close_perished(self, perished: List[Tuple[PooledConnection, str]]) -> None:
        for record, _ in perished:
            close_quietly(record.conn)
        for record, reason in perished:
            self._event_closed(record.id, reason)

    # -- background maintenance -------------------------------------------------
