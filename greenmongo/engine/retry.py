"""Retry rules (Retryable Reads, Retryable Writes and Client Backpressure specs): which errors are
retried, which labels the driver adds, which of two errors the user sees, and the overload retry
budget and backoff.

Pure functions over errors and server descriptions; the executor applies them around its one
``_attempt``.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from greenmongo.errors import (
    BulkWriteError,
    ClientBulkWriteException,
    ConnectionFailure,
    InvalidOperation,
    NotPrimaryError,
    OperationFailure,
    PoolClosedError,
    ServerSelectionTimeoutError,
    WaitQueueTimeoutError,
    WriteConcernError,
    has_error_label,
)
from greenmongo.sdam.server_type import ServerType

RETRYABLE_WRITE_ERROR = "RetryableWriteError"
NO_WRITES_PERFORMED = "NoWritesPerformed"
#: Client Backpressure: a server shedding load labels its refusals with both.
RETRYABLE_ERROR = "RetryableError"
SYSTEM_OVERLOADED_ERROR = "SystemOverloadedError"

#: Overload retries per operation (the client-backpressure spec tests' maxAttempts=2).
MAX_OVERLOAD_RETRIES = 2
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


def error_after_retry(previous: BaseException, retry_error: BaseException) -> BaseException:
    """Which error the user sees when a retry failed too (Retryable Writes spec): the retry's, unless it
    never reached a server or wrote nothing (NoWritesPerformed)."""
    if never_reached_server(retry_error) or has_error_label(retry_error, NO_WRITES_PERFORMED):
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
