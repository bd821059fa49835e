"""Unit tests of the unified runner's pure parts: the matching rules first, then the helpers around them.

No server, no sockets: values are built with greenmongo's BSON types.
"""

from __future__ import annotations

import datetime
import logging

import pytest

from greenmongo import bson, errors
from greenmongo.bson import json_util
from spec.unified.context import ConnectionString, ServerInfo
from spec.unified.drivers import BsonTypes
from spec.unified.events import EventRecorder, LogCollector, assert_events, assert_log_messages
from spec.unified.expected_errors import assert_error, is_server_error
from spec.unified.matching import MISSING, Matcher, bson_type_names, documents_equal, values_equal
from spec.unified.operations import snake
from spec.unified.outcomes import MatchError, TestFileError
from spec.unified.requirements import skip_reason, unmet
from spec.unified.schema import is_supported, parse_version

TYPES = BsonTypes(
    ObjectId=bson.ObjectId, Int64=bson.Int64, Decimal128=bson.Decimal128, Binary=bson.Binary,
    Timestamp=bson.Timestamp, Regex=bson.Regex, Code=bson.Code, MinKey=bson.MinKey, MaxKey=bson.MaxKey,
    DBRef=bson.DBRef, DBPointer=bson.DBPointer, Symbol=bson.Symbol, Undefined=bson.Undefined,
    DatetimeMS=bson.DatetimeMS,
)
LSID = {"id": bson.Binary(b"\x01" * 16, 4)}


class Entities:
    """A stand-in entity map: one BSON entity, one session."""

    def entity_value(self, name):
        if name == "oid":
            return bson.ObjectId("000000000000000000000001")
        raise TestFileError(f"no entity {name}")

    def session_lsid(self, name):
        if name == "session0":
            return LSID
        raise TestFileError(f"no session {name}")


def json_loads(text):
    return json_util.loads(text, json_options=json_util.JSONOptions(tz_aware=False))


@pytest.fixture
def matcher():
    return Matcher(TYPES, Entities(), json_loads)


def ok(matcher, expected, actual, **kwargs):
    matcher.match(expected, actual, **kwargs)


def bad(matcher, expected, actual, **kwargs):
    with pytest.raises(MatchError):
        matcher.match(expected, actual, **kwargs)


# -- documents and arrays ------------------------------------------------------------------

def test_root_document_may_have_extra_keys(matcher):
    ok(matcher, {"x": 1}, {"x": 1, "y": 1})


def test_nested_document_may_not_have_extra_keys(matcher):
    bad(matcher, {"x": {"y": 1}}, {"x": {"y": 1, "z": 1}})


def test_nested_flag_applies_at_the_top_too(matcher):
    bad(matcher, {"x": 1}, {"x": 1, "y": 1}, root=False)


def test_missing_key_fails_even_at_root(matcher):
    bad(matcher, {"x": 1, "y": 1}, {"x": 1})


def test_key_order_does_not_matter(matcher):
    ok(matcher, {"x": 1, "y": {"a": 1, "b": 2}}, {"y": {"b": 2, "a": 1}, "x": 1})


def test_document_expected_but_scalar_given(matcher):
    bad(matcher, {"x": 1}, 5)


def test_arrays_need_the_same_length(matcher):
    bad(matcher, [1, 2, 3], [1, 2, 3, 4])
    bad(matcher, [1, 2, 3], [1, 2])
    ok(matcher, [1, 2, 3], [1, 2, 3])


def test_documents_inside_arrays_are_nested(matcher):
    bad(matcher, [{"x": 1}], [{"x": 1, "y": 2}])


def test_match_documents_treats_each_element_as_root(matcher):
    matcher.match_documents([{"x": 1}, {"x": 2}], [{"x": 1, "y": 1}, {"x": 2, "y": 2}])
    with pytest.raises(MatchError):
        matcher.match_documents([{"x": 1}], [{"x": 1}, {"x": 2}])
    with pytest.raises(MatchError):
        matcher.match_documents([{"x": 1}], {"x": 1})


# -- scalars ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("expected, actual", [
    (1, 1.0), (1.0, 1), (1, bson.Int64(1)), (bson.Int64(5), 5), (2**40, float(2**40)),
])
def test_flexible_numerics(matcher, expected, actual):
    ok(matcher, {"n": expected}, {"n": actual})


@pytest.mark.parametrize("expected, actual", [
    (1, 1.5), (1, True), (True, 1), (0, False), (1, "1"),
    (bson.Decimal128("1"), 1), (1, bson.Decimal128("1")),
])
def test_not_equal_scalars(matcher, expected, actual):
    bad(matcher, {"n": expected}, {"n": actual})


