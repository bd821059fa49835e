"""Authentication: SCRAM-SHA-1/256, PLAIN, MONGODB-X509, MONGODB-AWS, MONGODB-OIDC.

``Authenticator(credentials)`` plugs into ``greenmongo.net.handshake`` (one per
new connection). Underneath, ``authenticate(conn, credentials, handshake)`` runs a
conversation over a connection; ``prepare_handshake(credentials).hello_fields()`` gives the hello's
``saslSupportedMechs`` / ``speculativeAuthenticate``; ``reauthenticate`` answers
error 391. ``AuthCache`` is the per-client state a ``MongoCredential`` carries.
GSSAPI is not supported (no Kerberos binding installs here): it raises
ConfigurationError.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from greenmongo.auth.cache import AuthCache, AuthIO
from greenmongo.auth.mechanisms import (
    SUPPORTED_MECHANISMS,
    Authenticator,
    HandshakeAuth,
    authenticate,
    prepare_handshake,
    reauthenticate,
    resolve_mechanism,
)
from greenmongo.auth.saslprep import saslprep

if TYPE_CHECKING:
    from greenmongo.auth.oidc import OIDCCallback, OIDCCallbackContext, OIDCCallbackResult, OIDCIdPInfo

_OIDC_NAMES = frozenset({"OIDCCallback", "OIDCCallbackContext", "OIDCCallbackResult", "OIDCIdPInfo"})


def __getattr__(name: str) -> Any:
    """The OIDC names, from their module on first use (it is not imported with every client)."""
    if name in _OIDC_NAMES:
        return getattr(import_module("greenmongo.auth.oidc"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AuthCache", "AuthIO", "Authenticator", "HandshakeAuth", "OIDCCallback", "OIDCCallbackContext",
    "OIDCCallbackResult", "OIDCIdPInfo", "SUPPORTED_MECHANISMS", "authenticate", "prepare_handshake", "reauthenticate",
    "resolve_mechanism", "saslprep",
]
