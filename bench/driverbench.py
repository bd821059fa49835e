"""The whole Driver Performance Benchmark (DriverBench), greenmongo and PyMongo side by side, one command.

    python bench/driverbench.py [--quick | --smoke] [--passes N] [--parts bson,secantus,canned]
        [--json FILE]

Parts, each a set of fresh processes, peers alternating (greenmongo, then PyMongo 4.20 after
``gevent.monkey.patch_all()``, ``--passes`` times) so a noisy spell on a shared machine hits both:

* ``bson``: the spec's BSON tasks (flat, deep, full; encode, decode), greenmongo's C path and
  PyMongo's C extension in one process (bench/bson_bench.py); size = source file x ops;
* ``secantus``: against SecantusDB, the single-doc tasks (RunCommand, FindOneByID,
  SmallDocInsertOne, LargeDocInsertOne), the multi-doc tasks (FindManyAndEmptyCursor,
  SmallDocBulkInsert, LargeDocBulkInsert, GridFsUpload, GridFsDownload) and the parallel tasks
  (LDJSON multi-file import and export, GridFS multi-file upload and download), each of those
  once across greenlets in the client process and once across worker processes;
* ``canned``: against the canned-reply server (bench/canned_server.py, whose replies cost it next
  to nothing): client CPU per op of FindOneById, SmallDocInsertOne and FindManyAndEmptyCursor for
  both drivers and for the raw floor (pre-encoded OP_MSG bytes over a plain gevent socket, no
  driver); then FindOneById from 1, 100, 1,000 and 10,000 greenlets on maxPoolSize=100:
  throughput, p50/p99/p99.9, fairness (longest wait / mean wait) and memory per waiting greenlet.

Timing follows the spec: per task, "do task" iterations until 60 s of cumulative time, at most
100 iterations or 300 s; the score is the data set's size (MB, 10^6 bytes) over the median
iteration time; composites are plain averages of scores. ``--quick`` scales op counts and data
sets down and runs 3 to 10 iterations per task (up to 8 s each), for a 2-core shared machine and
SecantusDB (a Python server that takes milliseconds per write); ``--smoke`` is the smallest run
(CI: it proves the scripts work, its figures mean nothing). The data sets come from the spec's
tarballs (see bench/benchlib.py; any that had to be generated say so in the output).

Client CPU is ``time.process_time()`` of the client process over "do task", per document (per
file for the GridFS and parallel tasks); none is shown for the worker-process mode, whose client
process only waits for its workers.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchlib  # noqa: E402
import driver_bench  # noqa: E402

HERE = Path(__file__).resolve().parent
PEERS = ("greenmongo", "pymongo")
PARTS = ("bson", "secantus", "canned")
SINGLE = ("RunCommand", "FindOneById", "SmallDocInsertOne", "LargeDocInsertOne")
MULTI = ("FindManyAndEmptyCursor", "SmallDocBulkInsert", "LargeDocBulkInsert", "GridFsUpload", "GridFsDownload")
PARALLEL = ("LdjsonMultiImport", "LdjsonMultiExport", "GridFsMultiUpload", "GridFsMultiDownload")
BSON_TASKS = tuple(f"{kind} {direction}" for kind in ("flat", "deep", "full") for direction in ("encode", "decode"))
READ = ("FindOneById", "FindManyAndEmptyCursor", "GridFsDownload", "LdjsonMultiExport", "GridFsMultiDownload")
WRITE = ("SmallDocInsertOne", "LargeDocInsertOne", "SmallDocBulkInsert", "LargeDocBulkInsert", "GridFsUpload",
         "LdjsonMultiImport", "GridFsMultiUpload")
CANNED_TASKS = ("FindOneById", "SmallDocInsertOne", "FindManyAndEmptyCursor")

#: Per mode: op counts, data-set scale, timing policy, BSON ops/iterations, concurrency.
MODES: dict[str, dict[str, Any]] = {
    "spec": {"small_ops": 10_000, "large_ops": 10, "canned_ops": 10_000, "scale": dict(driver_bench.SPEC_SCALE),
             "policy": benchlib.SPEC_POLICY, "bson_ops": 10_000, "bson_iterations": 100,
             "concurrency": [1, 100, 1000, 10_000], "concurrent_ops": 10_000, "concurrent_rounds": 3, "passes": 1},
    "quick": {"small_ops": 200, "large_ops": 2, "canned_ops": 2000,
              "scale": {**driver_bench.SPEC_SCALE, "gridfs_large_bytes": 5 * 1024 * 1024, "ldjson_files": 4,
                        "ldjson_lines": 500, "gridfs_files": 4, "gridfs_bytes": 1024 * 1024, "greenlets": 4},
              "policy": benchlib.QUICK_POLICY, "bson_ops": 10_000, "bson_iterations": 7,
              "concurrency": [1, 100, 1000, 10_000], "concurrent_ops": 10_000, "concurrent_rounds": 1, "passes": 1},
    "smoke": {"small_ops": 20, "large_ops": 1, "canned_ops": 100,
              "scale": {**driver_bench.SPEC_SCALE, "gridfs_large_bytes": 300_000, "ldjson_files": 2,
                        "ldjson_lines": 20, "gridfs_files": 2, "gridfs_bytes": 300_000, "greenlets": 2},
              "policy": benchlib.SMOKE_POLICY, "bson_ops": 200, "bson_iterations": 1,
              "concurrency": [1, 200], "concurrent_ops": 400, "concurrent_rounds": 1, "passes": 1},
}


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# -- running --------------------------------------------------------------------------------------

def run_bson(mode: dict) -> dict:
    """{peer: {task: {"mb_per_s": median score, "iterations": n}}} for greenmongo (C) and PyMongo (C)."""
    completed = subprocess.run(
        [sys.executable, str(HERE / "bson_bench.py"), "--peers", "greenmongo,pymongo-c",
         "--ops", str(mode["bson_ops"]), "--iterations", str(mode["bson_iterations"])],
        cwd=benchlib.ROOT, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        raise SystemExit(f"bson_bench failed:\n{completed.stderr[-3000:]}")
    raw = json.loads(completed.stdout.strip().splitlines()[-1])
    results: dict = {}
    for peer, name in (("greenmongo", "greenmongo"), ("pymongo-c", "pymongo")):
        results[name] = {}
        for task, figures in raw[peer].items():
            source = benchlib.BSON_DIR / f"{task.split()[0]}_bson.json"
            size = source.stat().st_size * figures["ops"]  # the spec's size: source file x ops
            results[name][task] = {"mb_per_s": size / 1e6 / statistics.median(figures["times"]),
                                   "iterations": len(figures["times"]), "size_bytes": size}
    return results


def driver_args(mode: dict, small_ops: int, concurrency: list[int]) -> argparse.Namespace:
    return argparse.Namespace(small_ops=small_ops, large_ops=mode["large_ops"], policy=mode["policy"],
                              concurrency=concurrency, concurrent_ops=mode["concurrent_ops"],
                              concurrent_rounds=mode["concurrent_rounds"], scale=mode["scale"])


def run_target(target: str, peers: list[str], tasks: list[str], args: argparse.Namespace, passes: int) -> dict:
    """{peer: merged results}, the peers alternating over ``passes`` fresh client+server processes."""
    raw: dict = {peer: [] for peer in peers}
    for number in range(passes):
        for peer in peers:
            _log(f"... pass {number + 1}/{passes}: {peer} against {target}")
            started = time.monotonic()
            raw[peer].append(driver_bench.run_peer(target, peer, args, tasks))
            _log(f"    done in {time.monotonic() - started:.0f}s")
    return {peer: driver_bench.merge_passes(passes_raw) for peer, passes_raw in raw.items()}


# -- reporting ------------------------------------------------------------------------------------

def _ratio(ours: Optional[float], theirs: Optional[float]) -> Optional[float]:
    return ours / theirs if ours is not None and theirs else None


def _fmt(value: Optional[float], spec: str = ".2f") -> str:
    return format(value, spec) if value is not None else "-"


def scores(results: dict, peer: str) -> dict[str, float]:
    """Task name -> the spec's score (MB/s, median) for one peer, parallel tasks as ``name/mode``."""
    out: dict[str, float] = {}
    for task, figures in results.get("bson", {}).get(peer, {}).items():
        out[task] = figures["mb_per_s"]
    for task, figures in results.get("secantus", {}).get(peer, {}).get("tasks", {}).items():
        out[task] = figures["mb_per_s_median"]
    return out


