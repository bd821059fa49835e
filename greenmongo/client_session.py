"""ClientSession (Driver Sessions spec), at PyMongo's import path ``pymongo.client_session``.

Every command to a deployment that supports sessions carries an ``lsid``: the user's explicit
session, or an implicit one the executor takes for the operation (a cursor keeps its implicit
session until it is exhausted or closed). The server's half (ids, txnNumbers, the LIFO pool) is
``greenmongo.engine.server_session``. The client also gossips the highest ``$clusterTime`` it has seen.

Transactions (Transactions and Convenient Transactions API specs) keep their state machine in
``greenmongo.engine.transaction``; the session runs commitTransaction/abortTransaction through the client's
executor and ``with_transaction`` retries the whole callback on transient errors for up to 120 s.
"""

from __future__ import annotations

import time
from contextvars import ContextVar, Token
from types import GenericAlias
from typing import TYPE_CHECKING, Any, Callable, Mapping, NoReturn, Optional

from greenmongo.bson.timestamp import Timestamp
from greenmongo.common import timeout_seconds
from greenmongo.engine.deadline import Deadline, TimeoutScope, current_scope, resolve, scoped_to
from greenmongo.engine.session_state import SessionState
from greenmongo.engine.transaction import (
    TRANSIENT_TRANSACTION_ERROR,
    UNKNOWN_COMMIT_RESULT,
    TransactionOptions,
    is_max_time_expired,
)
from greenmongo.errors import ConfigurationError, GreenMongoError, InvalidOperation, has_error_label
from greenmongo.operations.transaction import AbortTransactionOperation, CommitTransactionOperation

if TYPE_CHECKING:
    from greenmongo.engine.core import ClientCore


class SessionOptions:
    """Options of an explicit session (PyMongo's names)."""

    def __init__(self, causal_consistency: Optional[bool] = None, default_transaction_options: Any = None,
                 snapshot: Optional[bool] = False, *, default_timeout_ms: Optional[int] = None) -> None:
        if snapshot and causal_consistency:
            raise ConfigurationError("snapshot reads do not support causal_consistency=True")
        self._default_timeout = timeout_seconds(default_timeout_ms, None)
        self._causal_consistency = True if causal_consistency is None and not snapshot else bool(
            causal_consistency)
        self._default_transaction_options = default_transaction_options
        self._snapshot = bool(snapshot)

    @property
    def causal_consistency(self) -> bool:
        return self._causal_consistency

    @property
    def default_transaction_options(self) -> Any:
        return self._default_transaction_options

    @property
    def snapshot(self) -> bool:
        return self._snapshot

    @property
    def default_timeout_ms(self) -> Optional[int]:
        """The session's defaultTimeoutMS (None: the client's timeoutMS applies)."""
        return None if self._default_timeout is None else round(self._default_timeout * 1000)


_WITH_TRANSACTION_TIMEOUT = 120.0

#: The session ``ClientSession.bind()`` made current: operations without ``session=`` use it.
#: Greenlet-local: every greenlet has its own context, and a spawned greenlet starts without one.
_BOUND: ContextVar[Optional["ClientSession"]] = ContextVar("greenmongo_bound_session", default=None)


def session_state(session: Optional["ClientSession"], core: "ClientCore") -> Optional[SessionState]:
    """The engine state of the session an operation runs with: ``session``, else the bound one.

    Every API method funnels its ``session`` argument through here, so a wrong type or another
    client's session is refused in one place.
    """
    if session is None:
        session = _BOUND.get()
        if session is None:
            return None
        if session._core is not core:
            raise InvalidOperation("Only the client that created the bound session can perform operations "
                                   "within its context block")
    elif not isinstance(session, ClientSession):
        raise TypeError(f"session must be a ClientSession, not {type(session).__name__}")
    return session._state


