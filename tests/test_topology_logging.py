"""The standardized SDAM (``greenmongo.topology``) and server selection log messages."""

from __future__ import annotations

import logging

import pytest

from greenmongo.errors import ServerSelectionTimeoutError
from greenmongo.monitoring.topology import ServerHeartbeatSucceededEvent
from greenmongo.options.read_preferences import SecondaryPreferred
from greenmongo.logs.topology import LogMessage, max_document_length, truncate
from tests.servers.topology_harness import Recorder, SimulatedTopology, make_topology
from tests.waits import wait_until


class Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def messages(self, logger_name: str) -> list[LogMessage]:
        return [r.msg for r in self.records if r.name == logger_name]


@pytest.fixture
def capture():
    handler = Capture()
    loggers = [logging.getLogger("greenmongo.topology"), logging.getLogger("greenmongo.serverSelection")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        for logger, level in zip(loggers, levels):
            logger.removeHandler(handler)
            logger.setLevel(level)


def test_sdam_log_messages(capture):
    with SimulatedTopology() as sim:
        (a,) = sim.mongoses(1)
        recorder = Recorder()
        topology = make_topology([a.address], listeners=[recorder])
        try:
            recorder.wait_for(lambda e: isinstance(e, ServerHeartbeatSucceededEvent) and e.awaited, timeout=3)
        finally:
            topology.close()
    messages = capture.messages("greenmongo.topology")
    kinds = [m["message"] for m in messages]
    assert kinds[0] == "Starting topology monitoring"
    assert kinds[1] == "Topology description changed"
    assert kinds[2] == "Starting server monitoring"
    assert kinds[-3:] == ["Stopped server monitoring", "Topology description changed", "Stopped topology monitoring"]
    assert all(m["topologyId"] == topology.topology_id for m in messages)
    started = [m for m in messages if m["message"] == "Server heartbeat started"]
    assert started[0]["awaited"] is False and started[1]["awaited"] is True
    assert started[0]["serverHost"] == "127.0.0.1" and started[0]["serverPort"] == a.address[1]
    succeeded = next(m for m in messages if m["message"] == "Server heartbeat succeeded")
    assert succeeded["driverConnectionId"] >= 1 and "serverConnectionId" in succeeded
    assert '"msg": "isdbgrid"' in succeeded["reply"] and succeeded["durationMS"] >= 0
    text = str(succeeded)
    assert text.startswith("Heartbeat succeeded in ") and "Awaited: False" in text and "Reply: {" in text
    opened = next(m for m in messages if m["message"] == "Starting server monitoring")
    assert str(opened) == (f"Starting monitoring for server 127.0.0.1:{a.address[1]} in topology with ID "
                           f"{topology.topology_id}")
    changed = next(m for m in messages if m["message"] == "Topology description changed")
    assert "previousDescription" in changed and "newDescription" in changed


def test_heartbeat_failure_is_logged(capture):
    topology = make_topology([("127.0.0.1", 1)], connect_timeout=0.5)
    try:
        wait_until(lambda: any(m["message"] == "Server heartbeat failed"
                               for m in capture.messages("greenmongo.topology")), 3, "failure logged")
    finally:
        topology.close()
    failed = next(m for m in capture.messages("greenmongo.topology") if m["message"] == "Server heartbeat failed")
    assert failed["awaited"] is False and "AutoReconnect" in failed["failure"]
    assert "Failure: AutoReconnect" in str(failed)


def test_server_selection_log_messages(capture):
    with SimulatedTopology() as sim:
        a, b = sim.replica_set(2, primary=None)
        topology = make_topology([a.address])
        try:
            wait_until(lambda: len(topology.description.known_servers) == 2, 3, "discovery")
            server = topology.select_server(SecondaryPreferred(), operation="find", operation_id=7)
            server.end_operation()
            with pytest.raises(ServerSelectionTimeoutError):
                topology.select_server(is_write=True, timeout=0.3, operation="insert")
        finally:
            topology.close()
    messages = capture.messages("greenmongo.serverSelection")
    kinds = [(m["message"], m.get("operation")) for m in messages]
    assert kinds == [("Server selection started", "find"), ("Server selection succeeded", "find"),
                     ("Server selection started", "insert"),
                     ("Waiting for suitable server to become available", "insert"),
                     ("Server selection failed", "insert")]
    succeeded = messages[1]
    assert succeeded["operationId"] == 7 and succeeded["serverHost"] == "127.0.0.1"
    assert succeeded["serverPort"] in (a.address[1], b.address[1])
    assert succeeded["selector"].startswith("read preference SecondaryPreferred")
    waiting = [m for m in messages if m["message"].startswith("Waiting")]
    assert len(waiting) == 1 and 0 < waiting[0]["remainingTimeMS"] <= 300
    waiting_record = next(r for r in capture.records if r.msg is waiting[0])
    assert waiting_record.levelno == logging.INFO
    failed = [m for m in messages if m["message"] == "Server selection failed"][-1]
    assert "ServerSelectionTimeoutError" in failed["failure"] and failed["selector"] == "writes"
    assert "topologyDescription" in failed


def test_truncation_and_max_document_length(monkeypatch):
    assert truncate("x" * 10, 4) == "xxxx..."
    assert truncate("short", 10) == "short"
    monkeypatch.setenv("MONGODB_LOG_MAX_DOCUMENT_LENGTH", "20")
    assert max_document_length() == 20
    monkeypatch.setenv("MONGODB_LOG_MAX_DOCUMENT_LENGTH", "not a number")
    assert max_document_length() == 1000


def test_at_info_only_the_wait_is_logged(capture):
    """An immediate selection with DEBUG off takes the short path: nothing logged, as before; one that must
    wait still logs its INFO message, and a selection right after DEBUG is switched on logs both of its own."""
    logging.getLogger("greenmongo.serverSelection").setLevel(logging.INFO)
    with SimulatedTopology() as sim:
        a, b = sim.replica_set(2, primary=None)
        topology = make_topology([a.address])
        try:
            wait_until(lambda: len(topology.description.known_servers) == 2, 3, "discovery")
            topology.select_server(SecondaryPreferred(), operation="find").end_operation()
            with pytest.raises(ServerSelectionTimeoutError):
                topology.select_server(is_write=True, timeout=0.2, operation="insert")
            logging.getLogger("greenmongo.serverSelection").setLevel(logging.DEBUG)
            topology.select_server(SecondaryPreferred(), operation="aggregate").end_operation()
        finally:
            topology.close()
    kinds = [(m["message"], m.get("operation")) for m in capture.messages("greenmongo.serverSelection")]
    assert kinds == [("Waiting for suitable server to become available", "insert"),
                     ("Server selection started", "aggregate"), ("Server selection succeeded", "aggregate")]
