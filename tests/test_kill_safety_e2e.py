"""Kill-safety end to end: gevent.Timeouts and kill()s landing anywhere in real operations leave
nothing behind, and the client keeps working with consistent data.

A mixed workload (inserts, reads, $inc updates, ordered bulk writes, insert_many, small-batch
scans with many getMores, large replies, aggregations, and short-lived clients that are created,
used and closed) runs through ``MongoClient`` against SecantusDB with SCRAM-SHA-256 auth, across
LANES greenlets. Every operation runs in a greenlet of its own, and three things interrupt it:

* an injected ``gevent.Timeout`` of random length around the operation;
* a random ``Greenlet.kill()`` from its lane after a random delay;
* a "sniper" (a greenlet trace hook) that reads the stack of an operation as it suspends and kills
  it right there if it is in a phase to be covered (handshake, auth, half-way through reading a
  reply body, getMore, bulk), so that each of these phases is hit for certain.

Meanwhile a chaos greenlet clears the main pool (sometimes interrupting in-use connections) so
new connections - TCP connect, hello, SCRAM - are being made all the time; the pool is small.
Where each interruption landed is read from its traceback, not assumed.

Afterwards: every pool is at rest (nothing in use, pending, establishing or waiting - so no
connection and no connecting permit is held; total == available; closed clients' pools empty),
every server's operation count is 0, every server session taken from the client's session pool
was given back and no session is left open, no greenlet is left over, no open connection exists
outside the pools and monitors, the data is consistent (every acknowledged write present,
interrupted ordered writes applied as a prefix, the counter between acknowledged and attempted
increments, every read returned exactly what it asked for), and the client still serves fresh
work. Figures are printed (``pytest -s``).

A second test runs the same workload under timeoutMS (Client Side Operations Timeout) instead: random
``greenmongo.timeout()`` blocks, database ``timeout_ms`` and short-lived clients' ``timeoutMS``, drawn
around how long each kind of operation takes, so that deadlines run out in the handshake, in SCRAM,
half-way through a reply, in the wait queue and between a bulk write's commands. The same invariants
hold, and two more: every operation ends by its deadline (with slack), and the hub is never held up.
"""

from __future__ import annotations

import gc
import os
import random
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional

import gevent
import greenlet
import pytest
from gevent.event import Event

import greenmongo
from greenmongo import InsertOne, MongoClient, UpdateOne
from greenmongo.errors import ConnectionFailure, GreenMongoError
from greenmongo.net.connection import Connection
from greenmongo.client_session import ClientSession
from tests.api_support import gc_instances, live_greenlets
from tests.servers.secantus import SecantusServer, start_with_users
from tests.servers.throttle import ThrottleProxy
from tests.waits import poll

pytestmark = [pytest.mark.server, pytest.mark.slow]

LANES = int(os.environ.get("GREENMONGO_KILL_E2E_LANES", "200"))
OPERATIONS = int(os.environ.get("GREENMONGO_KILL_E2E_OPERATIONS", "4000"))
#: The timeoutMS run's operations.
CSOT_OPERATIONS = int(os.environ.get("GREENMONGO_KILL_E2E_CSOT_OPERATIONS", "4000"))
SEED = int(os.environ.get("GREENMONGO_KILL_E2E_SEED", "8"))
WORKLOAD_DEADLINE = 50.0  # seconds: a hang fails the test instead of CI's global timeout
#: How long an operation may run (after its kill, if any) without progress before it counts as stuck. A scan's
#: getMore that the chaos's pool clears evict from the wait queue is retried, and queues again behind the other
#: lanes: under the clears a 60-getMore scan took up to 14 s (p99 11 s) on an idle 2-core machine, longer on a
#: loaded one, making progress all along; so a scan counts from the last document it received.
STUCK_AFTER = 30.0
MAX_POOL_SIZE = 8
USER, PASSWORD = "kill-e2e", "s3cret-e2e"

SEEDED_DOCS = 300
LARGE_DOCS, LARGE_BYTES = 8, 512 * 1024  # a full scan: two 2 MB replies (4 documents per batch)
#: operation kind -> weight in the mix ("fresh_client": a short-lived client of its own)
KINDS = {"insert_one": 14, "find_one": 14, "increment": 10, "bulk_write": 10, "insert_many": 8, "scan": 12,
         "large": 6, "aggregate": 8, "count": 6, "fresh_client": 6}
TARGET_PHASES = ("handshake", "auth", "reply", "getMore", "bulk")
SNIPER_QUOTA = 60  # kills per target phase; the sniper looks at every suspension until all are spent

_GREENMONGO = os.sep + "greenmongo" + os.sep


# -- the server ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def auth_server(tmp_path_factory):
    """SecantusDB with --auth: the workload authenticates every connection it opens."""
    server = start_with_users(str(tmp_path_factory.mktemp("kill-e2e") / "data"), [(USER, PASSWORD)])
    try:
        yield server
    finally:
        server.stop()


def authenticated_uri(server: Any, **options: Any) -> str:
    query = "&".join(f"{key}={value}" for key, value in {"authSource": "admin", **options}.items())
    return f"mongodb://{USER}:{PASSWORD}@{server.host}:{server.port}/?{query}"


# -- where an interruption landed -------------------------------------------------------------------

def _frames_of_traceback(tb: Any) -> list:
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    return frames


