"""DriverBench single- and multi-document tasks: greenmongo vs PyMongo under gevent monkey-patching.

Tasks (Driver Performance Benchmarking spec, op counts scaled down for a 2-core machine):
FindOneById, SmallDocInsertOne, LargeDocInsertOne, FindManyAndEmptyCursor, SmallDocBulkInsert,
LargeDocBulkInsert. Each runs against these servers ("targets"), a fresh process for each peer:

* ``secantus``: SecantusDB (``secantusd-py``, a one-member replica set);
* ``canned``: a canned-reply server (bench/canned_server.py) posing as a one-member replica set,
  whose replies are built before the clock starts, so the round trip costs the client almost
  everything;
* ``canned-nosessions``: the same without ``logicalSessionTimeoutMinutes`` in hello, so PyMongo,
  like greenmongo today, sends no implicit-session ``lsid`` and no retryable-write ``txnNumber``:
  the like-for-like comparison of the two drivers' per-op paths.

Each peer is its own process: greenmongo (gevent, no patching) and PyMongo after
``gevent.monkey.patch_all()``. Both use the same public API calls. Reported per task:

* MB/s -- the spec's score: source file size x documents / wall time of the "do task" phase;
* client CPU µs per op -- ``time.process_time()`` of the client process over "do task" divided by
  the documents handled (one op = one document, the spec's scale unit). The server is another
  process, so its CPU is not in this figure (it is shown separately, read from /proc);
* the ratio greenmongo / PyMongo (target for CPU: <= 0.8);
* that CPU split into "codec" (the peer's own BSON encode/decode of the op's messages, timed
  alone in the same process) and "path" (the rest: selection, pool, wire, parsing, the hub).

The peers alternate over ``--passes`` passes (fresh client and server processes each time), so a
noisy spell on the shared machine hits both; each figure is the best of all passes x
``--iterations`` runs, each pass after one warm-up run (medians are in ``--json``).

Then FindOneById with 1, 100 and 1,000 concurrent greenlets (maxPoolSize 100) against the canned
server: throughput, p50/p99/max latency per op (pool wait included; rounds of all passes pooled)
and the p99 ratio (target at 1,000 greenlets: <= 0.1).

    python bench/driver_bench.py [--targets secantus,canned,canned-nosessions] [--iterations 3]
        [--passes 2] [--small-ops 2000] [--large-ops 5] [--concurrent-ops 10000] [--concurrent-rounds 3]
        [--json out.json]
    python bench/driver_bench.py --profile DIR [--targets canned] [--tasks FindOneById]
        # cProfile (CPU-time clock) of greenmongo's "do task" phases instead of comparing
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = Path(os.environ.get("GREENMONGO_SPEC_DIR") or ROOT.parent / "shared" / "specifications") \
    / "benchmarking" / "data" / "single_and_multi_document"

TASKS = ("FindOneById", "SmallDocInsertOne", "LargeDocInsertOne", "FindManyAndEmptyCursor",
         "SmallDocBulkInsert", "LargeDocBulkInsert")
LARGE_TASKS = ("LargeDocInsertOne", "LargeDocBulkInsert")  # the spec's 10-op tasks
TARGETS = ("secantus", "canned", "canned-nosessions")
PEERS = ("greenmongo", "pymongo")
CONCURRENCY = (1, 100, 1000)
MAX_POOL_SIZE = 100
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def nearest_rank(sorted_values: list[float], percentile: float) -> float:
    """The spec's percentile: index ``int(N * p / 100) - 1`` of the ascending values."""
    index = max(0, int(len(sorted_values) * percentile / 100) - 1)
    return sorted_values[index]


def process_cpu_seconds(pid: Optional[int]) -> float:
    """user + system CPU of another process (the server), from /proc; 0 when unavailable."""
    if not pid:
        return 0.0
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    except (OSError, IndexError, ValueError):
        return 0.0


# -- the tasks (run in the client process; the API calls are the same for both peers) ----------