def composites(score: dict[str, float]) -> dict[str, Optional[float]]:
    """The spec's composites; ParallelBench and the read/write composites use the greenlet mode
    (DriverBench's headline) and, with "/processes", the worker-process mode."""

    def average(names: list[str]) -> Optional[float]:
        values = [score[name] for name in names if name in score]
        return sum(values) / len(values) if values and len(values) == len(names) else None

    out: dict[str, Optional[float]] = {"BSONBench": average(list(BSON_TASKS)),
                                       "SingleBench": average([task for task in SINGLE if task != "RunCommand"]),
                                       "MultiBench": average(list(MULTI))}
    for mode in driver_bench.PARALLEL_MODES:
        suffix = "" if mode == "greenlets" else "/processes"

        def named(tasks: tuple, mode: str = mode) -> list[str]:
            return [f"{task}/{mode}" if task in PARALLEL else task for task in tasks]

        out[f"ParallelBench{suffix}"] = average(named(PARALLEL))
        out[f"ReadBench{suffix}"] = average(named(READ))
        out[f"WriteBench{suffix}"] = average(named(WRITE))
        read, write = out[f"ReadBench{suffix}"], out[f"WriteBench{suffix}"]
        out[f"DriverBench{suffix}"] = (read + write) / 2 if read is not None and write is not None else None
    return out


