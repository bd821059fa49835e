"""Load-balanced mode end to end: SecantusDB behind the loopback load balancer (tests/servers/load_balancer.py).

What the unified load-balancers suite does not pin down: the SDAM event sequence and the absence of
monitor greenlets, the handshake's serviceId requirement and the tests' processId mode, one pool
generation per service, connection closes in both directions, pinned cursors dropped without being
closed, and kills: greenlets killed mid-cursor and mid-transaction leave no connection checked out or
pinned and no transaction open on the server.
"""

from __future__ import annotations

import gc
import random
from typing import Any

import gevent
import pytest
from gevent.event import Event

from greenmongo import MongoClient
from greenmongo.errors import AutoReconnect, ConfigurationError
from greenmongo.monitoring import CommandListener, ConnectionPoolListener, ServerListener, TopologyListener
from greenmongo.monitoring.pool import ConnectionCreatedEvent, PoolClearedEvent
from greenmongo.monitoring.topology import (
    ServerClosedEvent,
    ServerDescriptionChangedEvent,
    ServerOpeningEvent,
    TopologyClosedEvent,
    TopologyDescriptionChangedEvent,
    TopologyOpenedEvent,
)
from greenmongo.net.handshake import LOAD_BALANCER_UNSUPPORTED
from greenmongo.options.client_options import MOCK_SERVICE_ID_VARIABLE
from tests.api_support import held_by_open_transactions
from tests.servers.load_balancer import LoadBalancer
from tests.servers.secantus import start_with_users
from tests.waits import wait_until

pytestmark = pytest.mark.server

SEED = 14


