"""Command monitoring events: PyMongo-shaped attributes, redaction, listener dispatch."""

from __future__ import annotations

import datetime

import pytest

from greenmongo.bson import ObjectId
from greenmongo.errors import AutoReconnect, OperationFailure
from greenmongo.monitoring.command import (
    CommandFailedEvent,
    CommandListener,
    CommandStartedEvent,
    CommandSucceededEvent,
    failure_document,
    is_sensitive_command,
    publish,
    redact_failure,
)
from greenmongo.operations.base import WireInfo
from greenmongo.operations.write import InsertOneOperation

ADDRESS = ("localhost", 27017)


def test_started_event_attributes():
    service = ObjectId()
    event = CommandStartedEvent({"find": "c", "filter": {}, "$db": "db"}, "db", 7, ADDRESS, 3,
                                service_id=service, server_connection_id=55)
    assert (event.command_name, event.database_name, event.request_id, event.operation_id) == ("find", "db", 7, 3)
    assert event.connection_id == ADDRESS and event.service_id == service and event.server_connection_id == 55
    assert event.command == {"find": "c", "filter": {}, "$db": "db"}
    with pytest.raises(ValueError):
        CommandStartedEvent({}, "db", 1, ADDRESS, None)


def test_started_event_includes_document_sequences():
    op = InsertOneOperation("db", "coll", {"_id": 1, "x": 2})
    command = op.build(WireInfo(max_wire_version=25))
    event = CommandStartedEvent(command.for_monitoring({**command.body, "$db": "db"}), "db", 1, ADDRESS, 1)
    assert event.command == {"insert": "coll", "ordered": True, "$db": "db", "documents": [{"_id": 1, "x": 2}]}


def test_succeeded_and_failed_durations():
    ok = CommandSucceededEvent(datetime.timedelta(milliseconds=1, microseconds=500), {"ok": 1}, "ping", 1,
                               ADDRESS, None, database_name="admin")
    assert ok.duration_micros == 1500 and ok.reply == {"ok": 1} and ok.database_name == "admin"
    assert CommandSucceededEvent(0.25, {"ok": 1}, "ping", 1, ADDRESS, None).duration_micros == 250000
    failed = CommandFailedEvent(datetime.timedelta(seconds=2), {"ok": 0, "errmsg": "x"}, "find", 2, ADDRESS, 9)
    assert failed.duration_micros == 2_000_000 and failed.failure["errmsg"] == "x"


@pytest.mark.parametrize("name", ["authenticate", "saslStart", "saslContinue", "getnonce", "createUser",
                                  "updateUser", "copydbgetnonce", "copydbsaslstart", "copydb", "SASLSTART"])
def test_sensitive_commands_are_redacted(name):
    started = CommandStartedEvent({name: 1, "payload": b"secret"}, "admin", 1, ADDRESS, None)
    assert started.command == {} and started.command_name == name
    succeeded = CommandSucceededEvent(0, {"ok": 1, "payload": b"secret"}, name, 1, ADDRESS, None)
    assert succeeded.reply == {}
    failed = CommandFailedEvent(0, {"ok": 0, "code": 18, "codeName": "AuthenticationFailed",
                                    "errmsg": "secret detail", "errorLabels": ["L"]}, name, 1, ADDRESS, None)
    assert failed.failure == {"code": 18, "codeName": "AuthenticationFailed", "errorLabels": ["L"]}


@pytest.mark.parametrize("name", ["hello", "isMaster", "ismaster"])
def test_hello_redacted_only_with_speculative_authenticate(name):
    speculative = {name: 1, "speculativeAuthenticate": {"saslStart": 1}}
    assert CommandStartedEvent(speculative, "admin", 1, ADDRESS, None).command == {}
    assert CommandStartedEvent({name: 1}, "admin", 1, ADDRESS, None).command == {name: 1}
    reply = {"ok": 1, "isWritablePrimary": True}
    assert CommandSucceededEvent(0, reply, name, 1, ADDRESS, None, speculative_hello=True).reply == {}
    assert CommandSucceededEvent(0, {**reply, "speculativeAuthenticate": {}}, name, 1, ADDRESS, None).reply == {}
    assert CommandSucceededEvent(0, reply, name, 1, ADDRESS, None).reply == reply
    assert is_sensitive_command(name, None, speculative_hello=True)
    assert not is_sensitive_command("find", {"speculativeAuthenticate": 1})


def test_network_failures_of_sensitive_commands_are_not_redacted():
    error = AutoReconnect("connection reset")
    event = CommandFailedEvent.from_exception(0, error, "saslStart", 1, ADDRESS, None)
    assert event.failure == {"errmsg": "connection reset", "errtype": "AutoReconnect"}
    server = OperationFailure("auth failed", 18, {"ok": 0, "code": 18, "errmsg": "auth failed",
                                                  "codeName": "AuthenticationFailed"})
    redacted = CommandFailedEvent.from_exception(0, server, "saslStart", 1, ADDRESS, None)
    assert redacted.failure == {"code": 18, "codeName": "AuthenticationFailed"}
    plain = CommandFailedEvent.from_exception(0, server, "find", 1, ADDRESS, None)
    assert plain.failure["errmsg"] == "auth failed"


def test_failure_document_and_redact_failure():
    assert failure_document(ValueError("bad")) == {"errmsg": "bad", "errtype": "ValueError"}
    assert failure_document(OperationFailure("x", 2, {"ok": 0, "code": 2}))["code"] == 2
    assert redact_failure({"errmsg": "x", "code": 1}) == {"code": 1}


class Recorder(CommandListener):
    def __init__(self):
        self.events = []

    def started(self, event):
        self.events.append(("started", event.request_id))

    def succeeded(self, event):
        self.events.append(("succeeded", event.request_id))

    def failed(self, event):
        raise RuntimeError("listener bug")


def test_publish_dispatches_and_swallows_listener_errors(caplog):
    recorder = Recorder()
    publish([recorder, object()], CommandStartedEvent({"ping": 1}, "admin", 4, ADDRESS, None))
    publish([recorder], CommandSucceededEvent(0, {"ok": 1}, "ping", 4, ADDRESS, None))
    publish([recorder], CommandFailedEvent(0, {}, "ping", 5, ADDRESS, None))
    assert recorder.events == [("started", 4), ("succeeded", 4)]
    assert "listener bug" in caplog.text


def test_base_listener_methods_must_be_overridden():
    with pytest.raises(NotImplementedError):
        CommandListener().started(CommandStartedEvent({"ping": 1}, "admin", 1, ADDRESS, None))
