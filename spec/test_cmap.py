"""CMAP spec tests: connection-monitoring-and-pooling/tests/cmap-format (one item per file).

The format's "threads" are greenlets, each fed operations through a queue.
Unit files run against a mock connection factory; the "integration" files
(``runOn`` + ``failPoint``) run the real greenmongo.net connection against
SecantusDB with its ``failCommand`` failpoint.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Dict, List, Optional

import gevent
import gevent.queue
import pytest

from greenmongo.monitoring.pool import (ConnectionCheckedInEvent, ConnectionCheckedOutEvent,
                                        ConnectionCheckOutFailedEvent, ConnectionCheckOutStartedEvent,
                                        ConnectionClosedEvent, ConnectionCreatedEvent,
                                        ConnectionReadyEvent, PoolClearedEvent,
                                        PoolClosedEvent, PoolCreatedEvent, PoolReadyEvent)
from greenmongo.pool import Pool, PoolOptions
from spec.support import MissingSpecData, file_params, load_json
from tests.api_support import PoolRecorder
from tests.waits import wait_until

SUBDIR = "connection-monitoring-and-pooling/tests/cmap-format"

EVENT_NAMES = {
    PoolCreatedEvent: "ConnectionPoolCreated",
    PoolReadyEvent: "ConnectionPoolReady",
    PoolClearedEvent: "ConnectionPoolCleared",
    PoolClosedEvent: "ConnectionPoolClosed",
    ConnectionCreatedEvent: "ConnectionCreated",
    ConnectionReadyEvent: "ConnectionReady",
    ConnectionClosedEvent: "ConnectionClosed",
    ConnectionCheckOutStartedEvent: "ConnectionCheckOutStarted",
    ConnectionCheckOutFailedEvent: "ConnectionCheckOutFailed",
    ConnectionCheckedOutEvent: "ConnectionCheckedOut",
    ConnectionCheckedInEvent: "ConnectionCheckedIn",
}

DEFAULT_WAIT_FOR_EVENT_TIMEOUT_MS = 10_000
THREAD_JOIN_TIMEOUT = 10.0


class RunnerFailure(AssertionError):
    """The runner itself gave up (an event never came, a thread never ended): a test failure."""


class MockConnection:
    """What a unit test needs from a connection: an id, ``closed`` and ``close()``."""

    def __init__(self, connection_id: int) -> None:
        self.id = connection_id
        self.closed = False

    def close(self) -> None:
        self.closed = True


class Recorder(PoolRecorder):
    def count(self, name: str) -> int:
        return sum(1 for event in self.events if EVENT_NAMES[type(event)] == name)


def event_document(event: Any) -> Dict[str, Any]:
    """The event as the test format names its fields; absent values are left out."""
    doc: Dict[str, Any] = {"type": EVENT_NAMES[type(event)], "address": event.address}
    for field, attr in (("connectionId", "connection_id"), ("duration", "duration"),
                        ("options", "options"), ("reason", "reason"),
                        ("interruptInUseConnections", "interrupt_connections"),
                        ("serviceId", "service_id")):
        value = getattr(event, attr, None)
        if value is not None:
            doc[field] = value
    return doc


def assert_matches(actual: Any, expected: Any, path: str) -> None:
    """The format's MATCH: ``expected`` is a subset of ``actual``; 42 / "42" mean "exists"."""
    if expected == 42 or expected == "42":
        assert actual is not None, f"{path}: expected a value, got nothing"
        return
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{path}: expected a document, got {actual!r}"
        for key, value in expected.items():
            assert key in actual, f"{path}.{key}: missing in {actual!r}"
            assert_matches(actual[key], value, f"{path}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list), f"{path}: expected an array, got {actual!r}"
        for index, value in enumerate(expected):
            assert index < len(actual), f"{path}[{index}]: missing in {actual!r}"
            assert_matches(actual[index], value, f"{path}[{index}]")
    else:
        assert type(actual) is type(expected) or (
            isinstance(actual, (int, float)) and isinstance(expected, (int, float))
            and not isinstance(actual, bool)), f"{path}: {actual!r} is not like {expected!r}"
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


def pool_options(raw: Dict[str, Any]) -> PoolOptions:
    def seconds(key: str) -> Optional[float]:
        return raw[key] / 1000.0 if key in raw else None

    return PoolOptions(
        max_pool_size=raw.get("maxPoolSize", 100),
        min_pool_size=raw.get("minPoolSize", 0),
        max_idle_time=seconds("maxIdleTimeMS"),
        wait_queue_timeout=seconds("waitQueueTimeoutMS"),
        max_connecting=raw.get("maxConnecting", 2),
        maintenance_interval=seconds("backgroundThreadIntervalMS"),
    )


class Worker:
    """A format "thread": runs the operations it is sent, in order, in its own greenlet."""

    _STOP = object()

    def __init__(self, runner: "Runner", name: str) -> None:
        self.runner = runner
        self.name = name
        self.queue: gevent.queue.Queue = gevent.queue.Queue()
        self.error: Optional[BaseException] = None
        self.greenlet = gevent.spawn(self._run)

    def _run(self) -> None:
        while True:
            operation = self.queue.get()
            if operation is self._STOP:
                return
            if self.error is not None:
                continue
            try:
                self.runner.run_operation(operation)
            except Exception as exc:
                self.error = exc

    def finish(self) -> None:
        self.queue.put(self._STOP)
        self.greenlet.join(timeout=THREAD_JOIN_TIMEOUT)
        if not self.greenlet.dead:
            raise RunnerFailure(f"thread {self.name} did not finish within {THREAD_JOIN_TIMEOUT}s")
        if self.error is not None:
            raise self.error


class Runner:
    def __init__(self, pool: Pool, recorder: Recorder) -> None:
        self.pool = pool
        self.recorder = recorder
        self.threads: Dict[str, Worker] = {}
        self.labels: Dict[str, Any] = {}

    def run_operations(self, operations: List[Dict[str, Any]]) -> None:
        for operation in operations:
            thread = operation.get("thread")
            if thread is None:
                self.run_operation(operation)
            else:
                self.threads[thread].queue.put(operation)

    def run_operation(self, operation: Dict[str, Any]) -> None:
        name = operation["name"]
        if name == "start":
            self.threads[operation["target"]] = Worker(self, operation["target"])
        elif name == "wait":
            gevent.sleep(operation["ms"] / 1000.0)
        elif name == "waitForThread":
            self.threads[operation["target"]].finish()
        elif name == "waitForEvent":
            self.wait_for_event(operation["event"], operation["count"],
                                operation.get("timeout", DEFAULT_WAIT_FOR_EVENT_TIMEOUT_MS))
        elif name == "checkOut":
            conn = self.pool.check_out()
            if "label" in operation:
                self.labels[operation["label"]] = conn
        elif name == "checkIn":
            self.pool.check_in(self.labels[operation["connection"]])
        elif name == "clear":
            self.pool.clear(interrupt_in_use_connections=operation.get("interruptInUseConnections", False))
        elif name == "close":
            self.pool.close()
        elif name == "ready":
            self.pool.ready()
        else:
            raise RunnerFailure(f"unknown operation {name!r}")

    def wait_for_event(self, event: str, count: int, timeout_ms: float) -> None:
        wait_until(lambda: self.recorder.count(event) >= count, timeout_ms / 1000.0,
                   lambda: f"waited {timeout_ms} ms for {count} {event} events, saw {self.recorder.count(event)}",
                   error=RunnerFailure, interval=0.001)

    def cleanup(self) -> None:
        for worker in self.threads.values():
            worker.greenlet.kill(block=True, timeout=THREAD_JOIN_TIMEOUT)
        self.pool.close()


# -- integration support ----------------------------------------------------

INTEGRATION_SKIP = "requires greenmongo.net.connection.Connection (the real connection) to run against SecantusDB"


def real_connection_factory():
    """(open_connection, ConnectionSettings), or None when the real connection is not there yet."""
    if not (Path(__file__).resolve().parent.parent / "greenmongo" / "net" / "connection.py").exists():
        return None
    try:
        from greenmongo.net.handshake import open_connection
        from greenmongo.options.connection_settings import ConnectionSettings
    except ImportError:
        return None
    return open_connection, ConnectionSettings


@pytest.fixture(scope="module")
def cmap_server_address() -> Any:
    """(host, port) of MONGODB_URI's server, or of a SecantusDB started for this module."""
    import os

    override = os.environ.get("MONGODB_URI")
    if override:
        yield host_port(override)
        return
    from tests.servers.secantus import SecantusServer

    server = SecantusServer().start()
    try:
        yield server.address
    finally:
        server.stop()


def host_port(uri: str) -> tuple[str, int]:
    match = re.match(r"mongodb://(?:[^@/]*@)?([^:/,?]+):(\d+)", uri)
    if not match:
        raise RunnerFailure(f"cannot find host:port in {uri!r}")
    return match.group(1), int(match.group(2))


def server_version(address: tuple[str, int]) -> tuple[int, ...]:
    from tests.servers.secantus import raw_command

    reply = raw_command(address[0], address[1], {"buildInfo": 1, "$db": "admin"})
    return tuple(int(part) for part in reply.get("versionArray", [0])[:3])


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".")[:3])


