"""PLAIN and MONGODB-X509 command shapes, from the Authentication spec's examples."""

from __future__ import annotations

import base64

import pytest

from greenmongo.auth import authenticate, prepare_handshake
from greenmongo.auth.plain import plain_payload
from greenmongo.errors import ConfigurationError, OperationFailure
from tests.auth_fakes import FakeConn, auth_failed, credential


def test_plain_payload_matches_the_spec_example() -> None:
    assert base64.b64encode(plain_payload("user", "pencil")) == b"AHVzZXIAcGVuY2ls"


def test_plain_conversation() -> None:
    conn = FakeConn(lambda db, spec: {"conversationId": 1, "payload": b"", "done": True, "ok": 1})
    assert authenticate(conn, credential("PLAIN", "user", "pencil", source="$external")) == "PLAIN"
    (dbname, command), = conn.sent
    assert dbname == "$external"
    assert command == {"saslStart": 1, "mechanism": "PLAIN", "payload": b"\x00user\x00pencil", "autoAuthorize": 1}


def test_plain_not_done_and_failure() -> None:
    conn = FakeConn(lambda db, spec: {"conversationId": 1, "payload": b"", "done": False, "ok": 1})
    with pytest.raises(OperationFailure, match="did not finish"):
        authenticate(conn, credential("PLAIN", "user", "pencil", source="$external"))
    with pytest.raises(OperationFailure) as info:
        authenticate(FakeConn(lambda db, spec: auth_failed()), credential("PLAIN", "u", "p", source="$external"))
    assert info.value.code == 18


def test_plain_needs_username_and_password() -> None:
    with pytest.raises(ConfigurationError):
        authenticate(FakeConn(lambda db, spec: {}), credential("PLAIN", None, "p"))
    with pytest.raises(ConfigurationError):
        authenticate(FakeConn(lambda db, spec: {}), credential("PLAIN", "u", None))


def test_plain_has_no_speculative_authentication() -> None:
    assert prepare_handshake(credential("PLAIN", "u", "p")).hello_fields() == {}


_X509_REPLY = {"dbname": "$external", "user": "C=IS,ST=Reykjavik,L=Reykjavik,O=MongoDB,OU=Drivers,CN=client", "ok": 1}


def test_x509_without_username() -> None:
    conn = FakeConn(lambda db, spec: _X509_REPLY)
    authenticate(conn, credential("MONGODB-X509", source="$external"))
    assert conn.sent == [("$external", {"authenticate": 1, "mechanism": "MONGODB-X509"})]


def test_x509_with_username() -> None:
    conn = FakeConn(lambda db, spec: _X509_REPLY)
    authenticate(conn, credential("MONGODB-X509", _X509_REPLY["user"], source="$external"))
    assert conn.sent == [("$external", {"authenticate": 1, "mechanism": "MONGODB-X509",
                                        "user": _X509_REPLY["user"]})]


def test_x509_refuses_a_password() -> None:
    with pytest.raises(ConfigurationError, match="password"):
        authenticate(FakeConn(lambda db, spec: _X509_REPLY), credential("MONGODB-X509", "u", "p"))


def test_x509_speculative() -> None:
    cred = credential("MONGODB-X509", source="$external")
    handshake = prepare_handshake(cred)
    assert handshake.hello_fields() == {
        "speculativeAuthenticate": {"authenticate": 1, "mechanism": "MONGODB-X509", "db": "$external"}}
    reply = {k: v for k, v in _X509_REPLY.items() if k != "ok"}
    conn = FakeConn(lambda db, spec: pytest.fail("speculation already authenticated"),
                    hello={"ok": 1, "maxWireVersion": 21, "speculativeAuthenticate": reply})
    authenticate(conn, cred, handshake)
    assert conn.sent == []
    # no speculative reply: the full command
    conn = FakeConn(lambda db, spec: _X509_REPLY)
    authenticate(conn, cred, handshake)
    assert conn.command_names() == ["authenticate"]
