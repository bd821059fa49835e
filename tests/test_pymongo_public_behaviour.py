"""PyMongo 4.20 behaviour at run time, next to PyMongo: DriverInfo and append_metadata on the wire,
MongoClient's deployment properties and the TopologyDescription helpers on SecantusDB, pool_options,
generics, monitoring.register() and the event loggers' records.

The API surface (modules, names, members, signatures), the validators and uri_parser are compared in
tests/test_pymongo_public_api.py, which also holds ``DELIBERATE_DIFFERENCES``; the entries shown here
are counted there too.
"""

from __future__ import annotations

import logging
import typing
from types import ModuleType
from typing import Any, Iterator

import pytest

import greenmongo
from greenmongo.errors import ConfigurationError
from tests.test_pymongo_public_api import DELIBERATE_DIFFERENCES, _outcome, _reference_pymongo


@pytest.fixture(scope="module")
def pm() -> ModuleType:
    return _reference_pymongo()


# =============================================================================
# Behaviour: DriverInfo, the handshake metadata, append_metadata
# =============================================================================

def test_driver_info_validation_matches_pymongo(pm: ModuleType) -> None:
    from greenmongo.driver_info import DriverInfo

    for args in (("x",), ("x", "1", "p"), (1,), ("x|y",), ("x", 2), ("x", None, "a|b"), ("", "")):
        theirs, mine = _outcome(pm.driver_info.DriverInfo, *args), _outcome(DriverInfo, *args)
        if theirs[0] == "returns":
            assert mine[0] == "returns" and tuple(mine[1]) == tuple(theirs[1]) and repr(mine[1]) == repr(theirs[1])
        else:
            assert theirs == mine, args
    info = DriverInfo("odm", "1.0")
    assert info == ("odm", "1.0", None) and info.name == "odm" and info._replace(version="2").version == "2"
    with pytest.raises(ConfigurationError):
        greenmongo.MongoClient(driver=("odm", "1.0", None), connect=False)


def _client_documents(server: Any) -> list:
    return [request.command["client"] for request in server.commands() if "client" in request.command]


def test_driver_info_and_append_metadata_reach_the_handshake() -> None:
    import gevent
    from gevent.event import Event

    from greenmongo.driver_info import DriverInfo
    from tests.servers.scripted import ScriptedServer

    with ScriptedServer() as server:
        client = greenmongo.MongoClient(server.uri, driver=DriverInfo("odm", "1.0", "odm platform"),
                                        serverSelectionTimeoutMS=5000)
        try:
            client.admin.command("ping")
            documents = _client_documents(server)
            assert documents and all(doc["driver"]["name"] == "greenmongo|odm" for doc in documents)
            assert all(doc["driver"]["version"].endswith("|1.0") and doc["platform"].endswith("|odm platform")
                       for doc in documents)
            before = len(documents)

            client.append_metadata(DriverInfo("framework", "2.0", "Framework Platform"))
            client.append_metadata(DriverInfo("framework", "2.0", "Framework Platform"))  # twice: no change
            assert client.options.pool_options.metadata["driver"]["name"] == "greenmongo|odm|framework"
            # Two pings at once: the pooled connection is busy with the first, so the second opens a new
            # one, whose handshake carries the appended info.
            release, arrived = Event(), []

            def hold(request: Any) -> dict:
                arrived.append(request)
                if len(arrived) == 2:
                    release.set()
                release.wait(5)
                return {"ok": 1.0}

            server.on("ping", hold)
            pings = [gevent.spawn(client.admin.command, "ping") for _ in range(2)]
            gevent.joinall(pings, raise_error=True, timeout=10)
            new = _client_documents(server)[before:]
            assert [doc["driver"] for doc in new] == [{"name": "greenmongo|odm|framework",
                                                      "version": f"{greenmongo.__version__}|1.0|2.0"}]
            assert new[0]["platform"].endswith("|odm platform|Framework Platform")
            with pytest.raises(TypeError):
                client.append_metadata(("framework", "2.0", None))
        finally:
            client.close()


# =============================================================================
# Behaviour: MongoClient's deployment properties, next to PyMongo on the same server
# =============================================================================

