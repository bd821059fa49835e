"""greenmongo against PyMongo 4.20's synchronous ``pymongo`` API: modules, names, members, signatures, behaviour.

``install_as_pymongo()`` serves greenmongo as ``pymongo``, so code written for PyMongo must find every
module and name it imports, call it with PyMongo's arguments and see PyMongo's behaviour. The real
``pymongo`` (installed with the bench/test extras) is imported here as the reference - greenmongo itself
never imports it; the API checks skip without it, the behaviour tests of greenmongo's own semantics do not.

What greenmongo lacks or does differently on purpose is listed in ``DELIBERATE_DIFFERENCES`` with the
reason, and a test shows each entry is still real (so the list cannot go stale). Here: the API surface,
the validators and uri_parser; run-time behaviour next to PyMongo (the client on SecantusDB, the
handshake, register(), the event loggers) is in tests/test_pymongo_public_behaviour.py.
"""

from __future__ import annotations

import __future__

import builtins
import importlib
import importlib.util
import inspect
import pathlib
import pkgutil
import sys
import types
import typing
import warnings
from types import ModuleType
from typing import Any, Iterator

import pytest

import greenmongo
from greenmongo import common as gcommon
from greenmongo import uri_parser as guri
from greenmongo.errors import ConfigurationError, InvalidName, InvalidURI
from tests.api_compare import class_methods, generic, incompatibilities, signature, signature_problems

#: What greenmongo does not have or does differently on purpose, and why. Each key is used by a test
#: below that shows the difference (or fails when it disappears).
DELIBERATE_DIFFERENCES: dict[str, str] = {
    "async-api": "only PyMongo's synchronous API: greenmongo's concurrency is gevent's (AsyncMongoClient and "
                 "pymongo.asynchronous do not exist)",
    "kms-connect-callback": "PyMongo 4.19's kms_connect_callback (KMSConnectContext, HTTPProxyKMSConnect, "
                            "AsyncHTTPProxyKMSConnect) is not built: KMS requests go over greenmongo's own TLS "
                            "sockets; passing kms_connect_callback raises ConfigurationError",
    "private-modules": "PyMongo's implementation modules (pymongo.message, pymongo.hello, the *_shared modules, "
                       "pymongo.synchronous, ...) are not its documented API; greenmongo's internals are its own "
                       "(MongoEngine's `from pymongo.database_shared import _check_name` falls back to "
                       "pymongo.database, which has it)",
    "wire-range": "MIN_SUPPORTED_WIRE_VERSION is 8 and MIN_SUPPORTED_SERVER_VERSION '4.2': greenmongo still "
                  "supports MongoDB 4.2 (PyMongo 4.20 starts at 4.4, wire version 9)",
    "own-version": "greenmongo.version/__version__/version_tuple/get_version_string() are greenmongo's own; "
                   "under install_as_pymongo() the pymongo module reports 4.20.1, the API it implements",
    "enum-types": "SERVER_TYPE and TOPOLOGY_TYPE are IntEnums with PyMongo's member names and values "
                  "(PyMongo: namedtuple instances), so SERVER_TYPE.RSPrimary == 2 and comparisons hold",
    "internal-constructors": "classes users receive but do not build (cursors, sessions, events, "
                             "ClientOptions, PoolOptions, ClientBulkWriteException) have greenmongo's own "
                             "constructor parameters",
    "pool-internals": "pymongo.pool.Pool and pymongo.pool.Connection are greenmongo's own CMAP pool and "
                      "socket-level connection; PyMongo's internal methods on them (checkin, connect, "
                      "pin_cursor, authenticate, ...) are not offered",
    "selection-callables": "TopologyDescription.apply_selector takes a read preference; PyMongo's internal "
                           "Selection callables (writable_server_selector, ...) are not offered",
    "uri-plus": "a '+' in the user name, password or an option value of a connection string is a plus sign, "
                "as the Connection String spec says; PyMongo decodes it as a space (unquote_plus)",
    "uri-port-error": "a malformed port inside parse_uri raises InvalidURI (a ConfigurationError); PyMongo "
                      "raises ValueError there (parse_host and split_hosts raise ValueError as PyMongo's)",
    "uri-greenmongo-options": "parse_uri accepts the options greenmongo's MongoClient supports and PyMongo's "
                              "validators do not know: proxyHost/proxyPort/proxyUsername/proxyPassword "
                              "(SOCKS5) and tlsDisableCertificateRevocationCheck",
    "srv-allowed-hosts": "PyMongo 4.20's srvAllowedHostsSuffix and srv_host_validator are not built: "
                         "parse_uri and MongoClient raise ConfigurationError naming them",
    "uri-no-echo": "an unknown authMechanismProperties key from a connection string is not named in the error "
                   "(PyMongo 4.20.1 still names it), and the unknown-option error is not chained to a KeyError "
                   "naming the key (PyMongo's is); otherwise neither quotes connection string text "
                   "(tests/test_uri_secrets.py)",
    "legacy-date-floats": "json_util.loads reads the legacy {$date: <int millis>} in every mode but "
                          "CANONICAL (the bson corpus's strict parse); PyMongo also reads floats and "
                          "booleans there and accepts it in CANONICAL mode",
}

#: Signature differences kept: every call PyMongo's signature accepts still binds here.
SIGNATURE_DIFFERENCES: dict[str, str] = {}

