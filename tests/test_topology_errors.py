"""Application errors applied to the topology: establishment (backpressure, auth), state changes,
timeouts, and the pool generation rule - through real sockets."""

from __future__ import annotations

import pytest

from greenmongo.errors import AutoReconnect, NetworkTimeout, NotPrimaryError, OperationFailure
from greenmongo.monitoring.pool import PoolClearedEvent
from greenmongo.monitoring.topology import ServerDescriptionChangedEvent
from greenmongo.options import ClientOptions
from greenmongo.pool import PoolOptions
from greenmongo.sdam.server_type import ServerType
from tests.servers.scripted import Reply
from tests.servers.topology_harness import Recorder, SimulatedTopology, make_topology
from tests.waits import wait_until


@pytest.fixture
def sim():
    with SimulatedTopology() as simulated:
        yield simulated


def _known(topology, member):
    return topology.description[member.address].server_type is not ServerType.Unknown


def test_network_error_while_connecting_is_backpressure_not_a_dead_server(sim):
    (a,) = sim.mongoses(1)
    recorder = Recorder()
    topology = make_topology([a.address], mode="poll", heartbeat=5.0, listeners=[recorder])
    try:
        server = topology.select_server(is_write=True)
        try:
            a.fail_handshakes = 1
            with pytest.raises(AutoReconnect) as info:
                with server.checkout():
                    pass
            assert info.value.has_error_label("SystemOverloadedError")
            assert info.value.has_error_label("RetryableError")
        finally:
            server.end_operation()
        assert topology.description[a.address].server_type is ServerType.Mongos
        assert not recorder.of(PoolClearedEvent)
        with server.checkout() as conn:  # the next attempt simply works
            assert conn.command("admin", {"ping": 1})["ok"] == 1
    finally:
        topology.close()


def test_authentication_failure_marks_unknown_and_clears_the_pool(sim):
    (a,) = sim.mongoses(1)
    a.server.script("saslStart", Reply({"ok": 0, "code": 18, "codeName": "AuthenticationFailed",
                                        "errmsg": "Authentication failed."}))
    credentials = ClientOptions(f"mongodb://user:pencil@{a.host}/?authMechanism=SCRAM-SHA-256").credentials
    recorder = Recorder()
    topology = make_topology([a.address], mode="poll", heartbeat=5.0, listeners=[recorder], credentials=credentials)
    try:
        server = topology.select_server(is_write=True)
        try:
            with pytest.raises(OperationFailure):
                with server.checkout():
                    pass
        finally:
            server.end_operation()
        assert topology.description[a.address].server_type is ServerType.Unknown
        assert recorder.of(PoolClearedEvent)
        # Monitoring connections never authenticate, so the monitor brings the server back.
        wait_until(lambda: _known(topology, a), 3, "server known again")
        assert len(a.server.commands("saslStart")) == 1
    finally:
        topology.close()


def test_min_pool_size_population_errors_go_through_sdam(sim):
    (a,) = sim.mongoses(1)
    a.server.script("saslStart", Reply({"ok": 0, "code": 18, "errmsg": "Authentication failed."}))
    credentials = ClientOptions(f"mongodb://user:pencil@{a.host}/?authMechanism=SCRAM-SHA-256").credentials
    recorder = Recorder()
    topology = make_topology([a.address], mode="poll", heartbeat=5.0, listeners=[recorder], credentials=credentials,
                             pool_options=PoolOptions(min_pool_size=1))
    try:
        cleared = recorder.wait_for(lambda e: isinstance(e, PoolClearedEvent), timeout=3)
        assert cleared.address == a.address
        assert any(isinstance(e, ServerDescriptionChangedEvent)
                   and e.new_description.server_type is ServerType.Unknown
                   and isinstance(e.new_description.error, OperationFailure) for e in recorder.events)
    finally:
        topology.close()


def test_shutdown_error_clears_the_pool_and_not_primary_does_not(sim):
    a, b = sim.replica_set(2)
    recorder = Recorder()
    topology = make_topology([a.address], heartbeat=5.0, listeners=[recorder])
    try:
        server = topology.select_server(is_write=True)
        try:
            with server.checkout() as conn:
                decision = server.handle_error(NotPrimaryError("not primary", {
                    "ok": 0, "code": 10107, "errmsg": "not primary",
                    "topologyVersion": {"processId": a.process_id, "counter": a.counter + 1}}), conn)
            assert decision.unknown is not None and not decision.clear_pool and decision.request_check
            assert not recorder.of(PoolClearedEvent)
            a.changed()  # the server's topologyVersion moves on: the stream brings it back
            wait_until(lambda: _known(topology, a), 2, "rediscovered")
            with server.checkout() as conn:
                decision = server.handle_error(OperationFailure("shutting down", 91, {
                    "ok": 0, "code": 91, "errmsg": "The server is in quiesce mode and will shut down",
                    "topologyVersion": {"processId": a.process_id, "counter": a.counter + 1}}), conn)
            assert decision.clear_pool
            assert recorder.of(PoolClearedEvent)
        finally:
            server.end_operation()
    finally:
        topology.close()


def test_timeout_after_the_handshake_changes_nothing(sim):
    (a,) = sim.mongoses(1)
    recorder = Recorder()
    topology = make_topology([a.address], listeners=[recorder])
    try:
        server = topology.select_server(is_write=True)
        try:
            with server.checkout() as conn:
                decision = server.handle_error(NetworkTimeout("timed out"), conn)
        finally:
            server.end_operation()
        assert decision.ignored
        assert topology.description[a.address].server_type is ServerType.Mongos
        assert not recorder.of(PoolClearedEvent)
    finally:
        topology.close()