@pytest.fixture(scope="module")
def both_clients(pm: ModuleType, server_uri: str) -> Iterator[tuple[Any, Any]]:
    mine = greenmongo.MongoClient(server_uri, serverSelectionTimeoutMS=10000)
    theirs = pm.MongoClient(server_uri, serverSelectionTimeoutMS=10000)
    try:
        yield mine, theirs
    finally:
        mine.close()
        theirs.close()


def test_deployment_properties_match_pymongo(both_clients: tuple) -> None:
    mine, theirs = both_clients
    assert mine.is_primary is theirs.is_primary is True  # SecantusDB: a one-member replica set's primary
    assert mine.is_mongos is theirs.is_mongos is False
    mine.admin.command("ping")
    theirs.admin.command("ping")
    assert mine.primary == theirs.primary is not None
    assert mine.secondaries == theirs.secondaries and isinstance(mine.secondaries, set)
    assert mine.arbiters == theirs.arbiters == set()
    assert mine.nodes == theirs.nodes and mine.address == theirs.address


def test_topology_description_helpers_match_pymongo(pm: ModuleType, both_clients: tuple) -> None:
    from greenmongo import ReadPreference

    mine, theirs = both_clients
    mine.admin.command("ping")
    theirs.admin.command("ping")
    m_desc, t_desc = mine.topology_description, theirs.topology_description
    assert m_desc.has_writable_server() is t_desc.has_writable_server() is True
    assert m_desc.has_readable_server() is t_desc.has_readable_server() is True
    for name in ("PRIMARY", "PRIMARY_PREFERRED", "SECONDARY", "SECONDARY_PREFERRED", "NEAREST"):
        assert m_desc.has_readable_server(getattr(ReadPreference, name)) is \
            t_desc.has_readable_server(getattr(pm.ReadPreference, name)), name
        assert [sd.address for sd in m_desc.apply_selector(getattr(ReadPreference, name))] == \
            [sd.address for sd in t_desc.apply_selector(getattr(pm.ReadPreference, name))], name
    address = mine.address
    assert [sd.address for sd in m_desc.apply_selector(ReadPreference.SECONDARY, address=address)] == [address]
    assert m_desc.apply_selector(ReadPreference.NEAREST, custom_selector=lambda servers: []) == []
    assert [sd.address for sd in m_desc.candidate_servers] == [sd.address for sd in t_desc.candidate_servers]
    reset = m_desc.reset_server(address)
    assert reset.server_descriptions()[address].server_type_name == "Unknown"
    assert not reset.has_writable_server() and m_desc.has_writable_server()  # a new description; the old kept
    with pytest.raises(TypeError):
        m_desc.has_readable_server("secondary")


def test_selector_callables_are_not_offered(pm: ModuleType, both_clients: tuple) -> None:
    DELIBERATE_DIFFERENCES["selection-callables"]
    from pymongo.server_selectors import writable_server_selector

    mine, theirs = both_clients
    theirs.admin.command("ping")  # PyMongo has discovered the server (its monitor is another OS thread)
    assert theirs.topology_description.apply_selector(writable_server_selector)
    with pytest.raises(TypeError):
        mine.topology_description.apply_selector(lambda selection: selection)


def test_is_primary_waits_for_a_server_and_fails_like_pymongo(server_uri: str) -> None:
    client = greenmongo.MongoClient(server_uri, connect=False)
    try:
        assert client.is_primary is True  # connect=False: the property starts discovery and waits
    finally:
        client.close()
    unreachable = greenmongo.MongoClient("mongodb://127.0.0.1:1/", serverSelectionTimeoutMS=100, connect=False)
    try:
        assert unreachable.primary is None and unreachable.secondaries == set() == unreachable.arbiters
        with pytest.raises(greenmongo.errors.ServerSelectionTimeoutError):
            bool(unreachable.is_primary)
        with pytest.raises(greenmongo.errors.ServerSelectionTimeoutError):
            bool(unreachable.is_mongos)
    finally:
        unreachable.close()


