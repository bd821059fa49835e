"""Server addresses as ``(host, port)`` tuples, PyMongo's shape.

Hostnames are lower-cased wherever they enter the topology (seeds and the
``me``/``hosts``/``passives``/``arbiters``/``primary`` fields of hello), so
``A:27017`` and ``a:27017`` name one server (SDAM: "Hostnames are normalized
to lower-case").
"""

from __future__ import annotations

from typing import Optional, Tuple

Address = Tuple[str, Optional[int]]

DEFAULT_PORT = 27017


def parse_address(text: str, default_port: Optional[int] = DEFAULT_PORT) -> Address:
    """``"host:port"``, ``"[::1]:port"`` or a Unix socket path -> normalized ``(host, port)``.

    A path ending in ``.sock`` keeps its case and has no port.
    """
    if text.endswith(".sock"):
        return text, None
    if text.startswith("["):
        close = text.find("]")
        if close == -1:
            raise ValueError(f"an IPv6 address literal must be enclosed in '[' and ']': {text!r}")
        host, rest = text[1:close], text[close + 1:]
        if rest and not rest.startswith(":"):
            raise ValueError(f"invalid address {text!r}")
        port_text = rest[1:] if rest else ""
    elif text.count(":") > 1:
        raise ValueError(f"an IPv6 address literal must be enclosed in '[' and ']': {text!r}")
    else:
        host, _, port_text = text.partition(":")
    if not port_text:
        return host.lower(), default_port
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"invalid port in {text!r}")
    return host.lower(), int(port_text)


def format_address(address: Address) -> str:
    """``(host, port)`` -> ``"host:port"``, bracketing IPv6 literals."""
    host, port = address
    if port is None:
        return host
    if ":" in host:
        return f"[{host}]:{port}"
    return f"{host}:{port}"
