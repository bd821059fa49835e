"""Listener calls happen after the topology's lock is released, in order, one at a time:
a slow SDAM or CMAP listener holds neither an operation's error handling nor server selection."""

from __future__ import annotations

from typing import Any, List, Tuple

import gevent
import pytest
from gevent.event import Event

from greenmongo.errors import AutoReconnect
from greenmongo.monitoring.pool import PoolClearedEvent, PoolReadyEvent
from greenmongo.monitoring.topology import (
    ServerDescriptionChangedEvent,
    ServerHeartbeatSucceededEvent,
    TopologyDescriptionChangedEvent,
)
from greenmongo.sdam.server_type import ServerType
from tests.servers.topology_harness import Recorder, SimulatedTopology, make_topology
from tests.waits import wait_until


@pytest.fixture
def sim():
    with SimulatedTopology() as simulated:
        yield simulated


class SlowRecorder(Recorder):
    """Records every event; once armed, blocks in the first call matching ``block_on`` until ``gate`` is set.

    Also notes whether two calls were ever in progress at once (the spec forbids it).
    """

    def __init__(self) -> None:
        super().__init__()
        self.block_on: Any = None
        self.gate = Event()
        self.entered = Event()
        self.active = 0
        self.overlapped = False

    def _add(self, event: Any) -> None:
        self.active += 1
        self.overlapped |= self.active > 1
        try:
            super()._add(event)
            if self.block_on is not None and self.block_on(event):
                self.block_on = None
                self.entered.set()
                self.gate.wait()
        finally:
            self.active -= 1


def _to_unknown(event: Any) -> bool:
    return (isinstance(event, ServerDescriptionChangedEvent)
            and event.new_description.server_type is ServerType.Unknown)


def _summary(events: List[Any]) -> List[Tuple[str, Any]]:
    out: List[Tuple[str, Any]] = []
    for event in events:
        if isinstance(event, ServerDescriptionChangedEvent):
            out.append(("server", event.new_description.server_type.name))
        elif isinstance(event, TopologyDescriptionChangedEvent):
            out.append(("topology", None))
        elif isinstance(event, (PoolClearedEvent, PoolReadyEvent)):
            out.append((type(event).__name__, None))
    return out


@pytest.mark.parametrize("slow", ["sdam", "cmap"])
def test_a_slow_listener_holds_neither_error_handling_nor_selection(sim, slow):
    (a,) = sim.mongoses(1)
    listener = SlowRecorder()
    topology = make_topology([a.address], mode="poll", heartbeat=5.0, listeners=[listener])
    try:
        server = topology.select_server(is_write=True)
        server.end_operation()
        start = len(listener.events)
        listener.block_on = _to_unknown if slow == "sdam" else (lambda e: isinstance(e, PoolClearedEvent))

        # An operation's network error: the server goes Unknown and its pool is cleared; the greenlet
        # handling it then delivers its own events and is stuck in the slow listener.
        first = gevent.spawn(server.handle_error, AutoReconnect("first error"))
        assert listener.entered.wait(3)
        assert topology.description[a.address].server_type is ServerType.Unknown

        # Selection needs the monitor to apply a new check: the topology's lock must be free.
        with gevent.Timeout(3):
            again = topology.select_server(is_write=True)
        again.end_operation()
        assert topology.description[a.address].server_type is ServerType.Mongos
        # Another operation's error handling is not held either.
        with gevent.Timeout(1):
            decision = server.handle_error(AutoReconnect("second error"))
        assert decision.unknown is not None and decision.clear_pool
        assert not first.dead and topology._publisher.pending > 0  # the events wait their turn

        listener.gate.set()
        first.join(2)
        assert first.dead and first.successful()
        wait_until(lambda: topology._publisher.pending == 0
                   and len([e for e in listener.events[start:] if _to_unknown(e)]) >= 2, 3, "delivery")
        events = listener.events[start:]
        # Every change's events, in the order of the changes, never two calls at once.
        assert _summary(events)[:9] == [
            ("server", "Unknown"), ("topology", None), ("PoolClearedEvent", None),  # the first error
            ("PoolReadyEvent", None), ("server", "Mongos"), ("topology", None),  # the monitor's check
            ("server", "Unknown"), ("topology", None), ("PoolClearedEvent", None),  # the second error
        ]
        first_cleared = next(i for i, e in enumerate(events) if isinstance(e, PoolClearedEvent))
        ready = next(i for i, e in enumerate(events) if isinstance(e, PoolReadyEvent))
        assert any(isinstance(e, ServerHeartbeatSucceededEvent) for e in events[first_cleared:ready])
        assert not listener.overlapped
    finally:
        listener.gate.set()
        topology.close()


def test_closing_events_come_after_the_last_heartbeat_even_behind_a_slow_listener(sim):
    (a,) = sim.mongoses(1)
    listener = SlowRecorder()
    topology = make_topology([a.address], mode="poll", heartbeat=5.0, listeners=[listener])
    try:
        server = topology.select_server(is_write=True)
        server.end_operation()
        listener.block_on = _to_unknown
        first = gevent.spawn(server.handle_error, AutoReconnect("error"))
        assert listener.entered.wait(3)
    finally:
        with gevent.Timeout(3):
            topology.close()  # not held by the listener either
    assert not first.dead
    listener.gate.set()
    first.join(2)
    wait_until(lambda: topology._publisher.pending == 0, 3, "delivery")
    names = listener.names()
    assert names[-1] == "TopologyClosedEvent"
    assert names.index("TopologyClosedEvent") > max(i for i, n in enumerate(names) if n.startswith("ServerHeartbeat"))
    assert not listener.overlapped
