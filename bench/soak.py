"""Soak: a long run of mixed operations through the network fault injector, with stepdowns.

``--greenlets`` greenlets (500) loop over inserts with unique ``_id``s, ``$inc`` updates on counters, small-batch
scans (getMores) and find_one, each waiting ``--think-ms`` between operations as a web app's requests would,
through tests/servers/faults.py's ``FaultProxy`` (run in a child process, so this process's memory is the
driver's) in front of a fresh SecantusDB; every ``--stepdown-every`` seconds the primary steps down
(``replSetStepDown``, force). Once a minute a line: operations by outcome, p99 latency, resident memory,
the objects the cyclic garbage collector freed (what reference cycles kept alive until a collection), and the
retries so far (each operation carries its own comment; a command listener counts the commands sent with it,
getMores aside).

At the end, with the faults switched off: fresh operations through the same client, then the checks
against the server directly (not through the proxy):

* every acknowledged insert is present, nothing that was never attempted is;
* every counter lies between its acknowledged increments and those plus the increments that failed;
* resident memory growth from the end of the warm-up (``--warmup`` seconds) to the end, as a percentage
  (target: at most 5%);
* after ``client.close()``: no greenlet left, every pool at rest before it, every server session taken
  from the pool given back (counted by wrapping the pool's get/put);

and the faults the proxy injected, by kind. The client connects directly (the server's hello names its own
address, not the proxy's), so writes during a stepdown's seconds as a secondary fail with NotPrimaryError:
there is no other member to wait for. Run by hand (``python bench/soak.py --minutes 30``; ``--driver pymongo``
for PyMongo under patch_all); the figures go in the closing note. Nothing here is asserted by CI: the smoke test
runs it for a few seconds.

The pace (``--think-ms``, 15 s on average: about 33 operations a second from the 500 greenlets) is one the server
can keep up with for the whole run. SecantusDB scans every retryable-write record it keeps (30 minutes' worth) on
each retryable write, and sorts them all past 10,000: a retryable insert took 1.3 ms on a fresh server, 7 ms at
10,000 records and 25-29 ms past them (1.2 ms with retryWrites=false; measured one at a time). At a 250 ms pace
the server fell behind within two minutes; from about minute 12 nearly every operation timed out (a handful of
successes a minute out of 3,000), so the rest of the run measured the server's collapse, not the driver: use
``--think-ms 250`` to see it.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import signal
import sys
import tempfile
import time
import tracemalloc
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

COUNTERS = 100
SEEDED_DOCS = 60
BATCH_SIZE = 7
KINDS = {"insert": 30, "increment": 30, "scan": 20, "find_one": 20}
#: Lane n's k-th insert has _id n * LANE_SPAN + k: compact integers, so the bookkeeping of what was
#: acknowledged does not itself grow the heap the soak measures.
LANE_SPAN = 10_000_000
CLIENT_OPTIONS = {"directConnection": "true", "retryWrites": "true", "retryReads": "true",
                  "socketTimeoutMS": 3000, "connectTimeoutMS": 2000, "serverSelectionTimeoutMS": 10000,
                  "waitQueueTimeoutMS": 5000, "maxPoolSize": 100, "heartbeatFrequencyMS": 500}


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def greenlet_stacks() -> tuple[int, int]:
    """(live greenlets, bytes of C stack they hold on the heap): a greenlet switched out deep in a call
    (waiting for a connection, say) keeps a copy of its stack slice, which tracemalloc does not see and
    which grows with how many greenlets wait, and how deep, not with time."""
    from tests.api_support import live_greenlets

    glets = live_greenlets()
    return len(glets), sum(getattr(glet, "_stack_saved", 0) for glet in glets)


def trimmed_rss() -> tuple[int, int]:
    """Resident memory before and after glibc's ``malloc_trim(0)`` (which hands freed heap back to the
    system): a growth that the trim takes back was the allocator keeping freed memory, not live objects."""
    import ctypes
    import ctypes.util

    before = rss_bytes()
    try:
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        return before, before
    return before, rss_bytes()


# -- the proxy, in a child process --------------------------------------------------------------------------------

def fault_plan(seed: int, minutes: float) -> Any:
    from tests.servers.faults import FaultPlan

    # A second of refused connections every five minutes, from the first minute.
    windows = tuple((float(start), 1.0) for start in range(60, int(minutes * 60), 300))
    return FaultPlan(seed=seed, reset_request=0.0005, reset_reply=0.0005, truncate_reply=0.0005, stall=0.001,
                     delay=0.02, blackhole=0.005, refuse_windows=windows, stall_seconds=(0.3, 2.5),
                     stall_close=0.5, delay_seconds=(0.001, 0.05), uncommented=0.25)


def proxy_main(host: str, port: int, seed: int, minutes: float, report: str) -> None:
    """Serve the fault proxy; SIGUSR1 switches the faults off, SIGTERM writes what was injected and exits."""
    from gevent import monkey

    monkey.patch_all()
    import gevent
    from gevent.event import Event

    from tests.servers.faults import FaultProxy

    proxy = FaultProxy(host, port, fault_plan(seed, minutes), enabled=True).start()
    done = Event()
    gevent.signal_handler(signal.SIGUSR1, proxy.disable)
    gevent.signal_handler(signal.SIGTERM, done.set)
    print(proxy.port, flush=True)
    done.wait()
    Path(report).write_text(json.dumps({"injected": dict(proxy.injected), "faults": len(proxy.log)}))
    proxy.stop()


# -- the soak -----------------------------------------------------------------------------------------------------

def attempt_counter(driver: Any) -> Any:
    """A command listener counting, per comment, the commands started but getMores: each operation of the soak
    carries its own comment, so a count above one is a retry (a cursor's getMores share the find's comment)."""
    class AttemptCounter(driver.monitoring.CommandListener):
        def __init__(self) -> None:
            self.attempts: Counter = Counter()  # comment -> commands started; the lane pops its own

        def started(self, event: Any) -> None:
            if event.command_name != "getMore":
                comment = event.command.get("comment")
                if comment is not None:
                    self.attempts[comment] += 1

        def succeeded(self, event: Any) -> None:
            pass

        def failed(self, event: Any) -> None:
            pass

    return AttemptCounter()


class Soak:
    def __init__(self, driver: Any, uri: str, direct_uri: str, args: argparse.Namespace) -> None:
        self.driver = driver
        self.args = args
        self.attempts = attempt_counter(driver)
        self.retries: Counter = Counter()  # operation kind -> retries seen
        self.client = driver.MongoClient(uri, event_listeners=[self.attempts])
        self.direct = driver.MongoClient(direct_uri, directConnection=True, serverSelectionTimeoutMS=30000)
        self.db = self.client.soak
        self.stopping = False
        self.outcomes: Counter = Counter()
        self.minute_outcomes: Counter = Counter()
        self.latencies: list = []  # this minute's
        self.p99s: list = []
        self.inserted = defaultdict(int)  # lane -> inserts attempted
        self.insert_failed = defaultdict(list)  # lane -> k of the inserts that failed (outcome unknown)
        self.inc_ok = [0] * COUNTERS
        self.inc_failed = [0] * COUNTERS
        self.stepdowns: Counter = Counter()
        self.rss: list = []  # (seconds, bytes)
        self.blocks: list = []  # (seconds, Python's allocated memory blocks): live objects, not the heap's size
        self.stacks: list = []  # (seconds, live greenlets, bytes of their saved C stacks)
        self.cyclic = 0  # objects the cyclic collector found unreachable (kept alive by reference cycles)
        self.minute_cyclic = 0
        gc.callbacks.append(self._collected)
        self.sessions_out = 0
        self.warm_snapshot: Any = None

    def _collected(self, phase: str, info: dict) -> None:
        if phase == "stop":
            self.cyclic += info["collected"]
            self.minute_cyclic += info["collected"]

    def count_sessions(self) -> None:
        """Wrap the client's server session pool: every session taken must be given back (or dropped there)."""
        pool = self.client._core.server_sessions
        get, put = pool.get, pool.put

        def counted_get(*a: Any, **k: Any) -> Any:
            self.sessions_out += 1
            return get(*a, **k)

        def counted_put(*a: Any, **k: Any) -> Any:
            self.sessions_out -= 1
            return put(*a, **k)

        pool.get, pool.put = counted_get, counted_put

    def seed(self) -> None:
        db = self.direct.soak
        db.command("dropDatabase")
        db.seeded.insert_many([{"_id": i, "v": i * i} for i in range(SEEDED_DOCS)])
        db.counters.insert_many([{"_id": k, "n": 0} for k in range(COUNTERS)])

    def lane(self, lane: int) -> None:
        import gevent

        rng = random.Random(f"{self.args.seed}/lane/{lane}")
        kinds, weights = list(KINDS), list(KINDS.values())
        errors = self.driver.errors.PyMongoError
        think = self.args.think_ms / 1000.0
        operations = 0
        while not self.stopping:
            kind = rng.choices(kinds, weights)[0]
            started = time.monotonic()
            counter = k = None
            comment = f"soak/{lane}/{operations}"  # the attempt counter's key
            operations += 1
            try:
                if kind == "insert":
                    k = self.inserted[lane]
                    self.inserted[lane] += 1
                    self.db.inserts.insert_one({"_id": lane * LANE_SPAN + k}, comment=comment)
                elif kind == "increment":
                    counter = rng.randrange(COUNTERS)
                    self.db.counters.update_one({"_id": counter}, {"$inc": {"n": 1}}, comment=comment)
                    self.inc_ok[counter] += 1
                elif kind == "scan":
                    docs = list(self.db.seeded.find({}, batch_size=BATCH_SIZE, comment=comment).sort("_id", 1))
                    if len(docs) != SEEDED_DOCS:
                        self.outcomes["wrong scan"] += 1
                else:
                    wanted = rng.randrange(SEEDED_DOCS)
                    found = self.db.seeded.find_one({"_id": wanted}, comment=comment)
                    if found != {"_id": wanted, "v": wanted * wanted}:
                        self.outcomes["wrong find_one"] += 1
                outcome = "ok"
            except errors as exc:
                outcome = type(exc).__name__
                if k is not None:
                    self.insert_failed[lane].append(k)
                if counter is not None:
                    self.inc_failed[counter] += 1
            attempts = self.attempts.attempts.pop(comment, 0)
            if attempts > 1:
                self.retries[kind] += attempts - 1
            self.latencies.append(time.monotonic() - started)
            self.outcomes[outcome] += 1
            self.minute_outcomes[outcome] += 1
            gevent.sleep(rng.uniform(0, 2 * think))  # think time: the pace of the workload, not a synchronisation

    def stepdowns_loop(self) -> None:
        import gevent

        while not self.stopping:
            gevent.sleep(self.args.stepdown_every)
            if self.stopping:
                return
            try:
                self.direct.admin.command({"replSetStepDown": 5, "force": True})
                self.stepdowns["ok"] += 1
            except self.driver.errors.PyMongoError as exc:
                self.stepdowns[type(exc).__name__] += 1

    def reporter(self, began: float) -> None:
        import gevent

        while not self.stopping:
            gevent.sleep(10)
            now = time.monotonic() - began
            self.rss.append((now, rss_bytes()))
            self.blocks.append((now, sys.getallocatedblocks()))
            self.stacks.append((now, *greenlet_stacks()))
            if self.args.tracemalloc and self.warm_snapshot is None and now >= self.args.warmup:
                self.warm_snapshot = tracemalloc.take_snapshot()
            if int(now) % 60 < 10:
                lat = sorted(self.latencies)
                p99 = lat[int(0.99 * (len(lat) - 1))] if lat else 0.0
                self.p99s.append(p99)
                print(f"{now / 60:5.1f} min  ops {sum(self.minute_outcomes.values()):6d}  "
                      f"{dict(self.minute_outcomes)}  p99 {p99 * 1000:.0f} ms  rss {self.rss[-1][1] / 2**20:.1f} MiB  "
                      f"blocks {self.blocks[-1][1]}  greenlet stacks {self.stacks[-1][2] / 2**20:.1f} MiB  "
                      f"cyclic garbage {self.minute_cyclic}  retries so far {sum(self.retries.values())}", flush=True)
                self.minute_cyclic = 0
                self.latencies = []
                self.minute_outcomes = Counter()

    def check(self) -> list:
        problems = []
        db = self.direct.soak
        present = {doc["_id"] for doc in db.inserts.find({}, {"_id": 1})}
        attempted = 0
        for lane, count in self.inserted.items():
            attempted += count
            failed = set(self.insert_failed[lane])
            for k in range(count):
                if k not in failed and lane * LANE_SPAN + k not in present:
                    problems.append(("acknowledged insert missing", lane, k))
        for _id in present:
            lane, k = divmod(_id, LANE_SPAN)
            if k >= self.inserted.get(lane, 0):
                problems.append(("insert nobody attempted", _id))
        for doc in db.counters.find({}):
            low, high = self.inc_ok[doc["_id"]], self.inc_ok[doc["_id"]] + self.inc_failed[doc["_id"]]
            if not low <= doc["n"] <= high:
                problems.append(("counter outside its bounds", doc["_id"], doc["n"], low, high))
        self.attempted_inserts = attempted
        return problems[:50]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--greenlets", type=int, default=500)
    parser.add_argument("--think-ms", type=float, default=15000.0,
                        help="mean pause between a greenlet's operations (see the module's note on the pace)")
    parser.add_argument("--stepdown-every", type=float, default=120.0)
    parser.add_argument("--warmup", type=float, default=180.0, help="seconds before memory growth is measured from")
    parser.add_argument("--seed", type=int, default=19)
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--tracemalloc", type=int, default=0, metavar="N",
                        help="trace allocations; at the end print the N source lines whose memory grew most "
                             "since the warm-up ended (slower; for finding what grows)")
    parser.add_argument("--driver", choices=("greenmongo", "pymongo"), default="greenmongo",
                        help="pymongo: PyMongo 4.20 under monkey.patch_all(), the same workload, for comparison "
                             "(the pool and session checks read greenmongo's internals: not measured there)")
    parser.add_argument("--proxy", nargs=3, metavar=("HOST", "PORT", "REPORT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.proxy:
        proxy_main(args.proxy[0], int(args.proxy[1]), args.seed, args.minutes, args.proxy[2])
        return 0
    if args.driver == "pymongo":
        from gevent import monkey

        monkey.patch_all()

    import importlib

    import gevent
    from gevent import subprocess

    driver = importlib.import_module(args.driver)
    ours = args.driver == "greenmongo"
    from tests.servers.secantus import SecantusServer
    from tests.api_support import live_greenlets, pool_at_rest
    from tests.waits import poll

    server = SecantusServer().start()
    report = tempfile.NamedTemporaryFile(prefix="soak-faults-", suffix=".json", delete=False).name
    proxy = subprocess.Popen([sys.executable, __file__, "--seed", str(args.seed), "--minutes", str(args.minutes),
                              "--proxy", server.host, str(server.port), report], cwd=ROOT, stdout=subprocess.PIPE,
                             text=True)
    try:
        proxy_port = int(proxy.stdout.readline())
        uri = f"mongodb://127.0.0.1:{proxy_port}/?" + "&".join(f"{k}={v}" for k, v in CLIENT_OPTIONS.items())
        gc.collect()
        baseline = live_greenlets()
        if args.tracemalloc:
            tracemalloc.start(1)
        soak = Soak(driver, uri, server.uri, args)
        if ours:
            soak.count_sessions()
        soak.seed()
        soak.client.admin.command("ping")
        began = time.monotonic()
        print(f"soak: {args.greenlets} greenlets for {args.minutes} min, stepdown every {args.stepdown_every} s, "
              f"proxy pid {proxy.pid}", flush=True)
        lanes = [gevent.spawn(soak.lane, n) for n in range(args.greenlets)]
        helpers = [gevent.spawn(soak.stepdowns_loop), gevent.spawn(soak.reporter, began)]
        gevent.sleep(args.minutes * 60)  # the soak's length
        if soak.warm_snapshot is not None:
            growth_by_line = tracemalloc.take_snapshot().compare_to(soak.warm_snapshot, "lineno")
            print(f"allocations that grew most since the warm-up (top {args.tracemalloc}):")
            for stat in growth_by_line[:args.tracemalloc]:
                print(f"  {stat}")
        soak.stopping = True
        gevent.joinall(lanes, timeout=60)
        gevent.killall(helpers)
        stuck = sum(1 for glet in lanes if not glet.dead)
        gc.collect()
        rss_untrimmed, rss_trimmed = trimmed_rss()
        proxy.send_signal(signal.SIGUSR1)  # faults off
        after = Counter()
        for n in range(50):
            try:
                soak.db.after.insert_one({"_id": n})
                after["ok" if soak.db.after.find_one({"_id": n}) == {"_id": n} else "wrong"] += 1
            except driver.errors.PyMongoError as exc:
                after[type(exc).__name__] += 1
        at_rest = None
        if ours:
            poll(lambda: not pool_at_rest(soak.client), timeout=10)  # the last check-ins land
            at_rest = pool_at_rest(soak.client)
        soak.client.close()
        problems = soak.check()
        soak.direct.close()
        poll(lambda: not live_greenlets() - baseline, timeout=10)  # closed workers end at their next wake-up
        gc.collect()
        leaked = live_greenlets() - baseline
        for glet in list(leaked)[:10]:
            print("leaked greenlet:", repr(glet)[:300], file=sys.stderr)
    finally:
        proxy.send_signal(signal.SIGTERM)
        proxy.wait(timeout=30)
        server.stop()
    injected = json.loads(Path(report).read_text())
    os.unlink(report)

    # Samples from the end of the warm-up to the end of the run: not those the reporter takes while the lanes wind
    # down (they would flatter the figure: nothing is in flight then).
    running = args.minutes * 60
    warm = [rss for t, rss in soak.rss if args.warmup <= t <= running]
    growth = (warm[-1] - warm[0]) / warm[0] * 100 if len(warm) >= 2 else float("nan")
    warm_blocks = [count for t, count in soak.blocks if args.warmup <= t <= running]
    blocks_growth = ((warm_blocks[-1] - warm_blocks[0]) / warm_blocks[0] * 100 if len(warm_blocks) >= 2
                     else float("nan"))
    total = sum(v for k, v in soak.outcomes.items() if not k.startswith("wrong"))
    figures = {
        "minutes": args.minutes, "greenlets": args.greenlets, "operations": total,
        "outcomes": dict(soak.outcomes), "retries": dict(soak.retries), "stepdowns": dict(soak.stepdowns),
        "faults": injected,
        "p99_ms_per_minute": [round(p * 1000) for p in soak.p99s],
        "rss_mib_after_warmup": round(warm[0] / 2**20, 1) if warm else None,
        "rss_mib_end": round(warm[-1] / 2**20, 1) if warm else None, "rss_growth_pct": round(growth, 2),
        "python_blocks_growth_pct": round(blocks_growth, 2),
        "rss_mib_per_minute": [round(rss / 2**20, 1) for t, rss in soak.rss if int(t) % 60 < 10],
        "greenlet_stacks_mib_per_minute": [round(stack / 2**20, 1) for t, n, stack in soak.stacks if int(t) % 60 < 10],
        "rss_mib_lanes_done": round(rss_untrimmed / 2**20, 1), "cyclic_garbage_objects": soak.cyclic,
        "rss_mib_after_malloc_trim": round(rss_trimmed / 2**20, 1),
        "inserts_attempted": soak.attempted_inserts, "problems": problems, "after_faults": dict(after),
        "lanes_stuck": stuck, "pools_not_at_rest": at_rest, "leaked_greenlets": len(leaked),
        "sessions_not_returned": soak.sessions_out if ours else None, "driver": args.driver,
    }
    print(json.dumps(figures, indent=1, default=str))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, default=str))
    healthy = (not problems and not stuck and not at_rest and not leaked and soak.sessions_out == 0
               and after == {"ok": 50} and not growth > 5.0)
    print("soak:", "healthy" if healthy else "NOT healthy")
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main())
