"""Run the right authentication conversation over one connection.

The connection is duck-typed: ``conn.command(dbname, spec) -> dict`` (raising
``OperationFailure`` on ``ok: 0``), ``conn.hello`` (the parsed handshake reply)
and optionally ``conn.address`` ((host, port), for OIDC's ALLOWED_HOSTS).

``Authenticator`` adapts all this to ``greenmongo.net.handshake``'s protocol.
The handshake asks ``prepare_handshake(credentials)`` for the fields to add to
hello (``saslSupportedMechs`` when the mechanism must be negotiated,
``speculativeAuthenticate`` when the mechanism allows it), then calls
``authenticate(conn, credentials, handshake=...)``, which finishes a
speculative conversation from ``conn.hello["speculativeAuthenticate"]`` or runs
a full one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Tuple

from greenmongo.auth.cache import AuthCache, AuthIO
from greenmongo.auth.plain import authenticate_plain
from greenmongo.auth.sasl import payload_bytes, sasl_continue, sasl_start
from greenmongo.auth.scram import SCRAM_MECHANISMS, ScramConversation
from greenmongo.auth.x509 import authenticate_x509, x509_command
from greenmongo.errors import ConfigurationError, OperationFailure

if TYPE_CHECKING:
    from greenmongo.options.credentials import MongoCredential

__all__ = ["Authenticator", "HandshakeAuth", "authenticate", "prepare_handshake", "reauthenticate",
           "resolve_mechanism"]

DEFAULT_MECHANISMS = (None, "", "DEFAULT")
SUPPORTED_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-1", "PLAIN", "MONGODB-X509", "MONGODB-AWS", "MONGODB-OIDC")


def _cache_of(credentials: MongoCredential) -> Optional[AuthCache]:
    cache = getattr(credentials, "cache", None)
    return cache if isinstance(cache, AuthCache) else None


def _io_of(credentials: MongoCredential) -> AuthIO:
    cache = _cache_of(credentials)
    return cache.io if cache is not None else AuthIO()


def _source(credentials: MongoCredential, default: str = "admin") -> str:
    return credentials.source or default


def _is_default(credentials: MongoCredential) -> bool:
    return credentials.mechanism in DEFAULT_MECHANISMS


def resolve_mechanism(credentials: MongoCredential, hello: Optional[Mapping[str, Any]]) -> str:
    """The mechanism to use: the configured one, else negotiated from ``saslSupportedMechs``."""
    if not _is_default(credentials):
        return str(credentials.mechanism).upper()
    offered = (hello or {}).get("saslSupportedMechs")
    if offered is not None and "SCRAM-SHA-256" in offered:
        return "SCRAM-SHA-256"
    return "SCRAM-SHA-1"  # the spec's default whether or not SHA-1 is listed


def _unsupported(mechanism: str) -> ConfigurationError:
    if mechanism == "GSSAPI":
        return ConfigurationError(
            "GSSAPI (Kerberos) authentication is not supported by greenmongo: no Kerberos binding "
            "(pykerberos, kerberos or gssapi) is available for it")
    if mechanism == "MONGODB-CR":
        return ConfigurationError("MONGODB-CR was removed in MongoDB 4.0 and is not supported by greenmongo")
    return ConfigurationError(f"unknown authentication mechanism {mechanism!r}")


# -- speculative authentication in the hello ---------------------------------

class HandshakeAuth:
    """The auth fields of one connection's hello, and what is needed to finish from its reply."""

    def __init__(self, credentials: MongoCredential, mechanism: Optional[str], command: Optional[Dict[str, Any]],
                 scram: Optional[ScramConversation] = None, oidc_token: Optional[str] = None) -> None:
        self.credentials = credentials
        self.mechanism = mechanism            # the speculative mechanism, None if none
        self.command = command                # the speculativeAuthenticate document, None if none
        self.scram = scram
        self.oidc_token = oidc_token

    def hello_fields(self) -> Dict[str, Any]:
        fields: Dict[str, Any] = {}
        credentials = self.credentials
        if _is_default(credentials) and credentials.username:
            # The raw username, never SASLprep'd: the server looks for it as given.
            fields["saslSupportedMechs"] = f"{_source(credentials)}.{credentials.username}"
        if self.command is not None:
            fields["speculativeAuthenticate"] = self.command
        return fields


