"""OCSP rules without sockets: stapled responses, Must-Staple, RFC 6960 validation, the cache."""

from __future__ import annotations

import datetime

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.x509 import ocsp as x509_ocsp

from greenmongo.net import ocsp
from tests.servers.tls_certs import make_ca, make_cert, make_ocsp_response

GOOD, REVOKED, UNKNOWN = (x509_ocsp.OCSPCertStatus.GOOD, x509_ocsp.OCSPCertStatus.REVOKED,
                          x509_ocsp.OCSPCertStatus.UNKNOWN)
NOW = datetime.datetime.now(datetime.timezone.utc)


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
    }


def check(pki, name, stapled=b"", cache=None, trusted=True, chain=True):
    cert = pki[name].cert
    return ocsp.check_certificate(cert, [pki["ca"].cert] if chain else [], stapled,
                                  trusted=[pki["ca"].cert] if trusted else [],
                                  cache=cache if cache is not None else ocsp.OcspCache())


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
