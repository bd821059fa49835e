"""The TLS handshake waits on gevent, never blocking the hub: a 1 ms ticker keeps ticking."""

from __future__ import annotations

import socket
import time

import gevent
import pytest

from greenmongo.errors import NetworkTimeout
from greenmongo.net.handshake import open_connection
from greenmongo.options.connection_settings import ConnectionSettings, TlsSettings
from tests.servers.scripted import ScriptedServer
from tests.servers.tls_certs import make_ca, make_cert, server_context
from tests.waits import wait_until


class Ticker:
    """A greenlet that records when it runs; gaps show how long the hub was blocked."""

    def __init__(self) -> None:
        self.ticks: list[float] = []
        self.greenlet = gevent.spawn(self._run)

    def _run(self) -> None:
        while True:
            self.ticks.append(time.monotonic())
            gevent.sleep(0.001)

    def stop(self) -> None:
        self.greenlet.kill()

    def ticks_between(self, start: float, end: float) -> list[float]:
        return [tick for tick in self.ticks if start <= tick <= end]

    def largest_gap(self, start: float, end: float) -> float:
        ticks = [start] + self.ticks_between(start, end) + [end]
        return max(later - earlier for earlier, later in zip(ticks, ticks[1:]))


@pytest.fixture
def ticker():
    running = Ticker()
    wait_until(lambda: len(running.ticks) >= 2, message="the ticker ticking")
    yield running
    running.stop()


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tls-nonblocking")
    ca = make_ca()
    server = make_cert(ca, "localhost", dns_names=["localhost"], ip_addresses=["127.0.0.1"])
    return {"ca": ca, "server": server, "ca_file": ca.write(directory, "ca")[0]}


def test_peer_that_never_answers_the_client_hello(ticker, pki) -> None:
    listener = socket.socket()  # the kernel accepts the TCP connection; nobody ever speaks TLS
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    try:
        started = time.monotonic()
        with pytest.raises(NetworkTimeout, match="TLS handshake timed out"):
            open_connection(listener.getsockname(),
                            ConnectionSettings(tls=TlsSettings(ca_file=pki["ca_file"]), connect_timeout=0.5))
        ended = time.monotonic()
    finally:
        listener.close()
    assert 0.4 < ended - started < 2.0
    assert len(ticker.ticks_between(started, ended)) > 20
    assert ticker.largest_gap(started, ended) < 0.25  # blocking would leave one gap of >= 0.4 s


def test_slow_tls_peer(ticker, pki) -> None:
    context = server_context(pki["server"], pki["ca"])
    with ScriptedServer(tls_context=context, tls_handshake_delay=0.4) as server:
        started = time.monotonic()
        settings = ConnectionSettings(tls=TlsSettings(ca_file=pki["ca_file"]), connect_timeout=5)
        with open_connection(server.address, settings) as conn:
            ended = time.monotonic()
            assert conn.is_tls and conn.command("admin", {"ping": 1}) == {"ok": 1.0}
    assert ended - started >= 0.4
    assert len(ticker.ticks_between(started, ended)) > 20
    assert ticker.largest_gap(started, ended) < 0.25  # blocking would leave one gap of >= 0.4 s


def test_close_wakes_a_parked_reader_and_its_descriptor_is_never_read_again(pki) -> None:
    """A greenlet parked in a TLS read must not outlive close(): if it did, it would wake on
    whatever socket next reuses the descriptor number and OpenSSL would steal that socket's bytes
    (seen as a 5-byte hole -- a TLS record header -- in a later, unrelated connection)."""
    context = server_context(pki["server"], pki["ca"])
    with ScriptedServer(tls_context=context) as tls_server:
        settings = ConnectionSettings(tls=TlsSettings(ca_file=pki["ca_file"]), connect_timeout=5)
        conn = open_connection(tls_server.address, settings)
        stream = conn._stream
        parked = gevent.spawn(stream.recv_into, bytearray(64), 64)  # the server never sends: parks
        wait_until(lambda: stream._read_watcher.active, message="the reader parked on its descriptor")
        assert not parked.dead
        conn.close()
        parked.join(timeout=2)
        assert parked.dead, "close() left a greenlet parked on the closed descriptor"
        assert isinstance(parked.exception, OSError)

        # A new socket may get the same descriptor number: it must receive every byte.
        gevent.sleep(0)
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        from gevent import socket as gsocket

        client = gsocket.create_connection(listener.getsockname())
        peer, _ = listener.accept()
        try:
            payload = bytes(range(256)) * 4
            peer.sendall(payload)
            received = b""
            with gevent.Timeout(2):
                while len(received) < len(payload):
                    received += client.recv(4096)
            assert received == payload  # (whether or not the kernel reused ``reused_fd`` for it)
        finally:
            client.close()
            peer.close()
            listener.close()


def test_a_socket_closed_underneath_never_lets_openssl_read_a_reused_descriptor(pki) -> None:
    """Someone closes the raw socket (not the TLS wrapper) while a greenlet is parked in a TLS read:
    when that descriptor number is reused, the parked greenlet must fail, not read the new socket."""
    context = server_context(pki["server"], pki["ca"])
    with ScriptedServer(tls_context=context) as tls_server:
        settings = ConnectionSettings(tls=TlsSettings(ca_file=pki["ca_file"]), connect_timeout=5)
        conn = open_connection(tls_server.address, settings)
        stream = conn._stream
        fd = stream.fileno()
        parked = gevent.spawn(stream.recv_into, bytearray(64), 64)
        wait_until(lambda: stream._read_watcher.active, message="the reader parked on its descriptor")
        stream._sock.close()  # behind the wrapper's back
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        from gevent import socket as gsocket

        client = gsocket.create_connection(listener.getsockname())
        peer, _ = listener.accept()
        try:
            payload = b"0123456789" * 10
            peer.sendall(payload)
            received = b""
            with gevent.Timeout(2):
                while len(received) < len(payload):
                    received += client.recv(4096)
            assert received == payload
            if client.fileno() == fd:  # the number was reused: the parked reader woke and must fail
                parked.join(timeout=2)
                assert parked.dead and isinstance(parked.exception, OSError)
        finally:
            parked.kill()
            client.close()
            peer.close()
            listener.close()
            conn.close()
