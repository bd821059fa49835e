"""MONGODB-OIDC: authenticate with an OpenID Connect access token.

Tokens come from a user callback (``OIDC_CALLBACK``, the machine flow), a human
callback driving an IdP login (``OIDC_HUMAN_CALLBACK``, the two-step flow), or a
built-in ``ENVIRONMENT`` (test, azure, gcp, k8s). Per the Authentication spec the
most recent token is cached per client (``OidcClientCache``) and per connection,
a token the server rejects is invalidated compare-and-swap style, only one
callback runs at a time (a gevent semaphore, never held across a SASL command),
and error 391 (ReauthenticationRequired) re-runs SASL without a new hello.
"""

from __future__ import annotations

import abc
import json
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple
from urllib.parse import quote

from greenmongo.auth.cache import AuthCache, AuthIO
from greenmongo.hub.waiting import new_lock
from greenmongo.auth.sasl import mechanism_property, payload_bytes, require_done, sasl_continue, sasl_start
from greenmongo.errors import ConfigurationError, OperationFailure

if TYPE_CHECKING:
    from greenmongo.options.credentials import MongoCredential

__all__ = [
    "DEFAULT_ALLOWED_HOSTS", "OIDCCallback", "OIDCCallbackContext", "OIDCCallbackResult", "OIDCIdPInfo",
    "OidcClientCache", "authenticate_oidc", "reauthenticate_oidc", "speculative_oidc_command",
]

MECHANISM = "MONGODB-OIDC"
CALLBACK_VERSION = 1
MACHINE_CALLBACK_TIMEOUT = 60.0
HUMAN_CALLBACK_TIMEOUT = 5 * 60.0   # a person is typing: not subject to CSOT (spec)
RETRY_PAUSE = 0.1                   # between a rejected cached token and a fresh one
DEFAULT_ALLOWED_HOSTS: Tuple[str, ...] = (
    "*.mongodb.net", "*.mongodb-qa.net", "*.mongodb-dev.net", "*.mongodbgov.net", "localhost", "127.0.0.1", "::1",
)
_K8S_DEFAULT_TOKEN_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/token"


# -- the callback API (PyMongo's names) ---------------------------------------

@dataclass(frozen=True)
class OIDCIdPInfo:
    """What the server says about its identity provider, for the human callback."""

    issuer: str
    clientId: Optional[str] = None
    requestScopes: Optional[List[str]] = None


@dataclass(frozen=True)
class OIDCCallbackContext:
    timeout_seconds: float
    username: Optional[str] = None
    version: int = CALLBACK_VERSION
    refresh_token: Optional[str] = None
    idp_info: Optional[OIDCIdPInfo] = None


@dataclass
class OIDCCallbackResult:
    access_token: str
    expires_in_seconds: Optional[float] = None
    refresh_token: Optional[str] = None


class OIDCCallback(abc.ABC):
    """Subclass and implement ``fetch``; a plain callable taking the context also works."""

    @abc.abstractmethod
    def fetch(self, context: OIDCCallbackContext) -> OIDCCallbackResult:
        ...


def _call_callback(callback: Any, context: OIDCCallbackContext) -> OIDCCallbackResult:
    fetch = getattr(callback, "fetch", None) or callback
    if not callable(fetch):
        raise ConfigurationError(f"OIDC callback {callback!r} is not callable and has no fetch()")
    result = fetch(context)
    if isinstance(result, Mapping):
        result = OIDCCallbackResult(**result)
    token = getattr(result, "access_token", None)
    if not isinstance(token, str) or not token:
        raise ConfigurationError("OIDC callback must return an OIDCCallbackResult with a non-empty access_token")
    expires = getattr(result, "expires_in_seconds", None)
    if expires is not None and expires < 0:
        raise ConfigurationError("OIDC callback returned a negative expires_in_seconds")
    return result


# -- built-in environments, shaped as callbacks -----------------------------