def test_decimal128_equals_decimal128(matcher):
    ok(matcher, bson.Decimal128("1.5"), bson.Decimal128("1.5"))


def test_aware_and_naive_datetimes_compare_in_utc():
    naive = datetime.datetime(2024, 1, 2, 3, 4, 5)
    aware = naive.replace(tzinfo=datetime.timezone.utc)
    assert values_equal(aware, naive)
    assert not values_equal(aware, naive + datetime.timedelta(seconds=1))


def test_binary_subtype_zero_equals_bytes_but_other_subtypes_do_not():
    assert values_equal(bson.Binary(b"ab", 0), b"ab")
    assert not values_equal(bson.Binary(b"ab", 4), b"ab")
    assert values_equal(bson.Binary(b"ab", 4), bson.Binary(b"ab", 4))


def test_null_matches_null_only(matcher):
    ok(matcher, {"x": None}, {"x": None})
    bad(matcher, {"x": None}, {"x": 0})
    bad(matcher, {"x": None}, {})


# -- operators -------------------------------------------------------------------------------------

def test_exists(matcher):
    ok(matcher, {"a": {"$$exists": True}}, {"a": None})
    bad(matcher, {"a": {"$$exists": True}}, {})
    ok(matcher, {"a": {"$$exists": False}}, {"b": 1})
    bad(matcher, {"a": {"$$exists": False}}, {"a": 1})


def test_exists_false_keys_are_not_extra_in_nested_documents(matcher):
    ok(matcher, {"n": {"a": 1, "b": {"$$exists": False}}}, {"n": {"a": 1}})


def test_type_single_and_list(matcher):
    ok(matcher, {"a": {"$$type": "string"}}, {"a": "x"})
    ok(matcher, {"a": {"$$type": ["int", "long"]}}, {"a": bson.Int64(3)})
    bad(matcher, {"a": {"$$type": "int"}}, {"a": bson.Int64(3)})
    bad(matcher, {"a": {"$$type": "int"}}, {})


def test_type_int_and_long_by_range(matcher):
    ok(matcher, {"$$type": "int"}, 2**31 - 1)
    ok(matcher, {"$$type": "long"}, 2**31)


@pytest.mark.parametrize("value", [1, bson.Int64(1), 1.5, bson.Decimal128("1")])
def test_type_number_alias(matcher, value):
    ok(matcher, {"$$type": "number"}, value)


def test_type_does_not_look_inside_arrays(matcher):
    ok(matcher, {"$$type": "array"}, [1, "x"])
    bad(matcher, {"$$type": "int"}, [1])


def test_unknown_type_name_is_a_test_file_error(matcher):
    with pytest.raises(TestFileError):
        matcher.match({"$$type": "integer"}, 1)


@pytest.mark.parametrize("value, names", [
    (None, {"null"}), (True, {"bool"}), (1.0, {"double"}), ("s", {"string"}), ({}, {"object"}),
    ([], {"array"}), (b"x", {"binData"}), (bson.ObjectId(), {"objectId"}),
    (datetime.datetime(2020, 1, 1), {"date"}), (bson.Regex("a"), {"regex"}), (bson.Code("f"), {"javascript"}),
    (bson.Code("f", {"a": 1}), {"javascriptWithScope"}), (bson.Timestamp(1, 1), {"timestamp"}),
    (bson.MinKey(), {"minKey"}), (bson.MaxKey(), {"maxKey"}), (bson.Symbol("s"), {"symbol"}),
])
def test_bson_type_names(value, names):
    assert bson_type_names(value, TYPES) == names


def test_unset_or_matches_on_a_key(matcher):
    ok(matcher, {"a": {"$$unsetOrMatches": 1}}, {})
    ok(matcher, {"a": {"$$unsetOrMatches": 1}}, {"a": 1.0})
    bad(matcher, {"a": {"$$unsetOrMatches": 1}}, {"a": 2})


def test_unset_or_matches_on_the_whole_value(matcher):
    expected = {"$$unsetOrMatches": {"insertedId": {"$$unsetOrMatches": 2}}}
    ok(matcher, expected, MISSING)
    ok(matcher, expected, {"insertedId": 2})
    ok(matcher, expected, {})
    bad(matcher, expected, {"insertedId": 3})


def test_unset_or_matches_keeps_the_root_rule(matcher):
    ok(matcher, {"$$unsetOrMatches": {"a": 1}}, {"a": 1, "b": 2})


