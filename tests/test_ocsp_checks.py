"""OCSP rules without sockets: stapled responses, Must-Staple, RFC 6960 validation, the cache, and when and
how the OCSP responders decide (the endpoint check's pure half)."""

from __future__ import annotations

import datetime

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography import x509
from cryptography.x509 import ocsp as x509_ocsp
from cryptography.x509.oid import AuthorityInformationAccessOID

from greenmongo.net import ocsp
from tests.servers.tls_certs import make_ca, make_cert, make_ocsp_response

GOOD, REVOKED, UNKNOWN = (x509_ocsp.OCSPCertStatus.GOOD, x509_ocsp.OCSPCertStatus.REVOKED,
                          x509_ocsp.OCSPCertStatus.UNKNOWN)
NOW = datetime.datetime.now(datetime.timezone.utc)
RESPONDER, BACKUP = "http://ocsp.example.test/", "http://backup.example.test:8080/ocsp"


@pytest.fixture(scope="module")
def pki():
    ca = make_ca()
    return {
        "ca": ca,
        "plain": make_cert(ca, "db", dns_names=["db"]),
        "staple": make_cert(ca, "db", dns_names=["db"], must_staple=True),
        "responder": make_cert(ca, "responder", ocsp_signing=True),
        "not_responder": make_cert(ca, "impostor"),
        "other_ca": make_ca("another CA"),
        "aia": make_cert(ca, "db", dns_names=["db"], ocsp_urls=[RESPONDER, BACKUP]),
        "aia_staple": make_cert(ca, "db", dns_names=["db"], must_staple=True, ocsp_urls=[RESPONDER]),
    }


def check(pki, name, stapled=b"", cache=None, trusted=True, chain=True, endpoint_check=False):
    cert = pki[name].cert
    return ocsp.check_certificate(cert, [pki["ca"].cert] if chain else [], stapled,
                                  trusted=[pki["ca"].cert] if trusted else [],
                                  cache=cache if cache is not None else ocsp.OcspCache(),
                                  endpoint_check=endpoint_check)


def test_must_staple_detection(pki) -> None:
    assert ocsp.is_must_staple(pki["staple"].cert)
    assert not ocsp.is_must_staple(pki["plain"].cert)


def test_good_staple_accepted_and_cached(pki) -> None:
    cache = ocsp.OcspCache()
    decision = check(pki, "staple", make_ocsp_response(pki["staple"].cert, pki["ca"]), cache)
    assert decision.accept and "good" in decision.reason
    assert len(cache) == 1


def test_revoked_staple_rejected_and_cached(pki) -> None:
    cache = ocsp.OcspCache()
    decision = check(pki, "plain", make_ocsp_response(pki["plain"].cert, pki["ca"], REVOKED), cache)
    assert not decision.accept and "revoked" in decision.reason
    # Later, without a staple, the cached answer still rejects.
    later = check(pki, "plain", b"", cache)
    assert not later.accept and "cached" in later.reason


def test_must_staple_without_staple_rejected(pki) -> None:
    decision = check(pki, "staple")
    assert not decision.accept and "Must-Staple" in decision.reason


def test_no_staple_soft_fails(pki) -> None:
    decision = check(pki, "plain")
    assert decision.accept and "soft-fail" in decision.reason


def test_cached_good_used_without_staple(pki) -> None:
    cache = ocsp.OcspCache()
    check(pki, "plain", make_ocsp_response(pki["plain"].cert, pki["ca"]), cache)
    assert "cached" in check(pki, "plain", b"", cache).reason


def test_unknown_status_is_soft_fail_and_not_cached(pki) -> None:
    cache = ocsp.OcspCache()
    decision = check(pki, "plain", make_ocsp_response(pki["plain"].cert, pki["ca"], UNKNOWN), cache)
    assert decision.accept and "soft-fail" in decision.reason
    assert len(cache) == 0


def test_staple_for_another_certificate_rejected(pki) -> None:
    other = make_cert(pki["ca"], "other").cert
    decision = check(pki, "plain", make_ocsp_response(other, pki["ca"]))
    assert not decision.accept and "does not cover" in decision.reason


def test_staple_signed_by_a_stranger_rejected(pki) -> None:
    forged = make_ocsp_response(pki["plain"].cert, pki["ca"], signer=pki["other_ca"])
    decision = check(pki, "plain", forged)
    assert not decision.accept


def test_delegated_responder(pki) -> None:
    delegated = make_ocsp_response(pki["plain"].cert, pki["ca"], signer=pki["responder"])
    assert check(pki, "plain", delegated).accept
    no_eku = make_ocsp_response(pki["plain"].cert, pki["ca"], signer=pki["not_responder"])
    decision = check(pki, "plain", no_eku)
    assert not decision.accept and "OCSPSigning" in decision.reason


