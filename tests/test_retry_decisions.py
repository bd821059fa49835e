"""The pure retry decision (engine/retry.py), table by table: no server, no executor.

Each row feeds RetryState the failures of one operation and checks what it decides after each:
retry or not, the backoff, which error the user sees, and the transaction effects.
"""

from __future__ import annotations

import time
from typing import Optional

import pytest

from greenmongo.engine.deadline import LEGACY, Deadline
from greenmongo.engine.retry import (
    MAX_OVERLOAD_RETRIES,
    MAX_POOL_CLEARED_RETRIES,
    RETRY_TOKEN_RETURN_RATE,
    RetryBudget,
    RetryMode,
    RetryState,
    WriteAttempt,
    overload_backoff,
    retry_mode,
)
from greenmongo.engine.transaction import TRANSIENT_TRANSACTION_ERROR
from greenmongo.errors import (
    AutoReconnect,
    ExecutionTimeout,
    NetworkTimeout,
    OperationFailure,
    PoolClearedError,
    ServerSelectionTimeoutError,
    WaitQueueTimeoutError,
)


def network() -> AutoReconnect:
    return AutoReconnect("connection reset")


def server_error(code: int, *labels: str) -> OperationFailure:
    error = OperationFailure(f"error {code}", code, {"code": code, "errorLabels": list(labels)})
    for label in labels:
        error._add_error_label(label)
    return error


def retryable_write_error() -> OperationFailure:
    return server_error(91, "RetryableWriteError")


def overloaded() -> OperationFailure:
    return server_error(462, "RetryableError", "SystemOverloadedError")


def no_writes_performed() -> OperationFailure:
    return server_error(91, "RetryableWriteError", "NoWritesPerformed")


SENT = WriteAttempt(has_txn_number=True, retry_supported=True, sent=True)
NOT_SENT = WriteAttempt(has_txn_number=False, retry_supported=True, sent=False)
NO_TXN = WriteAttempt(has_txn_number=False, retry_supported=False, sent=True)


def state(mode: RetryMode, *, overload_allowed: bool = True, in_transaction: bool = False,
          budget: Optional[RetryBudget] = None, max_overload_retries: int = MAX_OVERLOAD_RETRIES) -> RetryState:
    return RetryState(mode, overload_allowed=overload_allowed, budget=budget or RetryBudget(),
                      in_transaction=in_transaction, max_overload_retries=max_overload_retries)


@pytest.mark.parametrize("kwargs,expected", [
    (dict(is_read=True, is_write=False, retryable=True, ends_transaction=False, pinned=False,
          in_transaction=False, retry_reads=True, retry_writes=True), RetryMode.READ),
    (dict(is_read=True, is_write=False, retryable=True, ends_transaction=False, pinned=False,
          in_transaction=False, retry_reads=False, retry_writes=True), RetryMode.NONE),
    (dict(is_read=False, is_write=True, retryable=True, ends_transaction=False, pinned=False,
          in_transaction=False, retry_reads=True, retry_writes=True), RetryMode.WRITE),
    (dict(is_read=False, is_write=True, retryable=False, ends_transaction=False, pinned=False,
          in_transaction=False, retry_reads=True, retry_writes=True), RetryMode.NONE),  # multi-statement
    (dict(is_read=True, is_write=False, retryable=True, ends_transaction=False, pinned=True,
          in_transaction=False, retry_reads=True, retry_writes=True), RetryMode.NONE),  # a getMore
    (dict(is_read=False, is_write=True, retryable=True, ends_transaction=False, pinned=False,
          in_transaction=True, retry_reads=True, retry_writes=True), RetryMode.NONE),  # inside a transaction
    (dict(is_read=False, is_write=False, retryable=False, ends_transaction=True, pinned=True,
          in_transaction=False, retry_reads=False, retry_writes=False), RetryMode.END_TRANSACTION),
    # A getMore: retried only when nothing of it was sent, and only with retryReads (never in a transaction).
    (dict(is_read=True, is_write=False, retryable=False, ends_transaction=False, pinned=True,
          in_transaction=False, retry_reads=True, retry_writes=True, retry_unsent=True), RetryMode.UNSENT),
    (dict(is_read=True, is_write=False, retryable=False, ends_transaction=False, pinned=True,
          in_transaction=False, retry_reads=False, retry_writes=True, retry_unsent=True), RetryMode.NONE),
    (dict(is_read=True, is_write=False, retryable=False, ends_transaction=False, pinned=True,
          in_transaction=True, retry_reads=True, retry_writes=True, retry_unsent=True), RetryMode.NONE),
])
def test_retry_mode(kwargs, expected) -> None:
    assert retry_mode(**kwargs) is expected