def _scram_start(conversation: ScramConversation) -> Dict[str, Any]:
    return sasl_start(conversation.mechanism, conversation.client_first(),
                      autoAuthorize=1, options={"skipEmptyExchange": True})


def prepare_handshake(credentials: MongoCredential) -> HandshakeAuth:
    """Decide the hello's auth fields; SCRAM speculation fixes its client nonce here."""
    mechanism = "SCRAM-SHA-256" if _is_default(credentials) else str(credentials.mechanism).upper()
    if mechanism in SCRAM_MECHANISMS:
        if not credentials.username or credentials.password is None:
            return HandshakeAuth(credentials, None, None)  # authenticate() reports what is missing
        cache = _cache_of(credentials)
        try:
            conversation = ScramConversation(mechanism, credentials.username, credentials.password,
                                             cache=cache.scram_keys if cache else None)
        except ConfigurationError:
            if not _is_default(credentials):
                raise
            return HandshakeAuth(credentials, None, None)  # e.g. SASLprep refuses it, SCRAM-SHA-1 may not
        command = _scram_start(conversation)
        command["db"] = _source(credentials)
        return HandshakeAuth(credentials, mechanism, command, scram=conversation)
    if mechanism == "MONGODB-X509":
        command = x509_command(credentials)
        command["db"] = "$external"
        return HandshakeAuth(credentials, mechanism, command)
    if mechanism == "MONGODB-OIDC":
        from greenmongo.auth.oidc import speculative_oidc_command
        speculation = speculative_oidc_command(credentials, _cache_of(credentials))
        if speculation is not None:
            command, token = speculation
            return HandshakeAuth(credentials, mechanism, command, oidc_token=token)
    return HandshakeAuth(credentials, None, None)


# -- the conversations -------------------------------------------------------

def _authenticate_scram(conn: Any, credentials: MongoCredential, mechanism: str,
                        conversation: Optional[ScramConversation],
                        speculative_reply: Optional[Mapping[str, Any]]) -> None:
    source = _source(credentials)
    if speculative_reply is None or conversation is None:
        cache = _cache_of(credentials)
        conversation = ScramConversation(mechanism, credentials.username, credentials.password,
                                         cache=cache.scram_keys if cache else None)
        reply = conn.command(source, _scram_start(conversation))
    else:
        reply = speculative_reply
    conversation_id = reply.get("conversationId")
    final = conversation.client_final(payload_bytes(reply))
    reply = conn.command(source, sasl_continue(conversation_id, final))
    conversation.verify_server_final(payload_bytes(reply))
    if not reply.get("done"):
        # Servers before 4.4 (or ignoring skipEmptyExchange) want one more, empty, round trip.
        reply = conn.command(source, sasl_continue(reply.get("conversationId", conversation_id), b""))
        if not reply.get("done"):
            raise OperationFailure(f"{mechanism}: server did not finish the SASL conversation", details=reply)


def _negotiate(conn: Any, credentials: MongoCredential, hello: Mapping[str, Any]) -> Mapping[str, Any]:
    """A separate negotiation hello, only when the handshake did not carry saslSupportedMechs."""
    hello = dict(hello)
    if "saslSupportedMechs" in hello or not credentials.username or hello.get("maxWireVersion", 0) < 7:
        return hello
    reply = conn.command("admin", {"hello": 1,
                                   "saslSupportedMechs": f"{_source(credentials)}.{credentials.username}"})
    if "saslSupportedMechs" in reply:
        hello["saslSupportedMechs"] = reply["saslSupportedMechs"]
    return hello


