"""Client Side Operations Timeout: how precisely a deadline ends an operation, and what setting one costs.

Two measurements, greenmongo against PyMongo (under ``monkey.patch_all()``) in the same run, each
peer in its own process:

* **Overshoot**: 1,000 greenlets each run ``find_one`` under a 50 ms deadline (greenmongo:
  ``greenmongo.timeout(0.05)``; PyMongo: ``pymongo.timeout(0.05)``) against a server that holds
  every find for 200 ms: (a) SecantusDB with a ``blockConnection`` fail point, (b) the canned-reply
  server with ``--find-delay-ms 200``. With maxPoolSize=100 most deadlines end in the wait queue,
  the rest mid-reply. Overshoot = when the error reached the greenlet minus the deadline; reported as
  p50/p99/max in milliseconds, with the kinds of error seen.
* **Cost**: client CPU microseconds per FindOneById against the canned-reply server (no delay), with
  and without ``timeoutMS`` on the client (the deadline's bookkeeping and the maxTimeMS it adds).

Run: ``python bench/csot_bench.py [--targets secantus,canned] [--greenlets 1000] [--deadline-ms 50]``.
Figures go in the closing note; nothing here is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from driver_bench import CannedServerProcess, SecantusProcess, nearest_rank  # noqa: E402

PEERS = ("greenmongo", "pymongo")
TARGETS = ("secantus", "canned")
SERVER_DELAY_MS = 200
POOL = 100


# -- the client process ------------------------------------------------------------------------------

def _client(peer: str, uri: str, **options: Any) -> tuple[Any, Any, str]:
    """(client, the peer's timeout() context manager factory, label); PyMongo only after patching."""
    if peer == "pymongo":
        from gevent import monkey

        monkey.patch_all()
        import pymongo

        return pymongo.MongoClient(uri, maxPoolSize=POOL, **options), pymongo.timeout, f"pymongo {pymongo.version}"
    import greenmongo

    return greenmongo.MongoClient(uri, maxPoolSize=POOL, **options), greenmongo.timeout, "greenmongo"


def run_overshoot(peer: str, uri: str, greenlets: int, deadline: float, block: bool) -> dict:
    import gevent

    client, timeout, label = _client(peer, uri)
    coll = client.perftest.corpus
    coll.find_one({"_id": 1})  # connect and warm up outside the measurement
    if block:
        client.admin.command({"configureFailPoint": "failCommand", "mode": "alwaysOn",
                              "data": {"failCommands": ["find"], "blockConnection": True,
                                       "blockTimeMS": SERVER_DELAY_MS}})
    overshoots: list[float] = []
    errors: dict[str, int] = {}

    def one(n: int) -> None:
        ends = time.monotonic() + deadline
        try:
            with timeout(deadline):
                coll.find_one({"_id": 1 + n % 100})
            kind = "no error"
        except Exception as exc:  # the timeout error we are measuring
            kind = f"{type(exc).__name__}{'' if getattr(exc, 'timeout', False) else ' (timeout=False)'}"
        overshoots.append((time.monotonic() - ends) * 1000)
        errors[kind] = errors.get(kind, 0) + 1

    try:
        started = time.monotonic()
        gevent.joinall([gevent.spawn(one, n) for n in range(greenlets)])
        wall = time.monotonic() - started
    finally:
        if block:
            client.admin.command({"configureFailPoint": "failCommand", "mode": "off"})
        client.close()
    overshoots.sort()
    return {"peer": label, "errors": errors, "wall_s": wall,
            "p50": nearest_rank(overshoots, 50), "p99": nearest_rank(overshoots, 99), "max": overshoots[-1]}


def run_cost(peer: str, uri: str, ops: int, timeout_ms: Optional[int]) -> dict:
    options = {} if timeout_ms is None else {"timeoutMS": timeout_ms}
    client, _timeout, label = _client(peer, uri, **options)
    coll = client.perftest.corpus
    for n in range(200):
        coll.find_one({"_id": 1 + n % 100})
    best = float("inf")
    for _ in range(5):
        cpu = time.process_time()
        for n in range(ops):
            coll.find_one({"_id": 1 + n % 100})
        best = min(best, (time.process_time() - cpu) / ops * 1e6)
    client.close()
    return {"peer": label, "timeoutMS": timeout_ms, "cpu_us_per_op": best}


def client_main(config: dict) -> None:
    if config["mode"] == "overshoot":
        result = run_overshoot(config["peer"], config["uri"], config["greenlets"], config["deadline"],
                               config["block"])
    else:
        result = run_cost(config["peer"], config["uri"], config["ops"], config["timeout_ms"])
    print(json.dumps(result))


def _in_process(config: dict) -> dict:
    out = subprocess.run([sys.executable, __file__, "--client", json.dumps(config)], capture_output=True, text=True,
                         cwd=ROOT, timeout=600)
    if out.returncode:
        raise RuntimeError(f"{config['peer']} client failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- the parent ----------------------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--client", help=argparse.SUPPRESS)
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--peers", default=",".join(PEERS))
    parser.add_argument("--greenlets", type=int, default=1000)
    parser.add_argument("--deadline-ms", type=float, default=50.0)
    parser.add_argument("--cost-ops", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=2, help="overshoot runs per peer (best p99 kept)")
    args = parser.parse_args()
    if args.client:
        client_main(json.loads(args.client))
        return
    peers = args.peers.split(",")
    print(f"{args.greenlets} greenlets, deadline {args.deadline_ms:g} ms, server holds finds {SERVER_DELAY_MS} ms, "
          f"maxPoolSize {POOL}; {os.cpu_count()} CPUs")
    overshoot: dict[str, dict[str, dict]] = {}
    for target in args.targets.split(","):
        for peer in peers:
            runs = []
            for _ in range(args.rounds):
                server = (SecantusProcess() if target == "secantus"
                          else CannedServerProcess(many=200, ids=100, find_delay_ms=SERVER_DELAY_MS))
                with server:
                    runs.append(_in_process({"mode": "overshoot", "peer": peer, "uri": server.uri,
                                             "greenlets": args.greenlets, "deadline": args.deadline_ms / 1000,
                                             "block": target == "secantus"}))
            overshoot.setdefault(target, {})[peer] = min(runs, key=lambda run: run["p99"])
    print("\nOvershoot past the deadline (ms): p50 / p99 / max, and the errors seen")
    for target, by_peer in overshoot.items():
        for run in by_peer.values():
            print(f"  {target:9} {run['peer']:15} {run['p50']:7.1f} {run['p99']:7.1f} {run['max']:7.1f}   "
                  f"{run['errors']}  ({run['wall_s']:.2f} s)")
        if set(PEERS) <= set(by_peer):
            ours, theirs = by_peer["greenmongo"]["p99"], by_peer["pymongo"]["p99"]
            print(f"  {target:9} p99 greenmongo/PyMongo = {ours / theirs:.2f}x" if theirs > 0 else "")
    print("\nClient CPU per FindOneById on the canned server (us/op), without and with timeoutMS=10000")
    with CannedServerProcess(many=200, ids=100) as server:
        for peer in peers:
            plain = _in_process({"mode": "cost", "peer": peer, "uri": server.uri, "ops": args.cost_ops,
                                 "timeout_ms": None})
            timed = _in_process({"mode": "cost", "peer": peer, "uri": server.uri, "ops": args.cost_ops,
                                 "timeout_ms": 10000})
            print(f"  {plain['peer']:15} {plain['cpu_us_per_op']:7.1f} {timed['cpu_us_per_op']:7.1f}   "
                  f"+{(timed['cpu_us_per_op'] / plain['cpu_us_per_op'] - 1) * 100:.1f}%")


if __name__ == "__main__":
    main()
