"""One host, step by step, timed: what ``python -m greenmongo doctor`` reports about each server.

The pool's factory (``handshake.open_connection``) does the same steps in one go and only says whether
they worked; here each is timed and described on its own: name resolution, TCP connect, the TLS
handshake (version, cipher, certificate, OCSP verdict), the hello, round trips, and authentication on a
second connection (so a wrong password still leaves the hello and the round trips reported).
Everything is plain data (dicts of str/int/float/bool/list) and never holds a password.
"""

from __future__ import annotations

import socket as _socket
import time
from typing import Any, Callable, Mapping, Optional

from gevent import socket as gsocket

from greenmongo.errors import AutoReconnect, NetworkTimeout
from greenmongo.net import ocsp
from greenmongo.net.connect import open_stream
from greenmongo.net.connection import Connection
from greenmongo.net.dns import DnsResolver
from greenmongo.net.handshake import Authenticator, perform_handshake
from greenmongo.net.ocsp_responders import ask_responders
from greenmongo.net.tcp import create_tcp_socket, is_unix_socket
from greenmongo.net.tls import TlsSocket, build_context, wrap_socket
from greenmongo.options.connection_settings import ConnectionSettings
from greenmongo.sdam.address import Address


def _ms(seconds: float) -> float:
    return round(seconds * 1000.0, 3)


def _error_text(exc: BaseException) -> str:
    """One line: a server's error as its errmsg, code and codeName (not the whole reply document)."""
    details = getattr(exc, "details", None)
    if isinstance(details, Mapping) and "errmsg" in details:
        code = f" (code {details.get('code')} {details.get('codeName', '')})".replace(" )", ")") \
            if "code" in details else ""
        return f"{type(exc).__name__}: {details['errmsg']}{code}"
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"


