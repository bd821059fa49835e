"""A minimal HTTP(S) client on gevent sockets, for cloud credential endpoints.

MONGODB-AWS and MONGODB-OIDC fetch credentials from link-local metadata
services (EC2, ECS, Azure, GCP) and STS. greenmongo does not monkey-patch, so
``urllib`` would block the hub; this issues one request over a gevent socket and
reads the reply with ``http.client``'s parser. Everything is released in
``finally`` so a gevent.Timeout or kill mid-request leaks nothing.
"""

from __future__ import annotations

import http.client
from typing import Mapping, NamedTuple, Optional, Protocol
from urllib.parse import urlsplit

import gevent
import gevent.socket
import gevent.ssl

__all__ = ["HttpFetcher", "HttpResponse", "http_request"]


class HttpResponse(NamedTuple):
    status: int
    body: bytes


class HttpFetcher(Protocol):
    """What the credential providers call; tests pass a fake with this shape."""

    def __call__(self, method: str, url: str, headers: Mapping[str, str],
                 body: Optional[bytes] = None, timeout: float = 10.0) -> HttpResponse: ...


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

    sock = None
    response = None
    with gevent.Timeout(timeout, TimeoutError(f"HTTP {method} {url} timed out after {timeout}s")):
        try:
            sock = gevent.socket.create_connection((parts.hostname, port), timeout=timeout)
            if secure:
                sock = gevent.ssl.create_default_context().wrap_socket(sock, server_hostname=parts.hostname)
            sock.sendall(request)
            response = http.client.HTTPResponse(sock, method=method)
            response.begin()
            return HttpResponse(response.status, response.read())
        finally:
            if response is not None:
                response.close()
            if sock is not None:
                sock.close()