@pytest.mark.parametrize("mode,error,write,retries", [
    # Reads: network errors and the spec's codes, once; selection timeouts never.
    (RetryMode.READ, network, NO_TXN, True),
    (RetryMode.READ, lambda: server_error(10107), NO_TXN, True),
    (RetryMode.READ, lambda: server_error(11000), NO_TXN, False),
    (RetryMode.READ, lambda: ServerSelectionTimeoutError("no primary"), NO_TXN, False),
    # Writes: labelled RetryableWriteError, and sent with a txnNumber (or never sent at all).
    (RetryMode.WRITE, retryable_write_error, SENT, True),
    (RetryMode.WRITE, retryable_write_error, NO_TXN, False),
    (RetryMode.WRITE, retryable_write_error, NOT_SENT, True),
    (RetryMode.WRITE, lambda: server_error(11000), SENT, False),
    # commit/abort: always once when labelled.
    (RetryMode.END_TRANSACTION, retryable_write_error, NO_TXN, True),
    (RetryMode.END_TRANSACTION, lambda: server_error(251), NO_TXN, False),
    # No classic retries at all.
    (RetryMode.NONE, retryable_write_error, SENT, False),
    (RetryMode.NONE, network, SENT, False),
])
def test_classic_retry_is_one_retry(mode, error, write, retries) -> None:
    retry = state(mode)
    first = error()
    decision = retry.after_error(first, write=write)
    assert decision.retry is retries
    assert decision.backoff == 0.0
    if not retries:
        assert decision.error is first and not decision.chain
        return
    second = error()
    decision = retry.after_error(second, write=write)
    # A second failure is the user's error; unless it was not sent either (then the first one is).
    assert not decision.retry and decision.error is (second if write.sent else first)


def test_retry_that_never_reached_a_server_raises_the_first_error() -> None:
    retry = state(RetryMode.WRITE)
    first = retryable_write_error()
    assert retry.after_error(first, write=SENT).retry
    decision = retry.after_error(ServerSelectionTimeoutError("nothing to select"), write=SENT)
    assert not decision.retry and decision.error is first
    assert retry.retry_not_possible() is first
    assert retry.retry_not_possible(Deadline.start(60.0)) is first


def test_retry_that_wrote_nothing_raises_the_first_error() -> None:
    retry = state(RetryMode.WRITE)
    first = NetworkTimeout("timed out")
    first._add_error_label("RetryableWriteError")
    assert retry.after_error(first, write=SENT).retry
    decision = retry.after_error(no_writes_performed(), write=SENT)
    assert not decision.retry and decision.error is first


def test_unsupported_retryable_writes_is_replaced_by_the_actionable_error() -> None:
    retry = state(RetryMode.WRITE)
    error = OperationFailure("Transaction numbers are only allowed on ...", 20,
                             {"code": 20, "errmsg": "Transaction numbers are only allowed on a replica set"})
    decision = retry.after_error(error, write=SENT)
    assert not decision.retry and decision.chain
    assert decision.error is not error and "retryWrites=false" in str(decision.error)


def test_overload_retries_back_off_and_stop_after_the_limit() -> None:
    budget = RetryBudget(capacity=10)
    retry = state(RetryMode.READ, budget=budget)
    for number in range(1, MAX_OVERLOAD_RETRIES + 1):
        decision = retry.after_error(overloaded(), jitter=0.5)
        assert decision.retry
        assert decision.backoff == overload_backoff(number, 0.5) > 0
    last = overloaded()
    decision = retry.after_error(last, jitter=0.5)
    assert not decision.retry and decision.error is last
    assert budget.tokens == 10 - MAX_OVERLOAD_RETRIES


def test_overload_retries_need_tokens_and_permission() -> None:
    empty = RetryBudget(capacity=10)
    empty.tokens = 0.5
    assert not state(RetryMode.READ, budget=empty).after_error(overloaded()).retry
    assert not state(RetryMode.READ, overload_allowed=False).after_error(overloaded()).retry
    # Overload retries apply even where classic ones do not (inside a transaction, retryWrites=false).
    assert state(RetryMode.NONE, in_transaction=True).after_error(overloaded()).retry


def test_a_deadline_stops_a_backoff_that_would_outlive_it() -> None:
    nearly_spent = Deadline(0.5, time.monotonic() + 0.01)
    last = overloaded()
    decision = state(RetryMode.READ).after_error(last, jitter=0.9, deadline=nearly_spent)
    assert not decision.retry
    assert decision.error.timeout and decision.error.__class__ is ExecutionTimeout and "timeoutMS: 500ms" in str(
        decision.error)


