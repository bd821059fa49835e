"""Server Discovery and Monitoring spec tests (the non-unified ones).

Per the suite's README, each file is one client: responses are fed to the
pure core as check outcomes, applicationErrors as errors on pooled
connections, and each phase's outcome is compared with the resulting
TopologyDescription (or, under monitoring/, with the SDAM events published).

``SimulatedTopology`` below stands in for the I/O layer: it keeps one pool
generation per server and a listener, and applies exactly the decisions the
real core returns (plan_update, decide_application_error, decide_check_failure,
the events planner), so no SDAM logic is duplicated here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Dict, List, Mapping
from urllib.parse import parse_qsl

import pytest

from greenmongo.bson.objectid import ObjectId
from greenmongo.errors import AutoReconnect, NetworkTimeout, OperationFailure
from greenmongo.monitoring import topology as monitoring
from greenmongo.sdam import errors as sdam_errors
from greenmongo.sdam.address import format_address, parse_address
from greenmongo.sdam.events import opening_events, update_events
from greenmongo.sdam.server_description import ServerDescription
from greenmongo.sdam.settings import TopologySettings
from greenmongo.sdam.topology_description import TopologyDescription
from greenmongo.sdam.update import plan_update
from spec.support import file_params, load_json

SUITE = "server-discovery-and-monitoring/tests"
DIRECTORIES = ("single", "rs", "sharded", "load-balanced", "errors", "monitoring")


def extended_json(obj: Dict[str, Any]) -> Any:
    """The two Extended JSON forms these files use: ObjectId and Int64."""
    if len(obj) == 1:
        if "$oid" in obj:
            return ObjectId(obj["$oid"])
        if "$numberLong" in obj:
            return int(obj["$numberLong"])
    return obj


def settings_from_uri(uri: str) -> TopologySettings:
    """Just enough connection-string parsing for these files: hosts and three options."""
    rest = uri[len("mongodb://"):]
    hosts = re.split(r"[/?]", rest, maxsplit=1)[0]
    query = rest.partition("?")[2]
    options = {k.lower(): v for k, v in parse_qsl(query)}
    return TopologySettings(
        seeds=tuple(parse_address(h) for h in hosts.split(",")),
        replica_set_name=options.get("replicaset"),
        direct_connection=options.get("directconnection") == "true",
        load_balanced=options.get("loadbalanced") == "true",
    )


class EventRecorder(monitoring.ServerListener, monitoring.TopologyListener):
    """Records every topology and server event in order."""

    def __init__(self) -> None:
        self.events: List[Any] = []

    def opened(self, event: Any) -> None:
        self.events.append(event)

    description_changed = closed = opened


class SimulatedTopology:
    """The I/O layer's bookkeeping with no I/O: a description, pool generations and listeners."""

    TOPOLOGY_ID = "42"

    def __init__(self, settings: TopologySettings) -> None:
        self.recorder = EventRecorder()
        self.listeners = [self.recorder]
        self.description = TopologyDescription.initial(settings)
        self.generations: Dict[Any, int] = {address: 0 for address in self.description.addresses}
        monitoring.publish_all(self.listeners, opening_events(self.TOPOLOGY_ID, self.description))
        if settings.load_balanced:  # Load Balancer spec: no monitor, the server is a LoadBalancer at once
            self.apply(ServerDescription.load_balancer(settings.seeds[0]))

    def apply(self, server: ServerDescription) -> None:
        update = plan_update(self.description, server)
        self.description = update.description
        for address in update.added:
            self.generations[address] = 0
        for address in update.removed:
            self.generations.pop(address, None)
        for address in update.pools_to_clear:
            self.generations[address] += 1
        monitoring.publish_all(self.listeners, update_events(self.TOPOLOGY_ID, update))

    def check_succeeded(self, address: Any, reply: Mapping[str, Any]) -> None:
        self.apply(ServerDescription(address, reply, round_trip_time=0.0))

    def check_failed(self, address: Any) -> None:
        previous = self.description.get(address)
        if previous is None:
            return  # a monitor of a removed server: its outcome is ignored
        decision = sdam_errors.decide_check_failure(previous, AutoReconnect("mock network error"))
        self.apply(decision.unknown)
        if decision.clear_pool and address in self.generations:
            self.generations[address] += 1

    def application_error(self, spec: Mapping[str, Any]) -> None:
        address = parse_address(spec["address"])
        generation = spec.get("generation", self.generations.get(address, 0))
        kind = spec["type"]
        if kind == "command":
            response = spec["response"]
            exc: BaseException = OperationFailure(response.get("errmsg", ""), response.get("code"), response)
        elif kind == "timeout":
            exc = NetworkTimeout("mock network timeout")
        else:
            exc = AutoReconnect("mock network error")
        before_handshake = spec["when"] == "beforeHandshakeCompletes"
        if before_handshake and kind != "command":
            # What the CMAP pool does to connection-establishment I/O failures (client backpressure).
            sdam_errors.add_backpressure_labels(exc)
        error = sdam_errors.ApplicationError.from_exception(
            address, exc, generation=generation,
            completed_handshake=not before_handshake,
            max_wire_version=spec.get("maxWireVersion"))
        decision = sdam_errors.decide_application_error(
            self.description, self.generations.get(address, 0), error)
        if decision.unknown is not None:
            self.apply(decision.unknown)
        if decision.clear_pool and address in self.generations:
            self.generations[address] += 1


