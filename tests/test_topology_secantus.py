"""The topology against a real server: SecantusDB, a single-node replica set named ``secantus``."""

from __future__ import annotations

import os
import subprocess
import sys
from time import monotonic

import pytest

from greenmongo.monitoring.topology import ServerHeartbeatStartedEvent, ServerHeartbeatSucceededEvent
from greenmongo.options import ClientOptions
from greenmongo.sdam.server_type import ServerType
from greenmongo.sdam.topology_type import TopologyType
from greenmongo.topology import Topology
from tests.servers.topology_harness import Recorder
from tests.waits import wait_until


def _topology(uri: str, recorder: Recorder, **options) -> Topology:
    options.setdefault("heartbeatFrequencyMS", 500)
    options.setdefault("serverSelectionTimeoutMS", 5000)
    return Topology.from_options(ClientOptions(uri, replicaSet="secantus", **options), event_listeners=[recorder])


def test_discovers_the_single_node_replica_set_and_streams_heartbeats(server_uri):
    recorder = Recorder()
    topology = _topology(server_uri, recorder)
    try:
        server = topology.select_server(is_write=True)
        try:
            with server.checkout() as conn:
                assert conn.command("admin", {"ping": 1})["ok"] == 1
        finally:
            server.end_operation()
        description = topology.description
        assert description.topology_type is TopologyType.ReplicaSetWithPrimary
        assert description.replica_set_name == "secantus"
        assert description.primary.address == server.address
        # The server supports awaitable hello: the monitor streams, and says so on its events.
        awaited = recorder.wait_for(lambda e: isinstance(e, ServerHeartbeatSucceededEvent) and e.awaited,
                                    timeout=3)
        assert awaited.reply["topologyVersion"]["processId"] is not None
        first = recorder.of(ServerHeartbeatStartedEvent)[0]
        assert first.awaited is False
        monitor = server.monitor
        wait_until(lambda: monitor.rtt_monitor is not None and monitor.rtt_monitor.samples_taken >= 1, 3, "RTT")
        assert topology.description.primary.round_trip_time is not None
    finally:
        topology.close()


_HUB_SCRIPT = r"""
import os, sys, time
if os.environ.get("GREENMONGO_TEST_PATCHED", "").lower() in ("1", "true", "yes"):
    from gevent import monkey
    monkey.patch_all()
import gevent
from greenmongo.options import ClientOptions
from greenmongo.topology import Topology
from tests.waits import wait_until

mode = sys.argv[2]
topology = Topology.from_options(ClientOptions(sys.argv[1], replicaSet="secantus", heartbeatFrequencyMS=500,
                                               serverMonitoringMode=mode))
topology.select_server(is_write=True).end_operation()
monitor = topology.get_server(topology.description.primary.address).monitor
wait_until(lambda: monitor.checks >= 3, 5, "three checks")  # past the handshake, into the protocol
started = time.monotonic()
joined = gevent.get_hub().join(timeout=3.0)
print("JOINED", joined, round(time.monotonic() - started, 3), len(topology.greenlets()), monitor.checks)
"""


@pytest.mark.parametrize("mode", ["stream", "poll"])
def test_unclosed_topology_does_not_keep_the_hub_alive(server_uri, mode):
    # In a process of its own: here, the SecantusDB child (watched by gevent when patched) and the
    # test servers of other modules would keep the hub alive regardless of the topology.
    result = subprocess.run([sys.executable, "-c", _HUB_SCRIPT, server_uri, mode], capture_output=True,
                            text=True, timeout=30, env=dict(os.environ))
    assert result.returncode == 0, result.stderr[-2000:]
    _, joined, seconds, greenlets, checks = result.stdout.split()
    assert joined == "True", result.stdout
    assert float(seconds) < 1.0
    # Still monitoring (monitor, plus the RTT greenlet when streaming), just not pinning the loop.
    assert int(greenlets) == (2 if mode == "stream" else 1)
    assert int(checks) >= 3


def test_replset_stepdown_then_recovery(fresh_server):
    server_process = fresh_server()
    recorder = Recorder()
    topology = _topology(server_process.uri, recorder)
    try:
        primary = topology.select_server(is_write=True)
        try:
            with primary.checkout() as conn:
                reply = conn.command("admin", {"replSetStepDown": 1, "force": True}, check=False)
                assert reply["ok"] == 1, reply
        finally:
            primary.end_operation()
        # The streaming monitor hears of the stepdown at once...
        wait_until(lambda: topology.description[primary.address].server_type is not ServerType.RSPrimary, 2,
                   "stepdown seen")
        assert topology.description.topology_type is TopologyType.ReplicaSetNoPrimary
        # ...and of the node becoming primary again; writes wait for it instead of failing.
        stepped_down_at = monotonic()
        server = topology.select_server(is_write=True, timeout=10)
        server.end_operation()
        assert server.address == primary.address
        assert monotonic() - stepped_down_at < 5
        assert topology.description.topology_type is TopologyType.ReplicaSetWithPrimary
        with server.checkout() as conn:
            assert conn.command("test", {"insert": "after_stepdown", "documents": [{"x": 1}]})["n"] == 1
        kinds = [e.new_description.server_type for e in recorder.events
                 if type(e).__name__ == "ServerDescriptionChangedEvent"]
        assert ServerType.RSSecondary in kinds or ServerType.Unknown in kinds
        assert kinds[-1] is ServerType.RSPrimary
    finally:
        topology.close()


@pytest.mark.parametrize("mode", ["poll"])
def test_polling_mode_against_secantus(server_uri, mode):
    recorder = Recorder()
    topology = _topology(server_uri, recorder, serverMonitoringMode=mode)
    try:
        topology.select_server(is_write=True).end_operation()
        wait_until(lambda: len(recorder.of(ServerHeartbeatSucceededEvent)) >= 2, 3, "two polls")
        assert not any(e.awaited for e in recorder.of(ServerHeartbeatStartedEvent, ServerHeartbeatSucceededEvent))
    finally:
        topology.close()
