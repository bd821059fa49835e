"""PLAIN (RFC 4616): LDAP authentication proxied by the server, one saslStart."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from greenmongo.auth.sasl import require_done, sasl_start
from greenmongo.errors import ConfigurationError

if TYPE_CHECKING:
    from greenmongo.options.credentials import MongoCredential

__all__ = ["authenticate_plain", "plain_payload"]


def plain_payload(username: str, password: str) -> bytes:
    """``\\0username\\0password``: an empty authzid lets the server use the username."""
    return b"\x00" + username.encode("utf-8") + b"\x00" + password.encode("utf-8")


def authenticate_plain(conn: Any, credentials: MongoCredential) -> None:
    if not credentials.username:
        raise ConfigurationError("PLAIN requires a username")
    if credentials.password is None:
        raise ConfigurationError("PLAIN requires a password")
    payload = plain_payload(credentials.username, credentials.password)
    reply = conn.command(credentials.source or "$external", sasl_start("PLAIN", payload, autoAuthorize=1))
    require_done(reply, "PLAIN")