#: The modules of PyMongo's synchronous API (its documentation's module list, plus the undocumented
#: ones libraries import: common, typings, server_type, cursor_shared).
PUBLIC_MODULES = (
    "auth_oidc", "change_stream", "client_options", "client_session", "collation", "collection",
    "command_cursor", "common", "cursor", "cursor_shared", "database", "driver_info", "errors", "event_loggers",
    "encryption", "encryption_options",
    "mongo_client", "monitoring", "operations", "pool", "read_concern", "read_preferences", "results",
    "server_api", "server_description", "server_type", "topology_description", "typings", "uri_parser",
    "write_concern",
)
#: PyMongo modules greenmongo does not provide: module -> DELIBERATE_DIFFERENCES key.
MISSING_MODULES = {
    "asynchronous": "async-api",
}
#: Names PyMongo's modules have that greenmongo does not: "module.name" -> DELIBERATE_DIFFERENCES key.
MISSING_NAMES = {
    "pymongo.AsyncMongoClient": "async-api",
    "pymongo.encryption_options.KMSConnectContext": "kms-connect-callback",
    "pymongo.encryption_options.HTTPProxyKMSConnect": "kms-connect-callback",
    "pymongo.encryption_options.AsyncHTTPProxyKMSConnect": "kms-connect-callback",
}
#: Constants whose values differ: "module.name" -> DELIBERATE_DIFFERENCES key.
DIFFERENT_VALUES = {
    "pymongo.MIN_SUPPORTED_WIRE_VERSION": "wire-range",
    "pymongo.common.MIN_SUPPORTED_WIRE_VERSION": "wire-range",
    "pymongo.common.MIN_SUPPORTED_SERVER_VERSION": "wire-range",
    "pymongo.version": "own-version",
    "pymongo.__version__": "own-version",
    "pymongo.version_tuple": "own-version",
    "pymongo.server_type.SERVER_TYPE": "enum-types",
    "pymongo.topology_description.TOPOLOGY_TYPE": "enum-types",
}
#: Classes whose members are not compared one by one: class -> DELIBERATE_DIFFERENCES key.
MEMBERS_NOT_COMPARED = {
    "pymongo.pool.Connection": "pool-internals",
    "pymongo.pool.Pool": "pool-internals",
}


# =============================================================================
# The reference and the rule for what is public
# =============================================================================

def _reference_pymongo() -> ModuleType:
    real = pytest.importorskip("pymongo")
    if not hasattr(real, "synchronous"):
        pytest.skip("the importable pymongo is not PyMongo's (install_as_pymongo() active in this process?)")
    return real


@pytest.fixture(scope="module")
def pm() -> ModuleType:
    return _reference_pymongo()


def _homes(full_name: str) -> set[str]:
    """Where a name PyMongo's module defines may really live: the module itself, its
    ``pymongo.synchronous`` twin (the sync API's implementation) or its ``*_shared`` module."""
    return {full_name, full_name.replace("pymongo.", "pymongo.synchronous.", 1), full_name + "_shared"}


def _own_names(full_name: str, module: ModuleType) -> dict[str, Any]:
    """The names a PyMongo module contributes to its API: its ``__all__``, what it (or its twin or shared
    module) defines, and its UPPER_CASE constants; never TYPE_CHECKING, TypeVars or imported modules."""
    homes = _homes(full_name)
    names = set(getattr(module, "__all__", ()))
    for name, value in vars(module).items():
        if name.startswith("_") or isinstance(value, ModuleType):
            continue
        if isinstance(value, (type, types.FunctionType)) or callable(value):
            if getattr(value, "__module__", None) in homes:
                names.add(name)
        elif name.isupper() and (type(value).__module__ == "builtins" or type(value).__module__ in homes):
            names.add(name)  # a constant defined here (an object of another module's type is an import)
    found = {}
    for name in names:
        value = getattr(module, name)
        if name == "TYPE_CHECKING" or isinstance(value, (typing.TypeVar, __future__._Feature)):
            continue
        found[name] = value
    return found


def _pairs(pm: ModuleType) -> Iterator[tuple[str, ModuleType, ModuleType]]:
    yield "pymongo", pm, greenmongo
    for name in PUBLIC_MODULES:
        yield f"pymongo.{name}", importlib.import_module(f"pymongo.{name}"), importlib.import_module(
            f"greenmongo.{name}")


_SCALARS = (int, float, str, bytes, bool, type(None))


def _same_value(theirs: Any, mine: Any) -> bool:
    if type(theirs) in _SCALARS:
        return theirs == mine
    if isinstance(theirs, (frozenset, set)) or (isinstance(theirs, (tuple, list))
                                                  and all(type(item) in _SCALARS for item in theirs)):
        return type(theirs)(theirs) == type(theirs)(mine)
    if isinstance(theirs, dict):  # option tables: the same keys (the validators are compared by behaviour)
        return set(theirs) == set(mine)
    if isinstance(theirs, tuple):  # tuples of classes: by name
        return [getattr(item, "__name__", item) for item in theirs] == [getattr(i, "__name__", i) for i in mine]
    return True


# =============================================================================
# Modules and names
# =============================================================================

def test_every_pymongo_module_is_public_missing_on_purpose_or_private(pm: ModuleType) -> None:
    """A new PyMongo module fails this test until someone decides which list it belongs to."""
    modules = {info.name for info in pkgutil.iter_modules(pm.__path__) if not info.name.startswith("_")}
    unreviewed = modules - set(PUBLIC_MODULES) - set(MISSING_MODULES) - _PRIVATE_MODULES
    assert unreviewed == set()
    assert set(PUBLIC_MODULES) | set(MISSING_MODULES) <= modules | {"asynchronous"}


_PRIVATE_MODULES = frozenset({
    "auth", "auth_oidc_shared", "auth_shared", "bulk_shared", "change_stream_shared", "client_session_shared",
    "compression_support", "daemon", "database_shared", "encryption_shared", "hello", "helpers_shared", "lock",
    "logger", "max_staleness_selectors", "message", "mongo_client_shared", "network_layer", "ocsp_cache",
    "ocsp_support", "periodic_executor", "pool_options", "pool_shared", "pyopenssl_context", "response",
    "saslprep", "server_selectors", "settings_shared", "socket_checker", "ssl_context", "ssl_support",
    "synchronous", "topology_shared", "uri_parser_shared",
})


def test_every_public_module_imports(pm: ModuleType) -> None:
    missing = []
    for name in PUBLIC_MODULES:
        try:
            importlib.import_module(f"greenmongo.{name}")
        except ImportError:
            missing.append(name)
    assert missing == []


def test_missing_and_private_modules_are_really_absent() -> None:
    DELIBERATE_DIFFERENCES["async-api"]
    for name in MISSING_MODULES:
        with pytest.raises(ImportError):
            importlib.import_module(f"greenmongo.{name}")
    # greenmongo.auth is greenmongo's own package (its mechanisms), not PyMongo's pymongo.auth module.
    DELIBERATE_DIFFERENCES["private-modules"]
    present = sorted(name for name in _PRIVATE_MODULES if importlib.util.find_spec(f"greenmongo.{name}"))
    assert present == ["auth"]


