"""SDAM error decisions for the cases the spec files leave out: load balancing, auth, monitors."""

from __future__ import annotations

import pytest

from greenmongo.errors import (
    AutoReconnect, NetworkTimeout, NotPrimaryError, OperationFailure, WriteConcernError,
)
from greenmongo.sdam import errors as sdam_errors
from greenmongo.sdam.errors import ApplicationError, decide_application_error, decide_check_failure
from greenmongo.sdam.server_description import ServerDescription
from greenmongo.sdam.settings import TopologySettings
from greenmongo.sdam.topology_description import TopologyDescription
from greenmongo.sdam.update import apply_server_description

A = ("a", 27017)
SERVICE = "service-1"


def rs_with_primary() -> TopologyDescription:
    description = TopologyDescription.initial(TopologySettings(seeds=(A,), replica_set_name="rs"))
    return apply_server_description(description, ServerDescription(A, {
        "ok": 1, "setName": "rs", "isWritablePrimary": True, "hosts": ["a:27017"], "maxWireVersion": 21,
    }))


def load_balanced() -> TopologyDescription:
    description = TopologyDescription.initial(TopologySettings(seeds=(A,), load_balanced=True))
    return apply_server_description(description, ServerDescription.load_balancer(A))


def app_error(error: BaseException, completed_handshake: bool = True, **kwargs: object) -> ApplicationError:
    return ApplicationError.from_exception(A, error, generation=0, completed_handshake=completed_handshake,
                                           max_wire_version=21, **kwargs)


@pytest.mark.parametrize("message, code, recovering, not_writable", [
    ("node is recovering", None, True, False),
    ("not master or secondary", None, True, False),
    ("not master", None, False, True),
    ("not master", 1, False, False),  # a code wins over the message
    ("", 11602, True, False),
    ("", 13435, False, True),
])
def test_state_change_classification(message: str, code: int, recovering: bool, not_writable: bool) -> None:
    assert sdam_errors.is_recovering(message, code) is recovering
    assert sdam_errors.is_not_writable_primary(message, code) is not_writable


def test_from_exception_classifies_greenmongo_errors() -> None:
    assert app_error(NetworkTimeout("t")).kind == sdam_errors.TIMEOUT
    assert app_error(AutoReconnect("x")).kind == sdam_errors.NETWORK
    not_primary = app_error(NotPrimaryError("not primary"))
    assert not_primary.kind == sdam_errors.COMMAND and not_primary.reply["code"] == 10107
    failure = app_error(OperationFailure("shutting down", 91, {"ok": 0, "errmsg": "shutting down", "code": 91}))
    assert sdam_errors.reply_error(failure.reply) == (91, "shutting down")
    wce = app_error(WriteConcernError("primary stepped down", 189, {"code": 189, "errmsg": "stepped down"}))
    assert sdam_errors.reply_error(wce.reply) == (189, "stepped down")


def test_write_concern_state_change_marks_unknown_and_requests_a_check() -> None:
    error = WriteConcernError("stepped down", 189, {"code": 189, "errmsg": "stepped down"})
    decision = decide_application_error(rs_with_primary(), 0, app_error(error))
    assert decision.unknown is not None and decision.request_check and not decision.clear_pool


def test_shutdown_error_clears_the_pool_but_not_in_use_connections() -> None:
    error = OperationFailure("shutdown", 91, {"ok": 0, "code": 91, "errmsg": "shutdown"})
    decision = decide_application_error(rs_with_primary(), 0, app_error(error))
    assert decision.clear_pool and decision.request_check and not decision.cancel_check


def test_network_error_marks_unknown_clears_and_cancels_the_check() -> None:
    decision = decide_application_error(rs_with_primary(), 0, app_error(AutoReconnect("reset")))
    assert decision.unknown is not None and decision.clear_pool and decision.cancel_check
    assert not decision.request_check
    assert str(decision.unknown.error) == "reset"


def test_stale_generation_is_ignored() -> None:
    assert decide_application_error(rs_with_primary(), 1, app_error(AutoReconnect("reset"))).ignored


