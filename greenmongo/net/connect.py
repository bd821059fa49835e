"""Open the byte stream a Connection talks over: TCP (or a Unix socket), SOCKS5, TLS.

TCP connects race the resolved addresses "happy eyeballs" style (RFC 8305):
families are interleaved and a new attempt starts every 250 ms while earlier
ones are still pending, so a black-holed IPv6 route does not cost a whole
connectTimeoutMS. Every socket that does not become the result is closed,
whatever interrupts us (kill-safe).
"""

from __future__ import annotations

import socket as _socket
from typing import Any, List, Optional, Tuple, Union

import gevent
from gevent import socket as gsocket
from gevent.queue import Queue

from greenmongo.errors import AutoReconnect, NetworkTimeout
from greenmongo.net import ocsp
from greenmongo.net.socks5 import socks5_handshake
from greenmongo.net.tls import TlsSocket, build_context, wrap_socket
from greenmongo.options.connection_settings import ConnectionSettings
from greenmongo.sdam.address import Address

_SETTINGS: Any = object()

#: RFC 8305's recommended "connection attempt delay".
ATTEMPT_DELAY = 0.25

Stream = Union[_socket.socket, TlsSocket]
#: One ``getaddrinfo`` result: (family, type, proto, canonname, sockaddr).
_AddrInfo = Tuple[int, int, int, str, Tuple[Any, ...]]


def is_unix_socket(host: str) -> bool:
    return host.endswith(".sock")


def _interleave_families(infos: List[_AddrInfo]) -> List[_AddrInfo]:
    """Alternate address families, keeping the resolver's order within each."""
    if not infos:
        return []
    first = infos[0][0]
    preferred = [info for info in infos if info[0] == first]
    others = [info for info in infos if info[0] != first]
    ordered: List[_AddrInfo] = []
    for index in range(max(len(preferred), len(others))):
        ordered.extend(group[index] for group in (preferred, others) if index < len(group))
    return ordered


def _configure(sock: _socket.socket, keepalive_idle: int) -> None:
    sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
    sock.setsockopt(_socket.SOL_SOCKET, _socket.SO_KEEPALIVE, 1)
    for option, ceiling in (("TCP_KEEPIDLE", keepalive_idle), ("TCP_KEEPINTVL", 10), ("TCP_KEEPCNT", 9)):
        number = getattr(_socket, option, None)
        if number is None:
            continue
        try:
            if sock.getsockopt(_socket.IPPROTO_TCP, number) > ceiling:
                sock.setsockopt(_socket.IPPROTO_TCP, number, ceiling)
        except OSError:
            pass  # not settable on this platform: keepalive stays on with its defaults


def _attempt(info: tuple, timeout: Optional[float], keepalive_idle: int, results: Queue) -> None:
    family, kind, proto, _canonical, sockaddr = info
    sock = gsocket.socket(family, kind, proto)
    handed_off = False
    try:
        _configure(sock, keepalive_idle)
        sock.settimeout(timeout)
        sock.connect(sockaddr)
        results.put((sock, None))
        handed_off = True
    except OSError as exc:
        results.put((None, exc))
    finally:
        if not handed_off:
            sock.close()


def create_tcp_socket(host: str, port: int, timeout: Optional[float], keepalive_idle: int = 120) -> _socket.socket:
    """A connected TCP socket with TCP_NODELAY and keepalive; raises OSError (or socket.timeout)."""
    infos = _interleave_families(gsocket.getaddrinfo(host, port, 0, _socket.SOCK_STREAM))
    if not infos:
        raise OSError(f"getaddrinfo returned no addresses for {host}")
    results: Queue = Queue()
    attempts: list[gevent.Greenlet] = []
    winner: Optional[_socket.socket] = None
    errors: list[OSError] = []
    try:
        pending = 0
        for info in infos:
            attempts.append(gevent.spawn(_attempt, info, timeout, keepalive_idle, results))
            pending += 1
            try:
                sock, error = results.get(timeout=ATTEMPT_DELAY)
            except gevent.queue.Empty:
                continue
            pending -= 1
            if sock is not None:
                winner = sock
                return sock
            errors.append(error)
        while pending:
            sock, error = results.get()
            pending -= 1
            if sock is not None:
                winner = sock
                return sock
            errors.append(error)
        raise errors[-1]
    finally:
        gevent.killall([g for g in attempts if not g.dead], block=True)
        while not results.empty():
            sock, _error = results.get_nowait()
            if sock is not None and sock is not winner:
                sock.close()


def create_unix_socket(path: str, timeout: Optional[float]) -> _socket.socket:
    sock = gsocket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(path)
    except BaseException:
        sock.close()
        raise
    return sock


def _describe_timeout(connect_timeout: Optional[float], settings: ConnectionSettings) -> str:
    if connect_timeout is None:
        return "timed out"
    which = "connectTimeoutMS" if connect_timeout == settings.connect_timeout else "what timeoutMS left"
    return f"timed out ({which}: {connect_timeout * 1000:.1f}ms)"


def open_stream(
    address: Address,
    settings: ConnectionSettings,
    *,
    ocsp_cache: ocsp.OcspCache = ocsp.DEFAULT_CACHE,
    connect_timeout: Any = _SETTINGS,
) -> Stream:
    """Connect to ``address`` per ``settings``; raises AutoReconnect/NetworkTimeout on failure.

    ``connect_timeout`` (seconds) replaces ``settings.connect_timeout`` for TCP and TLS (an operation's
    deadline may leave less than connectTimeoutMS). The returned stream has ``settings.socket_timeout`` applied.
    """
    host, port = address
    host = host.strip("[]") if host.startswith("[") else host
    label = f"{address[0]}:{port}" if not is_unix_socket(host) else host
    if connect_timeout is _SETTINGS:
        connect_timeout = settings.connect_timeout
    sock: Optional[_socket.socket] = None
    ok = False
    try:
        try:
            if is_unix_socket(host) or port is None:  # only a Unix socket path has no port (parse_address)
                sock = create_unix_socket(host, connect_timeout)
            elif settings.proxy is not None:
                proxy = settings.proxy
                sock = create_tcp_socket(proxy.host, proxy.port, connect_timeout, settings.keepalive_idle)
                socks5_handshake(sock, host, port, proxy.username, proxy.password)
            else:
                sock = create_tcp_socket(host, port, connect_timeout, settings.keepalive_idle)
        except _socket.timeout:
            raise NetworkTimeout(f"{label}: {_describe_timeout(connect_timeout, settings)}") from None
        except AutoReconnect as exc:
            raise type(exc)(f"{label}: {exc}") from None
        except OSError as exc:
            raise AutoReconnect(f"{label}: {exc}") from None
        stream: Stream = sock
        if settings.tls is not None:
            try:
                stream = wrap_socket(sock, build_context(settings.tls), host, timeout=connect_timeout,
                                     ocsp_cache=ocsp_cache)
            except AutoReconnect as exc:  # NetworkTimeout included
                raise type(exc)(f"{label}: {exc}") from None
        stream.settimeout(settings.socket_timeout)
        ok = True
        return stream
    finally:
        if not ok and sock is not None:
            sock.close()
