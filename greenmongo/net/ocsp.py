"""OCSP stapling checks and the OCSP response cache (OCSP Support spec).

Pure: given the server's certificate, its issuer and the stapled response
bytes, decide accept or reject. The rules, in the spec's order:

1. Must-Staple certificate and nothing stapled: reject.
2. A stapled response that does not cover the certificate or is invalid
   (RFC 6960 3.2: signer, signature, validity window): reject.
3. A valid stapled response: ``revoked`` rejects, ``good`` accepts; both are
   conclusive and cached under the certificate's CertID.
4. Otherwise a cached conclusive response decides.
5. Otherwise soft-fail: accept.

greenmongo does not contact OCSP responders itself (no non-stapled OCSP), so
an unreachable responder can never block a connection.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Iterable, NamedTuple, Optional, Sequence

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import dsa, ec, ed448, ed25519, padding, rsa
from cryptography.x509 import ocsp
from cryptography.x509.oid import ExtendedKeyUsageOID

#: Tolerated clock skew for a response's thisUpdate lying slightly in our future.
CLOCK_SKEW = datetime.timedelta(minutes=5)

GOOD = ocsp.OCSPCertStatus.GOOD
REVOKED = ocsp.OCSPCertStatus.REVOKED
UNKNOWN = ocsp.OCSPCertStatus.UNKNOWN

_SHA1 = hashes.SHA1()

#: RFC 6960 CertID: (hash algorithm, issuerNameHash, issuerKeyHash, serialNumber).
CertId = tuple[str, bytes, bytes, int]


class InvalidOcspResponse(ValueError):
    """A response that RFC 6960 3.2 says must not be trusted."""


class Decision(NamedTuple):
    accept: bool
    reason: str


@dataclass(frozen=True)
class OcspStatus:
    """The part of a validated single response worth caching."""

    status: ocsp.OCSPCertStatus
    this_update: datetime.datetime
    next_update: Optional[datetime.datetime]

    @property
    def conclusive(self) -> bool:
        return self.status in (GOOD, REVOKED)

    def valid_at(self, now: datetime.datetime) -> bool:
        return self.this_update <= now + CLOCK_SKEW and (self.next_update is None or now < self.next_update)


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def cert_id(cert: x509.Certificate, issuer: x509.Certificate,
            algorithm: hashes.HashAlgorithm = _SHA1) -> CertId:
    request = ocsp.OCSPRequestBuilder().add_certificate(cert, issuer, algorithm).build()
    return (request.hash_algorithm.name, request.issuer_name_hash, request.issuer_key_hash,
            request.serial_number)


class OcspCache:
    """Conclusive responses by CertID, each valid until (excluding) its nextUpdate."""

    def __init__(self) -> None:
        self._entries: dict[CertId, OcspStatus] = {}

    def get(self, key: CertId, now: Optional[datetime.datetime] = None) -> Optional[OcspStatus]:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if not entry.valid_at(now or _utcnow()):
            del self._entries[key]
            return None
        return entry

    def put(self, key: CertId, entry: OcspStatus) -> None:
        """Keep ``entry`` if conclusive, has a nextUpdate, and is fresher than what is cached."""
        if not entry.conclusive or entry.next_update is None:
            return
        current = self._entries.get(key)
        if current is None or current.next_update is None or entry.next_update > current.next_update:
            self._entries[key] = entry

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


#: The process-wide cache every TLS connection consults.
DEFAULT_CACHE = OcspCache()


def is_must_staple(cert: x509.Certificate) -> bool:
    """True when the certificate carries the TLS Feature status_request (RFC 7633)."""
    try:
        features = cert.extensions.get_extension_for_class(x509.TLSFeature).value
    except x509.ExtensionNotFound:
        return False
    return x509.TLSFeatureType.status_request in features


def _issued_by(cert: x509.Certificate, issuer: x509.Certificate) -> bool:
    if cert.issuer != issuer.subject:
        return False
    try:
        cert.verify_directly_issued_by(issuer)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def find_issuer(cert: x509.Certificate, candidates: Iterable[x509.Certificate]) -> Optional[x509.Certificate]:
    for candidate in candidates:
        if _issued_by(cert, candidate):
            return candidate
    return None


def _verify_signature(public_key, signature: bytes, data: bytes, algorithm) -> None:
    if isinstance(public_key, rsa.RSAPublicKey):
        public_key.verify(signature, data, padding.PKCS1v15(), algorithm)
    elif isinstance(public_key, ec.EllipticCurvePublicKey):
        public_key.verify(signature, data, ec.ECDSA(algorithm))
    elif isinstance(public_key, dsa.DSAPublicKey):
        public_key.verify(signature, data, algorithm)
    elif isinstance(public_key, (ed25519.Ed25519PublicKey, ed448.Ed448PublicKey)):
        public_key.verify(signature, data)
    else:
        raise InvalidOcspResponse(f"unsupported OCSP signer key type {type(public_key).__name__}")


def _matches_responder_id(response: ocsp.OCSPResponse, cert: x509.Certificate) -> bool:
    if response.responder_name is not None:
        return response.responder_name == cert.subject
    key_hash = x509.SubjectKeyIdentifier.from_public_key(cert.public_key()).digest
    return response.responder_key_hash == key_hash


def _signer(response: ocsp.OCSPResponse, issuer: x509.Certificate, now: datetime.datetime) -> x509.Certificate:
    """The certificate that may sign for ``issuer``: the issuer itself or a delegate it authorised."""
    if _matches_responder_id(response, issuer):
        return issuer
    for delegate in response.certificates:
        if not _matches_responder_id(response, delegate):
            continue
        if not _issued_by(delegate, issuer):
            raise InvalidOcspResponse("the OCSP responder certificate is not issued by the server's issuer")
        usage: Iterable[x509.ObjectIdentifier]
        try:
            usage = delegate.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        except x509.ExtensionNotFound:
            usage = ()
        if ExtendedKeyUsageOID.OCSP_SIGNING not in usage:
            raise InvalidOcspResponse("the OCSP responder certificate lacks the OCSPSigning extended key usage")
        if not delegate.not_valid_before_utc <= now <= delegate.not_valid_after_utc:
            raise InvalidOcspResponse("the OCSP responder certificate is outside its validity period")
        return delegate
    raise InvalidOcspResponse("the OCSP response is signed by neither the issuer nor an authorised responder")


def _single_response_for(response: ocsp.OCSPResponse, cert: x509.Certificate, issuer: x509.Certificate):
    for single in response.responses:
        if single.serial_number != cert.serial_number:
            continue
        _name, name_hash, key_hash, _serial = cert_id(cert, issuer, single.hash_algorithm)
        if single.issuer_name_hash == name_hash and single.issuer_key_hash == key_hash:
            return single
    raise InvalidOcspResponse("the OCSP response does not cover the server's certificate")


def verify_response(
    response_der: bytes,
    cert: x509.Certificate,
    issuer: x509.Certificate,
    now: Optional[datetime.datetime] = None,
) -> OcspStatus:
    """Validate a DER OCSP response for ``cert`` per RFC 6960 3.2; raise InvalidOcspResponse if it fails."""
    now = now or _utcnow()
    try:
        response = ocsp.load_der_ocsp_response(response_der)
    except ValueError as exc:
        raise InvalidOcspResponse(f"the OCSP response does not parse: {exc}") from None
    if response.response_status != ocsp.OCSPResponseStatus.SUCCESSFUL:
        raise InvalidOcspResponse(f"the OCSP response status is {response.response_status.name}")
    single = _single_response_for(response, cert, issuer)
    signer = _signer(response, issuer, now)
    try:
        _verify_signature(signer.public_key(), response.signature, response.tbs_response_bytes,
                          response.signature_hash_algorithm)
    except InvalidSignature:
        raise InvalidOcspResponse("the OCSP response signature does not verify") from None
    status = OcspStatus(single.certificate_status, single.this_update_utc, single.next_update_utc)
    if not status.valid_at(now):
        raise InvalidOcspResponse("the OCSP response is outside its thisUpdate/nextUpdate window")
    return status


def check_certificate(
    cert: x509.Certificate,
    chain: Sequence[x509.Certificate],
    stapled: bytes,
    *,
    trusted: Sequence[x509.Certificate] = (),
    cache: OcspCache = DEFAULT_CACHE,
    now: Optional[datetime.datetime] = None,
) -> Decision:
    """Decide whether the server certificate ``cert`` passes OCSP (see the module docstring)."""
    now = now or _utcnow()
    if not stapled and is_must_staple(cert):
        return Decision(False, "the server certificate is Must-Staple but no OCSP response was stapled")
    issuer = find_issuer(cert, list(chain) + list(trusted))
    if issuer is None:
        if stapled:
            return Decision(False, "cannot validate the stapled OCSP response: the certificate's issuer "
                                   "is not in the chain or the CA file")
        return Decision(True, "soft-fail: issuer unknown, no stapled response")
    key = cert_id(cert, issuer)
    if stapled:
        try:
            status = verify_response(stapled, cert, issuer, now)
        except InvalidOcspResponse as exc:
            return Decision(False, f"invalid stapled OCSP response: {exc}")
        cache.put(key, status)
        if status.status == REVOKED:
            return Decision(False, "the server certificate is revoked (stapled OCSP response)")
        if status.status == GOOD:
            return Decision(True, "stapled OCSP response: good")
    cached = cache.get(key, now)
    if cached is not None:
        if cached.status == REVOKED:
            return Decision(False, "the server certificate is revoked (cached OCSP response)")
        return Decision(True, "cached OCSP response: good")
    return Decision(True, "soft-fail: no conclusive OCSP status")
