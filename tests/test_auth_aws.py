"""MONGODB-AWS: SigV4 against AWS's published vectors, the conversation, and where credentials come from."""

from __future__ import annotations

import base64
import json
import os
from typing import Dict, List, Tuple

import pytest

from greenmongo import bson
from greenmongo.auth import AuthCache, AuthIO, authenticate, prepare_handshake
from greenmongo.auth.aws import AwsConversation, AwsCredentials, obtain_credentials, sign_v4, sts_region
from greenmongo.net.http import HttpResponse
from greenmongo.errors import ConfigurationError, OperationFailure
from tests.auth_fakes import FakeConn, credential

EXAMPLE_KEY = "AKIDEXAMPLE"
EXAMPLE_SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
FIXED_NOW = 1573086367.0  # 2019-11-07T00:26:07Z, the spec example's X-AMZ-Date


# -- SigV4 --------------------------------------------------------------------

def _sign(**kwargs) -> str:
    base = dict(method="GET", path="/", query="", body=b"", access_key_id=EXAMPLE_KEY,
                secret_access_key=EXAMPLE_SECRET, region="us-east-1", amz_date="20150830T123600Z")
    base.update(kwargs)
    return sign_v4(**base)


def test_sigv4_iam_example_quoted_in_the_auth_spec() -> None:
    # AWS's "Signature Version 4" walkthrough (IAM ListUsers); the Authentication spec quotes the result.
    authorization = _sign(query="Action=ListUsers&Version=2010-05-08", service="iam", headers={
        "Content-Type": "application/x-www-form-urlencoded; charset=utf-8",
        "Host": "iam.amazonaws.com", "X-Amz-Date": "20150830T123600Z"})
    assert authorization == (
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, "
        "SignedHeaders=content-type;host;x-amz-date, "
        "Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7")


def test_sigv4_test_suite_get_vanilla() -> None:
    headers = {"Host": "example.amazonaws.com", "X-Amz-Date": "20150830T123600Z"}
    assert _sign(service="service", headers=headers).endswith(
        "SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31")
    # get-vanilla-query-order-key-case: the query is sorted before signing
    assert _sign(service="service", headers=headers, query="Param2=value2&Param1=value1").endswith(
        "Signature=b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500")


@pytest.mark.parametrize("host, region", [
    ("sts.amazonaws.com", "us-east-1"),
    ("sts.us-west-2.amazonaws.com", "us-west-2"),
    ("sts.us-west-2.amazonaws.com.ch", "us-west-2"),
    ("example.com", "com"),
    ("localhost", "us-east-1"),
])
def test_region_calculation(host: str, region: str) -> None:
    assert sts_region(host) == region


@pytest.mark.parametrize("host", ["sts..com", ".amazonaws.com", "sts.amazonaws.", "", "a" * 256])
def test_region_calculation_errors(host: str) -> None:
    with pytest.raises(OperationFailure, match="invalid STS host"):
        sts_region(host)


# -- the conversation ------------------------------------------------------------

NONCE = bytes(range(32))


def _server_first(host: str = "sts.amazonaws.com", nonce: bytes = NONCE) -> Dict:
    return {"s": nonce + b"S" * 32, "h": host}


def test_client_first_message() -> None:
    assert AwsConversation(NONCE).client_first() == {"r": NONCE, "p": 110}
    assert len(AwsConversation().nonce) == 32
    assert AwsConversation().nonce != AwsConversation().nonce


@pytest.mark.parametrize("token", [None, "SESSION-TOKEN"])
def test_client_final_signs_the_sts_request(token) -> None:
    creds = AwsCredentials(EXAMPLE_KEY, EXAMPLE_SECRET, token)
    message = AwsConversation(NONCE).client_final(_server_first("sts.us-west-2.amazonaws.com"), creds, FIXED_NOW)
    assert message["d"] == "20191107T002607Z"
    headers = {
        "Content-Length": "43", "Content-Type": "application/x-www-form-urlencoded",
        "Host": "sts.us-west-2.amazonaws.com", "X-Amz-Date": "20191107T002607Z",
        "X-MongoDB-Server-Nonce": base64.b64encode(NONCE + b"S" * 32).decode(), "X-MongoDB-GS2-CB-Flag": "n",
    }
    if token:
        headers["X-Amz-Security-Token"] = token
    expected = sign_v4(method="POST", path="/", query="", headers=headers,
                       body=b"Action=GetCallerIdentity&Version=2011-06-15", access_key_id=EXAMPLE_KEY,
                       secret_access_key=EXAMPLE_SECRET, region="us-west-2", service="sts",
                       amz_date="20191107T002607Z")
    assert message["a"] == expected
    assert "/20191107/us-west-2/sts/aws4_request" in message["a"]
    signed = ("content-length;content-type;host;x-amz-date;"
              + ("x-amz-security-token;" if token else "") + "x-mongodb-gs2-cb-flag;x-mongodb-server-nonce")
    assert f"SignedHeaders={signed}," in message["a"]
    if token:
        assert message["t"] == token
    else:
        assert "t" not in message


