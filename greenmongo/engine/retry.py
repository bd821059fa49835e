"""Retry rules (Retryable Reads, Retryable Writes, Transactions and Client Backpressure specs).

Pure: functions over errors and server descriptions (which errors are retried, which labels the
driver adds, which of two errors the user sees) and ``RetryState``, the one decision the executor
asks after every failed attempt: retry or not, after what backoff, which error to raise, whether to
unpin the transaction or restart its first statement. The executor only applies the decision around
its one ``_attempt``, as the Go driver's operation.go applies its RetryMode.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from greenmongo.errors import (
    BulkWriteError,
    ClientBulkWriteException,
    ConnectionFailure,
    InvalidOperation,
    NotPrimaryError,
    OperationFailure,
    PoolClearedError,
    PoolClosedError,
    ServerSelectionTimeoutError,
    WaitQueueTimeoutError,
    WriteConcernError,
    has_error_label,
)
from greenmongo.engine.deadline import Deadline
from greenmongo.engine.transaction import TRANSIENT_TRANSACTION_ERROR, label_statement_error
from greenmongo.sdam.server_type import ServerType

RETRYABLE_WRITE_ERROR = "RetryableWriteError"
NO_WRITES_PERFORMED = "NoWritesPerformed"
#: Client Backpressure: a server shedding load labels its refusals with both.
RETRYABLE_ERROR = "RetryableError"
SYSTEM_OVERLOADED_ERROR = "SystemOverloadedError"

#: Overload retries per operation (the client-backpressure spec tests' maxAttempts=2).
MAX_OVERLOAD_RETRIES = 2
#: Retries of a read whose attempt failed checking out of a cleared pool, on top of its classic retry (the
#: Retryable Reads spec does not count them: nothing was sent). Capped, so that without a timeoutMS a pool
#: cleared again and again cannot hold an operation for ever.
MAX_POOL_CLEARED_RETRIES = 3
OVERLOAD_BASE_BACKOFF = 0.1
OVERLOAD_MAX_BACKOFF = 10.0
RETRY_TOKEN_CAPACITY = 1000.0
RETRY_TOKEN_RETURN_RATE = 0.1

#: Server error codes after which a read may be retried (Retryable Reads spec, "Retryable Error").
RETRYABLE_READ_CODES = frozenset({262, 11600, 11602, 10107, 13435, 13436, 189, 134, 91, 7, 6, 89, 9001})
#: Codes a pre-4.4 server's error is labelled RetryableWriteError for, by the driver (4.4+ servers label).
RETRYABLE_WRITE_CODES = frozenset({11600, 11602, 10107, 13435, 13436, 189, 91, 7, 6, 89, 9001, 262})
_WIRE_4_4 = 9

_UNSUPPORTED_MESSAGE = ("This MongoDB deployment does not support retryable writes. Please add retryWrites=false "
                        "to your connection string.")


class RetryBudget:
    """The client's token bucket for overload retries: a retry costs one token, successes earn some back,
    so a prolonged overload stops retry storms. Greenlets of one hub never preempt each other here."""

    def __init__(self, capacity: float = RETRY_TOKEN_CAPACITY) -> None:
        self.capacity = capacity
        self.tokens = capacity

    def consume(self, amount: float) -> bool:
        if self.tokens < amount:
            return False
        self.tokens -= amount
        return True

    def deposit(self, amount: float) -> None:
        self.tokens = min(self.capacity, self.tokens + amount)

    def succeeded(self, retried: bool = False) -> None:
        """A success refills the bucket a little (more after a retry)."""
        self.deposit(RETRY_TOKEN_RETURN_RATE + (1 if retried else 0))


def overload_backoff(retry_number: int, jitter: float) -> float:
    """Seconds to wait before overload retry ``retry_number`` (1, 2, ...): jittered exponential backoff."""
    return jitter * min(OVERLOAD_MAX_BACKOFF, OVERLOAD_BASE_BACKOFF * 2 ** (retry_number - 1))


def is_network_error(error: BaseException) -> bool:
    """An error the driver raised for the connection (not derived from a server reply)."""
    return isinstance(error, ConnectionFailure) and not isinstance(
        error, (NotPrimaryError, ServerSelectionTimeoutError, WaitQueueTimeoutError))


def is_retryable_read_error(error: BaseException) -> bool:
    """A network error, a cleared pool, or one of the spec's server error codes."""
    if isinstance(error, (ServerSelectionTimeoutError, WaitQueueTimeoutError)):
        return False
    if isinstance(error, ConnectionFailure):  # network errors and timeouts, PoolClearedError, NotPrimaryError
        return True
    return isinstance(error, OperationFailure) and error.code in RETRYABLE_READ_CODES