def test_client_iteration_equality_and_generics(pm: ModuleType) -> None:
    from greenmongo.collection import Collection
    from greenmongo.command_cursor import CommandCursor
    from greenmongo.cursor import Cursor
    from greenmongo.database import Database

    client = greenmongo.MongoClient("mongodb://h1,h2/?replicaSet=rs", connect=False)
    try:
        with pytest.raises(TypeError, match="not iterable"):
            next(client)
        with pytest.raises(TypeError, match="not iterable"):
            client.next()
        assert iter(client) is client
        assert client.eq_props() == ((("h1", 27017), ("h2", 27017)), "rs", None, "mongodb")
        assert client == greenmongo.MongoClient("mongodb://h2,h1/?replicaSet=rs", connect=False)
        assert client != greenmongo.MongoClient("mongodb://h2,h1/?replicaSet=other", connect=False)
        # The class subscript is a generic alias; the instance subscript is still a database.
        for klass in (greenmongo.MongoClient, Database, Collection, Cursor, CommandCursor, greenmongo.InsertOne,
                      greenmongo.ReplaceOne):
            alias = klass[dict]
            assert typing.get_origin(alias) is klass and typing.get_args(alias) == (dict,)
        assert isinstance(client["db"], Database) and client["db"]["c"].full_name == "db.c"
        assert isinstance(greenmongo.MongoClient[dict](connect=False), greenmongo.MongoClient)
    finally:
        client.close()


def test_type_registry_and_get_default_database_bind_positionally() -> None:
    from greenmongo.bson.codec_options import TypeRegistry
    from greenmongo.read_preferences import ReadPreference

    registry = TypeRegistry()
    client = greenmongo.MongoClient("mongodb://h/app", None, None, None, False, registry)
    try:
        assert client.codec_options.type_registry is registry
        database = client.get_default_database(None, None, ReadPreference.SECONDARY)
        assert database.name == "app" and database.read_preference == ReadPreference.SECONDARY
    finally:
        client.close()


def test_pool_options_match_pymongo(pm: ModuleType) -> None:
    uri = "mongodb://h/?maxPoolSize=7&minPoolSize=2&maxIdleTimeMS=1500&waitQueueTimeoutMS=250&maxConnecting=3" \
          "&connectTimeoutMS=4000&socketTimeoutMS=9000&appname=app"
    mine = greenmongo.MongoClient(uri, connect=False)
    theirs = pm.MongoClient(uri, connect=False)
    try:
        m_pool, t_pool = mine.options.pool_options, theirs.options.pool_options
        assert isinstance(m_pool, greenmongo.pool.PoolOptions)
        for name in ("max_pool_size", "min_pool_size", "max_idle_time_seconds", "wait_queue_timeout",
                     "max_connecting", "connect_timeout", "socket_timeout", "appname", "driver", "server_api",
                     "pause_enabled", "tls_allow_invalid_hostnames", "non_default_options"):
            assert getattr(m_pool, name) == getattr(t_pool, name), name
        assert m_pool.metadata["application"] == t_pool.metadata["application"] == {"name": "app"}
        assert mine.options.max_adaptive_retries == theirs.options.max_adaptive_retries
        assert mine.options.enable_overload_retargeting == theirs.options.enable_overload_retargeting
    finally:
        mine.close()
        theirs.close()


def test_command_cursor_collection_and_check_out_failed_connection_id(pm: ModuleType, client: Any) -> None:
    from greenmongo.monitoring import ConnectionCheckOutFailedEvent
    from greenmongo.read_preferences import ReadPreference

    collection = client.get_database("pymongo_api").get_collection(
        "c", read_preference=ReadPreference.PRIMARY_PREFERRED)
    cursor = collection.aggregate([{"$match": {}}])
    try:
        assert cursor._collection is collection
        assert cursor._collection.read_preference == ReadPreference.PRIMARY_PREFERRED
    finally:
        cursor.close()
    event = ConnectionCheckOutFailedEvent(("h", 1), "timeout", 0.5)
    assert event.connection_id == pm.monitoring.ConnectionCheckOutFailedEvent(("h", 1), "timeout", 0.5).connection_id


# =============================================================================
# Behaviour: monitoring.register() and the event loggers
# =============================================================================