@dataclass
class _EnvironmentCallback:
    environment: str
    io: AuthIO
    token_resource: Optional[str] = None

    def fetch(self, context: OIDCCallbackContext) -> OIDCCallbackResult:
        return getattr(self, "_" + self.environment)(context)

    def _test(self, context: OIDCCallbackContext) -> OIDCCallbackResult:
        path = self.io.environ.get("OIDC_TOKEN_FILE")
        if not path:
            raise ConfigurationError("OIDC ENVIRONMENT:test needs the OIDC_TOKEN_FILE environment variable")
        return OIDCCallbackResult(self._read_token(path))

    def _k8s(self, context: OIDCCallbackContext) -> OIDCCallbackResult:
        environ = self.io.environ
        path = (environ.get("AZURE_FEDERATED_TOKEN_FILE") or environ.get("AWS_WEB_IDENTITY_TOKEN_FILE")
                or _K8S_DEFAULT_TOKEN_FILE)
        return OIDCCallbackResult(self._read_token(path))

    def _azure(self, context: OIDCCallbackContext) -> OIDCCallbackResult:
        url = ("http://169.254.169.254/metadata/identity/oauth2/token?api-version=2018-02-01"
               f"&resource={quote(self._resource(), safe='')}")
        if context.username:
            url += f"&client_id={quote(context.username, safe='')}"
        body = self._get(url, {"Metadata": "true", "Accept": "application/json"}, context, "Azure IMDS")
        try:
            document = json.loads(body)
            token = document["access_token"]
            expires = document.get("expires_in")
            return OIDCCallbackResult(token, float(expires) if expires not in (None, "") else None)
        except (ValueError, KeyError, TypeError):
            raise OperationFailure("MONGODB-OIDC: Azure IMDS returned an unreadable token response") from None

    def _gcp(self, context: OIDCCallbackContext) -> OIDCCallbackResult:
        url = ("http://metadata/computeMetadata/v1/instance/service-accounts/default/identity"
               f"?audience={quote(self._resource(), safe='')}")
        body = self._get(url, {"Metadata-Flavor": "Google"}, context, "the GCP metadata server")
        return OIDCCallbackResult(body.decode("utf-8").strip())

    def _resource(self) -> str:
        if not self.token_resource:
            raise ConfigurationError(f"OIDC ENVIRONMENT:{self.environment} requires TOKEN_RESOURCE")
        return self.token_resource

    def _read_token(self, path: str) -> str:
        try:
            return self.io.read_file(path).strip()
        except OSError as exc:
            raise OperationFailure(f"MONGODB-OIDC: cannot read token file {path!r}: {exc}") from exc

    def _get(self, url: str, headers: Mapping[str, str], context: OIDCCallbackContext, where: str) -> bytes:
        try:
            response = self.io.http("GET", url, headers, None, context.timeout_seconds)
        except Exception as exc:
            raise OperationFailure(f"MONGODB-OIDC: could not reach {where}: {exc}") from exc
        if response.status != 200:
            raise OperationFailure(f"MONGODB-OIDC: {where} answered HTTP {response.status}: "
                                   f"{response.body[:200]!r}")
        return response.body


_ENVIRONMENTS = ("test", "azure", "gcp", "k8s")


# -- the caches ---------------------------------------------------------------

class OidcClientCache:
    """The spec's Client Cache (one per client) plus each connection's token (Connection Cache).

    Reads and compare-and-swap writes never yield to the hub, so they need no
    lock; ``callback_lock`` only serializes callback calls.
    """

    def __init__(self) -> None:
        self.callback_lock = new_lock()
        self.access_token: Optional[str] = None
        self.refresh_token: Optional[str] = None
        self.idp_info: Optional[OIDCIdPInfo] = None
        self._connection_tokens: "weakref.WeakKeyDictionary[Any, str]" = weakref.WeakKeyDictionary()

    def invalidate(self, token: Optional[str]) -> None:
        """Forget the cached access token only if it is still ``token``."""
        if token is not None and self.access_token == token:
            self.access_token = None

    def connection_token(self, conn: Any) -> Optional[str]:
        try:
            return self._connection_tokens.get(conn)
        except TypeError:  # a connection type without weakref support: assume the current token
            return self.access_token

    def remember(self, conn: Any, token: str) -> None:
        try:
            self._connection_tokens[conn] = token
        except TypeError:
            pass

    def forget(self, conn: Any) -> None:
        try:
            self._connection_tokens.pop(conn, None)
        except TypeError:
            pass


