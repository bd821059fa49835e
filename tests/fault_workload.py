"""The network-fault workload, for any driver with PyMongo's API: greenmongo in the test process
(tests/test_fault_workload.py), PyMongo 4.20 in a monkey-patched subprocess (tests/fault_peer.py).

LANES greenlets run OPS_PER_LANE operations each through a ``FaultProxy`` (tests/servers/faults.py):
inserts with unique ``_id``s, ``$inc`` updates on COUNTERS counters (each also ``$push``es its operation
id, so an increment applied twice shows), small-batch finds (getMores) and find_one. What each lane runs
is drawn from ``random.Random(f"{seed}/lane/{n}")`` and every operation carries ``comment=`` its id, which
is what the proxy keys its decisions on: both drivers meet the same faults in the same operations.

A ``FaultRun`` records each operation (kind, duration, outcome, the error's type) and, from command
monitoring, what went out for it (attempts of its command, getMores, the failed attempts' error
types). Nothing here imports greenmongo or pymongo: the driver module is passed in.
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

import gevent

from tests.servers.faults import FaultPlan, FaultProxy

LANES = int(os.environ.get("GREENMONGO_FAULTS_LANES", "200"))
OPS_PER_LANE = int(os.environ.get("GREENMONGO_FAULTS_OPS_PER_LANE", "10"))
SEED = int(os.environ.get("GREENMONGO_FAULTS_SEED", "19"))
COUNTERS = 20
SEEDED_DOCS = 60
BATCH_SIZE = 7  # a full scan is a find and 8 getMores
#: operation kind -> weight in the mix
KINDS = {"insert": 30, "increment": 30, "scan": 25, "find_one": 15}

SOCKET_TIMEOUT_MS = 1500
CONNECT_TIMEOUT_MS = 1000
SELECTION_TIMEOUT_MS = 2000
WAIT_QUEUE_TIMEOUT_MS = 2000
MAX_POOL_SIZE = 100
#: How long past its bound an operation may take (a loaded 2-core machine, 200 lanes, the proxy in-process).
SLACK = 3.0
#: One round trip's worst case: selection, the wait queue, establishing a connection, the reply.
ROUND_TRIP_BOUND = (SELECTION_TIMEOUT_MS + WAIT_QUEUE_TIMEOUT_MS + CONNECT_TIMEOUT_MS + SOCKET_TIMEOUT_MS) / 1000


def client_options() -> dict:
    """The same URI options for both drivers: retries on, every wait bounded."""
    return {"directConnection": "true", "retryWrites": "true", "retryReads": "true",
            "socketTimeoutMS": SOCKET_TIMEOUT_MS, "connectTimeoutMS": CONNECT_TIMEOUT_MS,
            "serverSelectionTimeoutMS": SELECTION_TIMEOUT_MS, "waitQueueTimeoutMS": WAIT_QUEUE_TIMEOUT_MS,
            "maxPoolSize": MAX_POOL_SIZE}


def uri_for(host: str, port: int) -> str:
    return f"mongodb://{host}:{port}/?" + "&".join(f"{key}={value}" for key, value in client_options().items())


def fault_plan(seed: int = SEED) -> FaultPlan:
    """The schedule both drivers meet: per-request faults, blackholes, two windows of refused connections."""
    return FaultPlan(seed=seed, reset_request=0.001, reset_reply=0.001, truncate_reply=0.001, stall=0.002,
                     delay=0.03, blackhole=0.01, refuse_windows=((3.0, 1.0), (7.0, 0.6)),
                     stall_seconds=(0.3, 2.5), stall_close=0.5, delay_seconds=(0.001, 0.05), uncommented=0.25)


def bound(record: dict) -> float:
    """The longest an operation may take: a round trip's worst case for each command it sent and for
    two more that sent nothing (a retry's selection or checkout that failed; a read's retry after a cleared
    pool), with slack."""
    return (len(record["commands"]) + 2) * ROUND_TRIP_BOUND + SLACK


def seed_data(db: Any) -> None:
    """Reset the workload's collections (run on a client connected directly, not through the proxy)."""
    db.command("dropDatabase")
    db.seeded.insert_many([{"_id": i, "v": i * i} for i in range(SEEDED_DOCS)])
    db.counters.insert_many([{"_id": k, "n": 0, "ops": []} for k in range(COUNTERS)])


