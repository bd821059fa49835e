"""SDAM event planning and listener dispatch."""

from __future__ import annotations

import logging
from typing import Any, List

from greenmongo.monitoring import topology as monitoring
from greenmongo.sdam.events import closing_events, opening_events, replacement_events, update_events
from greenmongo.sdam.server_description import ServerDescription
from greenmongo.sdam.settings import TopologySettings
from greenmongo.sdam.topology_description import TopologyDescription
from greenmongo.sdam.update import apply_srv_hosts, plan_update

A, B = ("a", 27017), ("b", 27017)


def names(events: List[Any]) -> List[str]:
    return [type(e).__name__ for e in events]


def test_opening_then_discovery_then_closing() -> None:
    initial = TopologyDescription.initial(TopologySettings(seeds=(A,)))
    opened = opening_events("tid", initial)
    assert names(opened) == ["TopologyOpenedEvent", "TopologyDescriptionChangedEvent", "ServerOpeningEvent"]
    assert opened[1].previous_description.addresses == [] and opened[1].new_description is initial
    update = plan_update(initial, ServerDescription(A, {"ok": 1, "maxWireVersion": 21}))
    changed = update_events("tid", update)
    assert names(changed) == ["ServerDescriptionChangedEvent", "TopologyDescriptionChangedEvent"]
    assert changed[0].server_address == A and changed[0].topology_id == "tid"
    closed = closing_events("tid", update.description)
    assert names(closed) == ["ServerClosedEvent", "TopologyDescriptionChangedEvent", "TopologyClosedEvent"]
    assert closed[1].new_description.topology_type_name == "Unknown"


def test_srv_rescan_events() -> None:
    description = TopologyDescription.initial(TopologySettings(seeds=(A,)))
    rescanned = apply_srv_hosts(description, [B])
    assert names(replacement_events("tid", description, rescanned)) == [
        "ServerOpeningEvent", "ServerClosedEvent", "TopologyDescriptionChangedEvent"]
    assert replacement_events("tid", description, description) == []


class Recorder(monitoring.ServerHeartbeatListener, monitoring.TopologyListener):
    def __init__(self) -> None:
        self.seen: List[str] = []

    def started(self, event: Any) -> None:
        self.seen.append("started")

    def succeeded(self, event: Any) -> None:
        raise RuntimeError("listener bug")

    def failed(self, event: Any) -> None:
        self.seen.append(f"failed awaited={event.awaited}")

    def opened(self, event: Any) -> None:
        self.seen.append("topology opened")


def test_publish_dispatches_by_listener_kind_and_survives_listener_errors(caplog: Any) -> None:
    recorder = Recorder()
    server_only = monitoring.ServerListener()  # would raise NotImplementedError if called for heartbeats
    events = [
        monitoring.ServerHeartbeatStartedEvent(A, awaited=True),
        monitoring.ServerHeartbeatSucceededEvent(0.5, {"ok": 1}, A, awaited=True),
        monitoring.ServerHeartbeatFailedEvent(0.1, OSError("x"), A, awaited=False),
        monitoring.TopologyOpenedEvent("tid"),
    ]
    with caplog.at_level(logging.ERROR, logger="greenmongo.topology"):
        monitoring.publish_all([recorder, server_only], events)
    assert recorder.seen == ["started", "failed awaited=False", "topology opened"]
    assert "listener bug" in caplog.text


def test_heartbeat_event_fields() -> None:
    event = monitoring.ServerHeartbeatSucceededEvent(0.25, {"ok": 1}, A, awaited=True)
    assert (event.duration, event.reply, event.connection_id, event.awaited) == (0.25, {"ok": 1}, A, True)
    assert "awaited: True" in repr(event)
