"""OCSP stapling through a real TLS handshake against the scripted server (pyOpenSSL stapling)."""

from __future__ import annotations

import pytest
from cryptography.x509 import ocsp as x509_ocsp

from greenmongo.errors import AutoReconnect
from greenmongo.net import ocsp
from greenmongo.net.connect import open_stream
from greenmongo.net.handshake import open_connection
from greenmongo.options.connection_settings import ConnectionSettings, TlsSettings
from tests.servers.scripted import ScriptedServer
from tests.servers.tls_certs import make_ca, make_cert, make_ocsp_response, server_context

REVOKED = x509_ocsp.OCSPCertStatus.REVOKED


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    directory = tmp_path_factory.mktemp("ocsp-tls")
    ca = make_ca()
    return {
        "ca": ca,
        "ca_file": ca.write(directory, "ca")[0],
        "plain": make_cert(ca, "localhost", ip_addresses=["127.0.0.1"]),
        "staple": make_cert(ca, "localhost", ip_addresses=["127.0.0.1"], must_staple=True),
    }


def connect(server, pki, cache, **tls):
    settings = ConnectionSettings(tls=TlsSettings(ca_file=pki["ca_file"], **tls), connect_timeout=5,
                                  socket_timeout=5)
    stream = open_stream(server.address, settings, ocsp_cache=cache)
    try:
        return stream.peer_certificate()
    finally:
        stream.close()


def run(pki, cert_name, staple, cache=None, **tls):
    """Connect over TLS to a server presenting ``cert_name`` (and ``staple``); the server's certificate."""
    context = server_context(pki[cert_name], pki["ca"], staple=staple)
    with ScriptedServer(tls_context=context) as server:
        return connect(server, pki, cache if cache is not None else ocsp.OcspCache(), **tls)


def test_good_staple(pki) -> None:
    cache = ocsp.OcspCache()
    run(pki, "staple", make_ocsp_response(pki["staple"].cert, pki["ca"]), cache)
    assert len(cache) == 1


def test_revoked_staple_fails_the_handshake(pki) -> None:
    with pytest.raises(AutoReconnect, match="revoked"):
        run(pki, "plain", make_ocsp_response(pki["plain"].cert, pki["ca"], REVOKED))


def test_must_staple_without_a_staple(pki) -> None:
    with pytest.raises(AutoReconnect, match="Must-Staple"):
        run(pki, "staple", None)


def test_soft_fail_without_a_staple(pki) -> None:
    cache = ocsp.OcspCache()
    assert run(pki, "plain", None, cache) == pki["plain"].cert  # the handshake completed
    assert len(cache) == 0  # no staple, no responder: nothing learnt


def test_invalid_staple(pki) -> None:
    stranger = make_ca("stranger")
    forged = make_ocsp_response(pki["plain"].cert, pki["ca"], signer=stranger)
    with pytest.raises(AutoReconnect, match="invalid stapled OCSP response"):
        run(pki, "plain", forged)


def test_cached_revocation_applies_to_later_connections(pki) -> None:
    cache = ocsp.OcspCache()
    with pytest.raises(AutoReconnect, match="revoked"):
        run(pki, "plain", make_ocsp_response(pki["plain"].cert, pki["ca"], REVOKED), cache)
    with pytest.raises(AutoReconnect, match="cached"):
        run(pki, "plain", None, cache)


@pytest.mark.parametrize("tls", [{"allow_invalid_certificates": True}, {"insecure": True},
                                 {"disable_certificate_revocation_check": True}])
def test_relaxed_settings_disable_ocsp(pki, tls) -> None:
    cache = ocsp.OcspCache()
    revoked = make_ocsp_response(pki["plain"].cert, pki["ca"], REVOKED)
    assert run(pki, "plain", revoked, cache, **tls) == pki["plain"].cert  # connected despite the revocation
    assert len(cache) == 0  # the staple was not even read


def test_full_connection_with_a_good_staple(pki) -> None:
    context = server_context(pki["staple"], pki["ca"], staple=make_ocsp_response(pki["staple"].cert, pki["ca"]))
    with ScriptedServer(tls_context=context) as server:
        settings = ConnectionSettings(tls=TlsSettings(ca_file=pki["ca_file"]), connect_timeout=5)
        with open_connection(server.address, settings, ocsp_cache=ocsp.OcspCache()) as conn:
            assert conn.command("admin", {"ping": 1}) == {"ok": 1.0}