@dataclass
class OpRecord:
    op: str
    kind: str
    start: float = 0.0  # seconds since the workload began
    duration: float = 0.0
    outcome: str = "running"  # ok, or the error's class name
    error: str = ""
    counter: Optional[int] = None
    #: Attempts of the operation's own command that went out (command started events), getMores sent,
    #: and the error types of its failed commands (in order).
    attempts: int = 0
    getmores: int = 0
    failures: list = field(default_factory=list)
    #: The attempts' command names, in order (a retry shows as the name twice).
    commands: list = field(default_factory=list)
    #: A scan's find returned its first batch (an error after that is a getMore's, never retried).
    in_getmores: bool = False


def make_listener(driver: Any, run: "FaultRun") -> Any:
    """A command listener that files each event of a workload command under its operation (its comment)."""

    class Listener(driver.monitoring.CommandListener):
        def started(self, event: Any) -> None:
            record = run.by_comment(event.command.get("comment"))
            if record is None:
                return
            if event.command_name == "getMore":
                record.getmores += 1
            else:
                record.attempts += 1
            record.commands.append(event.command_name)
            run.in_flight[(event.connection_id, event.request_id)] = record

        def succeeded(self, event: Any) -> None:
            run.in_flight.pop((event.connection_id, event.request_id), None)

        def failed(self, event: Any) -> None:
            record = run.in_flight.pop((event.connection_id, event.request_id), None)
            if record is not None:
                failure = event.failure or {}
                record.failures.append(failure.get("errtype") or f"code {failure.get('code')}")

    return Listener()


