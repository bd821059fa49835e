"""parse_uri / split_uri: structure, option syntax, strict vs lenient, and secrets kept out of text."""

from __future__ import annotations

import warnings

import pytest

from greenmongo.errors import ConfigurationError, InvalidURI
from greenmongo.options import parse_uri, split_uri
from greenmongo.options.uri import host_type, parse_host


def lenient(uri: str):
    """parse_uri(warn=True) and the messages of the warnings it raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = parse_uri(uri, warn=True)
    return result, [str(w.message) for w in caught if w.category is UserWarning]


# -- hosts ----------------------------------------------------------------------------------

@pytest.mark.parametrize("entity, expected", [
    ("localhost", ("localhost", 27017)),
    ("LocalHost:27018", ("localhost", 27018)),
    ("[::1]", ("::1", 27017)),
    ("[fe80::1]:1", ("fe80::1", 1)),
    ("%2Ftmp%2FMongo.sock", ("/tmp/Mongo.sock", None)),
    ("rel%2Fdb.sock", ("rel/db.sock", None)),
    ("mongodb-27017.sock", ("mongodb-27017.sock", 27017)),
])
def test_parse_host(entity, expected):
    assert parse_host(entity) == expected


@pytest.mark.parametrize("entity", [
    "localhost:0", "localhost:65536", "localhost:-1", "localhost:", "localhost:x", "::1", "[::1", "[::1]x",
    "[]", "a::b", "%2Ftmp%2Fmongo", "%2Ftmp%2Fm.sock:27017", "",
])
def test_parse_host_rejects(entity):
    with pytest.raises(InvalidURI):
        parse_host(entity)


def test_default_port_is_configurable():
    assert parse_uri("mongodb://a,b:2", default_port=1000)["nodelist"] == [("a", 1000), ("b", 2)]


def test_host_types():
    assert [host_type(h) for h in ("1.2.3.4", "256.1.1.1", "::1", "/x.sock", "db")] == [
        "ipv4", "hostname", "ip_literal", "unix", "hostname"]


# -- userinfo, database --------------------------------------------------------------------------

def test_userinfo_is_percent_decoded_and_plus_is_literal():
    result = parse_uri("mongodb://us%3Aer:p%40ss+w%2Fd@h/")
    assert (result["username"], result["password"]) == ("us:er", "p@ss+w/d")


def test_username_without_password_and_empty_password():
    assert parse_uri("mongodb://u@h")["password"] is None
    assert parse_uri("mongodb://u:@h")["password"] == ""


@pytest.mark.parametrize("uri", [
    "mongodb://user:hunter@2@h", "mongodb://user:hun:ter2@h", "mongodb://user:hunter%2@h",
    "mongodb://user:hunter%zz@h",
])
def test_bad_userinfo_is_rejected_without_echoing_the_password(uri):
    with pytest.raises(InvalidURI) as raised:
        parse_uri(uri)
    message = str(raised.value)
    assert "hunter" not in message and "ter2" not in message
    assert "percent-encoded" in message


@pytest.mark.parametrize("uri", [
    "mongodb://alice:s3cret/x@h/db", "mongodb://alice:s3cret?x@h", "mongodb://alice:123456/x@h",
    "mongodb://alice:s3cret/x@h/db?w=1", "mongodb://alice:s3cret?x=1@h", "mongodb://alice/:s3cret@h/db",
    "mongodb://alice?:s3cret@h",
])
def test_unescaped_slash_or_question_mark_in_a_password_is_not_echoed(uri):
    with pytest.raises(InvalidURI) as raised:
        parse_uri(uri)
    assert "s3cret" not in str(raised.value) and "123456" not in str(raised.value)


def test_at_signs_in_option_values_are_fine():
    assert parse_uri("mongodb://h/?replicaSet=my@rs&appname=a@b")["options"]["replicaSet"] == "my@rs"
    assert parse_uri("mongodb://h?appname=x@y")["options"]["appname"] == "x@y"


def test_database_and_collection():
    result = parse_uri("mongodb://h/my%3Fdb.coll.sub?w=1")
    assert (result["database"], result["collection"]) == ("my?db", "coll.sub")
    assert parse_uri("mongodb://h/")["database"] is None


@pytest.mark.parametrize("database", ["a%2Fb", "a%5Cb", "a%20b", "a%22b", "a$b"])
def test_forbidden_database_characters(database):
    with pytest.raises(InvalidURI, match="Invalid database name"):
        parse_uri(f"mongodb://h/{database}")


@pytest.mark.parametrize("uri", ["", "mongo://h", "http://h", "mongodb://", "mongodb:///db", "mongodb://,h"])
def test_structural_errors(uri):
    with pytest.raises(InvalidURI):
        parse_uri(uri)


def test_split_uri_keeps_raw_pairs_and_hides_the_password_in_repr():
    parts = split_uri("mongodb://u:secretpw@h1,h2:5/db?a=1&B=%262")
    assert parts.option_pairs == (("a", "1"), ("B", "&2"))
    assert parts.hosts == (("h1", 27017), ("h2", 5))
    assert "secretpw" not in repr(parts)


# -- option syntax -------------------------------------------------------------------------

def test_keys_are_case_insensitive_and_canonical():
    options = parse_uri("mongodb://h/?REPLICASET=rs&readpreference=secondary&SSL=true")["options"]
    assert list(options) == ["replicaSet", "readPreference", "tls"]
    assert options["replicaset"] == "rs" and options["ssl"] is True and options.get("TLS") is True


def test_values_keep_colons_and_repeated_tags_are_ordered():
    options = parse_uri("mongodb://h/?readPreference=nearest&readPreferenceTags=dc:ny,rack:1"
                        "&readPreferenceTags=dc:sf&readPreferenceTags="
                        "&authMechanism=MONGODB-OIDC&authMechanismProperties=ENVIRONMENT:azure,"
                        "TOKEN_RESOURCE:api://x%2Fy")["options"]
    assert options["readPreferenceTags"] == [{"dc": "ny", "rack": "1"}, {"dc": "sf"}, {}]
    assert options["authMechanismProperties"] == {"ENVIRONMENT": "azure", "TOKEN_RESOURCE": "api://x/y"}


def test_semicolon_separator_and_no_mixing():
    assert parse_uri("mongodb://h/?w=1;journal=true")["options"].to_dict() == {"w": 1, "journal": True}
    with pytest.raises(InvalidURI):
        parse_uri("mongodb://h/?w=1;journal=true&appname=x")


def test_option_without_equals_is_malformed():
    with pytest.raises(InvalidURI, match="option number 2 is malformed"):
        parse_uri("mongodb://h/?w=1&journal")


def test_unknown_option_warns_without_its_name_or_value_and_is_ignored():
    result, messages = lenient("mongodb://h/?w=1&pasword=hunter2")
    assert "pasword" not in result["options"]
    assert messages and "number 2" in messages[0] and "pasword" not in messages[0] and "hunter2" not in messages[0]
    with warnings.catch_warnings(record=True) as caught:  # unknown keys warn in strict mode too
        warnings.simplefilter("always")
        parse_uri("mongodb://h/?pasword=hunter2")
    assert caught


def test_legacy_booleans_warn_and_work():
    result, messages = lenient("mongodb://h/?journal=y&retryWrites=0")
    assert result["options"]["journal"] is True and result["options"]["retryWrites"] is False
    assert len(messages) == 2 and "Deprecated boolean" in messages[0]


def test_deprecated_key_loses_to_its_replacement():
    result, messages = lenient("mongodb://h/?wtimeout=5&wTimeoutMS=10")
    assert result["options"]["wTimeoutMS"] == 10 and any("ignored" in m for m in messages)
    result, messages = lenient("mongodb://h/?wtimeout=5")
    assert result["options"]["wTimeoutMS"] == 5 and any("replaced" in m for m in messages)


def test_duplicate_key_warns_last_wins():
    result, messages = lenient("mongodb://h/?appname=a&appname=b")
    assert result["options"]["appname"] == "b" and any("Duplicate" in m for m in messages)


def test_tls_and_ssl_must_agree():
    assert lenient("mongodb://h/?tls=true&ssl=true")[1] == []
    with pytest.raises(ConfigurationError, match="same value"):
        parse_uri("mongodb://h/?tls=true&ssl=false", warn=True)


def test_empty_integer_and_boolean_values_are_ignored_with_a_warning():
    result, messages = lenient("mongodb://h/?maxPoolSize=&journal=")
    assert "maxPoolSize" not in result["options"] and "journal" not in result["options"]
    assert len(messages) == 2


def test_empty_auth_source_is_always_an_error():
    for warn in (False, True):
        with pytest.raises(ConfigurationError, match="authSource"):
            parse_uri("mongodb://h/?authSource=", warn=warn)


def test_strict_mode_raises_naming_the_option_lenient_mode_warns():
    with pytest.raises(ConfigurationError, match="heartbeatFrequencyMS"):
        parse_uri("mongodb://h/?heartbeatFrequencyMS=100")
    result, messages = lenient("mongodb://h/?heartbeatFrequencyMS=100&appname=ok")
    assert "heartbeatFrequencyMS" not in result["options"] and result["options"]["appname"] == "ok"
    assert any("heartbeatFrequencyMS" in m for m in messages)


def test_validate_false_keeps_raw_text():
    options = parse_uri("mongodb://h/?w=majority&maxPoolSize=abc&readPreferenceTags=a:b",
                        validate=False)["options"]
    assert options.to_dict() == {"w": "majority", "maxPoolSize": "abc", "readPreferenceTags": ["a:b"]}


def test_cross_option_rules_apply_in_both_modes():
    for warn in (False, True):
        with pytest.raises(ConfigurationError, match="directConnection"):
            parse_uri("mongodb://a,b/?directConnection=true", warn=warn)


# -- secrets ---------------------------------------------------------------------------------

def test_reprs_hide_every_secret():
    result = parse_uri("mongodb://user:hunter2@h/?authMechanism=MONGODB-AWS"
                       "&authMechanismProperties=AWS_SESSION_TOKEN:tok3n&proxyHost=p&proxyUsername=pr0xyus3r"
                       "&proxyPassword=pr0xy&tlsCertificateKeyFilePassword=k3y")
    text = repr(result) + repr(result["options"])
    for secret in ("hunter2", "tok3n", "pr0xyus3r", "pr0xy", "k3y"):
        assert secret not in text
    assert result["password"] == "hunter2"  # the value itself is still there for the driver
    assert result["options"]["proxyPassword"] == "pr0xy"


def test_repeated_proxy_password_error_does_not_echo_it():
    with pytest.raises(ConfigurationError) as raised:
        parse_uri("mongodb://h/?proxyHost=p&proxyUsername=u&proxyPassword=s3cret&proxyPassword=0ther")
    assert "s3cret" not in str(raised.value) and "0ther" not in str(raised.value)


def test_srv_structure_errors_come_before_any_dns():
    class Refuse:
        def resolve_srv(self, name, timeout=None):
            raise AssertionError("no DNS expected")

        resolve_txt = resolve_srv

    for uri in ("mongodb+srv://a.b.c:27017", "mongodb+srv://a.b.c,d.e.f", "mongodb+srv://[::1]",
                "mongodb+srv://1.2.3.4", "mongodb+srv://a..b"):
        with pytest.raises(ConfigurationError):
            parse_uri(uri, srv_resolver=Refuse())
