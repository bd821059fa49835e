"""The side effects plan_update reports, and SRV rescans (beyond the spec files' outcomes)."""

from __future__ import annotations

import random

from greenmongo.sdam.server_description import ServerDescription
from greenmongo.sdam.server_type import ServerType
from greenmongo.sdam.settings import TopologySettings
from greenmongo.sdam.topology_description import TopologyDescription
from greenmongo.sdam.topology_type import TopologyType
from greenmongo.sdam.update import (
    NEWER_PRIMARY_MESSAGE, apply_server_description, apply_srv_hosts, describe, plan_update,
)

A, B, C = ("a", 27017), ("b", 27017), ("c", 27017)


def primary(address: tuple, hosts: list, max_wire_version: int = 21, **extra: object) -> ServerDescription:
    return ServerDescription(address, {
        "ok": 1, "setName": "rs", "isWritablePrimary": True, "hosts": hosts,
        "minWireVersion": 0, "maxWireVersion": max_wire_version, **extra,
    }, round_trip_time=0.001)


def replica_set(*seeds: tuple) -> TopologyDescription:
    return TopologyDescription.initial(TopologySettings(seeds=seeds, replica_set_name="rs"))


def test_discovery_reports_servers_to_start_monitoring_and_pool_ready() -> None:
    update = plan_update(replica_set(A), primary(A, ["a:27017", "b:27017", "c:27017"]))
    assert update.applied and update.server_changed and update.topology_changed
    assert update.added == (B, C) and update.removed == ()
    assert update.mark_pool_ready
    assert update.description.topology_type is TopologyType.ReplicaSetWithPrimary


def test_primary_reporting_fewer_hosts_reports_servers_to_stop_monitoring() -> None:
    start = plan_update(replica_set(A, B, C), primary(A, ["a:27017", "b:27017"])).description
    update = plan_update(start, primary(A, ["a:27017"]))
    assert update.removed == (B,) and update.added == ()


def test_new_primary_demotes_the_old_one_and_asks_for_a_check() -> None:
    first = plan_update(replica_set(A, B), primary(A, ["a:27017", "b:27017"], electionId=1)).description
    update = plan_update(first, primary(B, ["a:27017", "b:27017"], electionId=2))
    assert update.demoted_primaries == (A,)
    assert update.pools_to_clear == ()  # 4.2+ primaries keep their sockets across a stepdown
    demoted = update.description[A]
    assert demoted.server_type is ServerType.Unknown and str(demoted.error) == NEWER_PRIMARY_MESSAGE


def test_demoted_pre_4_2_primary_pool_is_cleared() -> None:
    first = plan_update(replica_set(A, B), primary(A, ["a:27017", "b:27017"], max_wire_version=7)).description
    update = plan_update(first, primary(B, ["a:27017", "b:27017"], max_wire_version=7))
    assert update.pools_to_clear == (A,)


def test_outcomes_for_removed_servers_and_older_topology_versions_are_ignored() -> None:
    pid = "process-1"
    start = plan_update(replica_set(A), primary(A, ["a:27017"], topologyVersion={"processId": pid, "counter": 5}))
    description = start.description
    assert apply_server_description(description, ServerDescription(B)) is description
    older = primary(A, ["a:27017"], topologyVersion={"processId": pid, "counter": 4})
    update = plan_update(description, older)
    assert not update.applied and not update.server_changed and update.added == ()


def test_equal_description_is_applied_without_a_change() -> None:
    description = plan_update(replica_set(A), primary(A, ["a:27017"])).description
    update = plan_update(description, primary(A, ["a:27017"]))
    assert update.applied and not update.server_changed and not update.topology_changed
    assert update.description[A].round_trip_time == 0.001  # still replaced: RTT and times stay current


def test_unknown_does_not_mark_the_pool_ready() -> None:
    description = plan_update(replica_set(A), primary(A, ["a:27017"])).description
    assert not plan_update(description, ServerDescription(A, error=OSError("x"))).mark_pool_ready


def test_direct_connection_to_a_ghost_marks_the_pool_ready() -> None:
    direct = TopologyDescription.initial(TopologySettings(seeds=(A,), direct_connection=True))
    ghost = ServerDescription(A, {"ok": 1, "isreplicaset": True, "maxWireVersion": 21})
    assert plan_update(direct, ghost).mark_pool_ready


def sharded(*addresses: tuple, srv_max_hosts: int = 0) -> TopologyDescription:
    settings = TopologySettings(seeds=addresses, srv_max_hosts=srv_max_hosts)
    description = TopologyDescription.initial(settings)
    for address in addresses:
        mongos = ServerDescription(address, {"ok": 1, "msg": "isdbgrid", "maxWireVersion": 21})
        description = apply_server_description(description, mongos)
    assert description.topology_type is TopologyType.Sharded
    return description


def test_srv_rescan_removes_departed_keeps_present_adds_new() -> None:
    description = sharded(A, B)
    rescanned = apply_srv_hosts(description, [B, C])
    assert rescanned.addresses == [B, C]
    assert rescanned[B] is description[B]  # left alone
    assert rescanned[C].server_type is ServerType.Unknown


def test_srv_rescan_respects_srv_max_hosts() -> None:
    description = sharded(A, B, srv_max_hosts=2)
    rescanned = apply_srv_hosts(description, [A, ("d", 1), ("e", 1), ("f", 1)], random.Random(1))
    assert len(rescanned.addresses) == 2 and A in rescanned
    assert B not in rescanned


def test_srv_rescan_with_no_hosts_or_outside_sharded_changes_nothing() -> None:
    description = sharded(A)
    assert apply_srv_hosts(description, []) is description
    rs = replica_set(A)
    assert apply_srv_hosts(rs, [B]) is rs


def test_describe_names_each_server() -> None:
    text = describe(plan_update(replica_set(A), primary(A, ["a:27017"])).description)
    assert "ReplicaSetWithPrimary" in text and "a:27017: RSPrimary" in text