def authenticate(conn: Any, credentials: MongoCredential, handshake: Optional[HandshakeAuth] = None, *,
                 hello: Optional[Mapping[str, Any]] = None, address: Optional[Tuple[str, int]] = None,
                 timeout: Optional[float] = None, negotiate: bool = True) -> str:
    """Authenticate ``conn`` with ``credentials``; returns the mechanism used.

    ``handshake`` is what ``prepare_handshake`` returned for this connection's
    hello (its speculative state); ``hello`` is that hello's reply (default
    ``conn.hello``); ``timeout`` (seconds) bounds OIDC callbacks.
    ``negotiate=False`` forbids an extra hello (reauthentication).
    """
    if hello is None:
        hello = getattr(conn, "hello", None) or {}
    if hello.get("arbiterOnly"):
        return ""  # arbiters cannot authenticate anyone (spec)
    if _is_default(credentials) and handshake is None and negotiate:
        hello = _negotiate(conn, credentials, hello)
    mechanism = resolve_mechanism(credentials, hello)
    if mechanism not in SUPPORTED_MECHANISMS:
        raise _unsupported(mechanism)

    speculative_reply = None
    if handshake is not None and handshake.mechanism == mechanism:
        speculative_reply = hello.get("speculativeAuthenticate")

    cache = _cache_of(credentials)
    io = _io_of(credentials)
    if mechanism in SCRAM_MECHANISMS:
        if not credentials.username:
            raise ConfigurationError(f"{mechanism} requires a username")
        if credentials.password is None:
            raise ConfigurationError(f"{mechanism} requires a password")
        _authenticate_scram(conn, credentials, mechanism,
                            handshake.scram if speculative_reply and handshake is not None else None,
                            speculative_reply)
    elif mechanism == "PLAIN":
        authenticate_plain(conn, credentials)
    elif mechanism == "MONGODB-X509":
        authenticate_x509(conn, credentials, speculative_reply)
    elif mechanism == "MONGODB-AWS":
        from greenmongo.auth.aws import authenticate_aws  # AWS's and OIDC's modules only where they are used
        authenticate_aws(conn, credentials, cache, io)
    else:  # MONGODB-OIDC
        from greenmongo.auth.oidc import authenticate_oidc
        authenticate_oidc(conn, credentials, cache, io, address=address, timeout=timeout,
                          speculative_token=handshake.oidc_token if handshake and handshake.mechanism else None,
                          speculative_reply=speculative_reply)
    return mechanism


def reauthenticate(conn: Any, credentials: MongoCredential, *, address: Optional[Tuple[str, int]] = None,
                   timeout: Optional[float] = None) -> str:
    """After ``ReauthenticationRequired`` (391): SASL again on ``conn``, never a new hello."""
    mechanism = resolve_mechanism(credentials, getattr(conn, "hello", None))
    if mechanism == "MONGODB-OIDC":
        from greenmongo.auth.oidc import reauthenticate_oidc
        reauthenticate_oidc(conn, credentials, _cache_of(credentials), _io_of(credentials),
                            address=address, timeout=timeout)
        return mechanism
    return authenticate(conn, credentials, None, address=address, timeout=timeout, negotiate=False)


class Authenticator:
    """``greenmongo.net.handshake.Authenticator`` for one new connection (it holds speculative state).

    The pool makes one per connection it opens: ``handshake_fields()`` is
    called while building the hello, ``authenticate()`` with its reply.
    """

    def __init__(self, credentials: MongoCredential, *, timeout: Optional[float] = None) -> None:
        self.credentials = credentials
        self.timeout = timeout
        self.handshake: Optional[HandshakeAuth] = None
        self.mechanism: Optional[str] = None

    def handshake_fields(self) -> Mapping[str, Any]:
        self.handshake = prepare_handshake(self.credentials)
        return self.handshake.hello_fields()

    def authenticate(self, conn: Any, hello_reply: Mapping[str, Any]) -> None:
        self.mechanism = authenticate(conn, self.credentials, self.handshake, hello=hello_reply,
                                      timeout=self.timeout)
