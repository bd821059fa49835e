"""OCSP checks of a server certificate and the OCSP response cache (OCSP Support spec).

Pure: certificates, response bytes and the time in; decisions out. The rules, in the spec's order:

1. Must-Staple certificate and nothing stapled: reject.
2. A stapled response that does not cover the certificate or is invalid
   (RFC 6960 3.2: signer, signature, validity window): reject.
3. A valid stapled response: ``revoked`` rejects, ``good`` accepts; both are
   conclusive and cached under the certificate's CertID.
4. Otherwise a cached conclusive response decides.
5. Otherwise, when the endpoint check is on (tlsDisableOCSPEndpointCheck is
   false) and the certificate names OCSP responders (its Authority Information
   Access), the decision is to ask them (``Decision.ask``): the first valid,
   conclusive answer decides as a staple would and is cached
   (``decide_from_responders``); no such answer within the time allowed
   (``responder_timeout``: 5 s, or less when the connection has less) means
   soft-fail.
6. Otherwise soft-fail: accept.

The requests themselves are net.ocsp_responders' (HTTP over greenmongo's own
sockets); intermediate certificates are never checked with responders (spec
step 8).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Iterable, NamedTuple, Optional, Sequence

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import dsa, ec, ed448, ed25519, padding, rsa
from cryptography.x509 import ocsp
from cryptography.x509.oid import AuthorityInformationAccessOID, ExtendedKeyUsageOID

#: Tolerated clock skew for a response's thisUpdate lying slightly in our future.
CLOCK_SKEW = datetime.timedelta(minutes=5)
#: The spec's default limit on the responder requests (seconds).
DEFAULT_RESPONDER_TIMEOUT = 5.0

GOOD = ocsp.OCSPCertStatus.GOOD
REVOKED = ocsp.OCSPCertStatus.REVOKED
UNKNOWN = ocsp.OCSPCertStatus.UNKNOWN

_SHA1 = hashes.SHA1()

#: RFC 6960 CertID: (hash algorithm, issuerNameHash, issuerKeyHash, serialNumber).
CertId = tuple[str, bytes, bytes, int]


class InvalidOcspResponse(ValueError):
    """A response that RFC 6960 3.2 says must not be trusted."""


@dataclass(frozen=True)
class ResponderQuery:
    """The non-stapled check still to do: ``request`` (a DER OCSPRequest) for ``urls``, about ``cert``."""

    cert: x509.Certificate
    issuer: x509.Certificate
    urls: tuple[str, ...]
    request: bytes
    key: CertId


class Decision(NamedTuple):
    accept: bool
    reason: str
    ask: Optional[ResponderQuery] = None
    """Set when the certificate's OCSP responders are to decide (``accept`` is then provisional)."""


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


def responder_urls(cert: x509.Certificate) -> tuple[str, ...]:
    """The certificate's OCSP responders (Authority Information Access), http(s) URLs, in order."""
    try:
        access = cert.extensions.get_extension_for_class(x509.AuthorityInformationAccess).value
    except x509.ExtensionNotFound:
        return ()
    urls: list[str] = []
    for description in access:
        location = description.access_location
        if (description.access_method == AuthorityInformationAccessOID.OCSP
                and isinstance(location, x509.UniformResourceIdentifier)
                and location.value.lower().startswith(("http://", "https://"))
                and location.value not in urls):
            urls.append(location.value)
    return tuple(urls)


def responder_timeout(connect_timeout: Optional[float]) -> float:
    """The limit on the responder requests: the spec's 5 s, or what the connection's establishment has
    if less (connectTimeoutMS, or what an operation's timeoutMS left)."""
    if connect_timeout is None:
        return DEFAULT_RESPONDER_TIMEOUT
    return min(DEFAULT_RESPONDER_TIMEOUT, connect_timeout)


def check_certificate(
    cert: x509.Certificate,
    chain: Sequence[x509.Certificate],
    stapled: bytes,
    *,
    trusted: Sequence[x509.Certificate] = (),
    cache: OcspCache = DEFAULT_CACHE,
    now: Optional[datetime.datetime] = None,
    endpoint_check: bool = False,
) -> Decision:
    """Decide whether the server certificate ``cert`` passes OCSP (see the module docstring).

    With ``endpoint_check`` a certificate nothing else settles gets a Decision whose ``ask`` says which
    responders to ask; ``decide_from_responders`` turns their answer into the final decision.
    """
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
    urls = responder_urls(cert) if endpoint_check else ()
    if urls:
        request = ocsp.OCSPRequestBuilder().add_certificate(cert, issuer, _SHA1).build()
        query = ResponderQuery(cert, issuer, urls, request.public_bytes(serialization.Encoding.DER), key)
        return Decision(True, "no conclusive stapled or cached OCSP status: ask the OCSP responders", query)
    return Decision(True, "soft-fail: no conclusive OCSP status")


def read_responder_reply(
    query: ResponderQuery,
    http_status: int,
    body: bytes,
    now: Optional[datetime.datetime] = None,
) -> Optional[OcspStatus]:
    """A responder's answer if it is usable: HTTP 200, valid per RFC 6960 3.2 for ``query.cert``, and
    conclusive (good or revoked). Anything else - an HTTP error, malformed bytes, a response about
    another certificate or signed by a stranger, ``unknown`` - is None: it proves nothing either way."""
    if http_status != 200:
        return None
    try:
        status = verify_response(body, query.cert, query.issuer, now)
    except InvalidOcspResponse:
        return None
    return status if status.conclusive else None


def decide_from_responders(
    query: ResponderQuery,
    status: Optional[OcspStatus],
    cache: OcspCache = DEFAULT_CACHE,
) -> Decision:
    """The final decision once the responders answered (``status``: the first usable answer) or did not
    (None: unreachable, too slow, malformed or inconclusive, all soft-fail)."""
    if status is None:
        return Decision(True, "soft-fail: no OCSP responder gave a valid conclusive answer in time")
    cache.put(query.key, status)
    if status.status == REVOKED:
        return Decision(False, "the server certificate is revoked (OCSP responder)")
    return Decision(True, "OCSP responder: good")
