"""connection-string/tests: URI structure (hosts, userinfo, database, option syntax).

The helpers here also run uri-options/tests (same JSON format): spec/test_uri_options.py imports them.
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager
from typing import Any, Iterator

import pytest

from greenmongo.errors import ConfigurationError
from greenmongo.net.dns import DnsResolver
from greenmongo.options.uri import host_type, parse_uri
from spec.support import params
from tests.servers.dns import LoopbackDnsServer


def cases_in(path, data):
    for case in data["tests"]:
        yield case["description"], case


@contextmanager
def recorded_warnings() -> Iterator[list]:
    """The driver's UserWarnings (other libraries' deprecation noise is not the driver warning)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mine: list = []
        yield mine
    mine.extend(w for w in caught if w.category is UserWarning)


class NoDns:
    """A resolver that fails the test: structurally invalid SRV URIs must fail before any DNS query."""

    def resolve_srv(self, name, timeout=None):
        pytest.fail(f"DNS was queried for {name!r}")

    resolve_txt = resolve_srv


@pytest.fixture(scope="module")
def loopback_resolver():
    with LoopbackDnsServer() as server:
        yield DnsResolver([server.address], attempt_timeout=1.0, lifetime=5.0)


def resolver_for(case: dict, request, *, dns_allowed: bool = True) -> Any:
    """The loopback resolver for SRV URIs; ``dns_allowed=False`` for suites whose SRV errors are all
    structural (a port, two hosts), which the seedlist spec says must fail before any DNS query."""
    if case["uri"].startswith("mongodb+srv://") and dns_allowed:
        return request.getfixturevalue("loopback_resolver")
    return NoDns()


def check_case(case: dict, resolver: Any) -> None:
    """Parse in the specs' lenient mode (invalid values warn and are ignored) and compare."""
    if not case["valid"]:
        with recorded_warnings():
            with pytest.raises(ConfigurationError):
                parse_uri(case["uri"], warn=True, srv_resolver=resolver)
        return

    with recorded_warnings() as caught:
        result = parse_uri(case["uri"], warn=True, srv_resolver=resolver)
    messages = [str(w.message) for w in caught]
    if case.get("warning") is not None:
        assert bool(messages) == case["warning"], messages

    if case.get("hosts") is not None:
        got = [{"host": host, "port": port} for host, port in result["nodelist"]]
        expected = case["hosts"]
        assert len(got) == len(expected)
        for found, want in zip(got, expected):
            assert found["host"] == want["host"]
            if want.get("port") is not None:
                assert found["port"] == want["port"]
            if want.get("type") is not None:
                assert host_type(found["host"]) == want["type"]

    auth = case.get("auth")
    if auth is not None:
        assert result["username"] == auth.get("username")
        assert result["password"] == auth.get("password")
        database = result["database"]
        if result["collection"]:
            database = f"{database}.{result['collection']}"
        assert database == auth.get("db")

    for key, value in (case.get("options") or {}).items():
        assert key in result["options"], f"{key} missing from {result['options']!r}"
        assert result["options"][key] == value, key


@pytest.mark.parametrize("case", params("connection-string/tests", cases_in))
def test_connection_string(case, request):
    check_case(case, resolver_for(case, request, dns_allowed=case["valid"]))
