"""Discovery, elections, stepdowns and close() through real sockets against a simulated replica set."""

from __future__ import annotations

import gc
from time import monotonic

import gevent
import pytest

from greenmongo.errors import InvalidOperation, NotPrimaryError, ServerSelectionTimeoutError
from greenmongo.monitoring.pool import PoolClearedEvent, PoolClosedEvent
from greenmongo.monitoring.topology import (
    ServerClosedEvent, ServerDescriptionChangedEvent, ServerOpeningEvent, TopologyClosedEvent,
    TopologyDescriptionChangedEvent, TopologyOpenedEvent,
)
from greenmongo.sdam.server_type import ServerType
from greenmongo.sdam.topology_type import TopologyType
from greenmongo.topology.monitor import Monitor
from greenmongo.topology.rtt_monitor import RttMonitor
from tests.api_support import gc_instances
from tests.servers.topology_harness import Recorder, SimulatedTopology, make_topology
from tests.waits import assert_stays, wait_until


@pytest.fixture
def sim():
    with SimulatedTopology() as simulated:
        yield simulated


def _types(topology):
    return {address: sd.server_type for address, sd in topology.description.server_descriptions().items()}


def _primary_address(topology):
    primary = topology.description.primary
    return primary.address if primary is not None else None


def test_discovers_whole_replica_set_from_one_secondary_seed(sim):
    a, b, c = sim.replica_set(3)
    recorder = Recorder()
    topology = make_topology([c.address], listeners=[recorder])
    try:
        server = topology.select_server(is_write=True)
        server.end_operation()
        assert server.address == a.address
        wait_until(lambda: all(t is not ServerType.Unknown for t in _types(topology).values()), 3,
                   "every member checked")
        assert topology.description.topology_type is TopologyType.ReplicaSetWithPrimary
        assert topology.description.replica_set_name == "rs"
        assert _types(topology) == {a.address: ServerType.RSPrimary, b.address: ServerType.RSSecondary,
                                    c.address: ServerType.RSSecondary}
        # The first events follow the SDAM monitoring spec's order for a seed.
        assert recorder.names()[:3] == ["TopologyOpenedEvent", "TopologyDescriptionChangedEvent",
                                        "ServerOpeningEvent"]
        opened = {e.server_address for e in recorder.of(ServerOpeningEvent)}
        assert opened == {a.address, b.address, c.address}
        assert all(e.topology_id == topology.topology_id for e in recorder.of(TopologyDescriptionChangedEvent))
    finally:
        topology.close()


def test_election_is_seen_at_once_by_streaming_monitors(sim):
    a, b, c = sim.replica_set(3)
    # A long heartbeat: only the streaming protocol can notice the election quickly.
    topology = make_topology([a.address], heartbeat=5.0)
    try:
        wait_until(lambda: len(topology.description.known_servers) == 3, 3, "discovery")
        assert _primary_address(topology) == a.address
        elected_at = monotonic()
        sim.elect(b)
        server = topology.select_server(is_write=True, timeout=2.0)
        server.end_operation()
        wait_until(lambda: _primary_address(topology) == b.address, 2, "new primary")
        assert monotonic() - elected_at < 1.0
        assert topology.description[a.address].server_type is ServerType.RSSecondary
        assert topology.description.max_election_id == sim.rs_members[1].fields["electionId"]
    finally:
        topology.close()


def test_select_server_waits_on_the_change_event_and_wakes_on_election(sim):
    a, b, c = sim.replica_set(3, primary=None)
    topology = make_topology([a.address], heartbeat=5.0)
    try:
        wait_until(lambda: len(topology.description.known_servers) == 3, 3, "discovery")
        assert topology.description.topology_type is TopologyType.ReplicaSetNoPrimary
        got = []
        waiter = gevent.spawn(lambda: got.append(topology.select_server(is_write=True, timeout=5.0)))
        wait_until(lambda: topology._changed.linkcount() == 1, message="the selection waiting on the change event")
        assert not got and not waiter.dead  # no primary: still waiting
        elected_at = monotonic()
        sim.elect(c)
        waiter.join(2.0)
        assert got and got[0].address == c.address
        # Woken by the election's change event, not by the next 5 s heartbeat (a loaded CI machine
        # may take a while to run us; it still cannot take a heartbeat).
        assert monotonic() - elected_at < 2.5
        assert got[0].operation_count == 1
        got[0].end_operation()
        assert got[0].operation_count == 0
    finally:
        topology.close()


@pytest.mark.parametrize("mode", ["stream", "poll"])
def test_stepdown_makes_primary_unknown_then_it_is_rediscovered(sim, mode):
    a, b, c = sim.replica_set(3)
    recorder = Recorder()
    # A long heartbeat: rediscovery must come from the stream or from the requested check.
    topology = make_topology([a.address], heartbeat=5.0, mode=mode, listeners=[recorder])
    try:
        wait_until(lambda: len(topology.description.known_servers) == 3, 3, "discovery")
        primary = topology.get_server(a.address)
        # An operation learns of the stepdown first: "not writable primary", with the server's
        # new topologyVersion, before the monitor has heard anything.
        newer = {"processId": a.process_id, "counter": a.counter + 1}
        reply = {"ok": 0, "code": 10107, "errmsg": "not primary", "topologyVersion": newer}
        with primary.checkout() as conn:
            decision = primary.handle_error(NotPrimaryError("not primary", reply), conn)
        assert decision.unknown is not None and decision.request_check and not decision.clear_pool
        changed = recorder.wait_for(lambda e: isinstance(e, ServerDescriptionChangedEvent)
                                    and e.server_address == a.address
                                    and e.new_description.server_type is ServerType.Unknown)
        assert isinstance(changed.new_description.error, NotPrimaryError)
        assert changed.new_description.topology_version == newer
        assert topology.description.topology_type is TopologyType.ReplicaSetNoPrimary
        marked_at = monotonic()
        sim.step_down(a)
        # Streaming: the change is pushed. Polling: the requested check runs after the 500 ms minimum.
        wait_until(lambda: topology.description[a.address].server_type is ServerType.RSSecondary, 2,
                   "rediscovered as secondary")
        assert monotonic() - marked_at < 1.5
        with pytest.raises(ServerSelectionTimeoutError) as info:
            topology.select_server(is_write=True, timeout=0.2)
        message = str(info.value)
        assert "No servers match writes" in message and "ReplicaSetNoPrimary" in message
        assert "RSSecondary" in message
        sim.elect(a)
        server = topology.select_server(is_write=True, timeout=2.0)
        server.end_operation()
        assert server.address == a.address
    finally:
        topology.close()


