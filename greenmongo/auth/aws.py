"""MONGODB-AWS: prove an AWS IAM identity with a signed STS GetCallerIdentity request.

The driver never calls STS itself: it signs (AWS Signature Version 4, written
here by hand) the request the *server* will send, and hands over the
Authorization header. Credentials come, in the spec's order, from the
credential (URI), a still-valid cached fetch, the environment, STS
AssumeRoleWithWebIdentity, and the ECS or EC2 (IMDSv2) metadata endpoints, all
through ``AuthIO`` so tests need no network.
"""

from __future__ import annotations

import base64
import calendar
import hashlib
import hmac
import json
import os
import time
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, NamedTuple, Optional, Tuple
from urllib.parse import parse_qsl, quote, urlencode

from greenmongo.auth.cache import AuthCache, AuthIO
from greenmongo.auth.sasl import mechanism_property, payload_bytes, require_done, sasl_continue, sasl_start
from greenmongo.errors import ConfigurationError, OperationFailure

if TYPE_CHECKING:
    from greenmongo.options.credentials import MongoCredential

__all__ = [
    "AwsConversation", "AwsCredentials", "authenticate_aws", "obtain_credentials", "sign_v4", "sts_region",
]

MECHANISM = "MONGODB-AWS"
_STS_BODY = b"Action=GetCallerIdentity&Version=2011-06-15"
_GS2_CB_FLAG = ord("n")
_EXPIRY_MARGIN = 5 * 60            # cached credentials must outlive "now" by this much
_HTTP_TIMEOUT = 10.0               # the spec's read timeout for ECS and EC2
_ECS_HOST = "http://169.254.170.2"
_EC2_HOST = "http://169.254.169.254"
_STS_URL = "https://sts.amazonaws.com/"


class AwsCredentials(NamedTuple):
    access_key_id: str
    secret_access_key: str
    session_token: Optional[str] = None
    expiration: Optional[float] = None  # epoch seconds; None = not from a temporary source

    def __repr__(self) -> str:  # the secret must never reach a log
        return f"AwsCredentials(access_key_id={self.access_key_id!r}, secret_access_key=<hidden>, ...)"

    def expires_soon(self, now: float) -> bool:
        return self.expiration is not None and self.expiration - now <= _EXPIRY_MARGIN


# -- Signature Version 4 -----------------------------------------------------

def _sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.digest(key, text.encode("utf-8"), "sha256")


def _canonical_query(query: str) -> str:
    pairs = parse_qsl(query, keep_blank_values=True)
    encoded = sorted((quote(name, safe="-_.~"), quote(value, safe="-_.~")) for name, value in pairs)
    return "&".join(f"{name}={value}" for name, value in encoded)


def sign_v4(
    *,
    method: str,
    path: str,
    query: str,
    headers: Mapping[str, str],
    body: bytes,
    access_key_id: str,
    secret_access_key: str,
    region: str,
    service: str,
    amz_date: str,
) -> str:
    """The ``Authorization`` header value for one request (every header given is signed)."""
    canonical_headers: List[Tuple[str, str]] = sorted(
        (name.lower(), " ".join(str(value).split())) for name, value in headers.items())
    signed_headers = ";".join(name for name, _ in canonical_headers)
    canonical_request = "\n".join([
        method,
        path or "/",
        _canonical_query(query),
        "".join(f"{name}:{value}\n" for name, value in canonical_headers),
        signed_headers,
        _sha256_hex(body),
    ])
    day = amz_date[:8]
    scope = f"{day}/{region}/{service}/aws4_request"
    string_to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                                _sha256_hex(canonical_request.encode("utf-8"))])
    key = _hmac(("AWS4" + secret_access_key).encode("utf-8"), day)
    for part in (region, service, "aws4_request"):
        key = _hmac(key, part)
    signature = hmac.digest(key, string_to_sign.encode("utf-8"), "sha256").hex()
    return (f"AWS4-HMAC-SHA256 Credential={access_key_id}/{scope}, "
            f"SignedHeaders={signed_headers}, Signature={signature}")


def sts_region(host: str) -> str:
    """The signing region for an STS host, per the spec's Region Calculation."""
    if not host or len(host.encode("utf-8")) > 255:
        raise OperationFailure(f"MONGODB-AWS: server sent an invalid STS host {host!r}")
    labels = host.split(".")
    if any(not label for label in labels):
        raise OperationFailure(f"MONGODB-AWS: server sent an invalid STS host {host!r}")
    if host == "sts.amazonaws.com" or len(labels) == 1:
        return "us-east-1"
    return labels[1]


