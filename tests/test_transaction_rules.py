"""The pure cores of transactions and retries: the session's transaction state machine, option
inheritance, the commit write concern, and the error-label and retry rules. No server."""

from __future__ import annotations

import pytest

from greenmongo.errors import (
    AutoReconnect,
    BulkWriteError,
    ConfigurationError,
    InvalidOperation,
    NotPrimaryError,
    OperationFailure,
    PoolClearedError,
    ServerSelectionTimeoutError,
    WaitQueueTimeoutError,
    WriteConcernError,
)
from greenmongo.options.read_concern import ReadConcern
from greenmongo.options.read_preferences import ReadPreference
from greenmongo.options.write_concern import WriteConcern
from greenmongo.engine.retry import (
    RetryBudget,
    add_retryable_write_label,
    error_after_retry,
    is_retryable_read_error,
    overload_backoff,
    unsupported_retryable_writes_error,
)
from greenmongo.sdam.server_type import ServerType
from greenmongo.engine.transaction import (
    Transaction,
    TransactionOptions,
    TransactionState,
    is_max_time_expired,
    label_commit_error,
    label_statement_error,
)


def started(options: TransactionOptions | None = None) -> Transaction:
    transaction = Transaction()
    transaction.start(options or TransactionOptions())
    return transaction


# -- the state machine ---------------------------------------------------------------------------

def test_a_transaction_with_no_statement_commits_and_aborts_without_a_command() -> None:
    transaction = started()
    assert transaction.active and transaction.starting
    assert transaction.begin_commit() is False
    assert transaction.state is TransactionState.COMMITTED_EMPTY
    assert transaction.begin_commit() is False  # committing an empty transaction again is still a no-op
    transaction = started()
    assert transaction.begin_abort() is False
    assert transaction.state is TransactionState.ABORTED


def test_statements_move_starting_to_in_progress_and_commit_sends_once_then_retries_with_majority() -> None:
    transaction = started(TransactionOptions(write_concern=WriteConcern(w=1, wtimeout=50)))
    transaction.statement_sent()
    assert transaction.state is TransactionState.IN_PROGRESS and not transaction.starting
    assert transaction.begin_commit() is True
    assert transaction.commit_write_concern(retrying=False) == {"w": 1, "wtimeout": 50}
    # The user commits again after an unknown outcome: w: majority, the user's wtimeout kept.
    assert transaction.begin_commit() is True
    assert transaction.commit_write_concern(retrying=False) == {"w": "majority", "wtimeout": 50}


@pytest.mark.parametrize("begin, ending", [("begin_commit", TransactionState.COMMITTED),
                                           ("begin_abort", TransactionState.ABORTED)])
def test_a_commit_or_abort_interrupted_before_any_attempt_is_sent_leaves_the_transaction_in_progress(
        begin, ending) -> None:
    transaction = started()
    transaction.statement_sent()
    assert getattr(transaction, begin)() is True
    assert transaction.end_interrupted() is True  # nothing reached the server: it still has it open
    assert transaction.state is TransactionState.IN_PROGRESS and transaction.active
    assert getattr(transaction, begin)() is True
    transaction.end_sent = True  # an attempt went out: its outcome is the server's now
    assert transaction.end_interrupted() is False
    assert transaction.state is ending


def test_a_repeated_commit_interrupted_before_it_is_sent_stays_committed() -> None:
    transaction = started()
    transaction.statement_sent()
    transaction.begin_commit()
    transaction.end_sent = True
    transaction.begin_commit()  # the user commits again after an unknown outcome
    assert transaction.end_interrupted() is True
    assert transaction.state is TransactionState.COMMITTED  # the first commit may have landed


def test_the_driver_retry_of_a_commit_adds_wtimeout_when_there_is_none() -> None:
    transaction = started()
    transaction.statement_sent()
    transaction.begin_commit()
    assert transaction.commit_write_concern(retrying=False) is None  # the server default: no writeConcern
    assert transaction.commit_write_concern(retrying=True) == {"w": "majority", "wtimeout": 10000}


@pytest.mark.parametrize("setup, call, message", [
    (lambda t: None, "begin_commit", "No transaction started"),
    (lambda t: None, "begin_abort", "No transaction started"),
    (lambda t: (t.start(TransactionOptions()), t.begin_abort()), "begin_commit",
     "Cannot call commitTransaction after calling abortTransaction"),
    (lambda t: (t.start(TransactionOptions()), t.begin_abort()), "begin_abort", "Cannot call abortTransaction twice"),
    (lambda t: (t.start(TransactionOptions()), t.begin_commit()), "begin_abort",
     "Cannot call abortTransaction after calling commitTransaction"),
])
def test_out_of_order_calls_are_refused(setup, call, message) -> None:
    transaction = Transaction()
    setup(transaction)
    with pytest.raises(InvalidOperation, match=message):
        getattr(transaction, call)()


