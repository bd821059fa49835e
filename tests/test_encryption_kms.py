"""The AWS, Azure and GCP KMS providers against loopback mock KMS servers (tests/servers/kms_mock.py), and the
Client Side Encryption prose "KMS TLS Options" cases: an expired certificate, a wrong host name, a required
client certificate. Requests go over greenmongo's own TLS sockets; the AWS mock checks every SigV4 signature."""

from __future__ import annotations

import datetime
import ipaddress
import os

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.x509.oid import NameOID

from greenmongo import MongoClient
from greenmongo.bson import STANDARD, CodecOptions
from greenmongo.encryption import Algorithm, ClientEncryption
from greenmongo.errors import EncryptionError
from tests.servers.kms_mock import AWS_ACCESS_KEY_ID, AWS_SECRET, MockKms, gcp_private_key
from tests.servers.tls_certs import Issued, make_ca, make_cert

OPTS = CodecOptions(uuid_representation=STANDARD)
RAND = Algorithm.AEAD_AES_256_CBC_HMAC_SHA_512_Random
GCP_KEY = gcp_private_key()


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    directory = tmp_path_factory.mktemp("kms-pki")
    ca = make_ca("greenmongo mock KMS CA")
    good = make_cert(ca, "localhost", dns_names=["localhost"], ip_addresses=["127.0.0.1"])
    wrong_host = make_cert(ca, "wrong.example", dns_names=["wrong.example"])
    now = datetime.datetime.now(datetime.timezone.utc)
    names = x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    expired_cert = (x509.CertificateBuilder().subject_name(good.cert.subject).issuer_name(ca.cert.subject)
                    .public_key(good.key.public_key()).serial_number(x509.random_serial_number())
                    .not_valid_before(now - datetime.timedelta(days=30))
                    .not_valid_after(now - datetime.timedelta(days=1))
                    .add_extension(names, critical=False)
                    .sign(ca.key, hashes.SHA256()))
    expired = Issued(good.key, expired_cert)
    client = make_cert(ca, "greenmongo KMS client", client=True)
    assert expired.cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return {
        "directory": directory, "ca": ca.write(directory, "ca")[0],
        "good": good.write(directory, "good"), "wrong_host": wrong_host.write(directory, "wrong-host"),
        "expired": expired.write(directory, "expired"), "client": client.write(directory, "client")[2],
    }


def _mock(pki, name: str = "good", **kwargs) -> MockKms:
    cert, key, _ = pki[name]
    return MockKms(cert, key, ca_file=pki["ca"], **kwargs).start()


@pytest.fixture(scope="module")
def kms(pki):
    server = _mock(pki)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def client(server_uri):
    client = MongoClient(server_uri)
    client.keyvault.cloud_keys.drop()
    try:
        yield client
    finally:
        client.close()


def providers(endpoint: str, secret: str = AWS_SECRET) -> dict:
    return {
        "aws": {"accessKeyId": AWS_ACCESS_KEY_ID, "secretAccessKey": secret},
        "azure": {"tenantId": "tenant", "clientId": "client-id", "clientSecret": "azure-client-secret",
                  "identityPlatformEndpoint": endpoint},
        "gcp": {"email": "greenmongo@mock.iam.gserviceaccount.com", "privateKey": GCP_KEY, "endpoint": endpoint},
    }


def master_key(provider: str, endpoint: str) -> dict:
    return {
        "aws": {"region": "us-east-1", "key": "arn:aws:kms:us-east-1:123456789012:key/mock", "endpoint": endpoint},
        "azure": {"keyVaultEndpoint": endpoint, "keyName": "mock-key"},
        "gcp": {"projectId": "p", "location": "global", "keyRing": "r", "keyName": "k", "endpoint": endpoint},
    }[provider]


def encryption(client, endpoint: str, pki, secret: str = AWS_SECRET, **tls) -> ClientEncryption:
    options = tls or {"tlsCAFile": pki["ca"]}
    return ClientEncryption(providers(endpoint, secret), "keyvault.cloud_keys", client, OPTS,
                            kms_tls_options={name: options for name in ("aws", "azure", "gcp")})


