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
"""

from __future__ import annotations

import atexit
import gc
import os
import random
import time
from collections import Counter
from typing import Any, Callable, Iterable, Optional

import gevent
import greenlet
import pytest
from gevent.event import Event

from greenmongo import InsertOne, MongoClient, UpdateOne
from greenmongo.errors import ConnectionFailure
from greenmongo.net.connection import Connection
from greenmongo.client_session import ClientSession
from tests.servers.secantus import SecantusServer
from tests.waits import poll

pytestmark = [pytest.mark.server, pytest.mark.slow]

LANES = int(os.environ.get("GREENMONGO_KILL_E2E_LANES", "200"))
OPERATIONS = int(os.environ.get("GREENMONGO_KILL_E2E_OPERATIONS", "4000"))
SEED = int(os.environ.get("GREENMONGO_KILL_E2E_SEED", "8"))
WORKLOAD_DEADLINE = 50.0  # seconds: a hang fails the test instead of CI's global timeout
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
    """SecantusDB with --auth: the user is created first, then the server restarts on the same files."""
    storage = str(tmp_path_factory.mktemp("kill-e2e") / "data")
    with SecantusServer(storage_path=storage) as setup:
        client = MongoClient(setup.uri)
        try:
            client.admin.command("createUser", USER, pwd=PASSWORD, roles=["root"],
                                 mechanisms=["SCRAM-SHA-256"])
        finally:
            client.close()
    server = SecantusServer(storage_path=storage, auth=True, port=setup.port)
    atexit.register(server.stop)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def authenticated_uri(server: SecantusServer, **options: Any) -> str:
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
        elif path.endswith(("net/handshake.py", "net/connect.py", "net/tls.py")) or (
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

    def land(self, exc: BaseException) -> None:
        labels = phases(_frames_of_traceback(exc.__traceback__)) or {"outside-greenmongo"}
        for label in labels:
            self.landed[label] += 1


class Workload:
    def __init__(self, client: MongoClient, uri: str, seed: int) -> None:
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
        docs = list(db.seeded.find({}, batch_size=batch).sort("_id", 1))
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

    def lane(self, seed: int) -> None:
        rng = random.Random(seed)
        ledger = self.ledger
        while self.next_op < OPERATIONS:
            op = self.next_op
            self.next_op += 1
            kind, function = self.choose()
            ledger.operations[kind] += 1
            target: Any = self.db
            fresh_client = function is None
            if fresh_client:  # built here, not in the operation: a kill could orphan it there
                target = MongoClient(self.uri, maxPoolSize=2, appname=f"fresh-{op}")
                ledger.fresh_clients.append(target)
                function = self.op_fresh_client
            # Interruptions come at a random point of the operation's typical lifetime.
            roll, when = rng.random(), rng.uniform(0, 1.5) * self.latency[kind]
            timeout = when if roll < 0.25 else None
            kill_after = when if 0.25 <= roll < 0.5 else None
            if timeout is not None:
                ledger.injected["timeout"] += 1
            if kill_after is not None:
                ledger.injected["kill"] += 1
            started = time.monotonic()
            glet = gevent.spawn(self.run_operation, kind, function, target, op, timeout)
            self.running.add(glet)
            if kill_after is not None:
                glet.join(kill_after)
                if not glet.dead:
                    glet.kill(block=False)
            glet.join(15)
            if not glet.dead:
                ledger.stuck.append((kind, op, glet))
                return
            if roll >= 0.5 and glet.value:  # completed undisturbed: learn how long this kind takes
                self.latency[kind] += (time.monotonic() - started - self.latency[kind]) / 8
            if fresh_client:
                target.close()  # idempotent; closes it even if the kill came before the operation ran
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
                interrupt = rng.random() < 0.3
                server.pool.clear(interrupt_in_use_connections=interrupt)
                self.ledger.injected["pool-clear" + (":interrupting" if interrupt else "")] += 1
                gevent.sleep(rng.uniform(0, 0.002))
                server.pool.ready()


def large_blob(i: int) -> str:
    return chr(ord("a") + i) * LARGE_BYTES


# -- the checks -----------------------------------------------------------------------------------

def _root(glet: Any) -> Any:
    while glet.parent is not None:
        glet = glet.parent
    return glet


def live_greenlets() -> set:
    """Every greenlet of this thread that is running or scheduled to run, but the hub and the caller.

    (gevent's threadpool, which its resolver uses, has greenlets in other threads: not ours.)
    """
    hub, current = gevent.get_hub(), gevent.getcurrent()
    root = _root(current)
    found = set()
    for obj in gc.get_objects():
        if not isinstance(obj, greenlet.greenlet) or obj is hub or obj is current or _root(obj) is not root:
            continue
        if isinstance(obj, gevent.Greenlet):
            if not obj.dead:
                found.add(obj)
        elif obj:  # a raw greenlet that started and did not finish
            found.add(obj)
    return found


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
    return [obj for obj in gc.get_objects() if isinstance(obj, Connection) and not obj.closed]


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
    return [obj for obj in gc.get_objects()
            if isinstance(obj, ClientSession) and obj.client is client and not obj.has_ended]


# -- the test ---------------------------------------------------------------------------------------

def test_interrupted_operations_leak_nothing_and_the_client_keeps_working(auth_server) -> None:
    uri = authenticated_uri(auth_server)
    client = MongoClient(uri, maxPoolSize=MAX_POOL_SIZE, maxConnecting=2)
    try:
        db = client.kill_e2e
        db.command("dropDatabase")
        db.seeded.insert_many([{"_id": i, "v": i * i} for i in range(SEEDED_DOCS)])
        db.large.insert_many([{"_id": i, "blob": large_blob(i)} for i in range(LARGE_DOCS)])
        db.counter.insert_one({"_id": "c", "n": 0})
        gc.collect()
        baseline = live_greenlets()
        sessions = SessionCounter(client)

        workload = Workload(client, uri, SEED)
        with workload:
            chaos = gevent.spawn(workload.chaos, SEED + 2)
            started = time.monotonic()
            lanes = [gevent.spawn(workload.lane, SEED * 1000 + n) for n in range(LANES)]
            gevent.joinall(lanes, timeout=WORKLOAD_DEADLINE)
            elapsed = time.monotonic() - started
        chaos.join(5)
        ledger = workload.ledger
        unfinished = [glet for glet in lanes if not glet.dead]
        assert not unfinished, f"{len(unfinished)} lanes still running after {WORKLOAD_DEADLINE}s"
        for glet in lanes + [chaos]:
            glet.get()  # a lane or helper that raised is a test bug: show it

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

        interrupted = ledger.outcomes["timeout"] + ledger.outcomes["killed"]
        print(f"\n[kill-safety e2e] {OPERATIONS} operations across {LANES} lanes in {elapsed:.1f}s "
              f"(+{len(fresh)} short-lived clients)")
        print(f"  operations: {dict(ledger.operations)}")
        print(f"  outcomes: {dict(ledger.outcomes)}")
        print(f"  injected: {dict(ledger.injected)}")
        print(f"  interruptions that landed: {interrupted}, by phase: {dict(ledger.landed)}")
        print(f"  main pool / operation count: {main_pool}")
        print(f"  server sessions taken={sessions.taken} given back={sessions.returned}, "
              f"pooled={len(client._core.server_sessions)}")
        print(f"  leaked: greenlets={len(leaked_greenlets)} connections={len(leaked_connections)} "
              f"sessions={sessions.outstanding} (unended={len(unended_sessions)}) "
              f"pools-not-at-rest={len(fresh_pools) + len(pool_problems(client, closed=False))} "
              f"stuck-operations={len(ledger.stuck)}")
        print(f"  wrong reads={len(ledger.wrong)} unexpected errors={len(ledger.unexpected)} "
              f"data problems={len(data_problems)} client works afterwards={works}")
        print(f"  settled in {settle_time:.2f}s")

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
        assert sum(ledger.operations.values()) == OPERATIONS
        assert interrupted >= OPERATIONS // 10, ledger.outcomes
        for phase in TARGET_PHASES:
            assert ledger.landed[phase] > 0, (phase, dict(ledger.landed))
        assert ledger.outcomes["completed"] >= OPERATIONS // 8, ledger.outcomes  # real work got done too
    finally:
        client.close()