def test_import_pymongo_exposes_the_same_submodules(pm: ModuleType) -> None:
    # ``import pymongo`` binds its public submodules, so ``pymongo.uri_parser.parse_uri`` works without
    # importing it first: the same names must be attributes of greenmongo after ``import greenmongo``.
    exposed = {name for name in PUBLIC_MODULES if isinstance(getattr(pm, name, None), ModuleType)}
    assert {"uri_parser", "common", "errors", "monitoring"} <= exposed
    assert sorted(name for name in exposed if not isinstance(getattr(greenmongo, name, None), ModuleType)) == []


def test_every_public_name_exists(pm: ModuleType) -> None:
    """Every name PyMongo's public modules define or re-export (see ``_own_names``), of the same kind."""
    missing, wrong_kind, wrong_value, checked = [], [], [], 0
    for label, pmod, gmod in _pairs(pm):
        for name, obj in sorted(_own_names(label, pmod).items()):
            checked += 1
            qualname = f"{label}.{name}"
            if not hasattr(gmod, name):
                if qualname not in MISSING_NAMES:
                    missing.append(qualname)
                continue
            mine = getattr(gmod, name)
            if qualname in DIFFERENT_VALUES:
                continue
            if inspect.isclass(obj) != inspect.isclass(mine) or callable(obj) != callable(mine):
                wrong_kind.append(qualname)
            elif not callable(obj) and not _same_value(obj, mine) and qualname not in DIFFERENT_VALUES:
                wrong_value.append(f"{qualname}: {obj!r} != {mine!r}")
    assert checked > 270  # the comparison really ran over PyMongo's API (280 names in 4.20.1)
    assert missing == []
    assert wrong_kind == []
    assert wrong_value == []


def test_listed_missing_names_and_values_are_still_real(pm: ModuleType) -> None:
    for qualname, key in list(MISSING_NAMES.items()) + list(DIFFERENT_VALUES.items()):
        assert key in DELIBERATE_DIFFERENCES
        module_name, _, name = qualname.rpartition(".")
        theirs = importlib.import_module(module_name)
        mine = importlib.import_module(module_name.replace("pymongo", "greenmongo", 1))
        assert hasattr(theirs, name)
        if qualname in MISSING_NAMES:
            assert not hasattr(mine, name), qualname
        else:
            assert getattr(mine, name) != getattr(theirs, name), qualname


def test_all_lists_match(pm: ModuleType) -> None:
    for label, pmod, gmod in _pairs(pm):
        if hasattr(pmod, "__all__"):
            extra = {name for name in pmod.__all__ if f"{label}.{name}" in MISSING_NAMES}
            assert set(pmod.__all__) - extra <= set(getattr(gmod, "__all__", dir(gmod))), label


def test_every_deliberate_difference_is_shown_by_a_test() -> None:
    # (tests/test_pymongo_public_behaviour.py shows the run-time ones, tests/test_uri_secrets.py uri-no-echo)
    here = pathlib.Path(__file__).parent
    source = inspect.getsource(sys.modules[__name__]) + "".join(
        (here / name).read_text() for name in ("test_pymongo_public_behaviour.py", "test_uri_secrets.py"))
    unused = [key for key in DELIBERATE_DIFFERENCES if source.count(f'DELIBERATE_DIFFERENCES["{key}"]') < 1]
    assert unused == []


# =============================================================================
# Class members
# =============================================================================

def _classes(pm: ModuleType) -> Iterator[tuple[str, type, Any]]:
    seen: set[int] = set()
    for label, pmod, gmod in _pairs(pm):
        for name, obj in sorted(_own_names(label, pmod).items()):
            if not inspect.isclass(obj) or id(obj) in seen or not hasattr(gmod, name):
                continue
            seen.add(id(obj))
            yield f"{label}.{name}", obj, getattr(gmod, name)


def _instance_for(qualname: str, mine: type) -> Any:
    """Some members are instance attributes (or live on the instance users get): compare on one."""
    if qualname == "pymongo.pool.PoolOptions":
        return greenmongo.MongoClient(connect=False).options.pool_options
    if qualname == "pymongo.errors.ClientBulkWriteException":
        return mine(None)
    return mine


def test_every_class_member_exists(pm: ModuleType) -> None:
    """Public methods, properties and class constants of PyMongo's classes (and their pymongo bases)."""
    missing, checked = [], 0
    for qualname, theirs, mine in _classes(pm):
        if qualname in MEMBERS_NOT_COMPARED:
            continue
        target = _instance_for(qualname, mine)
        for klass in theirs.__mro__:
            if not klass.__module__.startswith(("pymongo", "bson")):
                continue
            for attr in vars(klass):
                if attr.startswith("_"):
                    continue
                checked += 1
                if not hasattr(target, attr):
                    missing.append(f"{qualname}.{attr}")
    assert checked > 650  # 677 members in 4.20.1
    assert sorted(set(missing)) == []


def test_pool_and_connection_members_really_differ(pm: ModuleType) -> None:
    DELIBERATE_DIFFERENCES["pool-internals"]
    from greenmongo.pool import Connection, Pool

    pm_pool = importlib.import_module(f"{pm.__name__}.pool")  # a submodule: imported by no earlier test, maybe
    assert not hasattr(Connection, "pin_cursor") and hasattr(pm_pool.Connection, "pin_cursor")
    assert not hasattr(Pool, "checkin") and hasattr(pm_pool.Pool, "checkin")


# =============================================================================
# Signatures
# =============================================================================

#: Constructors of classes users receive rather than build (DELIBERATE_DIFFERENCES["internal-constructors"]).
_INTERNAL_CONSTRUCTORS = {
    "CommandCursor.__init__", "RawBatchCommandCursor.__init__", "RawBatchCursor.__init__", "ClientSession.__init__",
    "ClientOptions.__init__", "PoolOptions.__init__", "ClientBulkWriteException.__init__",
    "CommandSucceededEvent.__init__", "ServerDescriptionChangedEvent.__init__", "PoolCreatedEvent.__init__",
    "TopologyDescriptionChangedEvent.__init__", "ChangeStream.__init__", "CollectionChangeStream.__init__",
    "DatabaseChangeStream.__init__", "ClusterChangeStream.__init__", "Connection.__init__", "Pool.__init__",
}