def _frames_of_greenlet(glet: Any) -> list:
    """Outermost first, like a traceback."""
    frames = []
    frame = glet.gr_frame
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    return frames[::-1]


def where_stuck(glet: Any) -> list:
    """The greenmongo frames a stuck operation is waiting in (file:function:line, innermost last)."""
    now = time.monotonic()
    where = []
    for frame in _frames_of_greenlet(glet):
        if _GREENMONGO not in frame.f_code.co_filename:
            continue
        text = f"{frame.f_code.co_filename.rsplit(_GREENMONGO, 1)[-1]}:{frame.f_code.co_name}:{frame.f_lineno}"
        deadline = frame.f_locals.get("deadline")
        if isinstance(deadline, float):  # a monotonic deadline (selection, checkout, establishment)
            text += f"[deadline {deadline - now:+.3f}s]"
        where.append(text)
    return where


def phases(frames: Iterable[Any]) -> set:
    """What a stack was doing: the phases of an operation its greenmongo frames show."""
    found = set()
    for frame in frames:
        path, name = frame.f_code.co_filename, frame.f_code.co_name
        if _GREENMONGO not in path:
            continue
        found.add("in-greenmongo")
        if f"{_GREENMONGO}auth{os.sep}" in path:
            found.add("auth")
        elif path.endswith(("net/handshake.py", "net/connect.py", "net/tcp.py", "net/tls.py")) or (
                path.endswith("pool/core.py") and name == "_establish"):
            found.add("handshake")
        elif path.endswith("pool/core.py") and name == "_wait":
            found.add("checkout-wait")
        elif path.endswith("topology/topology.py") and name in ("_select", "close"):
            found.add("selection" if name == "_select" else "client-close")
        elif path.endswith("command_cursor.py") and name == "_get_more":
            found.add("getMore")
        elif path.endswith("collection.py") and name in ("bulk_write", "insert_many"):
            found.add("bulk")
        elif path.endswith("net/connection.py") and name == "_read_exactly":
            # After the header: part of a reply body has arrived and the rest is awaited.
            found.add("awaiting-reply" if frame.f_locals.get("message_start") else "reply")
    if "auth" in found:
        found.discard("handshake")  # authentication happens inside the handshake: the finer label wins
    return found


# -- the workload ------------------------------------------------------------------------------------

class Ledger:
    """What was attempted and acknowledged, what landed where, and everything that went wrong."""

    def __init__(self) -> None:
        self.operations = Counter()     # kind -> attempted
        self.outcomes = Counter()       # completed / timeout / killed / connection-failure
        self.landed = Counter()         # phase -> interruptions that landed there
        self.injected = Counter()       # timeout / kill / sniper
        self.inserted: dict = {}        # _id -> True if acknowledged, False if unknown
        self.ordered_groups: dict = {}  # group id -> (number of inserts, acknowledged)
        self.increments_acked = 0
        self.increments_attempted = 0
        self.wrong: list = []           # reads that returned something else than asked
        self.unexpected: list = []      # exceptions no operation should raise
        self.stuck: list = []           # operation greenlets a kill did not end
        self.fresh_clients: list = []
        self.csot_landed = Counter()    # phase -> timeoutMS expiries whose error shows it (the CSOT run)
        self.overruns: list = []        # operations still running OVERRUN_SLACK after their timeoutMS

    def land(self, exc: BaseException) -> None:
        labels = phases(_frames_of_traceback(exc.__traceback__)) or {"outside-greenmongo"}
        for label in labels:
            self.landed[label] += 1


@dataclass
class Plan:
    """One operation of a lane: what it runs on, and what interrupts it when."""

    target: Any  # the database (or a short-lived client) the operation runs on
    function: Callable[[Any, int], None]
    timeout: Optional[float]  # the operation's own limit (a gevent.Timeout here; greenmongo.timeout() in the CSOT run)
    kill_after: Optional[float]  # a Greenlet.kill() from the lane after this many seconds
    undisturbed: bool  # nothing injected: the operation's time teaches the lane how long such operations take
    fresh_client: bool  # ``target`` is a client of the operation's own, closed afterwards
    limit: Optional[float] = None  # the operation's timeoutMS in seconds (the CSOT run): it must end by then


