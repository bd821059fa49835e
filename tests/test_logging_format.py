"""Standardized log messages and the MONGODB_LOG_* configuration (Logging spec)."""

from __future__ import annotations

import datetime
import json
import logging
import os
import pathlib
import subprocess
import sys

import pytest

from greenmongo.logs import messages as lf
from greenmongo.bson import ObjectId
from greenmongo.errors import NetworkTimeout, OperationFailure, ServerSelectionTimeoutError

ADDRESS = ("db.example.com", 27017)


# -- configuration ----------------------------------------------------------------------

def test_defaults_log_nothing():
    settings = lf.parse_log_settings({})
    assert settings.levels == {} and settings.max_document_length == 1000 and settings.destination == "stderr"


def test_all_and_component_variables():
    settings = lf.parse_log_settings({"MONGODB_LOG_ALL": "info", "MONGODB_LOG_COMMAND": "DEBUG",
                                      "MONGODB_LOG_TOPOLOGY": "nonsense", "MONGODB_LOG_CONNECTION": "off"})
    assert settings.levels == {"command": logging.DEBUG, "topology": logging.INFO,
                               "serverSelection": logging.INFO, "connection": lf.OFF}


@pytest.mark.parametrize("name, level", [("emergency", logging.CRITICAL), ("alert", logging.CRITICAL),
                                         ("critical", logging.CRITICAL), ("error", logging.ERROR),
                                         ("warn", logging.WARNING), ("notice", lf.NOTICE), ("info", logging.INFO),
                                         ("debug", logging.DEBUG), ("trace", lf.TRACE), ("Off", lf.OFF)])
def test_severity_names(name, level):
    assert lf.parse_severity(name) == level


def test_invalid_values_are_ignored():
    assert lf.parse_severity("loud") is None
    assert lf.parse_log_settings({"MONGODB_LOG_MAX_DOCUMENT_LENGTH": "abc"}).max_document_length == 1000
    assert lf.parse_log_settings({"MONGODB_LOG_MAX_DOCUMENT_LENGTH": "-5"}).max_document_length == 1000
    assert lf.parse_log_settings({"MONGOB_LOG_MAX_DOCUMENT_LENGTH": "20"}).max_document_length == 20
    assert lf.parse_log_settings({"MONGODB_LOG_MAX_DOCUMENT_LENGTH": "0"}).max_document_length == 0


@pytest.mark.parametrize("value, expected", [("STDOUT", "stdout"), ("stderr", "stderr"), ("/tmp/x.log", "/tmp/x.log"),
                                             ("", "stderr")])
def test_destination(value, expected):
    assert lf.parse_log_settings({"MONGODB_LOG_PATH": value}).destination == expected


def test_apply_settings_respects_programmatic_configuration(tmp_path):
    command = logging.getLogger("greenmongo.command")
    topology = logging.getLogger("greenmongo.topology")
    saved = [(logger, logger.level, list(logger.handlers)) for logger in (command, topology)]
    try:
        command.setLevel(logging.WARNING)  # the application configured this one
        topology.setLevel(logging.NOTSET)
        path = tmp_path / "driver.log"
        settings = lf.parse_log_settings({"MONGODB_LOG_ALL": "debug", "MONGODB_LOG_PATH": str(path)})
        lf.apply_log_settings(settings)
        lf.apply_log_settings(settings)
        assert command.level == logging.WARNING
        assert topology.level == logging.DEBUG
        assert sum(getattr(h, "_greenmongo_env", False) for h in topology.handlers) == 1
        topology.debug(lf.starting_topology_monitoring("T1"))
        for handler in topology.handlers:
            handler.flush()
        assert "Starting monitoring for topology with ID T1" in path.read_text()
    finally:
        for logger, level, handlers in saved:
            for handler in logger.handlers:
                if handler not in handlers:
                    handler.close()
            logger.setLevel(level)
            logger.handlers[:] = handlers


def test_unwritable_path_falls_back_to_stderr():
    handler = lf._handler_for("/nonexistent-dir/x/y.log")
    assert isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler)


# -- documents ------------------------------------------------------------------------------

