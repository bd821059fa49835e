"""Server selection through real sockets: read preferences, the mongos latency window, operation
counts, deprioritized servers, timeouts, kill-safety and load-balanced mode."""

from __future__ import annotations

import random
from collections import Counter
from time import monotonic

import gevent
import pytest

from greenmongo.bson.objectid import ObjectId
from greenmongo.errors import AutoReconnect, ConfigurationError, ServerSelectionTimeoutError
from greenmongo.monitoring.pool import PoolClearedEvent, PoolReadyEvent
from greenmongo.monitoring.topology import (
    ServerDescriptionChangedEvent, ServerHeartbeatStartedEvent, ServerOpeningEvent,
    TopologyDescriptionChangedEvent, TopologyOpenedEvent,
)
from greenmongo.options.read_preferences import Nearest, PrimaryPreferred, Secondary, SecondaryPreferred
from greenmongo.sdam.server_type import ServerType
from greenmongo.sdam.topology_type import TopologyType
from tests.servers.scripted import ScriptedServer
from tests.servers.topology_harness import Recorder, SimulatedTopology, make_topology
from tests.waits import assert_stays, wait_until


@pytest.fixture
def sim():
    with SimulatedTopology() as simulated:
        yield simulated


def _select(topology, *args, **kwargs):
    server = topology.select_server(*args, **kwargs)
    server.end_operation()
    return server.address


def test_read_preference_routing_with_tags(sim):
    a, b, c = sim.replica_set(3, tags=[{"dc": "ny"}, {"dc": "sf"}, {"dc": "ny", "rack": "2"}])
    # Tags are what this test routes by, not round trips: a window wide enough that one jittery loopback RTT
    # sample on a loaded machine cannot push an equally fast secondary out of it (the default is 15 ms).
    topology = make_topology([a.address], local_threshold_ms=1000)
    try:
        wait_until(lambda: len(topology.description.known_servers) == 3, 3, "discovery")
        assert _select(topology, is_write=True) == a.address
        assert _select(topology) == a.address  # primary by default
        assert _select(topology, PrimaryPreferred()) == a.address
        assert _select(topology, Secondary(tag_sets=[{"dc": "sf"}])) == b.address
        assert _select(topology, Secondary(tag_sets=[{"rack": "2"}, {"dc": "sf"}])) == c.address
        assert _select(topology, SecondaryPreferred(tag_sets=[{"dc": "tokyo"}])) == a.address
        assert {_select(topology, Secondary()) for _ in range(40)} == {b.address, c.address}
        assert _select(topology, Nearest(tag_sets=[{"dc": "sf"}])) == b.address
        # No secondary in "tokyo": waits, then times out describing the topology.
        with pytest.raises(ServerSelectionTimeoutError) as info:
            topology.select_server(Secondary(tag_sets=[{"dc": "tokyo"}]), timeout=0.2)
        assert "Secondary" in str(info.value) and "tokyo" in str(info.value)
        # An invalid read preference for this topology fails at once (waiting cannot help).
        started = monotonic()
        with pytest.raises(ConfigurationError):
            topology.select_server(Secondary(max_staleness=10), timeout=5)
        assert monotonic() - started < 0.5
        # When the primary goes away, primaryPreferred reads move to a secondary.
        a.hang()
        topology.get_server(a.address).handle_error(AutoReconnect("reset"), None, completed_handshake=False)
        assert _select(topology, PrimaryPreferred()) in (b.address, c.address)
        a.resume()
    finally:
        topology.close()


def test_mongos_latency_window_excludes_the_slow_router(sim):
    fast1, fast2, slow = sim.mongoses(3)
    slow.delay = 0.08  # 80 ms slower than the others
    # A 40 ms window rather than the default 15: on a loaded machine one loopback RTT sample can
    # jitter past 15 ms and push a fast router out, while the slow one stays ~80 ms away.
    topology = make_topology([fast1.address, fast2.address, slow.address], heartbeat=0.5,
                             local_threshold_ms=40)
    try:
        wait_until(lambda: len(topology.description.known_servers) == 3, 3, "discovery")
        assert topology.description.topology_type is TopologyType.Sharded
        # Wait for RTT samples beyond the handshake (the RTT greenlet pings every heartbeat).
        wait_until(lambda: all(s.monitor.rtt_monitor is not None and s.monitor.rtt_monitor.samples_taken >= 1
                               for s in topology.servers().values()), 3, "RTT samples")
        assert topology.description[slow.address].round_trip_time > 0.05
        fast_rtt = max(topology.description[a].round_trip_time for a in (fast1.address, fast2.address))
        assert fast_rtt < 0.04, f"the fast routers' RTT ({fast_rtt:.3f} s) is too noisy for this test"
        chosen = Counter(_select(topology, is_write=True) for _ in range(60))
        assert set(chosen) == {fast1.address, fast2.address}
        assert min(chosen.values()) > 10  # both fast routers are used
        # Selecting by address (a getMore on a cursor's router) still reaches the slow one.
        assert topology.select_server_by_address(slow.address).address == slow.address
    finally:
        for server in topology.servers().values():
            while server.operation_count:
                server.end_operation()
        topology.close()


