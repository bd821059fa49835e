"""Pure server selection beyond the spec files: validation, custom selectors, the final pick, RTT."""

from __future__ import annotations

import random
import types
from collections import Counter

import pytest

from greenmongo.errors import ConfigurationError
from greenmongo.sdam.rtt import RoundTripTimes, moving_average
from greenmongo.sdam.selection import (
    NEAREST, PRIMARY, SECONDARY, choose_server, has_readable_server, has_writable_server,
    latency_window, select_servers, staleness,
)
from greenmongo.sdam.server_description import ServerDescription
from greenmongo.sdam.settings import TopologySettings
from greenmongo.sdam.topology_description import TopologyDescription
from greenmongo.sdam.topology_type import TopologyType

A, B, C = ("a", 27017), ("b", 27017), ("c", 27017)


def read_pref(mode: int, tag_sets: list = None, max_staleness: int = -1) -> types.SimpleNamespace:
    return types.SimpleNamespace(mode=mode, tag_sets=tag_sets if tag_sets is not None else [{}],
                                 max_staleness=max_staleness)


def member(address: tuple, kind: str, rtt_ms: float, **extra: object) -> ServerDescription:
    fields = {"setName": "rs", "secondary": kind == "secondary", "isWritablePrimary": kind == "primary"}
    return ServerDescription(address, {"ok": 1, "maxWireVersion": 21, **fields, **extra},
                             round_trip_time=rtt_ms / 1000, last_update_time=100.0)


def replica_set(*servers: ServerDescription, heartbeat: float = 10.0) -> TopologyDescription:
    settings = TopologySettings(seeds=tuple(s.address for s in servers), replica_set_name="rs",
                                heartbeat_frequency=heartbeat)
    has_primary = any(s.server_type.name == "RSPrimary" for s in servers)
    kind = TopologyType.ReplicaSetWithPrimary if has_primary else TopologyType.ReplicaSetNoPrimary
    return TopologyDescription(kind, {s.address: s for s in servers}, "rs", None, None, settings)


def test_primary_with_tags_or_staleness_is_rejected() -> None:
    description = replica_set(member(A, "primary", 1))
    with pytest.raises(ConfigurationError, match="tag sets"):
        select_servers(description, read_pref(PRIMARY, [{"dc": "ny"}]))
    with pytest.raises(ConfigurationError, match="maxStalenessSeconds"):
        select_servers(description, read_pref(PRIMARY, max_staleness=120))
    assert select_servers(description, read_pref(PRIMARY, [{}])) == [description[A]]


def test_writes_ignore_the_read_preference() -> None:
    description = replica_set(member(A, "primary", 1), member(B, "secondary", 1))
    assert select_servers(description, read_pref(SECONDARY), is_write=True) == [description[A]]


def test_incompatible_topology_raises_before_selecting() -> None:
    old = ServerDescription(A, {"ok": 1, "msg": "isdbgrid", "maxWireVersion": 3}, round_trip_time=0.001)
    description = TopologyDescription(TopologyType.Sharded, {A: old}, None, None, None,
                                      TopologySettings(seeds=(A,)))
    with pytest.raises(ConfigurationError, match="wire version"):
        select_servers(description, is_write=True)


def test_custom_selector_runs_before_the_latency_window() -> None:
    description = replica_set(member(A, "primary", 1), member(B, "secondary", 5), member(C, "secondary", 100))
    only_c = select_servers(description, read_pref(NEAREST),
                            server_selector=lambda servers: [s for s in servers if s.address == C])
    assert only_c == [description[C]]


def test_latency_window_boundary_is_inclusive() -> None:
    servers = [member(A, "secondary", 5), member(B, "secondary", 20), member(C, "secondary", 20.5)]
    assert [s.address for s in latency_window(servers, 15)] == [A, B]
    assert [s.address for s in latency_window(servers, 0)] == [A]


def test_staleness_with_and_without_primary() -> None:
    primary = member(A, "primary", 1, lastWrite={"lastWriteDate": 50_000})
    secondary = member(B, "secondary", 1, lastWrite={"lastWriteDate": 20_000})
    with_primary = replica_set(primary, secondary, heartbeat=10)
    assert staleness(with_primary, with_primary[B]) == pytest.approx(40.0)  # 30 s behind + heartbeat
    assert staleness(with_primary, with_primary[A]) == 0.0
    freshest = member(C, "secondary", 1, lastWrite={"lastWriteDate": 80_000})
    no_primary = replica_set(secondary, freshest, heartbeat=10)
    assert staleness(no_primary, no_primary[B]) == pytest.approx(70.0)


def test_has_readable_and_writable_server() -> None:
    description = replica_set(member(B, "secondary", 1))
    assert has_readable_server(description, read_pref(SECONDARY))
    assert not has_readable_server(description)
    assert not has_writable_server(description)


def test_choose_server_prefers_the_less_busy_of_two() -> None:
    servers = [member(A, "secondary", 1), member(B, "secondary", 1)]
    busy = {A: 10, B: 0}
    rng = random.Random(7)
    assert all(choose_server(servers, busy.__getitem__, rng).address == B for _ in range(50))
    assert choose_server([], busy.__getitem__) is None
    assert choose_server(servers[:1], busy.__getitem__) is servers[0]


def test_choose_server_spreads_ties() -> None:
    servers = [member(A, "secondary", 1), member(B, "secondary", 1), member(C, "secondary", 1)]
    rng = random.Random(3)
    picks = Counter(choose_server(servers, lambda _: 0, rng).address for _ in range(3000))
    assert all(900 < picks[address] < 1100 for address in (A, B, C))


def test_round_trip_times_average_and_recent_minimum() -> None:
    rtt = RoundTripTimes()
    assert rtt.average is None and rtt.minimum == 0.0
    rtt.add_sample(0.010)
    assert rtt.average == 0.010 and rtt.minimum == 0.0  # minimum needs two samples
    rtt.add_sample(0.020)
    assert rtt.average == pytest.approx(0.012) and rtt.minimum == 0.010
    for _ in range(10):
        rtt.add_sample(0.050)
    assert rtt.minimum == 0.050  # the 0.010 and 0.020 samples fell out of the last 10
    rtt.reset()
    assert rtt.average is None and rtt.minimum == 0.0
    assert moving_average(None, 3.0) == 3.0
    with pytest.raises(ValueError):
        rtt.add_sample(-1)
