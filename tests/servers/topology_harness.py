"""A simulated multi-host deployment on loopback: several ScriptedServers posing as members or mongoses.

Each :class:`Member` answers hello from its current state, which a test
changes at runtime (``set``, ``elect``, ``step_down``, ``hang``). Every change
increments the member's topologyVersion counter and wakes awaitable hellos, so
a streaming monitor sees it at once, as with a real server. Awaitable hellos
with exhaustAllowed are answered as a moreToCome stream. A hanging member
answers nothing (hello or application commands) until resumed.

    with SimulatedTopology() as sim:
        a, b, c = sim.replica_set(3)           # a is primary
        ... Topology(seeds=[a.address], ...) ...
        sim.elect(b)                           # a secondary, b primary (new electionId)
"""

from __future__ import annotations

from time import monotonic
from typing import Any, Iterator, List, Mapping, Optional, Sequence

import gevent
from gevent.event import Event

from greenmongo.bson.objectid import ObjectId
from greenmongo.monitoring.pool import ConnectionPoolListener
from greenmongo.monitoring.topology import ServerHeartbeatListener, ServerListener, TopologyListener
from tests.servers.scripted import Close, Exhaust, Request, ScriptedServer, default_hello

HELLO_NAMES = ("hello", "ismaster")
#: Application commands a member answers with ok:1 (and holds while hanging).
APP_COMMANDS = ("ping", "find", "insert", "sleep")


class _Abort(Exception):
    """Raised inside a reply stream to drop the connection (the server went away or resumed)."""


class Member:
    """One simulated server. ``fields`` is its hello reply minus connection-specific parts."""

    def __init__(self, sim: "SimulatedTopology", *, streaming: bool = True) -> None:
        self._sim = sim
        self.streaming = streaming  # False: no topologyVersion (a pre-4.4 server, polled)
        self.fields: dict[str, Any] = default_hello()
        self.process_id = ObjectId()
        self.counter = 0
        self.delay = 0.0  # seconds before answering a non-awaited hello (simulated latency)
        self.hanging = False
        self.stopped = False
        self.fail_handshakes = 0  # close this many new connections at their first hello
        self._connections_seen: set[int] = set()
        self._changed = Event()
        self._resumed = Event()
        self._resumed.set()
        self._stopping = Event()
        self.server = ScriptedServer(hello=self.fields)
        for name in HELLO_NAMES:
            self.server.on(name, self._on_hello)
        for name in APP_COMMANDS:
            self.server.on(name, self._on_command)
        self.server.start()

    def __repr__(self) -> str:
        return f"<Member {self.host} {self.fields.get('setName') or self.fields.get('msg') or 'standalone'}>"

    @property
    def address(self) -> tuple[str, int]:
        return self.server.address

    @property
    def host(self) -> str:
        host, port = self.server.address
        return f"{host}:{port}"

    @property
    def topology_version(self) -> dict[str, Any]:
        return {"processId": self.process_id, "counter": self.counter}

    # -- changing state --------------------------------------------------------------

    def set(self, **fields: Any) -> None:
        """Update hello fields (None removes one) and announce the change."""
        for key, value in fields.items():
            if value is None:
                self.fields.pop(key, None)
            else:
                self.fields[key] = value
        self.changed()

    def replace(self, fields: Mapping[str, Any]) -> None:
        self.fields = dict(fields)
        self.changed()

    def changed(self) -> None:
        """A significant change: new topologyVersion counter, awaitable hellos answer now."""
        self.counter += 1
        self._wake()

    def _wake(self) -> None:
        fired, self._changed = self._changed, Event()
        fired.set()

    def hang(self) -> None:
        """Stop answering anything (open streams included) until ``resume()``."""
        self.hanging = True
        self._resumed.clear()
        self._wake()

    def resume(self) -> None:
        self.hanging = False
        self._resumed.set()
        self._wake()

    def stop(self) -> None:
        self.stopped = True
        self._stopping.set()
        self._resumed.set()
        self._wake()
        self.server.stop()

    def close_connections(self) -> None:
        self.server.close_connections()

    def hello_requests(self) -> List[Request]:
        return [r for r in self.server.requests if r.name.lower() in HELLO_NAMES]

    # -- answering -------------------------------------------------------------------

    def reply(self, request: Request) -> dict[str, Any]:
        reply = dict(self.fields)
        if self.streaming:
            reply["topologyVersion"] = self.topology_version
        reply.setdefault("connectionId", request.connection_number)
        if request.name != "hello":
            reply["ismaster"] = reply.pop("isWritablePrimary", False)
        return reply

    def _hold_while_hanging(self) -> None:
        while self.hanging and not self.stopped:
            self._resumed.wait()
        if self.stopped:
            raise _Abort()

    def _on_command(self, request: Request) -> Any:
        if self.hanging:
            try:
                self._hold_while_hanging()
            except _Abort:
                pass
            return Close()  # whoever waited has given up on this connection by now
        if request.name == "sleep":  # a slow operation; ends early when the member stops
            if self._stopping.wait(float(request.command.get("seconds", 0.1))):
                return Close()
        return {"ok": 1.0}

    def _on_hello(self, request: Request) -> Any:
        first = request.connection_number not in self._connections_seen
        self._connections_seen.add(request.connection_number)
        if first and self.fail_handshakes > 0:
            self.fail_handshakes -= 1
            return Close()
        if self.hanging:
            self._hold_while_hanging()  # then the connection is dropped (an _Abort would too)
            return Close()
        if self.stopped:
            return Close()
        version = request.command.get("topologyVersion")
        max_await = request.command.get("maxAwaitTimeMS")
        if version is not None and max_await is not None and self.streaming:
            if request.exhaust_allowed:
                return Exhaust(self._stream(request, version, max_await / 1000.0))
            self._await_change(version, max_await / 1000.0)
            if self.hanging or self.stopped:
                self._hold_while_hanging()
                return Close()
            return self.reply(request)
        if self.delay:
            gevent.sleep(self.delay)
        return self.reply(request)

    def _await_change(self, version: Mapping[str, Any], max_await: float) -> None:
        """Return when our topologyVersion is newer than ``version``, or after ``max_await``."""
        if version.get("processId") != self.process_id or int(version.get("counter", 0)) < self.counter:
            return
        changed = self._changed
        changed.wait(max_await)

    def _stream(self, request: Request, version: Mapping[str, Any],
                max_await: float) -> Iterator[tuple[dict[str, Any], bool]]:
        while True:
            self._await_change(version, max_await)
            if self.hanging or self.stopped:
                self._hold_while_hanging()
                raise _Abort()
            reply = self.reply(request)
            yield reply, True
            version = reply["topologyVersion"]


