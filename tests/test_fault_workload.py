"""Reliability under network faults: a workload through a fault-injecting proxy, greenmongo against PyMongo.

200 greenlets insert (unique ``_id``s), ``$inc`` counters (each increment also ``$push``es its operation id),
scan with small batches (getMores) and find_one, with retryWrites/retryReads on and every wait bounded
(socketTimeoutMS, connectTimeoutMS, serverSelectionTimeoutMS, waitQueueTimeoutMS), through a
``FaultProxy`` (tests/servers/faults.py) that resets connections mid-request and mid-reply, truncates
replies, stalls and delays them, refuses connections for two windows and blackholes some (the workload is
tests/fault_workload.py). Afterwards, against the server directly:

* every acknowledged insert is present exactly once, nothing unattempted is;
* no increment is applied twice (a retried ``$inc`` carries its txnNumber: the server recognises it), every
  acknowledged one is applied, and each counter lies between its acknowledged increments and those plus
  the increments whose outcome is unknown (they failed);
* every operation ended within its bound (its round trips' selection + wait queue + connect + socket
  timeouts, with slack);
* a failed operation's error tells the truth: once an attempt went out, never an error saying nothing
  was sent (a server selection or wait queue timeout); when only the first attempt went out (its retry
  could not be sent), that attempt's error;
* the pool is back at rest, and no greenlet is left after ``client.close()``;
* fresh operations succeed once the faults are switched off.

PyMongo 4.20 then runs the same schedule (the proxy decides by each operation's ``comment``, so both
drivers meet the same faults in the same operations) in a monkey-patched subprocess (tests/fault_peer.py);
greenmongo must fail no more operations than it, cursors and getMores included. Both runs' figures are
printed (``pytest -s``): faults injected by kind, operations by outcome, retries sent, latencies.
"""

from __future__ import annotations

import gc
import json
import sys
from pathlib import Path

import pytest
from gevent import subprocess

import greenmongo
from greenmongo import MongoClient
from tests import fault_workload as workload
from tests.api_support import live_greenlets, pool_at_rest
from tests.servers.secantus import SecantusServer
from tests.waits import poll

pytestmark = [pytest.mark.server, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
PEER_TIMEOUT = 90.0
#: Faults every run must have met (else the test proves nothing).
REQUIRED_FAULTS = ("reset-request", "reset-reply", "truncate-reply", "stall", "delay", "refused", "blackhole")


@pytest.fixture(scope="module")
def fault_server():
    """A SecantusDB of this module's own: the two runs make a few thousand retryable writes."""
    server = SecantusServer().start()
    try:
        yield server
    finally:
        server.stop()


def run_pymongo(server: SecantusServer, db_name: str) -> dict:
    """The same workload and fault schedule with PyMongo, in a monkey-patched process of its own (waited for
    through the hub: gevent's subprocess, in both passes)."""
    completed = subprocess.run([sys.executable, "-m", "tests.fault_peer", server.host, str(server.port), db_name,
                                str(workload.SEED)], cwd=ROOT, capture_output=True, text=True, timeout=PEER_TIMEOUT)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_workload_through_network_faults_keeps_its_promises(fault_server) -> None:
    direct = MongoClient(fault_server.uri)  # not through the proxy: the checks see the server as it is
    try:
        workload.seed_data(direct.faults_greenmongo)
        workload.seed_data(direct.faults_pymongo)
        gc.collect()
        baseline = live_greenlets()
        run = workload.FaultRun(greenmongo, fault_server.address, "faults_greenmongo")
        try:
            run.workload()
            after = run.after_faults()
            at_rest = poll(lambda: not pool_at_rest(run.client), timeout=10)
            pool_problems = pool_at_rest(run.client)
            run.close()
            drained = poll(lambda: run.proxy.links == 0, timeout=10)
            gc.collect()
            leaked = live_greenlets() - baseline
        finally:
            run.stop_proxy()
        results = run.results()
        problems = workload.check(results, direct.faults_greenmongo)

        peer = run_pymongo(fault_server, "faults_pymongo")
        peer_problems = workload.check(peer, direct.faults_pymongo, strict_errors=False)
    finally:
        direct.close()

    mine, theirs = workload.summary(results), workload.summary(peer)
    print()
    print(workload.format_summary("greenmongo", mine))
    print(workload.format_summary("pymongo 4.20 (gevent, patched)", theirs))
    print(f"  pymongo's own invariant problems: {len(peer_problems)}")
    for problem in peer_problems[:5]:
        print(f"    {str(problem)[:200]}")
    for problem in problems[:20]:
        print(f"  problem: {str(problem)[:300]}")

    assert not problems, problems[:20]
    assert at_rest and not pool_problems, pool_problems
    assert drained, f"{run.proxy.links} connections still open through the proxy after close()"
    assert not leaked, sorted(map(repr, leaked))[:10]
    assert after == {"ok": 50}, after
    assert peer["after"] == {"ok": 50}, peer["after"]
    for kind in REQUIRED_FAULTS:
        assert results["injected"].get(kind, 0) > 0, (kind, results["injected"])
    assert mine["operations"] == theirs["operations"] == workload.LANES * workload.OPS_PER_LANE
    assert mine["ok"] > 0 and mine["failed"] <= theirs["failed"], (mine["outcomes"], theirs["outcomes"])