class Task:
    """One micro-benchmark: ``setup`` once, then ``before`` + timed ``run`` per iteration."""

    source_file = ""
    spec_ops = 10_000

    def __init__(self, client: Any, ops: int) -> None:
        self.client = client
        self.ops = ops
        self.database = client.perftest
        self.corpus = self.database.corpus
        path = DATA_DIR / self.source_file
        self.document = json.loads(path.read_text())
        self.size_bytes = path.stat().st_size * ops  # the spec's dataset size: file size x ops

    def setup(self) -> None:
        self.client.drop_database("perftest")

    def before(self) -> None:
        pass

    def run(self) -> None:
        raise NotImplementedError

    def check(self) -> None:
        """After the timed runs: the work really happened."""

    def teardown(self) -> None:
        self.client.drop_database("perftest")

    def _recreate_corpus(self) -> None:
        self.corpus.drop()
        self.database.command("create", "corpus")


class FindOneById(Task):
    source_file = "tweet.json"

    def setup(self) -> None:
        super().setup()
        self.corpus.insert_many([{**self.document, "_id": number} for number in range(1, self.ops + 1)])

    def run(self) -> None:
        find_one = self.corpus.find_one
        for number in range(1, self.ops + 1):
            find_one({"_id": number})

    def check(self) -> None:
        found = self.corpus.find_one({"_id": self.ops})
        assert found is not None and found["_id"] == self.ops, found


class _InsertTask(Task):
    def before(self) -> None:
        self._recreate_corpus()
        # fresh copies outside the clock: the driver adds _id to each one
        self.documents = [dict(self.document) for _ in range(self.ops)]

    def check(self) -> None:
        assert all("_id" in document for document in self.documents)


class SmallDocInsertOne(_InsertTask):
    source_file = "small_doc.json"

    def run(self) -> None:
        insert_one = self.corpus.insert_one
        for document in self.documents:
            insert_one(document)


class LargeDocInsertOne(SmallDocInsertOne):
    source_file = "large_doc.json"
    spec_ops = 10


class SmallDocBulkInsert(_InsertTask):
    source_file = "small_doc.json"

    def run(self) -> None:
        result = self.corpus.insert_many(self.documents, ordered=True)
        assert len(result.inserted_ids) == self.ops


class LargeDocBulkInsert(SmallDocBulkInsert):
    source_file = "large_doc.json"
    spec_ops = 10


class FindManyAndEmptyCursor(Task):
    source_file = "tweet.json"

    def setup(self) -> None:
        super().setup()
        self.corpus.insert_many([dict(self.document) for _ in range(self.ops)])

    def run(self) -> None:
        count = 0
        for _document in self.corpus.find({}):
            count += 1
        self.count = count

    def check(self) -> None:
        assert self.count == self.ops, (self.count, self.ops)


def codec_cost_us(task: Task, codec: Any, repeat: int = 5) -> float:
    """Client CPU µs per op spent in the peer's own BSON codec alone for this task's messages.

    The BSON work each op implies, done directly (best of ``repeat``): encoding the command and
    document(s), decoding the reply. The rest of the "CPU µs/op" is the driver's own path.
    """
    int64, object_id = codec.Int64, codec.ObjectId
    name = type(task).__name__
    if name == "FindOneById":
        reply = codec.encode({"cursor": {"firstBatch": [{**task.document, "_id": 1}], "id": int64(0),
                                         "ns": "perftest.corpus"}, "ok": 1.0})
        command = {"find": "corpus", "filter": {"_id": 1}, "limit": 1, "singleBatch": True, "$db": "perftest"}
        per_op, work = 1, lambda: (codec.encode(command), codec.decode(reply))
    elif name == "FindManyAndEmptyCursor":
        batch = [{**task.document, "_id": object_id()} for _ in range(100)]
        reply = codec.encode({"cursor": {"nextBatch": batch, "id": int64(0), "ns": "perftest.corpus"}, "ok": 1.0})
        per_op, work = 100, lambda: codec.decode(reply)
    else:  # inserts: the document (with the ObjectId the driver adds) is encoded
        command = {"insert": "corpus", "ordered": True, "$db": "perftest"}
        reply = codec.encode({"n": 1, "ok": 1.0})
        bulk = "Bulk" in name
        documents = [{**task.document, "_id": object_id()} for _ in range(10 if "Large" in name else 200)]

        def work() -> None:
            for document in documents:
                codec.encode(document)
                if not bulk:
                    codec.encode(command)
                    codec.decode(reply)
        per_op = len(documents)
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        work()
        best = min(best, time.process_time() - started)
    return best / per_op * 1e6


