"""BSON micro-benchmarks from the Driver Performance Benchmarking spec (flat/deep/full, encode/decode).

Four codecs in one run: greenmongo with its C accelerator (greenmongo.bson._speedups), greenmongo's
pure-Python codec (GREENMONGO_NO_EXTENSIONS=1), PyMongo with its C extension, and PyMongo with the
extension blocked (its pure-Python path). Data size is the encoded length of the document; each
task is 10,000 operations, repeated.

    python bench/bson_bench.py [--iterations N] [--ops N]

Each codec's figure is the best of N iterations. Like is measured against like in one process with
their iterations interleaved, so machine noise hits both alike: greenmongo's C path with PyMongo's
C extension, greenmongo's pure path with PyMongo's pure path (a process of their own, since
PyMongo's extension can only be blocked before ``bson`` is first imported).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA_DIR = Path(os.environ.get("GREENMONGO_SPEC_DIR") or HERE.parent.parent / "shared" / "specifications") \
    / "benchmarking" / "data" / "extended_bson"
TASKS = ("flat", "deep", "full")
PEERS = ("greenmongo", "greenmongo-py", "pymongo-c", "pymongo-py")
#: Processes: (peers measured together, extra environment).
GROUPS = ((("greenmongo", "pymongo-c"), {}),
          (("greenmongo-py", "pymongo-py"), {"GREENMONGO_NO_EXTENSIONS": "1"}))
#: Ratio columns: (label, ours, theirs); a ratio is theirs' time / ours' time.
RATIOS = (("C vs pymongo-c", "greenmongo", "pymongo-c"), ("py vs pymongo-py", "greenmongo-py", "pymongo-py"),
          ("C vs py", "greenmongo", "greenmongo-py"))


def _load_codec(peer: str):
    """(loads_extjson, encode, decode) for one peer."""
    if peer.startswith("greenmongo"):
        from greenmongo import bson
        from greenmongo.bson import json_util

        if peer == "greenmongo":
            assert bson.has_c(), "greenmongo's C extension is not built (pip install -e . with a C compiler)"
        else:
            assert not bson.has_c(), "could not disable greenmongo's C extension"
        opts = json_util.CANONICAL_JSON_OPTIONS
        return (lambda text: json_util.loads(text, json_options=opts)), bson.encode, bson.decode
    import bson
    from bson import json_util

    if peer == "pymongo-py":
        assert not bson.has_c(), "could not disable PyMongo's C extension"
    else:
        assert bson.has_c(), "PyMongo's C extension is not available"
    return (lambda text: json_util.loads(text)), bson.encode, bson.decode


def _time(fn, arg, ops: int) -> float:
    start = time.perf_counter()
    for _ in range(ops):
        fn(arg)
    return time.perf_counter() - start


def run_peers(peers: list[str], ops: int, iterations: int) -> dict:
    """Measure peers in one process, interleaving their iterations so machine noise hits all alike.

    Each figure is the best of ``iterations`` runs of ``ops`` operations: on a shared machine the
    minimum is the steadiest estimate of what the code costs.
    """
    if "pymongo-py" in peers:
        sys.modules["bson._cbson"] = None  # type: ignore[assignment]  # force PyMongo's pure-Python codec
    codecs = {peer: _load_codec(peer) for peer in peers}
    results: dict = {peer: {} for peer in peers}
    for task in TASKS:
        text = (DATA_DIR / f"{task}_bson.json").read_text()
        inputs = {}
        for peer, (loads, encode, _decode) in codecs.items():
            doc = loads(text)
            inputs[peer] = (doc, encode(doc))
        for direction in ("encode", "decode"):
            times: dict = {peer: [] for peer in peers}
            for _ in range(iterations):
                for peer, (_loads, encode, decode) in codecs.items():
                    doc, data = inputs[peer]
                    fn, arg = (encode, doc) if direction == "encode" else (decode, data)
                    times[peer].append(_time(fn, arg, ops))
            for peer in peers:
                size = len(inputs[peer][1])
                # "seconds": the best iteration; "times": all of them (bench/driverbench.py takes the median)
                results[peer][f"{task} {direction}"] = {"seconds": min(times[peer]), "times": times[peer],
                                                         "bytes": size * ops, "ops": ops}
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", type=int, default=10_000)
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--peers", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peers:
        print(json.dumps(run_peers(args.peers.split(","), args.ops, args.iterations)))
        return 0

    results = {}
    # greenmongo never imports ``bson``, so each of its paths shares a process with its PyMongo peer.
    for group, env in GROUPS:
        proc = subprocess.run([sys.executable, __file__, "--peers", ",".join(group), "--ops", str(args.ops),
                               "--iterations", str(args.iterations)], capture_output=True, text=True,
                              env={**os.environ, **env})
        if proc.returncode != 0:
            print(f"{'+'.join(group)}: skipped ({proc.stderr.strip().splitlines()[-1] if proc.stderr else 'failed'})")
            continue
        results.update(json.loads(proc.stdout))
    if not any(peer.startswith("greenmongo") for peer in results):
        return 1
    results = {peer: results[peer] for peer in PEERS if peer in results}

    header = f"{'task':<14}" + "".join(f"{peer + ' docs/s':>22}{'MB/s':>9}" for peer in results)
    ratios = [(label, ours, theirs) for label, ours, theirs in RATIOS if ours in results and theirs in results]
    header += "".join(f"{label:>19}" for label, _, _ in ratios)
    print(header)
    for task in next(iter(results.values())):
        row = f"{task:<14}"
        for peer in results:
            r = results[peer][task]
            row += f"{r['ops'] / r['seconds']:>22,.0f}{r['bytes'] / r['seconds'] / 1e6:>9.1f}"
        row += "".join(f"{results[theirs][task]['seconds'] / results[ours][task]['seconds']:>18.2f}x"
                       for _, ours, theirs in ratios)
        print(row)
    print("\nratio \"A vs B\" = B's time / A's time (above 1.0: A is faster); greenmongo = its C path, "
          "greenmongo-py = its pure-Python path")
    return 0


if __name__ == "__main__":
    sys.exit(main())