def print_scores(results: dict, mode_name: str, mode: dict) -> None:
    gm, pm = scores(results, "greenmongo"), scores(results, "pymongo")
    if not gm and not pm:  # neither the BSON nor the SecantusDB part ran
        return
    secantus = results.get("secantus", {})
    print(f"\n== DriverBench micro-benchmarks ({mode_name} mode): score = MB/s at the median iteration; "
          "ratio = greenmongo / PyMongo (above 1: greenmongo faster). Client CPU µs per op: median "
          "(CPU ratio below 1: greenmongo cheaper). Server: SecantusDB except BSON (client only)")
    header = (f"{'group':<9} {'task':<32} {'size MB':>8} {'iters':>9} | {'gm MB/s':>9} {'pm MB/s':>9} "
              f"{'ratio':>6} | {'gm CPU':>9} {'pm CPU':>9} {'ratio':>6}")
    print(header)
    print("-" * len(header))
    rows = [("BSON", task) for task in BSON_TASKS] + [("Single", task) for task in SINGLE] + \
        [("Multi", task) for task in MULTI] + \
        [("Parallel", f"{task}/{mode_name_}") for mode_name_ in driver_bench.PARALLEL_MODES for task in PARALLEL]
    for group, task in rows:
        if task not in gm and task not in pm:
            continue
        if group == "BSON":
            figures = results["bson"]["greenmongo"][task]
            other_figures = results["bson"].get("pymongo", {}).get(task)
            size = figures["size_bytes"] / 1e6
            iterations = f"{figures['iterations']}/{other_figures['iterations'] if other_figures else '-'}"
            cpu_gm = cpu_pm = None
        else:
            figures = secantus["greenmongo"]["tasks"][task]
            other = secantus.get("pymongo", {}).get("tasks", {}).get(task)
            size = figures["size_bytes"] / 1e6
            iterations = f"{figures['iterations']}/{other['iterations'] if other else '-'}"
            cpu_gm = figures["cpu_us_per_op_median"]
            cpu_pm = other["cpu_us_per_op_median"] if other else None
            if task.endswith("/processes"):  # the client process only waits: its workers' CPU is not measured
                cpu_gm = cpu_pm = None
        print(f"{group:<9} {task:<32} {size:>8.3f} {iterations:>9} | {_fmt(gm.get(task), '9.2f')} "
              f"{_fmt(pm.get(task), '9.2f')} {_fmt(_ratio(gm.get(task), pm.get(task)), '6.2f')} | "
              f"{_fmt(cpu_gm, '9.1f')} {_fmt(cpu_pm, '9.1f')} {_fmt(_ratio(cpu_gm, cpu_pm), '6.2f')}")
    gm_c, pm_c = composites(gm), composites(pm)
    print(f"\n{'composite':<28} | {'greenmongo':>10} {'pymongo':>10} {'ratio':>6}")
    for name, value in gm_c.items():
        print(f"{name:<28} | {_fmt(value, '10.2f')} {_fmt(pm_c.get(name), '10.2f')} "
              f"{_fmt(_ratio(value, pm_c.get(name)), '6.2f')}")
    print("(ParallelBench, ReadBench, WriteBench, DriverBench: parallel tasks across greenlets; "
          "'/processes': across worker processes. BSONBench is not in DriverBench, as the spec says.)")