@pytest.mark.parametrize("provider", ["aws", "azure", "gcp"])
def test_cloud_provider_data_keys_round_trip_through_the_mock_kms(client, kms, pki, provider) -> None:
    before = len(kms.requests)
    with encryption(client, kms.endpoint, pki) as ce:
        key_id = ce.create_data_key(provider, master_key=master_key(provider, kms.endpoint))
        assert ce.get_key(key_id)["masterKey"]["provider"] == provider
        ciphertext = ce.encrypt("cloud secret", RAND, key_id=key_id)
    with encryption(client, kms.endpoint, pki) as fresh:  # a cold key cache: the KMS unwraps the key
        assert fresh.decrypt(ciphertext) == "cloud secret"
    asked = kms.requests[before:]
    if provider == "aws":
        targets = [request["headers"]["x-amz-target"] for request in asked]
        assert targets[0] == "TrentService.Encrypt" and set(targets[1:]) == {"TrentService.Decrypt"}
        assert all(request["signature_valid"] for request in asked)
    elif provider == "azure":
        assert {request["path"].rsplit("/", 1)[-1] for request in asked} == {"token", "wrapkey", "unwrapkey"}
    else:
        assert {request["path"].rsplit(":", 1)[-1] for request in asked} == {"/token", "encrypt", "decrypt"}


def test_a_wrong_aws_secret_fails_the_signature_check_and_is_not_in_the_error(client, kms, pki) -> None:
    with encryption(client, kms.endpoint, pki, secret="not-the-secret") as ce:
        with pytest.raises(EncryptionError) as info:
            ce.create_data_key("aws", master_key=master_key("aws", kms.endpoint))
    assert "signature" in str(info.value).lower()
    assert kms.requests[-1]["signature_valid"] is False
    assert "not-the-secret" not in str(info.value) and AWS_SECRET not in str(info.value)


# -- prose: KMS TLS Options -----------------------------------------------------------------------------

def test_kms_tls_expired_certificate(client, pki) -> None:
    server = _mock(pki, "expired")
    try:
        with encryption(client, server.endpoint, pki) as ce:
            for provider in ("aws", "azure", "gcp"):
                # (OpenSSL's reason is "certificate verify failed"; the same CA and names pass in the other tests)
                with pytest.raises(EncryptionError, match="certificate verify failed"):
                    ce.create_data_key(provider, master_key=master_key(provider, server.endpoint))
    finally:
        server.stop()


def test_kms_tls_wrong_host_name(client, pki) -> None:
    server = _mock(pki, "wrong_host")
    try:
        with encryption(client, server.endpoint, pki) as ce:
            for provider in ("aws", "azure", "gcp"):
                with pytest.raises(EncryptionError, match="does not match"):
                    ce.create_data_key(provider, master_key=master_key(provider, server.endpoint))
    finally:
        server.stop()


def test_kms_tls_required_client_certificate(client, pki) -> None:
    server = _mock(pki, require_client_cert=True)
    try:
        with encryption(client, server.endpoint, pki) as ce:  # no client certificate
            with pytest.raises(EncryptionError, match="KMS request to 127.0.0.1"):
                ce.create_data_key("aws", master_key=master_key("aws", server.endpoint))
        with encryption(client, server.endpoint, pki, tlsCAFile=pki["ca"],
                        tlsCertificateKeyFile=pki["client"]) as ce:
            for provider in ("aws", "azure", "gcp"):
                assert ce.create_data_key(provider, master_key=master_key(provider, server.endpoint)).subtype == 4
    finally:
        server.stop()


def test_kms_tls_without_the_ca_is_untrusted(client, kms, pki) -> None:
    with ClientEncryption(providers(kms.endpoint), "keyvault.cloud_keys", client, OPTS) as ce:  # system CAs only
        with pytest.raises(EncryptionError, match="certificate verify failed"):
            ce.create_data_key("aws", master_key=master_key("aws", kms.endpoint))
    assert os.path.exists(pki["ca"])


def test_on_demand_aws_credentials_come_from_the_environment(client, kms, pki, monkeypatch) -> None:
    """An empty "aws" provider: greenmongo's MONGODB-AWS lookup supplies the credentials (here the environment)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", AWS_ACCESS_KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", AWS_SECRET)
    tls = {"aws": {"tlsCAFile": pki["ca"]}, "azure": {"tlsCAFile": pki["ca"]}}
    with ClientEncryption({"aws": {}, "azure": {}}, "keyvault.cloud_keys", client, OPTS, kms_tls_options=tls) as ce:
        key_id = ce.create_data_key("aws", master_key=master_key("aws", kms.endpoint))
        assert kms.requests[-1]["signature_valid"] is True
        assert ce.decrypt(ce.encrypt("on demand", RAND, key_id=key_id)) == "on demand"
        with pytest.raises(EncryptionError, match="on-demand KMS credentials for .azure. .*not implemented"):
            ce.create_data_key("azure", master_key=master_key("azure", kms.endpoint))
