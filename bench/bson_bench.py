"""BSON micro-benchmarks from the Driver Performance Benchmarking spec (flat/deep/full, encode/decode).

Each codec runs in its own subprocess so PyMongo's C and pure-Python paths can be compared in one
run: greenmongo, PyMongo with its C extension, and PyMongo with the extension blocked. Data size is
the encoded length of the document; each task is 10,000 operations, repeated, median reported.

    python bench/bson_bench.py [--iterations N] [--ops N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA_DIR = Path(os.environ.get("GREENMONGO_SPEC_DIR") or HERE.parent.parent / "shared" / "specifications") \
    / "benchmarking" / "data" / "extended_bson"
TASKS = ("flat", "deep", "full")
PEERS = ("greenmongo", "pymongo-c", "pymongo-py")


def _load_codec(peer: str):
    """(loads_extjson, encode, decode) for one peer."""
    if peer == "greenmongo":
        from greenmongo import bson
        from greenmongo.bson import json_util

        opts = json_util.CANONICAL_JSON_OPTIONS
        return (lambda text: json_util.loads(text, json_options=opts)), bson.encode, bson.decode
    if peer == "pymongo-py":
        sys.modules["bson._cbson"] = None  # type: ignore[assignment]  # force the pure-Python codec
    import bson
    from bson import json_util

    if peer == "pymongo-py":
        assert not bson.has_c(), "could not disable PyMongo's C extension"
    else:
        assert bson.has_c(), "PyMongo's C extension is not available"
    return (lambda text: json_util.loads(text)), bson.encode, bson.decode


def _measure(fn, arg, ops: int, iterations: int) -> float:
    times = []
    for _ in range(iterations):
        start = time.perf_counter()
        for _ in range(ops):
            fn(arg)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def run_peer(peer: str, ops: int, iterations: int) -> dict:
    loads, encode, decode = _load_codec(peer)
    results = {}
    for task in TASKS:
        doc = loads((DATA_DIR / f"{task}_bson.json").read_text())
        data = encode(doc)
        for direction, fn, arg in (("encode", encode, doc), ("decode", decode, data)):
            seconds = _measure(fn, arg, ops, iterations)
            results[f"{task} {direction}"] = {"seconds": seconds, "bytes": len(data) * ops, "ops": ops}
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", type=int, default=10_000)
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--peer", choices=PEERS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peer:
        print(json.dumps(run_peer(args.peer, args.ops, args.iterations)))
        return 0

    results = {}
    for peer in PEERS:
        proc = subprocess.run([sys.executable, __file__, "--peer", peer, "--ops", str(args.ops),
                               "--iterations", str(args.iterations)], capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"{peer}: skipped ({proc.stderr.strip().splitlines()[-1] if proc.stderr else 'failed'})")
            continue
        results[peer] = json.loads(proc.stdout)

    header = f"{'task':<14}" + "".join(f"{peer + ' docs/s':>20}{'MB/s':>9}" for peer in results)
    ratios = [p for p in ("pymongo-py", "pymongo-c") if p in results]
    header += "".join(f"{'vs ' + p:>16}" for p in ratios)
    print(header)
    for task in results["greenmongo"]:
        row = f"{task:<14}"
        for peer in results:
            r = results[peer][task]
            row += f"{r['ops'] / r['seconds']:>20,.0f}{r['bytes'] / r['seconds'] / 1e6:>9.1f}"
        ours = results["greenmongo"][task]["seconds"]
        row += "".join(f"{results[p][task]['seconds'] / ours:>15.2f}x" for p in ratios)
        print(row)
    print("\nratio = peer time / greenmongo time (above 1.0: greenmongo is faster)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