def client_cache(cache: Optional[AuthCache]) -> OidcClientCache:
    if cache is None:
        return OidcClientCache()  # no client to remember for: a one-off
    if cache.oidc is None:
        cache.oidc = OidcClientCache()  # check-and-set with no switch in between
    return cache.oidc


# -- the conversation ------------------------------------------------------------

def _bson() -> Any:
    from greenmongo import bson
    return bson


def _jwt_payload(token: str) -> bytes:
    return _bson().encode({"jwt": token})


def _host_allowed(host: str, patterns: Sequence[str]) -> bool:
    host = host.strip("[]").lower()
    for pattern in patterns:
        pattern = str(pattern).lower()
        if pattern.startswith("*."):
            if host.endswith(pattern[1:]):
                return True
        elif host == pattern:
            return True
    return False


class _OidcAuth:
    """One authentication attempt: the credential's settings resolved once."""

    def __init__(self, conn: Any, credentials: MongoCredential, cache: Optional[AuthCache], io: AuthIO,
                 address: Optional[Tuple[str, int]], timeout: Optional[float]) -> None:
        if credentials.password is not None:
            raise ConfigurationError("MONGODB-OIDC does not take a password")
        self.conn = conn
        self.credentials = credentials
        self.source = credentials.source or "$external"
        self.state = client_cache(cache)
        self.io = io
        self.address = address if address is not None else getattr(conn, "address", None)
        self.timeout = timeout
        machine = mechanism_property(credentials, "OIDC_CALLBACK")
        human = mechanism_property(credentials, "OIDC_HUMAN_CALLBACK")
        environment = mechanism_property(credentials, "ENVIRONMENT")
        if sum(x is not None for x in (machine, human, environment)) != 1:
            raise ConfigurationError("MONGODB-OIDC needs exactly one of OIDC_CALLBACK, OIDC_HUMAN_CALLBACK "
                                     "and ENVIRONMENT")
        self.human = human
        if environment is not None:
            environment = str(environment).lower()
            if environment not in _ENVIRONMENTS:
                raise ConfigurationError(f"MONGODB-OIDC: unsupported ENVIRONMENT {environment!r}")
            machine = _EnvironmentCallback(environment, io, mechanism_property(credentials, "TOKEN_RESOURCE"))
        self.machine = machine

    # -- helpers
    def _context(self, **extra: Any) -> OIDCCallbackContext:
        if self.human is not None:
            timeout = HUMAN_CALLBACK_TIMEOUT
        else:
            timeout = MACHINE_CALLBACK_TIMEOUT if self.timeout is None else min(self.timeout, MACHINE_CALLBACK_TIMEOUT)
        return OIDCCallbackContext(timeout_seconds=timeout, username=self.credentials.username, **extra)

    def _call(self, callback: Any, **extra: Any) -> OIDCCallbackResult:
        return _call_callback(callback, self._context(**extra))

    def _one_step(self, token: str) -> None:
        self.state.remember(self.conn, token)
        reply = self.conn.command(self.source, sasl_start(MECHANISM, _jwt_payload(token)))
        require_done(reply, MECHANISM)

    def _access_token(self) -> Tuple[str, bool]:
        """(token, came from the client cache), calling the machine callback at most once at a time."""
        with self.state.callback_lock:
            token = self.state.access_token
            if token is not None:
                return token, True
            token = self._call(self.machine).access_token
            self.state.access_token = token
            return token, False

    # -- flows
    def run(self) -> None:
        if self.human is not None:
            self._human()
        else:
            self._machine()

    def _machine(self) -> None:
        token, from_cache = self._access_token()
        if from_cache:
            try:
                self._one_step(token)
                return
            except OperationFailure:
                self.state.invalidate(token)
                self.io.sleep(RETRY_PAUSE)
                token, _ = self._access_token()
        self._one_step(token)

    def _check_allowed_host(self) -> None:
        allowed = mechanism_property(self.credentials, "ALLOWED_HOSTS", DEFAULT_ALLOWED_HOSTS)
        host = self.address[0] if self.address else None
        if not host or not _host_allowed(str(host), allowed):
            raise ConfigurationError(
                f"MONGODB-OIDC: refusing to run the human callback for host {host!r}, "
                "which is not in ALLOWED_HOSTS")

    def _human(self) -> None:
        self._check_allowed_host()
        state = self.state
        # 1. The client's cached access token.
        token = state.access_token
        if token is not None:
            try:
                self._one_step(token)
                return
            except OperationFailure:
                state.invalidate(token)
                state.forget(self.conn)
        # 2. A refresh token from an earlier login.
        token = None
        try:
            with state.callback_lock:
                token = state.access_token  # another greenlet may have just refreshed
                if token is None and state.refresh_token is not None and state.idp_info is not None:
                    result = self._call(self.human, refresh_token=state.refresh_token, idp_info=state.idp_info)
                    token = state.access_token = result.access_token
                    state.refresh_token = result.refresh_token
            if token is not None:
                self._one_step(token)
                return
        except Exception:
            state.invalidate(token)
            state.forget(self.conn)
        # 3. A full two-step login through the IdP.
        principal = {"n": self.credentials.username} if self.credentials.username else {}
        reply = self.conn.command(self.source, sasl_start(MECHANISM, _bson().encode(principal)))
        idp_info = self._idp_info(reply)
        with state.callback_lock:
            result = self._call(self.human, idp_info=idp_info)  # never a cached refresh token here
            state.idp_info = idp_info
            state.refresh_token = result.refresh_token
            state.access_token = token = result.access_token
        state.remember(self.conn, token)
        reply = self.conn.command(self.source, sasl_continue(reply.get("conversationId"), _jwt_payload(token)))
        require_done(reply, MECHANISM)

    @staticmethod
    def _idp_info(reply: Mapping[str, Any]) -> OIDCIdPInfo:
        try:
            document = _bson().decode(payload_bytes(reply))
            scopes = document.get("requestScopes")
            return OIDCIdPInfo(document["issuer"], document.get("clientId"),
                               list(scopes) if scopes is not None else None)
        except OperationFailure:
            raise
        except Exception:
            raise OperationFailure("MONGODB-OIDC: server sent unreadable IdP information") from None


