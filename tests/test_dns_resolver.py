"""greenmongo.net.dns against the loopback DNS server (tests/servers/dns.py, another process)."""

from __future__ import annotations

import os
import time

import gevent
import pytest
from gevent import socket as gsocket

from greenmongo.errors import ConfigurationError
from greenmongo.net import dns as gdns
from greenmongo.net.dns import DnsResolver
from greenmongo.options import parse_uri
from tests.servers.dns import HUGE_HOSTS, LoopbackDnsServer
from tests.waits import wait_until


@pytest.fixture(scope="module")
def server():
    with LoopbackDnsServer() as running:
        yield running


@pytest.fixture
def resolver(server):
    return DnsResolver([server.address], attempt_timeout=1.0, lifetime=3.0)


def test_srv_and_txt(resolver):
    assert sorted(resolver.resolve_srv("_mongodb._tcp.test2.test.build.10gen.cc")) == [
        ("localhost.test.build.10gen.cc", 27018), ("localhost.test.build.10gen.cc", 27019)]
    assert resolver.resolve_txt("test5.test.build.10gen.cc") == ["replicaSet=repl0&authSource=thisDB"]
    assert resolver.resolve_txt("test11.test.build.10gen.cc") == ["replicaSet=repl0"]  # strings joined
    assert sorted(resolver.resolve_txt("test6.test.build.10gen.cc")) == ["authSource=otherDB", "replicaSet=repl0"]
    assert resolver.resolve_txt("test1.test.build.10gen.cc") == []   # name exists, no TXT
    assert resolver.resolve_txt("test4.test.build.10gen.cc") == []   # no such name: still just "no options"


def test_names_are_absolute_and_case_insensitive(resolver):
    assert resolver.resolve_srv("_MONGODB._tcp.TEST3.test.build.10gen.cc.") == [
        ("localhost.test.build.10gen.cc", 27017)]


def test_truncated_udp_answer_is_retried_over_tcp(resolver, monkeypatch):
    calls = []
    real_tcp = DnsResolver._tcp

    def spy(self, *args, **kwargs):
        calls.append(args[0])
        return real_tcp(self, *args, **kwargs)

    monkeypatch.setattr(DnsResolver, "_tcp", spy)
    records = resolver.resolve_srv("_mongodb._tcp.huge.greenmongo.test")
    assert len(records) == HUGE_HOSTS and len(set(records)) == HUGE_HOSTS
    assert calls == [resolver.nameservers[0]]
    resolver.resolve_srv("_mongodb._tcp.test1.test.build.10gen.cc")
    assert len(calls) == 1  # small answers stay on UDP


@pytest.mark.parametrize("name, reason", [
    ("_mongodb._tcp.test4.test.build.10gen.cc", "does not exist"),
    ("_mongodb._tcp.servfail.greenmongo.test", "SERVFAIL"),
    ("_mongodb._tcp.example.com", "REFUSED"),
    ("_mongodb._tcp.test1.test.build.10gen.cc.greenmongo.test", "does not exist"),
])
def test_failures_are_configuration_errors_with_the_reason(resolver, name, reason):
    with pytest.raises(ConfigurationError, match=reason) as raised:
        resolver.resolve_srv(name)
    assert name in str(raised.value)


@pytest.mark.parametrize("name", ["_mongodb._tcp." + "a" * 64 + ".b.c", "a..b", "x." * 130])
def test_malformed_names_are_configuration_errors(resolver, name):
    with pytest.raises(ConfigurationError, match="Invalid DNS name"):
        resolver.resolve_srv(name)


def test_no_answer_times_out_within_the_lifetime(server):
    resolver = DnsResolver([server.address], attempt_timeout=0.1, lifetime=0.35)
    started = time.monotonic()
    with pytest.raises(ConfigurationError, match="timed out"):
        resolver.resolve_srv("_mongodb._tcp.stall.greenmongo.test")
    assert 0.3 <= time.monotonic() - started < 1.0
    started = time.monotonic()
    with pytest.raises(ConfigurationError, match="timed out"):  # the caller's timeout wins
        resolver.resolve_srv("_mongodb._tcp.stall.greenmongo.test", timeout=0.15)
    assert time.monotonic() - started < 0.5


def test_a_silent_nameserver_is_skipped_for_the_next(server):
    silent = gsocket.socket(gsocket.AF_INET, gsocket.SOCK_DGRAM)
    silent.bind(("127.0.0.1", 0))  # bound, never answers
    try:
        resolver = DnsResolver([silent.getsockname(), server.address], attempt_timeout=0.2, lifetime=3.0)
        assert resolver.resolve_srv("_mongodb._tcp.test3.test.build.10gen.cc") == [
            ("localhost.test.build.10gen.cc", 27017)]
    finally:
        silent.close()


def test_a_closed_port_is_an_error_not_a_hang():
    probe = gsocket.socket(gsocket.AF_INET, gsocket.SOCK_DGRAM)
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now: ICMP port unreachable
    started = time.monotonic()
    with pytest.raises(ConfigurationError, match="failed"):
        DnsResolver([("127.0.0.1", port)], attempt_timeout=2.0, lifetime=2.0).resolve_srv("_x._tcp.a.b")
    assert time.monotonic() - started < 1.0


@pytest.mark.parametrize("entry, expected", [
    ("127.0.0.1", ("127.0.0.1", 53)), ("127.0.0.1:5353", ("127.0.0.1", 5353)),
    ("[::1]:53", ("::1", 53)), ("::1", ("::1", 53)), (("10.0.0.1", 5300), ("10.0.0.1", 5300)),
])
def test_nameserver_forms(entry, expected):
    assert DnsResolver([entry]).nameservers == [expected]


@pytest.mark.parametrize("entry", ["dns.google", "127.0.0.1:0", "127.0.0.1:x", ("a", 53), "1.2.3.4:70000"])
def test_nameservers_must_be_ip_addresses(entry):
    with pytest.raises(ConfigurationError, match="nameserver"):
        DnsResolver([entry])


def test_system_nameservers_come_from_the_host_configuration():
    servers = gdns.system_nameservers()
    assert servers and all(isinstance(host, str) and isinstance(port, int) for host, port in servers)


def test_configure_sets_the_default_used_by_mongodb_srv(server):
    try:
        gdns.configure([server.address], attempt_timeout=1.0)
        assert parse_uri("mongodb+srv://test3.test.build.10gen.cc")["nodelist"] == [
            ("localhost.test.build.10gen.cc", 27017)]
    finally:
        gdns.configure()
    assert gdns.default_resolver().nameservers == gdns.system_nameservers()


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_killed_lookups_release_their_sockets(server):
    resolver = DnsResolver([server.address], attempt_timeout=5.0, lifetime=5.0)
    before = _open_fds()
    jobs = [gevent.spawn(resolver.resolve_srv, "_mongodb._tcp.stall.greenmongo.test") for _ in range(20)]
    wait_until(lambda: _open_fds() >= before + 20, message="20 lookups waiting, each on its own UDP socket")
    gevent.killall(jobs)
    assert _open_fds() == before


def test_an_outer_timeout_is_not_swallowed(server):
    resolver = DnsResolver([server.address], attempt_timeout=5.0, lifetime=5.0)
    with pytest.raises(gevent.Timeout):
        with gevent.Timeout(0.1):
            resolver.resolve_srv("_mongodb._tcp.stall.greenmongo.test")