def _callables(pm: ModuleType) -> Iterator[tuple[str, Any, Any]]:
    seen: set[int] = set()
    for label, pmod, gmod in _pairs(pm):
        for name, obj in sorted(_own_names(label, pmod).items()):
            mine = getattr(gmod, name, None)
            if mine is None or id(obj) in seen:
                continue
            seen.add(id(obj))
            if inspect.isclass(obj):
                if f"{label}.{name}" in MEMBERS_NOT_COMPARED:
                    continue
                yield from class_methods(name, obj, mine)
            elif callable(obj):
                yield f"{label.partition('.')[2] or 'pymongo'}.{name}", obj, mine


def test_signatures_accept_pymongo_calls(pm: ModuleType) -> None:
    """Every public callable binds PyMongo's positional and keyword calls the same way."""
    problems, compared = signature_problems(_callables(pm), SIGNATURE_DIFFERENCES.keys() | _INTERNAL_CONSTRUCTORS)
    assert compared > 250  # 273 callables in 4.20.1
    assert problems == {}


def test_internal_constructors_really_differ(pm: ModuleType) -> None:
    DELIBERATE_DIFFERENCES["internal-constructors"]
    found = {qualname: incompatibilities(signature(theirs), signature(mine))
             for qualname, theirs, mine in _callables(pm)
             if qualname in _INTERNAL_CONSTRUCTORS and mine is not None and signature(theirs) is not None
             and not generic(signature(theirs))}
    assert found and all(found.values()), {name: diff for name, diff in found.items() if not diff}


# =============================================================================
# Behaviour: greenmongo (top level), versions, enums
# =============================================================================

def test_top_level_names() -> None:
    assert greenmongo.get_version_string() == greenmongo.__version__ == greenmongo.version
    assert greenmongo.version_tuple[:3] == tuple(int(part) for part in greenmongo.__version__.split(".")[:3])
    assert greenmongo.has_c() is greenmongo.bson.has_c()
    assert greenmongo.MIN_SUPPORTED_WIRE_VERSION <= 9 <= greenmongo.MAX_SUPPORTED_WIRE_VERSION
    assert greenmongo.common.MAX_SUPPORTED_WIRE_VERSION == greenmongo.MAX_SUPPORTED_WIRE_VERSION


def test_version_and_wire_range_differences(pm: ModuleType) -> None:
    DELIBERATE_DIFFERENCES["own-version"]
    assert greenmongo.version != pm.version and pm.version_tuple == (4, 20, 1)
    DELIBERATE_DIFFERENCES["wire-range"]
    assert (greenmongo.MIN_SUPPORTED_WIRE_VERSION, pm.MIN_SUPPORTED_WIRE_VERSION) == (8, 9)
    assert gcommon.MIN_SUPPORTED_SERVER_VERSION == "4.2"


def test_server_and_topology_types_have_pymongo_members(pm: ModuleType) -> None:
    DELIBERATE_DIFFERENCES["enum-types"]
    from greenmongo.server_type import SERVER_TYPE
    from greenmongo.topology_description import TOPOLOGY_TYPE

    from pymongo.server_type import SERVER_TYPE as PM_SERVER_TYPE
    from pymongo.topology_description import TOPOLOGY_TYPE as PM_TOPOLOGY_TYPE

    assert {member.name: int(member) for member in SERVER_TYPE} == PM_SERVER_TYPE._asdict()
    assert {member.name: int(member) for member in TOPOLOGY_TYPE} == PM_TOPOLOGY_TYPE._asdict()
    assert SERVER_TYPE.RSPrimary == PM_SERVER_TYPE.RSPrimary and isinstance(SERVER_TYPE.RSPrimary, int)


def test_version_class_and_node_helpers_match(pm: ModuleType) -> None:
    for text in ("4.4.1", "7.0.0-rc1", "6.1.0-12-gabc", "4.2+", "5.0.0-pre-", "8.0.1.dev3", "3"):
        assert gcommon.Version.from_string(text) == pm.common.Version.from_string(text), text
        assert str(gcommon.Version.from_string(text)) == str(pm.common.Version.from_string(text))
    assert gcommon.Version.from_version_array([4, 4, 1, -100]) == pm.common.Version.from_version_array([4, 4, 1, -100])
    assert gcommon.Version(4, 4).at_least(4, 2) and not gcommon.Version(4, 4).at_least(5)
    for node in ("Host:27018", "h", "[::1]:5", "10.0.0.1:1"):
        assert gcommon.partition_node(node) == pm.common.partition_node(node)
        assert gcommon.clean_node(node) == pm.common.clean_node(node)


# =============================================================================
# Behaviour: common's validators against PyMongo's
# =============================================================================

def _outcome(function: Any, *args: Any) -> tuple:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            value = function(*args)
        except Exception as exc:  # the exception class is the contract
            return "raises", type(exc).__name__
    if args and value is args[-1] and not isinstance(value, (int, str, type(None))):
        return "returns", "<the argument itself>"
    return "returns", value


class _From:
    """A validator input that is a driver's own object: built from that driver's namespace."""

    def __init__(self, build: Any) -> None:
        self.build = build

    def __repr__(self) -> str:
        return "<driver object>"