def test_expired_and_future_responses_rejected(pki) -> None:
    expired = make_ocsp_response(pki["plain"].cert, pki["ca"], this_update=NOW - datetime.timedelta(days=2),
                                 next_update=NOW - datetime.timedelta(days=1))
    assert not check(pki, "plain", expired).accept
    future = make_ocsp_response(pki["plain"].cert, pki["ca"], this_update=NOW + datetime.timedelta(days=1))
    assert not check(pki, "plain", future).accept


def test_sha256_cert_id_is_understood(pki) -> None:
    response = make_ocsp_response(pki["plain"].cert, pki["ca"], hash_algorithm=hashes.SHA256())
    assert check(pki, "plain", response).accept


def test_garbage_staple_rejected(pki) -> None:
    decision = check(pki, "plain", b"\x30\x03garbage")
    assert not decision.accept and "does not parse" in decision.reason


def test_issuer_from_the_ca_file_when_the_chain_lacks_it(pki) -> None:
    response = make_ocsp_response(pki["plain"].cert, pki["ca"])
    assert check(pki, "plain", response, chain=False).accept
    decision = check(pki, "plain", response, chain=False, trusted=False)
    assert not decision.accept and "issuer" in decision.reason


def test_cache_keeps_the_freshest_and_expires(pki) -> None:
    cache = ocsp.OcspCache()
    key = ocsp.cert_id(pki["plain"].cert, pki["ca"].cert)
    hour = datetime.timedelta(hours=1)
    cache.put(key, ocsp.OcspStatus(GOOD, NOW - hour, NOW + 2 * hour))
    cache.put(key, ocsp.OcspStatus(REVOKED, NOW - hour, NOW + hour))  # older nextUpdate: ignored
    assert cache.get(key, NOW).status == GOOD
    cache.put(key, ocsp.OcspStatus(REVOKED, NOW, NOW + 3 * hour))
    assert cache.get(key, NOW).status == REVOKED
    assert cache.get(key, NOW + 3 * hour) is None  # nextUpdate is exclusive
    assert len(cache) == 0
    cache.put(key, ocsp.OcspStatus(UNKNOWN, NOW, NOW + hour))
    cache.put(key, ocsp.OcspStatus(GOOD, NOW, None))  # no nextUpdate: not cacheable
    assert len(cache) == 0


# -- the endpoint check: when to ask the responders, and what their answers decide ------------------------

def test_responder_urls_are_the_http_ocsp_access_locations(pki) -> None:
    assert ocsp.responder_urls(pki["aia"].cert) == (RESPONDER, BACKUP)
    assert ocsp.responder_urls(pki["plain"].cert) == ()
    builder = (x509.CertificateBuilder().subject_name(pki["ca"].cert.subject).issuer_name(pki["ca"].cert.subject)
               .public_key(pki["ca"].key.public_key()).serial_number(7)
               .not_valid_before(NOW).not_valid_after(NOW + datetime.timedelta(days=1)))
    access = x509.AuthorityInformationAccess([
        x509.AccessDescription(AuthorityInformationAccessOID.CA_ISSUERS, x509.UniformResourceIdentifier(
            "http://ca.example.test/ca.crt")),
        x509.AccessDescription(AuthorityInformationAccessOID.OCSP, x509.UniformResourceIdentifier(
            "ldap://ocsp.example.test/")),
        x509.AccessDescription(AuthorityInformationAccessOID.OCSP, x509.UniformResourceIdentifier(RESPONDER)),
        x509.AccessDescription(AuthorityInformationAccessOID.OCSP, x509.UniformResourceIdentifier(RESPONDER)),
    ])
    cert = builder.add_extension(access, critical=False).sign(pki["ca"].key, hashes.SHA256())
    assert ocsp.responder_urls(cert) == (RESPONDER,)  # no CA issuers, no LDAP, no duplicates


def test_responder_timeout_is_five_seconds_or_what_the_connection_has() -> None:
    assert ocsp.responder_timeout(None) == ocsp.DEFAULT_RESPONDER_TIMEOUT == 5.0
    assert ocsp.responder_timeout(20.0) == 5.0
    assert ocsp.responder_timeout(1.5) == 1.5