def never_reached_server(error: BaseException) -> bool:
    """Errors of the driver's own making before anything was sent: a retry's such error hides nothing."""
    return isinstance(error, (ServerSelectionTimeoutError, WaitQueueTimeoutError, PoolClosedError, InvalidOperation))


def add_retryable_write_label(error: BaseException, max_wire_version: Optional[int], server_type: Any) -> None:
    """Add RetryableWriteError where the driver must (a client with retryWrites, outside transactions).

    Network errors (and a cleared pool) always; for a server older than 4.4, the listed codes at the
    top level or in a mongod's writeConcernError. A 4.4+ server labels its own replies.
    """
    label = getattr(error, "_add_error_label", None)
    if label is None:
        return
    if is_network_error(error):
        label(RETRYABLE_WRITE_ERROR)
        return
    if (max_wire_version or 0) >= _WIRE_4_4:
        return
    if isinstance(error, NotPrimaryError):
        code = _code_of(getattr(error, "details", None) or getattr(error, "errors", None))
        if code in RETRYABLE_WRITE_CODES or code is None:
            label(RETRYABLE_WRITE_ERROR)
        return
    if not isinstance(error, OperationFailure):
        return
    if error.code in RETRYABLE_WRITE_CODES and not isinstance(error, (BulkWriteError, ClientBulkWriteException)):
        label(RETRYABLE_WRITE_ERROR)
        return
    if server_type is not ServerType.Mongos:
        concern_error = write_concern_error_of(error)
        if concern_error is not None and concern_error.get("code") in RETRYABLE_WRITE_CODES:
            label(RETRYABLE_WRITE_ERROR)


def write_concern_error_of(error: OperationFailure) -> Optional[Mapping[str, Any]]:
    """The writeConcernError an error carries: a single write's, or a bulk batch's last one."""
    details = error.details
    if not isinstance(details, Mapping):
        return None
    if isinstance(error, BulkWriteError):
        errors = details.get("writeConcernErrors") or []
        return errors[-1] if errors else None
    concern_error = details.get("writeConcernError")
    if concern_error is not None:
        return concern_error
    if isinstance(error, WriteConcernError):  # a single write's: details is the writeConcernError itself
        return details
    return None


def is_retryable_write_error(error: BaseException) -> bool:
    return has_error_label(error, RETRYABLE_WRITE_ERROR)


def error_after_retry(previous: BaseException, retry_error: BaseException, *, sent: bool = True) -> BaseException:
    """Which error the user sees when a retry failed too (Retryable Reads/Writes specs): the retry's, unless
    it never reached a server, was never sent (a cleared pool, a connection that could not be made: such an
    error would let the caller infer that nothing was attempted) or wrote nothing (NoWritesPerformed)."""
    if not sent or never_reached_server(retry_error) or has_error_label(retry_error, NO_WRITES_PERFORMED):
        return previous
    return retry_error


def unsupported_retryable_writes_error(error: BaseException) -> Optional[OperationFailure]:
    """Code 20 "Transaction numbers ..." (a storage engine without retryable writes): the actionable error."""
    if not isinstance(error, OperationFailure) or error.code != 20:
        return None
    details = error.details if isinstance(error.details, Mapping) else {}
    if not str(details.get("errmsg", "")).startswith("Transaction numbers"):
        return None
    return OperationFailure(_UNSUPPORTED_MESSAGE, 20, details)


def _code_of(details: Any) -> Optional[int]:
    if isinstance(details, Mapping):
        code = details.get("code")
        return code if isinstance(code, int) else None
    return None


# -- the decision after a failed attempt ---------------------------------------------------------

class RetryMode(enum.Enum):
    """Which classic retry rules an operation runs under (Go's RetryMode)."""

    #: No classic retry: retryReads/retryWrites off, a pinned getMore/killCursors, a statement inside a
    #: transaction, or an operation that is not retryable. Overload retries may still apply.
    NONE = "none"
    READ = "read"
    WRITE = "write"
    #: commitTransaction/abortTransaction: always retried once (a retried commit sends w: majority).
    END_TRANSACTION = "end_transaction"
    #: A getMore: retried once only when its attempt never reached the wire (its connection could not be
    #: checked out: a cleared pool, a failed establishment), so the cursor cannot have moved. One that was
    #: sent is not retried (Retryable Reads spec: a resent getMore could skip a batch).
    UNSENT = "unsent"