def test_network_error_marks_unknown_clears_pool_and_old_generation_errors_are_ignored(sim):
    a, b, c = sim.replica_set(3)
    recorder = Recorder()
    topology = make_topology([a.address], listeners=[recorder])
    try:
        server = topology.select_server(is_write=True)
        try:
            with server.checkout() as conn:
                pool_generation = server.pool.generation
                from greenmongo.errors import AutoReconnect

                decision = server.handle_error(AutoReconnect("connection reset"), conn)
                assert decision.clear_pool and decision.cancel_check and decision.unknown is not None
                assert server.pool.generation == pool_generation + 1
                # The same connection's next error is stale: nothing changes.
                assert server.handle_error(AutoReconnect("again"), conn).ignored
        finally:
            server.end_operation()
        assert recorder.of(PoolClearedEvent)
        assert topology.description.topology_type is TopologyType.ReplicaSetNoPrimary
        # The monitor's check was cancelled and it comes back after at least the 500 ms minimum.
        wait_until(lambda: _primary_address(topology) == a.address, 3, "primary back")
    finally:
        topology.close()


def test_member_removed_from_the_set_stops_being_monitored(sim):
    a, b, c = sim.replica_set(3)
    recorder = Recorder()
    topology = make_topology([a.address], listeners=[recorder])
    try:
        wait_until(lambda: len(topology.description.known_servers) == 3, 3, "discovery")
        removed = topology.get_server(c.address)
        hosts = [a.host, b.host]
        for member in (a, b):
            member.set(hosts=hosts)
        wait_until(lambda: c.address not in topology.description, 2, "c removed")
        assert any(isinstance(e, ServerClosedEvent) and e.server_address == c.address for e in recorder.events)
        assert topology.get_server(c.address) is None
        assert removed.closed and removed.pool.closed
        wait_until(lambda: all(g.dead for g in removed.greenlets()), 2, "c's monitor greenlets end")
    finally:
        topology.close()


def _our_live_greenlets():
    found = []
    for obj in gc_instances(gevent.Greenlet):
        if not obj.dead:
            target = getattr(obj, "_run", None)
            owner = getattr(target, "__self__", None)
            if isinstance(owner, (Monitor, RttMonitor)):
                found.append(obj)
    return found


def test_close_stops_every_greenlet_and_publishes_closing_events(sim):
    a, b, c = sim.replica_set(3)
    recorder = Recorder()
    before = len(_our_live_greenlets())
    topology = make_topology([a.address], listeners=[recorder])
    server = topology.select_server(is_write=True)
    server.end_operation()
    wait_until(lambda: all(s.monitor.rtt_monitor is not None for s in topology.servers().values()), 3,
               "RTT monitors started")
    assert len(_our_live_greenlets()) == before + 6  # a monitor and an RTT monitor per member
    started = monotonic()
    topology.close()
    assert monotonic() - started < 1.0  # interrupted, not waiting for the next heartbeat
    gc.collect()
    assert len(_our_live_greenlets()) == before
    assert all(s.pool.closed for s in (server,))
    names = recorder.names(ServerClosedEvent, TopologyDescriptionChangedEvent, TopologyClosedEvent)
    assert names[-5:] == ["ServerClosedEvent"] * 3 + ["TopologyDescriptionChangedEvent", "TopologyClosedEvent"]
    last_change = recorder.of(TopologyDescriptionChangedEvent)[-1]
    assert last_change.new_description.topology_type is TopologyType.Unknown
    assert not last_change.new_description.server_descriptions()
    assert len(recorder.of(PoolClosedEvent)) == 3
    with pytest.raises(InvalidOperation):
        topology.select_server(is_write=True)
    topology.close()  # idempotent


def test_topology_dropped_without_close_stops_its_greenlets(sim):
    (a,) = sim.add(1)
    topology = make_topology([a.address])
    topology.select_server(is_write=True).end_operation()
    monitor = topology.get_server(a.address).monitor  # holds the topology only weakly
    wait_until(lambda: monitor.rtt_monitor is not None, 3, "RTT monitor")
    greenlets = topology.greenlets()
    assert len(greenlets) == 2
    del topology
    gc.collect()
    gevent.joinall(greenlets, timeout=2.0)
    assert all(g.dead for g in greenlets)


def test_opening_does_no_io_until_first_use(sim):
    (a,) = sim.add(1)
    recorder = Recorder()
    topology = make_topology([a.address], listeners=[recorder], open=False)
    try:
        # Nothing may start, so nothing can be waited for: a window in which nothing does (a
        # monitor would connect at once).
        assert_stays(lambda: not recorder.events and not a.server.requests, 0.1, "no event, no request")
        server = topology.select_server()
        server.end_operation()
        assert topology.description.topology_type is TopologyType.Single
        assert isinstance(recorder.events[0], TopologyOpenedEvent)
    finally:
        topology.close()