def print_canned(results: dict) -> None:
    canned = results.get("canned")
    if not canned:
        return
    gm, pm, floor = (canned.get(peer, {}).get("tasks", {}) for peer in ("greenmongo", "pymongo", "floor"))
    print("\n== Client CPU per op against the canned-reply server (replies prepared: the client's cost); "
          "median µs/op; floor = pre-encoded OP_MSG bytes over a plain gevent socket, no driver")
    header = (f"{'task':<24} {'ops':>6} | {'gm CPU':>8} {'pm CPU':>8} {'floor':>7} | {'gm/pm':>6} {'gm/floor':>8} "
              f"{'pm/floor':>8} | {'gm MB/s':>8} {'pm MB/s':>8} {'floor MB/s':>10}")
    print(header)
    print("-" * len(header))
    for task in CANNED_TASKS:
        mine, other, raw = gm.get(task), pm.get(task), floor.get(task)
        if not mine:
            continue

        def cpu(figures: Optional[dict]) -> Optional[float]:
            return figures["cpu_us_per_op_median"] if figures else None

        def mbs(figures: Optional[dict]) -> Optional[float]:
            return figures["mb_per_s_median"] if figures else None

        print(f"{task:<24} {mine['ops']:>6} | {_fmt(cpu(mine), '8.1f')} {_fmt(cpu(other), '8.1f')} "
              f"{_fmt(cpu(raw), '7.1f')} | {_fmt(_ratio(cpu(mine), cpu(other)), '6.2f')} "
              f"{_fmt(_ratio(cpu(mine), cpu(raw)), '8.2f')} {_fmt(_ratio(cpu(other), cpu(raw)), '8.2f')} | "
              f"{_fmt(mbs(mine), '8.2f')} {_fmt(mbs(other), '8.2f')} {_fmt(mbs(raw), '10.2f')}")