def _amz_date(now: float) -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))


# -- the conversation (pure) -------------------------------------------------

class AwsConversation:
    """Client side of the two-message exchange; payloads are plain dicts, BSON-encoded by the caller."""

    def __init__(self, nonce: Optional[bytes] = None) -> None:
        self.nonce = nonce if nonce is not None else os.urandom(32)
        if len(self.nonce) != 32:
            raise ValueError("MONGODB-AWS client nonce must be 32 bytes")

    def client_first(self) -> Dict[str, Any]:
        return {"r": self.nonce, "p": _GS2_CB_FLAG}

    def client_final(self, server_first: Mapping[str, Any], credentials: AwsCredentials,
                     now: float) -> Dict[str, Any]:
        try:
            server_nonce = bytes(server_first["s"])
            host = server_first["h"]
        except (KeyError, TypeError):
            raise OperationFailure("MONGODB-AWS: malformed server-first message") from None
        if len(server_nonce) != 64 or server_nonce[:32] != self.nonce:
            raise OperationFailure("MONGODB-AWS: server returned an invalid nonce")
        if not isinstance(host, str):
            raise OperationFailure("MONGODB-AWS: server sent an invalid STS host")
        region = sts_region(host)
        amz_date = _amz_date(now)
        headers = {
            "Content-Length": str(len(_STS_BODY)),
            "Content-Type": "application/x-www-form-urlencoded",
            "Host": host,
            "X-Amz-Date": amz_date,
            "X-MongoDB-Server-Nonce": base64.b64encode(server_nonce).decode("ascii"),
            "X-MongoDB-GS2-CB-Flag": "n",
        }
        if credentials.session_token:
            headers["X-Amz-Security-Token"] = credentials.session_token
        authorization = sign_v4(method="POST", path="/", query="", headers=headers, body=_STS_BODY,
                                access_key_id=credentials.access_key_id,
                                secret_access_key=credentials.secret_access_key,
                                region=region, service="sts", amz_date=amz_date)
        message: Dict[str, Any] = {"a": authorization, "d": amz_date}
        if credentials.session_token:
            message["t"] = credentials.session_token
        return message


# -- where credentials come from ---------------------------------------------

def _parse_expiration(value: Any) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip()
    for pattern in ("%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%M:%S.%fZ"):
        try:
            return float(calendar.timegm(time.strptime(text, pattern)))
        except ValueError:
            continue
    raise OperationFailure(f"MONGODB-AWS: unreadable credential Expiration {text!r}")


def _find_credentials(document: Any) -> Optional[Mapping[str, Any]]:
    """The credential fields, flat (ECS, EC2) or nested as STS nests them
    (``{"<Action>Response": {"<Action>Result": {"Credentials": {...}}}}``)."""
    if not isinstance(document, dict):
        return None
    if "AccessKeyId" in document:
        return document
    for value in document.values():
        found = _find_credentials(value)
        if found is not None:
            return found
    return None


def _from_json(body: bytes, where: str, token_field: str) -> AwsCredentials:
    try:
        found = _find_credentials(json.loads(body))
        if found is None:
            raise KeyError("AccessKeyId")
        return AwsCredentials(found["AccessKeyId"], found["SecretAccessKey"],
                              found.get(token_field), _parse_expiration(found.get("Expiration")))
    except (ValueError, KeyError, TypeError):
        raise OperationFailure(f"MONGODB-AWS: temporary credentials from {where} are unreadable") from None


def _fetch(io: AuthIO, method: str, url: str, headers: Mapping[str, str], where: str) -> bytes:
    try:
        response = io.http(method, url, headers, None, _HTTP_TIMEOUT)
    except Exception as exc:
        raise OperationFailure(f"MONGODB-AWS: could not reach {where}: {exc}") from exc
    if response.status != 200:
        raise OperationFailure(f"MONGODB-AWS: {where} answered HTTP {response.status}")
    return response.body