def test_under_a_timeout_classic_retries_go_on_while_time_is_left() -> None:
    deadline = Deadline.start(60.0)
    retry = state(RetryMode.READ)
    for _ in range(5):
        assert retry.after_error(network(), deadline=deadline).retry
    # timeoutMS=0: no limit on time, and none on the number of retries either.
    unlimited = Deadline.start(0)
    retry = state(RetryMode.WRITE)
    for _ in range(5):
        assert retry.after_error(retryable_write_error(), write=SENT, deadline=unlimited).retry
    # Without a timeout: one retry.
    retry = state(RetryMode.READ)
    assert retry.after_error(network(), deadline=LEGACY).retry
    assert not retry.after_error(network(), deadline=LEGACY).retry


def test_a_spent_deadline_makes_the_error_a_timeout() -> None:
    spent = Deadline(0.1, time.monotonic() - 1)
    retry = state(RetryMode.READ)
    first = server_error(7)  # HostNotFound: retryable, not a timeout
    decision = retry.after_error(first, deadline=spent)
    assert not decision.retry and decision.chain
    assert decision.error.timeout and "last error: error 7" in str(decision.error)
    timed_out = NetworkTimeout("socket timed out")
    decision = state(RetryMode.READ).after_error(timed_out, deadline=spent)
    assert decision.error is timed_out  # already a timeout: raised as it is
    # A retry whose server selection ran out of time: a timeout naming the first attempt's error (never the
    # selection timeout, which would say that nothing was attempted); the first error itself if a timeout.
    retry = state(RetryMode.READ)
    assert retry.after_error(first, deadline=Deadline.start(60.0)).retry
    error = retry.retry_not_possible(spent)
    assert isinstance(error, ExecutionTimeout) and error.timeout and "last error: error 7" in str(error)
    assert retry.retry_not_possible(LEGACY) is first
    retry = state(RetryMode.READ)
    assert retry.after_error(timed_out, deadline=Deadline.start(60.0)).retry
    assert retry.retry_not_possible(spent) is timed_out


def test_under_a_timeout_an_attempt_that_sent_nothing_does_not_hide_the_last_error() -> None:
    """The deadline runs out while a retry waits for a connection: the error names what the attempt that
    went out met, not the wait."""
    spent = Deadline(0.1, time.monotonic() - 1)
    retry = state(RetryMode.READ)
    first = network()
    assert retry.after_error(first, write=NO_TXN, deadline=Deadline.start(60.0)).retry
    waiting = WaitQueueTimeoutError("timed out waiting for a connection")
    decision = retry.after_error(waiting, write=WriteAttempt(sent=False), deadline=spent)
    assert not decision.retry and decision.chain
    assert isinstance(decision.error, ExecutionTimeout) and "connection reset" in str(decision.error)


def test_success_refills_the_budget() -> None:
    budget = RetryBudget(capacity=10)
    budget.tokens = 5
    retry = state(RetryMode.READ, budget=budget)
    retry.succeeded()
    assert budget.tokens == pytest.approx(5 + RETRY_TOKEN_RETURN_RATE)
    retry = state(RetryMode.READ, budget=budget)
    retry.after_error(network())
    retry.succeeded()
    assert budget.tokens == pytest.approx(5 + 2 * RETRY_TOKEN_RETURN_RATE + 1)


def test_transaction_statement_errors() -> None:
    retry = state(RetryMode.NONE, in_transaction=True)
    error = network()
    decision = retry.after_error(error, starting=True)
    assert not decision.retry and decision.unpin and decision.error is error
    assert error.has_error_label(TRANSIENT_TRANSACTION_ERROR)
    # An overload retry of the first statement must start the transaction again.
    decision = state(RetryMode.NONE, in_transaction=True).after_error(overloaded(), starting=True)
    assert decision.retry and decision.restart_transaction and not decision.unpin
    # A server error keeps the pin (the transaction may go on).
    decision = state(RetryMode.NONE, in_transaction=True).after_error(server_error(11000))
    assert not decision.unpin


def test_commit_retry_unpins_and_upgrades_the_write_concern() -> None:
    decision = state(RetryMode.END_TRANSACTION).after_error(retryable_write_error())
    assert decision.retry and decision.unpin and decision.commit_retry
    # An overload retry of commit resends it as it was.
    decision = state(RetryMode.END_TRANSACTION).after_error(overloaded())
    assert decision.retry and decision.unpin and not decision.commit_retry


def test_max_adaptive_retries_bounds_overload_retries() -> None:
    assert not state(RetryMode.READ, max_overload_retries=0).after_error(overloaded()).retry
    retry = state(RetryMode.READ, max_overload_retries=3)
    assert all(retry.after_error(overloaded()).retry for _ in range(3))
    assert not retry.after_error(overloaded()).retry