def retry_mode(*, is_read: bool, is_write: bool, retryable: bool, ends_transaction: bool, pinned: bool,
               in_transaction: bool, retry_reads: bool, retry_writes: bool, retry_unsent: bool = False) -> RetryMode:
    """The mode an operation runs under, from what it is and the client's retryReads/retryWrites.

    ``retry_unsent``: the operation may be retried when nothing of it was sent (a getMore), under retryReads."""
    if in_transaction:
        return RetryMode.NONE
    if ends_transaction:
        return RetryMode.END_TRANSACTION
    if pinned or not retryable:
        return RetryMode.UNSENT if retry_unsent and retry_reads else RetryMode.NONE
    if is_write and retry_writes:
        return RetryMode.WRITE
    if is_read and retry_reads:
        return RetryMode.READ
    return RetryMode.NONE


@dataclass(frozen=True)
class WriteAttempt:
    """What the executor knows of a retryable write's attempt when it failed."""

    #: The write went out with a txnNumber (the server can recognise its retry).
    has_txn_number: bool = False
    #: The selected server takes retryable writes and the write is acknowledged.
    retry_supported: bool = False
    #: Something reached the wire (False: a cleared pool, a failed connect, before sending). Known for
    #: every operation, not only writes.
    sent: bool = True


@dataclass(frozen=True)
class RetryDecision:
    """What to do after a failed attempt."""

    retry: bool
    #: When not retrying: the error to raise (``is`` the attempt's error, or the first attempt's, or a
    #: replacement that names the problem).
    error: Optional[BaseException] = None
    #: Raise ``error`` chained to the attempt's error (a replacement) instead of bare.
    chain: bool = False
    #: Seconds to wait before the retry (overload backoff).
    backoff: float = 0.0
    #: The transaction's pinned server is no longer trusted (a transient error, a commit/abort retry).
    unpin: bool = False
    #: The failed statement was the transaction's first: the retry must start it again.
    restart_transaction: bool = False
    #: A classic retry of commitTransaction: send it with w: majority.
    commit_retry: bool = False