def _from_web_identity(io: AuthIO, token_file: str, role_arn: str) -> AwsCredentials:
    try:
        token = io.read_file(token_file).strip()
    except OSError as exc:
        raise OperationFailure(f"MONGODB-AWS: cannot read AWS_WEB_IDENTITY_TOKEN_FILE: {exc}") from exc
    session_name = io.environ.get("AWS_ROLE_SESSION_NAME") or f"greenmongo-{os.urandom(8).hex()}"
    query = urlencode({"Action": "AssumeRoleWithWebIdentity", "RoleSessionName": session_name,
                       "RoleArn": role_arn, "WebIdentityToken": token, "Version": "2011-06-15"})
    body = _fetch(io, "POST", f"{_STS_URL}?{query}", {"Accept": "application/json"},
                  "STS AssumeRoleWithWebIdentity")
    return _from_json(body, "STS AssumeRoleWithWebIdentity", "SessionToken")


def _from_ecs(io: AuthIO, relative_uri: str) -> AwsCredentials:
    body = _fetch(io, "GET", _ECS_HOST + relative_uri, {}, "the ECS container endpoint")
    return _from_json(body, "the ECS container endpoint", "Token")


def _from_ec2(io: AuthIO) -> AwsCredentials:
    token = _fetch(io, "PUT", f"{_EC2_HOST}/latest/api/token",
                   {"X-aws-ec2-metadata-token-ttl-seconds": "30"}, "the EC2 metadata service").decode()
    headers = {"X-aws-ec2-metadata-token": token}
    roles_url = f"{_EC2_HOST}/latest/meta-data/iam/security-credentials/"
    role = _fetch(io, "GET", roles_url, headers, "the EC2 metadata service").decode().strip().splitlines()
    if not role or not role[0].strip():
        raise OperationFailure("MONGODB-AWS: the EC2 instance has no IAM role")
    body = _fetch(io, "GET", roles_url + role[0].strip(), headers, "the EC2 metadata service")
    return _from_json(body, "the EC2 metadata service", "Token")


def obtain_credentials(credentials: MongoCredential, cache: Optional[AuthCache], io: AuthIO) -> AwsCredentials:
    """Find AWS credentials in the spec's order; cache only the fetched, expiring kind."""
    username, password = credentials.username, credentials.password
    session_token = mechanism_property(credentials, "AWS_SESSION_TOKEN")
    if username or password:
        if not (username and password):
            raise ConfigurationError("MONGODB-AWS needs both an access key ID (username) and a secret key "
                                     "(password), or neither")
        return AwsCredentials(username, password, session_token or None)
    if session_token:
        raise ConfigurationError("MONGODB-AWS: AWS_SESSION_TOKEN needs a username and password too")

    now = io.now()
    cached = cache.aws_credentials if cache is not None else None
    if cached is not None and not cached.expires_soon(now):
        return cached

    environ = io.environ
    access_key, secret_key = environ.get("AWS_ACCESS_KEY_ID"), environ.get("AWS_SECRET_ACCESS_KEY")
    if access_key or secret_key:
        if not (access_key and secret_key):
            raise ConfigurationError("MONGODB-AWS: set both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
        return AwsCredentials(access_key, secret_key, environ.get("AWS_SESSION_TOKEN") or None)

    token_file, role_arn = environ.get("AWS_WEB_IDENTITY_TOKEN_FILE"), environ.get("AWS_ROLE_ARN")
    relative_uri = environ.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
    if token_file and role_arn:
        fetched = _from_web_identity(io, token_file, role_arn)
    elif relative_uri:
        fetched = _from_ecs(io, relative_uri)
    else:
        fetched = _from_ec2(io)
    if cache is not None and fetched.expiration is not None:
        cache.aws_credentials = fetched  # one assignment: atomic under gevent
    return fetched


# -- over the connection -----------------------------------------------------

def _bson() -> Any:
    from greenmongo import bson  # the payloads are BSON documents
    return bson


def authenticate_aws(conn: Any, credentials: MongoCredential, cache: Optional[AuthCache], io: AuthIO) -> None:
    source = credentials.source or "$external"
    try:
        aws_credentials = obtain_credentials(credentials, cache, io)
        conversation = AwsConversation()
        bson = _bson()
        reply = conn.command(source, sasl_start(MECHANISM, bson.encode(conversation.client_first())))
        try:
            server_first = bson.decode(payload_bytes(reply))
        except Exception as exc:
            raise OperationFailure(f"MONGODB-AWS: unreadable server-first payload: {exc}") from None
        final = conversation.client_final(server_first, aws_credentials, io.now())
        reply = conn.command(source, sasl_continue(reply.get("conversationId"), bson.encode(final)))
        require_done(reply, MECHANISM)
    except BaseException:
        if cache is not None:
            cache.aws_credentials = None  # the spec: any failure clears the cache
        raise
