"""Start-up: ``import greenmongo`` and a new process's first operation, against PyMongo.

gunicorn workers, celery children and short scripts start often, so two figures, each in fresh
interpreters (median of ``--runs``, the drivers interleaved):

* import time: ``python -X importtime -c "import <driver>"``, the driver's cumulative line, in a plain
  process and in one where ``monkey.patch_all()`` already ran (a gevent worker: gevent is then already
  imported, and only the driver's own share counts); plus how many modules the import adds and which of the
  heavy, rarely needed ones (dnspython, pyOpenSSL, cryptography, snappy, zstandard) it loaded;
* first operation: ``MongoClient(uri)`` then ``find_one`` against a SecantusDB this script starts:
  the import, the constructor, the first find_one (server selection, connect, handshake) and a second one.

Bytecode is compiled once into a temporary ``PYTHONPYCACHEPREFIX`` first (an installed package has its
``.pyc``; a checkout run with PYTHONDONTWRITEBYTECODE would otherwise compile greenmongo on every import).

    python bench/startup_bench.py [--runs 15] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchlib import child_env

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DRIVERS = ("greenmongo", "pymongo")
HEAVY = ("dns", "OpenSSL", "cryptography", "snappy", "zstandard", "http.client", "importlib.metadata")
PATCH = "from gevent import monkey; monkey.patch_all()\n"

FIRST_OP = """
import json, sys, time
started = time.perf_counter()
{patch}imported_at = time.perf_counter()
from {driver} import MongoClient
imported = time.perf_counter()
client = MongoClient({uri!r})
constructed = time.perf_counter()
client.appbench.items.find_one({{"_id": 1}})
first = time.perf_counter()
client.appbench.items.find_one({{"_id": 2}})
second = time.perf_counter()
client.close()
print(json.dumps({{"import_ms": (imported - imported_at) * 1e3, "construct_ms": (constructed - imported) * 1e3,
                  "first_op_ms": (first - constructed) * 1e3, "second_op_ms": (second - first) * 1e3,
                  "total_ms": (first - imported_at) * 1e3}}))
"""


def _env(pycache: str) -> dict:
    env = child_env("PYTHONDONTWRITEBYTECODE")
    env["PYTHONPYCACHEPREFIX"] = pycache
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def _python(code: str, env: dict, *flags: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, *flags, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"{code!r} failed: {done.stderr[-2000:]}")
    return done


def import_ms(driver: str, patched: bool, env: dict) -> float:
    """The driver's cumulative ``-X importtime`` (microseconds in its output), in ms."""
    done = _python((PATCH if patched else "") + f"import {driver}", env, "-X", "importtime")
    for line in done.stderr.splitlines():
        parts = [part.strip() for part in line.split("|")]
        if len(parts) == 3 and parts[2] == driver:
            return int(parts[1]) / 1000
    raise RuntimeError(f"no importtime line for {driver}: {done.stderr[-1000:]}")


def imported_modules(driver: str, env: dict) -> dict:
    code = (f"import sys, json\nbefore = set(sys.modules)\nimport {driver}\nnew = set(sys.modules) - before\n"
            f"print(json.dumps({{'count': len(new), 'heavy': [m for m in {HEAVY!r} if m in new]}}))")
    return json.loads(_python(code, env).stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15, help="fresh processes per figure (median)")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    results: dict = {"runs": args.runs, "loadavg_start": os.getloadavg(), "import": {}, "first_op": {}}
    with tempfile.TemporaryDirectory(prefix="startup-bench-pyc-") as pycache:
        env = _env(pycache)
        _python("import greenmongo, pymongo, gevent.monkey", env)  # compile once
        samples: dict = {(driver, patched): [] for driver in DRIVERS for patched in (False, True)}
        for _ in range(args.runs):
            for key in samples:
                samples[key].append(import_ms(*key, env))
        for driver in DRIVERS:
            results["import"][driver] = {
                "plain_ms": statistics.median(samples[driver, False]),
                "after_patch_all_ms": statistics.median(samples[driver, True]),
                **imported_modules(driver, env)}

        from tests.servers.secantus import SecantusServer

        server = SecantusServer().start()
        try:
            from greenmongo import MongoClient

            seeder = MongoClient(server.uri)
            seeder.appbench.items.insert_many([{"_id": 1}, {"_id": 2}])
            seeder.close()
            variants = [("greenmongo", False), ("greenmongo", True), ("pymongo", False), ("pymongo", True)]
            first: dict = {variant: [] for variant in variants}
            for _ in range(max(3, args.runs // 2)):
                for driver, patched in variants:
                    code = FIRST_OP.format(patch=PATCH if patched else "", driver=driver, uri=server.uri)
                    first[driver, patched].append(json.loads(_python(code, env).stdout.strip().splitlines()[-1]))
            for (driver, patched), runs in first.items():
                results["first_op"][f"{driver}{' + patch_all' if patched else ''}"] = {
                    field: statistics.median(run[field] for run in runs) for field in runs[0]}
        finally:
            server.stop()
    results["loadavg_end"] = os.getloadavg()
    report(results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


def report(results: dict) -> None:
    print(f"startup_bench: medians of {results['runs']} fresh processes; load average "
          f"{results['loadavg_start'][0]:.1f} at start, {results['loadavg_end'][0]:.1f} at end\n")
    print(f"{'import':<12} {'plain ms':>9} {'after patch_all ms':>19} {'modules added':>14}  heavy modules loaded")
    for driver, row in results["import"].items():
        print(f"{driver:<12} {row['plain_ms']:9.1f} {row['after_patch_all_ms']:19.1f} {row['count']:14d}  "
              f"{', '.join(row['heavy']) or '-'}")
    gm, pm = results["import"]["greenmongo"], results["import"]["pymongo"]
    print(f"{'gm/pm':<12} {gm['plain_ms'] / pm['plain_ms']:8.2f}x "
          f"{gm['after_patch_all_ms'] / pm['after_patch_all_ms']:18.2f}x\n")
    print(f"{'first operation (ms)':<24} {'import':>7} {'MongoClient()':>13} {'1st find_one':>12} {'2nd find_one':>12} "
          f"{'import..1st op':>14}")
    for name, row in results["first_op"].items():
        print(f"{name:<24} {row['import_ms']:7.1f} {row['construct_ms']:13.1f} {row['first_op_ms']:12.1f} "
              f"{row['second_op_ms']:12.2f} {row['total_ms']:14.1f}")


if __name__ == "__main__":
    main()
