"""Client Side Operations Timeout: the deadline value, ``greenmongo.timeout()``, and which one applies.

A ``Deadline`` is a value handed down from the API call to every blocking step of the operation
(server selection, checkout, connection establishment, each send and receive), as Go's
``context.Context`` is: nothing below the executor reads a global. It is decided once per operation by
``resolve``: an enclosing ``greenmongo.timeout()`` block wins, then the timeoutMS of the collection,
database or client (or the session's default for commit, abort and with_transaction); without any,
``LEGACY``: CSOT is off and the deprecated options (socketTimeoutMS, waitQueueTimeoutMS, wTimeoutMS,
maxTimeMS, maxCommitTimeMS) keep their old meaning.

``greenmongo.timeout(seconds)`` is greenlet-local: it lives in a ContextVar, every greenlet has its own
context and a greenlet spawned inside the block does not inherit it (greenmongo's own background
greenlets, monitors and pool fillers, never run under an operation's deadline). Blocks nest; an inner
block can only shorten the deadline. It is a class, not a generator: a ``gevent.Timeout`` landing in a
generator-based context manager breaks ``ContextVar.reset`` (gevent#1930).
"""

from __future__ import annotations

import math
import time
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any, Optional

from greenmongo.errors import ExecutionTimeout, InvalidOperation

if TYPE_CHECKING:
    from greenmongo.engine.session_state import SessionState

__all__ = ["CursorTimeout", "Deadline", "LEGACY", "TimeoutMode", "TimeoutScope", "resolve", "timeout"]


class Deadline:
    """An operation's time budget: ``timeout`` seconds (0: no limit) ending at ``expires`` (monotonic).

    ``timeout is None`` is ``LEGACY``: no timeoutMS applies, so the deprecated per-step options do.
    """

    __slots__ = ("timeout", "expires")

    def __init__(self, timeout: Optional[float], expires: float) -> None:
        self.timeout = timeout
        self.expires = expires

    @classmethod
    def start(cls, timeout: float, now: Optional[float] = None) -> "Deadline":
        """A budget of ``timeout`` seconds from now (0: CSOT on, with no limit)."""
        if not timeout:
            return cls(0.0, math.inf)
        return cls(timeout, (time.monotonic() if now is None else now) + timeout)

    @property
    def csot(self) -> bool:
        """timeoutMS applies (even 0): deprecated options are ignored and retries go on until it ends."""
        return self.timeout is not None

    @property
    def finite(self) -> bool:
        return self.expires != math.inf

    def remaining(self, now: Optional[float] = None) -> Optional[float]:
        """Seconds left; None when there is no limit."""
        if self.expires == math.inf:
            return None
        return self.expires - (time.monotonic() if now is None else now)

    def expired(self, now: Optional[float] = None) -> bool:
        remaining = self.remaining(now)
        return remaining is not None and remaining <= 0

    def refreshed(self) -> "Deadline":
        """The same timeout from now (a cursor's close(), the abort after a failed with_transaction callback)."""
        if self.timeout is None:
            return self
        return Deadline.start(self.timeout)

    def selection_end(self, server_selection_timeout: float, now: Optional[float] = None) -> float:
        """Where server selection, checkout and connection establishment must end (the spec's
        computedServerSelectionTimeout): serverSelectionTimeoutMS, cut short by the deadline."""
        now = time.monotonic() if now is None else now
        return min(now + server_selection_timeout, self.expires)

    def max_time_ms(self, min_round_trip_time: float, now: Optional[float] = None) -> Optional[int]:
        """The maxTimeMS to send: what is left minus the server's minimum RTT; None without a limit.

        Raises ExecutionTimeout, before anything is sent, when that leaves nothing.
        """
        remaining = self.remaining(now)
        if remaining is None:
            return None
        budget = remaining - min_round_trip_time
        if budget <= 0:
            raise ExecutionTimeout(
                f"operation would exceed its time limit: remaining {max(remaining, 0) * 1000:.1f}ms <= "
                f"the server's round trip time {min_round_trip_time * 1000:.1f}ms ({self.describe()})", 50,
                {"ok": 0, "code": 50, "codeName": "MaxTimeMSExpired"})
        return max(int(budget * 1000), 1)

    def timeout_error(self, where: str, cause: Optional[BaseException] = None) -> ExecutionTimeout:
        """The error for a deadline found expired by the driver (not by a socket or the server)."""
        text = f"{where}: operation timed out ({self.describe()})"
        if cause is not None:
            text += f", last error: {cause}"
        return ExecutionTimeout(text, 50, {"ok": 0, "code": 50, "codeName": "MaxTimeMSExpired"})

    def describe(self) -> str:
        if self.timeout is None:
            return "no timeoutMS"
        return f"timeoutMS: {self.timeout * 1000:g}ms"

    def __repr__(self) -> str:
        return f"Deadline({self.describe()}, remaining={self.remaining()})"


