"""How SecantusDB's CPU per request depends on how fast its clients send: the figure behind app_bench's server CPU.

SecantusDB serves each connection on a Python thread; with many requests in flight at once its threads
contend for the GIL, and each request costs the server more CPU. A client that answers its greenlets sooner
keeps more requests in flight, so on a shared two-core machine the faster driver can see the server answer
fewer requests per second. This measures it: ``--greenlets`` greenlets each run ``find_one`` by ``_id`` in a
loop against a fresh SecantusDB (one per run), and after each reply spin the CPU for ``--spin`` microseconds
(0, then what PyMongo's extra client CPU per find is, and more), for greenmongo and for PyMongo under
``monkey.patch_all()``; per run: the server's CPU per find (from /proc) and finds per second.

    python bench/server_pacing.py [--greenlets 10] [--spins 0,60,120] [--ops 6000] [--json FILE]

A client-side spin that lowers the server's CPU per find and raises finds per second shows the server, not
the driver, setting those figures. Each run is a fresh process (PyMongo needs its own, patched).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from benchlib import child_env

ROOT = Path(__file__).resolve().parent.parent


def run_client(config: dict) -> dict:
    """One run in this (fresh) process: the server is started here, so it is fresh too."""
    if config["driver"] == "pymongo":
        from gevent import monkey

        monkey.patch_all()
        from pymongo import MongoClient
    else:
        from greenmongo import MongoClient
    import gevent

    sys.path.insert(0, str(ROOT))
    from app_bench import cpu_seconds, group_pids, used
    from tests.servers.secantus import SecantusServer

    greenlets, ops, spin = config["greenlets"], config["ops"], config["spin_us"] / 1e6
    server = SecantusServer().start()
    try:
        client = MongoClient(server.uri, maxPoolSize=max(greenlets, 1))
        items = client.pacing.items
        items.insert_many([{"_id": n, "price": n % 97} for n in range(1, 1001)])
        items.find_one({"_id": 1})

        def worker(offset: int) -> None:
            clock = time.perf_counter
            for step in range(ops // greenlets):
                items.find_one({"_id": (offset + step) % 1000 + 1})
                if spin:
                    until = clock() + spin
                    while clock() < until:
                        pass

        pids = group_pids(server.process.pid)
        before, started = cpu_seconds(pids), time.perf_counter()
        gevent.joinall([gevent.spawn(worker, index * 31) for index in range(greenlets)], raise_error=True)
        elapsed = time.perf_counter() - started
        server_cpu = used(before, cpu_seconds(pids))
        done = ops // greenlets * greenlets
        client.close()
    finally:
        server.stop()
    return {"server_cpu_us_per_find": server_cpu / done * 1e6, "finds_per_s": done / elapsed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--greenlets", type=int, default=10)
    parser.add_argument("--spins", default="0,60,120", help="client CPU spun after each reply, microseconds")
    parser.add_argument("--ops", type=int, default=6000)
    parser.add_argument("--drivers", default="greenmongo,pymongo")
    parser.add_argument("--json", metavar="FILE", help="write every figure here")
    parser.add_argument("--client", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        print(json.dumps(run_client(json.loads(args.client))))
        return
    print(f"find_one by _id from {args.greenlets} greenlets, {args.ops} finds per run, a fresh SecantusDB each run")
    print(f"{'driver':<11} {'spin us':>7} | {'server CPU us/find':>18} {'finds/s':>8}")
    env = child_env()
    runs = []
    for driver in args.drivers.split(","):
        for spin in (float(value) for value in args.spins.split(",")):
            config = {"driver": driver, "greenlets": args.greenlets, "ops": args.ops, "spin_us": spin}
            done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--client", json.dumps(config)],
                                  cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
            if done.returncode != 0:
                raise SystemExit(f"{driver} spin {spin}: exit {done.returncode}: {done.stderr[-2000:]}")
            figures = json.loads(done.stdout.strip().splitlines()[-1])
            runs.append({**config, **figures})
            print(f"{driver:<11} {spin:>7.0f} | {figures['server_cpu_us_per_find']:>18.0f} "
                  f"{figures['finds_per_s']:>8.0f}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
