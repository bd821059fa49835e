"""A mistyped connection string's text never reaches an error or a warning (PyMongo 4.20.1's ``from_uri``).

A connection string can carry credentials anywhere once it is mistyped: an unescaped ``/`` or ``?`` in a
password ends the host list early, a ``?`` typed for ``&`` glues a password onto the previous value, a
password pasted as an option becomes an unknown key. Messages end up in logs, so no message about a
connection string quotes its unknown option names, its values, paths, database name or host text; known
option names, positions and the rule broken are enough. A DNS TXT record's options are named (not typed
by a user) and so is what a keyword argument got wrong (``MongoClient(foo=1)``): that is the caller's code.

Checked on every path a connection string takes: ``MongoClient`` (greenmongo's own parser and validators,
``greenmongo.options``), ``greenmongo.options.parse_uri`` strict and lenient, and PyMongo's
``uri_parser.parse_uri`` facade, next to PyMongo 4.20.1 itself where it is installed.
"""

from __future__ import annotations

import traceback
import warnings
from types import ModuleType
from typing import Any, Callable

import pytest

import greenmongo
from greenmongo import common as gcommon
from greenmongo import uri_parser as guri
from greenmongo.errors import ConfigurationError
from greenmongo.options import ClientOptions
from greenmongo.options import parse_uri as options_parse_uri
from tests.test_pymongo_public_api import DELIBERATE_DIFFERENCES, _reference_pymongo

SECRET = "s3cr3t"


def _error_text(exc: BaseException, chained: bool = True) -> str:
    """What a traceback of ``exc`` says about it: its line and, with ``chained``, those of the exceptions it
    was raised from or while handling (the source lines are left out: they are the test's own)."""
    lines = []
    seen: BaseException | None = exc
    while seen is not None:
        lines.extend(traceback.format_exception_only(type(seen), seen))
        if not chained:
            break
        seen = seen.__cause__ or (None if seen.__suppress_context__ else seen.__context__)
    return "".join(lines)