class FaultRun:
    """One driver's run of the workload through a fault proxy of its own."""

    def __init__(self, driver: Any, upstream: tuple, db_name: str, seed: int = SEED,
                 plan: Optional[FaultPlan] = None) -> None:
        self.driver = driver
        self.seed = seed
        self.proxy = FaultProxy(upstream[0], upstream[1], plan or fault_plan(seed), enabled=False).start()
        self.records: dict = {}  # comment -> OpRecord
        self.in_flight: dict = {}  # (connection, requestId) -> OpRecord of a command in flight
        self.client = driver.MongoClient(uri_for(self.proxy.host, self.proxy.port),
                                         event_listeners=[make_listener(driver, self)])
        self.db = self.client[db_name]
        self.wrong: list = []  # reads that returned something else than asked
        self.elapsed = 0.0
        self.started = time.monotonic()
        self.after: dict = {}

    def by_comment(self, comment: Any) -> Optional[OpRecord]:
        return self.records.get(comment) if isinstance(comment, str) else None

    # -- the operations -----------------------------------------------------------------------------------

    def op_insert(self, record: OpRecord, comment: str, rng: random.Random) -> None:
        self.db.inserts.insert_one({"_id": record.op}, comment=comment)

    def op_increment(self, record: OpRecord, comment: str, rng: random.Random) -> None:
        record.counter = rng.randrange(COUNTERS)
        result = self.db.counters.update_one({"_id": record.counter}, {"$inc": {"n": 1}, "$push": {"ops": record.op}},
                                             comment=comment)
        if result.modified_count != 1:
            self.wrong.append((record.op, "increment", result.raw_result))

    def op_scan(self, record: OpRecord, comment: str, rng: random.Random) -> None:
        docs = []
        for doc in self.db.seeded.find({}, batch_size=BATCH_SIZE, comment=comment).sort("_id", 1):
            docs.append(doc)
            record.in_getmores = True  # the find is done: an error now comes from a getMore
        if docs != [{"_id": i, "v": i * i} for i in range(SEEDED_DOCS)]:
            self.wrong.append((record.op, "scan", len(docs)))

    def op_find_one(self, record: OpRecord, comment: str, rng: random.Random) -> None:
        wanted = rng.randrange(SEEDED_DOCS)
        found = self.db.seeded.find_one({"_id": wanted}, comment=comment)
        if found != {"_id": wanted, "v": wanted * wanted}:
            self.wrong.append((record.op, "find_one", wanted, found))

    def lane(self, lane: int) -> None:
        rng = random.Random(f"{self.seed}/lane/{lane}")
        kinds, weights = list(KINDS), list(KINDS.values())
        for n in range(OPS_PER_LANE):
            kind = rng.choices(kinds, weights)[0]
            record = OpRecord(f"{lane}.{n}", kind)
            comment = f"fw-{record.op}"
            self.records[comment] = record
            started = time.monotonic()
            record.start = started - self.started
            try:
                getattr(self, f"op_{kind}")(record, comment, rng)
                record.outcome = "ok"
            except self.driver.errors.PyMongoError as exc:
                record.outcome = type(exc).__name__
                record.error = str(exc)[:300]
            finally:
                record.duration = time.monotonic() - started

    # -- the run ------------------------------------------------------------------------------------------

    def workload(self, deadline: float = 45.0) -> None:
        """All lanes, faults on; the faults go off when they are done."""
        self.client.admin.command("ping")  # discovered before the faults begin
        self.proxy.enable()
        self.started = started = time.monotonic()
        lanes = [gevent.spawn(self.lane, n) for n in range(LANES)]
        gevent.joinall(lanes, timeout=deadline)
        self.elapsed = time.monotonic() - started
        self.proxy.disable()
        unfinished = [glet for glet in lanes if not glet.dead]
        if unfinished:
            running = [record for record in self.records.values() if record.outcome == "running"]
            raise AssertionError(f"{len(unfinished)} lanes still running after {deadline}s: "
                                 f"{[asdict(record) for record in running[:5]]}")
        for glet in lanes:
            glet.get()  # a lane that raised is a test bug: show it

    def after_faults(self, count: int = 50) -> dict:
        """Fresh operations once the faults are off: ``count`` greenlets insert and read back."""
        def round_trip(n: int) -> str:
            try:
                self.db.after.insert_one({"_id": n})
                return "ok" if self.db.after.find_one({"_id": n}) == {"_id": n} else "wrong"
            except self.driver.errors.PyMongoError as exc:
                return type(exc).__name__

        glets = [gevent.spawn(round_trip, n) for n in range(count)]
        gevent.joinall(glets, timeout=30)
        self.after = dict(Counter(glet.value if glet.dead else "unfinished" for glet in glets))
        return self.after

    def close(self) -> None:
        self.client.close()

    def stop_proxy(self) -> None:
        self.proxy.stop()

    def results(self) -> dict:
        """Everything the checks and the comparison need, JSON-able."""
        return {"records": [asdict(record) for record in self.records.values()], "wrong": [repr(w) for w in self.wrong],
                "injected": dict(self.proxy.injected), "elapsed": self.elapsed, "after": self.after,
                "faults": len(self.proxy.log)}


# -- figures and checks (on results, so the same for both drivers) -------------------------------------------

def summary(results: dict) -> dict:
    records = results["records"]
    durations = sorted(record["duration"] for record in records)
    outcomes = Counter(record["outcome"] for record in records)
    by_kind = defaultdict(Counter)
    for record in records:
        by_kind[record["kind"]]["ok" if record["outcome"] == "ok" else "failed"] += 1
    retries = sum(max(0, record["attempts"] - 1) for record in records)

    def percentile(p: float) -> float:
        return durations[min(len(durations) - 1, int(p * len(durations)))] if durations else 0.0

    return {"operations": len(records), "ok": outcomes["ok"],
            "failed": sum(n for outcome, n in outcomes.items() if outcome != "ok"),
            "outcomes": dict(outcomes), "by_kind": {kind: dict(c) for kind, c in by_kind.items()},
            "retries": retries, "getmores": sum(record["getmores"] for record in records),
            "p50": percentile(0.5), "p99": percentile(0.99), "max": durations[-1] if durations else 0.0,
            "injected": results["injected"], "elapsed": results["elapsed"], "after": results["after"]}


