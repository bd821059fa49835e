"""Checkout + check-in cost: greenmongo's pool vs PyMongo's pool under gevent monkey-patching.

No network: both pools get stub connections. Each scenario runs ``total`` checkout/check-in
pairs spread over N greenlets (1, 100, 1,000) contending for maxPoolSize 10 or 100:

* ``tight``: ``with pool.checkout(): pass`` -- pure pool overhead (one greenlet only: with
  no switch inside, greenlets would just run one after another);
* ``switch``: ``with pool.checkout(): gevent.sleep(0)`` -- the holder switches while holding
  the connection, so greenlets really contend and wait. The same loop without a pool is
  measured as a baseline and subtracted ("net").

Each implementation runs in its own subprocess; PyMongo's after ``monkey.patch_all()``
(its pool is ``pymongo.synchronous.pool.Pool``, whose ``connect`` is replaced by a stub that
builds a real ``Connection`` around a fake socket, keeping its bookkeeping).

    python bench/pool_bench.py [--total 100000] [--repeat 3] [--no-pymongo]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List

GREENLETS = (1, 100, 1000)
POOL_SIZES = (10, 100)


def scenarios() -> List[Dict[str, Any]]:
    out = [{"greenlets": 1, "pool": size, "mode": "tight"} for size in POOL_SIZES]
    out += [{"greenlets": n, "pool": size, "mode": "switch"} for n in GREENLETS for size in POOL_SIZES]
    return out


# -- workers (run in a subprocess) ---------------------------------------------------

def make_greenmongo_pool(max_pool_size: int) -> Any:
    from greenmongo.pool import Pool, PoolOptions

    class StubConnection:
        closed = False

        def __init__(self, connection_id: int) -> None:
            self.id = connection_id

        def close(self) -> None:
            self.closed = True

    pool = Pool(("localhost", 27017), StubConnection, PoolOptions(max_pool_size=max_pool_size))
    pool.ready()
    return pool


def make_pymongo_pool(max_pool_size: int) -> Any:
    from pymongo.network_layer import NetworkingInterfaceBase
    from pymongo.pool_options import PoolOptions
    from pymongo.synchronous.pool import Connection, Pool

    class StubInterface(NetworkingInterfaceBase):
        def close(self) -> None:
            pass

        def settimeout(self, timeout: Any) -> None:
            pass

    pool = Pool(("localhost", 27017), PoolOptions(max_pool_size=max_pool_size), is_sdam=False)

    def connect(handler: Any = None) -> Any:
        # What Pool.connect does around the network part: id, cancel context, Connection.
        with pool.lock:
            connection_id = pool.next_connection_id
            pool.next_connection_id += 1
        conn = Connection(StubInterface(None), pool, pool.address, connection_id, False)
        with pool.lock:
            pool.active_contexts.add(conn.cancel_context)
        return conn

    pool.connect = connect
    pool.ready()
    return pool


def run_scenario(pool: Any, greenlets: int, mode: str, total: int) -> float:
    import gevent

    per_greenlet = max(1, total // greenlets)
    checkout = pool.checkout if pool is not None else None
    sleep = gevent.sleep

    if mode == "tight":
        def loop(n: int) -> None:
            for _ in range(n):
                with checkout():
                    pass
    elif mode == "switch":
        def loop(n: int) -> None:
            for _ in range(n):
                with checkout():
                    sleep(0)
    else:  # baseline: the same switching, no pool
        def loop(n: int) -> None:
            for _ in range(n):
                sleep(0)

    started = time.perf_counter()
    workers = [gevent.spawn(loop, per_greenlet) for _ in range(greenlets)]
    gevent.joinall(workers, raise_error=True)
    elapsed = time.perf_counter() - started
    return elapsed / (per_greenlet * greenlets)


def worker(implementation: str, total: int, repeat: int) -> None:
    if implementation == "pymongo":
        from gevent import monkey
        monkey.patch_all()
        make: Callable[[int], Any] = make_pymongo_pool
    else:
        make = make_greenmongo_pool
    results = []
    for scenario in scenarios():
        pool = make(scenario["pool"])
        run_scenario(pool, scenario["greenlets"], scenario["mode"], total // 10)  # warm up
        best = min(run_scenario(pool, scenario["greenlets"], scenario["mode"], total) for _ in range(repeat))
        baseline = 0.0
        if scenario["mode"] == "switch":
            baseline = min(run_scenario(None, scenario["greenlets"], "baseline", total) for _ in range(repeat))
        results.append({**scenario, "seconds_per_op": best, "baseline_per_op": baseline})
    print(json.dumps(results))


# -- driver ---------------------------------------------------------------------------

def run_worker(implementation: str, total: int, repeat: int) -> List[Dict[str, Any]]:
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    completed = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--worker", implementation,
         "--total", str(total), "--repeat", str(repeat)],
        capture_output=True, text=True, env=env, check=False)
    if completed.returncode != 0:
        raise RuntimeError(f"{implementation} worker failed:\n{completed.stderr}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--total", type=int, default=100_000, help="checkouts per scenario")
    parser.add_argument("--repeat", type=int, default=3, help="runs per scenario (best is kept)")
    parser.add_argument("--no-pymongo", action="store_true", help="skip the PyMongo comparison")
    parser.add_argument("--worker", choices=("greenmongo", "pymongo"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.total, args.repeat)
        return

    ours = run_worker("greenmongo", args.total, args.repeat)
    theirs = None
    if not args.no_pymongo:
        try:
            theirs = run_worker("pymongo", args.total, args.repeat)
        except RuntimeError as exc:
            print(f"PyMongo comparison unavailable: {exc}", file=sys.stderr)

    print(f"checkout+checkin, {args.total} per scenario, best of {args.repeat}; "
          "µs per checkout+checkin (net = minus the same loop without a pool)")
    header = f"{'greenlets':>9} {'pool':>4} {'mode':>6} | {'greenmongo µs':>13} {'net':>6} {'ops/s':>9}"
    if theirs:
        header += f" | {'pymongo µs':>10} {'net':>6} {'ops/s':>9} | {'ratio':>5} {'net ratio':>9}"
    print(header)
    print("-" * len(header))
    for index, mine in enumerate(ours):
        us = mine["seconds_per_op"] * 1e6
        net = us - mine["baseline_per_op"] * 1e6
        line = (f"{mine['greenlets']:>9} {mine['pool']:>4} {mine['mode']:>6} | {us:>13.2f} {net:>6.2f} "
                f"{1 / mine['seconds_per_op']:>9,.0f}")
        if theirs:
            other = theirs[index]
            their_us = other["seconds_per_op"] * 1e6
            their_net = their_us - other["baseline_per_op"] * 1e6
            line += (f" | {their_us:>10.2f} {their_net:>6.2f} {1 / other['seconds_per_op']:>9,.0f}"
                     f" | {us / their_us:>5.2f} {net / their_net if their_net > 0 else float('nan'):>9.2f}")
        print(line)


if __name__ == "__main__":
    main()