def _report(call: Callable[..., Any], *args: Any, chained: bool = True, **kwargs: Any) -> tuple[str, list[str]]:
    """("raises" | "warns" | "quiet", every text ``call(*args, **kwargs)`` produced: the exception (see
    ``_error_text``) and each warning's message)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            call(*args, **kwargs)
        except Exception as exc:
            return "raises", [_error_text(exc, chained)] + [str(w.message) for w in caught]
    texts = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    return ("warns" if texts else "quiet"), texts


def _leaks(texts: list[str]) -> list[str]:
    return [text for text in texts if SECRET in text.lower()]


def _client(uri: str) -> Callable[[], None]:
    return lambda: greenmongo.MongoClient(uri, connect=False).close()


#: (connection string, MongoClient's outcome, greenmongo.options.parse_uri's, uri_parser.parse_uri's strict and
#: with warn=True). "quiet" where the value is only used later (a TLS file is read at connect:
#: tests/test_tls_context.py; the credential rules run when ClientOptions builds the credential).
CASES = [
    ("mongodb://h/?s3cr3t=x", "warns", "warns", "raises", "warns"),  # a password pasted as an option
    ("mongodb://h/?authSource=admin&S3CR3Tkey=a&S3CR3Tkey=b", "warns", "warns", "raises", "warns"),  # + a duplicate
    ("mongodb://h/?s3cr3t", "raises", "raises", "raises", "raises"),  # no '='
    ("mongodb://u:p@h/?authMechanism=S3CR3T", "raises", "raises", "raises", "warns"),
    ("mongodb://h/?uuidRepresentation=s3cr3t", "raises", "raises", "raises", "warns"),
    ("mongodb://h/?readPreference=s3cr3t", "raises", "raises", "raises", "warns"),
    ("mongodb://h/?readPreference=secondary&readPreferenceTags=s3cr3t", "raises", "raises", "raises", "warns"),
    ("mongodb://h/?readPreference=secondary&readPreferenceTags=dc:ny,s3cr3t", "raises", "raises", "raises", "warns"),
    ("mongodb://h/?serverMonitoringMode=s3cr3t", "raises", "raises", "raises", "warns"),
    ("mongodb://h/?datetime_conversion=s3cr3t", "raises", "raises", "raises", "raises"),
    ("mongodb://h/?unicode_decode_error_handler=s3cr3t", "raises", "raises", "raises", "warns"),
    ("mongodb://h/?compressors=zlib,s3cr3t", "warns", "warns", "warns", "warns"),
    ("mongodb://h/?zlibCompressionLevel=s3cr3t", "raises", "raises", "raises", "warns"),
    ("mongodb://h/?maxPoolSize=s3cr3t", "raises", "raises", "raises", "warns"),
    ("mongodb://h/?tls=s3cr3t", "raises", "raises", "raises", "warns"),
    ("mongodb://h/?tlsCAFile=/no/such/s3cr3t", "quiet", "quiet", "raises", "raises"),
    ("mongodb://h/?tlsCAFile=/ca.pem?tlsCertificateKeyFilePassword=s3cr3t", "quiet", "quiet", "raises", "raises"),
    ("mongodb://h/?tlsCertificateKeyFile=/no/such/s3cr3t.pem", "quiet", "quiet", "raises", "raises"),
    ("mongodb://u:p@h/?authMechanism=SCRAM-SHA-256&authMechanismProperties=S3CR3T:x",
     "raises", "quiet", "raises", "warns"),
    ("mongodb://u@h/?authMechanism=GSSAPI&authMechanismProperties=CANONICALIZE_HOST_NAME:s3cr3t",
     "raises", "quiet", "raises", "raises"),
    ("mongodb://h/?authMechanism=MONGODB-OIDC&authMechanismProperties=ENVIRONMENT:s3cr3t",
     "raises", "quiet", "quiet", "quiet"),
    ("mongodb://h/?authMechanism=MONGODB-X509&authSource=s3cr3t", "raises", "quiet", "quiet", "quiet"),
    ("mongodb://h/s3cr3t$db", "raises", "raises", "raises", "raises"),  # the bad database name
    ("mongodb://h/s3cr3t%20db", "raises", "raises", "raises", "raises"),
    ("mongodb://%2Ftmp%2Fs3cr3t/db", "raises", "raises", "raises", "raises"),  # a socket path without .sock
    ("mongodb://h:s3cr3t/", "raises", "raises", "raises", "raises"),  # port characters
    ("mongodb://alice:pa?s3cr3t@h/", "raises", "raises", "raises", "raises"),  # '?' in a password: "alice" is a host
    ("mongodb://h1,alice:s3cr3t/", "raises", "raises", "raises", "raises"),
    ("mongodb://h/?readPreference=secondary&maxStalenessSeconds=10&s3cr3t=1", "raises", "raises", "raises", "warns"),
    ("mongodb+srv://s3cr3t..example.com/", "raises", "raises", "raises", "raises"),
]


@pytest.mark.parametrize("uri, client, options, strict, lenient", CASES, ids=[case[0] for case in CASES])
def test_connection_string_text_is_never_quoted(uri: str, client: str, options: str, strict: str,
                                                lenient: str) -> None:
    paths = {
        "MongoClient": (_client(uri), client),
        "options.parse_uri": (lambda: options_parse_uri(uri), options),
        "uri_parser.parse_uri": (lambda: guri.parse_uri(uri), strict),
        "uri_parser.parse_uri(warn=True)": (lambda: guri.parse_uri(uri, warn=True), lenient),
    }
    for label, (call, expected) in paths.items():
        outcome, texts = _report(call)
        assert outcome == expected, (label, outcome, texts)
        assert _leaks(texts) == [], label


def test_unknown_and_malformed_options_are_given_by_position() -> None:
    outcome, texts = _report(_client("mongodb://h/?w=1&s3cr3t=x"))
    assert outcome == "warns" and "number 2" in texts[0]
    outcome, texts = _report(_client("mongodb://h/?w=1&&s3cr3t"))  # an empty segment is not counted
    assert outcome == "raises" and "option number 2 is malformed" in texts[0]
    outcome, texts = _report(_client("mongodb://h1,alice:s3cr3t/"))
    assert outcome == "raises" and "host number 2" in texts[0]


# -- what may be named --------------------------------------------------------------------------------------

def test_keyword_arguments_are_named_with_their_values() -> None:
    """The caller's own code: MongoClient(foo=1) names foo, a bad keyword value is shown."""
    with pytest.raises(ConfigurationError, match="Unknown option 's3cr3t'"):
        greenmongo.MongoClient(s3cr3t=1, connect=False)
    with pytest.raises(ConfigurationError, match="maxPoolSize must be a non-negative integer, not -1"):
        greenmongo.MongoClient(maxPoolSize=-1, connect=False)
    outcome, texts = _report(lambda: greenmongo.MongoClient(compressors="zlib,s3cr3t", connect=False).close())
    assert outcome == "warns" and any(SECRET in text for text in texts)
    # the facade: without from_uri (a dict of options, PyMongo's default) the key and value are named
    with pytest.raises(ConfigurationError, match="Unknown option: s3cr3t"):
        guri.validate_options({"s3cr3t": "1"})
    with pytest.raises(ValueError, match="s3cr3t is an invalid UUID representation"):
        gcommon.validate_uuid_representation("uuidRepresentation", "s3cr3t")