TASK_CLASSES = {cls.__name__: cls for cls in
                (FindOneById, SmallDocInsertOne, LargeDocInsertOne, FindManyAndEmptyCursor,
                 SmallDocBulkInsert, LargeDocBulkInsert)}


def task_ops(task: str, small_ops: int, large_ops: int) -> int:
    return large_ops if task in LARGE_TASKS else small_ops


# -- the client process ---------------------------------------------------------------------------

def make_client(peer: str, uri: str) -> tuple[Any, str, Any]:
    """(client, peer label, the peer's BSON module); PyMongo is imported only after monkey-patching."""
    if peer == "pymongo":
        from gevent import monkey

        monkey.patch_all()
        import bson
        import pymongo

        assert bson.has_c(), "PyMongo's C extension is not available"
        return pymongo.MongoClient(uri, maxPoolSize=MAX_POOL_SIZE), f"pymongo {pymongo.version}", bson
    import greenmongo
    from greenmongo import bson as greenmongo_bson

    return greenmongo.MongoClient(uri, maxPoolSize=MAX_POOL_SIZE), "greenmongo", greenmongo_bson


def measure_task(task: Task, iterations: int, server_pid: Optional[int], profiler: Any = None) -> dict:
    task.setup()
    task.before()
    task.run()  # warm-up: connections made, code paths and caches warm
    walls, cpus, server_cpus = [], [], []
    for _ in range(iterations):
        task.before()
        server_started = process_cpu_seconds(server_pid)
        cpu_started = time.process_time()
        started = time.perf_counter()
        if profiler is not None:
            profiler.enable()
        task.run()
        if profiler is not None:
            profiler.disable()
        wall = time.perf_counter() - started
        cpu = time.process_time() - cpu_started
        server_cpus.append(process_cpu_seconds(server_pid) - server_started)
        walls.append(wall)
        cpus.append(cpu)
    task.check()
    task.teardown()
    return {"ops": task.ops, "size_bytes": task.size_bytes, "walls": walls, "cpus": cpus,
            "server_cpus": server_cpus}


def summarize_task(passes: list[dict]) -> dict:
    """The figures of one task from the raw timings of every pass (best and median over all)."""
    first = passes[0]
    ops, size = first["ops"], first["size_bytes"]
    walls = [wall for raw in passes for wall in raw["walls"]]
    cpus = [cpu for raw in passes for cpu in raw["cpus"]]
    server_cpus = [cpu for raw in passes for cpu in raw["server_cpus"]]
    return {
        "ops": ops, "size_bytes": size, "iterations": len(walls),
        "mb_per_s_best": size / 1e6 / min(walls),
        "mb_per_s_median": size / 1e6 / statistics.median(walls),
        "cpu_us_per_op_best": min(cpus) / ops * 1e6,
        "cpu_us_per_op_median": statistics.median(cpus) / ops * 1e6,
        "server_cpu_us_per_op_median": statistics.median(server_cpus) / ops * 1e6,
        "codec_us_per_op": min(raw["codec_us_per_op"] for raw in passes),
        "walls": walls, "cpus": cpus,
    }