def test_auth_error_during_handshake_marks_unknown_but_other_handshake_command_errors_do_not() -> None:
    auth = OperationFailure("Authentication failed.", 18, {"ok": 0, "code": 18})
    decision = decide_application_error(rs_with_primary(), 0,
                                        app_error(auth, completed_handshake=False, is_auth_error=True))
    assert decision.unknown is not None and decision.clear_pool
    other = decide_application_error(rs_with_primary(), 0, app_error(auth, completed_handshake=False))
    assert other.ignored


def test_backpressure_labelled_connect_failure_is_ignored() -> None:
    error = AutoReconnect("connection reset during handshake")
    sdam_errors.add_backpressure_labels(error)
    assert error.has_error_label("RetryableError")
    assert decide_application_error(rs_with_primary(), 0, app_error(error, completed_handshake=False)).ignored


def test_load_balanced_never_marks_unknown_and_clears_by_service() -> None:
    description = load_balanced()
    network = decide_application_error(description, 0, app_error(AutoReconnect("x"), service_id=SERVICE))
    assert network.unknown is None and network.clear_pool and network.service_id == SERVICE
    shutdown = OperationFailure("shutdown", 91, {"ok": 0, "code": 91})
    decision = decide_application_error(description, 0, app_error(shutdown, service_id=SERVICE))
    assert decision.unknown is None and decision.clear_pool and decision.service_id == SERVICE
    assert not decision.request_check  # there is no monitor to wake
    no_service = decide_application_error(description, 0,
                                          app_error(AutoReconnect("x"), completed_handshake=False))
    assert no_service.ignored
    # The hello itself failed (no serviceId yet): ignored, even a shutdown error (Load Balancer spec).
    hello_failed = OperationFailure("shutdown", 11600, {"ok": 0, "code": 11600})
    assert decide_application_error(description, 0, app_error(hello_failed, completed_handshake=False)).ignored
    # Authentication failed after the hello named the service: only that service's connections go.
    auth = decide_application_error(description, 0, app_error(
        OperationFailure("auth failed", 18, {"ok": 0, "code": 18}), completed_handshake=False, is_auth_error=True,
        service_id=SERVICE))
    assert auth.clear_pool and auth.service_id == SERVICE and auth.unknown is None


def test_monitor_check_failure_retries_only_a_network_error_on_a_known_server() -> None:
    known = rs_with_primary()[A]
    decision = decide_check_failure(known, AutoReconnect("reset"))
    assert decision.retry_immediately and decision.clear_pool and not decision.interrupt_in_use
    timeout = decide_check_failure(known, NetworkTimeout("timed out"))
    assert timeout.interrupt_in_use
    assert not decide_check_failure(ServerDescription(A), AutoReconnect("reset")).retry_immediately
    command = decide_check_failure(known, OperationFailure("bad", 2))
    assert not command.retry_immediately and command.unknown.error is not None


def test_streaming_server_is_checked_again_at_once() -> None:
    streaming = ServerDescription(A, {"ok": 1, "maxWireVersion": 21,
                                      "topologyVersion": {"processId": 1, "counter": 0}})
    assert sdam_errors.check_again_immediately(streaming, streaming_enabled=True, connection_streaming=False)
    assert not sdam_errors.check_again_immediately(streaming, streaming_enabled=False,
                                                   connection_streaming=False)
    polling = ServerDescription(A, {"ok": 1, "maxWireVersion": 21})
    assert not sdam_errors.check_again_immediately(polling, streaming_enabled=True, connection_streaming=False)


def test_not_writable_primary_from_a_pre_4_2_server_clears_the_pool() -> None:
    error = OperationFailure("not primary", 10107, {"ok": 0, "code": 10107})
    old = ApplicationError.from_exception(A, error, generation=0, completed_handshake=True, max_wire_version=7)
    assert decide_application_error(rs_with_primary(), 0, old).clear_pool
    assert not decide_application_error(rs_with_primary(), 0, app_error(error)).clear_pool


def test_state_change_error_keeps_its_topology_version_on_the_unknown() -> None:
    version = {"processId": "p", "counter": 3}
    error = OperationFailure("not primary", 10107, {"ok": 0, "code": 10107, "topologyVersion": version})
    decision = decide_application_error(rs_with_primary(), 0, app_error(error))
    assert decision.unknown.topology_version == version
    assert "not primary" in str(decision.unknown.error)