class Workload:
    #: How many operations the lanes run in all.
    operations = OPERATIONS
    #: How often the chaos's pool clear also interrupts the connections in use.
    chaos_interrupts = 0.3

    def __init__(self, client: MongoClient, uri: str, seed: int) -> None:
        self.hub_lag = 0.0  # the worst lateness of a 50 ms timer during the run (seconds)
        self.began: dict = {}  # op -> when its greenlet began to run it (the CSOT run's timing)
        self.progress: dict = {}  # op -> when a scan last received a document (slow is not stuck)
        self.client = client
        self.uri = uri
        self.rng = random.Random(seed)
        self.ledger = Ledger()
        self.db = client.kill_e2e
        self.next_op = 0
        self.running: set = set()  # operation greenlets in flight (for the sniper)
        self.stop = Event()
        self.hub = gevent.get_hub()
        self.sniper_open = set(TARGET_PHASES)  # phases still short of their quota of sniper kills
        self.previous_trace: Optional[Callable[[str, Any], None]] = None
        self.latency: Counter = Counter({kind: 0.05 for kind in KINDS})  # seconds, learnt as we go

    # -- one operation ------------------------------------------------------------------------------

    def choose(self) -> tuple[str, Optional[Callable[[Any, int], None]]]:
        name = self.rng.choices(list(KINDS), weights=list(KINDS.values()))[0]
        return name, (None if name == "fresh_client" else getattr(self, f"op_{name}"))

    def op_insert_one(self, db: Any, op: int) -> None:
        key = f"one-{op}"
        self.ledger.inserted[key] = False
        db.writes.insert_one({"_id": key})
        self.ledger.inserted[key] = True

    def op_find_one(self, db: Any, op: int) -> None:
        wanted = op % SEEDED_DOCS
        found = db.seeded.find_one({"_id": wanted})
        if found != {"_id": wanted, "v": wanted * wanted}:
            self.ledger.wrong.append(("find_one", wanted, found))

    def op_increment(self, db: Any, op: int) -> None:
        self.ledger.increments_attempted += 1
        result = db.counter.update_one({"_id": "c"}, {"$inc": {"n": 1}})
        if result.modified_count != 1:
            self.ledger.wrong.append(("increment", result.raw_result))
        self.ledger.increments_acked += 1

    def op_bulk_write(self, db: Any, op: int) -> None:
        # Six commands (the kind changes at each request): insert k, then mark k, for k = 0, 1, 2.
        group = f"bulk-{op}"
        self.ledger.ordered_groups[group] = (3, False)
        requests = []
        for k in range(3):
            requests += [InsertOne({"_id": f"{group}-{k}", "group": group, "k": k}),
                         UpdateOne({"_id": f"{group}-{k}"}, {"$set": {"marked": True}})]
        result = db.ordered.bulk_write(requests, ordered=True)
        if (result.inserted_count, result.modified_count) != (3, 3):
            self.ledger.wrong.append(("bulk_write", result.bulk_api_result))
        self.ledger.ordered_groups[group] = (3, True)

    def op_insert_many(self, db: Any, op: int) -> None:
        group = f"many-{op}"
        self.ledger.ordered_groups[group] = (12, False)
        result = db.ordered.insert_many([{"_id": f"{group}-{k}", "group": group, "k": k, "marked": True}
                                         for k in range(12)])
        if len(result.inserted_ids) != 12:
            self.ledger.wrong.append(("insert_many", result.inserted_ids))
        self.ledger.ordered_groups[group] = (12, True)

    def op_scan(self, db: Any, op: int) -> None:
        batch = 5 + op % 20
        docs = []
        for doc in db.seeded.find({}, batch_size=batch).sort("_id", 1):
            docs.append(doc)
            self.progress[op] = time.monotonic()
        if docs != [{"_id": i, "v": i * i} for i in range(SEEDED_DOCS)]:
            self.ledger.wrong.append(("scan", batch, len(docs)))

    def op_large(self, db: Any, op: int) -> None:
        docs = list(db.large.find({}, batch_size=4).sort("_id", 1))
        if [doc["_id"] for doc in docs] != list(range(LARGE_DOCS)) or any(
                doc["blob"] != large_blob(doc["_id"]) for doc in docs):
            self.ledger.wrong.append(("large", [doc.get("_id") for doc in docs]))

    def op_aggregate(self, db: Any, op: int) -> None:
        limit = 50 + op % 100
        docs = list(db.seeded.aggregate([{"$match": {"_id": {"$lt": limit}}}, {"$sort": {"_id": 1}}],
                                        batchSize=7))
        if docs != [{"_id": i, "v": i * i} for i in range(limit)]:
            self.ledger.wrong.append(("aggregate", limit, len(docs)))

    def op_count(self, db: Any, op: int) -> None:
        count = db.seeded.count_documents({"_id": {"$gte": 100}})
        if count != SEEDED_DOCS - 100:
            self.ledger.wrong.append(("count", count))

    def op_fresh_client(self, client: MongoClient, op: int) -> None:
        """Connect, handshake and authenticate on a client of its own, use it, close it."""
        try:
            db = client.kill_e2e
            self.op_insert_one(db, op)
            self.op_find_one(db, op)
        finally:
            client.close()

    def run_operation(self, kind: str, function: Callable[[Any, int], None], target: Any, op: int,
                      timeout: Optional[float]) -> bool:
        """The body of an operation's greenlet: never raises, so nothing keeps its frames alive.

        True if the operation completed."""
        ledger = self.ledger
        timer = gevent.Timeout(timeout) if timeout is not None else None
        try:
            if timer is not None:
                timer.start()
            try:
                function(target, op)
            finally:
                if timer is not None:
                    timer.close()
            ledger.outcomes["completed"] += 1
            return True
        except gevent.Timeout as exc:
            if exc is not timer:
                ledger.unexpected.append(("foreign timeout", kind, repr(exc)))
            ledger.outcomes["timeout"] += 1
            ledger.land(exc)
        except gevent.GreenletExit as exc:
            ledger.outcomes["killed"] += 1
            ledger.land(exc)
        except ConnectionFailure as exc:
            # The chaos clears (and interrupted connections make SDAM clear) the pool: expected.
            ledger.outcomes["connection-failure"] += 1
            ledger.outcomes[f"connection-failure:{type(exc).__name__}"] += 1
        except BaseException as exc:  # noqa: BLE001 - everything else is a finding
            ledger.unexpected.append((kind, f"{type(exc).__name__}: {exc}"))
        finally:
            self.running.discard(gevent.getcurrent())
        return False

    # -- greenlets ----------------------------------------------------------------------------------

    def plan(self, rng: random.Random, op: int, kind: str, function: Optional[Callable[[Any, int], None]]) -> Plan:
        """How operation ``op`` runs and what interrupts it: a random gevent.Timeout or kill()."""
        target: Any = self.db
        fresh_client = function is None
        if fresh_client:  # built here, not in the operation: a kill could orphan it there
            target = MongoClient(self.uri, maxPoolSize=2, appname=f"fresh-{op}")
            self.ledger.fresh_clients.append(target)
            function = self.op_fresh_client
        # Interruptions come at a random point of the operation's typical lifetime.
        roll, when = rng.random(), rng.uniform(0, 1.5) * self.latency[kind]
        timeout = when if roll < 0.25 else None
        kill_after = when if 0.25 <= roll < 0.5 else None
        if timeout is not None:
            self.ledger.injected["timeout"] += 1
        if kill_after is not None:
            self.ledger.injected["kill"] += 1
        return Plan(target, function, timeout, kill_after, undisturbed=roll >= 0.5, fresh_client=fresh_client)

    def lane(self, seed: int) -> None:
        rng = random.Random(seed)
        ledger = self.ledger
        while self.next_op < self.operations:
            op = self.next_op
            self.next_op += 1
            kind, function = self.choose()
            ledger.operations[kind] += 1
            plan = self.plan(rng, op, kind, function)
            started = time.monotonic()
            glet = gevent.spawn(self.run_operation, kind, plan.function, plan.target, op, plan.timeout)
            self.running.add(glet)
            if plan.limit is not None and plan.kill_after is None:
                glet.join(plan.limit + OVERRUN_SLACK)
                began = self.began.get(op)
                if not glet.dead and began is not None:  # counted from when it began, not when it was spawned
                    glet.join(max(began + plan.limit + OVERRUN_SLACK - time.monotonic(), 0))
                if not glet.dead:  # still running well past its timeoutMS: where is it waiting?
                    ledger.overruns.append((kind, op, plan.limit, where_stuck(glet)))
            if plan.kill_after is not None:
                glet.join(plan.kill_after)
                if not glet.dead:
                    glet.kill(block=False)
            glet.join(STUCK_AFTER)
            while not glet.dead and time.monotonic() - self.progress.get(op, started) < STUCK_AFTER:
                glet.join(STUCK_AFTER)  # a scan that keeps receiving documents is slow (queued getMores), not stuck
            if not glet.dead:
                ledger.stuck.append((kind, op, glet, where_stuck(glet)))
                return
            if plan.undisturbed and glet.value:  # completed undisturbed: learn how long this kind takes
                self.latency[kind] += (time.monotonic() - started - self.latency[kind]) / 8
            if plan.fresh_client:
                plan.target.close()  # idempotent; closes it even if the kill came before the operation ran
            gevent.sleep(rng.uniform(0, 0.01))  # think time: not every lane queues at every moment

    def sniper(self, event: str, args: Any) -> None:
        """A greenlet trace hook: as an operation suspends, maybe kill it right there.

        If the operation's stack shows a phase of TARGET_PHASES that has had fewer than
        SNIPER_QUOTA such kills, it is killed. The kill is a hub callback, which runs before the hub
        polls for I/O again, so it lands in this very wait (mid-handshake, mid-auth, with half a
        reply body read, ...), not at some later switch.
        """
        if event == "switch" and not self.stop.is_set():
            origin, target = args
            if target is self.hub and origin in self.running and not origin.dead and self.sniper_open:
                wanted = [phase for phase in phases(_frames_of_greenlet(origin)) & self.sniper_open]
                if wanted:
                    origin.kill(block=False)
                    self.ledger.injected["sniper"] += 1
                    for phase in wanted:
                        self.ledger.injected[f"sniper:{phase}"] += 1
                        if self.ledger.injected[f"sniper:{phase}"] >= SNIPER_QUOTA:
                            self.sniper_open.discard(phase)
        if self.previous_trace is not None:
            self.previous_trace(event, args)

    def __enter__(self) -> "Workload":
        gevent.sleep(0)  # the hub's first run may install gevent's own tracer: chain onto it
        self.previous_trace = greenlet.settrace(self.sniper)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.stop.set()
        if greenlet.gettrace() == self.sniper:  # else someone chained onto us: we only forward from now on
            greenlet.settrace(self.previous_trace)

    def chaos(self, seed: int) -> None:
        """Clear the main pool now and then, so that connections are being established all the time."""
        rng = random.Random(seed)
        while not self.stop.is_set():
            gevent.sleep(rng.uniform(0.5, 1.5))
            for server in self.client._core.topology.servers().values():
                interrupt = rng.random() < self.chaos_interrupts
                server.pool.clear(interrupt_in_use_connections=interrupt)
                self.ledger.injected["pool-clear" + (":interrupting" if interrupt else "")] += 1
                gevent.sleep(rng.uniform(0, 0.002))
                server.pool.ready()


