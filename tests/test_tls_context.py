"""Building pyOpenSSL contexts from TlsSettings: CA files, client keys, passwords, flags."""

from __future__ import annotations

import traceback

import pytest
from OpenSSL import SSL

from greenmongo.errors import ConfigurationError
from greenmongo.options.connection_settings import ConnectionSettings, ProxySettings, TlsSettings
from greenmongo.net.tls import build_context
from tests.servers.tls_certs import make_ca, make_cert


@pytest.fixture(scope="module")
def material(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tls-context")
    ca = make_ca()
    ca_file = ca.write(directory, "ca")[0]
    client = make_cert(ca, "client", client=True)
    plain_pem = client.write(directory, "client")[2]
    locked_pem = client.write(directory, "client-locked", password="s3cret")[2]
    return {"ca": ca_file, "plain": plain_pem, "locked": locked_pem, "dir": directory, "cert": client.cert}


def test_verifying_context_with_ca_file(material) -> None:
    context = build_context(TlsSettings(ca_file=material["ca"]))
    assert context.context.get_verify_mode() == SSL.VERIFY_PEER
    assert len(context.trusted) == 1


def test_system_store_is_loaded_when_no_ca_file() -> None:
    context = build_context(TlsSettings())
    assert context.context.get_verify_mode() == SSL.VERIFY_PEER
    assert context.trusted == []


@pytest.mark.parametrize("settings", [TlsSettings(insecure=True), TlsSettings(allow_invalid_certificates=True)])
def test_relaxed_contexts_do_not_verify(settings) -> None:
    assert build_context(settings).context.get_verify_mode() == SSL.VERIFY_NONE
    assert not settings.check_ocsp


def test_flags() -> None:
    assert TlsSettings().verify_hostname and TlsSettings().check_ocsp
    assert not TlsSettings(allow_invalid_hostnames=True).verify_hostname
    assert TlsSettings(allow_invalid_hostnames=True).verify_certificates
    assert not TlsSettings(allow_invalid_certificates=True).verify_hostname
    assert not TlsSettings(insecure=True).verify_hostname
    assert not TlsSettings(disable_certificate_revocation_check=True).check_ocsp


def test_client_certificate(material) -> None:
    for settings in (TlsSettings(ca_file=material["ca"], certificate_key_file=material["plain"]),
                     TlsSettings(ca_file=material["ca"], certificate_key_file=material["locked"],
                                 certificate_key_file_password="s3cret")):
        context = build_context(settings)
        presented = SSL.Connection(context.context, None).get_certificate()  # what a handshake would send
        assert presented is not None and presented.to_cryptography() == material["cert"]


def test_wrong_key_password(material) -> None:
    with pytest.raises(ConfigurationError, match="invalid TLS configuration"):
        build_context(TlsSettings(certificate_key_file=material["locked"], certificate_key_file_password="nope"))


def test_missing_and_bad_files(material) -> None:
    with pytest.raises(ConfigurationError):
        build_context(TlsSettings(ca_file=str(material["dir"] / "missing.pem")))
    garbage = material["dir"] / "garbage.pem"
    garbage.write_text("not a certificate")
    with pytest.raises(ConfigurationError):
        build_context(TlsSettings(certificate_key_file=str(garbage)))


def test_file_errors_name_the_option_never_the_path(material) -> None:
    """A path may come from a mistyped connection string (``tlsCAFile=/ca.pem?tlsCertificateKeyFilePassword=..``,
    a '?' typed for '&'): messages and their chained causes name the option instead."""
    missing = str(material["dir"] / "ca.pem?tlsCertificateKeyFilePassword=s3cr3t")
    garbage = material["dir"] / "s3cr3t.crl"
    garbage.write_text("not a CRL")
    cases = [
        (TlsSettings(ca_file=missing), "tlsCAFile"),
        (TlsSettings(certificate_key_file=missing), "tlsCertificateKeyFile"),
        (TlsSettings(ca_file=material["ca"], crl_file=missing), "tlsCRLFile"),
        (TlsSettings(ca_file=material["ca"], crl_file=str(garbage)), "tlsCRLFile"),
        (TlsSettings(certificate_key_file=material["locked"], certificate_key_file_password="n0pe"),
         "tlsCertificateKeyFile"),
    ]
    for settings, option in cases:
        with pytest.raises(ConfigurationError, match=option) as raised:
            build_context(settings)
        text = "".join(traceback.format_exception(raised.value))
        assert "s3cr3t" not in text and str(material["dir"]) not in text, text


def test_contexts_are_cached(material) -> None:
    settings = TlsSettings(ca_file=material["ca"])
    assert build_context(settings) is build_context(TlsSettings(ca_file=material["ca"]))


def test_settings_validation() -> None:
    with pytest.raises(ConfigurationError):
        ConnectionSettings(zlib_compression_level=12)
    with pytest.raises(ConfigurationError):
        ProxySettings("proxy", username="only-user")
    assert "secret" not in repr(TlsSettings(certificate_key_file_password="secret"))
    assert "secret" not in repr(ProxySettings("p", username="u", password="secret"))
