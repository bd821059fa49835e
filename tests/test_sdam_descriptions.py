"""ServerDescription / TopologyDescription details the spec files do not pin down."""

from __future__ import annotations

import datetime

import pytest

from greenmongo.bson.objectid import ObjectId
from greenmongo.errors import ConfigurationError
from greenmongo.sdam.address import format_address, parse_address
from greenmongo.sdam.server_description import ServerDescription, compare_topology_versions
from greenmongo.sdam.server_type import ServerType
from greenmongo.sdam.settings import TopologySettings
from greenmongo.sdam.topology_description import TopologyDescription
from greenmongo.sdam.topology_type import TopologyType

A = ("a", 27017)
PID = ObjectId("000000000000000000000001")


@pytest.mark.parametrize("text, expected", [
    ("A", ("a", 27017)),
    ("Host.Example:27018", ("host.example", 27018)),
    ("[::1]", ("::1", 27017)),
    ("[FE80::1]:27019", ("fe80::1", 27019)),
    ("/tmp/MongoDB-27017.sock", ("/tmp/MongoDB-27017.sock", None)),
])
def test_parse_address_normalizes(text: str, expected: tuple) -> None:
    assert parse_address(text) == expected


@pytest.mark.parametrize("text", ["::1", "[::1", "a:0", "a:port", "a:70000", "[::1]x"])
def test_parse_address_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_address(text)


def test_format_address_round_trips() -> None:
    for text in ("a:27017", "[::1]:27017", "/tmp/x.sock"):
        assert format_address(parse_address(text)) == text


def reply(**fields: object) -> dict:
    return {"ok": 1, "minWireVersion": 0, "maxWireVersion": 21, **fields}


@pytest.mark.parametrize("fields, expected", [
    ({}, ServerType.Standalone),
    ({"msg": "isdbgrid"}, ServerType.Mongos),
    ({"setName": "rs", "isWritablePrimary": True}, ServerType.RSPrimary),
    ({"setName": "rs", "ismaster": True}, ServerType.RSPrimary),  # legacy hello
    ({"setName": "rs", "isWritablePrimary": False, "ismaster": True}, ServerType.RSOther),
    ({"setName": "rs", "secondary": True}, ServerType.RSSecondary),
    ({"setName": "rs", "secondary": True, "hidden": True}, ServerType.RSOther),
    ({"setName": "rs", "arbiterOnly": True}, ServerType.RSArbiter),
    ({"isreplicaset": True}, ServerType.RSGhost),
    ({"serviceId": PID, "msg": "isdbgrid"}, ServerType.LoadBalancer),
])
def test_server_type_from_hello(fields: dict, expected: ServerType) -> None:
    assert ServerDescription(A, reply(**fields), round_trip_time=0.01).server_type is expected


def test_not_ok_reply_is_a_default_unknown() -> None:
    sd = ServerDescription(A, {"ok": 0, "setName": "rs", "secondary": True}, round_trip_time=0.01)
    assert sd.server_type is ServerType.Unknown
    assert sd.replica_set_name is None and sd.round_trip_time is None
    assert sd.max_wire_version is None


def test_hello_fields_are_parsed_and_hosts_lower_cased() -> None:
    when = datetime.datetime(2024, 1, 2, 3, 4, 5, 678000)
    sd = ServerDescription(A, reply(
        setName="rs", secondary=True, hosts=["A:27017", "B:1"], passives=["C"], arbiters=["D:2"],
        me="A:27017", primary="B:1", tags={"dc": "ny"}, setVersion=3, electionId=PID,
        logicalSessionTimeoutMinutes=30, lastWrite={"lastWriteDate": when, "opTime": {"ts": 1}},
        topologyVersion={"processId": PID, "counter": 4}, maxBsonObjectSize=1024,
    ), round_trip_time=0.02, min_round_trip_time=0.01, last_update_time=5.0)
    assert sd.member_addresses() == (("a", 27017), ("b", 1), ("c", 27017), ("d", 2))
    assert sd.all_hosts == {("a", 27017), ("b", 1), ("c", 27017), ("d", 2)}
    assert sd.me == A and sd.primary == ("b", 1)
    assert sd.tags == {"dc": "ny"} and sd.set_version == 3 and sd.election_id == PID
    assert sd.logical_session_timeout_minutes == 30
    expected_seconds = when.replace(tzinfo=datetime.timezone.utc).timestamp()
    assert sd.last_write_date == pytest.approx(expected_seconds)
    assert sd.op_time == {"ts": 1}
    assert sd.topology_version == {"processId": PID, "counter": 4}
    assert sd.max_bson_size == 1024 and sd.max_write_batch_size == 100_000
    assert (sd.round_trip_time, sd.min_round_trip_time, sd.last_update_time) == (0.02, 0.01, 5.0)
    assert sd.is_readable and not sd.is_writable


def test_last_write_date_in_integer_milliseconds() -> None:
    sd = ServerDescription(A, reply(setName="rs", secondary=True, lastWrite={"lastWriteDate": 1500}))
    assert sd.last_write_date == 1.5