def measure_concurrency(client: Any, greenlets: int, total_ops: int, ids: int, rounds: int) -> dict:
    """FindOneById from ``greenlets`` greenlets at once; latency of each op includes its pool wait.

    After a warm-up round (it fills the pool), ``rounds`` rounds of ``total_ops`` ops; latencies of
    all rounds are pooled (one round's tail swings with what else the machine does).
    """
    import gevent

    corpus = client.perftest.corpus
    per_greenlet = max(1, total_ops // greenlets)

    def worker(offset: int, latencies: list) -> None:
        find_one = corpus.find_one
        clock = time.perf_counter
        for step in range(per_greenlet):
            started = clock()
            find_one({"_id": (offset + step) % ids + 1})
            latencies.append(clock() - started)

    def one_round(ops_each: int) -> tuple[list, float, float]:
        nonlocal per_greenlet
        saved, per_greenlet = per_greenlet, ops_each
        latencies: list = []
        cpu_started = time.process_time()
        started = time.perf_counter()
        gevent.joinall([gevent.spawn(worker, index * 7919, latencies) for index in range(greenlets)],
                       raise_error=True)
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu_started
        per_greenlet = saved
        return latencies, elapsed, cpu

    one_round(max(1, per_greenlet // 10))  # warm-up: fills the pool
    latencies, elapsed, cpu = [], 0.0, 0.0
    for _ in range(rounds):
        round_latencies, round_elapsed, round_cpu = one_round(per_greenlet)
        latencies += round_latencies
        elapsed += round_elapsed
        cpu += round_cpu
    return {"greenlets": greenlets, "latencies_us": [round(latency * 1e6) for latency in latencies],
            "elapsed": elapsed, "cpu": cpu}


def summarize_concurrency(passes: list[dict]) -> dict:
    """One scenario's figures with the latencies of every round of every pass pooled."""
    latencies = sorted(latency / 1e6 for raw in passes for latency in raw["latencies_us"])
    elapsed = sum(raw["elapsed"] for raw in passes)
    cpu = sum(raw["cpu"] for raw in passes)
    ops = len(latencies)
    return {
        "greenlets": passes[0]["greenlets"], "ops": ops, "ops_per_s": ops / elapsed,
        "p50_ms": nearest_rank(latencies, 50) * 1e3, "p99_ms": nearest_rank(latencies, 99) * 1e3,
        "max_ms": latencies[-1] * 1e3, "cpu_us_per_op": cpu / ops * 1e6,
    }


def run_client(config: dict) -> dict:
    client, label, codec = make_client(config["peer"], config["uri"])
    profile_dir = config.get("profile_dir")
    results: dict = {"label": label, "tasks": {}, "concurrency": []}
    try:
        for name in config["tasks"]:
            profiler = None
            if profile_dir:
                import cProfile

                profiler = cProfile.Profile(time.process_time)  # CPU, not time spent waiting in the hub
            ops = task_ops(name, config["small_ops"], config["large_ops"])
            task = TASK_CLASSES[name](client, ops)
            results["tasks"][name] = measure_task(task, config["iterations"], config.get("server_pid"), profiler)
            results["tasks"][name]["codec_us_per_op"] = codec_cost_us(task, codec)
            if profiler is not None:
                profiler.dump_stats(os.path.join(profile_dir, f"{config['target']}-{name}.prof"))
        if config.get("concurrency"):
            client.perftest.corpus.find_one({"_id": 1})
            for greenlets in config["concurrency"]:
                results["concurrency"].append(
                    measure_concurrency(client, greenlets, config["concurrent_ops"], config["small_ops"],
                                        config["concurrent_rounds"]))
    finally:
        client.close()
    return results


# -- the orchestrating process --------------------------------------------------------------------

class CannedServerProcess:
    """bench/canned_server.py in its own process."""

    def __init__(self, many: int, ids: int, sessions: bool = True, find_delay_ms: float = 0.0) -> None:
        self.many, self.ids, self.sessions, self.find_delay_ms = many, ids, sessions, find_delay_ms
        self.process: Optional[subprocess.Popen] = None

    def __enter__(self) -> "CannedServerProcess":
        port_file = tempfile.mktemp(prefix="canned-server-port-")
        self.process = subprocess.Popen(
            [sys.executable, str(ROOT / "bench" / "canned_server.py"), port_file,
             "--many", str(self.many), "--ids", str(self.ids), "--find-delay-ms", str(self.find_delay_ms),
             *([] if self.sessions else ["--no-sessions"])],
            cwd=ROOT)
        deadline = time.monotonic() + 60
        try:
            while not os.path.exists(port_file):
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError("the canned-reply server did not start")
                time.sleep(0.05)
            self.port = int(Path(port_file).read_text())
        except BaseException:
            self.__exit__()
            raise
        finally:
            if os.path.exists(port_file):
                os.unlink(port_file)
        return self

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def uri(self) -> str:
        return f"mongodb://127.0.0.1:{self.port}/"

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


class SecantusProcess:
    def __enter__(self) -> "SecantusProcess":
        sys.path.insert(0, str(ROOT))
        from tests.servers.secantus import SecantusServer

        self.server = SecantusServer().start()
        return self

    @property
    def pid(self) -> int:
        return self.server.process.pid

    @property
    def uri(self) -> str:
        return self.server.uri

    def __exit__(self, *exc: object) -> None:
        self.server.stop()


def run_peer(target: str, peer: str, args: argparse.Namespace, tasks: list[str],
             profile_dir: Optional[str] = None) -> dict:
    if target == "secantus":
        server: Any = SecantusProcess()
    else:
        server = CannedServerProcess(args.small_ops, args.small_ops, sessions=target == "canned")
    with server:
        config = {
            "peer": peer, "uri": server.uri, "target": target, "tasks": tasks, "iterations": args.iterations,
            "small_ops": args.small_ops, "large_ops": args.large_ops, "server_pid": server.pid,
            "concurrency": list(args.concurrency) if target == "canned" and not profile_dir else [],
            "concurrent_ops": args.concurrent_ops, "concurrent_rounds": args.concurrent_rounds,
            "profile_dir": profile_dir,
        }
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        completed = subprocess.run([sys.executable, os.path.abspath(__file__), "--client", json.dumps(config)],
                                   cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True, timeout=3600)
    if completed.returncode != 0:
        raise SystemExit(f"{peer} against {target} failed with exit code {completed.returncode}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def merge_passes(passes: list[dict]) -> dict:
    """One peer's results against one target, every pass combined."""
    tasks = {name: summarize_task([raw["tasks"][name] for raw in passes]) for name in passes[0]["tasks"]}
    concurrency = [summarize_concurrency([raw["concurrency"][index] for raw in passes])
                   for index in range(len(passes[0]["concurrency"]))]
    return {"label": passes[0]["label"], "tasks": tasks, "concurrency": concurrency}


def _ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.2f}" if theirs else "n/a"


def print_task_table(target: str, results: dict, args: argparse.Namespace) -> None:
    ours, theirs = results.get("greenmongo"), results.get("pymongo")
    title = {"secantus": "SecantusDB (secantusd-py, one-member replica set)",
             "canned": "canned-reply server (one-member replica set)",
             "canned-nosessions": "canned-reply server without sessions (no lsid/txnNumber from either driver)",
             }[target]
    print(f"\n{title}; best of {args.passes} x {args.iterations} iterations (each after a warm-up); "
          "PyMongo under gevent.monkey.patch_all(); server CPU: median, from /proc (10 ms ticks)")
    label = theirs["label"] if theirs else ""
    header = (f"{'task':<23} {'ops':>5} | {'greenmongo':^21} | {label:^21} | {'ratio gm/pm':^12} | "
              f"{'server CPU µs/op':^15}")
    print(header)
    print(f"{'':<23} {'':>5} | {'MB/s':>9} {'CPU µs/op':>11} | {'MB/s':>9} {'CPU µs/op':>11} | "
          f"{'MB/s':>5} {'CPU':>6} | {'gm':>7} {'pm':>7}")
    print("-" * len(header))
    for task in (ours or theirs)["tasks"]:
        mine = ours["tasks"][task] if ours else None
        other = theirs["tasks"][task] if theirs else None
        row = f"{task:<23} {(mine or other)['ops']:>5} | "
        row += f"{mine['mb_per_s_best']:>9.2f} {mine['cpu_us_per_op_best']:>11.1f} | " if mine else f"{'':>21} | "
        row += f"{other['mb_per_s_best']:>9.2f} {other['cpu_us_per_op_best']:>11.1f} | " if other else f"{'':>21} | "
        if mine and other:
            row += (f"{_ratio(mine['mb_per_s_best'], other['mb_per_s_best']):>5} "
                    f"{_ratio(mine['cpu_us_per_op_best'], other['cpu_us_per_op_best']):>6} | ")
        else:
            row += f"{'':>12} | "
        row += f"{mine['server_cpu_us_per_op_median'] if mine else 0:>7.0f} "
        row += f"{other['server_cpu_us_per_op_median'] if other else 0:>7.0f}"
        print(row)


def print_cpu_split_table(results: dict) -> None:
    """Client CPU per op split into the BSON codec's share and the rest (the driver's own path)."""
    ours, theirs = results.get("greenmongo"), results.get("pymongo")
    if not (ours and theirs):
        return
    print("client CPU µs/op split: codec = the peer's own BSON encode/decode of this op's messages "
          "(measured alone); path = the rest")
    print(f"{'task':<23} | {'gm codec':>9} {'gm path':>9} | {'pm codec':>9} {'pm path':>9} | {'path ratio':>10}")
    for task, mine in ours["tasks"].items():
        other = theirs["tasks"][task]
        mine_path = mine["cpu_us_per_op_best"] - mine["codec_us_per_op"]
        other_path = other["cpu_us_per_op_best"] - other["codec_us_per_op"]
        print(f"{task:<23} | {mine['codec_us_per_op']:>9.1f} {mine_path:>9.1f} | "
              f"{other['codec_us_per_op']:>9.1f} {other_path:>9.1f} | {_ratio(mine_path, other_path):>10}")


def print_concurrency_table(results: dict, args: argparse.Namespace) -> None:
    ours, theirs = results.get("greenmongo"), results.get("pymongo")
    if not (ours or theirs) or not (ours or theirs)["concurrency"]:
        return
    print(f"\nFindOneById, N greenlets at once, canned-reply server, maxPoolSize {MAX_POOL_SIZE}, "
          f"{args.passes} passes x {args.concurrent_rounds} rounds x {args.concurrent_ops} ops pooled (each pass after "
          "a warm-up round), "
          "PyMongo under patch_all (latency includes the pool wait)")
    cols = f"{'ops/s':>8} {'p50 ms':>7} {'p99 ms':>8} {'max ms':>8} {'CPU µs/op':>9}"
    print(f"{'greenlets':>9} | {'greenmongo':^44} | {(theirs or {}).get('label', ''):^44} | "
          f"{'p99 ratio':>9}")
    print(f"{'':>9} | {cols} | {cols} |")
    print("-" * (9 + 3 + 44 + 3 + 44 + 3 + 9))
    rows = max(len(ours["concurrency"]) if ours else 0, len(theirs["concurrency"]) if theirs else 0)
    for index in range(rows):
        mine = ours["concurrency"][index] if ours else None
        other = theirs["concurrency"][index] if theirs else None

        def cells(result: Optional[dict]) -> str:
            if not result:
                return f"{'':>44}"
            return (f"{result['ops_per_s']:>8.0f} {result['p50_ms']:>7.2f} {result['p99_ms']:>8.2f} "
                    f"{result['max_ms']:>8.1f} {result['cpu_us_per_op']:>9.1f}")

        ratio = _ratio(mine["p99_ms"], other["p99_ms"]) if mine and other else ""
        print(f"{(mine or other)['greenlets']:>9} | {cells(mine)} | {cells(other)} | {ratio:>9}")


def print_profiles(profile_dir: str, targets: list[str], tasks: list[str], top: int) -> None:
    import pstats

    for target in targets:
        for task in tasks:
            path = os.path.join(profile_dir, f"{target}-{task}.prof")
            if not os.path.exists(path):
                continue
            print(f"\n=== greenmongo, {task} against {target}: top {top} by own time ({path}) ===")
            stats = pstats.Stats(path)
            stats.strip_dirs().sort_stats("tottime").print_stats(top)


def _csv(kind: Callable[[str], Any], allowed: Optional[tuple] = None) -> Callable[[str], list]:
    def parse(text: str) -> list:
        values = [kind(part) for part in text.split(",") if part]
        if allowed is not None:
            unknown = [value for value in values if value not in allowed]
            if unknown:
                raise argparse.ArgumentTypeError(f"unknown: {', '.join(map(str, unknown))}")
        return values
    return parse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--targets", type=_csv(str, TARGETS), default=list(TARGETS))
    parser.add_argument("--peers", type=_csv(str, PEERS), default=list(PEERS))
    parser.add_argument("--tasks", type=_csv(str, TASKS), default=list(TASKS))
    parser.add_argument("--iterations", type=int, default=3, help="timed iterations per task per pass")
    parser.add_argument("--passes", type=int, default=2,
                        help="client processes per peer and target, alternating peers (best of all is shown)")
    parser.add_argument("--small-ops", type=int, default=2000,
                        help="documents for the spec's 10,000-document tasks (also FindOneById's ids)")
    parser.add_argument("--large-ops", type=int, default=5, help="documents for the spec's 10-document tasks")
    parser.add_argument("--concurrency", type=_csv(int), default=list(CONCURRENCY),
                        help="greenlet counts for concurrent FindOneById (empty string: skip)")
    parser.add_argument("--concurrent-ops", type=int, default=10_000, help="finds per concurrency round")
    parser.add_argument("--concurrent-rounds", type=int, default=3,
                        help="rounds per concurrency scenario, latencies pooled")
    parser.add_argument("--json", metavar="FILE", help="write every figure (medians, per-iteration times) here")
    parser.add_argument("--profile", metavar="DIR",
                        help="profile greenmongo's timed phases with cProfile into DIR and print the top functions")
    parser.add_argument("--profile-top", type=int, default=25)
    parser.add_argument("--client", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.client:
        print(json.dumps(run_client(json.loads(args.client))))
        return

    if args.profile:
        os.makedirs(args.profile, exist_ok=True)
        for target in args.targets:
            run_peer(target, "greenmongo", args, args.tasks, profile_dir=os.path.abspath(args.profile))
        print_profiles(args.profile, args.targets, args.tasks, args.profile_top)
        return

    counts = {task: task_ops(task, args.small_ops, args.large_ops) for task in args.tasks}
    print("op counts used (spec: 10,000 / 10): " + ", ".join(f"{task} {count}" for task, count in counts.items()))
    print(f"data: {DATA_DIR}; one op = one document; client CPU = time.process_time() of the client process")
    print(f"{args.passes} passes, peers alternating, each a fresh client process and server; "
          f"{args.iterations} timed iterations per task per pass")
    everything: dict = {}
    for target in args.targets:
        raw: dict = {peer: [] for peer in args.peers}
        for number in range(args.passes):  # alternate, so a noisy spell on the machine hits both peers
            for peer in args.peers:
                print(f"... pass {number + 1}: {peer} against {target}", file=sys.stderr, flush=True)
                started = time.monotonic()
                raw[peer].append(run_peer(target, peer, args, args.tasks))
                print(f"    done in {time.monotonic() - started:.0f}s", file=sys.stderr, flush=True)
        everything[target] = {peer: merge_passes(passes) for peer, passes in raw.items()}
        print_task_table(target, everything[target], args)
        print_cpu_split_table(everything[target])
        if target == "canned":
            print_concurrency_table(everything[target], args)
    if args.json:
        Path(args.json).write_text(json.dumps(everything, indent=1))


if __name__ == "__main__":
    main()
