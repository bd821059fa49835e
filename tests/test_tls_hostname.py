"""Hostname verification rules (RFC 6125): SAN DNS names, left-most wildcards, IP addresses."""

from __future__ import annotations

import pytest

from greenmongo.net.tls import hostname_matches
from tests.servers.tls_certs import make_ca, make_cert

CA = make_ca()


@pytest.mark.parametrize("names, addresses, host, expected", [
    (["db.example.com"], [], "db.example.com", True),
    (["db.example.com"], [], "DB.Example.COM", True),
    (["db.example.com"], [], "db.example.com.", True),
    (["db.example.com"], [], "other.example.com", False),
    (["*.example.com"], [], "db.example.com", True),
    (["*.example.com"], [], "example.com", False),
    (["*.example.com"], [], "a.b.example.com", False),
    (["*.com"], [], "example.com", False),
    (["db*.example.com"], [], "db1.example.com", False),
    (["a.*.example.com"], [], "a.b.example.com", False),
    ([], ["127.0.0.1"], "127.0.0.1", True),
    ([], ["127.0.0.1"], "127.0.0.2", False),
    (["127.0.0.1"], [], "127.0.0.1", False),   # an IP must be in an IP SAN, not a DNS one
    ([], ["::1"], "::1", True),
    ([], ["::1"], "[::1]", True),
    (["localhost"], ["127.0.0.1"], "localhost", True),
])
def test_matching(names, addresses, host, expected) -> None:
    cert = make_cert(CA, "ignored-common-name", dns_names=names, ip_addresses=addresses).cert
    assert hostname_matches(cert, host) is expected


def test_common_name_is_not_used() -> None:
    cert = make_cert(CA, "db.example.com").cert
    assert not hostname_matches(cert, "db.example.com")