def test_equality_ignores_rtt_and_update_time_but_not_equality_fields() -> None:
    one = ServerDescription(A, reply(setName="rs", secondary=True), round_trip_time=0.01, last_update_time=1)
    two = ServerDescription(A, reply(setName="rs", secondary=True), round_trip_time=0.5, last_update_time=9)
    assert one == two
    assert one != ServerDescription(A, reply(setName="rs", secondary=True, tags={"x": "1"}))
    assert ServerDescription(A, error=OSError("x")) == ServerDescription(A, error=OSError("x"))
    assert ServerDescription(A, error=OSError("x")) != ServerDescription(A, error=OSError("y"))


def test_to_unknown_keeps_topology_version() -> None:
    sd = ServerDescription(A, reply(topologyVersion={"processId": PID, "counter": 2}))
    unknown = sd.to_unknown(error=OSError("down"))
    assert unknown.server_type is ServerType.Unknown
    assert unknown.topology_version == {"processId": PID, "counter": 2}
    assert str(unknown.error) == "down"


def test_load_balancer_description_has_only_an_address() -> None:
    sd = ServerDescription.load_balancer(A)
    assert sd.server_type is ServerType.LoadBalancer
    assert (sd.min_wire_version, sd.max_wire_version, sd.replica_set_name) == (None, None, None)
    assert sd.is_writable and sd.retryable_writes_supported


@pytest.mark.parametrize("current, incoming, expected", [
    (None, {"processId": PID, "counter": 1}, -1),
    ({"processId": PID, "counter": 1}, None, -1),
    ({"processId": PID, "counter": 1}, {"processId": ObjectId("0" * 23 + "2"), "counter": 0}, -1),
    ({"processId": PID, "counter": 1}, {"processId": PID, "counter": 2}, -1),
    ({"processId": PID, "counter": 2}, {"processId": PID, "counter": 2}, 0),
    ({"processId": PID, "counter": 3}, {"processId": PID, "counter": 2}, 1),
])
def test_compare_topology_versions(current: dict, incoming: dict, expected: int) -> None:
    assert compare_topology_versions(current, incoming) == expected


@pytest.mark.parametrize("settings, expected", [
    (TopologySettings(seeds=(A,)), TopologyType.Unknown),
    (TopologySettings(seeds=(A,), direct_connection=True), TopologyType.Single),
    (TopologySettings(seeds=(A,), direct_connection=True, replica_set_name="rs"), TopologyType.Single),
    (TopologySettings(seeds=(A,), replica_set_name="rs"), TopologyType.ReplicaSetNoPrimary),
    (TopologySettings(seeds=(A,), load_balanced=True), TopologyType.LoadBalanced),
])
def test_initial_topology_type(settings: TopologySettings, expected: TopologyType) -> None:
    description = TopologyDescription.initial(settings)
    assert description.topology_type is expected
    assert description.addresses == [A]
    assert description.server_descriptions()[A].server_type is ServerType.Unknown


def test_incompatible_server_raises_configuration_error_with_spec_message() -> None:
    settings = TopologySettings(seeds=(A,))
    old = ServerDescription(A, {"ok": 1, "maxWireVersion": 2})
    description = TopologyDescription(TopologyType.Single, {A: old}, None, None, None, settings)
    assert not description.compatible
    with pytest.raises(ConfigurationError, match=r"Server at a:27017 reports wire version 2, but this "
                                                   r"version of greenmongo requires at least 8"):
        description.check_compatible()
    new = ServerDescription(A, {"ok": 1, "minWireVersion": 99, "maxWireVersion": 100})
    description = TopologyDescription(TopologyType.Single, {A: new}, None, None, None, settings)
    assert "requires wire version 99" in (description.compatibility_error or "")


def test_session_timeout_is_the_smallest_over_data_bearing_servers() -> None:
    b = ("b", 27017)
    settings = TopologySettings(seeds=(A, b))
    servers = {
        A: ServerDescription(A, reply(msg="isdbgrid", logicalSessionTimeoutMinutes=30)),
        b: ServerDescription(b, reply(msg="isdbgrid", logicalSessionTimeoutMinutes=10)),
    }
    description = TopologyDescription(TopologyType.Sharded, servers, None, None, None, settings)
    assert description.logical_session_timeout_minutes == 10
    servers[b] = ServerDescription(b, reply(msg="isdbgrid"))
    description = TopologyDescription(TopologyType.Sharded, servers, None, None, None, settings)
    assert description.logical_session_timeout_minutes is None


def test_reset_and_closed() -> None:
    settings = TopologySettings(seeds=(A,), replica_set_name="rs")
    primary = ServerDescription(A, reply(setName="rs", isWritablePrimary=True, hosts=["a:27017"]))
    description = TopologyDescription(TopologyType.ReplicaSetWithPrimary, {A: primary}, "rs", None, None,
                                      settings)
    reset = description.reset()
    assert reset.topology_type is TopologyType.ReplicaSetNoPrimary
    assert reset[A].server_type is ServerType.Unknown
    closed = description.closed()
    assert closed.topology_type is TopologyType.Unknown and closed.addresses == []
    assert description[A] is primary  # the original is untouched