def test_truncation_appends_ellipsis_outside_the_limit():
    assert lf.truncate("abcdef", 4) == "abcd..."
    assert lf.truncate("abcd", 4) == "abcd"
    assert lf.truncate("é€😀x", 3) == "é€😀..."  # code points, never a broken character
    text = lf.format_document({"a": "x" * 50}, max_length=10)
    assert text == '{"a": "xxx...' and len(text) == 13


def test_format_document_is_relaxed_extended_json():
    oid = ObjectId("5f0000000000000000000000")
    text = lf.format_document({"_id": oid, "n": 1, "f": 1.5, "d": datetime.datetime(2020, 1, 1)}, max_length=1000)
    assert json.loads(text) == {"_id": {"$oid": str(oid)}, "n": 1, "f": 1.5, "d": {"$date": "2020-01-01T00:00:00Z"}}


# -- command messages ----------------------------------------------------------------------

def test_command_started_message():
    message = lf.command_started({"find": "c", "filter": {}, "$db": "db"}, "db", 5, address=ADDRESS,
                                 operation_id=5, driver_connection_id=2, server_connection_id=77,
                                 service_id=ObjectId("5f0000000000000000000001"))
    assert dict(message) == {
        "message": "Command started", "commandName": "find", "databaseName": "db", "requestId": 5,
        "operationId": 5, "driverConnectionId": 2, "serverHost": "db.example.com", "serverPort": 27017,
        "serverConnectionId": 77, "serviceId": "5f0000000000000000000001",
        "command": '{"find": "c", "filter": {}, "$db": "db"}'}
    assert str(message) == (
        'Command "find" started on database "db" using a connection with driver-generated ID 2 and '
        'server-generated ID 77 to db.example.com:27017 with service ID 5f0000000000000000000001. The requestID '
        'is 5 and the operation ID is 5. Command: {"find": "c", "filter": {}, "$db": "db"}')


def test_optional_fields_are_omitted_not_null():
    message = lf.command_started({"ping": 1}, "admin", 1, address="/tmp/mongodb-27017.sock")
    assert "serverPort" not in message and "operationId" not in message and "serviceId" not in message
    assert "None" not in str(message)
    assert str(message) == ('Command "ping" started on database "admin" using a connection to '
                            '/tmp/mongodb-27017.sock. The requestID is 1. Command: {"ping": 1}')


def test_command_succeeded_and_redaction():
    message = lf.command_succeeded({"ok": 1, "n": 1}, "insert", "db", 3, datetime.timedelta(milliseconds=2.5),
                                   address=ADDRESS, driver_connection_id=1)
    assert message["durationMS"] == 2.5 and message["reply"] == '{"ok": 1, "n": 1}'
    assert "in 2.5 ms" in str(message) and str(message).endswith('Command reply: {"ok": 1, "n": 1}')
    assert lf.command_started({"saslStart": 1, "payload": "x"}, "admin", 1, address=ADDRESS)["command"] == "{}"
    assert lf.command_succeeded({"ok": 1, "payload": "x"}, "saslContinue", "admin", 1, 0,
                                address=ADDRESS)["reply"] == "{}"
    assert lf.command_succeeded({"ok": 1}, "hello", "admin", 1, 0, address=ADDRESS,
                                speculative_hello=True)["reply"] == "{}"


def test_command_failed_redacts_server_errors_of_sensitive_commands_only():
    server = OperationFailure("Authentication failed", 18, {"ok": 0, "code": 18, "codeName": "AuthenticationFailed",
                                                            "errmsg": "Authentication failed"})
    redacted = lf.command_failed(server, "saslStart", "admin", 1, 0.001, address=ADDRESS)
    assert json.loads(redacted["failure"]) == {"code": 18, "codeName": "AuthenticationFailed"}
    plain = lf.command_failed(server, "find", "db", 1, 0.001, address=ADDRESS)
    assert json.loads(plain["failure"])["errmsg"] == "Authentication failed"
    network = lf.command_failed(NetworkTimeout("timed out"), "saslStart", "admin", 1, 0.001, address=ADDRESS)
    assert network["failure"] == "NetworkTimeout: timed out"
    assert str(network).endswith("Error: NetworkTimeout: timed out")
    assert network["durationMS"] == pytest.approx(1.0)