def large_blob(i: int) -> str:
    return chr(ord("a") + i) * LARGE_BYTES


# -- the checks -----------------------------------------------------------------------------------

def client_greenlets(client: MongoClient) -> set:
    """The greenlets a client runs by design: monitors, RTT monitors, pool maintenance."""
    own = set(client._core.topology.greenlets())
    for server in client._core.topology.servers().values():
        maintenance = getattr(server.pool, "_maintenance", None)
        if maintenance is not None:
            own.add(maintenance)
    return own


def pool_problems(client: MongoClient, closed: bool) -> list:
    problems = []
    for address, server in client._core.topology.servers().items():
        stats = server.pool.stats()
        at_rest = (stats.in_use == 0 and stats.pending == 0 and stats.waiters == 0
                   and stats.establishing == 0 and stats.populators == 0 and stats.total == stats.available)
        if not at_rest or (closed and stats.total != 0):
            problems.append((address, stats.as_dict()))
        if server.operation_count != 0:
            problems.append((address, "operation_count", server.operation_count))
    return problems


def expected_open_connections(clients: Iterable[MongoClient]) -> set:
    """Connections that may be open at rest: pooled and idle, or a monitor's own."""
    allowed = set()
    for client in clients:
        for server in client._core.topology.servers().values():
            allowed.update(id(record.conn) for record in server.pool._available)
            monitor = server.monitor
            if monitor is not None:
                allowed.add(id(monitor._conn))
                if monitor.rtt_monitor is not None:
                    allowed.add(id(monitor.rtt_monitor._conn))
    return allowed