# -- outcome comparison -----------------------------------------------------------

def expected_type(name: str) -> str:
    # The SDAM spec: multi-threaded clients treat PossiblePrimary as Unknown.
    return "Unknown" if name == "PossiblePrimary" else name


def check_server(topology: SimulatedTopology, address_text: str, expected: Mapping[str, Any]) -> None:
    address = parse_address(address_text)
    sd = topology.description.get(address)
    assert sd is not None, f"{address_text} missing from {topology.description}"
    where = f"server {address_text}"
    assert sd.server_type_name == expected_type(expected["type"]), where
    fields = {
        "setName": sd.replica_set_name, "setVersion": sd.set_version, "electionId": sd.election_id,
        "logicalSessionTimeoutMinutes": sd.logical_session_timeout_minutes,
        "minWireVersion": sd.min_wire_version, "maxWireVersion": sd.max_wire_version,
        "topologyVersion": sd.topology_version,
    }
    for key, actual in fields.items():
        if key in expected:
            assert actual == expected[key], f"{where} {key}: {actual!r} != {expected[key]!r}"
    if "error" in expected:
        assert sd.error is not None and expected["error"] in str(sd.error), f"{where} error: {sd.error!r}"
    if "pool" in expected:
        actual_generation = topology.generations.get(address)
        assert actual_generation == expected["pool"]["generation"], f"{where} pool generation"


def check_outcome(topology: SimulatedTopology, outcome: Mapping[str, Any]) -> None:
    description = topology.description
    assert description.topology_type_name == outcome["topologyType"]
    assert description.replica_set_name == outcome["setName"]
    expected_servers = outcome["servers"]
    assert sorted(format_address(a) for a in description.addresses) == sorted(expected_servers)
    for address_text, expected in expected_servers.items():
        check_server(topology, address_text, expected)
    if "logicalSessionTimeoutMinutes" in outcome:
        assert description.logical_session_timeout_minutes == outcome["logicalSessionTimeoutMinutes"]
    if "maxSetVersion" in outcome:
        assert description.max_set_version == outcome["maxSetVersion"]
    if "maxElectionId" in outcome:
        assert description.max_election_id == outcome["maxElectionId"]
    if "compatible" in outcome:
        assert description.compatible == outcome["compatible"], description.compatibility_error


def server_description_matches(actual: ServerDescription, expected: Mapping[str, Any]) -> None:
    assert format_address(actual.address) == expected["address"]
    assert actual.server_type_name == expected_type(expected["type"]), expected
    for key, values in (("hosts", actual.hosts), ("passives", actual.passives), ("arbiters", actual.arbiters)):
        assert sorted(format_address(a) for a in values) == sorted(expected.get(key, [])), key
    assert actual.replica_set_name == expected.get("setName")
    primary = format_address(actual.primary) if actual.primary else None
    assert primary == expected.get("primary")


def topology_description_matches(actual: TopologyDescription, expected: Mapping[str, Any]) -> None:
    assert actual.topology_type_name == expected["topologyType"]
    assert actual.replica_set_name == expected.get("setName")
    servers = {format_address(sd.address): sd for sd in actual.server_descriptions().values()}
    assert sorted(servers) == sorted(s["address"] for s in expected["servers"])
    for server in expected["servers"]:
        server_description_matches(servers[server["address"]], server)


EVENT_TYPES = {
    "topology_opening_event": monitoring.TopologyOpenedEvent,
    "topology_description_changed_event": monitoring.TopologyDescriptionChangedEvent,
    "server_opening_event": monitoring.ServerOpeningEvent,
    "server_closed_event": monitoring.ServerClosedEvent,
    "server_description_changed_event": monitoring.ServerDescriptionChangedEvent,
}


def check_events(actual: List[Any], expected: List[Mapping[str, Any]]) -> None:
    assert [type(e).__name__ for e in actual] == [
        EVENT_TYPES[next(iter(e))].__name__ for e in expected]
    for event, wrapper in zip(actual, expected):
        (name, spec), = wrapper.items()
        if "address" in spec:
            assert format_address(event.server_address) == spec["address"], name
        if name == "server_description_changed_event":
            server_description_matches(event.previous_description, spec["previousDescription"])
            server_description_matches(event.new_description, spec["newDescription"])
        elif name == "topology_description_changed_event":
            topology_description_matches(event.previous_description, spec["previousDescription"])
            topology_description_matches(event.new_description, spec["newDescription"])


# -- the test -------------------------------------------------------------------------

def all_files() -> list:
    out = []
    for directory in DIRECTORIES:
        out.extend(file_params(f"{SUITE}/{directory}"))
    return out


@pytest.mark.parametrize("path", all_files())
def test_sdam(path: Path) -> None:
    spec = load_json(path, object_hook=extended_json)
    topology = SimulatedTopology(settings_from_uri(spec["uri"]))
    is_monitoring = path.parent.name == "monitoring"
    for phase in spec["phases"]:
        for address_text, reply in phase.get("responses", []):
            address = parse_address(address_text)
            if reply:
                topology.check_succeeded(address, reply)
            else:
                topology.check_failed(address)
        for error in phase.get("applicationErrors", []):
            topology.application_error(error)
        outcome = phase["outcome"]
        if is_monitoring:
            check_events(topology.recorder.events, outcome["events"])
            topology.recorder.events.clear()
        else:
            check_outcome(topology, outcome)

