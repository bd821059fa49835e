"""Transactions (Transactions spec): options, the per-session state machine, and the error-label rules.

Pure: no sockets, no greenlets. ``ClientSession`` owns one ``Transaction`` and asks it what to put
in each command (``fields_for_statement``) and which transitions the user's calls make; the
executor asks ``label_*`` which error labels an error gains. Keeping it here lets the state table
be tested without a server.
"""

from __future__ import annotations

import enum
from typing import Any, Mapping, Optional

from greenmongo.errors import (
    ConfigurationError,
    ConnectionFailure,
    InvalidOperation,
    OperationFailure,
    PyMongoError,
    WriteConcernError,
)
from greenmongo.options.read_concern import ReadConcern
from greenmongo.options.read_preferences import ReadPreference, ServerMode
from greenmongo.options.write_concern import WriteConcern
from greenmongo.sdam.address import Address

TRANSIENT_TRANSACTION_ERROR = "TransientTransactionError"
UNKNOWN_COMMIT_RESULT = "UnknownTransactionCommitResult"

#: Write concern errors that mean "your write concern is invalid": a retried commit fails the same way.
_INVALID_WRITE_CONCERN_CODES = frozenset({100, 79})  # UnsatisfiableWriteConcern, UnknownReplWriteConcern
MAX_TIME_MS_EXPIRED = 50


class TransactionOptions:
    """Options for one transaction (PyMongo's names); unset ones inherit session, then client defaults."""

    def __init__(self, read_concern: Optional[ReadConcern] = None, write_concern: Optional[WriteConcern] = None,
                 read_preference: Optional[ServerMode] = None, max_commit_time_ms: Optional[int] = None) -> None:
        if read_concern is not None and not isinstance(read_concern, ReadConcern):
            raise TypeError(f"read_concern must be a ReadConcern, not {type(read_concern).__name__}")
        if write_concern is not None:
            if not isinstance(write_concern, WriteConcern):
                raise TypeError(f"write_concern must be a WriteConcern, not {type(write_concern).__name__}")
            if not write_concern.acknowledged:
                raise ConfigurationError(
                    f"transactions do not support unacknowledged write concern: {write_concern!r}")
        if read_preference is not None and not isinstance(read_preference, ServerMode):
            raise TypeError(f"read_preference must be a read preference, not {type(read_preference).__name__}")
        if max_commit_time_ms is not None and (not isinstance(max_commit_time_ms, int)
                                               or isinstance(max_commit_time_ms, bool)):
            raise TypeError("max_commit_time_ms must be an integer or None")
        self._read_concern = read_concern
        self._write_concern = write_concern
        self._read_preference = read_preference
        self._max_commit_time_ms = max_commit_time_ms

    @property
    def read_concern(self) -> Optional[ReadConcern]:
        return self._read_concern

    @property
    def write_concern(self) -> Optional[WriteConcern]:
        return self._write_concern

    @property
    def read_preference(self) -> Optional[ServerMode]:
        return self._read_preference

    @property
    def max_commit_time_ms(self) -> Optional[int]:
        return self._max_commit_time_ms

    def merged_over(self, *defaults: Optional["TransactionOptions"], client: Any = None) -> "TransactionOptions":
        """These options, each unset one taken from the first default that sets it, then the client."""
        def pick(name: str, client_value: Any) -> Any:
            for options in (self, *defaults):
                value = getattr(options, name, None) if options is not None else None
                if value is not None:
                    return value
            return client_value

        return TransactionOptions(
            pick("read_concern", getattr(client, "read_concern", None)),
            pick("write_concern", getattr(client, "write_concern", None)),
            pick("read_preference", getattr(client, "read_preference", None)),
            pick("max_commit_time_ms", None))

    def __repr__(self) -> str:
        return (f"TransactionOptions(read_concern={self._read_concern!r}, write_concern={self._write_concern!r}, "
                f"read_preference={self._read_preference!r}, max_commit_time_ms={self._max_commit_time_ms!r})")


class TransactionState(enum.Enum):
    NONE = 1
    STARTING = 2
    IN_PROGRESS = 3
    COMMITTED = 4
    COMMITTED_EMPTY = 5
    ABORTED = 6