@pytest.mark.parametrize("server_first", [
    {"s": NONCE + b"S" * 31, "h": "sts.amazonaws.com"},          # 63 bytes
    {"s": b"X" * 32 + b"S" * 32, "h": "sts.amazonaws.com"},      # not our nonce
    {"h": "sts.amazonaws.com"},
    {"s": NONCE + b"S" * 32, "h": "sts..amazonaws.com"},
    {"s": NONCE + b"S" * 32, "h": 5},
])
def test_client_final_validates_the_server_first_message(server_first) -> None:
    with pytest.raises(OperationFailure):
        AwsConversation(NONCE).client_final(server_first, AwsCredentials("a", "b"), FIXED_NOW)


class FakeAwsServer:
    """saslStart/saslContinue for MONGODB-AWS; keeps what it was sent."""

    def __init__(self, done: bool = True) -> None:
        self.done = done
        self.client_first: Dict = {}
        self.client_final: Dict = {}

    def __call__(self, dbname, spec):
        assert dbname == "$external" and spec["mechanism" if "saslStart" in spec else "saslContinue"]
        if "saslStart" in spec:
            self.client_first = bson.decode(bytes(spec["payload"]))
            return {"conversationId": 7, "done": False, "ok": 1,
                    "payload": bson.encode({"s": self.client_first["r"] + os.urandom(32),
                                            "h": "sts.amazonaws.com"})}
        assert spec["conversationId"] == 7
        self.client_final = bson.decode(bytes(spec["payload"]))
        return {"conversationId": 7, "done": self.done, "payload": b"", "ok": 1}


def test_authenticate_over_a_connection() -> None:
    server = FakeAwsServer()
    cred = credential("MONGODB-AWS", EXAMPLE_KEY, EXAMPLE_SECRET, source="$external",
                      properties={"AWS_SESSION_TOKEN": "TOKEN"})
    conn = FakeConn(server)
    assert authenticate(conn, cred) == "MONGODB-AWS"
    assert conn.command_names() == ["saslStart", "saslContinue"]
    assert conn.sent[0][1]["mechanism"] == "MONGODB-AWS"
    assert server.client_first["p"] == 110 and len(server.client_first["r"]) == 32
    assert server.client_final["a"].startswith(f"AWS4-HMAC-SHA256 Credential={EXAMPLE_KEY}/")
    assert server.client_final["t"] == "TOKEN"
    assert prepare_handshake(cred).hello_fields() == {}  # no speculative auth for AWS


def test_unfinished_conversation_fails_and_clears_the_cache() -> None:
    cache = AuthCache(AuthIO(environ={}))
    cache.aws_credentials = AwsCredentials("K", "S", "T", expiration=cache.io.now() + 3600)
    with pytest.raises(OperationFailure, match="did not finish"):
        authenticate(FakeConn(FakeAwsServer(done=False)), credential("MONGODB-AWS", source="$external", cache=cache))
    assert cache.aws_credentials is None


# -- where credentials come from ------------------------------------------------

class FakeHttp:
    def __init__(self, routes: Dict[Tuple[str, str], HttpResponse]) -> None:
        self.routes = routes
        self.calls: List[Tuple[str, str, Dict[str, str]]] = []

    def __call__(self, method, url, headers, body=None, timeout=10.0) -> HttpResponse:
        self.calls.append((method, url, dict(headers)))
        for (route_method, prefix), response in self.routes.items():
            if method == route_method and url.startswith(prefix):
                return response
        return HttpResponse(404, b"not found")


def _temporary(key="TEMPKEY", expiration="2019-11-07T01:26:07Z", token_field="Token") -> bytes:
    return json.dumps({"Code": "Success", "AccessKeyId": key, "SecretAccessKey": "TEMPSECRET",
                       token_field: "TEMPTOKEN", "Expiration": expiration}).encode()