class Events(CommandListener, ConnectionPoolListener, ServerListener, TopologyListener):
    """Every event, in order; ``started`` also sets the Event registered for its command name."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.commands: list[Any] = []
        self.waiting: dict[str, Event] = {}

    def _record(self, event: Any) -> None:
        self.events.append(event)

    opened = description_changed = closed = _record  # server and topology events
    pool_created = pool_ready = pool_cleared = pool_closed = _record
    connection_created = connection_ready = connection_closed = _record
    connection_check_out_started = connection_check_out_failed = _record
    connection_checked_out = connection_checked_in = _record

    def started(self, event: Any) -> None:
        self.commands.append(event)
        waiter = self.waiting.get(event.command_name)
        if waiter is not None:
            waiter.set()

    def succeeded(self, event: Any) -> None:
        self.commands.append(event)

    def failed(self, event: Any) -> None:
        self.commands.append(event)

    def of(self, kind: type) -> list[Any]:
        return [event for event in self.events if isinstance(event, kind)]

    def named(self, name: str) -> list[Any]:
        """The CommandStartedEvents of ``name``."""
        return [event for event in self.commands if event.command_name == name and hasattr(event, "command")]


@pytest.fixture
def backend(server_uri: str) -> tuple[str, int]:
    authority = server_uri.split("://", 1)[1].split("/", 1)[0].split(",")[0].rsplit("@", 1)[-1]
    host, _, port = authority.rpartition(":")
    return host, int(port)


@pytest.fixture
def balancer(backend):
    with LoadBalancer(backend, services=1) as lb:
        yield lb


@pytest.fixture
def multi(backend):
    with LoadBalancer(backend, services=2) as lb:
        yield lb


def pool_of(client: MongoClient) -> Any:
    (server,) = client._core.topology.servers().values()
    return server.pool


def at_rest(client: MongoClient) -> None:
    stats = pool_of(client).stats()
    assert (stats.in_use, stats.pending, stats.waiters) == (0, 0, 0), stats
    assert pool_of(client)._uses == {"cursor": 0, "transaction": 0}


def fail_point(internal: MongoClient, **data: Any) -> None:
    internal.admin.command({"configureFailPoint": "failCommand", "mode": {"times": 1}, "data": data})


def test_the_topology_has_one_load_balancer_no_monitor_and_the_fixed_event_sequence(balancer) -> None:
    events = Events()
    client = MongoClient(balancer.uri, event_listeners=[events])
    client.admin.command("ping")
    topology = client._core.topology
    assert topology.description.topology_type_name == "LoadBalanced"
    assert topology.greenlets() == []  # no monitor, no RTT monitor, no SRV poller
    client.close()
    sdam = [event for event in events.events if isinstance(event, (
        TopologyOpenedEvent, TopologyDescriptionChangedEvent, ServerOpeningEvent, ServerDescriptionChangedEvent,
        ServerClosedEvent, TopologyClosedEvent))]
    assert [type(event) for event in sdam] == [
        TopologyOpenedEvent, TopologyDescriptionChangedEvent, ServerOpeningEvent, ServerDescriptionChangedEvent,
        TopologyDescriptionChangedEvent, ServerClosedEvent, TopologyDescriptionChangedEvent, TopologyClosedEvent]
    first, second, closing = sdam[1], sdam[4], sdam[6]
    assert first.previous_description.topology_type_name == "Unknown"
    assert not first.previous_description.server_descriptions()
    assert first.new_description.topology_type_name == "LoadBalanced"
    assert [sd.server_type_name for sd in first.new_description.server_descriptions().values()] == ["Unknown"]
    assert sdam[3].previous_description.server_type_name == "Unknown"
    assert sdam[3].new_description.server_type_name == "LoadBalancer"
    assert [sd.server_type_name for sd in second.new_description.server_descriptions().values()] == ["LoadBalancer"]
    assert closing.new_description.topology_type_name == "Unknown"


def test_commands_carry_the_services_id_and_sessions_are_always_used(multi) -> None:
    events = Events()
    client = MongoClient(multi.uri, event_listeners=[events])
    try:
        collection = client.db.lb_service_ids
        collection.drop()
        collection.insert_many([{"_id": i} for i in range(6)])
        cursors = [collection.find({}, batch_size=2) for _ in range(2)]
        for cursor in cursors:
            next(cursor)  # two pinned cursors: two connections, round robin over the two services
        finds = events.named("find")
        assert {event.service_id for event in finds} == set(multi.service_ids)
        assert all("lsid" in event.command for event in finds)  # an implicit session, on a load balancer too
        assert pool_of(client)._uses["cursor"] == 2
        for cursor in cursors:
            assert len(list(cursor)) == 5
        at_rest(client)
    finally:
        client.close()


def test_a_hello_without_service_id_fails_unless_the_tests_mode_takes_the_process_id(
        backend, monkeypatch: pytest.MonkeyPatch) -> None:
    with LoadBalancer(backend, services=2, add_service_id=False) as lb:
        client = MongoClient(lb.uri, serverSelectionTimeoutMS=2000)
        with pytest.raises(ConfigurationError) as raised:
            client.admin.command("ping")
        assert str(raised.value) == LOAD_BALANCER_UNSUPPORTED
        client.close()

        monkeypatch.setenv(MOCK_SERVICE_ID_VARIABLE, "1")
        events = Events()
        client = MongoClient(lb.uri, event_listeners=[events])
        try:
            collection = client.db.lb_mock_service_id
            collection.drop()
            collection.insert_many([{"_id": i} for i in range(4)])
            cursors = [collection.find({}, batch_size=1) for _ in range(2)]
            for cursor in cursors:
                next(cursor)
            assert {event.service_id for event in events.named("find")} == set(lb.service_ids)
            for cursor in cursors:
                cursor.close()
        finally:
            client.close()


def test_an_error_clears_only_its_services_connections(multi, internal) -> None:
    events = Events()
    client = MongoClient(multi.uri, event_listeners=[events], retryWrites=False)
    try:
        collection = client.db.lb_clear_one_service
        collection.drop()
        collection.insert_many([{"_id": i} for i in range(6)])
        cursors = [collection.find({}, batch_size=2) for _ in range(2)]
        for cursor in cursors:
            next(cursor)
        for cursor in cursors:
            cursor.close()  # two idle connections now, one per service
        created = len(events.of(ConnectionCreatedEvent))
        fail_point(internal, failCommands=["insert"], closeConnection=True)
        with pytest.raises(AutoReconnect):
            collection.insert_one({"x": 1})
        (cleared,) = events.of(PoolClearedEvent)
        assert cleared.service_id in multi.service_ids
        collection.insert_one({"x": 2})  # on the other service's connection: nothing new was made
        assert len(events.of(ConnectionCreatedEvent)) == created
        assert events.named("insert")[-1].service_id != cleared.service_id
        assert pool_of(client).stats().total == 1
    finally:
        client.close()


def test_an_authentication_error_after_the_hello_clears_its_service(tmp_path) -> None:
    """The Load Balancer spec's "errors during authentication are processed" (the unified case needs an
    authenticated suite): the hello named the service, so SDAM clears that service's connections."""
    from greenmongo.monitoring.pool import ConnectionCheckOutFailedEvent, ConnectionClosedEvent

    user, password = "lb-user", "lb-pass"
    server = start_with_users(str(tmp_path / "db.sqlite"), [(user, password)])
    try:
        admin = MongoClient(server.uri, username=user, password=password)
        with LoadBalancer(server.address, services=2) as lb:
            events = Events()
            client = MongoClient(lb.uri, username=user, password=password, appname="lbAuthError",
                                 retryWrites=False, event_listeners=[events])
            admin.admin.command({"configureFailPoint": "failCommand", "mode": {"times": 1}, "data": {
                "failCommands": ["saslContinue"], "closeConnection": True, "appName": "lbAuthError"}})
            with pytest.raises(AutoReconnect):
                client.db.lb_auth.insert_one({"x": 1})
            pool_events = [event for event in events.events if type(event).__name__ in (
                "ConnectionCreatedEvent", "PoolClearedEvent", "ConnectionClosedEvent", "ConnectionCheckOutFailedEvent")]
            assert [type(event).__name__ for event in pool_events] == [
                "ConnectionCreatedEvent", "PoolClearedEvent", "ConnectionClosedEvent",
                "ConnectionCheckOutFailedEvent"]
            cleared, closed, failed = pool_events[1:]
            assert cleared.service_id == lb.service_ids[0]  # the first connection's service
            assert isinstance(closed, ConnectionClosedEvent) and closed.reason == "error"
            assert isinstance(failed, ConnectionCheckOutFailedEvent) and failed.reason == "connectionError"
            client.db.lb_auth.insert_one({"x": 2})  # the next connection authenticates
            client.close()
        admin.close()
    finally:
        server.stop()


