"""1,000 greenlets of mixed operations over TLS, SRV via the loopback DNS server and a slow
failpoint never block the gevent hub for 10 ms inside greenmongo.

The client connects with ``mongodb+srv://stress.greenmongo.test/``: SRV and TXT come from the
loopback DNS server (tests/servers/dns.py, in its own process, serving one more SRV record that
points at the TLS server's port), and so does the A record of the SRV target, through a gevent
resolver that asks names under ``greenmongo.test`` of that server with greenmongo.net.dns (the
system resolver does not know them). Every connection is TLS with a throwaway CA
(tests/servers/tls_certs.py). A ``failCommand`` failpoint holds every ``distinct`` of this
client (by appName) for 50 ms on the server (``blockConnection``). The greenlets run inserts,
finds, updates, counts, aggregations, insert_many, the slow distinct, SRV/TXT lookups and
short-lived ``mongodb+srv`` clients (DNS, TLS handshakes, monitors, close).

The measured part runs in a fresh interpreter (unpatched or after ``monkey.patch_all()``), as
tests/test_dns_hub_blocking.py does, with its meters:

* the greenlet-switch ``StallMeter``: the longest time a greenlet kept the hub from running, less
  the time Linux kept the thread runnable but not running (schedstat). Here each stall of 10 ms or
  more is also attributed by the stack it switched out from, and garbage-collector pauses
  (``gc.callbacks``) inside it are shown apart: stalls in greenmongo, beyond GC, must be 0;
* gevent's monitor thread at ``max_blocking_time`` = 10 ms (``HubMonitor``), each
  ``EventLoopBlocked`` checked against a switch clock (tests/hub_meters.py): reports in greenmongo
  not explained by preemption, GC or gevent's own previous report must be 0.

A control run with a command listener that spins the CPU for 50 ms inside greenmongo's
executor shows that both meters do catch a block in greenmongo. Figures are printed (``-s``).
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import time
from typing import Any, Optional

import pytest

from tests.servers.secantus import SecantusServer
from tests.servers.tls_certs import make_ca, make_cert
from tests.hub_meters import MAX_STALL, HubMonitor, StallMeter

pytestmark = [pytest.mark.server, pytest.mark.slow, pytest.mark.one_pass]  # the stress runs in subprocesses

GREENLETS = int(os.environ.get("GREENMONGO_HUB_STRESS_GREENLETS", "1000"))
OPERATIONS_PER_GREENLET = 3
SRV_HOST = "stress.greenmongo.test"
TARGET_HOST = "db.stress.greenmongo.test"
APP_NAME = "hub-stress"
SLOW_COMMAND, BLOCK_MS = "distinct", 50
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: operation -> weight in the mix
MIX = {"insert_one": 16, "find_one": 16, "update_one": 12, "find": 12, "count": 8, "aggregate": 8,
       "insert_many": 6, "slow_distinct": 8, "dns": 10, "srv_client": 1}


# -- in the measured interpreter -----------------------------------------------------------------------

class LoopbackNames:
    """A gevent resolver answering names under ``greenmongo.test`` from the loopback DNS server.

    Asked with greenmongo.net.dns (cooperative), the A record only. IP literals are answered as
    they are: gevent's default resolver would hand even those to its threadpool, whose threads
    compete for the GIL with the hub's (a preempted thread holding the GIL stalls the hub in a
    way no run-queue figure of the hub's thread shows), so the measured process has no other
    thread. Anything else goes to gevent's own resolver.
    """

    def __init__(self, inner: Any, dns_resolver: Any) -> None:
        self._inner = inner
        self._dns = dns_resolver
        self.lookups = 0

    def getaddrinfo(self, host: Any, port: Any, family: int = 0, socktype: int = 0, proto: int = 0,
                    flags: int = 0) -> list:
        import ipaddress
        import socket

        import dns.rdatatype

        name = host.decode() if isinstance(host, bytes) else host
        socktype, proto = socktype or socket.SOCK_STREAM, proto or socket.IPPROTO_TCP
        try:
            literal = ipaddress.ip_address(name)
        except (TypeError, ValueError):
            literal = None
        if literal is not None:
            if literal.version == 4 and family in (0, socket.AF_INET):
                return [(socket.AF_INET, socktype, proto, "", (name, int(port)))]
            if literal.version == 6 and family in (0, socket.AF_INET6):
                return [(socket.AF_INET6, socktype, proto, "", (name, int(port), 0, 0))]
            return []
        if not (isinstance(name, str) and name.rstrip(".").endswith(".greenmongo.test")):
            return self._inner.getaddrinfo(host, port, family, socktype, proto, flags)
        self.lookups += 1
        if family not in (0, socket.AF_INET):
            return []
        answers = self._dns.query(name, dns.rdatatype.A) or []
        return [(socket.AF_INET, socktype, proto, "", (rdata.address, int(port))) for rdata in answers]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def stress(config: dict) -> dict:
    """GREENLETS greenlets x OPERATIONS_PER_GREENLET mixed operations under one meter ("stall",
    "monitor"); with ``config["control"]`` a command listener spins 50 ms inside greenmongo."""
    import random

    import gevent

    from greenmongo import MongoClient
    from greenmongo.errors import PyMongoError
    from greenmongo.monitoring import CommandListener
    from greenmongo.net.dns import DnsResolver

    resolver = DnsResolver([("127.0.0.1", config["dns_port"])], attempt_timeout=5.0, lifetime=20.0)
    hub = gevent.get_hub()
    names = LoopbackNames(hub.resolver, resolver)
    hub.resolver = names
    uri = (f"mongodb+srv://{SRV_HOST}/?tlsCAFile={config['ca_file']}&appname={APP_NAME}"
           "&serverSelectionTimeoutMS=20000&maxPoolSize=" + str(config.get("max_pool_size", 20)))

    class Spinner(CommandListener):
        """The control: burns the CPU inside greenmongo's executor (a listener runs there)."""

        def started(self, event: Any) -> None:
            if event.command_name == "find":
                until = time.perf_counter() + 0.05
                while time.perf_counter() < until:
                    pass

        def succeeded(self, event: Any) -> None:
            pass

        def failed(self, event: Any) -> None:
            pass

    control = bool(config.get("control"))
    client = MongoClient(uri, srv_resolver=resolver, event_listeners=[Spinner()] if control else [])
    coll = client.hub_stress.docs  # read (and updated in place): stays small, so the server keeps up
    writes = client.hub_stress.writes
    coll.drop()
    writes.drop()
    coll.insert_many([{"_id": i, "group": i % 10, "n": 0} for i in range(200)])
    client.admin.command("configureFailPoint", "failCommand", mode="alwaysOn",
                         data={"failCommands": [SLOW_COMMAND], "blockConnection": True,
                               "blockTimeMS": BLOCK_MS, "appName": APP_NAME})
    seeds = client.options.seeds
    greenlets = config.get("greenlets", GREENLETS)
    counts: dict = {}
    errors: dict = {}
    slow: list = []

    def operation(kind: str, rng: random.Random, n: int) -> None:
        if kind == "insert_one":
            writes.insert_one({"_id": f"w{n}", "group": n % 10})
        elif kind == "find_one":
            wanted = rng.randrange(200)
            assert coll.find_one({"_id": wanted})["_id"] == wanted
        elif kind == "update_one":
            coll.update_one({"_id": rng.randrange(200)}, {"$inc": {"n": 1}})
        elif kind == "find":
            assert len(list(coll.find({"group": rng.randrange(10)}, batch_size=8).limit(20))) == 20
        elif kind == "count":
            assert coll.count_documents({"group": 3}) >= 20
        elif kind == "aggregate":
            list(coll.aggregate([{"$match": {"group": rng.randrange(10)}},
                                 {"$group": {"_id": None, "t": {"$sum": "$n"}}}]))
        elif kind == "insert_many":
            writes.insert_many([{"_id": f"m{n}-{k}", "group": k} for k in range(10)])
        elif kind == "slow_distinct":
            started = time.perf_counter()
            assert sorted(coll.distinct("group", {"_id": {"$lt": 200}})) == list(range(10))
            slow.append(time.perf_counter() - started)
        elif kind == "dns":
            assert resolver.resolve_srv(f"_mongodb._tcp.{SRV_HOST}") == [(TARGET_HOST, config["server_port"])]
            assert resolver.resolve_txt(SRV_HOST) == ["replicaSet=secantus"]
        elif kind == "srv_client":
            with MongoClient(uri, srv_resolver=resolver, maxPoolSize=1) as short:
                assert short.hub_stress.docs.find_one({"_id": 0})["_id"] == 0

    def worker(index: int) -> None:
        rng = random.Random(index)
        kinds = list(MIX)
        for step in range(OPERATIONS_PER_GREENLET):
            kind = "find" if control else rng.choices(kinds, weights=[MIX[k] for k in kinds])[0]
            try:
                operation(kind, rng, index * OPERATIONS_PER_GREENLET + step)
                counts[kind] = counts.get(kind, 0) + 1
            except PyMongoError as exc:
                key = f"{kind}: {type(exc).__name__}: {exc}"[:300]
                errors[key] = errors.get(key, 0) + 1

    gc.collect()
    gc.freeze()  # objects from before the run are not the run's to collect
    try:
        meter: Any = HubMonitor()
        if config["meter"] == "stall":
            meter = StallMeter()
            meter.record_from = config.get("record_from", MAX_STALL)
        with meter:
            started, cpu_started = time.perf_counter(), time.process_time()
            jobs = [gevent.spawn(worker, index) for index in range(greenlets)]
            gevent.joinall(jobs, timeout=120)
            elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    finally:
        gc.unfreeze()
    threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else None
    failed = [repr(job.exception) for job in jobs if job.dead and job.exception is not None]
    unfinished = sum(1 for job in jobs if not job.dead)
    client.admin.command("configureFailPoint", "failCommand", mode="off")
    client.close()
    report: dict = {"operations": sum(counts.values()), "by_kind": counts, "errors": errors,
                    "failed_greenlets": failed[:5], "unfinished": unfinished, "elapsed": elapsed, "cpu": cpu,
                    "seeds": [list(seed) for seed in seeds], "a_lookups": names.lookups, "threads": threads,
                    "slow_distinct_ms": ([round(min(slow) * 1000, 1), round(max(slow) * 1000, 1)]
                                         if slow else None)}
    if config["meter"] == "stall":
        report.update(longest_stall=meter.longest, longest_wall=meter.longest_wall,
                      stalls=meter.stalls, longest_gc=meter.gc.longest,
                      greenmongo_stalls=[stall for stall in meter.stalls
                                         if stall["greenmongo"] and stall["beyond_gc"] >= MAX_STALL])
        report["stalls>=10ms"] = sum(1 for stall in meter.stalls if stall["stall"] >= MAX_STALL)
    else:
        report.update(monitor_blocked=meter.blocked, monitor_preempted_or_gc=meter.preempted,
                      monitor_self_inflicted=meter.self_inflicted, longest_gc=meter.gc.longest,
                      greenmongo_blocked=meter.greenmongo_blocked,
                      greenmongo_reports=meter.greenmongo_reports[:3], other_reports=meter.reports[:3])
    return report