def resolve_addresses(host: str, port: int, resolver: Optional[DnsResolver], timeout: Optional[float]) -> list[str]:
    """The host's IP addresses: through ``resolver`` (A, then AAAA) when given, else the system's (gevent's
    resolver, cooperative); an IP literal is its own address."""
    bare = host.strip("[]")
    try:
        _socket.inet_pton(_socket.AF_INET6 if ":" in bare else _socket.AF_INET, bare)
        return [bare]
    except OSError:
        pass
    if resolver is not None:
        import dns.rdatatype

        found: list[str] = []
        for rdtype in (dns.rdatatype.A, dns.rdatatype.AAAA):
            for rdata in resolver.query(host, rdtype, timeout) or ():
                found.append(rdata.to_text())
        if not found:
            raise AutoReconnect(f"{host}: the name has no A or AAAA records")
        return found
    infos = gsocket.getaddrinfo(host, port, 0, _socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _certificate(stream: TlsSocket) -> dict[str, Any]:
    cert = stream.peer_certificate()
    if cert is None:
        return {}
    not_after = cert.not_valid_after_utc
    remaining = not_after.timestamp() - time.time()
    return {"subject": cert.subject.rfc4514_string(), "issuer": cert.issuer.rfc4514_string(),
            "not_after": not_after.isoformat(), "days_left": round(remaining / 86400.0, 1)}


def _connect(address: Address, ip: Optional[str], settings: ConnectionSettings, timeout: Optional[float],
             report: Optional[dict[str, Any]]) -> Any:
    """A connected (and secured) stream to ``address`` at ``ip``; fills ``report`` with the steps' timings."""
    host, port = address
    label = f"{host}:{port}"
    if ip is None or settings.proxy is not None or port is None:  # a Unix socket, or through a SOCKS5 proxy
        started = time.monotonic()
        stream = open_stream(address, settings, connect_timeout=timeout, ocsp_cache=ocsp.OcspCache())
        if report is not None:
            report["connect_ms"] = _ms(time.monotonic() - started)
        return stream
    started = time.monotonic()
    try:
        sock = create_tcp_socket(ip, port, timeout, settings.keepalive_idle)
    except _socket.timeout:
        raise NetworkTimeout(f"{label}: TCP connect timed out") from None
    except OSError as exc:
        raise AutoReconnect(f"{label}: {exc}") from None
    if report is not None:
        report["tcp_connect_ms"] = _ms(time.monotonic() - started)
    if settings.tls is None:
        sock.settimeout(settings.socket_timeout)
        return sock
    started = time.monotonic()
    try:
        # A fresh OCSP cache: the verdict is this check's, not one remembered from an earlier connection.
        stream = wrap_socket(sock, build_context(settings.tls), host, timeout=timeout, ocsp_cache=ocsp.OcspCache(),
                             ask_responders=ask_responders)
    except AutoReconnect as exc:
        raise type(exc)(f"{label}: {exc}") from None
    if report is not None:
        report["tls"] = {"handshake_ms": _ms(time.monotonic() - started), "version": stream.protocol_version,
                         "cipher": stream.cipher, "certificate": _certificate(stream),
                         "ocsp": stream.ocsp_verdict or "not checked"}
    stream.settimeout(settings.socket_timeout)
    return stream


def probe_host(address: Address, settings: ConnectionSettings, *, timeout: Optional[float],
               resolver: Optional[DnsResolver] = None, rtt_samples: int = 3,
               make_authenticator: Optional[Callable[[], Authenticator]] = None) -> dict[str, Any]:
    """Everything the doctor says about one host; ``error`` (and the step that failed) when a step fails.

    ``timeout`` bounds each step (resolution, TCP, TLS, every command); ``make_authenticator`` (None: no
    credentials) makes the authenticator for the second connection; its ``mechanism`` is reported.
    """
    host, port = address
    report: dict[str, Any] = {"address": f"{host}:{port}" if port is not None else host, "ok": False}
    step = "resolve"
    conn: Optional[Connection] = None
    try:
        ip: Optional[str] = None
        if port is not None and not is_unix_socket(host) and settings.proxy is None:
            started = time.monotonic()
            addresses = resolve_addresses(host, port, resolver, timeout)
            report["addresses"] = addresses
            report["resolve_ms"] = _ms(time.monotonic() - started)
            ip = addresses[0]
        step = "connect"
        stream = _connect(address, ip, settings, timeout, report)
        conn = Connection(stream, address, settings)
        conn.default_timeout = timeout
        step = "hello"
        started = time.monotonic()
        hello = perform_handshake(conn)
        report["hello_ms"] = _ms(time.monotonic() - started)
        report["hello"] = hello
        report["compression"] = conn.compression
        step = "rtt"
        samples = []
        for _ in range(max(rtt_samples, 0)):
            started = time.monotonic()
            conn.command("admin", {"hello" if conn.hello_ok else "isMaster": 1})
            samples.append(_ms(time.monotonic() - started))
        report["rtt_ms"] = samples
        try:
            build = conn.command("admin", {"buildInfo": 1}) or {}
            report["server_version"] = build.get("version")
        except Exception:  # some deployments forbid it before authentication: not a health problem
            report["server_version"] = None
        conn.close("doctor: done")
        conn = None
        report["ok"] = True
        if make_authenticator is not None:
            report["auth"] = _authenticate(address, ip, settings, timeout, make_authenticator)
    except Exception as exc:
        report["error"] = _error_text(exc)
        report["failed_step"] = step
    finally:
        if conn is not None:
            conn.close("doctor: failed")
    return report


def _authenticate(address: Address, ip: Optional[str], settings: ConnectionSettings, timeout: Optional[float],
                  make_authenticator: Callable[[], Authenticator]) -> dict[str, Any]:
    authenticator = make_authenticator()
    started = time.monotonic()
    conn: Optional[Connection] = None
    try:
        conn = Connection(_connect(address, ip, settings, timeout, None), address, settings)
        conn.default_timeout = timeout
        perform_handshake(conn, authenticator=authenticator)
        return {"ok": True, "mechanism": getattr(authenticator, "mechanism", None),
                "duration_ms": _ms(time.monotonic() - started)}
    except Exception as exc:
        return {"ok": False, "mechanism": getattr(authenticator, "mechanism", None), "error": _error_text(exc),
                "duration_ms": _ms(time.monotonic() - started)}
    finally:
        if conn is not None:
            conn.close("doctor: done")
