"""One KMS exchange (client-side encryption): TLS to a key management service, send, read what is asked.

libmongocrypt writes the HTTP (or KMIP) request and parses the reply; it says how many more bytes it
needs after each feed. This module only moves those bytes over a gevent socket and pyOpenSSL, so a
KMS request never blocks the hub. TLS is always verified (the spec forbids insecure KMS TLS options).
"""

from __future__ import annotations

import socket as _socket
from typing import TYPE_CHECKING, Callable, Optional, Union

from greenmongo.errors import AutoReconnect, NetworkTimeout
from greenmongo.hub.waiting import call_with_deadline
from greenmongo.net.tcp import create_tcp_socket
from greenmongo.options.connection_settings import TlsSettings

if TYPE_CHECKING:
    from greenmongo.net.tls import TlsSocket


def kms_exchange(host: str, port: int, tls: TlsSettings, message: bytes, bytes_needed: Callable[[], int],
                 feed: Callable[[bytes], None], timeout: float) -> None:
    """Send ``message`` to ``host:port`` over TLS and feed the reply until nothing more is needed.

    ``timeout`` bounds the whole exchange. Network failures raise AutoReconnect (NetworkTimeout for a
    timeout) naming the KMS host, never the message (it carries credentials and key material).
    """
    try:
        call_with_deadline(timeout, f"KMS request to {host}:{port}", _exchange, host, port, tls, message,
                           bytes_needed, feed, timeout)
    except _socket.timeout:
        raise NetworkTimeout(f"KMS request to {host}:{port} timed out after {timeout}s") from None
    except NetworkTimeout:
        raise
    except AutoReconnect as exc:
        raise AutoReconnect(f"KMS request to {host}:{port} failed: {exc}") from None
    except OSError as exc:
        raise AutoReconnect(f"KMS request to {host}:{port} failed: {exc.strerror or type(exc).__name__}") from None


def _exchange(host: str, port: int, tls: TlsSettings, message: bytes, bytes_needed: Callable[[], int],
              feed: Callable[[bytes], None], timeout: float) -> None:
    from greenmongo.net.tls import build_context, wrap_socket  # the TLS stack loads with the first KMS request

    stream: Optional[Union[_socket.socket, "TlsSocket"]] = None
    try:
        stream = create_tcp_socket(host, port, timeout)
        stream = wrap_socket(stream, build_context(tls), host, timeout=timeout)
        stream.settimeout(timeout)
        stream.sendall(message)
        needed = bytes_needed()
        while needed > 0:
            data = stream.recv(needed)
            if not data:
                raise OSError(0, "KMS connection closed")
            feed(data)
            needed = bytes_needed()
    finally:
        if stream is not None:
            stream.close()