def test_matches_entity(matcher):
    ok(matcher, {"_id": {"$$matchesEntity": "oid"}}, {"_id": bson.ObjectId("000000000000000000000001")})
    bad(matcher, {"_id": {"$$matchesEntity": "oid"}}, {"_id": bson.ObjectId()})
    with pytest.raises(TestFileError):
        matcher.match({"$$matchesEntity": "nope"}, 1)


def test_matches_hex_bytes(matcher):
    ok(matcher, {"$$matchesHexBytes": "12ab"}, b"\x12\xab")
    ok(matcher, {"$$matchesHexBytes": ""}, b"")
    bad(matcher, {"$$matchesHexBytes": "12ab"}, b"\x12")
    with pytest.raises(TestFileError):
        matcher.match({"$$matchesHexBytes": "123"}, b"")


def test_session_lsid(matcher):
    ok(matcher, {"lsid": {"$$sessionLsid": "session0"}}, {"lsid": {"id": bson.Binary(b"\x01" * 16, 4)}})
    bad(matcher, {"lsid": {"$$sessionLsid": "session0"}}, {"lsid": {"id": bson.Binary(b"\x02" * 16, 4)}})
    with pytest.raises(TestFileError):
        matcher.match({"$$sessionLsid": "session9"}, LSID)


@pytest.mark.parametrize("actual, good", [(1, True), (1.0, True), (0, True), (0.0, True), (1.1, False),
                                          (2, False), ("1", False), (True, False)])
def test_lte(matcher, actual, good):
    if good:
        ok(matcher, {"n": {"$$lte": 1}}, {"n": actual})
    else:
        bad(matcher, {"n": {"$$lte": 1}}, {"n": actual})


def test_match_as_document_is_nested_unless_match_as_root(matcher):
    ok(matcher, {"$$matchAsDocument": {"x": 1}}, '{"x": 1.0}')
    bad(matcher, {"$$matchAsDocument": {"x": 1}}, '{"x": 1, "y": 2}')
    ok(matcher, {"$$matchAsDocument": {"$$matchAsRoot": {"x": 1}}}, '{"x": 1, "y": 2}')


def test_match_as_document_decodes_extended_json(matcher):
    ok(matcher, {"$$matchAsDocument": {"_id": {"$$type": "objectId"}, "n": {"$$type": "long"}}},
       '{"_id": {"$oid": "000000000000000000000001"}, "n": {"$numberLong": "1"}}')


@pytest.mark.parametrize("text", ["1", '["foo"]', '{ "x" }'])
def test_match_as_document_needs_a_json_object(matcher, text):
    bad(matcher, {"$$matchAsDocument": {}}, text)


def test_match_as_document_needs_a_string(matcher):
    bad(matcher, {"$$matchAsDocument": {"x": 1}}, {"x": 1})


def test_match_as_root_allows_extra_keys_in_a_nested_document(matcher):
    ok(matcher, {"x": {"$$matchAsRoot": {"y": 1}}}, {"x": {"y": 1, "z": 2}})
    bad(matcher, {"x": {"$$matchAsRoot": {"y": {"a": 1}}}}, {"x": {"y": {"a": 1, "b": 2}}})


def test_unknown_operator_is_a_test_file_error(matcher):
    with pytest.raises(TestFileError):
        matcher.match({"$$nope": 1}, 1)


def test_a_document_with_a_dollar_dollar_key_among_others_is_no_operator(matcher):
    bad(matcher, {"$$exists": True, "a": 1}, {"a": 1})


# -- outcome comparison -------------------------------------------------------------------------------

def test_documents_equal_is_exact_but_order_free():
    assert documents_equal({"_id": 1, "x": {"a": 1, "b": 2}}, {"x": {"b": 2, "a": 1}, "_id": 1})
    assert not documents_equal({"_id": 1}, {"_id": 1, "x": 1})
    assert not documents_equal({"_id": 1, "x": 1}, {"_id": 1})
    assert documents_equal({"_id": 1, "x": 1}, {"_id": 1, "x": bson.Int64(1)})
    assert not documents_equal({"_id": 1, "x": True}, {"_id": 1, "x": 1})
    assert not documents_equal({"x": [1, 2]}, {"x": [1, 2, 3]})


# -- pure helpers around the matcher --------------------------------------------------------------------

@pytest.mark.parametrize("name, expected", [
    ("maxTimeMS", "max_time_ms"), ("allowDiskUse", "allow_disk_use"), ("batchSize", "batch_size"),
    ("let", "let"), ("returnDocument", "return_document"), ("maxAwaitTimeMS", "max_await_time_ms"),
])
def test_snake(name, expected):
    assert snake(name) == expected


