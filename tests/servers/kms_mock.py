"""Loopback mock KMS servers (HTTPS) for the AWS, Azure and GCP KMS providers.

One server answers all three protocols as libmongocrypt speaks them: AWS KMS (``X-Amz-Target:
TrentService.Encrypt/Decrypt``, JSON; every request's SigV4 signature is recomputed here with the
known secret and a mismatch is answered 400), Azure's token endpoint and Key Vault ``wrapkey``/``unwrapkey``,
and Google's OAuth token endpoint and Cloud KMS ``:encrypt``/``:decrypt``. "Encryption" is a reversible
transform under a fixed prefix, so only this server can unwrap what it wrapped. ``requests`` records what
was asked (method, path, headers) for the tests. TLS comes from ``tls_certs``: an expired certificate, one
for another host name, or a required client certificate make the KMS TLS prose cases.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import ssl
from typing import Any, Optional
from urllib.parse import parse_qsl, quote, urlsplit

import gevent.ssl
from gevent.server import StreamServer

_PREFIX = b"mock-kms:"
#: The AWS credentials the mock accepts (SigV4 is checked against this secret).
AWS_ACCESS_KEY_ID = "AKIDMOCKKMS"
AWS_SECRET = "mock/secret/key"


def _wrap(data: bytes) -> bytes:
    return _PREFIX + bytes(b ^ 0x5A for b in data)


def _unwrap(data: bytes) -> Optional[bytes]:
    if not data.startswith(_PREFIX):
        return None
    return bytes(b ^ 0x5A for b in data[len(_PREFIX):])


def _b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def sigv4_signature(method: str, path: str, query: str, headers: dict[str, str], signed: list[str], body: bytes,
                    secret: str, scope: str, amz_date: str) -> str:
    """The signature AWS would compute (an independent implementation from greenmongo's auth/aws.py)."""
    pairs = sorted((quote(k, safe="-_.~"), quote(v, safe="-_.~")) for k, v in parse_qsl(query, True))
    canonical = "\n".join([method, path or "/", "&".join(f"{k}={v}" for k, v in pairs),
                           "".join(f"{name}:{' '.join(headers[name].split())}\n" for name in signed),
                           ";".join(signed), hashlib.sha256(body).hexdigest()])
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = ("AWS4" + secret).encode()
    for part in scope.split("/"):
        key = hmac.digest(key, part.encode(), "sha256")
    return hmac.digest(key, to_sign.encode(), "sha256").hex()


class MockKms:
    """``start()`` listens on 127.0.0.1 (a free port); ``endpoint`` is what master keys and providers name."""

    def __init__(self, cert_file: str, key_file: str, ca_file: Optional[str] = None,
                 require_client_cert: bool = False) -> None:
        # gevent's SSLContext: its sockets handshake cooperatively (the stdlib's would block the hub unpatched).
        context = gevent.ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert_file, key_file)
        if require_client_cert:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(ca_file)
        self.server = StreamServer(("127.0.0.1", 0), self._handle, ssl_context=context)
        self.requests: list[dict[str, Any]] = []

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.server.server_port}"

    def start(self) -> "MockKms":
        self.server.start()
        return self

    def stop(self) -> None:
        self.server.stop(timeout=1)

    # -- HTTP ---------------------------------------------------------------------------------------------

    def _handle(self, sock: Any, _address: Any) -> None:
        try:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = sock.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            headers = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            length = int(headers.get("content-length", "0"))
            while len(body) < length:
                chunk = sock.recv(65536)
                if not chunk:
                    return
                body += chunk
            status, reply = self._answer(method, target, headers, body)
            payload = json.dumps(reply).encode()
            sock.sendall(f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len(payload)}"
                         f"\r\nConnection: close\r\n\r\n".encode() + payload)
        except (OSError, ssl.SSLError):
            pass
        finally:
            sock.close()

    def _answer(self, method: str, target: str, headers: dict[str, str], body: bytes) -> tuple[int, Any]:
        parts = urlsplit(target)
        record = {"method": method, "path": parts.path, "headers": headers}
        self.requests.append(record)
        try:  # AWS sends application/x-amz-json-1.1, Azure's token request is a form
            document = json.loads(body) if body else {}
        except ValueError:
            document = {}
        if "x-amz-target" in headers:
            return self._aws(method, parts.path, parts.query, headers, body, document, record)
        if parts.path.endswith("/oauth2/v2.0/token"):  # Azure's identity platform
            return 200, {"access_token": "azure-token", "expires_in": 3600, "token_type": "Bearer"}
        if parts.path == "/token":  # Google's OAuth endpoint (a JWT bearer assertion)
            return 200, {"access_token": "gcp-token", "expires_in": 3600, "token_type": "Bearer"}
        if parts.path.endswith("/wrapkey") or parts.path.endswith("/unwrapkey"):
            if headers.get("authorization") != "Bearer azure-token":
                return 401, {"error": {"code": "Unauthorized"}}
            value = _b64url_decode(document["value"])
            result = _wrap(value) if parts.path.endswith("/wrapkey") else _unwrap(value)
            if result is None:
                return 400, {"error": {"code": "BadParameter", "message": "not wrapped by this mock"}}
            return 200, {"kid": "https://mock/keys/k/1", "value": base64.urlsafe_b64encode(result).decode()}
        if parts.path.endswith(":encrypt") or parts.path.endswith(":decrypt"):
            if headers.get("authorization") != "Bearer gcp-token":
                return 401, {"error": {"code": 401, "message": "unauthorized"}}
            if parts.path.endswith(":encrypt"):
                return 200, {"ciphertext": base64.b64encode(_wrap(base64.b64decode(document["plaintext"]))).decode()}
            plain = _unwrap(base64.b64decode(document["ciphertext"]))
            if plain is None:
                return 400, {"error": {"code": 400, "message": "not wrapped by this mock"}}
            return 200, {"plaintext": base64.b64encode(plain).decode()}
        return 404, {"error": "unknown request"}

    def _aws(self, method: str, path: str, query: str, headers: dict[str, str], body: bytes, document: Any,
             record: dict) -> tuple[int, Any]:
        authorization = headers.get("authorization", "")
        try:
            credential = authorization.split("Credential=")[1].split(",")[0]
            signed = authorization.split("SignedHeaders=")[1].split(",")[0].split(";")
            signature = authorization.split("Signature=")[1].strip()
        except IndexError:
            return 400, {"__type": "MissingAuthenticationTokenException"}
        access_key, _, scope = credential.partition("/")
        expected = sigv4_signature(method, path, query, headers, signed, body, AWS_SECRET, scope,
                                   headers.get("x-amz-date", ""))
        record["signature_valid"] = access_key == AWS_ACCESS_KEY_ID and hmac.compare_digest(expected, signature)
        if not record["signature_valid"]:
            return 400, {"__type": "InvalidSignatureException",
                         "message": "The request signature we calculated does not match the signature you provided."}
        if headers["x-amz-target"] == "TrentService.Encrypt":
            blob = _wrap(base64.b64decode(document["Plaintext"]))
            return 200, {"CiphertextBlob": base64.b64encode(blob).decode(), "KeyId": document["KeyId"]}
        plain = _unwrap(base64.b64decode(document["CiphertextBlob"]))
        if plain is None:
            return 400, {"__type": "InvalidCiphertextException"}
        return 200, {"Plaintext": base64.b64encode(plain).decode(), "KeyId": "arn:aws:kms:mock"}


def gcp_private_key() -> bytes:
    """An RSA key as GCP's service account JSON carries it (PKCS#8 DER); libmongocrypt signs the JWT with it."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())