def test_closes_pass_both_ways_and_a_broken_pinned_cursor_sends_no_kill(balancer) -> None:
    events = Events()
    client = MongoClient(balancer.uri, event_listeners=[events], retryReads=False)
    collection = client.db.lb_closes
    collection.drop()
    collection.insert_many([{"_id": i} for i in range(6)])
    cursor = collection.find({}, batch_size=2)
    next(cursor)
    balancer.close_connections()  # a load balancer restart: the client's connection is closed under it
    with pytest.raises(AutoReconnect):
        list(cursor)
    assert pool_of(client).stats().in_use == 1  # still the cursor's (Load Balancer spec)
    cursor.close()
    assert not events.named("killCursors")
    at_rest(client)
    collection.insert_one({"_id": "after"})  # a new connection
    assert balancer.open_connections == 1
    client.close()  # and the client's close reaches the server through the load balancer
    wait_until(lambda: balancer.open_connections == 0, message="the load balancer still holds a connection")


def test_a_pinned_cursor_dropped_unclosed_is_killed_on_its_connection_by_the_next_operation(balancer) -> None:
    events = Events()
    client = MongoClient(balancer.uri, event_listeners=[events])
    try:
        collection = client.db.lb_dropped_cursor
        collection.drop()
        collection.insert_many([{"_id": i} for i in range(6)])
        cursor = collection.find({}, batch_size=2)
        next(cursor)
        pinned = pool_of(client)
        assert pinned._uses["cursor"] == 1
        connection_id = events.named("find")[-1].connection_id
        del cursor
        gc.collect()
        assert client._core.pending_kills == 1 and pinned.stats().in_use == 1  # no I/O in __del__
        collection.find_one({})
        (kill,) = events.named("killCursors")
        assert kill.connection_id == connection_id
        at_rest(client)
    finally:
        client.close()