def test_unsettled_certificate_with_responders_asks_them(pki) -> None:
    decision = check(pki, "aia", endpoint_check=True)
    assert decision.accept and decision.ask is not None
    query = decision.ask
    assert query.urls == (RESPONDER, BACKUP) and query.cert == pki["aia"].cert and query.issuer == pki["ca"].cert
    request = x509_ocsp.load_der_ocsp_request(query.request)
    assert request.serial_number == pki["aia"].cert.serial_number
    assert (request.hash_algorithm.name, request.issuer_name_hash, request.issuer_key_hash,
            request.serial_number) == query.key == ocsp.cert_id(pki["aia"].cert, pki["ca"].cert)
    # An inconclusive staple (unknown) settles nothing either.
    unknown = make_ocsp_response(pki["aia"].cert, pki["ca"], UNKNOWN)
    assert check(pki, "aia", unknown, endpoint_check=True).ask is not None


def test_no_responder_request_when_something_else_decides(pki) -> None:
    assert check(pki, "aia").ask is None  # tlsDisableOCSPEndpointCheck
    no_aia = check(pki, "plain", endpoint_check=True)
    assert no_aia.ask is None and no_aia.accept and "soft-fail" in no_aia.reason
    good = check(pki, "aia", make_ocsp_response(pki["aia"].cert, pki["ca"]), endpoint_check=True)
    assert good.accept and good.ask is None
    revoked = check(pki, "aia", make_ocsp_response(pki["aia"].cert, pki["ca"], REVOKED), endpoint_check=True)
    assert not revoked.accept and revoked.ask is None
    must_staple = check(pki, "aia_staple", endpoint_check=True)
    assert not must_staple.accept and must_staple.ask is None and "Must-Staple" in must_staple.reason
    cache = ocsp.OcspCache()
    check(pki, "aia", make_ocsp_response(pki["aia"].cert, pki["ca"]), cache)
    cached = check(pki, "aia", cache=cache, endpoint_check=True)
    assert cached.accept and cached.ask is None and "cached" in cached.reason
    no_issuer = check(pki, "aia", chain=False, trusted=False, endpoint_check=True)
    assert no_issuer.accept and no_issuer.ask is None  # no issuer, no CertID to ask about


@pytest.fixture
def query(pki):
    return check(pki, "aia", endpoint_check=True).ask


def test_usable_responder_replies(pki, query) -> None:
    good = ocsp.read_responder_reply(query, 200, make_ocsp_response(pki["aia"].cert, pki["ca"]))
    assert good is not None and good.status == GOOD
    revoked = ocsp.read_responder_reply(query, 200, make_ocsp_response(pki["aia"].cert, pki["ca"], REVOKED))
    assert revoked is not None and revoked.status == REVOKED
    delegated = make_ocsp_response(pki["aia"].cert, pki["ca"], signer=pki["responder"])
    assert ocsp.read_responder_reply(query, 200, delegated).status == GOOD


def test_replies_that_prove_nothing(pki, query) -> None:
    cert, ca = pki["aia"].cert, pki["ca"]
    assert ocsp.read_responder_reply(query, 200, make_ocsp_response(cert, ca, UNKNOWN)) is None
    assert ocsp.read_responder_reply(query, 500, make_ocsp_response(cert, ca, REVOKED)) is None
    assert ocsp.read_responder_reply(query, 200, b"\x30\x03garbage") is None
    assert ocsp.read_responder_reply(query, 200, b"") is None
    assert ocsp.read_responder_reply(query, 200, make_ocsp_response(pki["plain"].cert, ca, REVOKED)) is None
    assert ocsp.read_responder_reply(query, 200, make_ocsp_response(cert, ca, REVOKED, signer=pki["other_ca"])) is None
    assert ocsp.read_responder_reply(query, 200, make_ocsp_response(cert, ca, REVOKED,
                                                                    signer=pki["not_responder"])) is None
    expired = make_ocsp_response(cert, ca, REVOKED, this_update=NOW - datetime.timedelta(days=2),
                                 next_update=NOW - datetime.timedelta(days=1))
    assert ocsp.read_responder_reply(query, 200, expired) is None


def test_responder_answers_decide_and_are_cached(pki, query) -> None:
    cache = ocsp.OcspCache()
    silent = ocsp.decide_from_responders(query, None, cache)
    assert silent.accept and "soft-fail" in silent.reason and len(cache) == 0
    revoked = ocsp.read_responder_reply(query, 200, make_ocsp_response(pki["aia"].cert, pki["ca"], REVOKED))
    decision = ocsp.decide_from_responders(query, revoked, cache)
    assert not decision.accept and "revoked (OCSP responder)" in decision.reason
    later = check(pki, "aia", cache=cache, endpoint_check=True)  # the next connection asks nobody
    assert not later.accept and later.ask is None and "cached" in later.reason
    good_cache = ocsp.OcspCache()
    good = ocsp.read_responder_reply(query, 200, make_ocsp_response(pki["aia"].cert, pki["ca"]))
    assert ocsp.decide_from_responders(query, good, good_cache) == (True, "OCSP responder: good", None)
    assert len(good_cache) == 1