def test_register_reaches_clients_created_afterwards(monkeypatch: Any, server_uri: str, pm: ModuleType) -> None:
    from greenmongo import monitoring
    from tests.api_support import Recorder

    monkeypatch.setattr(monitoring, "_REGISTERED", [])
    with pytest.raises(TypeError):
        monitoring.register(object())
    with pytest.raises(TypeError):
        pm.monitoring.register(object())
    before = greenmongo.MongoClient(server_uri)
    recorder = Recorder()
    monitoring.register(recorder)
    own = Recorder()
    after = greenmongo.MongoClient(server_uri, event_listeners=[own])
    try:
        before.admin.command("ping")
        assert recorder.names() == []
        after.admin.command("ping")
        assert recorder.names() == own.names() == ["ping"]
        assert after.options.event_listeners == (recorder, own)  # registered ones first, as PyMongo
    finally:
        before.close()
        after.close()


def test_event_loggers_write_pymongo_messages(pm: ModuleType, server_uri: str, caplog: Any) -> None:
    """Each logger class fed the same events as PyMongo's writes the same records (level and text)."""
    from pymongo import event_loggers as pm_loggers

    from greenmongo import event_loggers, monitoring

    class Everything(monitoring.CommandListener, monitoring.ServerListener, monitoring.ServerHeartbeatListener,
                     monitoring.TopologyListener, monitoring.ConnectionPoolListener):
        def __init__(self) -> None:
            self.events: list = []

        def __getattribute__(self, name: str) -> Any:
            if name.startswith("_") or name == "events":
                return object.__getattribute__(self, name)
            return object.__getattribute__(self, "events").append

    everything = Everything()
    client = greenmongo.MongoClient(server_uri, event_listeners=[everything], heartbeatFrequencyMS=500)
    try:
        client.admin.command("ping")
        with pytest.raises(greenmongo.errors.OperationFailure):
            client.admin.command("noSuchCommand")
    finally:
        client.close()
    kinds = {type(event).__name__ for event in everything.events}
    assert {"CommandStartedEvent", "CommandSucceededEvent", "CommandFailedEvent", "ServerOpeningEvent",
            "ServerDescriptionChangedEvent", "ServerHeartbeatStartedEvent", "ServerHeartbeatSucceededEvent",
            "TopologyOpenedEvent", "TopologyDescriptionChangedEvent", "PoolCreatedEvent",
            "ConnectionCheckedOutEvent", "ConnectionCheckedInEvent", "TopologyClosedEvent"} <= kinds

    def records(module: Any) -> list:
        caplog.clear()
        loggers: dict = {}
        with caplog.at_level(logging.INFO, logger=""):
            for event in everything.events:
                logger_name, method = _LOGGED_BY[type(event).__name__]
                logger = loggers.setdefault(logger_name, getattr(module, logger_name)())
                getattr(logger, method)(event)
        return [(record.name, record.levelname, record.getMessage()) for record in caplog.records]

    theirs, mine = records(pm_loggers), records(event_loggers)
    assert len(mine) >= len(kinds) and mine == theirs
    assert any(message.startswith("Command ping with request id ") for _, _, message in mine)
    assert all(name == "root" for name, _, _ in mine)


#: Event class -> (the event_loggers class that logs it, its method).
_LOGGED_BY = {
    "CommandStartedEvent": ("CommandLogger", "started"), "CommandSucceededEvent": ("CommandLogger", "succeeded"),
    "CommandFailedEvent": ("CommandLogger", "failed"), "ServerOpeningEvent": ("ServerLogger", "opened"),
    "ServerDescriptionChangedEvent": ("ServerLogger", "description_changed"),
    "ServerClosedEvent": ("ServerLogger", "closed"), "ServerHeartbeatStartedEvent": ("HeartbeatLogger", "started"),
    "ServerHeartbeatSucceededEvent": ("HeartbeatLogger", "succeeded"),
    "ServerHeartbeatFailedEvent": ("HeartbeatLogger", "failed"), "TopologyOpenedEvent": ("TopologyLogger", "opened"),
    "TopologyDescriptionChangedEvent": ("TopologyLogger", "description_changed"),
    "TopologyClosedEvent": ("TopologyLogger", "closed"), "PoolCreatedEvent": ("ConnectionPoolLogger", "pool_created"),
    "PoolReadyEvent": ("ConnectionPoolLogger", "pool_ready"),
    "PoolClearedEvent": ("ConnectionPoolLogger", "pool_cleared"),
    "PoolClosedEvent": ("ConnectionPoolLogger", "pool_closed"),
    "ConnectionCreatedEvent": ("ConnectionPoolLogger", "connection_created"),
    "ConnectionReadyEvent": ("ConnectionPoolLogger", "connection_ready"),
    "ConnectionClosedEvent": ("ConnectionPoolLogger", "connection_closed"),
    "ConnectionCheckOutStartedEvent": ("ConnectionPoolLogger", "connection_check_out_started"),
    "ConnectionCheckOutFailedEvent": ("ConnectionPoolLogger", "connection_check_out_failed"),
    "ConnectionCheckedOutEvent": ("ConnectionPoolLogger", "connection_checked_out"),
    "ConnectionCheckedInEvent": ("ConnectionPoolLogger", "connection_checked_in"),
}