def print_concurrency(results: dict, mode: dict) -> None:
    canned = results.get("canned")
    if not canned or not canned["greenmongo"]["concurrency"]:
        return
    print(f"\n== FindOneById from N greenlets at once, maxPoolSize {driver_bench.MAX_POOL_SIZE}, canned-reply "
          f"server, {mode['concurrent_rounds']} round(s) x {mode['concurrent_ops']} ops per pass after a warm-up "
          "round; latency = call to result, pool wait included; fairness = longest wait / mean wait; "
          "memory = tracemalloc bytes per waiting greenlet (driver + greenlet; the bare greenlet's cost in "
          "brackets: the same count blocked on one gevent Event)")
    cols = f"{'ops/s':>7} {'p50':>7} {'p99':>7} {'p99.9':>7} {'max':>7} {'fair':>5} {'mem B':>12}"
    print(f"{'greenlets':>9} | {'greenmongo (ms)':^57} | {'pymongo 4.20.1 + patch_all (ms)':^57} | {'p99 gm/pm':>9}")
    print(f"{'':>9} | {cols} | {cols} |")
    print("-" * (9 + 3 + 57 + 3 + 57 + 3 + 9))
    theirs = canned.get("pymongo", {}).get("concurrency", [])
    for index, mine in enumerate(canned["greenmongo"]["concurrency"]):
        other = theirs[index] if index < len(theirs) else None

        def cells(figures: Optional[dict]) -> str:
            if not figures:
                return f"{'':>57}"
            memory = figures.get("memory")
            mem = (f"{memory['traced_bytes_per_waiter']:.0f}[{memory['bare_traced_bytes_per_waiter']:.0f}]"
                   if memory else "-")
            return (f"{figures['ops_per_s']:>7.0f} {figures['p50_ms']:>7.2f} {figures['p99_ms']:>7.2f} "
                    f"{figures['p999_ms']:>7.2f} {figures['max_ms']:>7.1f} {figures['fairness']:>5.1f} {mem:>12}")

        ratio = _ratio(mine["p99_ms"], other["p99_ms"]) if other else None
        print(f"{mine['greenlets']:>9} | {cells(mine)} | {cells(other)} | {_fmt(ratio, '9.2f')}")
    rss = [(figures["greenlets"], figures["memory"]) for figures in canned["greenmongo"]["concurrency"]
           if figures.get("memory")]
    if rss:
        print("RSS delta per waiting greenlet, greenmongo (bare greenlet): " + ", ".join(
            f"{count}: {memory['rss_bytes_per_waiter']:.0f} ({memory['bare_rss_bytes_per_waiter']:.0f}) B"
            for count, memory in rss))


