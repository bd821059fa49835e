"""The SCRAM conversation object against the RFC vectors and the spec's MongoDB example."""

from __future__ import annotations

import base64

import pytest

from greenmongo.auth.scram import ScramConversation, ScramKeyCache
from greenmongo.errors import ConfigurationError, OperationFailure

# RFC 5802 section 5 (SCRAM-SHA-1, password used as-is).
RFC5802 = {
    "nonce": "fyko+d2lbbFgONRv9qkxdawL",
    "client_first": b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL",
    "server_first": b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
    "client_final": b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
    "server_final": b"v=rmF9pqV8S7suAoZWja4dJRkFsKQ=",
}

# RFC 7677 section 3 (SCRAM-SHA-256), also the Authentication spec's example.
RFC7677 = {
    "nonce": "rOprNGfwEbeRWgbNEkqO",
    "client_first": b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
    "server_first": b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
    "client_final": (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="),
    "server_final": b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
}

# The Authentication spec's SCRAM-SHA-1 example: MongoDB's MD5 "user:mongo:pencil" digest as the password.
MONGODB_SHA1 = {
    "nonce": "fyko+d2lbbFgONRv9qkxdawL",
    "client_first": b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL",
    "server_first": b"r=fyko+d2lbbFgONRv9qkxdawLHo+Vgk7qvUOKUwuWLIWg4l/9SraGMHEE,s=rQ9ZY3MntBeuP3E1TDVC4w==,i=10000",
    "client_final": (b"c=biws,r=fyko+d2lbbFgONRv9qkxdawLHo+Vgk7qvUOKUwuWLIWg4l/9SraGMHEE,"
                     b"p=MC2T8BvbmWRckDw8oWl5IVghwCY="),
    "server_final": b"v=UMWeI25JD1yNYZRMpZ4VHvhZ9e0=",
}


def _replay(mechanism: str, vector: dict, **kwargs) -> ScramConversation:
    conversation = ScramConversation(mechanism, "user", "pencil", nonce=vector["nonce"], **kwargs)
    assert conversation.client_first() == vector["client_first"]
    assert conversation.client_final(vector["server_first"]) == vector["client_final"]
    conversation.verify_server_final(vector["server_final"])
    return conversation


def test_rfc5802_sha1_vector() -> None:
    _replay("SCRAM-SHA-1", RFC5802, raw_password=True)


def test_rfc7677_sha256_vector() -> None:
    _replay("SCRAM-SHA-256", RFC7677)


def test_spec_mongodb_sha1_example_uses_the_md5_digest() -> None:
    _replay("SCRAM-SHA-1", MONGODB_SHA1)
    # and the plain RFC derivation would not produce the spec's proof
    conversation = ScramConversation("SCRAM-SHA-1", "user", "pencil", nonce=MONGODB_SHA1["nonce"],
                                     raw_password=True)
    assert conversation.client_final(MONGODB_SHA1["server_first"]) != MONGODB_SHA1["client_final"]


def test_sha256_password_is_saslprepped() -> None:
    # "pen\u00adcil" SASLpreps to "pencil": the same proof as the RFC vector.
    conversation = ScramConversation("SCRAM-SHA-256", "user", "pen\u00adcil", nonce=RFC7677["nonce"])
    assert conversation.client_final(RFC7677["server_first"]) == RFC7677["client_final"]


def test_sha256_password_saslprep_failure_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="prohibited"):
        ScramConversation("SCRAM-SHA-256", "user", "bad\u0007")


def test_username_is_escaped_not_saslprepped() -> None:
    conversation = ScramConversation("SCRAM-SHA-256", "a=b,c\u2168", "x", nonce="abc")
    assert conversation.client_first() == "n,,n=a=3Db=2Cc\u2168,r=abc".encode()


def test_random_nonce_is_fresh_and_comma_free() -> None:
    first = ScramConversation("SCRAM-SHA-256", "u", "p").nonce
    second = ScramConversation("SCRAM-SHA-256", "u", "p").nonce
    assert first != second and "," not in first and len(base64.b64decode(first)) == 24


def test_server_signature_mismatch_is_an_error() -> None:
    conversation = ScramConversation("SCRAM-SHA-256", "user", "pencil", nonce=RFC7677["nonce"])
    conversation.client_final(RFC7677["server_first"])
    with pytest.raises(OperationFailure, match="invalid signature"):
        conversation.verify_server_final(b"v=" + base64.b64encode(b"\x00" * 32))