class RetryState:
    """The retry state of one operation: fed every failure, it decides; it never sleeps or sends.

    Classic retries: one, after a retryable read error (READ) or an error labelled
    RetryableWriteError (WRITE: sent with a txnNumber, or failed before anything was sent on a
    server that takes retryable writes; END_TRANSACTION: always); a getMore (UNSENT) only after an
    attempt that sent nothing. A read's attempt that found its pool cleared while it waited for a
    connection does not use up its retry (Retryable Reads spec), up to MAX_POOL_CLEARED_RETRIES.
    Overload retries (Client Backpressure): errors labelled both RetryableError and SystemOverloadedError, when
    ``overload_allowed``, up to ``MAX_OVERLOAD_RETRIES`` with jittered backoff, each paid from the
    client's token bucket. Statements inside a transaction (mode NONE, ``in_transaction``) get only
    overload retries; their network errors gain TransientTransactionError.

    Under a timeoutMS (CSOT) a classically retryable operation is retried as often as its deadline
    allows, no backoff sleeps past it, and once it is spent the user sees a timeout error (the last
    error when it is one, else a timeout caused by it).
    """

    __slots__ = ("mode", "overload_allowed", "max_overload_retries", "budget", "in_transaction", "attempt",
                 "overloaded", "reached", "pool_cleared_retries")

    def __init__(self, mode: RetryMode, *, overload_allowed: bool, budget: RetryBudget,
                 in_transaction: bool = False, max_overload_retries: int = MAX_OVERLOAD_RETRIES) -> None:
        self.mode = mode
        self.overload_allowed = overload_allowed
        #: The client's maxAdaptiveRetries (0: overload errors are never retried).
        self.max_overload_retries = max_overload_retries
        self.budget = budget
        self.in_transaction = in_transaction
        #: Retries made so far (0 during the first attempt).
        self.attempt = 0
        self.overloaded = False
        #: The error the user sees if retrying stops now (the last one that came from a server).
        self.reached: Optional[BaseException] = None
        #: Retries after a cleared pool that did not count as the classic retry.
        self.pool_cleared_retries = 0

    @property
    def retrying(self) -> bool:
        return self.attempt > 0

    def after_error(self, error: BaseException, *, write: WriteAttempt = WriteAttempt(), starting: bool = False,
                    jitter: float = 1.0, deadline: Optional[Deadline] = None) -> RetryDecision:
        """The decision after ``error`` ended an attempt. ``starting``: the attempt was a transaction's
        first statement; ``jitter`` in [0, 1) scales the overload backoff; ``deadline`` bounds it."""
        unpin = False
        if self.in_transaction:
            label_statement_error(error)
            unpin = has_error_label(error, TRANSIENT_TRANSACTION_ERROR)
        overload = has_error_label(error, SYSTEM_OVERLOADED_ERROR)
        if self.attempt and not overload:
            self.budget.deposit(1)  # a healthy server answered the retry
        self.reached = error if self.reached is None else error_after_retry(self.reached, error, sent=write.sent)
        mode = self.mode
        if mode is RetryMode.READ:
            retryable = is_retryable_read_error(error)
        elif mode is RetryMode.UNSENT:
            retryable = not write.sent and is_retryable_read_error(error)
        elif mode is RetryMode.WRITE:
            retryable = ((write.has_txn_number or (write.retry_supported and not write.sent))
                         and is_retryable_write_error(error))
        elif mode is RetryMode.END_TRANSACTION:
            retryable = is_retryable_write_error(error)
        else:
            retryable = False
        overload_retryable = (overload and has_error_label(error, RETRYABLE_ERROR) and self.overload_allowed
                              and self.max_overload_retries > 0)
        self.overloaded = self.overloaded or overload
        csot = deadline is not None and deadline.csot
        limit: float = self.max_overload_retries if self.overloaded else (math.inf if csot else 1)
        # A read that found its pool cleared before it could send anything: retried without using up the retry.
        free = (retryable and not write.sent and isinstance(error, PoolClearedError) and not overload
                and mode in (RetryMode.READ, RetryMode.UNSENT) and self.pool_cleared_retries < MAX_POOL_CLEARED_RETRIES)
        if not (retryable or overload_retryable) or (self.attempt >= limit and not free):
            return self._stop(error, unpin, deadline)
        backoff = overload_backoff(self.attempt + 1, jitter) if overload else 0.0
        remaining = deadline.remaining() if deadline is not None else None
        if remaining is not None and (remaining <= 0 or backoff >= remaining):
            return self._stop(error, unpin, deadline, out_of_time=True)
        if overload and not self.budget.consume(1):
            return self._stop(error, unpin, deadline)
        if free:
            self.pool_cleared_retries += 1
        else:
            self.attempt += 1
        ends = mode is RetryMode.END_TRANSACTION
        return RetryDecision(True, backoff=backoff, unpin=unpin or ends, restart_transaction=starting,
                             commit_retry=ends and retryable)

    def _stop(self, error: BaseException, unpin: bool, deadline: Optional[Deadline] = None, *,
              out_of_time: bool = False) -> RetryDecision:
        if deadline is not None and deadline.csot and (out_of_time or deadline.expired()):
            # The deadline ended the retries: what the user sees says so, and says what the last attempt that
            # reached a server met (an attempt that sent nothing, a wait queue timeout, would hide it).
            last = self.reached
            if getattr(last, "timeout", False):
                return RetryDecision(False, last, unpin=unpin)
            return RetryDecision(False, deadline.timeout_error("retries", cause=last), chain=True, unpin=unpin)
        if self.attempt == 0:
            if self.mode is RetryMode.WRITE:
                replacement = unsupported_retryable_writes_error(error)
                if replacement is not None:
                    return RetryDecision(False, replacement, chain=True, unpin=unpin)
            return RetryDecision(False, error, unpin=unpin)
        # The retry failed too: the user sees the retry's error unless it never reached a server or
        # wrote nothing (then the first attempt's, which says what really happened).
        return RetryDecision(False, self.reached, unpin=unpin)

    def retry_not_possible(self, deadline: Optional[Deadline] = None) -> BaseException:
        """The retry could not start (no server to select, or one without retryable writes): the error
        of the attempt before stands - never the retry's own (a server selection timeout would say that
        nothing was attempted). If the operation's deadline ran out meanwhile, the error is a timeout: that
        error when it is one, else a timeout naming it (the executor chains it to the retry's own error)."""
        assert self.reached is not None
        if deadline is not None and deadline.csot and deadline.expired() and not getattr(
                self.reached, "timeout", False):
            return deadline.timeout_error("retry", cause=self.reached)
        return self.reached

    def succeeded(self) -> None:
        """A success refills the overload token bucket a little (more after a retry)."""
        self.budget.succeeded(retried=self.attempt > 0)