def open_connections() -> list:
    return [obj for obj in gc_instances(Connection) if not obj.closed]


def check_data(db: Any, ledger: Ledger) -> list:
    problems = []
    present = {doc["_id"] for doc in db.writes.find({}, {"_id": 1})}
    missing = [key for key, acked in ledger.inserted.items() if acked and key not in present]
    if missing:
        problems.append(("acknowledged inserts missing", missing[:10]))
    strangers = present - set(ledger.inserted)
    if strangers:
        problems.append(("inserts nobody attempted", sorted(strangers)[:10]))
    by_group: dict = {}
    for doc in db.ordered.find({}):
        by_group.setdefault(doc["group"], []).append(doc)
    for group, (size, acked) in ledger.ordered_groups.items():
        docs = sorted(by_group.pop(group, []), key=lambda doc: doc["k"])
        ks = [doc["k"] for doc in docs]
        if ks != list(range(len(ks))) or (acked and len(ks) != size):
            problems.append(("ordered write not applied as a prefix", group, ks, acked))
            continue
        # bulk: the update marking k precedes the insert of k + 1, so all but the last are marked
        if any(not doc.get("marked") for doc in docs[:-1]) or (acked and not docs[-1].get("marked")):
            problems.append(("ordered bulk applied out of order", group, docs))
    if by_group:
        problems.append(("ordered writes nobody attempted", sorted(by_group)[:10]))
    counter = db.counter.find_one({"_id": "c"})["n"]
    if not ledger.increments_acked <= counter <= ledger.increments_attempted:
        problems.append(("counter", ledger.increments_acked, counter, ledger.increments_attempted))
    return problems


class SessionCounter:
    """Counts the server sessions a client takes from its pool and gives back (each must come back)."""

    def __init__(self, client: MongoClient) -> None:
        self.taken = self.returned = 0
        take, give_back = client._core.take_server_session, client._core.return_server_session

        def counting_take() -> Any:
            session = take()
            self.taken += 1
            return session

        def counting_give_back(server_session: Any) -> None:
            self.returned += 1
            give_back(server_session)

        client._core.take_server_session = counting_take  # type: ignore[method-assign]
        client._core.return_server_session = counting_give_back  # type: ignore[method-assign]

    @property
    def outstanding(self) -> int:
        return self.taken - self.returned


def open_sessions(client: MongoClient) -> list:
    return [obj for obj in gc_instances(ClientSession) if obj.client is client and not obj.has_ended]


# -- the test ---------------------------------------------------------------------------------------

def seed(db: Any) -> None:
    db.command("dropDatabase")
    db.seeded.insert_many([{"_id": i, "v": i * i} for i in range(SEEDED_DOCS)])
    db.large.insert_many([{"_id": i, "blob": large_blob(i)} for i in range(LARGE_DOCS)])
    db.counter.insert_one({"_id": "c", "n": 0})


class HubLag:
    """A greenlet that sleeps 50 ms again and again and records how late its timer fires: the hub's
    own lag. A greenlet that keeps the hub busy (a retry loop that never yields) shows up here."""

    def __init__(self) -> None:
        self.worst = 0.0
        self._stop = Event()
        self._greenlet = gevent.spawn(self._run)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            gevent.sleep(0.05)
            self.worst = max(self.worst, time.monotonic() - started - 0.05)

    def stop(self) -> float:
        self._stop.set()
        self._greenlet.join(5)
        return self.worst


def run_lanes(workload: Workload) -> float:
    """Run the workload's LANES lanes (and the chaos) to the end; the elapsed time. The hub's worst lag
    meanwhile goes to ``workload.hub_lag``."""
    with workload:
        lag = HubLag()
        chaos = gevent.spawn(workload.chaos, SEED + 2)
        started = time.monotonic()
        lanes = [gevent.spawn(workload.lane, SEED * 1000 + n) for n in range(LANES)]
        gevent.joinall(lanes, timeout=WORKLOAD_DEADLINE)
        elapsed = time.monotonic() - started
        workload.hub_lag = lag.stop()
    chaos.join(5)
    unfinished = [glet for glet in lanes if not glet.dead]
    assert not unfinished, (f"{len(unfinished)} lanes still running after {WORKLOAD_DEADLINE}s, "
                            f"{workload.next_op} operations begun, outcomes {dict(workload.ledger.outcomes)}, "
                            f"injected {dict(workload.ledger.injected)}")
    for glet in lanes + [chaos]:
        glet.get()  # a lane or helper that raised is a test bug: show it
    return elapsed


