"""MONGODB-X509: the TLS client certificate's subject is the identity.

Servers since 3.4 derive the user from the certificate, so a username is sent
only when the application gave one. The same command doubles as the
speculative authentication document of the hello handshake.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional

from greenmongo.errors import ConfigurationError

if TYPE_CHECKING:
    from greenmongo.options.credentials import MongoCredential

__all__ = ["authenticate_x509", "x509_command"]


def x509_command(credentials: MongoCredential) -> Dict[str, Any]:
    if credentials.password is not None:
        raise ConfigurationError("MONGODB-X509 does not take a password")
    command: Dict[str, Any] = {"authenticate": 1, "mechanism": "MONGODB-X509"}
    if credentials.username:
        command["user"] = credentials.username
    return command


def authenticate_x509(conn: Any, credentials: MongoCredential,
                      speculative_reply: Optional[Mapping[str, Any]] = None) -> None:
    """Done already if the hello reply carried a speculative answer; otherwise one command."""
    if speculative_reply:
        return
    conn.command("$external", x509_command(credentials))