def test_starting_twice_is_refused_and_reset_forgets_everything() -> None:
    transaction = started()
    with pytest.raises(InvalidOperation, match="already in progress"):
        transaction.start(TransactionOptions())
    transaction.pinned_address = ("a", 1)
    transaction.recovery_token = {"t": 1}
    transaction.reset()
    assert transaction.state is TransactionState.NONE and transaction.pinned_address is None
    assert transaction.recovery_token is None and not transaction.active


class _Pin:
    """A stand-in for a PinnedConnection: counts its releases."""

    def __init__(self) -> None:
        self.releases = 0

    def release(self) -> None:
        self.releases += 1


def test_a_load_balanced_transaction_keeps_its_first_statements_connection_until_unpinned() -> None:
    transaction = started()
    pin = _Pin()
    transaction.statement_sent(("lb", 1), pin)
    assert transaction.pinned_connection is pin and transaction.pinned_address == ("lb", 1)
    transaction.statement_sent(("lb", 1), _Pin())  # later statements change nothing
    assert transaction.pinned_connection is pin
    assert transaction.begin_commit() is True
    assert transaction.pinned_connection is pin and pin.releases == 0  # a commit keeps it (commit again)
    transaction.unpin()
    transaction.unpin()
    assert transaction.pinned_connection is None and pin.releases == 1


@pytest.mark.parametrize("end", ["start again", "plain operation", "abort with nothing sent", "reset"])
def test_every_way_a_transaction_ends_gives_its_connection_back_once(end: str) -> None:
    transaction = started()
    pin = _Pin()
    if end == "abort with nothing sent":
        transaction.pinned_connection = pin  # as if pinned, while still starting
        assert transaction.begin_abort() is False
    else:
        transaction.statement_sent(("lb", 1), pin)
        if end == "start again":
            transaction.begin_commit()
            transaction.start(TransactionOptions())
        elif end == "plain operation":
            transaction.begin_commit()
            transaction.clear_finished()
        else:
            transaction.reset()
    assert pin.releases == 1 and transaction.pinned_connection is None


def test_ending_a_session_gives_its_transactions_connection_back() -> None:
    from greenmongo.engine.server_session import ServerSession
    from greenmongo.engine.session_state import SessionState

    class _Source:
        returned: list = []

        def take_server_session(self) -> ServerSession:
            return ServerSession()

        def return_server_session(self, server_session: ServerSession) -> None:
            self.returned.append(server_session)

    state = SessionState(_Source(), implicit=False, causal_consistency=True, snapshot=False)
    state.transaction.start(TransactionOptions())
    state.next_txn_number()
    pin = _Pin()
    state.transaction.statement_sent(("lb", 1), pin)
    state.transaction.begin_commit()
    state.end()
    assert pin.releases == 1 and len(_Source.returned) == 1


# -- options -------------------------------------------------------------------------------------

class _Client:
    read_concern = ReadConcern("local")
    write_concern = WriteConcern(w=1)
    read_preference = ReadPreference.PRIMARY


def test_options_inherit_from_session_defaults_then_the_client() -> None:
    defaults = TransactionOptions(read_concern=ReadConcern("majority"), max_commit_time_ms=100)
    merged = TransactionOptions(write_concern=WriteConcern(w="majority")).merged_over(defaults, client=_Client())
    assert merged.read_concern == ReadConcern("majority")
    assert merged.write_concern == WriteConcern(w="majority")
    assert merged.read_preference == ReadPreference.PRIMARY
    assert merged.max_commit_time_ms == 100


def test_unacknowledged_transactions_and_wrong_types_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="unacknowledged"):
        TransactionOptions(write_concern=WriteConcern(w=0))
    with pytest.raises(TypeError):
        TransactionOptions(read_concern={"level": "majority"})  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        TransactionOptions(max_commit_time_ms=True)


def test_read_preference_defaults_to_primary() -> None:
    assert started().read_preference() == ReadPreference.PRIMARY
    assert started(TransactionOptions(read_preference=ReadPreference.SECONDARY)).read_preference() == \
        ReadPreference.SECONDARY


# -- labels --------------------------------------------------------------------------------------

def test_network_and_selection_errors_in_a_transaction_are_transient() -> None:
    for error in (AutoReconnect("closed"), ServerSelectionTimeoutError("none")):
        label_statement_error(error)
        assert error.has_error_label("TransientTransactionError")
    failure = OperationFailure("dup", 11000, {"code": 11000})
    label_statement_error(failure)
    assert not failure.has_error_label("TransientTransactionError")


@pytest.mark.parametrize("error, unknown", [
    (AutoReconnect("closed", {"errorLabels": ["TransientTransactionError"]}), True),
    (OperationFailure("x", 189, {"code": 189, "errorLabels": ["RetryableWriteError"]}), True),
    (OperationFailure("x", 50, {"code": 50}), True),  # MaxTimeMSExpired
    (WriteConcernError("x", 64, {"code": 64}), True),
    (WriteConcernError("x", 100, {"code": 100}), False),  # UnsatisfiableWriteConcern
    (WriteConcernError("x", 79, {"code": 79}), False),  # UnknownReplWriteConcern
    (OperationFailure("x", 11601, {"code": 11601}), False),  # Interrupted: a plain failure
])
def test_commit_errors_with_an_unknown_outcome_are_labelled(error, unknown) -> None:
    label_commit_error(error)
    assert error.has_error_label("UnknownTransactionCommitResult") is unknown
    if unknown:
        assert not error.has_error_label("TransientTransactionError")