EC2 = "http://169.254.169.254"


def _ec2_routes(body: bytes) -> Dict:
    return {
        ("PUT", f"{EC2}/latest/api/token"): HttpResponse(200, b"IMDS-TOKEN"),
        ("GET", f"{EC2}/latest/meta-data/iam/security-credentials/role"): HttpResponse(200, body),
        ("GET", f"{EC2}/latest/meta-data/iam/security-credentials/"): HttpResponse(200, b"role\n"),
    }


def _io(environ=None, http=None, now=FIXED_NOW, files=None) -> AuthIO:
    return AuthIO(environ=environ if environ is not None else {},
                  http=http or FakeHttp({}), now=lambda: now,
                  read_file=lambda path: (files or {})[path])


def test_explicit_credentials_come_first() -> None:
    io = _io(environ={"AWS_ACCESS_KEY_ID": "ENVKEY", "AWS_SECRET_ACCESS_KEY": "ENVSECRET"})
    cred = credential("MONGODB-AWS", "URIKEY", "URISECRET", properties={"AWS_SESSION_TOKEN": "T"}, io=io)
    assert obtain_credentials(cred, cred.cache, io) == AwsCredentials("URIKEY", "URISECRET", "T")


@pytest.mark.parametrize("username, password, token", [("K", None, None), (None, "S", None), (None, None, "T")])
def test_incomplete_explicit_credentials(username, password, token) -> None:
    io = _io()
    props = {"AWS_SESSION_TOKEN": token} if token else {}
    cred = credential("MONGODB-AWS", username, password, properties=props, io=io)
    with pytest.raises(ConfigurationError):
        obtain_credentials(cred, cred.cache, io)


def test_environment_variables_are_read_each_time_and_never_cached() -> None:
    environ = {"AWS_ACCESS_KEY_ID": "ENVKEY", "AWS_SECRET_ACCESS_KEY": "ENVSECRET", "AWS_SESSION_TOKEN": "ENVTOKEN"}
    io = _io(environ=environ)
    cred = credential("MONGODB-AWS", io=io)
    assert obtain_credentials(cred, cred.cache, io) == AwsCredentials("ENVKEY", "ENVSECRET", "ENVTOKEN")
    environ["AWS_ACCESS_KEY_ID"] = "ROTATED"
    del environ["AWS_SESSION_TOKEN"]
    assert obtain_credentials(cred, cred.cache, io) == AwsCredentials("ROTATED", "ENVSECRET", None)
    assert cred.cache.aws_credentials is None
    assert io.http.calls == []


def test_partial_environment_is_an_error() -> None:
    io = _io(environ={"AWS_ACCESS_KEY_ID": "ENVKEY"})
    cred = credential("MONGODB-AWS", io=io)
    with pytest.raises(ConfigurationError):
        obtain_credentials(cred, cred.cache, io)


def test_web_identity() -> None:
    body = json.dumps({"AssumeRoleWithWebIdentityResponse": {"AssumeRoleWithWebIdentityResult": {
        "Credentials": {"AccessKeyId": "WIKEY", "SecretAccessKey": "WISECRET", "SessionToken": "WITOKEN",
                        "Expiration": FIXED_NOW + 3600}}}}).encode()
    http = FakeHttp({("POST", "https://sts.amazonaws.com/"): HttpResponse(200, body)})
    io = _io(environ={"AWS_WEB_IDENTITY_TOKEN_FILE": "/token", "AWS_ROLE_ARN": "arn:aws:iam::1:role/r",
                      "AWS_ROLE_SESSION_NAME": "app1", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "/ignored"},
             http=http, files={"/token": "JWT-CONTENTS\n"})
    cred = credential("MONGODB-AWS", io=io)
    assert obtain_credentials(cred, cred.cache, io) == AwsCredentials("WIKEY", "WISECRET", "WITOKEN", FIXED_NOW + 3600)
    (method, url, headers), = http.calls
    assert method == "POST" and headers == {"Accept": "application/json"}
    for part in ("Action=AssumeRoleWithWebIdentity", "RoleSessionName=app1",
                 "RoleArn=arn%3Aaws%3Aiam%3A%3A1%3Arole%2Fr", "WebIdentityToken=JWT-CONTENTS", "Version=2011-06-15"):
        assert part in url


