"""SCRAM over a scripted connection: negotiation, speculative auth, old servers, failures."""

from __future__ import annotations

import pytest

from greenmongo.auth import authenticate, prepare_handshake, reauthenticate
from greenmongo.errors import ConfigurationError, OperationFailure
from tests.auth_fakes import FakeConn, FakeScramServer, credential

BOTH = ("SCRAM-SHA-256", "SCRAM-SHA-1")


def _handshake(server: FakeScramServer, cred):
    """What the connection's handshake does: hello with the auth fields, keep the reply."""
    handshake = prepare_handshake(cred)
    hello = server.hello({"hello": 1, **handshake.hello_fields()})
    return FakeConn(server, hello=hello), handshake


@pytest.mark.parametrize("mechanism", BOTH)
def test_explicit_mechanism_full_conversation(mechanism: str) -> None:
    server = FakeScramServer({("admin", "user"): "pencil"}, mechanisms=(mechanism,))
    conn = FakeConn(server)
    assert authenticate(conn, credential(mechanism, "user", "pencil")) == mechanism
    assert conn.command_names() == ["saslStart", "saslContinue"]
    start = conn.sent[0][1]
    assert start["mechanism"] == mechanism
    assert start["options"] == {"skipEmptyExchange": True}
    assert start["autoAuthorize"] == 1
    assert bytes(start["payload"]).startswith(b"n,,n=user,r=")
    assert conn.sent[0][0] == "admin"


def test_wrong_password_is_operation_failure_18() -> None:
    server = FakeScramServer({("admin", "user"): "pencil"})
    with pytest.raises(OperationFailure) as info:
        authenticate(FakeConn(server), credential("SCRAM-SHA-256", "user", "wrong"))
    assert info.value.code == 18


def test_server_signature_mismatch_fails() -> None:
    server = FakeScramServer({("admin", "user"): "pencil"})
    server.tamper_signature = True
    with pytest.raises(OperationFailure, match="invalid signature"):
        authenticate(FakeConn(server), credential("SCRAM-SHA-256", "user", "pencil"))


def test_server_nonce_mismatch_fails_before_sending_a_proof() -> None:
    server = FakeScramServer({("admin", "user"): "pencil"})
    server.tamper_nonce = True
    conn = FakeConn(server)
    with pytest.raises(OperationFailure, match="invalid nonce"):
        authenticate(conn, credential("SCRAM-SHA-256", "user", "pencil"))
    assert conn.command_names() == ["saslStart"]


def test_pre_44_server_gets_the_extra_empty_round_trip() -> None:
    server = FakeScramServer({("admin", "user"): "pencil"}, skip_empty_exchange=False)
    conn = FakeConn(server)
    authenticate(conn, credential("SCRAM-SHA-256", "user", "pencil"))
    assert conn.command_names() == ["saslStart", "saslContinue", "saslContinue"]
    assert bytes(conn.sent[-1][1]["payload"]) == b""


def test_conversation_that_never_finishes_is_an_error() -> None:
    server = FakeScramServer({("admin", "user"): "pencil"}, skip_empty_exchange=False)

    def never_done(dbname, spec):
        reply = server(dbname, spec)
        if "saslContinue" in spec and bytes(spec["payload"]) == b"":
            reply["done"] = False
        return reply

    with pytest.raises(OperationFailure, match="did not finish"):
        authenticate(FakeConn(never_done), credential("SCRAM-SHA-256", "user", "pencil"))


def test_auth_source_is_the_database_used() -> None:
    server = FakeScramServer({("app", "user"): "pencil"})
    conn = FakeConn(server)
    authenticate(conn, credential("SCRAM-SHA-256", "user", "pencil", source="app"))
    assert {dbname for dbname, _ in conn.sent} == {"app"}


def test_salted_password_cache_is_used_across_connections() -> None:
    server = FakeScramServer({("admin", "user"): "pencil"})
    cred = credential("SCRAM-SHA-256", "user", "pencil")
    authenticate(FakeConn(server), cred)
    authenticate(FakeConn(server), cred)
    keys = cred.cache.scram_keys
    assert (keys.misses, keys.hits) == (1, 1)


# -- mechanism negotiation ------------------------------------------------------

@pytest.mark.parametrize("offered, expected", [
    (("SCRAM-SHA-256", "SCRAM-SHA-1"), "SCRAM-SHA-256"),
    (("SCRAM-SHA-256",), "SCRAM-SHA-256"),
    (("SCRAM-SHA-1",), "SCRAM-SHA-1"),
])
def test_negotiation_from_the_handshake(offered, expected) -> None:
    server = FakeScramServer({("admin", "user"): "pencil"}, mechanisms=offered)
    cred = credential(None, "user", "pencil")
    handshake = prepare_handshake(cred)
    fields = handshake.hello_fields()
    assert fields["saslSupportedMechs"] == "admin.user"
    conn, handshake = _handshake(server, cred)
    assert authenticate(conn, cred, handshake) == expected


def test_negotiation_defaults_to_sha1_without_saslSupportedMechs() -> None:
    server = FakeScramServer({("admin", "user"): "pencil"}, mechanisms=("SCRAM-SHA-1",))
    conn = FakeConn(server, hello={"isWritablePrimary": True, "maxWireVersion": 6, "ok": 1})
    assert authenticate(conn, credential("DEFAULT", "user", "pencil")) == "SCRAM-SHA-1"
    assert "hello" not in conn.command_names()  # wire version 6 predates saslSupportedMechs