class Transaction:
    """One session's transaction state: what the user's calls may do next and what commands carry."""

    def __init__(self) -> None:
        self.state = TransactionState.NONE
        self.options: Optional[TransactionOptions] = None
        self.pinned_address: Optional[Address] = None
        #: Load-balanced mode: the connection every statement, the commit and the abort use (opaque here: an
        #: object whose ``release()`` gives it back to its pool, synchronously and without I/O).
        self.pinned_connection: Any = None
        self.recovery_token: Optional[Mapping[str, Any]] = None
        self.attempt = 0
        #: Set by the executor when an attempt of the commit or abort under way reaches the wire.
        self.end_sent = False
        self._state_before_end = TransactionState.NONE

    @property
    def active(self) -> bool:
        """Statements run inside the transaction (started, not yet committed or aborted)."""
        return self.state in (TransactionState.STARTING, TransactionState.IN_PROGRESS)

    @property
    def starting(self) -> bool:
        return self.state is TransactionState.STARTING

    def start(self, options: TransactionOptions) -> None:
        if self.active:
            raise InvalidOperation("Transaction already in progress")
        self.reset()  # (TransactionOptions already refused an unacknowledged write concern)
        self.state = TransactionState.STARTING
        self.options = options

    def statement_sent(self, address: Optional[Address] = None, connection: Any = None) -> None:
        """A statement went out: later ones no longer carry startTransaction. ``address`` pins the
        transaction to that server (a mongos or load balancer: the first statement's pins it), and
        ``connection`` to that connection (load-balanced mode), until ``unpin``."""
        if self.state is TransactionState.STARTING:
            self.state = TransactionState.IN_PROGRESS
            if address is not None:
                self.pinned_address = address
            if connection is not None:
                self._release_connection()
                self.pinned_connection = connection

    def resend_first_statement(self) -> None:
        """The first statement is being retried: it must start the transaction again."""
        if self.state is TransactionState.IN_PROGRESS:
            self.state = TransactionState.STARTING

    def unpin(self) -> None:
        """Forget the pinned server and give back the pinned connection: after a transient error, an abort,
        before a commit/abort retry selects afresh, and when the session ends."""
        self.pinned_address = None
        self._release_connection()

    def _release_connection(self) -> None:
        connection, self.pinned_connection = self.pinned_connection, None
        if connection is not None:
            connection.release()

    def observe_recovery_token(self, token: Mapping[str, Any]) -> None:
        """A sharded transaction's recoveryToken, sent with commit/abort so another mongos can finish it."""
        if self.state is not TransactionState.NONE:
            self.recovery_token = token

    def clear_finished(self) -> None:
        """An operation outside the transaction ends what is left of the last one (its state and pin)."""
        if self.state is not TransactionState.NONE and not self.active:
            self.reset()

    def begin_commit(self) -> bool:
        """Check a commit is allowed; True when a commitTransaction command must be sent."""
        state = self.state
        if state is TransactionState.NONE:
            raise InvalidOperation("No transaction started")
        if state is TransactionState.ABORTED:
            raise InvalidOperation("Cannot call commitTransaction after calling abortTransaction")
        if state in (TransactionState.STARTING, TransactionState.COMMITTED_EMPTY):
            self.state = TransactionState.COMMITTED_EMPTY  # nothing ran: nothing to commit
            return False
        # IN_PROGRESS, or COMMITTED again (the user retries a commit whose outcome was unknown).
        if state is TransactionState.COMMITTED:
            self.attempt += 1
        self._begin_end(state, TransactionState.COMMITTED)
        return True

    def begin_abort(self) -> bool:
        """Check an abort is allowed; True when an abortTransaction command must be sent."""
        state = self.state
        if state is TransactionState.NONE:
            raise InvalidOperation("No transaction started")
        if state in (TransactionState.COMMITTED, TransactionState.COMMITTED_EMPTY):
            raise InvalidOperation("Cannot call abortTransaction after calling commitTransaction")
        if state is TransactionState.ABORTED:
            raise InvalidOperation("Cannot call abortTransaction twice")
        self.state = TransactionState.ABORTED
        if state is not TransactionState.IN_PROGRESS:
            self.unpin()  # nothing to send: the pin ends here
            return False
        self._begin_end(state, TransactionState.ABORTED)
        return True

    def _begin_end(self, state: TransactionState, ending: TransactionState) -> None:
        self._state_before_end, self.end_sent = state, False
        self.state = ending

    def end_interrupted(self) -> bool:
        """The commit or abort under way was interrupted (gevent.Timeout, kill): if none of its attempts
        reached the wire, the server still has the transaction open, so it is as it was before the call
        (ending the session then aborts it). True when so restored."""
        if self.end_sent:
            return False
        self.state = self._state_before_end
        return True

    def reset(self) -> None:
        """A non-transaction operation on the session ends what is left of the last transaction (and its pin)."""
        self.state = TransactionState.NONE
        self.options = None
        self.unpin()
        self.recovery_token = None
        self.attempt = 0

    def read_preference(self) -> ServerMode:
        options = self.options
        if options is None or options.read_preference is None:
            return ReadPreference.PRIMARY
        return options.read_preference

    def commit_write_concern(self, retrying: bool) -> Optional[dict[str, Any]]:
        """The commit's write concern document; a retried commit upgrades to w: majority (spec)."""
        concern = self.options.write_concern if self.options is not None else None
        document = dict(concern.document) if concern is not None else {}
        if retrying or self.attempt > 0:
            document["w"] = "majority"
            document.setdefault("wtimeout", 10000)
        return document or None


# -- error labels ----------------------------------------------------------------------------------

def label_statement_error(error: BaseException) -> None:
    """A network or server-selection error inside a transaction is transient (not for commit)."""
    if isinstance(error, ConnectionFailure):  # network errors, pool cleared, server selection
        error._add_error_label(TRANSIENT_TRANSACTION_ERROR)


def label_commit_error(error: BaseException) -> None:
    """Errors after which the commit's outcome is unknown get UnknownTransactionCommitResult."""
    unknown = isinstance(error, ConnectionFailure) or (isinstance(error, OperationFailure) and (
        error.has_error_label("RetryableWriteError") or error.code == MAX_TIME_MS_EXPIRED
        or (isinstance(error, WriteConcernError) and error.code not in _INVALID_WRITE_CONCERN_CODES)))
    if unknown and isinstance(error, PyMongoError):  # always one when unknown
        error._remove_error_label(TRANSIENT_TRANSACTION_ERROR)
        error._add_error_label(UNKNOWN_COMMIT_RESULT)


def is_max_time_expired(error: BaseException) -> bool:
    """MaxTimeMSExpired as a command error or as a write concern error (with_transaction stops on it)."""
    if not isinstance(error, OperationFailure):
        return False
    if error.code == MAX_TIME_MS_EXPIRED:
        return True
    details = error.details or {}
    concern_error = details.get("writeConcernError") if isinstance(details, Mapping) else None
    return isinstance(concern_error, Mapping) and concern_error.get("code") == MAX_TIME_MS_EXPIRED