#: validator -> inputs; an input may be a function of the driver's namespace (pymongo or greenmongo).
_VALIDATOR_INPUTS: dict[str, list] = {
    "validate_boolean": [True, False, "true", 1, None],
    "validate_boolean_or_string": [True, "true", "false", "True", 1, None],
    "validate_integer": [1, -1, "12", "x", 1.5, True, None],
    "validate_positive_integer": [1, 0, -1, "3", "0", "x", 2.5],
    "validate_non_negative_integer": [0, 1, -1, "0", "-1", "x"],
    "validate_non_negative_integer_or_none": [None, 0, -1, "2"],
    "validate_string": ["s", "", 1, None, b"x"],
    "validate_string_or_none": [None, "s", 1],
    "validate_non_negative_int_or_basestring": [0, 5, "5", "-1", "majority", 1.5, None],
    "validate_positive_float": [1, 0.5, "2.5", 0, -1, "x", None, 1e9, [1]],
    "validate_positive_float_or_zero": [0, "0", 1.5, -1, "x"],
    "validate_timeout_or_none": [None, 1000, "1500", 0, -5, "x"],
    "validate_timeout_or_zero": [0, "0", 1000, None, -1],
    "validate_timeout_or_none_or_zero": [None, 0, "0", 2000, -1],
    "validate_timeoutms": [None, 0, 1500, -1],
    "validate_max_staleness": [-1, "-1", 90, "120", 0, -2, "x"],
    "validate_read_preference_mode": ["primary", "nearest", "secondaryPreferred", "Primary", 0],
    "validate_auth_mechanism": ["SCRAM-SHA-256", "PLAIN", "MONGODB-CR", "scram-sha-1"],
    "validate_uuid_representation": ["standard", "pythonLegacy", "unspecified", "bogus", 4],
    "validate_read_preference_tags": ["dc:ny,rack:1", "", ["dc:ny", ""], "bad", ["a:b:c"]],
    "validate_auth_mechanism_properties": ["SERVICE_NAME:x", "SERVICE_NAME:x,CANONICALIZE_HOST_NAME:true",
                                           "BOGUS:x", "SERVICE_NAME", {"SERVICE_NAME": "x", "FLAG": True}, 5,
                                           "CANONICALIZE_HOST_NAME:maybe", {"ALLOWED_HOSTS": ["a"]}],
    "validate_document_class": [dict, _From(lambda ns: ns.SON), _From(lambda ns: ns.RawBSONDocument), list,
                                dict[str, int]],
    "validate_type_registry": [None, _From(lambda ns: ns.TypeRegistry()), "x"],
    "validate_list": [[], [1], (1,), None],
    "validate_list_or_none": [None, [], "x"],
    "validate_list_or_mapping": [[], {}, "x", 1],
    "validate_is_mapping": [{}, _From(lambda ns: ns.SON()), [], "x"],
    "validate_is_document_type": [{}, _From(lambda ns: ns.SON()), _From(lambda ns: ns.RawBSONDocument(ns.encode({}))),
                                  [], 1],
    "validate_appname_or_none": [None, "app", "é" * 64, "é" * 65, 1],
    "validate_driver_or_none": [None, _From(lambda ns: ns.DriverInfo("x")), ("x", None, None)],
    "validate_server_api_or_none": [None, _From(lambda ns: ns.ServerApi("1")), "1"],
    "validate_is_callable_or_none": [None, len, 1],
    "validate_unicode_decode_error_handler": ["strict", "replace", "ignore", "backslashreplace", "bogus"],
    "validate_tzinfo": [None, _From(lambda ns: ns.utc), "UTC"],
    "validate_datetime_conversion": [None, "DATETIME_AUTO", "2", 3, "bogus", 1.5],
    "validate_server_monitoring_mode": ["auto", "stream", "poll", "other"],
    "validate_read_preference": [_From(lambda ns: ns.ReadPreference.SECONDARY), "secondary", 1],
    "validate_readable": [None, 1, "/nonexistent/file"],
}


class _Namespace:
    """The objects a validator input may need, from one driver."""

    def __init__(self, package: str) -> None:
        bson = importlib.import_module("bson" if package == "pymongo" else "greenmongo.bson")
        self.SON = bson.SON
        self.RawBSONDocument = importlib.import_module(bson.__name__ + ".raw_bson").RawBSONDocument
        self.TypeRegistry = bson.codec_options.TypeRegistry
        self.encode = bson.encode
        self.utc = importlib.import_module(bson.__name__ + ".tz_util").utc
        self.DriverInfo = importlib.import_module(f"{package}.driver_info").DriverInfo
        self.ServerApi = importlib.import_module(f"{package}.server_api").ServerApi
        self.ReadPreference = importlib.import_module(f"{package}.read_preferences").ReadPreference


def _comparable(outcome: tuple) -> tuple:
    kind, value = outcome
    if kind == "raises":
        return outcome
    if isinstance(value, type):
        return kind, value.__name__
    if hasattr(value, "document") and hasattr(value, "mode"):  # a read preference
        return kind, value.document
    if type(value).__module__.startswith(("pymongo", "bson", "greenmongo")) and not isinstance(value, (int, str)):
        return kind, type(value).__name__
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return kind, value
    return kind, value


def test_validators_accept_and_reject_as_pymongo(pm: ModuleType, tmp_path: Any) -> None:
    readable = tmp_path / "ca.pem"
    readable.write_text("x")
    _VALIDATOR_INPUTS["validate_readable"].append(str(readable))
    theirs_ns, mine_ns = _Namespace("pymongo"), _Namespace("greenmongo")
    differences, compared = [], 0
    for name, inputs in _VALIDATOR_INPUTS.items():
        theirs, mine = getattr(pm.common, name), getattr(gcommon, name)
        for value in inputs:
            t_value = value.build(theirs_ns) if isinstance(value, _From) else value
            m_value = value.build(mine_ns) if isinstance(value, _From) else value
            compared += 1
            t_out, m_out = _comparable(_outcome(theirs, "opt", t_value)), _comparable(_outcome(mine, "opt", m_value))
            if t_out != m_out:
                differences.append(f"{name}({value!r}): pymongo {t_out} greenmongo {m_out}")
    assert compared > 180  # 185 calls
    assert differences == []


def test_validator_tables_validate_like_pymongos(pm: ModuleType) -> None:
    assert set(gcommon.VALIDATORS) == set(pm.common.VALIDATORS)
    for key, value in (("w", "majority"), ("w", "2"), ("connectTimeoutMS", "1500"), ("readPreference", "nearest"),
                       ("uuidRepresentation", "standard"), ("maxPoolSize", "0"), ("tls", "false"),
                       ("zlibCompressionLevel", "10"), ("compressors", "zlib,bogus")):
        assert _outcome(gcommon.validate, key, value) == _outcome(pm.common.validate, key, value), key
    with pytest.raises(ConfigurationError, match="Unknown option: bogus"):
        gcommon.validate("bogus", 1)
    options = {"connectTimeoutMS": "100", "bogus": "1", "maxPoolSize": "-3"}
    with pytest.raises(ConfigurationError):
        gcommon.get_validated_options(options, warn=False)
    with pytest.warns(UserWarning):
        assert dict(gcommon.get_validated_options(options, warn=True)) == {"connectTimeoutMS": 0.1}
    assert gcommon._UUID_REPRESENTATIONS == pm.common._UUID_REPRESENTATIONS
    assert gcommon.redact_auth_mechanism_properties_for_repr({"SERVICE_NAME": "s", "AWS_SESSION_TOKEN": "t"}) == \
        pm.common.redact_auth_mechanism_properties_for_repr({"SERVICE_NAME": "s", "AWS_SESSION_TOKEN": "t"})