def check_nothing_leaked(client: MongoClient, uri: str, workload: Workload, baseline: set,
                         sessions: SessionCounter, elapsed: float, title: str) -> None:
    """The invariants every interrupted run must leave: pools at rest, no leaked greenlet, connection or
    session, consistent data, and a client that still serves fresh work. Figures are printed."""
    db = workload.db
    ledger = workload.ledger
    # The pool was last cleared by the chaos (or by SDAM after an interrupted connection):
    # wait for it to be usable again, then for the background to close stale connections.
    for server in client._core.topology.servers().values():
        server.pool.ready()
    assert client.admin.command("ping")["ok"] == 1
    fresh = ledger.fresh_clients
    settle_started = time.monotonic()
    settled = poll(lambda: not any(pool_problems(c, closed=True) for c in fresh)
                   and not pool_problems(client, closed=False)
                   and not any(c._core.topology.greenlets() for c in fresh), timeout=10, interval=0.02)
    settle_time = time.monotonic() - settle_started
    gc.collect()
    unended_sessions = open_sessions(client)
    leaked_greenlets = live_greenlets() - baseline - client_greenlets(client)
    allowed = expected_open_connections([client])
    leaked_connections = [conn for conn in open_connections() if id(conn) not in allowed]
    main_pool = [(address, server.pool.stats().as_dict(), server.operation_count)
                 for address, server in client._core.topology.servers().items()]
    fresh_pools = [problem for c in fresh for problem in pool_problems(c, closed=True)]
    data_problems = check_data(db, ledger)

    # The client still works: 200 greenlets write and read back.
    def round_trip(n: int) -> bool:
        db.after.insert_one({"_id": n})
        return db.after.find_one({"_id": n}) == {"_id": n}

    after = [gevent.spawn(round_trip, n) for n in range(200)]
    gevent.joinall(after, timeout=30, raise_error=True)
    works = all(glet.value for glet in after) and db.after.count_documents({}) == 200
    with MongoClient(uri, maxPoolSize=1) as another:
        works = works and another.kill_e2e.counter.find_one({"_id": "c"}) is not None

    interrupted = ledger.outcomes["timeout"] + ledger.outcomes["killed"] + ledger.outcomes["csot-timeout"]
    operations = workload.operations
    print(f"\n[{title}] {operations} operations across {LANES} lanes in {elapsed:.1f}s "
          f"(+{len(fresh)} short-lived clients)")
    print(f"  operations: {dict(ledger.operations)}")
    print(f"  outcomes: {dict(ledger.outcomes)}")
    print(f"  injected: {dict(ledger.injected)}")
    print(f"  interruptions that landed: {interrupted}, by phase: {dict(ledger.landed)}")
    if ledger.csot_landed:
        print(f"  timeoutMS expiries by phase: {dict(ledger.csot_landed)}")
    print(f"  main pool / operation count: {main_pool}")
    print(f"  server sessions taken={sessions.taken} given back={sessions.returned}, "
          f"pooled={len(client._core.server_sessions)}")
    print(f"  leaked: greenlets={len(leaked_greenlets)} connections={len(leaked_connections)} "
          f"sessions={sessions.outstanding} (unended={len(unended_sessions)}) "
          f"pools-not-at-rest={len(fresh_pools) + len(pool_problems(client, closed=False))} "
          f"stuck-operations={len(ledger.stuck)}")
    print(f"  wrong reads={len(ledger.wrong)} unexpected errors={len(ledger.unexpected)} "
          f"data problems={len(data_problems)} client works afterwards={works}")
    print(f"  settled in {settle_time:.2f}s; the hub's worst lag during the run: {workload.hub_lag:.3f}s")
    for problem in (ledger.unexpected + ledger.wrong)[:10]:
        print(f"  problem: {str(problem)[:300]}")
    for kind, op, _glet, where in ledger.stuck[:5]:
        print(f"  stuck: {kind} #{op} in {' > '.join(where)}")
    for kind, op, limit, where in ledger.overruns[:10]:
        print(f"  overran its {limit * 1000:.0f} ms: {kind} #{op} in {' > '.join(where)}")

    assert not ledger.stuck, ledger.stuck[:5]
    assert not ledger.unexpected, ledger.unexpected[:10]
    assert not ledger.wrong, ledger.wrong[:10]
    assert settled, (pool_problems(client, closed=False), fresh_pools[:5])
    assert not pool_problems(client, closed=False), pool_problems(client, closed=False)
    assert not fresh_pools, fresh_pools[:5]
    assert not leaked_greenlets, sorted(map(repr, leaked_greenlets))[:10]
    assert not leaked_connections, leaked_connections[:10]
    assert sessions.outstanding == 0 and not unended_sessions, (sessions.taken, sessions.returned,
                                                                unended_sessions[:5])
    assert not data_problems, data_problems
    assert works
    assert sum(ledger.operations.values()) == operations
    assert interrupted >= operations // 10, ledger.outcomes
    assert ledger.outcomes["completed"] >= operations // 8, ledger.outcomes  # real work got done too


