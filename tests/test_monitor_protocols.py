"""Monitor greenlets through real sockets: streaming vs polling, serverMonitoringMode, the 500 ms
minimum, request/cancel, the retry-once rule, a hanging member, and idle wakeups."""

from __future__ import annotations

from time import monotonic

import gevent
import greenlet
import pytest

from greenmongo.errors import AutoReconnect, ConfigurationError, NetworkTimeout
from greenmongo.monitoring.pool import PoolClearedEvent
from greenmongo.monitoring.topology import (
    ServerDescriptionChangedEvent, ServerHeartbeatFailedEvent, ServerHeartbeatStartedEvent,
    ServerHeartbeatSucceededEvent,
)
from greenmongo.sdam.server_type import ServerType
from greenmongo.topology.monitor import running_in_faas, streaming_enabled
from tests.servers.topology_harness import Recorder, SimulatedTopology, make_topology
from tests.waits import assert_stays, observe, wait_until

HEARTBEATS = (ServerHeartbeatStartedEvent, ServerHeartbeatSucceededEvent, ServerHeartbeatFailedEvent)


@pytest.fixture
def sim():
    with SimulatedTopology() as simulated:
        yield simulated


def _heartbeats(recorder, address):
    return [e for e in recorder.of(*HEARTBEATS) if e.connection_id == address]


def test_streaming_protocol_awaits_hello_and_measures_rtt_separately(sim):
    (a,) = sim.mongoses(1)
    recorder = Recorder()
    topology = make_topology([a.address], heartbeat=0.5, listeners=[recorder])
    try:
        wait_until(lambda: sum(isinstance(e, ServerHeartbeatSucceededEvent) and e.awaited
                               for e in recorder.events) >= 2, 3, "two awaited heartbeats")
        beats = _heartbeats(recorder, a.address)
        assert [(type(e).__name__, e.awaited) for e in beats[:4]] == [
            ("ServerHeartbeatStartedEvent", False), ("ServerHeartbeatSucceededEvent", False),
            ("ServerHeartbeatStartedEvent", True), ("ServerHeartbeatSucceededEvent", True)]
        awaited = [e for e in beats if isinstance(e, ServerHeartbeatSucceededEvent) and e.awaited]
        assert all(0.4 < e.duration < 1.0 for e in awaited)  # the server waited maxAwaitTimeMS
        streamed = [r for r in a.hello_requests() if "maxAwaitTimeMS" in r.command]
        assert len(streamed) == 1  # one request, then a moreToCome stream
        assert streamed[0].exhaust_allowed and streamed[0].command["maxAwaitTimeMS"] == 500
        assert streamed[0].command["topologyVersion"]["processId"] == a.process_id
        monitor = topology.get_server(a.address).monitor
        wait_until(lambda: monitor.rtt_monitor is not None and monitor.rtt_monitor.samples_taken >= 2, 3,
                   "RTT pings")
        assert monitor.rtt.average is not None and monitor.rtt.minimum > 0
        # RTT pings use a connection of their own and publish nothing.
        plain = [r for r in a.hello_requests() if "maxAwaitTimeMS" not in r.command]
        assert len({r.connection_number for r in plain}) >= 2
        assert len(set(e.connection_id for e in beats)) == 1
    finally:
        topology.close()


def test_polling_protocol_waits_heartbeat_frequency_between_checks(sim):
    (a,) = sim.mongoses(1)
    recorder = Recorder()
    topology = make_topology([a.address], heartbeat=0.5, mode="poll", listeners=[recorder])
    try:
        wait_until(lambda: len(recorder.of(ServerHeartbeatSucceededEvent)) >= 3, 3, "three checks")
        beats = recorder.of(ServerHeartbeatStartedEvent)
        assert not any(e.awaited for e in recorder.of(*HEARTBEATS))
        times = [t for e, t in zip(recorder.events, recorder.times) if isinstance(e, ServerHeartbeatStartedEvent)]
        assert all(0.45 < later - earlier < 0.8 for earlier, later in zip(times, times[1:]))
        assert len(beats) >= 3
        assert not any("maxAwaitTimeMS" in r.command for r in a.hello_requests())
        assert topology.get_server(a.address).monitor.rtt_monitor is None  # no RTT connection when polling
        assert len({r.connection_number for r in a.hello_requests()}) == 1  # one monitoring connection
    finally:
        topology.close()


def test_stream_mode_polls_a_server_without_topology_version(sim):
    (a,) = sim.mongoses(1, streaming=False)
    recorder = Recorder()
    topology = make_topology([a.address], heartbeat=0.5, mode="stream", listeners=[recorder])
    try:
        wait_until(lambda: len(recorder.of(ServerHeartbeatSucceededEvent)) >= 2, 3, "two checks")
        assert not any(e.awaited for e in recorder.of(*HEARTBEATS))
        assert topology.get_server(a.address).monitor.rtt_monitor is None
    finally:
        topology.close()


