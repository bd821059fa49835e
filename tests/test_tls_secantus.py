"""TLS connections to SecantusDB with throwaway certificates: verification, hostnames, client certs."""

from __future__ import annotations

import pytest

from greenmongo.errors import AutoReconnect
from greenmongo.net.handshake import open_connection
from greenmongo.options.connection_settings import ConnectionSettings, TlsSettings
from tests.servers.secantus import SecantusServer
from tests.servers.tls_certs import make_ca, make_cert


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tls-secantus")
    ca = make_ca()
    server = make_cert(ca, "secantus", ip_addresses=["127.0.0.1"])  # deliberately no "localhost"
    client = make_cert(ca, "greenmongo-client", client=True)
    return {
        "ca": ca.write(directory, "ca")[0],
        "server": server.write(directory, "server"),
        "client": client.write(directory, "client", password="pw")[2],
    }


@pytest.fixture(scope="module")
def tls_server(pki):
    cert, key, _ = pki["server"]
    server = SecantusServer(tls_cert_file=cert, tls_key_file=key, tls_ca_file=pki["ca"])
    server.start()
    try:
        yield server
    finally:
        server.stop()


def settings(**tls) -> ConnectionSettings:
    return ConnectionSettings(tls=TlsSettings(**tls), connect_timeout=5, socket_timeout=5)


def test_verified_connection(tls_server, pki) -> None:
    with open_connection(tls_server.address, settings(ca_file=pki["ca"])) as conn:
        assert conn.is_tls
        assert conn.command("admin", {"ping": 1})["ok"] == 1.0
        conn.command("gm_tls", {"insert": "c"}, sequences={"documents": [{"x": "y" * 100_000}]})
        found = conn.command("gm_tls", {"find": "c", "filter": {}})
        assert found["cursor"]["firstBatch"][0]["x"] == "y" * 100_000  # multi-record TLS reads


def test_unknown_ca_is_refused(tls_server) -> None:
    with pytest.raises(AutoReconnect, match="certificate verify failed"):
        open_connection(tls_server.address, settings())


@pytest.mark.parametrize("relaxed", [{"allow_invalid_certificates": True}, {"insecure": True}])
def test_relaxed_verification_connects(tls_server, relaxed) -> None:
    with open_connection(("localhost", tls_server.port), settings(**relaxed)) as conn:
        assert conn.command("admin", {"ping": 1})["ok"] == 1.0


def test_hostname_mismatch(tls_server, pki) -> None:
    with pytest.raises(AutoReconnect, match="hostname verification failed"):
        open_connection(("localhost", tls_server.port), settings(ca_file=pki["ca"]))
    with open_connection(("localhost", tls_server.port),
                         settings(ca_file=pki["ca"], allow_invalid_hostnames=True)) as conn:
        assert conn.command("admin", {"ping": 1})["ok"] == 1.0


def test_plain_client_cannot_talk_to_tls_server(tls_server) -> None:
    with pytest.raises(AutoReconnect):
        open_connection(tls_server.address, ConnectionSettings(connect_timeout=5, socket_timeout=5))


def test_client_certificate_required(pki) -> None:
    cert, key, _ = pki["server"]
    server = SecantusServer(tls_cert_file=cert, tls_key_file=key, tls_ca_file=pki["ca"],
                            extra_args=["--tls-require-client-cert"])
    server.start()
    try:
        with open_connection(server.address, settings(ca_file=pki["ca"], certificate_key_file=pki["client"],
                                                      certificate_key_file_password="pw")) as conn:
            assert conn.command("admin", {"ping": 1})["ok"] == 1.0
        with pytest.raises(AutoReconnect):
            with open_connection(server.address, settings(ca_file=pki["ca"])) as conn:
                conn.command("admin", {"ping": 1})  # TLS 1.3 may report the refusal only on first read
    finally:
        server.stop()