class _CannedDns:
    def __init__(self, txt: str) -> None:
        self.txt = txt

    def resolve_srv(self, name: str, timeout: Any = None) -> list:
        return [("a.example.com", 27017)]

    def resolve_txt(self, name: str, timeout: Any = None) -> list:
        return [self.txt]


def test_txt_record_options_are_named(monkeypatch: Any) -> None:
    """DNS text is not typed by a user: its keys and values may be quoted."""
    uri = "mongodb+srv://cluster.example.com/"
    with pytest.raises(ConfigurationError, match="s3cr3tkey"):
        ClientOptions(uri, srv_resolver=_CannedDns("s3cr3tkey=1"))
    with pytest.raises(ConfigurationError, match="'maybe' for 'loadBalanced'"):
        ClientOptions(uri, srv_resolver=_CannedDns("loadBalanced=maybe"))
    monkeypatch.setattr("greenmongo.net.dns.default_resolver", lambda: _CannedDns("s3cr3tkey=1"))
    with pytest.raises(ConfigurationError, match="s3cr3tkey"):
        guri.parse_uri(uri)
    # the same bad value in the connection string itself is not quoted
    outcome, texts = _report(lambda: ClientOptions(uri + "?loadBalanced=maybe", srv_resolver=_CannedDns("")))
    assert outcome == "raises" and "maybe" not in texts[0] and "loadBalanced" in texts[0]


# -- the same as PyMongo 4.20.1 ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pm() -> ModuleType:
    return _reference_pymongo()


#: The facade cases to run on PyMongo too (no SRV: PyMongo would query DNS; the credential cases only
#: MongoClient checks are left out). A bad port is ValueError there ("uri-port-error"): both raise.
_FACADE_CASES = [uri for uri, *_ in CASES if "authSource=s3cr3t" not in uri and "ENVIRONMENT" not in uri
                 and not uri.startswith("mongodb+srv")]


def test_parse_uri_quotes_what_pymongo_quotes(pm: ModuleType) -> None:
    """Side by side with PyMongo 4.20.1: the same outcome, and neither message quotes the URI's text - except
    an unknown auth mechanism property, which PyMongo still names and greenmongo does not (and PyMongo's
    unknown-option error has a KeyError naming the key as its context; greenmongo's chains nothing)."""
    DELIBERATE_DIFFERENCES["uri-no-echo"]
    differences = []
    for uri in _FACADE_CASES:
        for kwargs in ({}, {"warn": True}):
            theirs = _report(pm.uri_parser.parse_uri, uri, chained=False, **kwargs)
            mine = _report(guri.parse_uri, uri, **kwargs)
            if theirs[0] != mine[0]:
                differences.append(f"{uri} {kwargs}: pymongo {theirs[0]}, greenmongo {mine[0]}")
            assert _leaks(mine[1]) == [], uri
            if "authMechanismProperties=S3CR3T" in uri:
                assert _leaks(theirs[1]), "PyMongo stopped naming an unknown property: drop uri-no-echo"
            else:
                assert _leaks(theirs[1]) == [], uri
    assert differences == []