#: No timeoutMS anywhere: every step keeps its own (deprecated) limit.
LEGACY = Deadline(None, math.inf)


class TimeoutScope:
    """One ``greenmongo.timeout()`` block, or with_transaction's (``owner``: its session)."""

    __slots__ = ("deadline", "outer", "owner", "user")

    def __init__(self, deadline: Deadline, outer: Optional["TimeoutScope"],
                 owner: Optional["SessionState"] = None, user: bool = False) -> None:
        self.deadline = deadline
        self.outer = outer
        self.owner = owner
        #: A ``greenmongo.timeout()`` block (not one greenmongo opened for a multi-command method).
        self.user = user

    def overridden_within(self, inner: "TimeoutScope") -> bool:
        """A user's ``timeout()`` block lies between this scope and ``inner`` (which this one encloses)."""
        scope: Optional[TimeoutScope] = inner
        overridden = False
        while scope is not None:
            if scope is self:
                return overridden
            overridden = overridden or scope.user
            scope = scope.outer
        return False


_SCOPE: ContextVar[Optional[TimeoutScope]] = ContextVar("greenmongo_timeout", default=None)


def timeout(seconds: Optional[float]) -> "TimeoutContext":
    """``with greenmongo.timeout(seconds):`` - one deadline for every operation in the block.

    PyMongo's ``pymongo.timeout`` semantics: ``seconds`` >= 0 (0: no limit; None: the block changes
    nothing); blocks nest and an inner one can only shorten the deadline. Greenlet-local: a greenlet
    spawned inside the block starts without it (give it its own ``timeout()`` if it works for you).
    """
    return TimeoutContext(seconds)


class TimeoutContext:
    """What ``timeout()`` returns: a class, not a generator, so a gevent.Timeout landing inside the
    block cannot break the ContextVar reset (gevent#1930)."""

    __slots__ = ("_seconds", "_token")

    def __init__(self, seconds: Optional[float]) -> None:
        if seconds is not None:
            if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
                raise TypeError(f"timeout must be None, an int, or a float, not {type(seconds).__name__}")
            if seconds < 0:
                raise ValueError("timeout cannot be negative")
        self._seconds = None if seconds is None else float(seconds)
        self._token: Optional[Token[Optional[TimeoutScope]]] = None

    def __enter__(self) -> "TimeoutContext":
        outer = _SCOPE.get()
        if self._seconds is not None:
            deadline = Deadline.start(self._seconds)
            if outer is not None and outer.deadline.expires < deadline.expires:
                deadline = Deadline(deadline.timeout, outer.deadline.expires)  # an inner block only shortens
            self._token = _SCOPE.set(TimeoutScope(deadline, outer, user=True))
        return self

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> None:
        token, self._token = self._token, None
        if token is not None:
            _SCOPE.reset(token)


class _Scoped:
    """Makes ``scope`` the ambient one for a block (multi-command methods, with_transaction)."""

    __slots__ = ("_scope", "_token")

    def __init__(self, scope: Optional[TimeoutScope]) -> None:
        self._scope = scope
        self._token: Optional[Token[Optional[TimeoutScope]]] = None

    def __enter__(self) -> Optional[TimeoutScope]:
        if self._scope is not None and self._scope is not _SCOPE.get():
            self._token = _SCOPE.set(self._scope)
        return self._scope

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> None:
        token, self._token = self._token, None
        if token is not None:
            _SCOPE.reset(token)


def current_scope() -> Optional[TimeoutScope]:
    return _SCOPE.get()


def scoped_to(scope: Optional[TimeoutScope]) -> _Scoped:
    """``with scoped_to(scope):`` - ``scope`` is the enclosing block inside (None: nothing changes)."""
    return _Scoped(scope)


def resolve(entity_timeout: Optional[float], session: Optional["SessionState"] = None) -> Deadline:
    return _resolve(entity_timeout, session)[0]


