"""The Connections Survive Primary Step Down prose tests (``connections-survive-step-down/tests/README.md``,
mongodb/specifications 496dec6) against SecantusDB, with greenmongo and, as the evidence peer, PyMongo 4.20.

Every test runs twice: with greenmongo, and with PyMongo on the same server through the same code (greenmongo
has PyMongo's API). PyMongo's run is the evidence that what the tests accept of the server - the adaptations
below - is SecantusDB's doing and that the reference driver meets the same expectations there. It runs in
the unpatched pass only (PyMongo's monitors are OS threads there).

Adaptations to the deployment (a one-member SecantusDB replica set; MONGODB_URI may name a real one):

* getMore Iteration sends ``replSetFreeze: 0`` to every secondary, as the README says; a one-member set has
  none, so the stepped-down member itself is elected again once its ``replSetStepDown`` period is over.
  (SecantusDB has no replSetFreeze command either: CommandNotFound, for PyMongo too.) That period is the
  README's 30 s when other members can take over, and ``ONE_MEMBER_STEP_DOWN_SECS`` when none can: there
  it is exactly how long writes are refused, so 30 s would only slow the suite.
* SecantusDB does not increment its topologyVersion when it steps up again, so a streaming monitor learns
  of the new primary only when its awaitable hello returns (heartbeatFrequencyMS). The clients use
  heartbeatFrequencyMS=500, as PyMongo's own test of this spec does, so that recovery takes a fraction of
  a second instead of 10 s; the README requires no particular heartbeat.
* The tests check the client's own view too: before the getMore they wait until the client has seen the
  step-down (a ServerDescriptionChangedEvent), so that the getMore must go to a known secondary and the
  write after it must wait for the election instead of meeting NotWritablePrimary.

Not run here (the skip is in spec/skip_ledger.py): Not Primary - Reset Connection Pool, which needs a
MongoDB 4.0 server (neither greenmongo nor PyMongo 4.20 connects to one).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Any, Iterator

import pytest

from tests.servers.secantus import SecantusServer
from tests.waits import wait_until

pytestmark = pytest.mark.server

#: The replSetStepDown period on a one-member set: the window in which the getMore runs on a secondary.
ONE_MEMBER_STEP_DOWN_SECS = 5
#: The README's period when another member can be elected.
STEP_DOWN_SECS = 30
NAME = "step-down"
#: Long enough for a one-member set's re-election (ONE_MEMBER_STEP_DOWN_SECS) plus a heartbeat.
ELECTION_TIMEOUT = 45.0


@pytest.fixture(scope="module")
def uri() -> Iterator[str]:
    """MONGODB_URI, or a SecantusDB of this module's own: a step-down must not reach other modules' tests."""
    override = os.environ.get("MONGODB_URI")
    if override:
        yield override
        return
    with SecantusServer() as server:
        yield server.uri


def _driver_module(name: str) -> ModuleType:
    if name == "greenmongo":
        import greenmongo

        return greenmongo
    from tests.test_pymongo_public_api import _reference_pymongo

    return _reference_pymongo()


@pytest.fixture(params=["greenmongo", pytest.param("pymongo", marks=pytest.mark.one_pass)])
def driver(request: Any) -> ModuleType:
    """The driver under test: greenmongo, or PyMongo 4.20 (the evidence peer) through the same code."""
    module = _driver_module(request.param)
    for submodule in ("monitoring", "errors", "write_concern"):
        importlib.import_module(f"{module.__name__}.{submodule}")
    return module


def _events_class(driver: ModuleType) -> type:
    monitoring = driver.monitoring

    class Events(monitoring.ConnectionPoolListener, monitoring.ServerListener):  # type: ignore[name-defined,misc]
        """Every CMAP and server event, in order (a list: PyMongo's threads append to it too)."""

        def __init__(self) -> None:
            self.events: list = []

        def _add(self, event: Any) -> None:
            self.events.append(event)

        pool_created = pool_ready = pool_cleared = pool_closed = _add
        connection_created = connection_ready = connection_closed = _add
        connection_check_out_started = connection_check_out_failed = _add
        connection_checked_out = connection_checked_in = _add
        opened = closed = description_changed = _add

        def of(self, kind: type, since: int = 0) -> list:
            return [event for event in self.events[since:] if isinstance(event, kind)]

    return Events


class Setup:
    """The README's test setup: a client with retryWrites=false, the ``step-down`` collection dropped and
    created again with writeConcern majority."""

    def __init__(self, driver: ModuleType, uri: str) -> None:
        self.driver = driver
        self.monitoring = driver.monitoring
        self.listener = _events_class(driver)()
        self.client = driver.MongoClient(uri, retryWrites=False, heartbeatFrequencyMS=500,
                                         serverSelectionTimeoutMS=int(ELECTION_TIMEOUT * 1000),
                                         event_listeners=[self.listener])
        majority = driver.write_concern.WriteConcern(w="majority")
        self.db = self.client.get_database(NAME, write_concern=majority)
        self.coll = self.db.get_collection(NAME)
        self.coll.drop()
        self.db.command("create", NAME, writeConcern={"w": "majority"})
        hello = self.client.admin.command("hello")
        if "setName" not in hello or hello.get("maxWireVersion", 0) < 8:
            pytest.skip("Connections Survive Step Down: the tests need a replica set of MongoDB 4.2 or later")

    def pool_cleared(self, since: int = 0) -> list:
        return self.listener.of(self.monitoring.PoolClearedEvent, since)

    def fail_next_insert(self, code: int) -> None:
        self.client.admin.command("configureFailPoint", "failCommand", mode={"times": 1},
                                  data={"failCommands": ["insert"], "errorCode": code})

    def close(self) -> None:
        try:
            self.client.admin.command("configureFailPoint", "failCommand", mode="off")
        finally:
            self.client.close()


@pytest.fixture
def setup(driver: ModuleType, uri: str) -> Iterator[Setup]:
    prepared = Setup(driver, uri)
    try:
        yield prepared
    finally:
        prepared.close()


def _is_writable_primary(driver: ModuleType, address: tuple[str, int]) -> bool:
    """Ask ``address`` itself (a direct connection of its own), not the client under test."""
    direct = driver.MongoClient(address[0], address[1], directConnection=True, serverSelectionTimeoutMS=10000)
    try:
        return bool(direct.admin.command("hello")["isWritablePrimary"])
    finally:
        direct.close()


def test_getmore_iteration(setup: Setup) -> None:
    driver, client, coll = setup.driver, setup.client, setup.coll
    coll.insert_many([{"_id": number} for number in range(5)])  # the collection's write concern is majority
    cursor = coll.find(batch_size=2)
    first_batch = [next(cursor), next(cursor)]
    assert [doc["_id"] for doc in first_batch] == [0, 1] and cursor.retrieved == 2
    old_primary = cursor.address
    assert old_primary is not None and client.primary == old_primary

    members = client.nodes
    for secondary in client.secondaries:
        frozen = driver.MongoClient(*secondary, directConnection=True)
        try:
            assert frozen.admin.command("replSetFreeze", 0)["ok"] == 1
        finally:
            frozen.close()
    step_down_secs = STEP_DOWN_SECS if len(members) > 1 else ONE_MEMBER_STEP_DOWN_SECS
    mark = len(setup.listener.events)
    reply = client.admin.command({"replSetStepDown": step_down_secs, "force": True})
    assert reply["ok"] == 1

    stepped_down = setup.monitoring.ServerDescriptionChangedEvent

    def client_saw_the_step_down() -> bool:
        return any(event.server_address == old_primary and event.new_description.server_type_name != "RSPrimary"
                   for event in setup.listener.of(stepped_down, mark))

    wait_until(client_saw_the_step_down, 10, "the client's monitor reporting the step-down")
    rest = list(cursor)  # the getMores go to the old primary, now a secondary
    assert [doc["_id"] for doc in rest] == [2, 3, 4]
    assert not _is_writable_primary(driver, old_primary), (
        "the member was elected again before the getMore was checked: it did not run on a secondary")
    assert setup.pool_cleared(mark) == []

    # Writes resume after the election, on the same client: the insert waits in server selection for a primary.
    coll.insert_one({"_id": "after the election"})
    assert coll.find_one({"_id": "after the election"}) is not None
    assert setup.pool_cleared(mark) == []


def _fails_with(setup: Setup, code: int) -> None:
    setup.fail_next_insert(code)
    with pytest.raises(setup.driver.errors.NotPrimaryError) as caught:
        setup.coll.insert_one({"test": 1})
    assert caught.value.details["code"] == code


def test_not_primary_keep_connection_pool(setup: Setup) -> None:
    setup.coll.insert_one({"warm": "up"})  # a pooled connection before the error
    mark = len(setup.listener.events)
    _fails_with(setup, 10107)
    setup.coll.insert_one({"test": 1})
    assert setup.pool_cleared(mark) == []
    # The connection survived: the insert after the error reused it.
    assert setup.listener.of(setup.monitoring.ConnectionCreatedEvent, mark) == []
    assert setup.coll.count_documents({"test": 1}) == 1


def test_not_primary_reset_connection_pool() -> None:
    pytest.skip("Connections Survive Step Down 'Not Primary - Reset Connection Pool': needs a MongoDB 4.0 server; "
                "greenmongo connects to 4.2 and later only (PyMongo 4.20 to 4.4 and later)")


@pytest.mark.parametrize("code", [pytest.param(91, id="shutdown-in-progress"),
                                  pytest.param(11600, id="interrupted-at-shutdown")])
def test_node_shutting_down_resets_connection_pool(setup: Setup, code: int) -> None:
    setup.coll.insert_one({"warm": "up"})
    primary = setup.client.primary
    mark = len(setup.listener.events)
    _fails_with(setup, code)
    setup.coll.insert_one({"test": 1})
    assert setup.coll.count_documents({"test": 1}) == 1
    assert [event.address for event in setup.pool_cleared(mark)] == [primary]
    # The cleared pool's connection was not reused: the insert after the error needed a new one.
    assert setup.listener.of(setup.monitoring.ConnectionCreatedEvent, mark) != []
