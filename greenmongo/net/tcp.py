"""TCP (and Unix socket) connections on gevent sockets.

TCP connects race the resolved addresses "happy eyeballs" style (RFC 8305):
families are interleaved and a new attempt starts every 250 ms while earlier
ones are still pending, so a black-holed IPv6 route does not cost a whole
connectTimeoutMS. Every socket that does not become the result is closed,
whatever interrupts us (kill-safe). net.connect builds MongoDB streams on
these, net.http its requests.
"""

from __future__ import annotations

import socket as _socket
from typing import Any, List, Optional, Tuple

import gevent
from gevent import socket as gsocket
from gevent.queue import Queue

#: RFC 8305's recommended "connection attempt delay".
ATTEMPT_DELAY = 0.25

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


def _literal_addrinfo(host: str, port: int) -> Optional[List[_AddrInfo]]:
    """The address of an IP literal, without a resolver; None for a name (or a scoped IPv6 address).

    gevent's default resolver runs even a literal's getaddrinfo in its thread pool, whose first use starts an
    OS thread and imports concurrent.futures: ~10 ms of a new process's first connection (and a thread that
    then competes for the GIL) that ``127.0.0.1`` or ``[::1]`` does not need.
    """
    for family, sockaddr in ((_socket.AF_INET, (host, port)), (_socket.AF_INET6, (host, port, 0, 0))):
        try:
            _socket.inet_pton(family, host)  # strict: dotted quads only, no scope (the resolver handles "%eth0")
        except (OSError, ValueError):
            continue
        return [(family, _socket.SOCK_STREAM, _socket.IPPROTO_TCP, "", sockaddr)]
    return None


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
    infos = _literal_addrinfo(host, port) or _interleave_families(
        gsocket.getaddrinfo(host, port, 0, _socket.SOCK_STREAM))
    if not infos:
        raise OSError(f"getaddrinfo returned no addresses for {host}")
    results: Queue = Queue()
    attempts: list[gevent.Greenlet] = []
    winner: Optional[_socket.socket] = None
    errors: list[OSError] = []
    error: Optional[OSError] = None
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
        # The error raised holds this frame in its traceback: no reference cycle through these locals.
        errors.clear()
        error = None


def create_unix_socket(path: str, timeout: Optional[float]) -> _socket.socket:
    sock = gsocket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(path)
    except BaseException:
        sock.close()
        raise
    return sock