def test_validate_ok_for_update_and_replace(pm: ModuleType) -> None:
    for function in ("validate_ok_for_update", "validate_ok_for_replace"):
        for value in ({"$set": {"a": 1}}, {"a": 1}, {}, [], [{"$set": {"a": 1}}], "x", {"$inc": 1}):
            theirs = _outcome(getattr(pm.common, function), value)
            mine = _outcome(getattr(gcommon, function), value)
            assert theirs == mine, (function, value)


def test_auto_encryption_opts_are_validated_as_pymongo(pm: ModuleType) -> None:
    # Never accepted and ignored: anything but an AutoEncryptionOpts (or None) is a TypeError, as PyMongo's.
    with pytest.raises(ConfigurationError, match="auto_encryption_opts"):
        greenmongo.MongoClient(auto_encryption_opts=object(), connect=False)
    greenmongo.MongoClient(auto_encryption_opts=None, connect=False).close()
    assert gcommon.validate_auto_encryption_opts_or_none("opts", None) is None
    for validator in (gcommon.validate_auto_encryption_opts_or_none, pm.common.validate_auto_encryption_opts_or_none):
        with pytest.raises(TypeError):
            validator("opts", object())


def test_kms_connect_callback_is_refused(pm: ModuleType) -> None:
    pytest.importorskip("pymongocrypt")
    from greenmongo.encryption_options import AutoEncryptionOpts

    DELIBERATE_DIFFERENCES["kms-connect-callback"]
    with pytest.raises(ConfigurationError, match="kms_connect_callback"):
        AutoEncryptionOpts({"local": {"key": b"k" * 96}}, "keyvault.datakeys", kms_connect_callback=lambda ctx: None)


def test_collation_and_moving_average_helpers(pm: ModuleType) -> None:
    from greenmongo.collation import Collation, validate_collation_or_none
    from greenmongo.read_preferences import MovingAverage

    assert validate_collation_or_none(Collation("fr")) == pm.collation.validate_collation_or_none(
        pm.collation.Collation("fr"))
    for value in (None, {"locale": "en"}, "en"):
        assert _outcome(validate_collation_or_none, value) == _outcome(pm.collation.validate_collation_or_none,
                                                                         value)
    mine, theirs = MovingAverage(), pm.read_preferences.MovingAverage()
    for sample in (1.0, 2.0, 0.5):
        mine.add_sample(sample)
        theirs.add_sample(sample)
    assert mine.get() == pytest.approx(theirs.get())
    with pytest.raises(ValueError):
        mine.add_sample(-1)
    mine.reset()
    assert mine.get() is None


def test_check_name_matches_pymongo(pm: ModuleType) -> None:
    from greenmongo.database import _check_name

    from pymongo.database_shared import _check_name as pm_check_name

    for name in ("db", "", "a b", "a.b", "$external", "a\x00b", 'a"b', "a/b", "a\\b"):
        assert _outcome(_check_name, name) == _outcome(pm_check_name, name), name
    with pytest.raises(InvalidName):
        _check_name("a$b")


def test_async_api_is_absent_and_timeout_present(pm: ModuleType) -> None:
    DELIBERATE_DIFFERENCES["async-api"]
    assert hasattr(pm, "AsyncMongoClient") and not hasattr(greenmongo, "AsyncMongoClient")
    # greenmongo.timeout has pymongo.timeout's call shape: one positional seconds argument, a context manager.
    assert list(inspect.signature(pm.timeout).parameters) == list(inspect.signature(greenmongo.timeout).parameters)
    with greenmongo.timeout(1.5), greenmongo.timeout(None):
        pass


# =============================================================================
# Behaviour: uri_parser against PyMongo's
# =============================================================================

