"""SRV polling for mongos discovery: rescans add and remove routers, failures change nothing.

The fake resolver's SRV name is ``cluster.0.0.1``: its domain is ``0.0.1``, so
targets named ``127.0.0.1`` pass the spec's same-domain check and the rescanned
routers are real loopback servers the topology can connect to.
"""

from __future__ import annotations

import logging
from time import monotonic

import gevent
import pytest

from greenmongo.errors import ConfigurationError
from greenmongo.monitoring.topology import ServerClosedEvent, ServerOpeningEvent
from greenmongo.net.dns import DnsResolver
from greenmongo.sdam.server_type import ServerType
from greenmongo.sdam.topology_type import TopologyType
from greenmongo.topology.srv_poller import SrvPoller, verified_hosts
from tests.servers.dns import LoopbackDnsServer
from tests.servers.topology_harness import Recorder, SimulatedTopology, make_topology
from tests.waits import assert_stays, wait_until

SRV_HOST = "cluster.0.0.1"
QUERY = "_mongodb._tcp.cluster.0.0.1"
INTERVAL = 0.2


class FakeResolver:
    """Answers SRV queries from ``records`` (or raises ``error``), counting lookups."""

    def __init__(self, records=(), ttl=None):
        self.records = list(records)
        self.ttl = ttl
        self.error = None
        self.queries = []

    def resolve_srv(self, name, timeout=None):
        self.queries.append((name, monotonic()))
        if self.error is not None:
            raise self.error
        return list(self.records)

    def wait_lookups(self, count, timeout=3.0):
        wait_until(lambda: len(self.queries) >= count, timeout, f"{count} SRV lookups")


class FakeTtlResolver(FakeResolver):
    def resolve_srv_with_ttl(self, name, timeout=None):
        return self.resolve_srv(name, timeout), self.ttl


def _records(*members):
    return [(member.address[0], member.address[1]) for member in members]


@pytest.fixture
def sim():
    with SimulatedTopology() as simulated:
        yield simulated


def _topology(seeds, resolver, recorder=None, **kwargs):
    return make_topology([m.address for m in seeds], srv_host=SRV_HOST, srv_resolver=resolver,
                         srv_min_rescan_interval=INTERVAL, listeners=[recorder] if recorder else [], **kwargs)


def test_rescan_adds_new_routers_removes_gone_ones_and_leaves_the_rest_alone(sim):
    m1, m2, m3 = sim.mongoses(3)
    resolver = FakeResolver(_records(m1, m2))
    recorder = Recorder()
    # A latency window wide enough for any round trip a loaded machine measures: the selections at
    # the end are about which routers are known, not about their latency.
    topology = _topology([m1, m2], resolver, recorder, local_threshold_ms=60_000)
    try:
        wait_until(lambda: len(topology.description.known_servers) == 2, 3, "discovery")
        assert topology.description.topology_type is TopologyType.Sharded
        kept = topology.get_server(m2.address)
        resolver.wait_lookups(1)
        assert resolver.queries[0][0] == QUERY
        assert set(topology.description.addresses) == {m1.address, m2.address}  # same answer: no change
        resolver.records = _records(m2, m3)
        wait_until(lambda: set(topology.description.addresses) == {m2.address, m3.address}, 3, "rescan applied")
        assert topology.get_server(m2.address) is kept
        assert any(isinstance(e, ServerClosedEvent) and e.server_address == m1.address for e in recorder.events)
        assert any(isinstance(e, ServerOpeningEvent) and e.server_address == m3.address for e in recorder.events)
        wait_until(lambda: topology.description[m3.address].server_type is ServerType.Mongos, 3, "m3 checked")
        addresses = set()
        for _ in range(30):
            server = topology.select_server(is_write=True)
            server.end_operation()
            addresses.add(server.address)
        assert addresses == {m2.address, m3.address}
    finally:
        topology.close()


def test_dns_failure_and_invalid_targets_keep_the_hosts_and_retry_at_heartbeat(sim, caplog):
    m1, m2 = sim.mongoses(2)
    resolver = FakeResolver(_records(m1, m2))
    topology = _topology([m1, m2], resolver, heartbeat=0.5)
    try:
        poller = topology._srv_poller[0]
        resolver.wait_lookups(1)
        resolver.error = ConfigurationError("DNS query for SRV failed: SERVFAIL")
        with caplog.at_level(logging.INFO, logger="greenmongo.topology"):
            resolver.wait_lookups(3)
        assert set(topology.description.addresses) == {m1.address, m2.address}
        assert poller.interval == 0.5  # heartbeatFrequencyMS until a good answer
        times = [t for _name, t in resolver.queries]
        assert times[2] - times[1] >= 0.45
        assert "SERVFAIL" in caplog.text
        # Targets outside the domain are dropped (and logged); none left means "no change".
        resolver.error = None
        resolver.records = [("evil.example.com", 27017), ("127.0.0.2", 0)]
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="greenmongo.topology"):
            resolver.wait_lookups(len(resolver.queries) + 1)
            wait_until(lambda: "evil.example.com" in caplog.text, message="the dropped target logged")
        assert set(topology.description.addresses) == {m1.address, m2.address}
        resolver.records = _records(m1)
        wait_until(lambda: topology.description.addresses == [m1.address], 3, "good answer applied")
        assert poller.interval == INTERVAL
    finally:
        topology.close()