def test_schema_versions():
    assert parse_version("1.2") == (1, 2, 0)
    assert parse_version("1.2.3.4") is None
    assert parse_version(0) is None
    assert is_supported("1.0") and is_supported("1.28")
    assert not is_supported("0.1") and not is_supported("2.0") and not is_supported("1.29")


def test_connection_string_keeps_options_apart():
    uri = ConnectionString("mongodb://user:pw@h1:1,h2:2/admin?replicaSet=rs&tls=false")
    assert uri.hosts == ["h1:1", "h2:2"]
    assert uri.options == {"replicaSet": "rs", "tls": "false"}
    assert uri.username == "user"
    assert uri.host_uri(["h1:1"]) == "mongodb://user:pw@h1:1/admin"


def server(version=(8, 0, 0), topology="replicaset", auth=False, parameters=None):
    info = ServerInfo(version, topology, auth, serverless=False)
    info.parameter_reader = lambda: parameters or {}
    return info


def test_requirements_name_what_is_unmet():
    assert unmet({"minServerVersion": "4.4"}, server(), False) == []
    reasons = unmet({"minServerVersion": "8.1", "topologies": ["single", "sharded"]}, server(), False)
    assert len(reasons) == 2 and "8.1" in reasons[0] and "replicaset" in reasons[1]
    assert unmet({"maxServerVersion": "7.99"}, server(), False)
    assert unmet({"auth": True}, server(), False)
    assert unmet({"auth": False}, server(auth=True), False)
    assert unmet({"csfle": True}, server(), False)
    assert unmet({"serverless": "require"}, server(), False)
    assert unmet({"serverParameters": {"enableTestCommands": 1}}, server(parameters={"enableTestCommands": True}),
                 False) == ["serverParameters: enableTestCommands=True, need 1"]
    assert unmet({"serverParameters": {"p": 1}}, server(parameters={"p": 1.0}), False) == []
    assert unmet({"serverParameters": {"q": 1}}, server(parameters={}), False)


def test_any_one_requirement_suffices():
    assert skip_reason([{"topologies": ["sharded"]}, {"minServerVersion": "4.0"}], server(), False, "file") is None
    reason = skip_reason([{"topologies": ["sharded"]}], server(), False, "test")
    assert reason.startswith("test runOnRequirements not met") and "sharded" in reason


def test_unknown_requirement_is_a_test_file_error():
    with pytest.raises(TestFileError):
        unmet({"minServerVersions": "4.0"}, server(), False)


# -- events ------------------------------------------------------------------------------------------

class CommandStartedEvent:
    def __init__(self, name, command, database="db"):
        self.command_name, self.command, self.database_name = name, command, database
        self.service_id, self.server_connection_id = None, 7


class CommandSucceededEvent:
    def __init__(self, name, reply):
        self.command_name, self.reply, self.database_name = name, reply, "db"


class ConnectionCheckedOutEvent:
    pass


class ConnectionCheckedInEvent:
    pass


def test_recorder_filters_ignored_and_sensitive_commands(matcher):
    recorder = EventRecorder("client0", observe=["commandStartedEvent", "commandSucceededEvent"],
                             ignore_commands=["killCursors"])
    for event in (CommandStartedEvent("configureFailPoint", {"configureFailPoint": "x"}),
                  CommandStartedEvent("killCursors", {"killCursors": "c"}),
                  CommandStartedEvent("saslStart", {}),
                  CommandStartedEvent("hello", {}),  # redacted: speculativeAuthenticate
                  CommandSucceededEvent("hello", {}),
                  CommandStartedEvent("ping", {"ping": 1, "$db": "db"}),
                  CommandSucceededEvent("ping", {"ok": 1})):
        recorder.handle(event)
    assert [name for name, _event in recorder.observed] == ["commandStartedEvent", "commandSucceededEvent"]
    assert_events(matcher, {"client": "client0", "events": [
        {"commandStartedEvent": {"command": {"ping": 1}, "commandName": "ping", "databaseName": "db",
                                 "hasServerConnectionId": True}},
        {"commandSucceededEvent": {"reply": {"ok": 1.0}}},
    ]}, recorder)
    with pytest.raises(MatchError):
        assert_events(matcher, {"client": "client0", "events": [
            {"commandStartedEvent": {"command": {"ping": 1}}}]}, recorder)
    assert_events(matcher, {"client": "client0", "ignoreExtraEvents": True, "events": [
        {"commandStartedEvent": {"command": {"ping": 1}}}]}, recorder)