def run_on_satisfied(requirements: List[Dict[str, Any]], version: tuple[int, ...]) -> bool:
    for requirement in requirements:
        low = requirement.get("minServerVersion")
        high = requirement.get("maxServerVersion")
        if low and version < version_tuple(low):
            continue
        if high and version > version_tuple(high):
            continue
        return True
    return False


# -- the test ---------------------------------------------------------------

@pytest.mark.parametrize("path", file_params(SUBDIR))
def test_cmap(path: Path, request: pytest.FixtureRequest) -> None:
    if isinstance(path, MissingSpecData):
        pytest.skip(f"spec data for {path.where} not found")
    spec = load_json(path)
    recorder = Recorder()
    options = pool_options(spec.get("poolOptions", {}))
    fail_point = spec.get("failPoint")
    server_address = None

    if spec["style"] == "integration" or "runOn" in spec or fail_point:
        factory_parts = real_connection_factory()
        if factory_parts is None:
            pytest.skip(INTEGRATION_SKIP)
        open_connection, ConnectionSettings = factory_parts
        server_address = tuple(request.getfixturevalue("cmap_server_address"))
        if "runOn" in spec and not run_on_satisfied(spec["runOn"], server_version(server_address)):
            pytest.skip(f"server version does not satisfy runOn {spec['runOn']}")
        settings = ConnectionSettings(appname=spec.get("poolOptions", {}).get("appName"))

        def factory(connection_id: int) -> Any:
            return open_connection(server_address, settings, conn_id=connection_id)

        holder: Dict[str, Pool] = {}
        pool = Pool(server_address, factory, options, [recorder],
                    on_populate_error=lambda error: holder["pool"].clear(cause=error))
        holder["pool"] = pool
    else:
        pool = Pool(("localhost", 27017), MockConnection, options, [recorder])

    if fail_point:
        from tests.servers.secantus import raw_command

        raw_command(*server_address, {**fail_point, "$db": "admin"})
    runner = Runner(pool, recorder)
    error: Optional[BaseException] = None
    events: List[Any] = []
    try:
        try:
            runner.run_operations(spec["operations"])
        except RunnerFailure:
            raise
        except Exception as exc:
            error = exc
        events = list(recorder.events)  # what the operations caused, before cleanup closes the pool
    finally:
        runner.cleanup()
        if fail_point:
            raw_command(*server_address, {"configureFailPoint": fail_point["configureFailPoint"],
                                          "mode": "off", "$db": "admin"})

    expected_error = spec.get("error")
    if expected_error:
        assert error is not None, f"expected {expected_error}, no error was raised"
        actual = {"type": type(error).__name__, "message": str(error)}
        message = expected_error.get("message")
        if expected_error.get("type") == "WaitQueueTimeoutError" and isinstance(message, str):
            # The spec's sentence comes first; greenmongo (as PyMongo) goes on with who holds the connections.
            assert str(error).startswith(message + ". "), f"error.message: {str(error)!r} does not start: {message!r}"
            actual["message"] = message
        if getattr(error, "address", None) is not None:
            actual["address"] = error.address
        assert_matches(actual, expected_error, "error")
    elif error is not None:
        raise error

    ignore = set(spec.get("ignore", ()))
    actual_events = [event_document(event) for event in events
                     if EVENT_NAMES[type(event)] not in ignore]
    for index, expected in enumerate(spec.get("events", ())):
        assert index < len(actual_events), (
            f"event {index} {expected} missing; got {[e['type'] for e in actual_events]}")
        assert_matches(actual_events[index], expected, f"events[{index}]")