# -- in the test session ----------------------------------------------------------------------------

class StressDnsServer:
    """tests/servers/dns.py in its own process, with the SRV/TXT/A records of this test added."""

    def __init__(self, server_port: int) -> None:
        self.server_port = server_port
        self.port: Optional[int] = None
        self._process: Optional[subprocess.Popen] = None

    def start(self) -> "StressDnsServer":
        records = {
            (f"_mongodb._tcp.{SRV_HOST}.", "SRV"): [f"0 0 {self.server_port} {TARGET_HOST}."],
            (f"{SRV_HOST}.", "TXT"): ['"replicaSet=secantus"'],
            (f"{TARGET_HOST}.", "A"): ["127.0.0.1"],
        }
        script = ("import sys\nfrom tests.servers import dns\n"
                  f"dns._OWN_RECORDS.update({records!r})\n"
                  "dns.serve('127.0.0.1', 0, lambda port: print(f'PORT {port}', flush=True))\n")
        self._process = subprocess.Popen([sys.executable, "-c", script], cwd=REPO_ROOT,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self._process.stdout.readline()
        if not line.startswith("PORT "):
            self.stop()
            raise RuntimeError(f"DNS test server did not start: {line!r}")
        self.port = int(line.split()[1])
        return self

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            process.kill()
            process.wait()
            process.stdout.close()
            process.stderr.close()


@pytest.fixture(scope="module")
def stress_setup(tmp_path_factory):
    directory = tmp_path_factory.mktemp("hub-stress")
    ca = make_ca()
    cert_file, key_file, _ = make_cert(ca, "hub-stress", dns_names=[TARGET_HOST],
                                       ip_addresses=["127.0.0.1"]).write(directory, "server")
    ca_file = ca.write(directory, "ca")[0]
    server = SecantusServer(tls_cert_file=cert_file, tls_key_file=key_file, tls_ca_file=ca_file)
    server.start()
    dns_server = StressDnsServer(server.port)
    try:
        dns_server.start()
        yield {"dns_port": dns_server.port, "server_port": server.port, "ca_file": ca_file}
    finally:
        dns_server.stop()
        server.stop()


def measure(config: dict, patched: bool) -> dict:
    """``stress(config)`` in a fresh interpreter, monkey-patched or not (see the module docstring)."""
    script = (("from gevent import monkey; monkey.patch_all()\n" if patched else "")
              + "import json, sys\nfrom tests.test_hub_stress import stress\n"
              + f"print(json.dumps(stress({config!r})))\n")
    env = {key: value for key, value in os.environ.items() if key != "GREENMONGO_TEST_PATCHED"}
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=180, env=env)
    assert done.returncode == 0, done.stderr[-5000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _summary(report: dict) -> str:
    keys = ("operations", "elapsed", "cpu", "longest_stall", "longest_wall", "longest_gc", "monitor_blocked",
            "monitor_preempted_or_gc", "monitor_self_inflicted", "greenmongo_blocked", "a_lookups", "threads",
            "slow_distinct_ms")
    figures = {key: (round(report[key], 4) if isinstance(report[key], float) else report[key])
               for key in keys if key in report}
    if "stalls" in report:
        figures["stalls>=10ms"] = report["stalls>=10ms"]
        figures["greenmongo_stalls"] = len(report["greenmongo_stalls"])
    return json.dumps(figures)


def _check_workload(report: dict, server_port: int) -> None:
    assert not report["unfinished"] and not report["failed_greenlets"], report
    assert not report["errors"], report["errors"]
    assert report["operations"] == GREENLETS * OPERATIONS_PER_GREENLET, report["by_kind"]
    assert report["seeds"] == [[TARGET_HOST, server_port]]  # the seedlist came from SRV
    assert report["a_lookups"] >= 1  # ... and the A record from the loopback server
    low, _high = report["slow_distinct_ms"]
    assert low >= BLOCK_MS * 0.9  # the failpoint held every distinct


@pytest.mark.parametrize("patched", [False, True], ids=["unpatched", "monkey-patched"])
def test_1000_greenlets_gevent_monitor_reports_no_block_in_greenmongo(stress_setup, patched):
    report = measure({**stress_setup, "meter": "monitor"}, patched)
    mode = "patched" if patched else "unpatched"
    print(f"\n[hub stress, gevent monitor at 10 ms, {mode}] {_summary(report)}")
    _check_workload(report, stress_setup["server_port"])
    assert report["greenmongo_blocked"] == 0, report["greenmongo_reports"]


@pytest.mark.parametrize("patched", [False, True], ids=["unpatched", "monkey-patched"])
def test_1000_greenlets_never_stall_the_hub_10ms_in_greenmongo(stress_setup, patched):
    report = measure({**stress_setup, "meter": "stall"}, patched)
    print(f"\n[hub stress, switch meter, {'patched' if patched else 'unpatched'}] {_summary(report)}")
    for stall in report["stalls"]:
        print(f"  stall {stall['stall'] * 1000:.1f} ms (wall {stall['wall'] * 1000:.1f}, on the CPU "
              f"{stall['on_cpu'] * 1000:.1f}, gc {stall['gc'] * 1000:.1f}) greenmongo={stall['greenmongo']}: "
              f"switched out at {stall['stack'][:6]}")
    _check_workload(report, stress_setup["server_port"])
    assert not report["greenmongo_stalls"], report["greenmongo_stalls"]


def test_the_meters_catch_a_block_inside_greenmongo(stress_setup):
    """Without this, meters that never fired would make the tests above pass vacuously."""
    config = {**stress_setup, "control": True, "greenlets": 20}
    stall = measure({**config, "meter": "stall"}, patched=False)
    monitor = measure({**config, "meter": "monitor"}, patched=False)
    print(f"\n[hub stress control] stall meter: {_summary(stall)}; monitor: {_summary(monitor)}")
    assert stall["greenmongo_stalls"] and stall["longest_stall"] >= 0.04, _summary(stall)
    assert monitor["greenmongo_blocked"] >= 1, _summary(monitor)