def _resolve(entity_timeout: Optional[float], session: Optional["SessionState"]) -> "tuple[Deadline, bool]":
    """The deadline of one operation.

    1. A session inside ``with_transaction``: the transaction's deadline; an operation-level timeout
       there is refused (the spec: the callback's operations cannot override it).
    2. The enclosing ``greenmongo.timeout()`` block (not another session's with_transaction block).
    3. ``entity_timeout``: the collection's, database's or client's timeoutMS in seconds (0: no limit).
    4. LEGACY.
    """
    scope = _SCOPE.get()
    transaction_scope = session.transaction_scope if session is not None else None
    if transaction_scope is not None:
        if scope is not None and transaction_scope.overridden_within(scope):
            raise InvalidOperation("Cannot override timeoutMS for an operation inside with_transaction: the "
                                   "transaction's timeout applies to every operation of its callback")
        return transaction_scope.deadline, True
    while scope is not None and scope.owner is not None and scope.owner is not session:
        scope = scope.outer  # another session's with_transaction deadline is not this operation's
    if scope is not None:
        return scope.deadline, True
    if entity_timeout is not None:
        return Deadline.start(entity_timeout), False
    return LEGACY, False


def scoped(deadline: Deadline, owner: Optional["SessionState"] = None) -> _Scoped:
    """``with scoped(deadline):`` - the operations inside resolve to ``deadline`` (one budget for a
    method that sends several commands). Nothing changes for LEGACY or when it is already ambient."""
    current = _SCOPE.get()
    if not deadline.csot or (current is not None and current.deadline is deadline and owner is None):
        return _Scoped(None)
    return _Scoped(TimeoutScope(deadline, current, owner))


class TimeoutMode:
    """How a cursor's timeoutMS applies (CSOT ``timeoutMode``; PyMongo has no such option).

    ``CURSOR_LIFETIME`` (the default for non-tailable cursors): the first command and every getMore
    share one deadline. ``ITERATION`` (the only mode of tailable cursors): the first command and each
    ``next()``/``try_next()``/``to_list()`` call get their own, and no maxTimeMS is sent.
    """

    CURSOR_LIFETIME = "cursorLifetime"
    ITERATION = "iteration"