def print_targets(results: dict) -> None:
    """The issue's targets, each with the figure from this run."""
    lines = []

    def check(label: str, value: Optional[float], limit: float, below: bool = True) -> None:
        if value is None:
            lines.append(f"  {label:<66} {'-':>7}  (not measured)")
            return
        met = value <= limit if below else value >= limit
        lines.append(f"  {label:<66} {value:>7.2f}  {'met' if met else 'MISSED'} "
                     f"({'<=' if below else '>='} {limit})")

    for target in ("canned", "secantus"):
        figures = results.get(target, {})
        gm = figures.get("greenmongo", {}).get("tasks", {})
        pm = figures.get("pymongo", {}).get("tasks", {})
        for task in CANNED_TASKS:
            if task in gm and task in pm:
                check(f"client CPU/op gm/pm, {task} ({target})",
                      _ratio(gm[task]["cpu_us_per_op_median"], pm[task]["cpu_us_per_op_median"]), 0.5)
    canned = results.get("canned", {})
    floor = canned.get("floor", {}).get("tasks", {})
    for task in driver_bench.FLOOR_TASKS:
        mine = canned.get("greenmongo", {}).get("tasks", {}).get(task)
        if mine and task in floor:
            check(f"client CPU/op gm/raw floor, {task} (canned)",
                  _ratio(mine["cpu_us_per_op_median"], floor[task]["cpu_us_per_op_median"]), 3.0)
    gm_c, pm_c = composites(scores(results, "greenmongo")), composites(scores(results, "pymongo"))
    check("DriverBench gm/pm (SecantusDB; parallel across greenlets)",
          _ratio(gm_c["DriverBench"], pm_c["DriverBench"]), 1.5, below=False)
    check("DriverBench gm/pm (SecantusDB; parallel across processes)",
          _ratio(gm_c["DriverBench/processes"], pm_c["DriverBench/processes"]), 1.5, below=False)
    mine_c = canned.get("greenmongo", {}).get("concurrency", [])
    theirs_c = canned.get("pymongo", {}).get("concurrency", [])
    for index, mine in enumerate(mine_c):
        if mine["greenlets"] < 10_000:
            continue
        other = theirs_c[index] if index < len(theirs_c) else None
        check(f"p99 gm/pm at {mine['greenlets']} greenlets", _ratio(mine["p99_ms"], other["p99_ms"] if other else None),
              0.1)
        check(f"longest wait / mean wait, gm at {mine['greenlets']} greenlets", mine["fairness"], 5.0)
        if other:
            lines.append(f"  {'(pymongo longest wait / mean wait at the same count)':<66} {other['fairness']:>7.2f}")
    print("\n== Targets (issue 20), figures from this run")
    print("\n".join(lines))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="scaled-down op counts, data sets and iterations")
    size.add_argument("--smoke", action="store_true", help="the smallest run (CI), figures meaningless")
    parser.add_argument("--parts", type=driver_bench._csv(str, PARTS), default=list(PARTS))
    parser.add_argument("--passes", type=int, help="client processes per peer and server, peers alternating")
    parser.add_argument("--json", metavar="FILE", help="write every figure here")
    args = parser.parse_args()

    mode_name = "smoke" if args.smoke else "quick" if args.quick else "spec"
    mode = copy.deepcopy(MODES[mode_name])
    passes = args.passes or mode["passes"]
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    policy = mode["policy"]
    print(f"DriverBench, {mode_name} mode: {os.cpu_count()} CPUs, load average at start {load[0]:.2f} "
          f"(a shared machine: compare the ratios, not the absolute figures); {passes} pass(es), peers alternating; "
          f"timing: iterations while < {policy.min_time:g} s (at least {policy.min_iterations}), at most "
          f"{policy.max_iterations} or {policy.max_time:g} s; single/multi-doc ops: {mode['small_ops']} "
          f"(spec 10,000) / {mode['large_ops']} (spec 10); PyMongo 4.20 under gevent.monkey.patch_all()")
    results: dict = {"mode": mode_name}
    if "bson" in args.parts:
        _log("... BSON")
        results["bson"] = run_bson(mode)
    if "secantus" in args.parts:
        tasks = list(SINGLE + MULTI) + [f"{task}/{parallel_mode}" for parallel_mode in driver_bench.PARALLEL_MODES
                                        for task in PARALLEL]
        scale = mode["scale"]
        notes = {"ldjson_multi": benchlib.ldjson_multi(scale["ldjson_files"], scale["ldjson_lines"]).note,
                 "gridfs_multi": benchlib.gridfs_multi(scale["gridfs_files"], scale["gridfs_bytes"]).note,
                 "gridfs_large": benchlib.gridfs_large(scale["gridfs_large_bytes"]).note}
        print("data sets: " + "; ".join(f"{name}: {note}" for name, note in notes.items()) +
              f"; parallel: {scale['greenlets']} greenlets, or {scale['workers']} worker processes")
        results["data_sets"] = notes
        results["secantus"] = run_target("secantus", list(PEERS), tasks,
                                          driver_args(mode, mode["small_ops"], []), passes)
    if "canned" in args.parts:
        canned_passes = max(passes, 2) if mode_name != "smoke" else 1
        results["canned"] = run_target("canned", [*PEERS, "floor"], list(CANNED_TASKS),
                                       driver_args(mode, mode["canned_ops"], mode["concurrency"]), canned_passes)
    load_end = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    print_scores(results, mode_name, mode)
    print_canned(results)
    print_concurrency(results, mode)
    print_targets(results)
    print(f"\nload average at end {load_end[0]:.2f} (1 min) / {load_end[1]:.2f} (5 min) on {os.cpu_count()} CPUs")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
