"""MongoCredential: the Authentication spec's per-mechanism defaults and errors, beyond the URI suite."""

from __future__ import annotations

import pytest

from greenmongo.auth.cache import AuthCache
from greenmongo.errors import ConfigurationError
from greenmongo.options import ClientOptions, MongoCredential, build_credentials
from greenmongo.options.credentials import _build_credentials_tuple


def test_fields_and_cache():
    cred = build_credentials("SCRAM-SHA-256", None, "u", "p", None, "db")
    assert cred._fields == ("mechanism", "source", "username", "password", "mechanism_properties", "cache")
    assert (cred.mechanism, cred.source, cred.username, cred.password) == ("SCRAM-SHA-256", "db", "u", "p")
    assert cred.cache is None  # parsed credentials carry no state; each client's topology adds its cache
    twin = build_credentials("scram-sha-256", None, "u", "p", None, "db")
    assert twin == cred and hash(twin) == hash(cred)
    cached = twin._replace(cache=AuthCache())
    assert cached == cred._replace(cache=AuthCache())  # all caches compare equal


def test_repr_never_shows_the_password_or_session_token():
    cred = build_credentials("MONGODB-AWS", None, "AKID", "s3cret", {"aws_session_token": "t0ken"}, None)
    assert "s3cret" not in repr(cred) and "t0ken" not in repr(cred) and "s3cret" not in str(cred)
    assert cred.mechanism_properties["AWS_SESSION_TOKEN"] == "t0ken"


@pytest.mark.parametrize("mechanism, database, source, expected", [
    (None, None, None, "admin"), (None, "db", None, "db"), ("SCRAM-SHA-1", "db", "src", "src"),
    ("PLAIN", None, None, "$external"), ("PLAIN", "db", None, "db"),
    ("GSSAPI", "db", None, "$external"), ("MONGODB-X509", "db", None, "$external"),
])
def test_source_defaults(mechanism, database, source, expected):
    user = "u"
    password = None if mechanism in ("GSSAPI", "MONGODB-X509") else "p"
    assert build_credentials(mechanism, source, user, password, None, database).source == expected


def test_default_mechanism_is_negotiated():
    assert build_credentials(None, None, "u", "p", None, None).mechanism == "DEFAULT"


@pytest.mark.parametrize("args, match", [
    (("SCRAM-SHA-256", None, None, "p", None, None), "username is required"),
    (("SCRAM-SHA-256", None, "u", None, None, None), "password is required"),
    (("PLAIN", None, "u", None, None, None), "password is required"),
    (("SCRAM-SHA-1", None, "", "p", None, None), "must not be empty"),
    (("SCRAM-SHA-1", None, "u", "p", {"SERVICE_NAME": "x"}, None), "unsupported mechanism properties"),
    (("MONGODB-X509", None, "u", "p", None, None), "password is not supported"),
    (("MONGODB-X509", "admin", None, None, None, None), "authSource"),
    (("MONGODB-X509", None, None, None, {"A": "b"}, None), "unsupported mechanism properties"),
    (("GSSAPI", None, "u", None, {"CANONICALIZE_HOST_NAME": "sometimes"}, None), "CANONICALIZE_HOST_NAME"),
    (("MONGODB-AWS", None, None, "p", None, None), "both"),
    (("MONGODB-AWS", None, None, None, {"AWS_SESSION_TOKEN": "t"}, None), "AWS_SESSION_TOKEN"),
    (("MONGODB-OIDC", None, None, None, None, None), "ENVIRONMENT"),
    (("MONGODB-OIDC", None, None, None, {"ENVIRONMENT": "gcp"}, None), "TOKEN_RESOURCE"),
])
def test_spec_errors(args, match):
    with pytest.raises(ConfigurationError, match=match):
        build_credentials(*args)


def test_gssapi_properties():
    cred = build_credentials("GSSAPI", None, "u@R", None, {"canonicalize_host_name": "true"}, None)
    assert dict(cred.mechanism_properties) == {"SERVICE_NAME": "mongodb", "CANONICALIZE_HOST_NAME": "forwardAndReverse"}
    assert cred.mechanism_properties["service_name"] == "mongodb"  # case-insensitive lookup
    cred = build_credentials("GSSAPI", None, "u", None, {"CANONICALIZE_HOST_NAME": False}, None)
    assert cred.mechanism_properties["CANONICALIZE_HOST_NAME"] == "none"


def test_oidc_callbacks_come_from_code_not_uris():
    def callback(context):
        return None

    options = ClientOptions("mongodb://h/?authMechanism=MONGODB-OIDC",
                            authMechanismProperties={"OIDC_CALLBACK": callback})
    assert options.credentials.mechanism_properties["OIDC_CALLBACK"] is callback
    hash(options.credentials)
    with pytest.raises(ConfigurationError, match="cannot be given in a connection string"):
        ClientOptions("mongodb://h/?authMechanism=MONGODB-OIDC&authMechanismProperties=ALLOWED_HOSTS:x")
    with pytest.raises(ConfigurationError, match="ENVIRONMENT cannot be combined"):
        build_credentials("MONGODB-OIDC", None, None, None, {"OIDC_CALLBACK": callback, "ENVIRONMENT": "k8s"}, None)
    with pytest.raises(ConfigurationError, match="not both"):
        build_credentials("MONGODB-OIDC", None, None, None,
                          {"OIDC_CALLBACK": callback, "OIDC_HUMAN_CALLBACK": callback}, None)
    with pytest.raises(ConfigurationError, match="ALLOWED_HOSTS"):
        build_credentials("MONGODB-OIDC", None, None, None, {"OIDC_CALLBACK": callback, "ALLOWED_HOSTS": []}, None)
    human = build_credentials("MONGODB-OIDC", None, "u", None,
                              {"OIDC_HUMAN_CALLBACK": callback, "ALLOWED_HOSTS": ["*.example.com"]}, None)
    assert human.mechanism_properties["ALLOWED_HOSTS"] == ("*.example.com",)


def test_pymongo_shaped_builder():
    cred = _build_credentials_tuple("GSSAPI", None, "u", None, {"authmechanismproperties": {"SERVICE_NAME": "svc"}},
                                    "db")
    assert isinstance(cred, MongoCredential) and cred.mechanism_properties["SERVICE_NAME"] == "svc"
    assert cred.source == "$external"


def test_when_a_credential_is_configured():
    assert ClientOptions("mongodb://h/db?authSource=x").credentials is None
    assert ClientOptions("h", authMechanism="MONGODB-X509").credentials.username is None
    with pytest.raises(ConfigurationError, match="username"):
        ClientOptions("h", password="p")