_URIS = [
    "mongodb://localhost", "mongodb://localhost/", "mongodb://localhost:27018/db", "mongodb://h?replicaSet=rs",
    "mongodb://user:pw@h1,h2:27018/db.coll?replicaSet=rs&ssl=true&readPreferenceTags=a:b&readPreferenceTags="
    "&w=majority&wtimeoutMS=5&journal=true&authMechanismProperties=SERVICE_NAME:x&uuidRepresentation=standard"
    "&connectTimeoutMS=100&maxStalenessSeconds=120&readpreference=secondary",
    "mongodb://h/?replicaSet=rs&foo=1", "mongodb://:pw@h/", "mongodb://@h/", "mongodb://u@h/", "mongodb://u:@h/",
    "mongodb://u%40x:p%3Aw@h/", "mongodb://u:p%2Bw@h/", "mongodb://u:p@w@h/", "mongodb://h/?j=true",
    "mongodb://h/?wtimeout=5", "mongodb://h/?tls=true&ssl=false", "mongodb://h/?tls=true&ssl=true",
    "mongodb://h/?authSource=", "mongodb://h/?authSource=admin",
    "mongodb://h/?authMechanism=SCRAM-SHA-1&authmechanismproperties=A:b",
    "mongodb://h/?authMechanism=GSSAPI&authMechanismProperties=SERVICE_NAME:other,CANONICALIZE_HOST_NAME:true",
    "mongodb://h/?connectTimeoutMS=abc", "mongodb://h/?connectTimeoutMS=0",
    "mongodb://h/?socketTimeoutMS=0&serverSelectionTimeoutMS=0", "mongodb://h/?ssl=true",
    "mongodb://h/?tlsInsecure=true", "mongodb://h/?tlsInsecure=true&tlsAllowInvalidCertificates=true",
    "mongodb://h/?tlsAllowInvalidCertificates=true",
    "mongodb://h/?tlsAllowInvalidCertificates=true&tlsDisableOCSPEndpointCheck=true",
    "mongodb://[::1]:27017,h/?", "mongodb://[::1]/", "mongodb://%2Ftmp%2Fm.sock/db", "http://h/",
    "mongodb+srv://h1,h2/", "mongodb+srv://h:27017/", "mongodb://h/?readPreference=nearest&maxStalenessSeconds=-1",
    "mongodb://h/?readPreference=bogus", "mongodb://h/?compressors=zlib,foo", "mongodb://h/?zlibCompressionLevel=4",
    "mongodb://h/?w=2&wTimeoutMS=100", "mongodb://h/?w=-1", "mongodb://h/?w=tag",
    "mongodb://h/?directConnection=true&loadBalanced=true", "mongodb://h1,h2/?directConnection=true",
    "mongodb://h1,h2/?loadBalanced=true", "mongodb://h/?loadBalanced=true&replicaSet=rs",
    "mongodb://h/?tz_aware=true&connect=false&appname=x&uuidrepresentation=pythonLegacy",
    "mongodb://h/?uuidRepresentation=bogus", "mongodb://h/?datetime_conversion=DATETIME_AUTO",
    "mongodb://h/?unicode_decode_error_handler=replace",
    "mongodb://h/?maxPoolSize=0&minPoolSize=5&maxIdleTimeMS=100&waitQueueTimeoutMS=30&maxConnecting=3",
    "mongodb://h/?maxConnecting=0", "mongodb://h/?heartbeatFrequencyMS=600&localThresholdMS=30",
    "mongodb://h/?retryWrites=false&retryReads=true&serverMonitoringMode=poll", "mongodb://h/?serverMonitoringMode=x",
    "mongodb://h/?timeoutMS=0", "mongodb://h/?timeoutMS=1500", "mongodb://h/?readConcernLevel=majority",
    "mongodb://h/?srvServiceName=x", "mongodb://h/?srvMaxHosts=2", "mongodb://h/db?a=1;b=2",
    "mongodb://h/db?a=1&b=2;c", "mongodb://h/?replicaSet=rs&replicaSet=rs2", "mongodb://h/my%20db",
    "mongodb://h/my$db", "mongodb://h/db.a.b", "mongodb://h/?appname=" + "x" * 129, "mongodb://h/?retryWrites=1",
    "mongodb://h/?authMechanism=PLAIN", "mongodb://h/?authMechanism=MONGODB-CR", "mongodb://h/?authmechanism=plain",
    "mongodb://h/?tlsCAFile=/nonexistent", "mongodb://h/?fsync=true",
    "mongodb://h/?maxAdaptiveRetries=3&enableOverloadRetargeting=true", "mongodb://h/?waitQueueMultiple=2",
    "mongodb://h/?readPreferenceTags=dc:ny,rack:1&readPreferenceTags=dc:sf&readPreference=secondary",
    "mongodb://h/?authMechanismProperties=AWS_SESSION_TOKEN:abc&authMechanism=MONGODB-AWS",
    "mongodb://h/?authMechanism=MONGODB-OIDC&authMechanismProperties=ENVIRONMENT:azure,TOKEN_RESOURCE:x",
    "mongodb://h/?srvAllowedHostsSuffix=a.com", "mongodb:///tmp/mongodb-27017.sock", "mongodb://h,,h2/",
]
_PARSE_URI_ARGUMENTS = [{}, {"warn": True}, {"validate": False}, {"normalize": False}]


def _parse(module: Any, uri: str, **kwargs: Any) -> tuple:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = module.parse_uri(uri, **kwargs)
        except Exception as exc:
            return "raises", type(exc).__name__
    assert type(result) is dict and type(result["options"]) is dict
    return "returns", result, bool(caught)


def _same_error(theirs: str, mine: str) -> bool:
    """The same class, or a subclass of it (InvalidURI is a ConfigurationError: ``except`` clauses agree)."""
    expected = getattr(greenmongo.errors, theirs, None) or getattr(builtins, theirs)
    return theirs == mine or issubclass(getattr(greenmongo.errors, mine, Exception), expected)


@pytest.mark.parametrize("arguments", _PARSE_URI_ARGUMENTS, ids=lambda arguments: ",".join(arguments) or "default")
def test_parse_uri_matches_pymongo(pm: ModuleType, arguments: dict) -> None:
    """Same dict (keys, value types and units, option key spelling), same warnings, same error class (or a
    subclass of it)."""
    differences = []
    for uri in _URIS:
        theirs, mine = _parse(pm.uri_parser, uri, **arguments), _parse(guri, uri, **arguments)
        if theirs == mine or (theirs[0] == mine[0] == "raises" and _same_error(theirs[1], mine[1])):
            continue
        differences.append(f"{uri}: pymongo {theirs} greenmongo {mine}")
    assert differences == []


def test_parse_uri_result_shape() -> None:
    result = guri.parse_uri("mongodb://u:p@H1,h2:27018/db.coll?replicaSet=rs&connectTimeoutMS=1500"
                            "&uuidRepresentation=standard&tls=true")
    assert result == {"nodelist": [("h1", 27017), ("h2", 27018)], "username": "u", "password": "p",
                      "database": "db", "collection": "coll", "fqdn": None,
                      "options": {"replicaSet": "rs", "connectTimeoutMS": 1.5, "uuidrepresentation": 4, "tls": True}}
    # MongoEngine: reads options case-sensitively (PyMongo 4.14+) and the database from the result.
    assert result["options"]["replicaSet"] == "rs"
    with pytest.raises(InvalidURI, match="empty string is not valid username"):
        guri.parse_uri("mongodb://:secret@h/")
    with pytest.raises(ConfigurationError, match=r"Unknown option\.") as raised:  # a URI's key is not named
        guri.parse_uri("mongodb://h/?foo=1")
    assert "foo" not in str(raised.value)
    with pytest.raises(ConfigurationError, match="Unknown option: foo"):
        guri.validate_options({"foo": "1"})