#: facade function -> calls whose message quotes the value without from_uri and must not with it.
_FROM_URI_CALLS: list[tuple[str, str, tuple]] = [
    ("common", "raise_config_error", (SECRET, ["tls"])),
    ("common", "validate_readable", ("tlsCAFile", f"/no/such/{SECRET}")),
    ("common", "validate_uuid_representation", ("uuidRepresentation", SECRET)),
    ("common", "validate_read_preference_tags", ("readPreferenceTags", f"dc:{SECRET}:x")),
    ("common", "validate_datetime_conversion", ("datetime_conversion", SECRET)),
    ("common", "validate_server_monitoring_mode", ("serverMonitoringMode", SECRET)),
    ("common", "get_validated_options", ({SECRET: "1"}, False)),
    ("common", "get_validated_options", ({"uuidRepresentation": SECRET}, False)),
    ("uri_parser", "validate_options", ({SECRET: "1"},)),
    ("uri_parser", "validate_options", ({"serverMonitoringMode": SECRET},)),
]


def _message(function: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[str, str]:
    """(exception class, its text); greenmongo's with the exceptions it chains, PyMongo's alone (its
    unknown-option error keeps the KeyError naming the key as its context)."""
    try:
        function(*args, **kwargs)
    except Exception as exc:
        return type(exc).__name__, _error_text(exc, chained=not function.__module__.startswith("pymongo"))
    return "returns", ""


@pytest.mark.parametrize("module, name, args", _FROM_URI_CALLS, ids=[f"{m}.{n}" for m, n, _ in _FROM_URI_CALLS])
def test_from_uri_hides_what_pymongo_hides(pm: ModuleType, module: str, name: str, args: tuple) -> None:
    mine, theirs = getattr(getattr(greenmongo, module), name), getattr(getattr(pm, module), name)
    for from_uri in (False, True):
        m_class, m_text = _message(mine, *args, from_uri=from_uri)
        t_class, t_text = _message(theirs, *args, from_uri=from_uri)
        assert m_class == t_class != "returns", (from_uri, m_text, t_text)
        assert (SECRET in m_text) == (SECRET in t_text) == (not from_uri), (from_uri, m_text, t_text)


def test_split_options_defaults_to_a_connection_strings_text(pm: ModuleType) -> None:
    """split_options' from_uri defaults to True (PyMongo 4.20.1); False names the key (a TXT record's)."""
    for module in (guri, pm.uri_parser):
        assert SECRET not in _message(module.split_options, f"{SECRET}=1")[1]
        assert SECRET in _message(module.split_options, f"{SECRET}=1", True, False, True, False)[1]
        outcome, texts = _report(module.split_options, f"w=1&{SECRET}=1&{SECRET}=2", warn=True)
        assert outcome == "warns" and _leaks(texts) == []
        outcome, texts = _report(module.split_options, "replicaSet=a&replicaSet=b")
        assert any("replicaset" in text for text in texts)  # a known option's duplicate is named


# -- reprs ---------------------------------------------------------------------------------------------------

def test_sensitive_options_are_redacted_in_reprs(pm: ModuleType) -> None:
    assert gcommon.SENSITIVE_OPTIONS_FOR_REPR == pm.common.SENSITIVE_OPTIONS_FOR_REPR == frozenset(
        {"proxyusername", "proxypassword", "tlscertificatekeyfilepassword"})
    secrets = {"proxyUsername": "pr0xyus3r", "proxyPassword": "pr0xypa55", "tlsCertificateKeyFilePassword": "k3ypa55"}
    uri = "mongodb://h/?proxyHost=p&tls=true&" + "&".join(f"{key}={value}" for key, value in secrets.items())
    for client in (greenmongo.MongoClient(uri, connect=False),
                   greenmongo.MongoClient("h", proxyHost="p", tls=True, connect=False, **secrets)):
        options = client.options
        text = " ".join(repr(item) for item in (client, options, options.options, options.connection_settings(),
                                                options.tls, options.proxy))
        assert [value for value in secrets.values() if value in text] == []
        assert options.options["proxyUsername"] == "pr0xyus3r"  # still there for the driver
        client.close()
    parsed = guri.parse_uri(uri.replace("proxyHost=p&", ""))
    assert parsed["options"]["tlsCertificateKeyFilePassword"] == "k3ypa55"
    assert "pr0xyus3r" not in repr(options_parse_uri(uri))
