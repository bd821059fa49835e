"""Connection and handshake against a real server (SecantusDB), and connect-level failures."""

from __future__ import annotations

import select
import socket
import time
from urllib.parse import urlparse

import pytest

from greenmongo.errors import AutoReconnect, NetworkTimeout, OperationFailure
from greenmongo.net import tcp as tcp_module
from greenmongo.net.handshake import open_connection
from greenmongo.options.connection_settings import ConnectionSettings
from tests.servers.secantus import free_port
from tests.waits import wait_until


@pytest.fixture(scope="module")
def address(server_uri):
    parsed = urlparse(server_uri)
    return parsed.hostname, parsed.port


def test_handshake_and_commands(address) -> None:
    with open_connection(address, ConnectionSettings(appname="greenmongo-tests")) as conn:
        assert conn.supports_op_msg and conn.max_wire_version >= 6
        assert conn.hello["ok"] == 1.0
        assert conn.max_bson_size == conn.hello["maxBsonObjectSize"]
        conn.command("gm_conn", {"drop": "c"}, check=False)
        reply = conn.command("gm_conn", {"insert": "c"}, sequences={"documents": [{"_id": 1}, {"_id": 2}]})
        assert reply["n"] == 2
        found = conn.command("gm_conn", {"find": "c", "filter": {}, "sort": {"_id": 1}})
        assert found["cursor"]["firstBatch"] == [{"_id": 1}, {"_id": 2}]
        assert conn.command("gm_conn", {"insert": "c"}, sequences={"documents": [{"_id": 3}]},
                            unacknowledged=True) is None
        assert conn.command("gm_conn", {"count": "c"})["n"] == 3


def test_operation_failure(address) -> None:
    with open_connection(address, ConnectionSettings()) as conn:
        with pytest.raises(OperationFailure) as info:
            conn.command("admin", {"noSuchCommand": 1})
        assert info.value.code == 59 and info.value.code_name == "CommandNotFound"
        assert info.value.details["ok"] == 0
        assert conn.command("admin", {"ping": 1})["ok"] == 1.0


def test_refused_is_auto_reconnect() -> None:
    port = free_port()
    with pytest.raises(AutoReconnect, match=f"127.0.0.1:{port}") as info:
        open_connection(("127.0.0.1", port), ConnectionSettings(connect_timeout=2))
    assert not isinstance(info.value, NetworkTimeout)


def test_connect_timeout() -> None:
    # A listener whose backlog is full: the kernel drops further SYNs, so connect hangs.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    fillers = []
    try:
        for _ in range(4):
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(listener.getsockname())
            fillers.append(filler)
        # A filler whose handshake completed (writable) sits in the one-place accept queue: it is full.
        wait_until(lambda: select.select([], fillers, [], 0)[1], message="the backlog filled")
        started = time.monotonic()
        with pytest.raises(NetworkTimeout, match="connectTimeoutMS"):
            open_connection(listener.getsockname(), ConnectionSettings(connect_timeout=0.3))
        assert time.monotonic() - started < 2.0
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


def test_interleaves_address_families() -> None:
    def info(family, host):
        return (family, socket.SOCK_STREAM, 6, "", (host, 1))
    infos = [info(socket.AF_INET6, "::1"), info(socket.AF_INET6, "::2"),
             info(socket.AF_INET, "127.0.0.11"), info(socket.AF_INET, "127.0.0.12"), info(socket.AF_INET, "127.0.0.13")]
    ordered = tcp_module._interleave_families(infos)
    assert [entry[4][0] for entry in ordered] == ["::1", "127.0.0.11", "::2", "127.0.0.12", "127.0.0.13"]
    assert tcp_module._interleave_families([]) == []


def test_an_ip_literal_needs_no_resolver(address, monkeypatch) -> None:
    """127.0.0.1 connects without getaddrinfo (gevent's resolver would start its thread pool); a name still
    goes through it."""
    host, port = address
    asked = []
    real = tcp_module.gsocket.getaddrinfo

    def counting_getaddrinfo(name, service, *args):
        asked.append(name)
        return real(name, service, *args)

    monkeypatch.setattr(tcp_module.gsocket, "getaddrinfo", counting_getaddrinfo)
    with open_connection(("127.0.0.1", port), ConnectionSettings(connect_timeout=2)) as conn:
        assert conn.command("admin", {"ping": 1})["ok"] == 1.0
    assert asked == []
    assert tcp_module._literal_addrinfo("::1", 27017) == [
        (socket.AF_INET6, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("::1", 27017, 0, 0))]
    assert tcp_module._literal_addrinfo("fe80::1%eth0", 27017) is None  # scoped: the resolver knows the scope
    with open_connection(("localhost", port), ConnectionSettings(connect_timeout=2)) as conn:
        assert conn.command("admin", {"ping": 1})["ok"] == 1.0
    assert asked == ["localhost"]


def test_falls_back_across_families(address, monkeypatch) -> None:
    """An unreachable first address (a refused port) does not prevent the next from working."""
    host, port = address
    dead_port = free_port()
    real = tcp_module.gsocket.getaddrinfo

    def fake_getaddrinfo(name, service, *args):
        good = real(host, port, socket.AF_INET, socket.SOCK_STREAM)
        bad = [(info[0], info[1], info[2], info[3], ("127.0.0.1", dead_port)) for info in good]
        return bad + good

    monkeypatch.setattr(tcp_module.gsocket, "getaddrinfo", fake_getaddrinfo)
    with open_connection(("dual.example", port), ConnectionSettings(connect_timeout=2)) as conn:
        assert conn.command("admin", {"ping": 1})["ok"] == 1.0


def test_slow_first_address_races_the_next(address, monkeypatch) -> None:
    """Happy eyeballs: a black-holed first address costs ~250 ms, not the whole connect timeout."""
    host, port = address
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    fillers = []
    for _ in range(4):
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(listener.getsockname())
        fillers.append(filler)
    real = tcp_module.gsocket.getaddrinfo

    def fake_getaddrinfo(name, service, *args):
        good = real(host, port, socket.AF_INET, socket.SOCK_STREAM)
        hanging = [(info[0], info[1], info[2], info[3], listener.getsockname()) for info in good]
        return hanging + good

    monkeypatch.setattr(tcp_module.gsocket, "getaddrinfo", fake_getaddrinfo)
    try:
        started = time.monotonic()
        with open_connection(("dual.example", port), ConnectionSettings(connect_timeout=10)) as conn:
            assert conn.command("admin", {"ping": 1})["ok"] == 1.0
        assert time.monotonic() - started < 2.0
    finally:
        for filler in fillers:
            filler.close()
        listener.close()
