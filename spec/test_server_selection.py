"""Server Selection spec tests: server_selection (suitability and latency window), in_window, rtt.

Per the suite's README: build a TopologyDescription from ``topology_description``,
a read preference from ``read_preference``, and check that the pure selection
core returns ``suitable_servers`` and ``in_latency_window``; in_window files run
the operationCount-based choice many times and compare frequencies; rtt files
check the moving average.

Read preferences are a local stand-in (``types.SimpleNamespace`` with ``mode``,
``tag_sets``, ``max_staleness``): the selection code takes any such object.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

import pytest

from greenmongo.bson.objectid import ObjectId
from greenmongo.options.read_preferences import make_read_preference
from greenmongo.errors import ConfigurationError
from greenmongo.sdam.address import format_address, parse_address
from greenmongo.sdam.rtt import RoundTripTimes
from greenmongo.sdam.selection import choose_server, select_servers, suitable_servers
from greenmongo.sdam.server_description import ServerDescription
from greenmongo.sdam.settings import TopologySettings
from greenmongo.sdam.topology_description import TopologyDescription
from greenmongo.sdam.topology_type import TopologyType
from spec.support import file_params, load_json

SUITE = "server-selection/tests"

#: The files leave wire versions out where they do not matter; any compatible version will do.
DEFAULT_MAX_WIRE_VERSION = 21

#: hello replies that make ServerDescription produce each ServerType the files name.
REPLY_FOR_TYPE: Dict[str, Dict[str, Any]] = {
    "Standalone": {},
    "Mongos": {"msg": "isdbgrid"},
    "RSPrimary": {"setName": "rs", "isWritablePrimary": True},
    "RSSecondary": {"setName": "rs", "isWritablePrimary": False, "secondary": True},
    "RSArbiter": {"setName": "rs", "isWritablePrimary": False, "arbiterOnly": True},
    "RSOther": {"setName": "rs", "isWritablePrimary": False, "hidden": True},
    "RSGhost": {"isreplicaset": True},
    "LoadBalancer": {"serviceId": ObjectId("000000000000000000000001")},
}

MODES = {"Primary": 0, "PrimaryPreferred": 1, "Secondary": 2, "SecondaryPreferred": 3, "Nearest": 4}


def extended_json(obj: Dict[str, Any]) -> Any:
    if len(obj) == 1 and "$numberLong" in obj:
        return int(obj["$numberLong"])
    return obj


def server_from_spec(spec: Mapping[str, Any]) -> ServerDescription:
    """A ServerDescription with the type, RTT, tags and times the file gives (ms in, seconds stored)."""
    address = parse_address(spec["address"])
    kind = spec["type"]
    last_update = spec.get("lastUpdateTime", 0) / 1000.0
    rtt = spec["avg_rtt_ms"] / 1000.0 if "avg_rtt_ms" in spec else None
    if kind not in REPLY_FOR_TYPE:  # Unknown, and PossiblePrimary (which SDAM says is Unknown to us)
        return ServerDescription(address, last_update_time=last_update)
    reply: Dict[str, Any] = {"ok": 1, "minWireVersion": 0,
                             "maxWireVersion": spec.get("maxWireVersion", DEFAULT_MAX_WIRE_VERSION)}
    reply.update(REPLY_FOR_TYPE[kind])
    if "tags" in spec:
        reply["tags"] = spec["tags"]
    if "lastWrite" in spec:
        reply["lastWrite"] = spec["lastWrite"]
    sd = ServerDescription(address, reply, round_trip_time=rtt, last_update_time=last_update)
    assert sd.server_type_name == kind
    return sd


def topology_from_spec(spec: Mapping[str, Any], heartbeat_frequency_ms: Optional[int] = None) -> TopologyDescription:
    servers = [server_from_spec(s) for s in spec["servers"]]
    settings_kwargs: Dict[str, Any] = {"seeds": tuple(sd.address for sd in servers)}
    if heartbeat_frequency_ms is not None:
        settings_kwargs["heartbeat_frequency"] = heartbeat_frequency_ms / 1000.0
    topology_type = TopologyType[spec["type"]]
    set_name = "rs" if topology_type in (TopologyType.ReplicaSetNoPrimary, TopologyType.ReplicaSetWithPrimary) else None
    return TopologyDescription(topology_type, {sd.address: sd for sd in servers}, set_name, None, None,
                               TopologySettings(**settings_kwargs))


def read_preference_from_spec(spec: Optional[Mapping[str, Any]]) -> Any:
    """The driver's own read preference object for the case's ``read_preference``."""
    spec = spec or {}
    return make_read_preference(MODES[spec.get("mode", "Primary")], spec.get("tag_sets"),
                                spec.get("maxStalenessSeconds", -1))


def addresses(servers: List[Any]) -> List[str]:
    return sorted(format_address(s.address) if isinstance(s, ServerDescription) else s["address"]
                  for s in servers)


def run_selection_case(case: Mapping[str, Any], description: TopologyDescription) -> None:
    """Shared by the server_selection and max-staleness files."""
    is_write = case.get("operation", "read") == "write"
    deprioritized = [parse_address(s["address"]) for s in case.get("deprioritized_servers", [])]
    if case.get("error"):
        # The error may come from building the read preference (e.g. a max staleness below 90s)
        # or from selection (e.g. one the heartbeat frequency makes impossible).
        with pytest.raises(ConfigurationError):
            read_preference = read_preference_from_spec(case.get("read_preference"))
            select_servers(description, read_preference, is_write=is_write, deprioritized=deprioritized)
        return
    read_preference = read_preference_from_spec(case.get("read_preference"))
    if "suitable_servers" in case:
        suitable = suitable_servers(description, read_preference, is_write=is_write,
                                    deprioritized=deprioritized)
        assert addresses(suitable) == addresses(case["suitable_servers"])
    in_window = select_servers(description, read_preference, is_write=is_write, deprioritized=deprioritized)
    assert addresses(in_window) == addresses(case["in_latency_window"])


@pytest.mark.parametrize("path", file_params(f"{SUITE}/server_selection", pattern="**/*.json"))
def test_server_selection(path: Path) -> None:
    case = load_json(path, object_hook=extended_json)
    run_selection_case(case, topology_from_spec(case["topology_description"]))


@pytest.mark.parametrize("path", file_params(f"{SUITE}/in_window"))
def test_in_window(path: Path) -> None:
    case = load_json(path)
    description = topology_from_spec(case["topology_description"])
    counts = {parse_address(s["address"]): s["operation_count"] for s in case["mocked_topology_state"]}
    nearest = read_preference_from_spec({"mode": "Nearest"})
    rng = random.Random(20240601)
    iterations = case["iterations"]
    chosen: Counter = Counter()
    for _ in range(iterations):
        candidates = select_servers(description, nearest)
        server = choose_server(candidates, counts.__getitem__, rng)
        assert server is not None
        chosen[format_address(server.address)] += 1
    outcome = case["outcome"]
    for address, expected in outcome["expected_frequencies"].items():
        observed = chosen[address] / iterations
        if expected in (0, 1):
            assert observed == expected, address
        else:
            assert abs(observed - expected) <= outcome["tolerance"], (address, observed, expected)


@pytest.mark.parametrize("path", file_params(f"{SUITE}/rtt"))
def test_rtt(path: Path) -> None:
    case = load_json(path)
    rtt = RoundTripTimes()
    if case["avg_rtt_ms"] != "NULL":
        rtt.add_sample(case["avg_rtt_ms"])
    rtt.add_sample(case["new_rtt_ms"])
    assert rtt.average == pytest.approx(case["new_avg_rtt"])
