"""MONGODB-OIDC machine and human flows against a scripted server: caching, retries, 391."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Set

import gevent
import pytest

from greenmongo import bson
from greenmongo.auth import (
    AuthCache, AuthIO, OIDCCallback, OIDCCallbackContext, OIDCCallbackResult, OIDCIdPInfo, authenticate,
    prepare_handshake, reauthenticate,
)
from greenmongo.net.http import HttpResponse
from greenmongo.errors import ConfigurationError, OperationFailure
from tests.auth_fakes import FakeConn, auth_failed, credential

IDP = {"issuer": "https://issuer", "clientId": "abcd", "requestScopes": ["a", "b"]}


class FakeOidcServer:
    """Accepts the JWTs in ``valid``; answers a PrincipalStepRequest with ``IDP``."""

    def __init__(self, valid: Set[str]) -> None:
        self.valid = valid
        self.jwts: List[str] = []
        self.principals: List[Dict[str, Any]] = []

    def _jwt(self, token: str) -> Dict[str, Any]:
        self.jwts.append(token)
        if token in self.valid:
            return {"conversationId": 1, "done": True, "payload": b"", "ok": 1}
        return auth_failed()

    def __call__(self, dbname: str, spec) -> Dict[str, Any]:
        assert dbname == "$external"
        document = bson.decode(bytes(spec["payload"]))
        if "saslStart" in spec:
            assert spec["mechanism"] == "MONGODB-OIDC"
            if "jwt" in document:
                return self._jwt(document["jwt"])
            self.principals.append(document)
            return {"conversationId": 1, "done": False, "payload": bson.encode(IDP), "ok": 1}
        assert spec["conversationId"] == 1
        return self._jwt(document["jwt"])


class Callback(OIDCCallback):
    def __init__(self, *tokens: str, refresh: Optional[str] = None) -> None:
        self.tokens = list(tokens)
        self.refresh = refresh
        self.contexts: List[OIDCCallbackContext] = []

    def fetch(self, context: OIDCCallbackContext) -> OIDCCallbackResult:
        self.contexts.append(context)
        return OIDCCallbackResult(access_token=self.tokens.pop(0), expires_in_seconds=3600,
                                  refresh_token=self.refresh)


class Sleeps(list):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def _machine(callback, **kwargs):
    sleeps = Sleeps()
    cred = credential("MONGODB-OIDC", source="$external", properties={"OIDC_CALLBACK": callback},
                      io=AuthIO(environ={}, sleep=sleeps), **kwargs)
    return cred, sleeps


def _human(callback, username=None, **properties):
    return credential("MONGODB-OIDC", username, source="$external",
                      properties={"OIDC_HUMAN_CALLBACK": callback, **properties}, io=AuthIO(environ={}))


# -- machine flow ----------------------------------------------------------------

def test_machine_flow_one_step_and_client_cache() -> None:
    callback = Callback("tok1")
    cred, _ = _machine(callback)
    server = FakeOidcServer({"tok1"})
    first, second = FakeConn(server), FakeConn(server)
    assert authenticate(first, cred) == "MONGODB-OIDC"
    authenticate(second, cred)
    assert server.jwts == ["tok1", "tok1"]
    assert len(callback.contexts) == 1  # the second connection used the client cache
    context = callback.contexts[0]
    assert context.version == 1 and context.timeout_seconds == 60 and context.username is None
    assert first.sent[0][1] == {"saslStart": 1, "mechanism": "MONGODB-OIDC",
                                "payload": bson.encode({"jwt": "tok1"})}


def test_machine_callback_timeout_follows_the_remaining_time() -> None:
    callback = Callback("tok1")
    cred, _ = _machine(callback)
    authenticate(FakeConn(FakeOidcServer({"tok1"})), cred, timeout=7.5)
    assert callback.contexts[0].timeout_seconds == 7.5


def test_rejected_cached_token_is_invalidated_and_refetched_after_100ms() -> None:
    callback = Callback("old", "new")
    cred, sleeps = _machine(callback)
    authenticate(FakeConn(FakeOidcServer({"old"})), cred)
    server = FakeOidcServer({"new"})  # "old" expired
    authenticate(FakeConn(server), cred)
    assert server.jwts == ["old", "new"]
    assert sleeps == [0.1]
    assert cred.cache.oidc.access_token == "new"


def test_rejected_fresh_token_is_raised() -> None:
    cred, sleeps = _machine(Callback("bad"))
    with pytest.raises(OperationFailure) as info:
        authenticate(FakeConn(FakeOidcServer(set())), cred)
    assert info.value.code == 18 and sleeps == []


def test_reauthentication_after_391_invalidates_the_connection_token() -> None:
    callback = Callback("tok1", "tok2")
    cred, sleeps = _machine(callback)
    server = FakeOidcServer({"tok1"})
    conn = FakeConn(server)
    authenticate(conn, cred)
    server.valid = {"tok2"}  # the server expired tok1: an operation got error 391
    conn.sent.clear()
    reauthenticate(conn, cred)
    assert server.jwts == ["tok1", "tok2"]  # straight to a fresh token: no retry of tok1
    assert conn.command_names() == ["saslStart"]  # and no hello
    assert sleeps == [] and len(callback.contexts) == 2


def test_invalidation_is_compare_and_swap() -> None:
    callback = Callback("tok1", "tok2")
    cred, _ = _machine(callback)
    server = FakeOidcServer({"tok1", "tok2"})
    stale, fresh = FakeConn(server), FakeConn(server)
    authenticate(stale, cred)
    authenticate(fresh, cred)
    reauthenticate(fresh, cred)  # fresh now holds tok2, which is the client cache's token
    assert cred.cache.oidc.access_token == "tok2"
    reauthenticate(stale, cred)  # stale used tok1: invalidating it must keep tok2
    assert cred.cache.oidc.access_token == "tok2"
    assert len(callback.contexts) == 2
    assert server.jwts[-1] == "tok2"


def test_only_one_callback_runs_at_a_time() -> None:
    running = []
    peak = []

    class Slow(OIDCCallback):
        calls = 0

        def fetch(self, context):
            Slow.calls += 1
            running.append(1)
            peak.append(len(running))
            gevent.sleep(0.01)
            running.pop()
            return OIDCCallbackResult("tok")

    cred, _ = _machine(Slow())
    server = FakeOidcServer({"tok"})
    greenlets = [gevent.spawn(authenticate, FakeConn(server), cred) for _ in range(5)]
    gevent.joinall(greenlets, raise_error=True)
    assert Slow.calls == 1 and max(peak) == 1
    assert server.jwts == ["tok"] * 5


def test_plain_function_callback_and_bad_results() -> None:
    cred, _ = _machine(lambda context: OIDCCallbackResult("tok"))
    authenticate(FakeConn(FakeOidcServer({"tok"})), cred)
    for bad in (OIDCCallbackResult(""), OIDCCallbackResult("tok", expires_in_seconds=-1), object()):
        cred, _ = _machine(lambda context, bad=bad: bad)
        with pytest.raises(ConfigurationError):
            authenticate(FakeConn(FakeOidcServer({"tok"})), cred)


# -- speculative authentication -----------------------------------------------------

def test_speculative_only_with_a_cached_token() -> None:
    callback = Callback("tok1")
    cred, _ = _machine(callback)
    assert prepare_handshake(cred).hello_fields() == {}
    authenticate(FakeConn(FakeOidcServer({"tok1"})), cred)
    handshake = prepare_handshake(cred)
    assert handshake.hello_fields() == {"speculativeAuthenticate": {
        "saslStart": 1, "mechanism": "MONGODB-OIDC", "payload": bson.encode({"jwt": "tok1"}), "db": "$external"}}
    conn = FakeConn(lambda db, spec: pytest.fail("speculation succeeded"),
                    hello={"ok": 1, "maxWireVersion": 21,
                           "speculativeAuthenticate": {"conversationId": 1, "done": True, "payload": b""}})
    authenticate(conn, cred, handshake)
    assert conn.sent == []
    # the speculated token is this connection's: a 391 invalidates it
    reauthenticate_server = FakeOidcServer(set())
    conn.handler = reauthenticate_server
    with pytest.raises(IndexError):  # Callback has no token left: proves the callback was asked
        reauthenticate(conn, cred)
    assert cred.cache.oidc.access_token is None


def test_failed_speculation_does_not_invalidate() -> None:
    callback = Callback("tok1", "tok2")
    cred, sleeps = _machine(callback)
    authenticate(FakeConn(FakeOidcServer({"tok1"})), cred)
    handshake = prepare_handshake(cred)
    server = FakeOidcServer({"tok1"})
    conn = FakeConn(server, hello={"ok": 1, "maxWireVersion": 21})  # no speculativeAuthenticate in the reply
    authenticate(conn, cred, handshake)
    assert server.jwts == ["tok1"] and len(callback.contexts) == 1 and sleeps == []


# -- human flow --------------------------------------------------------------------

def test_human_two_step_then_cache() -> None:
    callback = Callback("tok1", refresh="refresh1")
    cred = _human(callback, username="myidp")
    server = FakeOidcServer({"tok1"})
    conn = FakeConn(server)
    authenticate(conn, cred)
    assert conn.command_names() == ["saslStart", "saslContinue"]
    assert server.principals == [{"n": "myidp"}]
    assert conn.sent[0][1]["payload"] == bson.encode({"n": "myidp"})
    context, = callback.contexts
    assert context.idp_info == OIDCIdPInfo("https://issuer", "abcd", ["a", "b"])
    assert context.refresh_token is None and context.timeout_seconds == 300 and context.username == "myidp"
    state = cred.cache.oidc
    assert (state.access_token, state.refresh_token, state.idp_info) == ("tok1", "refresh1", context.idp_info)
    # a second connection: one step with the cached token, no callback
    second = FakeConn(server)
    authenticate(second, cred)
    assert second.command_names() == ["saslStart"] and len(callback.contexts) == 1


def test_human_principal_step_without_username() -> None:
    server = FakeOidcServer({"tok1"})
    authenticate(FakeConn(server), _human(Callback("tok1")))
    assert server.principals == [{}]


def test_human_uses_the_refresh_token_when_the_access_token_is_rejected() -> None:
    callback = Callback("tok1", "tok2", refresh="refresh1")
    cred = _human(callback)
    authenticate(FakeConn(FakeOidcServer({"tok1"})), cred)
    server = FakeOidcServer({"tok2"})
    conn = FakeConn(server)
    authenticate(conn, cred)
    assert server.jwts == ["tok1", "tok2"] and server.principals == []
    refresh_context = callback.contexts[1]
    assert refresh_context.refresh_token == "refresh1" and refresh_context.idp_info.issuer == "https://issuer"


def test_human_falls_back_to_two_step_when_refresh_fails() -> None:
    callback = Callback("tok1", "tok2", "tok3", refresh="refresh1")
    cred = _human(callback)
    authenticate(FakeConn(FakeOidcServer({"tok1"})), cred)
    server = FakeOidcServer({"tok3"})
    authenticate(FakeConn(server), cred)
    assert server.jwts == ["tok1", "tok2", "tok3"] and len(server.principals) == 1
    assert callback.contexts[2].refresh_token is None  # a fresh login never gets the old refresh token


def test_human_reauthentication_uses_the_refresh_token() -> None:
    callback = Callback("tok1", "tok2", refresh="refresh1")
    cred = _human(callback)
    server = FakeOidcServer({"tok1"})
    conn = FakeConn(server)
    authenticate(conn, cred)
    server.valid = {"tok2"}
    conn.sent.clear()
    reauthenticate(conn, cred)
    assert conn.command_names() == ["saslStart"]
    assert server.jwts[-1] == "tok2" and callback.contexts[1].refresh_token == "refresh1"


@pytest.mark.parametrize("address, allowed, ok", [
    (("localhost", 27017), None, True),
    (("cluster0.abc.mongodb.net", 27017), None, True),
    (("evil.example.com", 27017), None, False),
    (("mongodb.net.evil.com", 27017), None, False),
    (("db.example.com", 27017), ["*.example.com"], True),
    (("localhost", 27017), ["db.example.com"], False),
])
def test_human_allowed_hosts(address, allowed, ok) -> None:
    callback = Callback("tok1")
    properties = {"ALLOWED_HOSTS": allowed} if allowed is not None else {}
    cred = _human(callback, **properties)
    conn = FakeConn(FakeOidcServer({"tok1"}), address=address)
    if ok:
        authenticate(conn, cred)
    else:
        with pytest.raises(ConfigurationError, match="ALLOWED_HOSTS"):
            authenticate(conn, cred)
        assert callback.contexts == [] and conn.sent == []


# -- built-in environments ------------------------------------------------------------

class FakeHttp:
    def __init__(self, status: int, body: bytes) -> None:
        self.status, self.body = status, body
        self.calls: List = []

    def __call__(self, method, url, headers, body=None, timeout=10.0):
        self.calls.append((method, url, dict(headers), timeout))
        return HttpResponse(self.status, self.body)


def _environment(environment: str, username=None, environ=None, http=None, files=None, **properties):
    io = AuthIO(environ=environ or {}, http=http or FakeHttp(404, b""), read_file=lambda p: (files or {})[p])
    return credential("MONGODB-OIDC", username, source="$external",
                      properties={"ENVIRONMENT": environment, **properties}, io=io)


def test_environment_test_reads_the_token_file() -> None:
    cred = _environment("test", environ={"OIDC_TOKEN_FILE": "/tmp/tok"}, files={"/tmp/tok": "filetoken\n"})
    server = FakeOidcServer({"filetoken"})
    authenticate(FakeConn(server), cred)
    assert server.jwts == ["filetoken"]


def test_environment_test_needs_the_variable() -> None:
    with pytest.raises(ConfigurationError, match="OIDC_TOKEN_FILE"):
        authenticate(FakeConn(FakeOidcServer(set())), _environment("test"))


def test_environment_azure() -> None:
    http = FakeHttp(200, json.dumps({"access_token": "aztoken", "expires_in": "3599"}).encode())
    cred = _environment("azure", username="client-id", http=http, TOKEN_RESOURCE="api://my audience")
    authenticate(FakeConn(FakeOidcServer({"aztoken"})), cred, timeout=9)
    (method, url, headers, timeout), = http.calls
    assert method == "GET" and timeout == 9
    assert url == ("http://169.254.169.254/metadata/identity/oauth2/token?api-version=2018-02-01"
                   "&resource=api%3A%2F%2Fmy%20audience&client_id=client-id")
    assert headers == {"Metadata": "true", "Accept": "application/json"}


def test_environment_azure_errors() -> None:
    with pytest.raises(ConfigurationError, match="TOKEN_RESOURCE"):
        authenticate(FakeConn(FakeOidcServer(set())), _environment("azure"))
    cred = _environment("azure", http=FakeHttp(500, b"boom"), TOKEN_RESOURCE="r")
    with pytest.raises(OperationFailure, match="HTTP 500"):
        authenticate(FakeConn(FakeOidcServer(set())), cred)
    cred = _environment("azure", http=FakeHttp(200, b"{}"), TOKEN_RESOURCE="r")
    with pytest.raises(OperationFailure, match="unreadable"):
        authenticate(FakeConn(FakeOidcServer(set())), cred)


def test_environment_gcp() -> None:
    http = FakeHttp(200, b"gcptoken")
    cred = _environment("gcp", http=http, TOKEN_RESOURCE="aud")
    authenticate(FakeConn(FakeOidcServer({"gcptoken"})), cred)
    (method, url, headers, _), = http.calls
    assert url == "http://metadata/computeMetadata/v1/instance/service-accounts/default/identity?audience=aud"
    assert headers == {"Metadata-Flavor": "Google"}


@pytest.mark.parametrize("environ, path", [
    ({"AZURE_FEDERATED_TOKEN_FILE": "/az", "AWS_WEB_IDENTITY_TOKEN_FILE": "/aws"}, "/az"),
    ({"AWS_WEB_IDENTITY_TOKEN_FILE": "/aws"}, "/aws"),
    ({}, "/var/run/secrets/kubernetes.io/serviceaccount/token"),
])
def test_environment_k8s_token_file_order(environ, path) -> None:
    cred = _environment("k8s", environ=environ, files={path: "k8stoken"})
    server = FakeOidcServer({"k8stoken"})
    authenticate(FakeConn(server), cred)
    assert server.jwts == ["k8stoken"]


@pytest.mark.parametrize("properties, password", [
    ({"ENVIRONMENT": "test", "OIDC_CALLBACK": Callback("t")}, None),
    ({"OIDC_CALLBACK": Callback("t"), "OIDC_HUMAN_CALLBACK": Callback("t")}, None),
    ({}, None),
    ({"ENVIRONMENT": "nowhere"}, None),
    ({"OIDC_CALLBACK": Callback("t")}, "secret"),
])
def test_configuration_errors(properties, password) -> None:
    cred = credential("MONGODB-OIDC", None, password, source="$external", properties=properties,
                      io=AuthIO(environ={}))
    with pytest.raises(ConfigurationError):
        authenticate(FakeConn(FakeOidcServer(set())), cred)


def test_properties_are_case_insensitive() -> None:
    callback = Callback("tok")
    cred = credential("MONGODB-OIDC", source="$external", properties={"oidc_callback": callback},
                      io=AuthIO(environ={}))
    server = FakeOidcServer({"tok"})
    authenticate(FakeConn(server), cred)
    assert len(callback.contexts) == 1  # "oidc_callback" was taken for OIDC_CALLBACK
    assert server.jwts == ["tok"]


def test_with_the_options_layer_credential() -> None:
    from greenmongo.options.credentials import build_credentials

    callback = Callback("tok")
    cred = build_credentials("MONGODB-OIDC", None, None, None, {"oidc_callback": callback}, None)
    assert cred.cache is None  # the topology gives each client's credential its own cache
    cred = cred._replace(cache=AuthCache())
    server = FakeOidcServer({"tok"})
    authenticate(FakeConn(server), cred)
    authenticate(FakeConn(server), cred)
    assert server.jwts == ["tok", "tok"] and len(callback.contexts) == 1  # its AuthCache kept the token
