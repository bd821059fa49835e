"""auth/tests/legacy: credentials built from connection strings (Authentication spec)."""

from __future__ import annotations

import pytest

from greenmongo.errors import ConfigurationError
from greenmongo.options import ClientOptions
from spec.support import params


#: This file holds both sides of DRIVERS-3131 (drivers stop accepting explicit MONGODB-AWS credentials):
#: "should use username and password if specified (MONGODB-AWS)" is valid, this one says the same
#: userinfo is invalid. greenmongo follows the Authentication spec's MONGODB-AWS section as published
#: with these tests' valid cases (username/password MAY be given; greenmongo.auth.aws uses them first).
DRIVERS_3131 = {
    "should throw an exception if username and password provided (MONGODB-AWS)":
        "contradicts 'should use username and password if specified (MONGODB-AWS)' in the same file: "
        "it belongs to DRIVERS-3131 (explicit AWS credentials removed), which greenmongo has not adopted",
}


def _cases(path, data):
    for case in data["tests"]:
        yield case["description"], case


@pytest.mark.parametrize("case", params("auth/tests/legacy", _cases))
def test_auth_credentials(case):
    if case["description"] in DRIVERS_3131:
        pytest.skip(DRIVERS_3131[case["description"]])
    if not case["valid"]:
        with pytest.raises(ConfigurationError):
            ClientOptions(case["uri"])
        return
    credentials = ClientOptions(case["uri"]).credentials
    expected = case.get("credential")
    if expected is None:
        assert credentials is None
        return
    assert credentials is not None
    for field in ("username", "password", "source"):
        if field in expected:
            assert getattr(credentials, field) == expected[field], field
    if "mechanism" in expected:
        # null means "negotiate": greenmongo spells that mechanism "DEFAULT" (as PyMongo does).
        assert credentials.mechanism == (expected["mechanism"] or "DEFAULT")
    if "mechanism_properties" in expected:
        wanted = expected["mechanism_properties"]
        if wanted is None:
            assert not credentials.mechanism_properties
        else:
            for key, value in wanted.items():
                assert credentials.mechanism_properties[key] == value, key
