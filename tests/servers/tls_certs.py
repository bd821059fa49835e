"""Throwaway X.509 material for TLS and OCSP tests, made with ``cryptography``.

Nothing here is secret or reused: every test run mints its own CA, server and
client certificates (and OCSP responses) in a temporary directory.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509 import ocsp
from cryptography.x509.oid import AuthorityInformationAccessOID, ExtendedKeyUsageOID, NameOID


_SHA1 = hashes.SHA1()


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def _new_key(key_type: str):
    """An ECDSA P-256 key (the default: fast) or an RSA 2048 key (the OCSP test plan runs both)."""
    if key_type == "ec":
        return ec.generate_private_key(ec.SECP256R1())
    if key_type == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    raise ValueError(f"key_type {key_type!r}: 'ec' or 'rsa'")


@dataclass
class Issued:
    key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey
    cert: x509.Certificate

    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def key_pem(self, password: Optional[str] = None) -> bytes:
        encryption = (serialization.BestAvailableEncryption(password.encode()) if password
                      else serialization.NoEncryption())
        return self.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                      encryption)

    def write(self, directory: Path, name: str, password: Optional[str] = None) -> tuple[str, str, str]:
        """Write ``name.crt``, ``name.key`` and the combined ``name.pem``; return their paths."""
        cert_path, key_path, pem_path = (directory / f"{name}.crt", directory / f"{name}.key",
                                         directory / f"{name}.pem")
        cert_path.write_bytes(self.cert_pem())
        key_path.write_bytes(self.key_pem(password))
        pem_path.write_bytes(self.cert_pem() + self.key_pem(password))
        return str(cert_path), str(key_path), str(pem_path)


def make_ca(common_name: str = "greenmongo test CA", *, key_type: str = "ec") -> Issued:
    key = _new_key(key_type)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (x509.CertificateBuilder()
            .subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(_now() - datetime.timedelta(days=1))
            .not_valid_after(_now() + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, encipher_only=False,
                                         decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    return Issued(key, cert)


def make_cert(
    ca: Issued,
    common_name: str,
    *,
    dns_names: Iterable[str] = (),
    ip_addresses: Iterable[str] = (),
    client: bool = False,
    must_staple: bool = False,
    ocsp_signing: bool = False,
    ocsp_urls: Iterable[str] = (),
    key_type: str = "ec",
) -> Issued:
    """A certificate ``ca`` signs; ``ocsp_urls`` go in its Authority Information Access (its OCSP responders)."""
    key = _new_key(key_type)
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
               .issuer_name(ca.cert.subject).public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(_now() - datetime.timedelta(days=1))
               .not_valid_after(_now() + datetime.timedelta(days=10))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True))
    names = [x509.DNSName(name) for name in dns_names]
    names += [x509.IPAddress(ipaddress.ip_address(address)) for address in ip_addresses]
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    usages = [ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH]
    if ocsp_signing:
        usages = [ExtendedKeyUsageOID.OCSP_SIGNING]
    builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    if must_staple:
        builder = builder.add_extension(x509.TLSFeature([x509.TLSFeatureType.status_request]), critical=False)
    responders = [x509.AccessDescription(AuthorityInformationAccessOID.OCSP, x509.UniformResourceIdentifier(url))
                  for url in ocsp_urls]
    if responders:
        builder = builder.add_extension(x509.AuthorityInformationAccess(responders), critical=False)
    return Issued(key, builder.sign(ca.key, hashes.SHA256()))


def make_ocsp_response(
    cert: x509.Certificate,
    issuer: Issued,
    status: ocsp.OCSPCertStatus = ocsp.OCSPCertStatus.GOOD,
    *,
    signer: Optional[Issued] = None,
    this_update: Optional[datetime.datetime] = None,
    next_update: Optional[datetime.datetime] = datetime.timedelta(hours=1),  # type: ignore[assignment]
    hash_algorithm: hashes.HashAlgorithm = _SHA1,
) -> bytes:
    """A DER OCSP response about ``cert``, signed by ``signer`` (default: the issuer)."""
    this_update = this_update or _now() - datetime.timedelta(minutes=1)
    if isinstance(next_update, datetime.timedelta):
        next_update = this_update + next_update
    builder = ocsp.OCSPResponseBuilder().add_response(
        cert=cert, issuer=issuer.cert, algorithm=hash_algorithm, cert_status=status,
        this_update=this_update, next_update=next_update,
        revocation_time=_now() - datetime.timedelta(days=1) if status == ocsp.OCSPCertStatus.REVOKED else None,
        revocation_reason=None)
    signer = signer or issuer
    builder = builder.responder_id(ocsp.OCSPResponderEncoding.HASH, signer.cert)
    if signer is not issuer:
        builder = builder.certificates([signer.cert])
    return builder.sign(signer.key, hashes.SHA256()).public_bytes(serialization.Encoding.DER)


def server_context(cert: Issued, ca: Issued, *, staple: Optional[bytes] = None, request_client_cert: bool = False):
    """A pyOpenSSL server context presenting ``cert``; ``staple`` is sent as the OCSP response."""
    from OpenSSL import SSL, crypto

    context = SSL.Context(SSL.TLS_SERVER_METHOD)
    context.use_certificate(cert.cert)
    context.use_privatekey(cert.key)
    context.add_extra_chain_cert(ca.cert)
    if request_client_cert:
        context.set_verify(SSL.VERIFY_PEER | SSL.VERIFY_FAIL_IF_NO_PEER_CERT)
        context.get_cert_store().add_cert(crypto.X509.from_cryptography(ca.cert))
    if staple is not None:
        context.set_ocsp_server_callback(lambda _conn, _data: staple)
    return context
