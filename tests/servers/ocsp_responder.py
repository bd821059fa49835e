"""A loopback OCSP responder (RFC 6960 over HTTP POST) for the OCSP endpoint check tests.

A gevent WSGI server that answers every OCSP request about certificates of ``issuer`` the way it
is told: with a signed response (cryptography's OCSP builder) saying ``good``, ``revoked`` or
``unknown``, signed by the issuer or by a delegated responder certificate; or badly, on purpose:
malformed bytes, an HTTP error, a response signed by a stranger, or a reply that comes too late.
It records every request it parsed, so tests can tell whether the driver asked at all::

    with OcspResponder(ca) as responder:
        cert = make_cert(ca, "localhost", ocsp_urls=[responder.url])
        ...
        assert len(responder.requests) == 1
"""

from __future__ import annotations

import datetime
from typing import Any, Callable, Iterable, Optional

import gevent
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509 import ocsp
from gevent.pywsgi import WSGIServer

from tests.servers.tls_certs import Issued

GOOD, REVOKED, UNKNOWN = ocsp.OCSPCertStatus.GOOD, ocsp.OCSPCertStatus.REVOKED, ocsp.OCSPCertStatus.UNKNOWN
#: How the responder answers: a status, or a way of failing.
MODES = ("good", "revoked", "unknown", "malformed", "http-error", "forged", "slow")
_STATUS = {"good": GOOD, "revoked": REVOKED, "unknown": UNKNOWN}


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


class OcspResponder:
    """Answers OCSP requests about ``issuer``'s certificates per ``mode`` (see MODES).

    ``signer`` signs the responses (default: the issuer; a delegate needs the OCSPSigning usage);
    ``forged`` signs with ``stranger``; ``slow`` waits ``delay`` seconds and then answers ``good``.
    """

    def __init__(self, issuer: Issued, mode: str = "good", *, signer: Optional[Issued] = None,
                 stranger: Optional[Issued] = None, delay: float = 30.0) -> None:
        if mode not in MODES:
            raise ValueError(f"mode {mode!r}: one of {MODES}")
        self.issuer = issuer
        self.mode = mode
        self.signer = signer or issuer
        self.stranger = stranger
        self.delay = delay
        self.requests: list[ocsp.OCSPRequest] = []
        self._server = WSGIServer(("127.0.0.1", 0), self._app, log=None, error_log=None)

    def start(self) -> "OcspResponder":
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop(timeout=0)

    def __enter__(self) -> "OcspResponder":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}/ocsp"

    def response_for(self, request: ocsp.OCSPRequest, status: Optional[ocsp.OCSPCertStatus] = None,
                     signer: Optional[Issued] = None) -> bytes:
        """The DER response this responder gives to ``request`` (also what a server would staple)."""
        status = status if status is not None else _STATUS.get(self.mode, GOOD)
        signer = signer or self.signer
        this_update = _now() - datetime.timedelta(minutes=1)
        builder = ocsp.OCSPResponseBuilder().add_response_by_hash(
            issuer_name_hash=request.issuer_name_hash, issuer_key_hash=request.issuer_key_hash,
            serial_number=request.serial_number, algorithm=request.hash_algorithm, cert_status=status,
            this_update=this_update, next_update=this_update + datetime.timedelta(hours=1),
            revocation_time=_now() - datetime.timedelta(days=1) if status == REVOKED else None,
            revocation_reason=None)
        builder = builder.responder_id(ocsp.OCSPResponderEncoding.HASH, signer.cert)
        if signer is not self.issuer:
            builder = builder.certificates([signer.cert])
        return builder.sign(signer.key, hashes.SHA256()).public_bytes(serialization.Encoding.DER)

    def staple_for(self, cert: Any, status: Optional[ocsp.OCSPCertStatus] = None) -> bytes:
        """What a server stapling this responder's answer about ``cert`` would send (as a mongod asks it)."""
        request = ocsp.OCSPRequestBuilder().add_certificate(cert, self.issuer.cert, hashes.SHA1()).build()
        return self.response_for(request, status)

    def _app(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length)
        try:
            request = ocsp.load_der_ocsp_request(body)
        except ValueError:
            start_response("400 Bad Request", [("Content-Length", "0")])
            return [b""]
        self.requests.append(request)
        if self.mode == "slow":
            gevent.sleep(self.delay)  # a responder that answers too late, on purpose
        if self.mode == "http-error":
            start_response("500 Internal Server Error", [("Content-Length", "0")])
            return [b""]
        if self.mode == "malformed":
            payload = b"\x30\x03not an OCSP response"
        elif self.mode == "forged":
            if self.stranger is None:
                raise ValueError("mode 'forged' needs a stranger to sign")
            payload = self.response_for(request, GOOD, signer=self.stranger)
        else:
            payload = self.response_for(request)
        start_response("200 OK", [("Content-Type", "application/ocsp-response"),
                                  ("Content-Length", str(len(payload)))])
        return [payload]