def test_ecs_endpoint() -> None:
    http = FakeHttp({("GET", "http://169.254.170.2/v2/credentials/abc"): HttpResponse(200, _temporary("ECSKEY"))})
    io = _io(environ={"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "/v2/credentials/abc"}, http=http)
    cred = credential("MONGODB-AWS", io=io)
    found = obtain_credentials(cred, cred.cache, io)
    assert found[:3] == ("ECSKEY", "TEMPSECRET", "TEMPTOKEN")
    assert [c[0] for c in http.calls] == ["GET"]


def test_ec2_imdsv2_sequence_and_cache() -> None:
    http = FakeHttp(_ec2_routes(_temporary("EC2KEY")))
    environ: Dict[str, str] = {}
    io = _io(environ=environ, http=http)
    cred = credential("MONGODB-AWS", io=io)
    found = obtain_credentials(cred, cred.cache, io)
    assert found.access_key_id == "EC2KEY" and found.expiration == FIXED_NOW + 3600
    assert [(m, u) for m, u, _ in http.calls] == [
        ("PUT", f"{EC2}/latest/api/token"),
        ("GET", f"{EC2}/latest/meta-data/iam/security-credentials/"),
        ("GET", f"{EC2}/latest/meta-data/iam/security-credentials/role"),
    ]
    assert http.calls[0][2] == {"X-aws-ec2-metadata-token-ttl-seconds": "30"}
    assert http.calls[1][2] == http.calls[2][2] == {"X-aws-ec2-metadata-token": "IMDS-TOKEN"}
    assert cred.cache.aws_credentials == found
    # Cached credentials win, even over environment variables that appear later.
    environ.update(AWS_ACCESS_KEY_ID="ENVKEY", AWS_SECRET_ACCESS_KEY="ENVSECRET")
    assert obtain_credentials(cred, cred.cache, io) is found
    assert len(http.calls) == 3


def test_cached_credentials_close_to_expiry_are_refetched() -> None:
    http = FakeHttp(_ec2_routes(_temporary("FRESH", expiration="2019-11-07T02:00:00Z")))
    io = _io(http=http)
    cred = credential("MONGODB-AWS", io=io)
    cred.cache.aws_credentials = AwsCredentials("STALE", "S", "T", expiration=FIXED_NOW + 299)
    assert obtain_credentials(cred, cred.cache, io).access_key_id == "FRESH"
    cred.cache.aws_credentials = AwsCredentials("GOOD", "S", "T", expiration=FIXED_NOW + 301)
    assert obtain_credentials(cred, cred.cache, io).access_key_id == "GOOD"


@pytest.mark.parametrize("routes, message", [
    ({}, "HTTP 404"),
    ({("PUT", f"{EC2}/latest/api/token"): HttpResponse(200, b"T"),
      ("GET", f"{EC2}/latest/meta-data/iam/security-credentials/"): HttpResponse(200, b"")}, "no IAM role"),
    ({**_ec2_routes(b"{not json")}, "unreadable"),
])
def test_ec2_failures(routes, message) -> None:
    io = _io(http=FakeHttp(routes))
    cred = credential("MONGODB-AWS", io=io)
    with pytest.raises(OperationFailure, match=message):
        obtain_credentials(cred, cred.cache, io)


def test_unreachable_endpoint_is_an_operation_failure() -> None:
    def refuse(*args, **kwargs):
        raise ConnectionRefusedError("refused")

    io = _io(http=refuse)
    cred = credential("MONGODB-AWS", io=io)
    with pytest.raises(OperationFailure, match="could not reach"):
        obtain_credentials(cred, cred.cache, io)


def test_full_authentication_with_fetched_credentials() -> None:
    io = _io(http=FakeHttp(_ec2_routes(_temporary("EC2KEY"))), now=FIXED_NOW)
    server = FakeAwsServer()
    cred = credential("MONGODB-AWS", source="$external", io=io)
    authenticate(FakeConn(server), cred)
    assert "Credential=EC2KEY/20191107/us-east-1/sts/aws4_request" in server.client_final["a"]
    assert server.client_final["t"] == "TEMPTOKEN"
    assert server.client_final["d"] == "20191107T002607Z"
    assert cred.cache.aws_credentials.access_key_id == "EC2KEY"


def test_credentials_repr_hides_the_secret() -> None:
    assert "TEMPSECRET" not in repr(AwsCredentials("K", "TEMPSECRET"))