def pool_cleared() -> PoolClearedError:
    return PoolClearedError("Connection pool for db:27017 was cleared because another operation failed")


UNSENT_READ = WriteAttempt(sent=False)


@pytest.mark.parametrize("mode,first_attempt,unsent", [
    (RetryMode.READ, NO_TXN, pool_cleared),
    (RetryMode.READ, NO_TXN, lambda: AutoReconnect("db:27017: connection refused")),  # establishing its connection
    (RetryMode.WRITE, SENT, pool_cleared),
    (RetryMode.WRITE, SENT, lambda: AutoReconnect("db:27017: connection refused")),
])
def test_a_retry_that_could_not_be_sent_raises_the_first_attempts_error(mode, first_attempt, unsent) -> None:
    """The first attempt went out and failed (its outcome unknown); the retry failed before sending anything.
    Its error would let the caller believe nothing was attempted: the first attempt's error is raised."""
    retry = state(mode)
    first = NetworkTimeout("db:27017: timed out (socket timeout 1500.0ms)")
    if mode is RetryMode.WRITE:
        first._add_error_label("RetryableWriteError")
    assert retry.after_error(first, write=first_attempt).retry
    second = unsent()
    if mode is RetryMode.WRITE:
        second._add_error_label("RetryableWriteError")
    not_sent = WriteAttempt(has_txn_number=True, retry_supported=True, sent=False)
    decision = retry.after_error(second, write=not_sent if mode is RetryMode.WRITE else UNSENT_READ)
    while decision.retry:  # a read's retries after a cleared pool, which do not count
        assert mode is RetryMode.READ and isinstance(second, PoolClearedError)
        decision = retry.after_error(unsent(), write=UNSENT_READ)
    assert decision.error is first
    # A retry that was sent and failed: its own error (it says more about the server now).
    retry = state(mode)
    assert retry.after_error(first, write=first_attempt).retry
    sent_error = unsent()
    decision = retry.after_error(sent_error, write=first_attempt)
    assert decision.error is sent_error


def test_a_getmore_is_retried_once_only_when_nothing_of_it_was_sent() -> None:
    """A getMore that could not get a connection cannot have moved the cursor: retried once. One that went
    out is not (the server may have returned a batch the client never saw)."""
    retry = state(RetryMode.UNSENT)
    decision = retry.after_error(AutoReconnect("db:27017: connection refused"), write=UNSENT_READ)
    assert decision.retry
    last = AutoReconnect("db:27017: connection refused")
    assert not retry.after_error(last, write=UNSENT_READ).retry
    sent = AutoReconnect("db:27017: connection closed mid-message")
    decision = state(RetryMode.UNSENT).after_error(sent, write=NO_TXN)
    assert not decision.retry and decision.error is sent
    assert not state(RetryMode.UNSENT).after_error(server_error(43), write=UNSENT_READ).retry  # CursorNotFound


@pytest.mark.parametrize("mode", [RetryMode.READ, RetryMode.UNSENT])
def test_a_cleared_pool_does_not_use_up_a_reads_retry(mode) -> None:
    """Retryable Reads: a checkout that found the pool cleared sent nothing; retrying it is always safe and
    does not count as the retry (capped, so that a pool cleared again and again cannot hold it for ever)."""
    retry = state(mode)
    first = pool_cleared()
    for _ in range(MAX_POOL_CLEARED_RETRIES):
        assert retry.after_error(pool_cleared(), write=UNSENT_READ).retry
    assert retry.attempt == 0
    assert retry.after_error(first, write=UNSENT_READ).retry  # the classic retry, now
    decision = retry.after_error(pool_cleared(), write=UNSENT_READ)
    assert not decision.retry and isinstance(decision.error, PoolClearedError)
    # A sent attempt's failure still ends a read after its one retry, cleared pools or not.
    retry = state(RetryMode.READ)
    assert retry.after_error(network(), write=NO_TXN).retry
    assert retry.after_error(pool_cleared(), write=UNSENT_READ).retry
    last = NetworkTimeout("timed out")
    decision = retry.after_error(last, write=NO_TXN)
    assert not decision.retry and decision.error is last


def test_a_cleared_pool_uses_up_a_writes_retry() -> None:
    """Retryable Writes counts it (one retry, then the first error)."""
    retry = state(RetryMode.WRITE)
    first, second = pool_cleared(), pool_cleared()
    for error in (first, second):
        error._add_error_label("RetryableWriteError")
    not_sent = WriteAttempt(has_txn_number=False, retry_supported=True, sent=False)
    assert retry.after_error(first, write=not_sent).retry
    decision = retry.after_error(second, write=not_sent)
    assert not decision.retry and decision.error is first
