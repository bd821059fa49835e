"""A minimal HTTP(S) client for cloud credential endpoints, on greenmongo's own sockets.

MONGODB-AWS and MONGODB-OIDC fetch credentials from link-local metadata services (EC2, ECS,
Azure, GCP) and STS. ``urllib`` would block the hub in an unpatched process; this sends one
request over ``net.connect.open_stream`` (gevent TCP, and pyOpenSSL for https with the system
trust store and hostname verification, like every other greenmongo socket) and parses the reply
with ``http.client``. Everything is released in ``finally`` so a gevent.Timeout or kill
mid-request leaks nothing.
"""

from __future__ import annotations

import http.client
import io
from typing import Mapping, NamedTuple, Optional, Protocol
from urllib.parse import urlsplit

from greenmongo.errors import AutoReconnect, NetworkTimeout
from greenmongo.hub.waiting import call_with_deadline
from greenmongo.net.connect import Stream, open_stream
from greenmongo.options.connection_settings import ConnectionSettings, TlsSettings

__all__ = ["HttpFetcher", "HttpResponse", "http_request"]

#: Credential documents are small; a reply larger than this is not one.
MAX_RESPONSE_BYTES = 1 << 20


class HttpResponse(NamedTuple):
    status: int
    body: bytes


class HttpFetcher(Protocol):
    """What the credential providers call; tests pass a fake with this shape."""

    def __call__(self, method: str, url: str, headers: Mapping[str, str],
                 body: Optional[bytes] = None, timeout: float = 10.0) -> HttpResponse: ...


class _ReplyBytes:
    """The whole reply, with the one method ``http.client.HTTPResponse`` needs of a socket."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def makefile(self, mode: str) -> io.BytesIO:
        return io.BytesIO(self._data)


def http_request(method: str, url: str, headers: Mapping[str, str],
                 body: Optional[bytes] = None, timeout: float = 10.0) -> HttpResponse:
    """One HTTP/1.1 request with ``Connection: close``; ``timeout`` bounds the whole exchange."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"unsupported URL {url!r}")
    secure = parts.scheme == "https"
    port = parts.port or (443 if secure else 80)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    host_header = parts.hostname if parts.port is None else f"{parts.hostname}:{parts.port}"

    lines = [f"{method} {target} HTTP/1.1", f"Host: {host_header}", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    if body is not None or method in ("POST", "PUT"):
        lines.append(f"Content-Length: {len(body or b'')}")
    request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")
    settings = ConnectionSettings(connect_timeout=timeout, socket_timeout=timeout,
                                  tls=TlsSettings() if secure else None)
    try:
        raw = call_with_deadline(timeout, f"HTTP {method} {url}", _exchange, (parts.hostname, port), settings,
                                 request)
    except NetworkTimeout:
        raise TimeoutError(f"HTTP {method} {url} timed out after {timeout}s") from None
    except AutoReconnect as exc:
        raise ConnectionError(f"HTTP {method} {url}: {exc}") from None
    response = http.client.HTTPResponse(_ReplyBytes(raw), method=method)  # type: ignore[arg-type]
    response.begin()
    return HttpResponse(response.status, response.read())


def _exchange(address: tuple[str, int], settings: ConnectionSettings, request: bytes) -> bytes:
    """Send ``request`` and read until the server closes (``Connection: close``)."""
    stream: Optional[Stream] = None
    try:
        stream = open_stream(address, settings)
        stream.sendall(request)
        chunks: list[bytes] = []
        size = 0
        while True:
            chunk = stream.recv(65536)
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > MAX_RESPONSE_BYTES:
                raise ConnectionError(f"HTTP reply from {address[0]} is larger than {MAX_RESPONSE_BYTES} bytes")
            chunks.append(chunk)
    finally:
        if stream is not None:
            stream.close()