def test_negotiation_hello_when_the_handshake_did_not_ask() -> None:
    server = FakeScramServer({("admin", "user"): "pencil"}, mechanisms=BOTH)
    conn = FakeConn(server)
    assert authenticate(conn, credential(None, "user", "pencil")) == "SCRAM-SHA-256"
    assert conn.command_names()[0] == "hello"
    assert conn.sent[0] == ("admin", {"hello": 1, "saslSupportedMechs": "admin.user"})


def test_username_is_sent_raw_for_negotiation() -> None:
    fields = prepare_handshake(credential(None, "\u2168", "x", source="db")).hello_fields()
    assert fields["saslSupportedMechs"] == "db.\u2168"


def test_explicit_mechanism_sends_no_saslSupportedMechs() -> None:
    fields = prepare_handshake(credential("SCRAM-SHA-1", "user", "pencil")).hello_fields()
    assert "saslSupportedMechs" not in fields


# -- speculative authentication -------------------------------------------------

@pytest.mark.parametrize("mechanism", [None, "SCRAM-SHA-256", "SCRAM-SHA-1"])
def test_speculative_authentication_saves_the_saslStart(mechanism) -> None:
    server = FakeScramServer({("admin", "user"): "pencil"}, mechanisms=BOTH)
    cred = credential(mechanism, "user", "pencil")
    handshake = prepare_handshake(cred)
    speculative = handshake.hello_fields()["speculativeAuthenticate"]
    assert speculative["saslStart"] == 1 and speculative["db"] == "admin"
    assert speculative["mechanism"] == (mechanism or "SCRAM-SHA-256")
    assert speculative["options"] == {"skipEmptyExchange": True}
    conn, handshake = _handshake(server, cred)
    assert "speculativeAuthenticate" in conn.hello
    authenticate(conn, cred, handshake)
    assert conn.command_names() == ["saslContinue"]


def test_speculative_reply_missing_falls_back_to_a_full_conversation() -> None:
    server = FakeScramServer({("admin", "user"): "pencil"})
    cred = credential("SCRAM-SHA-256", "user", "pencil")
    handshake = prepare_handshake(cred)
    conn = FakeConn(server)  # an old server: hello ignored speculativeAuthenticate
    authenticate(conn, cred, handshake)
    assert conn.command_names() == ["saslStart", "saslContinue"]


def test_speculative_sha256_ignored_when_negotiation_picks_sha1() -> None:
    server = FakeScramServer({("admin", "user"): "pencil"}, mechanisms=("SCRAM-SHA-1",))
    cred = credential(None, "user", "pencil")
    conn, handshake = _handshake(server, cred)
    assert "speculativeAuthenticate" not in conn.hello
    assert authenticate(conn, cred, handshake) == "SCRAM-SHA-1"
    assert conn.command_names() == ["saslStart", "saslContinue"]


def test_default_mechanism_password_sha256_cannot_prep_still_allows_sha1() -> None:
    server = FakeScramServer({("admin", "user"): "bad\u0007pw"}, mechanisms=("SCRAM-SHA-1",))
    cred = credential(None, "user", "bad\u0007pw")
    conn, handshake = _handshake(server, cred)
    assert handshake.command is None
    assert authenticate(conn, cred, handshake) == "SCRAM-SHA-1"


# -- other paths ------------------------------------------------------------------

def test_arbiter_needs_no_authentication() -> None:
    conn = FakeConn(lambda db, spec: pytest.fail("nothing may be sent to an arbiter"),
                    hello={"arbiterOnly": True, "ok": 1})
    authenticate(conn, credential("SCRAM-SHA-256", "user", "pencil"))
    assert conn.sent == []


def test_reauthenticate_runs_sasl_without_hello() -> None:
    server = FakeScramServer({("admin", "user"): "pencil"}, mechanisms=BOTH)
    cred = credential(None, "user", "pencil")
    conn, handshake = _handshake(server, cred)
    authenticate(conn, cred, handshake)
    conn.sent.clear()
    reauthenticate(conn, cred)
    assert conn.command_names() == ["saslStart", "saslContinue"]
    assert conn.sent[0][1]["mechanism"] == "SCRAM-SHA-256"


@pytest.mark.parametrize("mechanism, message", [
    ("GSSAPI", "GSSAPI .*not supported"),
    ("MONGODB-CR", "removed"),
    ("NOPE", "unknown"),
])
def test_unsupported_mechanisms(mechanism: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        authenticate(FakeConn(lambda db, spec: {}), credential(mechanism, "user", "pencil", source="$external"))


@pytest.mark.parametrize("username, password", [(None, "p"), ("", "p"), ("user", None)])
def test_missing_username_or_password(username, password) -> None:
    with pytest.raises(ConfigurationError):
        authenticate(FakeConn(lambda db, spec: {}), credential("SCRAM-SHA-256", username, password))


def test_auth_cache_never_breaks_credential_equality() -> None:
    from greenmongo.auth import AuthCache

    assert AuthCache() == AuthCache() and hash(AuthCache()) == hash(AuthCache())
    assert credential("SCRAM-SHA-256", "u", "p") == credential("SCRAM-SHA-256", "u", "p")
