"""Open the byte stream a Connection talks over: TCP (or a Unix socket), SOCKS5, TLS.

TCP and Unix sockets come from net.tcp, TLS from net.tls; a certificate that neither a stapled nor a
cached OCSP response settles is checked with its OCSP responders (net.ocsp_responders) before the
stream is handed out. net.tls, net.ocsp and net.ocsp_responders (pyOpenSSL, cryptography, http.client)
are imported at the first TLS connection, not with greenmongo: most processes never use TLS, and a
gunicorn worker that does pays for it once, when it first connects.
"""

from __future__ import annotations

import socket as _socket
from typing import TYPE_CHECKING, Any, Optional, Union

from greenmongo.errors import AutoReconnect, NetworkTimeout
from greenmongo.net.socks5 import socks5_handshake
from greenmongo.net.tcp import create_tcp_socket, create_unix_socket, is_unix_socket
from greenmongo.options.connection_settings import ConnectionSettings
from greenmongo.sdam.address import Address

if TYPE_CHECKING:
    from greenmongo.net import ocsp
    from greenmongo.net.tls import TlsSocket

_SETTINGS: Any = object()

Stream = Union[_socket.socket, "TlsSocket"]


def load_tls() -> None:
    """Import the TLS stack now (a client configured for TLS calls it when constructed).

    The first TLS connection would import it anyway, but inside a pool's or monitor's greenlet, where the
    import (~50 ms of pyOpenSSL and cryptography) holds up every other greenlet; a constructor runs
    before any of them needs the hub.
    """
    import greenmongo.net.ocsp_responders  # noqa: F401
    import greenmongo.net.tls  # noqa: F401


def _describe_timeout(connect_timeout: Optional[float], settings: ConnectionSettings) -> str:
    if connect_timeout is None:
        return "timed out"
    which = "connectTimeoutMS" if connect_timeout == settings.connect_timeout else "what timeoutMS left"
    return f"timed out ({which}: {connect_timeout * 1000:.1f}ms)"


def open_stream(
    address: Address,
    settings: ConnectionSettings,
    *,
    ocsp_cache: Optional[ocsp.OcspCache] = None,
    connect_timeout: Any = _SETTINGS,
) -> Stream:
    """Connect to ``address`` per ``settings``; raises AutoReconnect/NetworkTimeout on failure.

    ``ocsp_cache``: where TLS connections keep OCSP answers (None: the process-wide ``ocsp.DEFAULT_CACHE``).

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
            from greenmongo.net import ocsp
            from greenmongo.net.ocsp_responders import ask_responders
            from greenmongo.net.tls import build_context, wrap_socket

            if ocsp_cache is None:
                ocsp_cache = ocsp.DEFAULT_CACHE
            try:
                stream = wrap_socket(sock, build_context(settings.tls), host, timeout=connect_timeout,
                                     ocsp_cache=ocsp_cache, ask_responders=ask_responders)
            except AutoReconnect as exc:  # NetworkTimeout included
                raise type(exc)(f"{label}: {exc}") from None
        stream.settimeout(settings.socket_timeout)
        ok = True
        return stream
    finally:
        if not ok and sock is not None:
            sock.close()
