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
from typing import Any, Callable, Mapping, Optional

from greenmongo.bson.timestamp import Timestamp
from greenmongo.engine.server_session import ServerSession
from greenmongo.engine.transaction import (
    TRANSIENT_TRANSACTION_ERROR,
    UNKNOWN_COMMIT_RESULT,
    Transaction,
    TransactionOptions,
    TransactionState,
    is_max_time_expired,
)
from greenmongo.errors import ConfigurationError, GreenMongoError, InvalidOperation, has_error_label
from greenmongo.operations.transaction import AbortTransactionOperation, CommitTransactionOperation


class SessionOptions:
    """Options of an explicit session (PyMongo's names)."""

    def __init__(self, causal_consistency: Optional[bool] = None, default_transaction_options: Any = None,
                 snapshot: Optional[bool] = False) -> None:
        if snapshot and causal_consistency:
            raise ConfigurationError("snapshot reads do not support causal_consistency=True")
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


_WITH_TRANSACTION_TIMEOUT = 120.0


class ClientSession:
    """A logical session: PyMongo's ClientSession API."""

    def __init__(self, client: Any, options: Optional[SessionOptions] = None, *, implicit: bool = False) -> None:
        self._client = client
        self._options = options or SessionOptions()
        self._implicit = implicit
        self._server_session: Optional[ServerSession] = None
        self._cluster_time: Optional[Mapping[str, Any]] = None
        self._operation_time: Optional[Timestamp] = None
        self._ended = False
        self._transaction = Transaction()
        self._snapshot_time: Optional[Timestamp] = None

    # -- PyMongo's API --------------------------------------------------------------------

    @property
    def client(self) -> Any:
        return self._client

    @property
    def options(self) -> SessionOptions:
        return self._options

    @property
    def session_id(self) -> Mapping[str, Any]:
        self._check_not_ended()
        return self._use_server_session().session_id

    @property
    def cluster_time(self) -> Optional[Mapping[str, Any]]:
        return self._cluster_time

    @property
    def operation_time(self) -> Optional[Timestamp]:
        return self._operation_time

    @property
    def has_ended(self) -> bool:
        return self._ended

    @property
    def in_transaction(self) -> bool:
        return self._transaction.active

    @property
    def _pinned_address(self) -> Any:
        return self._transaction.pinned_address

    def advance_cluster_time(self, cluster_time: Mapping[str, Any]) -> None:
        if not isinstance(cluster_time, Mapping) or not isinstance(cluster_time.get("clusterTime"), Timestamp):
            raise ValueError("cluster_time must be a document with a Timestamp clusterTime")
        if self._cluster_time is None or cluster_time["clusterTime"] > self._cluster_time["clusterTime"]:
            self._cluster_time = cluster_time

    def advance_operation_time(self, operation_time: Timestamp) -> None:
        if not isinstance(operation_time, Timestamp):
            raise TypeError("operation_time must be a Timestamp")
        if self._operation_time is None or operation_time > self._operation_time:
            self._operation_time = operation_time

    def end_session(self) -> None:
        """Return the server session to the client's pool; the session cannot be used afterwards.

        A transaction still in progress is aborted first.
        """
        if self._ended:
            return
        try:
            if self.in_transaction:
                self.abort_transaction()
        finally:
            self._end()

    def _end(self) -> None:
        self._ended = True
        server_session, self._server_session = self._server_session, None
        if server_session is not None:
            self._client._return_server_session(server_session)

    def start_transaction(self, read_concern: Any = None, write_concern: Any = None, read_preference: Any = None,
                          max_commit_time_ms: Optional[int] = None) -> "_TransactionContext":
        """Start a transaction; the returned context manager commits on success and aborts on error."""
        self._check_not_ended()
        if self._options.snapshot:
            raise InvalidOperation("Transactions are not supported in snapshot sessions")
        if self._implicit:
            raise InvalidOperation("Implicit sessions cannot run transactions")
        options = TransactionOptions(read_concern, write_concern, read_preference, max_commit_time_ms).merged_over(
            self._options.default_transaction_options, client=self._client)
        self._transaction.start(options)
        self._use_server_session().txn_number += 1
        return _TransactionContext(self)

    def commit_transaction(self) -> None:
        """Commit; after an error labelled UnknownTransactionCommitResult it is safe to call again."""
        self._check_not_ended()
        transaction = self._transaction
        if not transaction.begin_commit():
            return
        options = transaction.options
        operation = CommitTransactionOperation(
            transaction.commit_write_concern(retrying=False), transaction.recovery_token,
            options.max_commit_time_ms if options is not None else None,
            majority_on_retry=transaction.commit_write_concern(retrying=True))
        self._client._end_transaction(operation, self)

    def abort_transaction(self) -> None:
        """Abort; the server's errors are ignored (the transaction times out there anyway)."""
        self._check_not_ended()
        transaction = self._transaction
        if not transaction.begin_abort():
            transaction.pinned_address = None
            return
        operation = AbortTransactionOperation(transaction.commit_write_concern(retrying=False),
                                              transaction.recovery_token)
        try:
            self._client._end_transaction(operation, self)
        except GreenMongoError:
            pass  # the spec: abortTransaction errors are not reported
        finally:
            transaction.pinned_address = None

    def with_transaction(self, callback: Callable[["ClientSession"], Any], read_concern: Any = None,
                         write_concern: Any = None, read_preference: Any = None,
                         max_commit_time_ms: Optional[int] = None) -> Any:
        """Run ``callback(session)`` in a transaction and commit, retrying transient failures for 120 s."""
        started = time.monotonic()

        def within_time() -> bool:
            return time.monotonic() - started < _WITH_TRANSACTION_TIMEOUT

        while True:
            self.start_transaction(read_concern, write_concern, read_preference, max_commit_time_ms)
            try:
                result = callback(self)
            except BaseException as exc:
                if self.in_transaction:
                    self.abort_transaction()
                if has_error_label(exc, TRANSIENT_TRANSACTION_ERROR) and within_time():
                    continue
                raise
            if not self.in_transaction:
                return result  # the callback committed or aborted itself
            while True:
                try:
                    self.commit_transaction()
                except GreenMongoError as exc:
                    if (exc.has_error_label(UNKNOWN_COMMIT_RESULT) and within_time()
                            and not is_max_time_expired(exc)):
                        continue
                    if exc.has_error_label(TRANSIENT_TRANSACTION_ERROR) and within_time():
                        break
                    raise
                return result

    def __enter__(self) -> "ClientSession":
        return self

    def __exit__(self, *exc: object) -> None:
        self.end_session()

    # -- used by the executor ------------------------------------------------------------------

    def _check_not_ended(self) -> None:
        if self._ended:
            raise InvalidOperation("Cannot use ended session")

    def _use_server_session(self) -> ServerSession:
        if self._server_session is None:
            self._server_session = self._client._take_server_session()
        return self._server_session

    def _lsid_for_command(self) -> Mapping[str, Any]:
        server_session = self._use_server_session()
        server_session.last_use = time.monotonic()
        return server_session.session_id

    def _mark_dirty(self) -> None:
        if self._server_session is not None:
            self._server_session.dirty = True

    def _observe_reply(self, reply: Mapping[str, Any]) -> None:
        cluster_time = reply.get("$clusterTime")
        if cluster_time is not None:
            self.advance_cluster_time(cluster_time)
        operation_time = reply.get("operationTime")
        if isinstance(operation_time, Timestamp):
            self.advance_operation_time(operation_time)
        token = reply.get("recoveryToken")
        if token is not None and self._transaction.state is not TransactionState.NONE:
            self._transaction.recovery_token = token
        if self._options.snapshot and self._snapshot_time is None:
            cursor = reply.get("cursor")
            at = (cursor.get("atClusterTime") if isinstance(cursor, Mapping) else None) or reply.get("atClusterTime")
            if isinstance(at, Timestamp):
                self._snapshot_time = at

    def _next_txn_number(self) -> int:
        """A new transaction number for a retryable write (kept across its retry)."""
        server_session = self._use_server_session()
        server_session.txn_number += 1
        return server_session.txn_number

    def _txn_number(self) -> int:
        return self._use_server_session().txn_number

    def _read_concern_extra(self) -> Optional[dict[str, Any]]:
        """afterClusterTime (causal consistency) or atClusterTime (snapshot) for a command's readConcern."""
        if self._options.snapshot:
            return {"atClusterTime": self._snapshot_time} if self._snapshot_time is not None else None
        if self._options.causal_consistency and self._operation_time is not None:
            return {"afterClusterTime": self._operation_time}
        return None


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