def test_long_documents_are_truncated():
    message = lf.command_started({"insert": "c", "documents": [{"s": "x" * 5000}]}, "db", 1, address=ADDRESS)
    assert len(message["command"]) == 1003 and message["command"].endswith("...")
    short = lf.command_started({"insert": "c", "documents": [{"s": "x" * 5000}]}, "db", 1, address=ADDRESS,
                               max_length=20)
    assert len(short["command"]) == 23


# -- server selection and topology -----------------------------------------------------------

def test_server_selection_messages():
    started = lf.server_selection_started("find", "Primary()", "<TopologyDescription>", operation_id=9)
    assert dict(started) == {"message": "Server selection started", "selector": "Primary()", "operationId": 9,
                             "operation": "find", "topologyDescription": "<TopologyDescription>"}
    assert str(started) == ("Server selection started for operation find with ID 9. Selector: Primary(), "
                            "topology description: <TopologyDescription>")
    succeeded = lf.server_selection_succeeded("find", "Primary()", "td", ("a", 27018))
    assert succeeded["serverHost"] == "a" and succeeded["serverPort"] == 27018
    assert "Selected server: a:27018." in str(succeeded)
    failed = lf.server_selection_failed("insert", "Primary()", "td", ServerSelectionTimeoutError("no primary"))
    assert failed["failure"] == "ServerSelectionTimeoutError: no primary"
    waiting = lf.waiting_for_suitable_server("insert", "Primary()", "td", 29000.0, operation_id=1)
    assert waiting["remainingTimeMS"] == 29000.0
    assert str(waiting).startswith("Waiting for server to become available for operation insert with ID 1. "
                                   "Remaining time: 29000.0 ms.")


def test_topology_messages():
    topology_id = ObjectId("5f0000000000000000000002")
    assert str(lf.starting_server_monitoring(topology_id, ("h", 1))) == (
        "Starting monitoring for server h:1 in topology with ID 5f0000000000000000000002")
    assert lf.stopped_topology_monitoring(topology_id)["topologyId"] == topology_id
    changed = lf.topology_description_changed(topology_id, "old", "new")
    assert str(changed).endswith("Previous description: old. New description: new")
    started = lf.heartbeat_started(topology_id, ("h", 1), True, driver_connection_id=3)
    assert started["awaited"] is True and "serverConnectionId" not in started
    assert str(started) == ("Heartbeat started for h:1 on connection with driver-generated ID 3 in topology with ID "
                            "5f0000000000000000000002. Awaited: True")
    succeeded = lf.heartbeat_succeeded(topology_id, ("h", 1), False, 0.004, {"ok": 1}, driver_connection_id=3,
                                       server_connection_id=8)
    assert succeeded["reply"] == '{"ok": 1}' and succeeded["durationMS"] == pytest.approx(4.0)
    assert "and server-generated ID 8" in str(succeeded)
    failed = lf.heartbeat_failed(topology_id, ("h", 1), False, 0.002, NetworkTimeout("t"))
    assert str(failed).endswith("Failure: NetworkTimeout: t")


def test_logger_names():
    assert lf.LOGGER_NAMES == {"command": "greenmongo.command", "topology": "greenmongo.topology",
                               "serverSelection": "greenmongo.serverSelection",
                               "connection": "greenmongo.connection"}


@pytest.mark.one_pass  # the client runs in a subprocess of its own
def test_a_client_applies_the_environment_at_construction(server_uri, tmp_path):
    """MONGODB_LOG_COMMAND and MONGODB_LOG_PATH take effect with no code but constructing a client (a fresh
    interpreter, so this process's loggers stay as they are)."""
    path = tmp_path / "commands.log"
    script = (
        "from greenmongo import MongoClient\n"
        f"client = MongoClient({server_uri!r}, serverSelectionTimeoutMS=10000)\n"
        "client.admin.command('ping')\n"
        "client.close()\n"
    )
    env = dict(os.environ, MONGODB_LOG_COMMAND="debug", MONGODB_LOG_PATH=str(path))
    env.pop("MONGODB_LOG_ALL", None)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env,
                          cwd=str(pathlib.Path(__file__).resolve().parent.parent))
    assert proc.returncode == 0, proc.stderr
    text = path.read_text()
    assert 'Command "ping" started on database "admin"' in text
    assert 'Command "ping" succeeded' in text
    assert "greenmongo.topology" not in text  # only the component asked for