class CursorTimeout:
    """A cursor's timeoutMS: its value and mode, and the deadline of each round trip the cursor makes.

    Decided when the cursor is created: an enclosing ``greenmongo.timeout()`` block (its value, and its
    deadline as a cap), else the collection's, database's or client's timeoutMS.
    """

    __slots__ = ("timeout", "requested_mode", "mode", "cap", "tailable", "await_data", "lifetime", "call")

    def __init__(self, entity_timeout: Optional[float], session: Optional["SessionState"] = None,
                 mode: Optional[str] = None) -> None:
        created, from_scope = _resolve(entity_timeout, session)
        self.timeout = created.timeout
        self.cap: Optional[Deadline] = created if from_scope and created.finite else None
        self.requested_mode = mode
        self.configure()

    @classmethod
    def legacy(cls) -> "CursorTimeout":
        """A cursor with no timeoutMS, whatever block encloses its creation."""
        return _legacy_cursor_timeout()

    def configure(self, *, tailable: bool = False, await_data: bool = False, writes: bool = False,
                  max_await_time_ms: Optional[int] = None) -> None:
        """Check the mode against what the cursor is, before anything is sent (client errors)."""
        mode = self.requested_mode
        self.tailable = tailable
        self.await_data = await_data
        if mode is not None:
            if mode not in (TimeoutMode.CURSOR_LIFETIME, TimeoutMode.ITERATION):
                raise ValueError(f"timeoutMode must be {TimeoutMode.CURSOR_LIFETIME!r} or "
                                 f"{TimeoutMode.ITERATION!r}, not {mode!r}")
            if self.timeout is None:
                raise InvalidOperation("timeoutMode needs a timeoutMS (on the operation, collection, database "
                                       "or client)")
            if tailable and mode == TimeoutMode.CURSOR_LIFETIME:
                raise InvalidOperation("tailable cursors only support timeoutMode 'iteration'")
            if writes and mode == TimeoutMode.ITERATION:
                raise InvalidOperation("timeoutMode 'iteration' is not supported for an aggregate with $out or "
                                       "$merge")
        self.mode = mode or (TimeoutMode.ITERATION if tailable else TimeoutMode.CURSOR_LIFETIME)
        if max_await_time_ms is not None and self.timeout and max_await_time_ms >= self.timeout * 1000:
            raise InvalidOperation(f"maxAwaitTimeMS ({max_await_time_ms}) must be less than timeoutMS "
                                   f"({self.timeout * 1000:g})")
        self.lifetime: Optional[Deadline] = None
        self.call: Optional[Deadline] = None

    def restarted(self) -> "CursorTimeout":
        """The same timeout for a copy of the cursor that runs its query again (``clone``, ``rewind``)."""
        copy = CursorTimeout.__new__(CursorTimeout)
        copy.timeout, copy.requested_mode, copy.cap = self.timeout, self.requested_mode, self.cap
        copy.tailable, copy.await_data, copy.mode = self.tailable, self.await_data, self.mode
        copy.lifetime = copy.call = None
        return copy

    @property
    def csot(self) -> bool:
        return self.timeout is not None

    @property
    def sends_max_time_ms(self) -> bool:
        """Whether the first command carries a maxTimeMS: a lifetime deadline, or a tailable awaitData
        cursor's first command (its getMores never do)."""
        return self.mode == TimeoutMode.CURSOR_LIFETIME or (self.tailable and self.await_data)

    def _fresh(self, capped_by_creation: bool) -> Deadline:
        """The timeout from now, cut short by the block enclosing the call (and, for the first command,
        by the block the cursor was created in)."""
        assert self.timeout is not None
        deadline = Deadline.start(self.timeout)
        for cap in (self.cap if capped_by_creation else None, _enclosing(self.cap)):
            if cap is not None and cap.expires < deadline.expires:
                deadline = Deadline(deadline.timeout, cap.expires)
        return deadline

    def first(self) -> Deadline:
        """The deadline of the command that opens the cursor (a lifetime deadline starts here)."""
        if not self.csot:
            return LEGACY
        deadline = self._fresh(True)
        if self.mode == TimeoutMode.CURSOR_LIFETIME:
            self.lifetime = deadline
        return deadline

    def for_fetch(self) -> Deadline:
        """The deadline of a getMore: the lifetime's, or the current ``next()`` call's."""
        if not self.csot:
            return LEGACY
        if self.mode == TimeoutMode.CURSOR_LIFETIME:
            if self.lifetime is None:
                self.lifetime = self._fresh(True)
            return self.lifetime
        return self.call if self.call is not None else self._fresh(False)

    def for_close(self) -> Deadline:
        """killCursors: an enclosing ``greenmongo.timeout()`` block's deadline, else the timeout afresh
        (even after a lifetime deadline expired: the cursor must still be killed)."""
        if not self.csot:
            return LEGACY
        scope = _SCOPE.get()
        if scope is not None and scope.owner is None and scope.deadline is not self.cap:
            return scope.deadline
        assert self.timeout is not None
        return Deadline.start(self.timeout)

    def iteration(self) -> "_IterationCall":
        """``with cursor_timeout.iteration():`` around one ``next()``-like call (one ITERATION deadline)."""
        return _IterationCall(self)


def _enclosing(cap: Optional[Deadline]) -> Optional[Deadline]:
    """The deadline of the enclosing ``greenmongo.timeout()`` block now, unless it is ``cap`` already."""
    scope = _SCOPE.get()
    if scope is None or scope.owner is not None or scope.deadline is cap:
        return None
    return scope.deadline


def _legacy_cursor_timeout() -> CursorTimeout:
    timeout = CursorTimeout.__new__(CursorTimeout)
    timeout.timeout = timeout.requested_mode = timeout.cap = None
    timeout.mode = TimeoutMode.CURSOR_LIFETIME
    timeout.tailable = timeout.await_data = False
    timeout.lifetime = timeout.call = None
    return timeout


class _IterationCall:
    __slots__ = ("_timeout", "_outer")

    def __init__(self, cursor_timeout: CursorTimeout) -> None:
        self._timeout = cursor_timeout
        self._outer: Optional[Deadline] = None

    def __enter__(self) -> None:
        timeout = self._timeout
        self._outer = timeout.call
        if timeout.csot and timeout.mode == TimeoutMode.ITERATION and timeout.call is None:
            timeout.call = timeout._fresh(False)

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> None:
        self._timeout.call = self._outer

