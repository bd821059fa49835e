"""SOCKS5 client handshake (RFC 1928) with username/password auth (RFC 1929).

The destination hostname is sent to the proxy as-is (ATYP 3) and never
resolved locally, as the SOCKS5 spec requires; IP literals go as ATYP 1/4.
The byte builders are pure; ``socks5_handshake`` drives them over any object
with ``sendall`` and ``recv`` (a connected gevent socket in practice). Any
refusal is an ``AutoReconnect``: the spec treats it like ECONNREFUSED.
"""

from __future__ import annotations

import ipaddress
import struct
from typing import Optional

from greenmongo.errors import AutoReconnect

VERSION = 5
METHOD_NO_AUTH = 0x00
METHOD_USERNAME_PASSWORD = 0x02
METHOD_NONE_ACCEPTABLE = 0xFF
CMD_CONNECT = 0x01
ATYP_IPV4 = 0x01
ATYP_DOMAIN = 0x03
ATYP_IPV6 = 0x04

REPLY_MESSAGES = {
    0x01: "general SOCKS server failure",
    0x02: "connection not allowed by ruleset",
    0x03: "network unreachable",
    0x04: "host unreachable",
    0x05: "connection refused",
    0x06: "TTL expired",
    0x07: "command not supported",
    0x08: "address type not supported",
}


def greeting(with_password: bool) -> bytes:
    methods = [METHOD_NO_AUTH, METHOD_USERNAME_PASSWORD] if with_password else [METHOD_NO_AUTH]
    return bytes([VERSION, len(methods), *methods])


def password_request(username: str, password: str) -> bytes:
    user = username.encode("utf-8")
    secret = password.encode("utf-8")
    if not 0 < len(user) <= 255 or not 0 < len(secret) <= 255:
        raise AutoReconnect("SOCKS5 username and password must each be 1 to 255 bytes")
    return bytes([1, len(user)]) + user + bytes([len(secret)]) + secret


def connect_request(host: str, port: int) -> bytes:
    """CONNECT to ``host:port``; a hostname goes unresolved as a domain name."""
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        name = host.encode("idna")
        if not 0 < len(name) <= 255:
            raise AutoReconnect(f"hostname {host!r} is too long for SOCKS5") from None
        target = bytes([ATYP_DOMAIN, len(name)]) + name
    else:
        atyp = ATYP_IPV4 if address.version == 4 else ATYP_IPV6
        target = bytes([atyp]) + address.packed
    return bytes([VERSION, CMD_CONNECT, 0]) + target + struct.pack(">H", port)


def _recv_exactly(sock, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise AutoReconnect("SOCKS5 proxy closed the connection during the handshake")
        data += chunk
    return data


def socks5_handshake(
    sock,
    host: str,
    port: int,
    username: Optional[str] = None,
    password: Optional[str] = None,
) -> None:
    """Ask the proxy on ``sock`` to connect to ``host:port``; on return ``sock`` is a tunnel to it."""
    with_password = bool(username) and bool(password)
    sock.sendall(greeting(with_password))
    version, method = _recv_exactly(sock, 2)
    if version != VERSION:
        raise AutoReconnect(f"SOCKS5 proxy answered with protocol version {version}")
    if method == METHOD_USERNAME_PASSWORD and username and password:  # with_password
        sock.sendall(password_request(username, password))
        _auth_version, status = _recv_exactly(sock, 2)
        if status != 0:
            raise AutoReconnect("SOCKS5 proxy rejected the username/password")
    elif method != METHOD_NO_AUTH:
        raise AutoReconnect("SOCKS5 proxy accepted none of the offered authentication methods")
    sock.sendall(connect_request(host, port))
    version, reply, _reserved, atyp = _recv_exactly(sock, 4)
    if version != VERSION:
        raise AutoReconnect(f"SOCKS5 proxy answered with protocol version {version}")
    if reply != 0:
        reason = REPLY_MESSAGES.get(reply, f"error {reply:#04x}")
        raise AutoReconnect(f"SOCKS5 proxy could not connect to {host}:{port}: {reason}")
    # The bound address that follows is of no use to us, but must be consumed.
    if atyp == ATYP_IPV4:
        _recv_exactly(sock, 4 + 2)
    elif atyp == ATYP_IPV6:
        _recv_exactly(sock, 16 + 2)
    elif atyp == ATYP_DOMAIN:
        (length,) = _recv_exactly(sock, 1)
        _recv_exactly(sock, length + 2)
    else:
        raise AutoReconnect(f"SOCKS5 proxy replied with unknown address type {atyp}")