class SimulatedTopology:
    """A set of members on loopback ports, configured as a replica set, mongoses or standalones."""

    def __init__(self) -> None:
        self.members: List[Member] = []
        self._election = 0

    def __enter__(self) -> "SimulatedTopology":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        for member in self.members:
            member.stop()

    def add(self, count: int = 1, *, streaming: bool = True) -> List[Member]:
        new = [Member(self, streaming=streaming) for _ in range(count)]
        self.members.extend(new)
        return new

    # -- shapes -----------------------------------------------------------------------

    def replica_set(self, count: int = 3, *, set_name: str = "rs", primary: Optional[int] = 0,
                    streaming: bool = True, tags: Optional[Sequence[Mapping[str, str]]] = None) -> List[Member]:
        members = self.add(count, streaming=streaming)
        self.set_name = set_name
        self.rs_members = members
        hosts = [m.host for m in members]
        for index, member in enumerate(members):
            member.fields.update(setName=set_name, hosts=hosts, me=member.host, setVersion=1,
                                 isWritablePrimary=False, secondary=True)
            if tags is not None:
                member.fields["tags"] = dict(tags[index])
        if primary is not None:
            self.elect(members[primary])
        else:
            for member in members:
                member.changed()
        return members

    def elect(self, new_primary: Member) -> None:
        """``new_primary`` wins an election: a higher electionId, everyone else a secondary."""
        self._election += 1
        election_id = ObjectId(f"7fffffff{self._election:016x}")
        for member in self.rs_members:
            is_primary = member is new_primary
            member.fields.update(isWritablePrimary=is_primary, secondary=not is_primary,
                                 primary=new_primary.host)
            if is_primary:
                member.fields["electionId"] = election_id
            else:
                member.fields.pop("electionId", None)
            member.changed()

    def step_down(self, primary: Member) -> None:
        """The primary steps down and nobody is elected yet."""
        for member in self.rs_members:
            member.fields.update(isWritablePrimary=False, secondary=True)
            member.fields.pop("primary", None)
            member.fields.pop("electionId", None)
            member.changed()

    def mongoses(self, count: int = 2, *, streaming: bool = True) -> List[Member]:
        members = self.add(count, streaming=streaming)
        for member in members:
            member.fields["msg"] = "isdbgrid"
            member.changed()
        return members