def test_interrupted_operations_leak_nothing_and_the_client_keeps_working(auth_server) -> None:
    uri = authenticated_uri(auth_server)
    client = MongoClient(uri, maxPoolSize=MAX_POOL_SIZE, maxConnecting=2)
    try:
        seed(client.kill_e2e)
        gc.collect()
        baseline = live_greenlets()
        sessions = SessionCounter(client)
        workload = Workload(client, uri, SEED)
        elapsed = run_lanes(workload)
        check_nothing_leaked(client, uri, workload, baseline, sessions, elapsed, "kill-safety e2e")
        for phase in TARGET_PHASES:
            assert workload.ledger.landed[phase] > 0, (phase, dict(workload.ledger.landed))
    finally:
        client.close()


# -- the same under timeoutMS (Client Side Operations Timeout) ----------------------------------------

#: Where a timeoutMS must be seen to run out: connecting (TCP, hello), authenticating (SCRAM), half-way
#: through a reply body, queued for a connection, and inside a bulk write (between its commands).
CSOT_TARGET_PHASES = ("handshake", "auth", "reply", "checkout-wait", "bulk")
CLIENT_TIMEOUT_MS = 5000  # the main client's timeoutMS: every operation is under CSOT (retries, no wtimeout...)
#: How long past its timeoutMS an operation may still be running (a loaded 2-core machine; 200 lanes).
OVERRUN_SLACK = 2.0
#: How late a 50 ms timer may fire during the run (a loaded machine); a greenlet that keeps the hub busy
#: (a retry loop that never yields: 4 to 14 s here before it was fixed) goes far beyond.
MAX_HUB_LAG = 2.0
#: A short-lived client's timeoutMS when it is not a small one (its two operations and close() stay well
#: inside the STUCK_AFTER after which an operation counts as stuck).
FRESH_CLIENT_TIMEOUT_MS = 2000


def exception_frames(exc: Optional[BaseException]) -> list:
    """The frames of ``exc``'s traceback and of the exceptions it was raised from: a timeoutMS that ran
    out in a read is a NetworkTimeout raised from the socket's timeout, whose traceback reaches the read."""
    frames: list = []
    seen: set = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        frames += _frames_of_traceback(exc.__traceback__)
        exc = exc.__cause__ if exc.__cause__ is not None else (
            None if exc.__suppress_context__ else exc.__context__)
    return frames


class TimeoutWorkload(Workload):
    """The kill test's workload with operations bounded by random timeoutMS values instead.

    Each operation runs under the main client's timeoutMS, and most under a shorter one too, drawn
    around how long such an operation takes: a ``greenmongo.timeout()`` block, or a database handle's
    ``timeout_ms``; short-lived clients get a small client-level ``timeoutMS`` (which runs out during
    discovery, the handshake or SCRAM). A few operations are also killed inside their timeout block.
    The sniper is off: every timeout lands where the time runs out.
    """

    operations = CSOT_OPERATIONS
    #: The chaos clears the pool without interrupting commands in flight. Under a timeoutMS a write whose
    #: connection is cut is retried until it succeeds, often while the server still runs the first attempt,
    #: and SecantusDB does not hold the retry back as mongod does (a session runs one command at a time):
    #: both run, and the second fails with a duplicate key (or a $inc is applied twice). greenmongo sends
    #: the retry with the same lsid and txnNumber; the kill run above covers interrupted connections.
    chaos_interrupts = 0.0

    def __init__(self, client: MongoClient, uri: str, seed: int) -> None:
        super().__init__(client, uri, seed)
        self.sniper_open = set()
        self.timed_out_bulks: set = set()  # bulk_write groups whose operation raised a timeout

    def plan(self, rng: random.Random, op: int, kind: str, function: Optional[Callable[[Any, int], None]]) -> Plan:
        injected = self.ledger.injected
        roll, when = rng.random(), rng.uniform(0, 1.5) * self.latency[kind]
        timeout_ms = max(1, round(when * 1000))
        if function is None:  # a short-lived client: its own, usually small, client-level timeoutMS
            client_timeout = timeout_ms if roll < 0.8 else FRESH_CLIENT_TIMEOUT_MS
            injected["client timeoutMS" if roll < 0.8 else "client timeoutMS (long)"] += 1
            target = MongoClient(self.uri, maxPoolSize=2, appname=f"fresh-{op}", timeoutMS=client_timeout)
            self.ledger.fresh_clients.append(target)
            return Plan(target, self.op_fresh_client, None, None, undisturbed=roll >= 0.8, fresh_client=True)
        if roll < 0.4:
            injected["timeout()"] += 1
            return Plan(self.db, function, when, None, undisturbed=False, fresh_client=False, limit=when)
        if roll < 0.5:
            injected["database timeout_ms"] += 1
            database = self.client.get_database(self.db.name, timeout_ms=timeout_ms)
            return Plan(database, function, None, None, undisturbed=False, fresh_client=False,
                        limit=timeout_ms / 1000)
        if roll < 0.55:
            injected["timeout() + kill"] += 1
            return Plan(self.db, function, when, rng.uniform(0, 1.5) * self.latency[kind], undisturbed=False,
                        fresh_client=False)
        return Plan(self.db, function, None, None, undisturbed=True, fresh_client=False,
                    limit=CLIENT_TIMEOUT_MS / 1000)

    def run_operation(self, kind: str, function: Callable[[Any, int], None], target: Any, op: int,
                      timeout: Optional[float]) -> bool:
        """The body of an operation's greenlet, ``timeout`` a ``greenmongo.timeout()`` block around it
        (None: the handle's or client's timeoutMS only). Never raises; True if the operation completed."""
        ledger = self.ledger
        self.began[op] = time.monotonic()
        try:
            with greenmongo.timeout(timeout):
                function(target, op)
            ledger.outcomes["completed"] += 1
            return True
        except gevent.GreenletExit as exc:
            ledger.outcomes["killed"] += 1
            ledger.land(exc)
        except GreenMongoError as exc:
            if exc.timeout:
                ledger.outcomes["csot-timeout"] += 1
                ledger.outcomes[f"csot-timeout:{type(exc).__name__}"] += 1
                for label in phases(exception_frames(exc)) or {"outside-greenmongo"}:
                    ledger.csot_landed[label] += 1
                if kind == "bulk_write":
                    self.timed_out_bulks.add(f"bulk-{op}")
            elif isinstance(exc, ConnectionFailure):  # the chaos clears the pool, as in the kill run
                ledger.outcomes["connection-failure"] += 1
                ledger.outcomes[f"connection-failure:{type(exc).__name__}"] += 1
            else:
                ledger.unexpected.append((kind, f"{type(exc).__name__}: {exc}"))
        except BaseException as exc:  # noqa: BLE001 - a gevent.Timeout included: none is injected here
            ledger.unexpected.append((kind, f"{type(exc).__name__}: {exc}"))
        finally:
            self.running.discard(gevent.getcurrent())
        return False