def test_recorder_observes_sensitive_commands_when_asked():
    recorder = EventRecorder("c", observe=["commandStartedEvent"], observe_sensitive=True)
    recorder.handle(CommandStartedEvent("saslStart", {}))
    assert len(recorder.observed) == 1


def test_recorder_counts_checked_out_connections_and_stores_events():
    stored: list = []
    recorder = EventRecorder("c", observe=["connectionCheckedOutEvent"])
    recorder.add_store(["ConnectionCheckedOutEvent"], stored)
    recorder.handle(ConnectionCheckedOutEvent())
    recorder.handle(ConnectionCheckedOutEvent())
    recorder.handle(ConnectionCheckedInEvent())
    assert recorder.checked_out == 1
    assert [doc["name"] for doc in stored] == ["ConnectionCheckedOutEvent"] * 2
    assert all(isinstance(doc["observedAt"], float) for doc in stored)
    assert len(recorder.events_of("cmap")) == 2 and recorder.events_of("command") == []


def test_recorder_rejects_unknown_event_types():
    with pytest.raises(TestFileError):
        EventRecorder("c", observe=["commandStartEvent"])


class FakeAdapter:
    name = "fake"
    logger_names = {"command": "unified.test.command"}

    @staticmethod
    def log_record_data(record):
        return dict(record.msg) if isinstance(record.msg, dict) else None

    @staticmethod
    def log_record_owner(data):
        return data.get("clientId")


def test_log_collector_keeps_its_clients_messages(matcher):
    collector = LogCollector(FakeAdapter(), "client", {"command": "debug"})
    logger = logging.getLogger("unified.test.command")
    try:
        logger.debug({"message": "Command started", "clientId": 1, "commandName": "ping"})
        logger.debug({"message": "Command started", "clientId": 2, "commandName": "ping"})
        logger.debug("not a structured message")
        collector.owner = 1
        assert len(collector.messages) == 1
        assert_log_messages(matcher, {"client": "client", "messages": [
            {"level": "debug", "component": "command", "data": {"message": "Command started"}}]},
            collector.messages)
        with pytest.raises(MatchError):
            assert_log_messages(matcher, {"client": "client", "messages": [
                {"level": "info", "component": "command", "data": {"message": "Command started"}}]},
                collector.messages)
    finally:
        collector.close()
    assert collector not in logger.handlers


# -- expectError -------------------------------------------------------------------------------------

def test_expect_error_on_a_server_error(matcher):
    exc = errors.OperationFailure("no such command: 'x'", 59,
                                  {"ok": 0, "errmsg": "no such command: 'x'", "code": 59,
                                   "codeName": "CommandNotFound", "errorLabels": ["L"]})
    assert is_server_error(exc, errors)
    assert_error(matcher, errors, {"isClientError": False, "errorCode": 59, "errorCodeName": "commandnotfound",
                                   "errorContains": "NO SUCH", "errorLabelsContain": ["L"],
                                   "errorLabelsOmit": ["M"], "errorResponse": {"code": 59}}, exc)
    for wrong in ({"isClientError": True}, {"errorCode": 60}, {"errorContains": "elephant"},
                  {"errorLabelsContain": ["M"]}, {"errorLabelsOmit": ["L"]}, {"errorResponse": {"code": 1}},
                  {"isTimeoutError": True}):
        with pytest.raises(MatchError):
            assert_error(matcher, errors, wrong, exc)


def test_expect_error_on_a_client_error(matcher):
    exc = errors.AutoReconnect("connection closed")
    assert not is_server_error(exc, errors)
    assert_error(matcher, errors, {"isClientError": True, "isError": True}, exc)
    with pytest.raises(MatchError):
        assert_error(matcher, errors, {"errorResponse": {}}, exc)


def test_expect_error_bulk_write_aggregates_and_partial_result(matcher):
    details = {"writeErrors": [{"index": 1, "code": 11000, "errmsg": "E11000 duplicate key"}],
               "writeConcernErrors": [], "nInserted": 1, "nUpserted": 0, "nMatched": 0, "nModified": 0,
               "nRemoved": 0, "upserted": []}
    exc = errors.BulkWriteError(details)
    assert_error(matcher, errors, {"errorContains": "duplicate key", "errorCode": 11000,
                                   "expectResult": {"$$unsetOrMatches": {"insertedCount": 1, "deletedCount": 0}}},
                 exc)


def test_expect_error_rejects_unknown_assertions(matcher):
    with pytest.raises(TestFileError):
        assert_error(matcher, errors, {"errorCodes": [1]}, ValueError("x"))
