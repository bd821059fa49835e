"""A minimal HTTP(S) client on greenmongo's own sockets: cloud credential endpoints and OCSP responders.

MONGODB-AWS and MONGODB-OIDC fetch credentials from link-local metadata services (EC2, ECS,
Azure, GCP) and STS; the OCSP endpoint check (net.ocsp_responders) asks a certificate's OCSP
responders. ``urllib`` would block the hub in an unpatched process; this sends one request over a
gevent TCP socket (net.tcp; for https pyOpenSSL through net.tls, with the system trust store and
hostname verification like every other greenmongo socket, stapled OCSP but no responder requests
of its own) and parses the reply with ``http.client``. Everything is released in ``finally`` so a
gevent.Timeout or kill mid-request leaks nothing.
"""

from __future__ import annotations

import http.client
import io
import socket as _socket
from typing import Mapping, NamedTuple, Optional, Protocol, Union
from urllib.parse import urlsplit

from greenmongo.errors import AutoReconnect, NetworkTimeout
from greenmongo.hub.waiting import call_with_deadline
from greenmongo.net.tcp import create_tcp_socket
from greenmongo.net.tls import TlsSocket, build_context, wrap_socket
from greenmongo.options.connection_settings import TlsSettings

__all__ = ["HttpFetcher", "HttpResponse", "http_request"]

#: Credential documents and OCSP responses are small; a reply larger than this is neither.
MAX_RESPONSE_BYTES = 1 << 20
#: https requests verify the server as every greenmongo TLS socket does; an OCSP endpoint check of their own
#: would need this module again (an OCSP responder over https), so they rely on stapling and the cache.
_HTTPS = TlsSettings(disable_ocsp_endpoint_check=True)


class HttpResponse(NamedTuple):
    status: int
    body: bytes


class HttpFetcher(Protocol):
    """What the credential providers and the OCSP endpoint check call; tests pass a fake with this shape."""

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
    try:
        raw = call_with_deadline(timeout, f"HTTP {method} {url}", _exchange, (parts.hostname, port), secure,
                                 timeout, request)
    except (NetworkTimeout, _socket.timeout):
        raise TimeoutError(f"HTTP {method} {url} timed out after {timeout}s") from None
    except (AutoReconnect, OSError) as exc:
        raise ConnectionError(f"HTTP {method} {url}: {exc}") from None
    response = http.client.HTTPResponse(_ReplyBytes(raw), method=method)  # type: ignore[arg-type]
    response.begin()
    return HttpResponse(response.status, response.read())


def _exchange(address: tuple[str, int], secure: bool, timeout: float, request: bytes) -> bytes:
    """Send ``request`` and read until the server closes (``Connection: close``)."""
    stream: Optional[Union[_socket.socket, TlsSocket]] = None
    try:
        stream = create_tcp_socket(address[0], address[1], timeout)
        if secure:
            stream = wrap_socket(stream, build_context(_HTTPS), address[0], timeout=timeout)
        stream.settimeout(timeout)
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