def bulks_cut_between_commands(db: Any, groups: Iterable[str]) -> int:
    """Timed-out bulk writes (insert k, mark k, for k = 0, 1, 2) that had applied some of their inserts,
    not all: their time ran out between or during their later commands."""
    applied = Counter(doc["group"] for doc in db.ordered.find({"group": {"$in": sorted(groups)}}, {"group": 1}))
    return sum(1 for count in applied.values() if 0 < count < 3)


def sweep_reply_deadlines(workload: TimeoutWorkload, server: SecantusServer, wanted: int = 3,
                          tries: int = 300) -> int:
    """Scans of the large documents (2 MB replies) under random deadlines within how long such a scan
    takes, until ``wanted`` of them ran out while a reply body was arriving: how many scans that took.

    Over plain loopback a 2 MB body is usually all in the kernel buffer when it is read, so a deadline
    seldom finds the reader waiting mid-body (1 scan in 300 here); the scans go through a proxy that
    passes the replies on in 64 KB pieces 1 ms apart (a 2 MB body then takes ~45 ms to arrive: 3 scans
    in 4 time out in one). Their client is closed afterwards and checked with the short-lived ones (pool
    at rest, no greenlet or connection left)."""
    rng = random.Random(SEED + 3)
    with ThrottleProxy(server.host, server.port, pause=0.001) as proxy:
        uri = authenticated_uri(proxy, timeoutMS=CLIENT_TIMEOUT_MS, directConnection="true")
        client = MongoClient(uri, maxPoolSize=4, appname="reply-sweep")
        workload.ledger.fresh_clients.append(client)
        try:
            db = client[workload.db.name]
            started = time.monotonic()
            workload.op_large(db, -1)
            whole = time.monotonic() - started
            for k in range(tries):
                if workload.ledger.csot_landed["reply"] >= wanted:
                    return k
                glet = gevent.spawn(workload.run_operation, "large", workload.op_large, db, -2 - k,
                                    rng.uniform(0, whole))
                glet.join(15)
                assert glet.dead
            return tries
        finally:
            client.close()


def test_operations_under_random_timeouts_leak_nothing_and_the_client_keeps_working(auth_server) -> None:
    """The kill test's workload and invariants with timeoutMS (CSOT) instead of gevent interruptions: a
    deadline that runs out anywhere (the handshake, SCRAM, a half-read reply, the wait queue, between a
    bulk write's commands) leaves nothing behind either, and the client goes on serving."""
    uri = authenticated_uri(auth_server, timeoutMS=CLIENT_TIMEOUT_MS)
    client = MongoClient(uri, maxPoolSize=MAX_POOL_SIZE, maxConnecting=2)
    try:
        seed(client.kill_e2e)
        gc.collect()
        baseline = live_greenlets()
        sessions = SessionCounter(client)
        workload = TimeoutWorkload(client, uri, SEED)
        elapsed = run_lanes(workload)
        sweeps = sweep_reply_deadlines(workload, auth_server)
        check_nothing_leaked(client, uri, workload, baseline, sessions, elapsed, "kill-safety e2e, timeoutMS")
        ledger = workload.ledger
        cut = bulks_cut_between_commands(workload.db, workload.timed_out_bulks)
        print(f"  timed-out bulk writes cut between their commands: {cut} of {len(workload.timed_out_bulks)}; "
              f"scans until three timed out mid-reply: {sweeps}")
        assert ledger.outcomes["csot-timeout"] >= workload.operations // 10, ledger.outcomes
        assert ledger.injected["sniper"] == 0
        assert not ledger.overruns, ledger.overruns[:5]  # every operation ended by its timeoutMS (+ slack)
        assert workload.hub_lag < MAX_HUB_LAG, workload.hub_lag  # nothing kept the hub from other greenlets
        for phase in CSOT_TARGET_PHASES:
            assert ledger.csot_landed[phase] > 0, (phase, dict(ledger.csot_landed))
        assert cut > 0
    finally:
        client.close()