def test_server_error_attribute_is_reported() -> None:
    conversation = ScramConversation("SCRAM-SHA-256", "user", "pencil", nonce=RFC7677["nonce"])
    conversation.client_final(RFC7677["server_first"])
    with pytest.raises(OperationFailure, match="invalid-proof"):
        conversation.verify_server_final(b"e=invalid-proof")


def test_verify_before_final_is_an_error() -> None:
    with pytest.raises(OperationFailure):
        ScramConversation("SCRAM-SHA-256", "user", "pencil").verify_server_final(RFC7677["server_final"])


@pytest.mark.parametrize("server_first", [
    b"r=someoneElsesNonce,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",   # does not extend ours
    b"r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",  # adds nothing of the server's
    b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",                          # no nonce at all
])
def test_nonce_mismatch_is_an_error(server_first: bytes) -> None:
    conversation = ScramConversation("SCRAM-SHA-256", "user", "pencil", nonce=RFC7677["nonce"])
    with pytest.raises(OperationFailure, match="invalid nonce"):
        conversation.client_final(server_first)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-1", "SCRAM-SHA-256"])
def test_iteration_count_below_4096_is_refused(mechanism: str) -> None:
    conversation = ScramConversation(mechanism, "user", "pencil", nonce="abc")
    with pytest.raises(OperationFailure, match="iteration count of 4095"):
        conversation.client_final(b"r=abcdef,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4095")


@pytest.mark.parametrize("server_first", [
    b"r=abcdef,s=***,i=4096",
    b"r=abcdef,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=many",
    b"r=abcdef,i=4096",
    b"garbage",
    b"\xff\xfe",
])
def test_malformed_server_first_is_an_error(server_first: bytes) -> None:
    with pytest.raises(OperationFailure):
        ScramConversation("SCRAM-SHA-256", "user", "pencil", nonce="abc").client_final(server_first)


def test_mandatory_extension_is_refused() -> None:
    with pytest.raises(OperationFailure, match="extension"):
        ScramConversation("SCRAM-SHA-256", "u", "p", nonce="abc").client_final(
            b"m=ext,r=abcdef,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")


def test_salted_password_cache_hit_gives_identical_proof() -> None:
    cache = ScramKeyCache()
    first = ScramConversation("SCRAM-SHA-256", "user", "pencil", nonce=RFC7677["nonce"], cache=cache)
    assert first.client_final(RFC7677["server_first"]) == RFC7677["client_final"]
    assert (cache.hits, cache.misses, len(cache)) == (0, 1, 1)
    second = ScramConversation("SCRAM-SHA-256", "user", "pencil", nonce=RFC7677["nonce"], cache=cache)
    assert second.client_final(RFC7677["server_first"]) == RFC7677["client_final"]
    second.verify_server_final(RFC7677["server_final"])
    assert (cache.hits, cache.misses, len(cache)) == (1, 1, 1)


def test_cache_is_keyed_by_password_salt_iterations_and_mechanism() -> None:
    cache = ScramKeyCache()
    ScramConversation("SCRAM-SHA-256", "user", "pencil", nonce="abc", cache=cache).client_final(
        b"r=abcdef,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    ScramConversation("SCRAM-SHA-256", "user", "other", nonce="abc", cache=cache).client_final(
        b"r=abcdef,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    ScramConversation("SCRAM-SHA-256", "user", "pencil", nonce="abc", cache=cache).client_final(
        b"r=abcdef,s=QSXCR+Q6sek8bf92,i=4096")
    ScramConversation("SCRAM-SHA-256", "user", "pencil", nonce="abc", cache=cache).client_final(
        b"r=abcdef,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=5000")
    ScramConversation("SCRAM-SHA-1", "user", "pencil", nonce="abc", cache=cache).client_final(
        b"r=abcdef,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    assert (cache.hits, cache.misses, len(cache)) == (0, 5, 5)


def test_cache_is_bounded() -> None:
    cache = ScramKeyCache(max_entries=2)
    for iterations in (4096, 4097, 4098):
        ScramConversation("SCRAM-SHA-256", "u", "p", nonce="abc", cache=cache).client_final(
            f"r=abcdef,s=W22ZaJ0SNY7soEsUEjb6gQ==,i={iterations}".encode())
    assert len(cache) == 2


@pytest.mark.parametrize("kwargs, message", [
    ({"mechanism": "SCRAM-SHA-512", "username": "u", "password": "p"}, "not a SCRAM"),
    ({"mechanism": "SCRAM-SHA-256", "username": "", "password": "p"}, "username"),
    ({"mechanism": "SCRAM-SHA-256", "username": "u", "password": None}, "password"),
])
def test_missing_or_bad_settings(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        ScramConversation(kwargs.pop("mechanism"), **kwargs)
