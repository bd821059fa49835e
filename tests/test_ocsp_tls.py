"""OCSP through a real TLS handshake against the scripted server: stapling (pyOpenSSL), and the OCSP
endpoint check against a loopback responder (tests/servers/ocsp_responder.py) when nothing is stapled."""

from __future__ import annotations

from time import monotonic

import pytest
from cryptography.x509 import ocsp as x509_ocsp

from greenmongo.errors import AutoReconnect
from greenmongo.net import ocsp
from greenmongo.net.connect import open_stream
from greenmongo.net.handshake import open_connection
from greenmongo.options.connection_settings import ConnectionSettings, TlsSettings
from tests.servers.ocsp_responder import OcspResponder
from tests.servers.scripted import ScriptedServer
from tests.servers.secantus import free_port
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


def connect(server, pki, cache, connect_timeout=5.0, **tls):
    settings = ConnectionSettings(tls=TlsSettings(ca_file=pki["ca_file"], **tls), connect_timeout=connect_timeout,
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


# -- the OCSP endpoint check: nothing stapled, the certificate names a responder ---------------------------

def run_with_responder(pki, responder_url, cache, staple=None, connect_timeout=5.0, **tls):
    """Connect to a server whose fresh certificate names ``responder_url`` as its OCSP responder."""
    issued = make_cert(pki["ca"], "localhost", ip_addresses=["127.0.0.1"], ocsp_urls=[responder_url])
    context = server_context(issued, pki["ca"], staple=staple(issued.cert) if staple else None)
    with ScriptedServer(tls_context=context) as server:
        assert connect(server, pki, cache, connect_timeout, **tls) == issued.cert
        return issued.cert


@pytest.mark.parametrize("signer", ["issuer", "delegate"])
def test_responder_says_good(pki, signer) -> None:
    cache = ocsp.OcspCache()
    delegate = make_cert(pki["ca"], "ocsp responder", ocsp_signing=True) if signer == "delegate" else None
    with OcspResponder(pki["ca"], "good", signer=delegate) as responder:
        issued = make_cert(pki["ca"], "localhost", ip_addresses=["127.0.0.1"], ocsp_urls=[responder.url])
        with ScriptedServer(tls_context=server_context(issued, pki["ca"])) as server:
            connect(server, pki, cache)
            assert [request.serial_number for request in responder.requests] == [issued.cert.serial_number]
            assert len(cache) == 1
            connect(server, pki, cache)  # the cached answer decides the next connection
            assert len(responder.requests) == 1


def test_responder_says_revoked(pki) -> None:
    cache = ocsp.OcspCache()
    with OcspResponder(pki["ca"], "revoked") as responder:
        issued = make_cert(pki["ca"], "localhost", ip_addresses=["127.0.0.1"], ocsp_urls=[responder.url])
        with ScriptedServer(tls_context=server_context(issued, pki["ca"])) as server:
            with pytest.raises(AutoReconnect, match=r"revoked \(OCSP responder\)"):
                connect(server, pki, cache)
            with pytest.raises(AutoReconnect, match=r"revoked \(cached OCSP response\)"):
                connect(server, pki, cache)
            assert len(responder.requests) == 1


@pytest.mark.parametrize("mode", ["unknown", "malformed", "http-error", "forged"])
def test_soft_fail_when_the_responder_proves_nothing(pki, mode) -> None:
    cache = ocsp.OcspCache()
    with OcspResponder(pki["ca"], mode, stranger=make_ca("stranger")) as responder:
        run_with_responder(pki, responder.url, cache)
    assert len(responder.requests) == 1 and len(cache) == 0


def test_soft_fail_when_the_responder_is_unreachable(pki) -> None:
    cache = ocsp.OcspCache()
    run_with_responder(pki, f"http://127.0.0.1:{free_port()}/ocsp", cache)
    assert len(cache) == 0


def test_slow_responder_costs_at_most_the_connection_timeout(pki) -> None:
    """The spec's limit is 5 s; a connection with connectTimeoutMS below that gives the responder less."""
    with OcspResponder(pki["ca"], "slow", delay=30) as responder:
        started = monotonic()
        run_with_responder(pki, responder.url, ocsp.OcspCache(), connect_timeout=1.5)
        elapsed = monotonic() - started
    assert len(responder.requests) == 1
    assert 1.4 <= elapsed < ocsp.DEFAULT_RESPONDER_TIMEOUT


@pytest.mark.parametrize("tls", [{"disable_ocsp_endpoint_check": True}, {"allow_invalid_certificates": True},
                                 {"insecure": True}, {"disable_certificate_revocation_check": True}])
def test_options_that_keep_the_driver_from_asking(pki, tls) -> None:
    cache = ocsp.OcspCache()
    with OcspResponder(pki["ca"], "revoked") as responder:
        run_with_responder(pki, responder.url, cache, **tls)  # connected: nobody said "revoked"
    assert responder.requests == [] and len(cache) == 0


def test_a_staple_settles_it_without_asking(pki) -> None:
    cache = ocsp.OcspCache()
    with OcspResponder(pki["ca"], "revoked") as responder:
        run_with_responder(pki, responder.url, cache, staple=lambda cert: make_ocsp_response(cert, pki["ca"]))
    assert responder.requests == [] and len(cache) == 1


def test_must_staple_without_a_staple_fails_before_asking(pki) -> None:
    with OcspResponder(pki["ca"], "good") as responder:
        issued = make_cert(pki["ca"], "localhost", ip_addresses=["127.0.0.1"], ocsp_urls=[responder.url],
                           must_staple=True)
        with ScriptedServer(tls_context=server_context(issued, pki["ca"])) as server:
            with pytest.raises(AutoReconnect, match="Must-Staple"):
                connect(server, pki, ocsp.OcspCache())
    assert responder.requests == []


def test_hostname_mismatch_fails_before_asking(pki) -> None:
    with OcspResponder(pki["ca"], "good") as responder:
        issued = make_cert(pki["ca"], "elsewhere.example", ocsp_urls=[responder.url])
        with ScriptedServer(tls_context=server_context(issued, pki["ca"])) as server:
            with pytest.raises(AutoReconnect, match="hostname verification failed"):
                connect(server, pki, ocsp.OcspCache())
    assert responder.requests == []