def format_summary(title: str, figures: dict) -> str:
    return (f"[{title}] {figures['operations']} operations in {figures['elapsed']:.1f}s, "
            f"failed {figures['failed']}\n"
            f"  faults injected: {figures['injected']}\n"
            f"  outcomes: {figures['outcomes']}\n"
            f"  by kind: {figures['by_kind']}\n"
            f"  retries sent: {figures['retries']}, getMores sent: {figures['getmores']}\n"
            f"  latency p50 {figures['p50'] * 1000:.0f} ms, p99 {figures['p99'] * 1000:.0f} ms, "
            f"max {figures['max'] * 1000:.0f} ms; after the faults: {figures['after']}")


#: Errors that say nothing was sent: after an attempt went out, the user must never see one of these.
NOTHING_SENT = ("ServerSelectionTimeoutError", "WaitQueueTimeoutError")


def check(results: dict, direct_db: Any, strict_errors: bool = True) -> list:
    """The invariants, against the server directly (``direct_db``, not through the proxy): a list of problems.

    ``strict_errors``: also hold a failed operation's error to its attempts' (command monitoring's
    ``errtype``; PyMongo reports the socket's own exception there, so only greenmongo's compare)."""
    problems: list = [("wrong read", wrong) for wrong in results["wrong"]]
    records = results["records"]
    inserts = {record["op"]: record for record in records if record["kind"] == "insert"}
    present = Counter(doc["_id"] for doc in direct_db.inserts.find({}, {"_id": 1}))
    for op, record in inserts.items():
        if record["outcome"] == "ok" and present[op] != 1:
            problems.append(("acknowledged insert not present once", op, present[op]))
    strangers = set(present) - set(inserts)
    if strangers:
        problems.append(("inserts nobody attempted", sorted(strangers)[:10]))
    increments = {record["op"]: record for record in records if record["kind"] == "increment"}
    for doc in direct_db.counters.find({}):
        applied = Counter(doc["ops"])
        mine = {op: record for op, record in increments.items() if record["counter"] == doc["_id"]}
        acknowledged = [op for op, record in mine.items() if record["outcome"] == "ok"]
        unknown = [op for op, record in mine.items() if record["outcome"] != "ok"]
        twice = [op for op, n in applied.items() if n > 1]
        if twice:
            problems.append(("increment applied twice", doc["_id"], twice))
        if any(applied[op] != 1 for op in acknowledged):
            problems.append(("acknowledged increment not applied", doc["_id"],
                             [op for op in acknowledged if applied[op] != 1]))
        if set(applied) - set(mine):
            problems.append(("increment nobody attempted", doc["_id"], sorted(set(applied) - set(mine))))
        if not len(acknowledged) <= doc["n"] <= len(acknowledged) + len(unknown) or doc["n"] != len(doc["ops"]):
            problems.append(("counter", doc["_id"], doc["n"], len(acknowledged), len(unknown)))
    for record in records:
        limit = bound(record)
        if record["duration"] > limit:
            problems.append(("operation past its bound", record["op"], record["kind"], round(record["duration"], 2),
                             limit, record["commands"], record["outcome"]))
        if record["outcome"] in ("ok", "running"):
            if record["outcome"] == "running":
                problems.append(("operation never ended", record["op"]))
            continue
        problems += error_problems(record, strict_errors)
    return problems


def error_problems(record: dict, strict: bool = True) -> list:
    """A failed operation's error tells the truth: once an attempt went out, never an error saying none did;
    when the retry could not be sent, the first attempt's error."""
    outcome, failures = record["outcome"], record["failures"]
    if record["in_getmores"]:
        return []  # a getMore's error (a getMore is not retried: its own error, whatever it is, is the truth)
    if record["attempts"] and outcome in NOTHING_SENT:
        return [("error says nothing was sent", record["op"], outcome, record["commands"], failures)]
    if not strict:
        return []
    if record["attempts"] == 1 and not record["getmores"] and failures and outcome != failures[0]:
        return [("not the first attempt's error", record["op"], outcome, record["commands"], failures)]
    if failures and outcome not in failures and record["attempts"] + record["getmores"] == len(failures):
        return [("an error no attempt raised", record["op"], outcome, record["commands"], failures)]
    return []