def test_power_of_two_choices_prefers_the_less_busy_router(sim):
    one, two = sim.mongoses(2)
    # Operation counts are what this test routes by, not round trips: a window wide enough that one jittery
    # loopback RTT sample cannot push the idle router out of it (a CI run saw every selection go to the busy one).
    topology = make_topology([one.address, two.address], rng=random.Random(7), local_threshold_ms=1000)
    try:
        wait_until(lambda: len(topology.description.known_servers) == 2, 3, "discovery")
        busy = [topology.select_server_by_address(one.address) for _ in range(5)]
        assert topology.get_server(one.address).operation_count == 5
        assert {_select(topology, is_write=True) for _ in range(20)} == {two.address}
        for server in busy:
            server.end_operation()
        assert topology.get_server(one.address).operation_count == 0
        with topology.operation_server(is_write=True) as server:
            assert server.operation_count == 1
        assert server.operation_count == 0
    finally:
        topology.close()


def test_deprioritized_router_is_used_only_when_nothing_else_suits(sim):
    one, two = sim.mongoses(2)
    topology = make_topology([one.address, two.address])
    try:
        wait_until(lambda: len(topology.description.known_servers) == 2, 3, "discovery")
        assert {_select(topology, is_write=True, deprioritized=[one.address]) for _ in range(20)} == {two.address}
        assert _select(topology, is_write=True, deprioritized=[one.address, two.address]) in (
            one.address, two.address)
    finally:
        topology.close()


def test_custom_server_selector_is_applied(sim):
    one, two = sim.mongoses(2)
    topology = make_topology([one.address, two.address],
                             server_selector=lambda servers: [s for s in servers if s.address == two.address])
    try:
        assert {_select(topology, is_write=True) for _ in range(10)} == {two.address}
        # A per-call selector (positional) narrows further; the client's still applies.
        assert _select(topology, lambda servers: servers) == two.address
        with pytest.raises(ServerSelectionTimeoutError):
            topology.select_server(lambda servers: [s for s in servers if s.address == one.address], timeout=0.1)
    finally:
        topology.close()


def test_zero_timeout_tries_once_and_error_names_the_server_errors():
    topology = make_topology([("127.0.0.1", 1)], connect_timeout=0.5)  # nothing listens on port 1
    try:
        started = monotonic()
        with pytest.raises(ServerSelectionTimeoutError) as info:
            topology.select_server(timeout=0)
        assert monotonic() - started < 0.2
        with pytest.raises(ServerSelectionTimeoutError) as info:
            topology.select_server(timeout=0.5)
        message = str(info.value)
        assert "127.0.0.1:1" in message and "Timeout: 0.5s" in message and "Topology Description" in message
    finally:
        topology.close()


def test_killed_or_timed_out_selection_leaves_nothing_behind(sim):
    a, b, c = sim.replica_set(3, primary=None)
    topology = make_topology([a.address])
    try:
        wait_until(lambda: len(topology.description.known_servers) == 3, 3, "discovery")
        waiters = [gevent.spawn(topology.select_server, is_write=True, timeout=10) for _ in range(5)]
        wait_until(lambda: topology._changed.linkcount() == 5, message="five selections waiting on the change event")
        assert all(not w.dead for w in waiters)
        gevent.killall(waiters)
        with pytest.raises(gevent.Timeout):
            with gevent.Timeout(0.1):
                topology.select_server(is_write=True, timeout=10)
        # Nothing counted, nobody left linked to the change event.
        assert all(s.operation_count == 0 for s in topology.servers().values())
        assert topology._changed.linkcount() == 0
        sim.elect(b)
        assert _select(topology, is_write=True, timeout=2) == b.address
        assert all(s.operation_count == 0 for s in topology.servers().values())
    finally:
        topology.close()


def test_load_balanced_mode_has_one_server_no_monitor_and_clears_by_service_id():
    service_id = ObjectId()
    with ScriptedServer(service_id=service_id) as balancer:
        recorder = Recorder()
        topology = make_topology([balancer.address], load_balanced=True, listeners=[recorder])
        try:
            names = [type(e).__name__ for e in recorder.events
                     if isinstance(e, (TopologyOpenedEvent, TopologyDescriptionChangedEvent, ServerOpeningEvent,
                                       ServerDescriptionChangedEvent))]
            assert names == ["TopologyOpenedEvent", "TopologyDescriptionChangedEvent", "ServerOpeningEvent",
                             "ServerDescriptionChangedEvent", "TopologyDescriptionChangedEvent"]
            changes = recorder.of(TopologyDescriptionChangedEvent)
            assert changes[0].new_description.topology_type is TopologyType.LoadBalanced
            assert list(changes[0].new_description.server_descriptions().values())[0].server_type \
                is ServerType.Unknown
            assert changes[1].new_description[balancer.address].server_type is ServerType.LoadBalancer
            assert recorder.of(PoolReadyEvent)
            server = topology.select_server(is_write=True)
            try:
                assert server.monitor is None and not topology.greenlets()
                with server.checkout() as conn:
                    assert conn.service_id == service_id
                    assert balancer.commands("hello")[0].command.get("loadBalanced") is True
                    decision = server.handle_error(AutoReconnect("reset by the balancer"), conn)
                assert decision.clear_pool and decision.service_id == service_id and decision.unknown is None
                cleared = recorder.of(PoolClearedEvent)
                assert cleared and cleared[-1].service_id == service_id
                assert topology.description[balancer.address].server_type is ServerType.LoadBalancer
            finally:
                server.end_operation()
            # No monitoring connection, ever: nothing that could start one can be waited for, so a
            # window (a monitor would have begun its first check at once).
            assert_stays(lambda: not recorder.of(ServerHeartbeatStartedEvent)
                         and len(balancer.commands("hello")) == 1, 0.1, "no heartbeat, one hello")
        finally:
            topology.close()
