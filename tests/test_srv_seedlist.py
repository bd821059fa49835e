"""Seedlist discovery rules, on canned DNS answers (no sockets): the seedlist README's prose tests 1-4,
TXT handling, srvMaxHosts selection, and resolver failures mapped to ConfigurationError."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from greenmongo.errors import ConfigurationError
from greenmongo.options import ClientOptions, parse_uri
from greenmongo.options.seedlist import (
    check_srv_hostname,
    choose_hosts,
    discover,
    parse_txt_records,
    srv_domain,
    verify_srv_targets,
)


class CannedDns:
    """Answers from a dict; records which names were asked."""

    def __init__(self, srv=None, txt=None, fail=None):
        self.srv, self.txt, self.fail, self.asked = srv or {}, txt or {}, fail, []

    def resolve_srv(self, name, timeout=None):
        self.asked.append(name)
        if self.fail:
            raise self.fail
        if name not in self.srv:
            raise ConfigurationError(f"No SRV records found for {name!r}")
        return self.srv[name]

    def resolve_txt(self, name, timeout=None):
        self.asked.append(name)
        return self.txt.get(name, [])


def test_prose_1_fewer_than_three_parts_are_allowed():
    for host in ("localhost", "mongo.local"):
        assert check_srv_hostname(host) == host
        dns = CannedDns({f"_mongodb._tcp.{host}": [(f"db.{host}", 27017)]})
        assert parse_uri(f"mongodb+srv://{host}", srv_resolver=dns)["nodelist"] == [(f"db.{host}", 27017)]


@pytest.mark.parametrize("host, target", [
    ("localhost", "localhost.mongodb"),         # 2: does not end with the SRV's domain
    ("mongo.local", "test_1.evil.local"),
    ("blogs.mongodb.com", "blogs.evil.com"),
    ("localhost", "localhost"),                 # 3: identical to a short SRV hostname
    ("mongo.local", "mongo.local"),
    ("localhost", "test_1.cluster_1localhost"),  # 4: shares the domain without a "."
    ("mongo.local", "test_1.my_hostmongo.local"),
    ("blogs.mongodb.com", "cluster.testmongodb.com"),
])
def test_prose_2_to_4_targets_outside_the_domain_are_rejected(host, target):
    with pytest.raises(ConfigurationError, match="not in the domain"):
        verify_srv_targets(host, [(target, 27017)])
    with pytest.raises(ConfigurationError):
        parse_uri(f"mongodb+srv://{host}", srv_resolver=CannedDns({f"_mongodb._tcp.{host}": [(target, 1)]}))


def test_targets_are_normalized_and_deduplicated():
    records = [("DB1.Example.COM.", 27017), ("db1.example.com", 27017), ("db2.example.com", 27018)]
    assert verify_srv_targets("c.example.com", records) == [("db1.example.com", 27017), ("db2.example.com", 27018)]
    assert srv_domain("c.example.com") == "example.com" and srv_domain("example.com") == "example.com"


def test_a_three_part_hostname_may_resolve_to_itself():
    assert verify_srv_targets("test.build.10gen.cc", [("test.build.10gen.cc", 1)]) == [("test.build.10gen.cc", 1)]


def test_txt_records():
    assert parse_txt_records("h", []) == ()
    assert parse_txt_records("h", ["replicaSet=rs%31&authSource=db&&loadBalanced=false"]) == (
        ("replicaSet", "rs1"), ("authSource", "db"), ("loadBalanced", "false"))
    with pytest.raises(ConfigurationError, match="Only one TXT"):
        parse_txt_records("h", ["replicaSet=a", "authSource=b"])
    with pytest.raises(ConfigurationError, match="Malformed"):
        parse_txt_records("h", ["authSource"])
    for option in ("ssl=false", "tls=true", "w=1", "srvMaxHosts=1"):
        with pytest.raises(ConfigurationError, match="not allowed in a TXT record"):
            parse_txt_records("h", [option])


def test_txt_values_are_validated_like_the_uri_and_lose_to_it():
    dns = CannedDns({"_mongodb._tcp.a.b.c": [("x.b.c", 1)]}, {"a.b.c": ["loadBalanced=maybe"]})
    with pytest.raises(ConfigurationError, match="loadBalanced"):
        parse_uri("mongodb+srv://a.b.c", srv_resolver=dns)
    dns = CannedDns({"_mongodb._tcp.a.b.c": [("x.b.c", 1)]}, {"a.b.c": ["replicaSet=fromtxt&authSource=t"]})
    options = parse_uri("mongodb+srv://a.b.c/?replicaSet=fromuri", srv_resolver=dns)["options"]
    assert options["replicaSet"] == "fromuri" and options["authSource"] == "t" and options["tls"] is True


def test_service_name_and_query_order():
    dns = CannedDns({"_custom._tcp.a.b.c": [("x.b.c", 1)]})
    parse_uri("mongodb+srv://a.b.c/?srvServiceName=custom", srv_resolver=dns)
    assert dns.asked == ["_custom._tcp.a.b.c", "a.b.c"]


def test_srv_max_hosts_picks_at_random_among_the_answer():
    hosts = [(f"h{i}.example.com", 27017) for i in range(6)]
    seen = Counter()
    rng = random.Random(7)
    for _ in range(300):
        chosen = choose_hosts(hosts, 2, rng)
        assert len(chosen) == 2 == len(set(chosen)) and set(chosen) <= set(hosts)
        seen.update(chosen)
    assert set(seen) == set(hosts) and min(seen.values()) > 50  # every host gets picked, roughly evenly
    assert choose_hosts(hosts, 0) == hosts and choose_hosts(hosts, 6) == hosts and choose_hosts(hosts, 9) == hosts


def test_srv_max_hosts_applies_to_client_seeds():
    records = [(f"h{i}.b.c", 27017) for i in range(5)]
    options = ClientOptions("mongodb+srv://a.b.c/?srvMaxHosts=2",
                            srv_resolver=CannedDns({"_mongodb._tcp.a.b.c": records}))
    assert len(options.seeds) == 2 and set(options.seeds) <= set(records)
    assert options.srv_max_hosts == 2 and options.srv_host == "a.b.c"


def test_keyword_service_name_and_tls_override_the_srv_defaults():
    dns = CannedDns({"_other._tcp.a.b.c": [("x.b.c", 1)]})
    options = ClientOptions("mongodb+srv://a.b.c", srv_resolver=dns, srvServiceName="other", tls=False)
    assert options.seeds == (("x.b.c", 1),) and options.tls is None


def test_resolver_failures_become_configuration_errors():
    with pytest.raises(ConfigurationError, match="No SRV records"):
        discover("a.b.c", "mongodb", CannedDns())
    with pytest.raises(ConfigurationError, match="No SRV records"):
        discover("a.b.c", "mongodb", CannedDns({"_mongodb._tcp.a.b.c": []}))
    with pytest.raises(ConfigurationError, match="DNS lookup of '_mongodb._tcp.a.b.c' failed: boom") as raised:
        discover("a.b.c", "mongodb", CannedDns(fail=OSError("boom")))
    assert isinstance(raised.value.__cause__, OSError)