def test_srv_max_hosts_caps_new_hosts(sim):
    m1, m2, m3, m4 = sim.mongoses(4)
    resolver = FakeResolver(_records(m1, m2, m3, m4))
    topology = _topology([m1, m2], resolver, srv_max_hosts=2)
    try:
        resolver.wait_lookups(2)
        assert set(topology.description.addresses) == {m1.address, m2.address}
        resolver.records = _records(m2, m3, m4)
        wait_until(lambda: m1.address not in topology.description, 3, "m1 gone")
        addresses = set(topology.description.addresses)
        assert len(addresses) == 2 and m2.address in addresses and addresses <= {m2.address, m3.address, m4.address}
    finally:
        topology.close()


def test_rescan_interval_follows_the_records_ttl():
    resolver = FakeTtlResolver([("a.cluster.0.0.1", 27017)], ttl=0.4)

    class StubTopology:
        description = type("D", (), {"topology_type": TopologyType.Unknown})()
        applied = []

        def apply_srv_hosts(self, hosts):
            self.applied.append(list(hosts))

    stub = StubTopology()
    poller = SrvPoller(stub, SRV_HOST, resolver, heartbeat_frequency=5.0, min_interval=0.1)
    poller.interval = 0.05
    poller.start()
    try:
        resolver.wait_lookups(3)
        times = [t for _name, t in resolver.queries]
        assert poller.interval == 0.4
        assert all(later - earlier >= 0.38 for earlier, later in zip(times[1:], times[2:]))
        assert stub.applied[0] == [("a.cluster.0.0.1", 27017)]
        # A TTL under the floor is raised to it.
        resolver.ttl = 0.01
        resolver.wait_lookups(len(resolver.queries) + 1)
        gevent.sleep(0)
        assert poller.interval == 0.1
    finally:
        poller.stop()
        gevent.joinall([poller.greenlet], timeout=1)
    assert poller.greenlet.dead


def test_polling_stops_once_the_topology_is_a_replica_set(sim):
    a, b, c = sim.replica_set(3)
    resolver = FakeResolver(_records(a))
    topology = _topology([a], resolver)
    try:
        wait_until(lambda: topology.description.topology_type is TopologyType.ReplicaSetWithPrimary, 3, "RS")
        poller = topology._srv_poller[0]
        poller.greenlet.join(2 * INTERVAL + 0.5)
        assert poller.greenlet.dead
        lookups = len(resolver.queries)
        assert lookups <= 1
        # The poller is gone, so no lookup can be waited for: three intervals without one.
        assert_stays(lambda: len(resolver.queries) == lookups, 3 * INTERVAL, "no further lookup")
    finally:
        topology.close()


def test_load_balanced_topology_never_polls():
    resolver = FakeResolver([("lb.cluster.0.0.1", 27017)])
    topology = make_topology([("127.0.0.1", 1)], load_balanced=True, srv_host=SRV_HOST, srv_resolver=resolver,
                             srv_min_rescan_interval=0.05)
    try:
        assert not topology._srv_poller
        # A poller would look up at once; none exists, so a window of four intervals without one.
        assert_stays(lambda: not resolver.queries, 0.2, "no SRV lookup")
    finally:
        topology.close()


def test_verified_hosts_applies_the_same_domain_rule():
    rejected = []
    hosts = verified_hosts("test19.test.build.10gen.cc", [
        ("localhost.evil.build.10gen.cc", 27017), ("LOCALHOST.test.build.10gen.cc.", 27017),
        ("localhost.test.build.10gen.cc", 27017), ("localhost.test.build.10gen.cc", 27018)],
        lambda host, why: rejected.append(host))
    assert hosts == [("localhost.test.build.10gen.cc", 27017), ("localhost.test.build.10gen.cc", 27018)]
    assert rejected == ["localhost.evil.build.10gen.cc"]


def test_poller_lookup_through_the_loopback_dns_server():
    with LoopbackDnsServer() as dns_server:
        resolver = DnsResolver([dns_server.address], attempt_timeout=1.0, lifetime=3.0)
        topology = type("T", (), {})()
        poller = SrvPoller(topology, "test1.test.build.10gen.cc", resolver, heartbeat_frequency=1.0)
        hosts, ttl = poller._lookup()
        assert sorted(hosts) == [("localhost.test.build.10gen.cc", 27017), ("localhost.test.build.10gen.cc", 27018)]
        assert ttl is None  # this resolver offers no TTLs: the 60 s floor applies
        evil = SrvPoller(topology, "test19.test.build.10gen.cc", resolver, heartbeat_frequency=1.0)
        assert evil._lookup()[0] == [("localhost.test.build.10gen.cc", 27017)]
        missing = SrvPoller(topology, "nothing-here.test.build.10gen.cc", resolver, heartbeat_frequency=1.0)
        assert missing._lookup() == ([], None)  # NXDOMAIN: logged, never raised