# -- helpers for topology tests ---------------------------------------------------------

class Recorder(ServerHeartbeatListener, ServerListener, TopologyListener, ConnectionPoolListener):
    """Records every SDAM, heartbeat and pool event with its monotonic arrival time."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.times: list[float] = []
        self._arrived = Event()

    def _add(self, event: Any) -> None:
        self.events.append(event)
        self.times.append(monotonic())
        fired, self._arrived = self._arrived, Event()
        fired.set()

    # SDAM (server and topology listeners share opened/closed/description_changed)
    def opened(self, event: Any) -> None:
        self._add(event)

    def closed(self, event: Any) -> None:
        self._add(event)

    def description_changed(self, event: Any) -> None:
        self._add(event)

    def started(self, event: Any) -> None:
        self._add(event)

    def succeeded(self, event: Any) -> None:
        self._add(event)

    def failed(self, event: Any) -> None:
        self._add(event)

    # CMAP (through a method, so that a subclass overriding ``_add`` gets these too)
    def _pool_event(self, event: Any) -> None:
        self._add(event)

    pool_created = pool_ready = pool_cleared = pool_closed = _pool_event
    connection_created = connection_ready = connection_closed = _pool_event
    connection_check_out_started = connection_check_out_failed = _pool_event
    connection_checked_out = connection_checked_in = _pool_event

    def of(self, *kinds: type) -> list[Any]:
        return [event for event in self.events if isinstance(event, kinds)]

    def names(self, *kinds: type) -> list[str]:
        return [type(event).__name__ for event in self.of(*kinds)] if kinds else [
            type(event).__name__ for event in self.events]

    def wait_for(self, predicate: Any, timeout: float = 5.0) -> Any:
        """The first recorded event matching ``predicate`` (waiting for it); AssertionError on timeout."""
        deadline = monotonic() + timeout
        seen = 0
        while True:
            for event in self.events[seen:]:
                if predicate(event):
                    return event
            seen = len(self.events)
            remaining = deadline - monotonic()
            if remaining <= 0:
                raise AssertionError(f"no matching event within {timeout}s; saw {self.names()[-20:]}")
            self._arrived.wait(remaining)

    def clear(self) -> None:
        self.events.clear()
        self.times.clear()


def make_topology(seeds: Sequence[tuple], *, heartbeat: float = 0.5, connect_timeout: float = 1.0,
                  mode: str = "stream", listeners: Sequence[Any] = (), selection_timeout: float = 5.0,
                  open: bool = True, **settings: Any) -> Any:
    """A Topology over loopback seeds with test-friendly timings, opened unless ``open=False``."""
    from greenmongo.options.connection_settings import ConnectionSettings
    from greenmongo.sdam.settings import TopologySettings
    from greenmongo.topology import Topology

    topology_kwargs = {key: settings.pop(key) for key in list(settings)
                       if key in ("pool_options", "server_selector", "srv_host", "srv_resolver",
                                  "srv_min_rescan_interval", "credentials", "rng")}
    topology = Topology(
        TopologySettings(seeds=tuple(seeds), heartbeat_frequency=heartbeat, **settings),
        connection_settings=ConnectionSettings(connect_timeout=connect_timeout,
                                               load_balanced=settings.get("load_balanced", False)),
        event_listeners=listeners, server_selection_timeout=selection_timeout, server_monitoring_mode=mode,
        **topology_kwargs)
    if open:
        topology.open()
    return topology