def test_uri_helpers_match_pymongo(pm: ModuleType) -> None:
    calls = [
        ("split_hosts", "h1,h2:5"), ("split_hosts", "h1,,h2"), ("split_hosts", "[::1]:5,%2Ftmp%2Fa.sock"),
        ("split_hosts", "h:x"), ("parse_host", "h"), ("parse_host", "H:1"), ("parse_host", "[::1]:1"),
        ("parse_host", "a:b:c"), ("parse_host", "/tmp/x.sock"), ("parse_host", "h:0"), ("parse_userinfo", "u:p"),
        ("parse_userinfo", "u"), ("parse_userinfo", ":p"), ("parse_userinfo", "u:p:q"), ("parse_userinfo", "u%4"),
        ("parse_userinfo", "u%40x:p"), ("parse_ipv6_literal_host", "[::1]", 5),
        ("parse_ipv6_literal_host", "[::1]:7", 5), ("parse_ipv6_literal_host", "::1", 5),
        ("split_options", "a=1"), ("split_options", "replicaSet=rs&w=2"), ("split_options", "replicaSet=rs;w=2"),
        ("split_options", "replicaSet=rs&w=2;j=1"), ("split_options", ""), ("split_options", "x"),
        ("split_options", "ssl=true"), ("split_options", "connectTimeoutMS=5", False),
        ("split_options", "ssl=true", True, False, False), ("validate_options", {"connectTimeoutMS": "5", "w": "2"}),
        ("validate_options", {"foo": "5"}), ("validate_options", {"foo": "5"}, True),
    ]
    for name, *args in calls:
        theirs = _outcome(getattr(pm.uri_parser, name), *args)
        mine = _outcome(getattr(guri, name), *args)
        if theirs[0] == mine[0] == "returns" and hasattr(theirs[1], "items"):
            theirs, mine = ("returns", list(theirs[1].items())), ("returns", list(mine[1].items()))
        assert theirs == mine, (name, args)
    for constant in ("SCHEME", "SRV_SCHEME", "DEFAULT_PORT", "SCHEME_LEN", "SRV_SCHEME_LEN", "URI_OPTIONS"):
        assert getattr(guri, constant) == getattr(pm.uri_parser, constant)


def test_uri_plus_sign_is_literal(pm: ModuleType) -> None:
    DELIBERATE_DIFFERENCES["uri-plus"]
    uri = "mongodb://a+b:c+d@h/?appname=x+y"
    mine, theirs = guri.parse_uri(uri), pm.uri_parser.parse_uri(uri)
    assert (mine["username"], mine["password"], mine["options"]["appname"]) == ("a+b", "c+d", "x+y")
    assert (theirs["username"], theirs["password"], theirs["options"]["appname"]) == ("a b", "c d", "x y")


def test_uri_port_errors(pm: ModuleType) -> None:
    DELIBERATE_DIFFERENCES["uri-port-error"]
    for uri in ("mongodb://h:0/", "mongodb://h:abc/", "mongodb://h:70000/"):
        assert _parse(pm.uri_parser, uri) == ("raises", "ValueError")
        assert _parse(guri, uri) == ("raises", "InvalidURI")
    with pytest.raises(ValueError):
        guri.parse_host("h:70000")


def test_uri_options_pymongo_does_not_know(pm: ModuleType) -> None:
    DELIBERATE_DIFFERENCES["uri-greenmongo-options"]
    uri = "mongodb://h/?proxyHost=p&proxyPort=1080&tlsDisableCertificateRevocationCheck=true"
    assert guri.parse_uri(uri)["options"] == {"proxyHost": "p", "proxyPort": 1080,
                                              "tlsDisableCertificateRevocationCheck": True}
    assert _parse(pm.uri_parser, uri) == ("raises", "ConfigurationError")
    with pytest.raises(ValueError):
        guri.parse_uri("mongodb://h/?proxyHost=p&proxyPort=70000")


def test_srv_allowed_hosts_is_refused() -> None:
    DELIBERATE_DIFFERENCES["srv-allowed-hosts"]
    with pytest.raises(ConfigurationError, match="srvAllowedHostsSuffix"):
        guri.parse_uri("mongodb+srv://cluster.example.com/", srv_allowed_hosts_suffix="example.com")
    with pytest.raises(ConfigurationError, match="srv_host_validator"):
        guri.parse_uri("mongodb+srv://cluster.example.com/", srv_host_validator=lambda host: True)
    with pytest.raises(ConfigurationError, match="srvAllowedHostsSuffix"):
        guri.parse_uri("mongodb+srv://cluster.example.com/?srvAllowedHostsSuffix=example.com")
    with pytest.raises(ConfigurationError, match="srvAllowedHostsSuffix"):
        greenmongo.MongoClient("mongodb://h/?srvAllowedHostsSuffix=example.com", connect=False)
    with pytest.raises(ConfigurationError, match="srv_host_validator"):
        greenmongo.MongoClient(srv_host_validator=lambda host: True, connect=False)


class _CannedDns:
    def __init__(self, srv: dict, txt: dict) -> None:
        self.srv, self.txt, self.timeouts = srv, txt, []

    def resolve_srv(self, name: str, timeout: Any = None) -> list:
        self.timeouts.append(timeout)
        return self.srv[name]

    def resolve_txt(self, name: str, timeout: Any = None) -> list:
        return self.txt.get(name, [])


def test_parse_uri_srv(monkeypatch: Any) -> None:
    """SRV and TXT as PyMongo's parse_uri returns them: the resolved nodelist, the TXT options under
    the URI's, tls on by default, srvMaxHosts picking hosts; the fqdn kept."""
    dns = _CannedDns({"_mongodb._tcp.cluster.example.com": [("a.example.com", 27017), ("b.example.com", 27018)],
                      "_custom._tcp.cluster.example.com": [("c.example.com", 1)]},
                     {"cluster.example.com": ["replicaSet=rs&authSource=admin"]})
    monkeypatch.setattr("greenmongo.net.dns.default_resolver", lambda: dns)
    result = guri.parse_uri("mongodb+srv://u:p@Cluster.example.com/db?authSource=other&connectTimeoutMS=2500")
    assert result == {"nodelist": [("a.example.com", 27017), ("b.example.com", 27018)], "username": "u",
                      "password": "p", "database": "db", "collection": None, "fqdn": "cluster.example.com",
                      "options": {"authSource": "other", "connectTimeoutMS": 2.5, "replicaSet": "rs", "tls": True}}
    assert dns.timeouts[-1] == 2.5
    assert guri.parse_uri("mongodb+srv://cluster.example.com/?tls=false")["options"]["tls"] is False
    assert guri.parse_uri("mongodb+srv://cluster.example.com/", validate=False)["options"]["tls"] == "true"
    assert guri.parse_uri("mongodb+srv://cluster.example.com/?srvServiceName=custom")["nodelist"] == [
        ("c.example.com", 1)]
    dns.txt = {}
    assert len(guri.parse_uri("mongodb+srv://cluster.example.com/", srv_max_hosts=1)["nodelist"]) == 1
    with pytest.raises(ConfigurationError):
        guri.parse_uri("mongodb+srv://cluster.example.com/?directConnection=true")
    with pytest.raises(InvalidURI):
        guri.parse_uri("mongodb+srv://cluster.example.com/?srvMaxHosts=1&replicaSet=rs")