def test_legacy_date_forms(pm: ModuleType) -> None:
    DELIBERATE_DIFFERENCES["legacy-date-floats"]
    from bson import json_util as pm_json

    from greenmongo.bson import json_util

    assert json_util.loads('{"d": {"$date": 1234}}') == pm_json.loads('{"d": {"$date": 1234}}')
    assert pm_json.loads('{"d": {"$date": 1.5}}')["d"].microsecond == 1000
    with pytest.raises(ValueError):
        json_util.loads('{"d": {"$date": 1.5}}')
    canonical = pm_json.CANONICAL_JSON_OPTIONS
    assert pm_json.loads('{"d": {"$date": 1234}}', json_options=canonical)
    with pytest.raises(ValueError):
        json_util.loads('{"d": {"$date": 1234}}', json_options=json_util.CANONICAL_JSON_OPTIONS)


# =============================================================================
# Behaviour: a bad keyword option raises what PyMongo raises
# =============================================================================

#: Where PyMongo's exception class is an accident of its implementation, not a choice: most values
#: given to datetime_conversion, a string to zlibCompressionLevel or srv_host_validator are TypeErrors
#: there only because of how the value is looked up, and a list or dict given as readPreference is a
#: ValueError where for every other named choice it is a TypeError. Ours are still ConfigurationErrors.
_OPTION_ERROR_ACCIDENTS = {("datetime_conversion", "object"), ("datetime_conversion", "float"),
                           ("datetime_conversion", "str"), ("datetime_conversion", "list"),
                           ("datetime_conversion", "dict"), ("zlibCompressionLevel", "str"),
                           ("srv_host_validator", "str"), ("readPreference", "list"),
                           ("readPreference", "dict")}


def _error_kind(module: ModuleType, name: str, value: Any) -> str:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            module.MongoClient("mongodb://localhost", connect=False, **{name: value}).close()
        except TypeError:
            return "TypeError"
        except ValueError:
            return "ValueError"
        except Exception as exc:  # noqa: BLE001 - any other class is compared by name
            return type(exc).__name__
    return "accepted"


def test_bad_keyword_options_raise_pymongos_type_or_value_error(pm: ModuleType) -> None:
    # Code written for PyMongo catches TypeError / ValueError around MongoClient(...): ours are those
    # and ConfigurationError at once.
    from greenmongo.options.validators import OPTIONS

    compared = 0
    mismatched = []
    for option in OPTIONS:
        for value in (object(), -1, 1.5, "bogus", True, [], {}, "5", 0):
            theirs = _error_kind(pm, option.name, value)
            if theirs not in ("TypeError", "ValueError"):
                continue
            mine = _error_kind(greenmongo, option.name, value)
            if mine == "accepted" or (option.name, type(value).__name__) in _OPTION_ERROR_ACCIDENTS:
                continue
            compared += 1
            if mine != theirs:
                mismatched.append((option.name, value, theirs, mine))
    assert compared > 400
    assert mismatched == []
    with pytest.raises(ConfigurationError) as raised:
        greenmongo.MongoClient("mongodb://localhost", connect=False, maxPoolSize=-1)
    assert isinstance(raised.value, ValueError) and "maxPoolSize" in str(raised.value)
    with pytest.raises(ConfigurationError) as raised:
        greenmongo.MongoClient("mongodb://localhost", connect=False, appname=5)
    assert isinstance(raised.value, TypeError)
    with pytest.raises(ConfigurationError) as raised:  # an unknown option: a ConfigurationError alone, as there
        greenmongo.MongoClient("mongodb://localhost", connect=False, no_such_option=1)
    assert not isinstance(raised.value, (TypeError, ValueError))
