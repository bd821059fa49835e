"""SCRAM-SHA-256 against a real SecantusDB started with --auth, through open_connection's handshake."""

from __future__ import annotations

import pytest

from greenmongo.auth import Authenticator
from greenmongo.errors import ConfigurationError, OperationFailure
from greenmongo.net.handshake import open_connection
from greenmongo.options.connection_settings import ConnectionSettings
from greenmongo.options.credentials import build_credentials
from tests.servers.secantus import start_with_users

SETTINGS = ConnectionSettings(connect_timeout=10.0, socket_timeout=10.0)


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory):
    """SecantusDB with --auth and two users (one with non-ASCII name and password: SASLprep)."""
    storage = str(tmp_path_factory.mktemp("secantus-auth") / "data")
    server = start_with_users(storage, [("alice", "s3cret"), ("\u2168", "\u2163")])
    try:
        yield server
    finally:
        server.stop()


def _connect(server, username, password, mechanism=None):
    credentials = build_credentials(mechanism, None, username, password, None, None)
    authenticator = Authenticator(credentials)
    return open_connection(server.address, SETTINGS, authenticator=authenticator), authenticator


@pytest.mark.parametrize("mechanism", [None, "SCRAM-SHA-256"])
def test_right_password_authenticates(auth_server, mechanism) -> None:
    conn, authenticator = _connect(auth_server, "alice", "s3cret", mechanism)
    try:
        assert authenticator.mechanism == "SCRAM-SHA-256"
        assert "speculativeAuthenticate" in conn.hello  # the hello carried the saslStart
        reply = conn.command("admin", {"connectionStatus": 1})
        users = reply["authInfo"]["authenticatedUsers"]
        assert {"user": "alice", "db": "admin"} in [{"user": u["user"], "db": u["db"]} for u in users]
    finally:
        conn.close()


def test_unauthenticated_connection_is_refused(auth_server) -> None:
    conn = open_connection(auth_server.address, SETTINGS)
    try:
        with pytest.raises(OperationFailure) as info:
            conn.command("admin", {"listDatabases": 1})
        assert info.value.code == 13  # Unauthorized
    finally:
        conn.close()


@pytest.mark.parametrize("username, password", [("alice", "wrong"), ("nobody", "s3cret")])
def test_wrong_password_or_user_is_code_18(auth_server, username, password) -> None:
    with pytest.raises(OperationFailure) as info:
        _connect(auth_server, username, password)
    assert info.value.code == 18


@pytest.mark.parametrize("password", ["\u2163", "I\u00adV", "IV"])
def test_saslprep_forms_of_the_password(auth_server, password) -> None:
    # The auth spec's SASLprep test: user "\u2168" with password "\u2163" (which SASLpreps to "IV").
    conn, authenticator = _connect(auth_server, "\u2168", password)
    try:
        assert authenticator.mechanism == "SCRAM-SHA-256"
        users = conn.command("admin", {"connectionStatus": 1})["authInfo"]["authenticatedUsers"]
        assert [(u["user"], u["db"]) for u in users] == [("\u2168", "admin")]
    finally:
        conn.close()


def test_scram_sha1_is_not_offered(auth_server) -> None:
    with pytest.raises((OperationFailure, ConfigurationError)):
        _connect(auth_server, "alice", "s3cret", "SCRAM-SHA-1")