def test_max_time_expired_is_recognised_as_a_command_error_or_a_write_concern_error() -> None:
    assert is_max_time_expired(OperationFailure("x", 50, {"code": 50}))
    assert is_max_time_expired(WriteConcernError("x", 50, {"writeConcernError": {"code": 50}}))
    assert not is_max_time_expired(OperationFailure("x", 64, {"code": 64}))


# -- retry rules ---------------------------------------------------------------------------------

def test_the_driver_labels_network_errors_but_not_a_modern_server_reply() -> None:
    network = AutoReconnect("reset")
    add_retryable_write_label(network, 25, ServerType.RSPrimary)
    assert network.has_error_label("RetryableWriteError")
    cleared = PoolClearedError("cleared")  # labelled from birth
    assert cleared.has_error_label("RetryableWriteError")
    not_primary = NotPrimaryError("stepped down", {"code": 11600, "errorLabels": []})
    add_retryable_write_label(not_primary, 25, ServerType.RSPrimary)
    assert not not_primary.has_error_label("RetryableWriteError")  # a 4.4+ server labels its own replies


def test_pre_44_servers_are_labelled_by_code_and_by_a_mongod_write_concern_error() -> None:
    stepped_down = NotPrimaryError("stepped down", {"code": 189})
    add_retryable_write_label(stepped_down, 8, ServerType.RSPrimary)
    assert stepped_down.has_error_label("RetryableWriteError")
    failure = OperationFailure("x", 91, {"code": 91})
    add_retryable_write_label(failure, 8, ServerType.RSPrimary)
    assert failure.has_error_label("RetryableWriteError")
    bulk = BulkWriteError({"writeErrors": [], "writeConcernErrors": [{"code": 91, "errmsg": "shutdown"}]})
    add_retryable_write_label(bulk, 8, ServerType.RSPrimary)
    assert bulk.has_error_label("RetryableWriteError")
    from_mongos = BulkWriteError({"writeErrors": [], "writeConcernErrors": [{"code": 91, "errmsg": "shutdown"}]})
    add_retryable_write_label(from_mongos, 8, ServerType.Mongos)
    assert not from_mongos.has_error_label("RetryableWriteError")
    duplicate = OperationFailure("dup", 11000, {"code": 11000})
    add_retryable_write_label(duplicate, 8, ServerType.RSPrimary)
    assert not duplicate.has_error_label("RetryableWriteError")


def test_which_error_the_user_sees_after_a_failed_retry() -> None:
    first = AutoReconnect("first")
    second = OperationFailure("second", 91, {"code": 91})
    assert error_after_retry(first, second) is second
    assert error_after_retry(first, ServerSelectionTimeoutError("no server")) is first
    assert error_after_retry(first, WaitQueueTimeoutError("pool")) is first
    no_writes = OperationFailure("x", 91, {"code": 91, "errorLabels": ["NoWritesPerformed"]})
    assert error_after_retry(first, no_writes) is first


def test_retryable_reads_and_the_unsupported_storage_engine_message() -> None:
    assert is_retryable_read_error(AutoReconnect("x"))
    assert is_retryable_read_error(OperationFailure("x", 91, {"code": 91}))
    assert not is_retryable_read_error(ServerSelectionTimeoutError("x"))
    assert not is_retryable_read_error(OperationFailure("x", 11000, {"code": 11000}))
    replaced = unsupported_retryable_writes_error(
        OperationFailure("Transaction numbers are only allowed on ...", 20,
                         {"code": 20, "errmsg": "Transaction numbers are only allowed on ..."}))
    assert replaced is not None and "retryWrites=false" in str(replaced)
    assert unsupported_retryable_writes_error(OperationFailure("other", 20, {"code": 20, "errmsg": "other"})) is None


# -- overload retries (Client Backpressure) -------------------------------------------------------

def test_the_retry_budget_spends_and_refills_within_its_capacity() -> None:
    budget = RetryBudget(capacity=2)
    assert budget.consume(1) and budget.consume(1)
    assert not budget.consume(1)  # empty: a prolonged overload stops retrying
    budget.deposit(0.5)
    assert not budget.consume(1)
    budget.deposit(10)
    assert budget.tokens == 2  # never above capacity


def test_overload_backoff_is_jittered_exponential_and_capped() -> None:
    assert overload_backoff(1, 1.0) == pytest.approx(0.1)
    assert overload_backoff(2, 1.0) == pytest.approx(0.2)
    assert overload_backoff(3, 0.5) == pytest.approx(0.2)
    assert overload_backoff(30, 1.0) == pytest.approx(10.0)
    assert overload_backoff(2, 0.0) == 0.0