def test_server_monitoring_mode_auto_polls_in_faas():
    assert streaming_enabled("stream", {"AWS_EXECUTION_ENV": "AWS_Lambda_python3.12"})
    assert not streaming_enabled("poll", {})
    assert streaming_enabled("auto", {})
    assert not streaming_enabled("auto", {"AWS_EXECUTION_ENV": "AWS_Lambda_python3.12"})
    assert not streaming_enabled("auto", {"FUNCTIONS_WORKER_RUNTIME": "python"})
    assert running_in_faas({"VERCEL": "1"})
    with pytest.raises(ConfigurationError):
        streaming_enabled("sometimes")


def test_auto_mode_topology_polls_when_faas_is_detected(sim, monkeypatch):
    monkeypatch.setenv("AWS_EXECUTION_ENV", "AWS_Lambda_python3.12")
    (a,) = sim.mongoses(1)
    recorder = Recorder()
    topology = make_topology([a.address], heartbeat=0.5, mode="auto", listeners=[recorder])
    try:
        assert not topology.streaming
        wait_until(lambda: len(recorder.of(ServerHeartbeatSucceededEvent)) >= 2, 3, "two checks")
        assert not any(e.awaited for e in recorder.of(*HEARTBEATS))
    finally:
        topology.close()


def test_requested_check_wakes_a_polling_monitor_but_not_before_500ms(sim):
    (a,) = sim.mongoses(1)
    recorder = Recorder()
    topology = make_topology([a.address], heartbeat=5.0, mode="poll", listeners=[recorder])
    try:
        recorder.wait_for(lambda e: isinstance(e, ServerHeartbeatSucceededEvent))
        first_done = recorder.times[-1]
        server = topology.get_server(a.address)
        server.request_check()
        wait_until(lambda: len(recorder.of(ServerHeartbeatStartedEvent)) == 2, 2, "requested check")
        second = [t for e, t in zip(recorder.events, recorder.times) if isinstance(e, ServerHeartbeatStartedEvent)][1]
        assert 0.49 <= second - first_done < 0.75
        # A request right after a check still waits out the minimum; many requests coalesce.
        second_ok = recorder.wait_for(lambda e: isinstance(e, ServerHeartbeatSucceededEvent) and len(
            recorder.of(ServerHeartbeatSucceededEvent)) == 2)
        done = recorder.times[recorder.events.index(second_ok)]
        for _ in range(20):
            server.request_check()
        # Not before the 500 ms minimum: no check until 0.4 s after the second one ended (the window
        # is measured from that event, so starting it late shortens it, never pushes it past 0.5 s).
        assert_stays(lambda: len(recorder.of(ServerHeartbeatStartedEvent)) == 2, done + 0.4 - monotonic(),
                     "two checks")
        wait_until(lambda: len(recorder.of(ServerHeartbeatStartedEvent)) == 3, 1, "third check")
        third = [t for e, t in zip(recorder.events, recorder.times) if isinstance(e, ServerHeartbeatStartedEvent)][2]
        assert third - done >= 0.45
        # The 20 requests coalesced into that one check: none follows (the heartbeat is 5 s away;
        # a second check for the requests would come 0.5 s after the third).
        assert_stays(lambda: len(recorder.of(ServerHeartbeatStartedEvent)) == 3, 0.6, "three checks")
    finally:
        topology.close()


def test_network_error_on_a_known_server_is_retried_at_once(sim):
    (a,) = sim.mongoses(1)
    recorder = Recorder()
    topology = make_topology([a.address], heartbeat=5.0, listeners=[recorder])
    try:
        recorder.wait_for(lambda e: isinstance(e, ServerHeartbeatStartedEvent) and e.awaited)
        a.close_connections()  # the awaited read fails with a network error
        failed = recorder.wait_for(lambda e: isinstance(e, ServerHeartbeatFailedEvent))
        failed_at = recorder.times[recorder.events.index(failed)]
        assert failed.awaited and isinstance(failed.reply, AutoReconnect)
        retry = recorder.wait_for(lambda e: isinstance(e, ServerHeartbeatSucceededEvent)
                                  and recorder.events.index(e) > recorder.events.index(failed), timeout=1)
        retried_at = recorder.times[recorder.events.index(retry)]
        assert retried_at - failed_at < 0.3  # no heartbeat wait (5 s), no 500 ms minimum
        assert not retry.awaited  # a new connection's handshake
        assert recorder.of(PoolClearedEvent)
        changes = [e.new_description.server_type for e in recorder.of(ServerDescriptionChangedEvent)]
        assert changes[-2:] == [ServerType.Unknown, ServerType.Mongos]
        # The retry succeeded: the server is known again without waiting for a heartbeat.
        assert topology.description[a.address].server_type is ServerType.Mongos
    finally:
        topology.close()