class ClientSession:
    """A logical session: PyMongo's ClientSession API (``client.start_session()`` makes one)."""

    __class_getitem__: Any = classmethod(GenericAlias)  # ClientSession[dict], as PyMongo's generic class

    def __init__(self, client: Any, core: "ClientCore", options: Optional[SessionOptions] = None) -> None:
        self._client = client
        self._core = core
        self._options = options or SessionOptions()
        self._state = core.new_session(causal_consistency=self._options.causal_consistency,
                                       snapshot=self._options.snapshot,
                                       default_timeout=self._options._default_timeout)

    # -- PyMongo's API --------------------------------------------------------------------

    @property
    def client(self) -> Any:
        return self._client

    @property
    def options(self) -> SessionOptions:
        return self._options

    @property
    def session_id(self) -> Mapping[str, Any]:
        self._state.check_not_ended()
        return self._state.use_server_session().session_id

    @property
    def cluster_time(self) -> Optional[Mapping[str, Any]]:
        return self._state.cluster_time

    @property
    def operation_time(self) -> Optional[Timestamp]:
        return self._state.operation_time

    @property
    def has_ended(self) -> bool:
        return self._state.ended

    @property
    def in_transaction(self) -> bool:
        return self._state.in_transaction

    @property
    def _pinned_address(self) -> Any:
        """The mongos a sharded transaction is pinned to (PyMongo's name; the unified runner reads it)."""
        return self._state.transaction.pinned_address

    @property
    def _server_session(self) -> Any:
        """PyMongo's name for the server session in use (None before the first command)."""
        return self._state.server_session

    def advance_cluster_time(self, cluster_time: Mapping[str, Any]) -> None:
        self._state.advance_cluster_time(cluster_time)

    def advance_operation_time(self, operation_time: Timestamp) -> None:
        self._state.advance_operation_time(operation_time)

    def bind(self, end_session: bool = True) -> "_BoundSessionContext":
        """Make this session the one operations of this greenlet use when given no ``session``.

        ``with client.start_session() as s, s.bind(): collection.insert_one(...)`` runs in ``s``.
        The binding is greenlet-local (a greenlet spawned inside the block does not inherit it).
        With ``end_session`` (the default) the session ends when the block does.
        """
        return _BoundSessionContext(self, end_session)

    def end_session(self) -> None:
        """Return the server session to the client's pool; the session cannot be used afterwards.

        A transaction still in progress is aborted first.
        """
        if self._state.ended:
            return
        try:
            if self.in_transaction:
                self._abort(self._deadline())
        finally:
            self._state.end()

    def _deadline(self) -> Deadline:
        """commit/abort/end: an enclosing timeout() block or with_transaction, else defaultTimeoutMS."""
        return resolve(self._state.default_timeout, self._state)

    def start_transaction(self, read_concern: Any = None, write_concern: Any = None, read_preference: Any = None,
                          max_commit_time_ms: Optional[int] = None) -> "_TransactionContext":
        """Start a transaction; the returned context manager commits on success and aborts on error."""
        self._state.check_not_ended()
        if self._options.snapshot:
            raise InvalidOperation("Transactions are not supported in snapshot sessions")
        options = TransactionOptions(read_concern, write_concern, read_preference, max_commit_time_ms).merged_over(
            self._options.default_transaction_options, client=self._client)
        self._state.transaction.start(options)
        self._state.next_txn_number()
        tracer = self._core.tracer
        if tracer is not None:
            tracer.start_transaction(self._state)  # its statements, commit and abort nest under it
        return _TransactionContext(self)

    def commit_transaction(self) -> None:
        """Commit; after an error labelled UnknownTransactionCommitResult it is safe to call again."""
        self._commit(self._deadline())

    def _commit(self, deadline: Deadline) -> None:
        self._state.check_not_ended()
        transaction = self._state.transaction
        try:
            if not transaction.begin_commit():
                return
            options = transaction.options
            operation = CommitTransactionOperation(
                transaction.commit_write_concern(retrying=False), transaction.recovery_token,
                options.max_commit_time_ms if options is not None else None,
                majority_on_retry=transaction.commit_write_concern(retrying=True))
            self._end_transaction_command(operation, deadline)
        finally:
            self._end_transaction_span()

    def _end_transaction_command(self, operation: CommitTransactionOperation | AbortTransactionOperation,
                                 deadline: Deadline) -> None:
        """Send commitTransaction/abortTransaction. Interrupted (gevent.Timeout, kill) before any attempt was
        sent, the transaction is as it was before the call: still open on the server (and pinned), for
        end_session to abort."""
        try:
            self._core.execute(operation, session=self._state, deadline=deadline)
        except BaseException as exc:
            if not isinstance(exc, Exception):
                self._state.transaction.end_interrupted()
            raise

    def _end_transaction_span(self) -> None:
        tracer = self._core.tracer
        if tracer is not None:
            tracer.end_transaction(self._state)

    def abort_transaction(self) -> None:
        """Abort; the server's errors are ignored (the transaction times out there anyway)."""
        self._abort(self._deadline())

    def _abort(self, deadline: Deadline) -> None:
        self._state.check_not_ended()
        transaction = self._state.transaction
        if not transaction.begin_abort():
            self._end_transaction_span()
            return
        operation = AbortTransactionOperation(transaction.commit_write_concern(retrying=False),
                                              transaction.recovery_token)
        try:
            self._end_transaction_command(operation, deadline)
        except GreenMongoError:
            pass  # the spec: abortTransaction errors are not reported
        finally:
            if not transaction.active:  # (still active: interrupted before it was sent, it keeps its pin)
                transaction.unpin()
            self._end_transaction_span()

    def with_transaction(self, callback: Callable[["ClientSession"], Any], read_concern: Any = None,
                         write_concern: Any = None, read_preference: Any = None,
                         max_commit_time_ms: Optional[int] = None) -> Any:
        """Run ``callback(session)`` in a transaction and commit, retrying transient failures.

        Retries go on for 120 s, or, under a timeoutMS (an enclosing ``greenmongo.timeout()`` block,
        else the session's defaultTimeoutMS, else the client's), until that one deadline: the callback's
        operations with this session share it (they cannot override it), and when it runs out the
        error is a timeout caused by the last failure. Operations of the callback that do not use the
        session keep their own timeouts. An abort after a failed callback gets the timeout afresh.
        """
        deadline = self._deadline()
        started = time.monotonic()

        def within_time() -> bool:
            if deadline.csot:
                return not deadline.expired()
            return time.monotonic() - started < _WITH_TRANSACTION_TIMEOUT

        def give_up(error: BaseException) -> NoReturn:
            """Out of time: under a timeoutMS the user sees a timeout, caused by the last failure."""
            try:
                if not deadline.csot or getattr(error, "timeout", False):
                    raise error
                raise deadline.timeout_error("with_transaction", cause=error) from error
            finally:
                del error  # the raised traceback holds this frame: no reference cycle through the argument

        state = self._state
        scope = TimeoutScope(deadline, current_scope(), owner=state) if deadline.csot else None
        state.transaction_scope = scope
        try:
            with scoped_to(scope):
                while True:
                    self.start_transaction(read_concern, write_concern, read_preference, max_commit_time_ms)
                    try:
                        result = callback(self)
                    except BaseException as exc:
                        if self.in_transaction:
                            self._abort(deadline.refreshed())
                        if has_error_label(exc, TRANSIENT_TRANSACTION_ERROR):
                            if within_time():
                                continue
                            give_up(exc)
                        raise
                    if not self.in_transaction:
                        return result  # the callback committed or aborted itself
                    while True:
                        try:
                            self._commit(deadline)
                        except GreenMongoError as exc:
                            if exc.has_error_label(UNKNOWN_COMMIT_RESULT) and not is_max_time_expired(exc):
                                if within_time():
                                    continue
                                give_up(exc)
                            if exc.has_error_label(TRANSIENT_TRANSACTION_ERROR):
                                if within_time():
                                    break
                                give_up(exc)
                            raise
                        return result
        finally:
            state.transaction_scope = None

    def __enter__(self) -> "ClientSession":
        return self

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> None:
        self.end_session()

    def __del__(self) -> None:
        # Dropped without end_session (no I/O here): a connection its transaction pinned (load-balanced mode)
        # goes back to the pool with the client's next operation. Its server session is not reused.
        try:
            transaction = self._state.transaction
            pin, transaction.pinned_connection = transaction.pinned_connection, None
            if pin is not None:
                self._core.queue_release(pin)
        except Exception:
            pass


class _BoundSessionContext:
    """``with session.bind():`` (a class, not a generator: a gevent.Timeout landing in a generator-based
    context manager breaks ``ContextVar.reset``, gevent#1930)."""

    def __init__(self, session: ClientSession, end_session: bool) -> None:
        self._session = session
        self._end_session = end_session
        self._token: Optional[Token[Optional[ClientSession]]] = None

    def __enter__(self) -> ClientSession:
        self._token = _BOUND.set(self._session)
        return self._session

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> None:
        token, self._token = self._token, None
        try:
            if token is not None:
                _BOUND.reset(token)
        finally:
            if self._end_session:
                self._session.end_session()


class _TransactionContext:
    """``with session.start_transaction():`` commits at the end of the block, aborts on an exception."""

    def __init__(self, session: ClientSession) -> None:
        self._session = session

    def __enter__(self) -> "_TransactionContext":
        return self

    def __exit__(self, exc_type: Any, exc: Any, traceback: Any) -> None:
        if not self._session.in_transaction:
            return
        if exc_type is None:
            self._session.commit_transaction()
        else:
            self._session.abort_transaction()