def authenticate_oidc(conn: Any, credentials: MongoCredential, cache: Optional[AuthCache], io: AuthIO, *,
                      address: Optional[Tuple[str, int]] = None, timeout: Optional[float] = None,
                      speculative_token: Optional[str] = None,
                      speculative_reply: Optional[Mapping[str, Any]] = None) -> None:
    """Authenticate ``conn``; ``speculative_*`` finish a JwtStepRequest sent inside hello."""
    auth = _OidcAuth(conn, credentials, cache, io, address, timeout)
    if speculative_token is not None:
        if speculative_reply and speculative_reply.get("done"):
            auth.state.remember(conn, speculative_token)
            return
        auth.state.forget(conn)  # a failed speculation invalidates nothing
    auth.run()


def reauthenticate_oidc(conn: Any, credentials: MongoCredential, cache: Optional[AuthCache], io: AuthIO, *,
                        address: Optional[Tuple[str, int]] = None, timeout: Optional[float] = None) -> None:
    """After error 391: drop the token this connection used, then SASL again (no hello)."""
    state = client_cache(cache)
    state.invalidate(state.connection_token(conn))
    state.forget(conn)
    authenticate_oidc(conn, credentials, cache, io, address=address, timeout=timeout)


def speculative_oidc_command(credentials: MongoCredential,
                             cache: Optional[AuthCache]) -> Optional[Tuple[Dict[str, Any], str]]:
    """The hello's ``speculativeAuthenticate`` and the token in it, only when a token is cached."""
    if cache is None or cache.oidc is None or cache.oidc.access_token is None:
        return None
    token = cache.oidc.access_token
    command = sasl_start(MECHANISM, _jwt_payload(token))
    command["db"] = credentials.source or "$external"
    return command, token
