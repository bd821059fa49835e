"""The gevent HTTP client the cloud credential providers use, against a loopback server."""

from __future__ import annotations

from typing import List

import gevent
import gevent.server
import pytest

from greenmongo.net.http import http_request


def _serve(handler):
    server = gevent.server.StreamServer(("127.0.0.1", 0), handler)
    server.start()
    return server


def test_request_and_response() -> None:
    seen: List[bytes] = []

    def handle(sock, address):
        data = b""
        while b"\r\n\r\n" not in data:
            data += sock.recv(4096)
        seen.append(data)
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")

    server = _serve(handle)
    try:
        url = f"http://127.0.0.1:{server.server_port}/latest/api/token?x=1"
        response = http_request("PUT", url, {"X-aws-ec2-metadata-token-ttl-seconds": "30"}, timeout=5)
    finally:
        server.stop()
    assert response.status == 200 and response.body == b"hello"
    request = seen[0].decode()
    assert request.startswith("PUT /latest/api/token?x=1 HTTP/1.1\r\n")
    assert f"Host: 127.0.0.1:{server.server_port}\r\n" in request
    assert "X-aws-ec2-metadata-token-ttl-seconds: 30\r\n" in request
    assert "Content-Length: 0\r\n" in request


def test_non_200_status_is_returned() -> None:
    def handle(sock, address):
        sock.recv(4096)
        sock.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")

    server = _serve(handle)
    try:
        response = http_request("GET", f"http://127.0.0.1:{server.server_port}/", {}, timeout=5)
    finally:
        server.stop()
    assert response == (404, b"")


def test_silent_server_times_out_without_blocking_the_hub() -> None:
    def handle(sock, address):
        gevent.sleep(5)

    ticks = []
    ticker = gevent.spawn(lambda: [ticks.append(gevent.sleep(0.01)) for _ in range(3)])
    server = _serve(handle)
    try:
        with pytest.raises(TimeoutError):
            http_request("GET", f"http://127.0.0.1:{server.server_port}/", {}, timeout=0.5)
        assert len(ticks) == 3  # other greenlets ran while we waited: the hub was never blocked
    finally:
        ticker.kill()
        server.stop(timeout=0)


def test_unsupported_url() -> None:
    with pytest.raises(ValueError):
        http_request("GET", "ftp://example.com/", {})


def test_https_goes_through_greenmongo_tls() -> None:
    """An https URL runs pyOpenSSL's handshake (net/tls): a plain-HTTP peer makes it fail clearly."""
    def handle(sock, address):
        sock.recv(4096)
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")

    server = _serve(handle)
    try:
        with pytest.raises(ConnectionError, match="TLS handshake failed"):
            http_request("GET", f"https://127.0.0.1:{server.server_port}/", {}, timeout=5)
    finally:
        server.stop(timeout=0)