def test_rewinding_a_pinned_cursor_gives_its_connection_back(balancer) -> None:
    client = MongoClient(balancer.uri, retryReads=False)
    try:
        collection = client.db.lb_rewind
        collection.drop()
        collection.insert_many([{"_id": i} for i in range(6)])
        cursor = collection.find({}, batch_size=2)
        assert next(cursor) == {"_id": 0}
        cursor.rewind()  # killed on its connection, which goes back
        at_rest(client)
        assert next(cursor) == {"_id": 0}
        balancer.close_connections()
        with pytest.raises(AutoReconnect):
            list(cursor)  # the getMore fails on the pinned connection: nothing to kill, still pinned
        assert pool_of(client)._uses["cursor"] == 1
        cursor.rewind()
        at_rest(client)
        assert [doc["_id"] for doc in cursor] == list(range(6))  # pinned again, then exhausted
        at_rest(client)
    finally:
        client.close()


def test_killed_greenlets_leave_no_pinned_connection_and_no_open_transaction(multi, internal) -> None:
    events = Events()
    client = MongoClient(multi.uri, event_listeners=[events], maxPoolSize=6)
    rng = random.Random(SEED)
    data, targets = client.db.lb_kill_data, client.db.lb_kill_targets
    data.drop()
    targets.drop()
    data.insert_many([{"_id": i} for i in range(40)])
    lanes = 40
    target_ids = [f"t{lane}" for lane in range(lanes)] + ["blocked"]
    targets.insert_many([{"_id": target} for target in target_ids])
    try:
        # Kills that land for certain: mid-getMore and mid-statement of a transaction (fail points block them).
        for command, work in (("getMore", lambda: list(data.find({}, batch_size=5))),
                              ("update", lambda: _transaction(client, data, targets, "blocked", 0.0))):
            events.waiting[command] = arrived = Event()
            fail_point(internal, failCommands=[command], blockConnection=True, blockTimeMS=300)
            worker = gevent.spawn(work)
            assert arrived.wait(10), f"{command} never started"
            worker.kill()
            assert isinstance(worker.value, gevent.GreenletExit)
            at_rest(client)  # given back at once: the interrupted command closed the pinned connection
            del events.waiting[command]

        # Kills and timeouts that land anywhere: scans, cursors dropped half-read, transactions with a cursor.
        def work(index: int) -> None:
            kind = rng.choice(("scan", "drop", "transaction", "transaction"))
            if kind == "scan":
                for _ in data.find({}, batch_size=3):
                    gevent.sleep(rng.random() * 0.002)
            elif kind == "drop":
                cursor = data.find({}, batch_size=4)
                next(cursor)
                gevent.sleep(rng.random() * 0.005)
            else:
                _transaction(client, data, targets, f"t{index}", rng.random() * 0.005)

        def timed(index: int, limit: float) -> str:
            try:
                with gevent.Timeout(limit):
                    work(index)
            except gevent.Timeout:
                return "timed out"
            return "done"

        workers, killers = [], []
        for index in range(lanes):
            if index % 2:
                workers.append(gevent.spawn(timed, index, rng.random() * 0.05))
            else:
                workers.append(gevent.spawn(work, index))
                killers.append(gevent.spawn_later(rng.random() * 0.05, workers[-1].kill))
        gevent.joinall(workers + killers, timeout=60)
        assert all(worker.dead for worker in workers)
        killed = sum(isinstance(worker.value, gevent.GreenletExit) for worker in workers)
        timed_out = sum(worker.value == "timed out" for worker in workers)
        assert killed and timed_out, (killed, timed_out)
        # A killed greenlet's GreenletExit keeps its frames, and so its cursors, alive: drop them, then the
        # cursors interrupted mid-iteration are garbage and queue their kill and connection (no I/O in __del__).
        del workers, killers
        gc.collect()
        client.admin.command("ping")  # the next operation sends them and gives the connections back
        at_rest(client)
        assert client._core.pending_kills == 0
        assert held_by_open_transactions(internal.db, "lb_kill_targets", target_ids) == []
        print(f"of {lanes} lanes {killed} killed, {timed_out} timed out")
    finally:
        client.close()


def _transaction(client: MongoClient, data: Any, targets: Any, target: str, pause: float) -> None:
    with client.start_session() as session:
        with session.start_transaction():
            targets.update_one({"_id": target}, {"$inc": {"n": 1}}, session=session)
            gevent.sleep(pause)
            for _ in data.find({}, batch_size=2, session=session).limit(6):  # shares the transaction's connection
                pass
            gevent.sleep(pause)