def test_application_network_error_cancels_the_streaming_check(sim):
    (a,) = sim.mongoses(1)
    recorder = Recorder()
    topology = make_topology([a.address], heartbeat=5.0, listeners=[recorder])
    try:
        server = topology.select_server(is_write=True)
        try:
            recorder.wait_for(lambda e: isinstance(e, ServerHeartbeatStartedEvent) and e.awaited)
            with server.checkout() as conn:
                decision = server.handle_error(AutoReconnect("connection reset by peer"), conn)
            cancelled_at = monotonic()
            assert decision.cancel_check
        finally:
            server.end_operation()
        failed = recorder.wait_for(lambda e: isinstance(e, ServerHeartbeatFailedEvent), timeout=1)
        assert failed.awaited and "cancelled" in str(failed.reply)
        assert monotonic() - cancelled_at < 0.2  # interrupted, not left to time out
        assert topology.description[a.address].server_type is ServerType.Unknown
        # Selection requests a check; the monitor reconnects after the 500 ms minimum.
        selected = topology.select_server(is_write=True, timeout=2)
        selected.end_operation()
        assert 0.45 <= monotonic() - cancelled_at < 1.5
    finally:
        topology.close()


@pytest.mark.parametrize("mode", ["stream", "poll"])
def test_hanging_member_times_out_clears_pool_and_interrupts_in_use_connections(sim, mode):
    a, b, c = sim.replica_set(3)
    recorder = Recorder()
    topology = make_topology([a.address], heartbeat=0.5, connect_timeout=0.3, mode=mode, listeners=[recorder])
    try:
        wait_until(lambda: len(topology.description.known_servers) == 3, 3, "discovery")
        server = topology.select_server(is_write=True)
        outcome = []

        def long_operation():
            try:
                with server.checkout() as conn:
                    conn.command("admin", {"sleep": 1, "seconds": 30}, timeout=None)
            except Exception as exc:  # noqa: BLE001 - the interruption is what we wait for
                outcome.append((exc, monotonic()))

        operation = gevent.spawn(long_operation)
        wait_until(lambda: a.server.commands("sleep"), message="the long operation reached the member")
        hung_at = monotonic()
        a.hang()
        operation.join(3.0)
        server.end_operation()
        assert outcome, "the in-use connection was not interrupted"
        error, failed_at = outcome[0]
        assert isinstance(error, AutoReconnect)
        # Streaming: connectTimeoutMS + heartbeatFrequencyMS; polling: the next check's connectTimeoutMS.
        assert failed_at - hung_at < 1.6
        failed = recorder.wait_for(lambda e: isinstance(e, ServerHeartbeatFailedEvent)
                                   and e.connection_id == a.address)
        assert isinstance(failed.reply, NetworkTimeout)
        cleared = [e for e in recorder.of(PoolClearedEvent) if e.address == a.address]
        assert cleared and cleared[0].interrupt_connections
        assert topology.description[a.address].server_type is ServerType.Unknown
        assert topology.description.primary is None
        a.resume()
        wait_until(lambda: topology.description.primary is not None, 3, "primary back")
    finally:
        topology.close()


def test_idle_streaming_topology_wakes_only_for_heartbeats_and_rtt_pings(sim):
    (a,) = sim.mongoses(1)
    recorder = Recorder()
    heartbeat = 1.0
    topology = make_topology([a.address], heartbeat=heartbeat, listeners=[recorder])
    try:
        monitor = topology.get_server(a.address).monitor
        wait_until(lambda: monitor.rtt_monitor is not None and monitor.rtt_monitor.samples_taken >= 1, 3, "RTT")
        recorder.wait_for(lambda e: isinstance(e, ServerHeartbeatSucceededEvent) and e.awaited, timeout=3)
        monitor_greenlet, rtt_greenlet = monitor.greenlets
        switches = []

        def trace(event, args):
            if event in ("switch", "throw"):
                target = args[1]
                if target is monitor_greenlet or target is rtt_greenlet:
                    switches.append((monotonic(), target))
            if previous is not None:
                previous(event, args)

        recorder.clear()
        pings_before = monitor.rtt_monitor.samples_taken
        previous = greenlet.settrace(trace)
        started = monotonic()
        try:
            observe(2.5 * heartbeat)
        finally:
            greenlet.settrace(previous)
        pings = monitor.rtt_monitor.samples_taken - pings_before
        awaited = [t for e, t in zip(recorder.events, recorder.times) if isinstance(e, ServerHeartbeatSucceededEvent)]
        assert 2 <= len(awaited) <= 3 and 2 <= pings <= 3
        into_monitor = [t for t, g in switches if g is monitor_greenlet]
        into_rtt = [t for t, g in switches if g is rtt_greenlet]
        # The monitor runs only when an awaited reply arrives: each wakeup is right before a heartbeat event.
        assert len(into_monitor) <= 2 * len(awaited)
        for when in into_monitor:
            assert any(0 <= beat - when < 0.05 for beat in awaited), (when - started, [b - started for b in awaited])
        # The RTT greenlet wakes for its timer and its ping's reply, nothing else.
        assert len(into_rtt) <= 3 * pings + 1
    finally:
        topology.close()
