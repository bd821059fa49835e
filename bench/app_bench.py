"""The app users run: a small WSGI app under gunicorn's gevent worker, greenmongo against PyMongo.

bench/app_bench_wsgi.py (find_one by _id, insert_one, a small aggregate) runs under
``gunicorn -k gevent --worker-connections 1000`` with 1 and 2 workers, once with greenmongo and once with
PyMongo 4.20 (which gunicorn's gevent worker runs under ``monkey.patch_all()``), each configuration for both
drivers back to back (taking turns going first), every run against a fresh, freshly seeded SecantusDB this
script starts (``secantusd-py``, in memory: it gets slower as writes pile up, so a shared one would favour
whichever driver ran first). An HTTP
load generator keeps 50 and 500 keep-alive connections busy (and 500 with maxPoolSize=10) with a mix of
70% ``GET /find/<id>``, 20% ``POST /insert`` and 10% ``GET /agg/<id>``; then the same with ``--preload``
(the client created in gunicorn's master before the workers fork: each worker must work with the client it
inherited, which ``/whoami`` checks before the load).

Per run: requests/s, p50/p99/max latency, errors (socket errors, timeouts and non-2xx answers), the
workers' CPU per request and the server's CPU (per request and as a share of one core), both from /proc
(two cores shared by server, workers and load generator: the server is usually the bottleneck). The table
ends with greenmongo/PyMongo ratios. A control per driver and worker count, ``GET /ping`` (no database) under
the same load, gives what serving a request costs the worker without a driver (gunicorn, gevent, WSGI,
JSON); each run's worker CPU less that is the driver's share, printed with its ratio.

The load generator is ``wrk`` (Debian's package) when installed; otherwise (or with ``--loadgen gevent``)
a cooperative gevent HTTP/1.1 keep-alive client in its own process, with the same mix and figures.

    python bench/app_bench.py                      # the whole matrix (~10 minutes)
    python bench/app_bench.py --workers 1 --no-preload --duration 5
    python bench/app_bench.py --smoke --json out.json   # a few seconds: CI (tests/test_bench_smoke.py)

Only the processes started here (the server, gunicorn's process group, the load generator) are stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

from benchlib import child_env

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DRIVERS = ("greenmongo", "pymongo")
ITEMS = 1000
#: (name, connections, maxPoolSize)
SCENARIOS = (("c50", 50, 100), ("c500", 500, 100), ("c500-pool10", 500, 10))
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
MARK = "APPBENCH "
#: Seconds a request may take before the load generator counts it as a timeout (and reconnects).
REQUEST_TIMEOUT = 30

WRK_SCRIPT = """
local thread_id = 0
local threads_made = 0
function setup(thread)
  threads_made = threads_made + 1
  thread:set("thread_id", threads_made)
end
function init(args)
  math.randomseed(os.time() * 1000 + thread_id)
end
function request()
  if %(http_only)s then
    return wrk.format("GET", "/ping")
  end
  local roll = math.random(100)
  if roll <= 70 then
    return wrk.format("GET", "/find/" .. math.random(1, %(items)d))
  elseif roll <= 90 then
    return wrk.format("POST", "/insert", nil, "{}")
  end
  return wrk.format("GET", "/agg/" .. math.random(1, %(items)d - 10))
end
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('%(mark)s{"requests": %%d, "duration_s": %%f, "socket_errors": %%d, "timeouts": %%d, '
    .. '"bad_status": %%d, "p50_ms": %%f, "p99_ms": %%f, "max_ms": %%f}\\n',
    summary.requests, summary.duration / 1e6, e.connect + e.read + e.write, e.timeout, e.status,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000))
end
"""


# -- /proc ----------------------------------------------------------------------------------------

def _stat(pid: int) -> Optional[list[str]]:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def group_pids(pgid: int) -> list[int]:
    """The processes of process group ``pgid`` (each process started here leads its own)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat(int(entry))
            if fields is not None and int(fields[2]) == pgid:
                found.append(int(entry))
    return found


def cpu_seconds(pids: list[int]) -> dict[int, float]:
    """user + system CPU per process (threads included)."""
    seconds = {}
    for pid in pids:
        fields = _stat(pid)
        if fields is not None:
            seconds[pid] = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return seconds


def used(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU used between two samples; a process that appeared meanwhile counts from zero."""
    return sum(value - before.get(pid, 0.0) for pid, value in after.items())


# -- HTTP, a little -------------------------------------------------------------------------------

def http_get(port: int, path: str, timeout: float = 5.0) -> tuple[int, bytes]:
    """One HTTP/1.0 GET on a blocking socket (this process is not patched and runs no greenlets here)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(f"GET {path} HTTP/1.0\r\nHost: bench\r\n\r\n".encode())
        chunks = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# -- the fallback load generator (its own process) -------------------------------------------------

def gevent_loadgen(port: int, connections: int, duration: float, items: int, seed: int,
                   http_only: bool = False) -> dict:
    """wrk's job on gevent sockets: ``connections`` keep-alive connections, each one request at a time
    (``http_only``: every request a ``GET /ping``, which touches no database)."""
    import random

    import gevent
    from gevent import socket as gsocket

    rng = random.Random(seed)
    latencies: list[float] = []
    counts = {"socket_errors": 0, "timeouts": 0, "bad_status": 0}
    deadline = time.monotonic() + duration

    def request() -> bytes:
        if http_only:
            return b"GET /ping HTTP/1.1\r\nHost: bench\r\n\r\n"
        roll = rng.randint(1, 100)
        if roll <= 70:
            return f"GET /find/{rng.randint(1, items)} HTTP/1.1\r\nHost: bench\r\n\r\n".encode()
        if roll <= 90:
            return b"POST /insert HTTP/1.1\r\nHost: bench\r\nContent-Length: 2\r\n\r\n{}"
        return f"GET /agg/{rng.randint(1, items - 10)} HTTP/1.1\r\nHost: bench\r\n\r\n".encode()

    def read_response(sock: Any, buffer: bytearray) -> int:
        while b"\r\n\r\n" not in buffer:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            buffer += chunk
        head, _, rest = bytes(buffer).partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(rest) < length:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            rest += chunk
        buffer[:] = rest[length:]
        return status

    def one_connection() -> None:
        sock = None
        buffer = bytearray()
        while time.monotonic() < deadline:
            try:
                if sock is None:
                    sock = gsocket.create_connection(("127.0.0.1", port), timeout=REQUEST_TIMEOUT)
                    buffer.clear()
                started = time.perf_counter()
                sock.sendall(request())
                status = read_response(sock, buffer)
                latencies.append(time.perf_counter() - started)
                if not 200 <= status < 400:
                    counts["bad_status"] += 1
            except gsocket.timeout:
                counts["timeouts"] += 1
                sock.close()
                sock = None
            except OSError:
                counts["socket_errors"] += 1
                if sock is not None:
                    sock.close()
                sock = None
        if sock is not None:
            sock.close()

    started = time.monotonic()
    gevent.joinall([gevent.spawn(one_connection) for _ in range(connections)], raise_error=True)
    elapsed = time.monotonic() - started
    latencies.sort()

    def percentile(p: float) -> float:
        return latencies[max(0, int(len(latencies) * p / 100) - 1)] * 1000 if latencies else 0.0

    return {"requests": len(latencies), "duration_s": elapsed, **counts, "p50_ms": percentile(50),
            "p99_ms": percentile(99), "max_ms": latencies[-1] * 1000 if latencies else 0.0}


class LoadGenerator:
    def __init__(self, kind: str, threads: int) -> None:
        self.kind, self.threads = kind, threads
        self._scripts: dict[bool, str] = {}  # http_only -> wrk's Lua script
        if kind == "wrk":
            for http_only in (False, True):
                with tempfile.NamedTemporaryFile("w", suffix=".lua", prefix="app-bench-", delete=False) as script:
                    script.write(WRK_SCRIPT % {"items": ITEMS, "mark": MARK, "http_only": str(http_only).lower()})
                self._scripts[http_only] = script.name

    def run(self, port: int, connections: int, duration: float, http_only: bool = False) -> dict:
        """The app's mix of requests, or (``http_only``) only ``GET /ping``, which touches no database."""
        if self.kind == "wrk":
            command = ["wrk", "-t", str(min(self.threads, connections)), "-c", str(connections),
                       "-d", f"{max(1, round(duration))}s", "--timeout", f"{REQUEST_TIMEOUT}s",
                       "-s", self._scripts[http_only], f"http://127.0.0.1:{port}"]
        else:
            command = [sys.executable, str(Path(__file__).resolve()), "--loadgen-run",
                       json.dumps([port, connections, duration, ITEMS, int(time.time()), http_only])]
        done = subprocess.run(command, capture_output=True, text=True, timeout=duration + 60)
        for line in done.stdout.splitlines():
            if line.startswith(MARK):
                return json.loads(line[len(MARK):])
        raise RuntimeError(f"{self.kind} gave no figures (exit {done.returncode}): "
                           f"{done.stdout[-1500:]}{done.stderr[-1500:]}")

    def close(self) -> None:
        for name in self._scripts.values():
            os.unlink(name)


# -- gunicorn ---------------------------------------------------------------------------------------

class Gunicorn:
    """gunicorn -k gevent serving app_bench_wsgi, in its own process group (stopped as a group)."""

    def __init__(self, driver: str, workers: int, preload: bool, uri: str, max_pool: int,
                 connect: bool = True) -> None:
        self.port = free_port()
        self.workers = workers
        command = [str(Path(sys.executable).parent / "gunicorn"), "-k", "gevent", "-w", str(workers),
                   "--worker-connections", "1000", "-b", f"127.0.0.1:{self.port}", "--log-level", "warning",
                   "--timeout", "60", *(["--preload"] if preload else []), "app_bench_wsgi:application"]
        env = child_env()
        env.update(APPBENCH_DRIVER=driver, MONGODB_URI=uri, APPBENCH_MAX_POOL=str(max_pool),
                   APPBENCH_ITEMS=str(ITEMS), APPBENCH_CONNECT="1" if connect else "0",
                   PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "bench"), env.get("PYTHONPATH", "")]))
        self._log = tempfile.TemporaryFile()
        self.process = subprocess.Popen(command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=self._log,
                                        stderr=subprocess.STDOUT, start_new_session=True)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def log_tail(self) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-3000:]

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 60
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"gunicorn exited ({self.process.returncode}): {self.log_tail()}")
            if len(self.worker_pids()) >= self.workers:
                try:
                    if http_get(self.port, "/whoami")[0] == 200:
                        return
                except OSError:
                    pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"gunicorn did not answer within 60 s: {self.log_tail()}")
            time.sleep(0.1)

    def worker_pids(self) -> list[int]:
        return [pid for pid in group_pids(self.process.pid) if pid != self.process.pid]

    def whoami(self, tries: int) -> list[dict]:
        """A few /whoami answers (each does a find_one in whichever worker takes it)."""
        answers = []
        for _ in range(tries):
            status, body = http_get(self.port, "/whoami")
            if status != 200:
                raise RuntimeError(f"/whoami answered {status}: {body[:500]!r}")
            answers.append(json.loads(body))
        return answers

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
            except ProcessLookupError:
                pass
        self._log.close()


# -- the runs -----------------------------------------------------------------------------------------

def seed(uri: str) -> None:
    from greenmongo import MongoClient

    client = MongoClient(uri)
    try:
        client.drop_database("appbench")
        client.appbench.items.insert_many([{"_id": n, "name": f"item {n}", "price": n % 97, "tags": ["a", "b"]}
                                           for n in range(1, ITEMS + 1)])
    finally:
        client.close()


def measure(app: Gunicorn, loadgen: LoadGenerator, server_pids: list[int], connections: int, duration: float,
            warmup: float, http_only: bool = False) -> dict:
    if warmup > 0:
        loadgen.run(app.port, connections, warmup, http_only)
    # Requests the previous run left queued in the worker still hold the pool and the server: wait until a
    # new one is answered, so this run starts from an idle app.
    http_get(app.port, "/whoami", timeout=120)
    workers = app.worker_pids()
    worker_before, server_before = cpu_seconds(workers), cpu_seconds(server_pids)
    figures = loadgen.run(app.port, connections, duration, http_only)
    worker_cpu = used(worker_before, cpu_seconds(app.worker_pids()))
    server_cpu = used(server_before, cpu_seconds(server_pids))
    requests = max(figures["requests"], 1)
    figures.update(
        requests_per_s=figures["requests"] / figures["duration_s"],
        errors=figures["socket_errors"] + figures["bad_status"],
        worker_cpu_us_per_request=worker_cpu / requests * 1e6,
        server_cpu_us_per_request=server_cpu / requests * 1e6,
        server_core_share=server_cpu / figures["duration_s"],
        workers_restarted=sorted(set(workers) ^ set(app.worker_pids())) != [],
    )
    return figures


def start_app(driver: str, workers: int, preload: bool, uri: str, pool: int, results: dict) -> tuple[Gunicorn, bool]:
    """gunicorn serving ``driver``; (the app, whether it fell back to PyMongo's ``connect=False``)."""
    try:
        return Gunicorn(driver, workers, preload, uri, pool), False
    except RuntimeError as exc:
        if not (preload and driver == "pymongo"):
            raise
        # As users find out: PyMongo's client, created in the master, leaves its monitors' weakref proxies dead
        # in the forked worker, and the worker's patch_all (which looks at every object for locks) raises on
        # them. Record that, then measure PyMongo's advice for forking servers: connect=False (no monitors until
        # first use).
        reason = next((line for line in str(exc).splitlines() if "Error" in line), str(exc)).strip()
        failure = {"driver": driver, "workers": workers, "preload": preload, "max_pool_size": pool, "reason": reason}
        failures = results.setdefault("boot_failures", [])
        if failure not in failures:
            failures.append(failure)
            print(f"  {driver} w={workers} preload maxPoolSize={pool}: workers failed to boot ({reason}); "
                  "again with MongoClient(connect=False)", flush=True)
        return Gunicorn(driver, workers, preload, uri, pool, connect=False), True


def run_one(args: argparse.Namespace, loadgen: LoadGenerator, results: dict, driver: str, workers: int,
            preload: bool, scenario: tuple[str, int, int], http_only: bool = False) -> None:
    """One measured run, on a server of its own: SecantusDB gets slower as writes pile up (several times the
    CPU per request after some thousands of inserts), so on a shared server whichever run came first would
    have the faster server. ``http_only``: the control (only ``GET /ping``), recorded under "controls"."""
    from tests.servers.secantus import SecantusServer

    name, connections, pool = scenario
    server = SecantusServer().start()
    try:
        seed(server.uri)
        server_pids = group_pids(server.process.pid)
        app, connect_false = start_app(driver, workers, preload, server.uri, pool, results)
        try:
            answers = app.whoami(4)
            inherited = all(answer["client_pid"] != answer["pid"] for answer in answers)
            if preload and not inherited:
                raise RuntimeError(f"--preload, yet the client was not created in the master: {answers}")
            try:
                figures = measure(app, loadgen, server_pids, connections, args.duration, args.warmup, http_only)
            except (OSError, RuntimeError, subprocess.TimeoutExpired) as exc:
                # One broken run (the app stopped answering) is a result; the matrix goes on.
                failure = {"driver": driver, "workers": workers, "preload": preload, "scenario": name,
                           "connect_false": connect_false, "reason": f"{exc!r}",
                           "gunicorn_log": app.log_tail()[-1500:]}
                results.setdefault("run_failures", []).append(failure)
                print(f"  {driver} w={workers} {'preload' if preload else 'no-preload'} {name}: FAILED ({exc!r}); "
                      f"gunicorn's log ends: {failure['gunicorn_log'][-600:]}", flush=True)
                return
            row = {"driver": driver, "workers": workers, "preload": preload, "scenario": name,
                   "connections": connections, "max_pool_size": pool, "client_inherited_from_master": inherited,
                   "connect_false": connect_false, **figures}
            results["controls" if http_only else "runs"].append(row)
            print(_row_line(row), flush=True)
        finally:
            app.stop()
    finally:
        server.stop()


def run_matrix(args: argparse.Namespace) -> dict:
    loadgen = LoadGenerator(args.loadgen, args.wrk_threads)
    results: dict[str, Any] = {"loadgen": args.loadgen, "duration_s": args.duration, "runs": [], "controls": [],
                               "loadavg_start": os.getloadavg()}
    _, connections, pool = args.scenarios[0]
    control = (f"ping-c{connections}", connections, pool)
    try:
        for workers in args.workers:
            # What serving a request costs the worker without any database: gunicorn, gevent, WSGI, JSON. The rest
            # of a run's worker CPU per request is the driver's (and the app's few lines around it).
            for driver in args.drivers:
                run_one(args, loadgen, results, driver, workers, False, control, http_only=True)
            for preload in args.preload:
                for number, scenario in enumerate(args.scenarios):
                    # The drivers take turns going first, so neither always meets the machine as the other left it.
                    drivers = args.drivers if number % 2 == 0 else args.drivers[::-1]
                    for driver in drivers:
                        run_one(args, loadgen, results, driver, workers, preload, scenario)
    finally:
        loadgen.close()
    results["loadavg_end"] = os.getloadavg()
    return results


# -- the report ---------------------------------------------------------------------------------------

def _row_line(row: dict) -> str:
    return (f"  {row['driver']:<10} w={row['workers']} {'preload' if row['preload'] else 'no-preload':<10} "
            f"{row['scenario']:<12} {row['requests_per_s']:8.0f} req/s  p50 {row['p50_ms']:7.1f} ms  "
            f"p99 {row['p99_ms']:7.1f} ms  max {row['max_ms']:7.1f} ms  errors {row['errors']}  "
            f"timeouts {row['timeouts']}")


def _ratio(a: float, b: float) -> str:
    return f"{a / b:5.2f}x" if b else "   - "


def print_table(results: dict) -> None:
    print(f"\nload generator: {results['loadgen']}, {results['duration_s']} s per run; load average "
          f"{results['loadavg_start'][0]:.1f} at start, {results['loadavg_end'][0]:.1f} at end (2 cores shared "
          f"by SecantusDB, the workers and the load generator)")
    header = (f"{'workers':>7} {'preload':>7} {'scenario':<12} {'driver':<10} {'req/s':>7} {'p50 ms':>7} "
              f"{'p99 ms':>7} {'max ms':>7} {'errors':>6} {'t/o':>5} {'wCPU us/req':>11} {'srvCPU us/req':>13} "
              f"{'srv core':>8}")
    print(header)
    print("-" * len(header))
    rows = results["runs"]
    keys = []
    for row in rows:
        key = (row["workers"], row["preload"], row["scenario"])
        if key not in keys:
            keys.append(key)
    for key in keys:
        by_driver = {row["driver"]: row for row in rows if (row["workers"], row["preload"], row["scenario"]) == key}
        for driver, row in sorted(by_driver.items(), key=lambda item: item[0] != "greenmongo"):
            label = driver + ("*" if row.get("connect_false") else "")
            print(f"{key[0]:>7} {'yes' if key[1] else 'no':>7} {key[2]:<12} {label:<10} {row['requests_per_s']:7.0f} "
                  f"{row['p50_ms']:7.1f} {row['p99_ms']:7.1f} {row['max_ms']:7.1f} {row['errors']:6d} "
                  f"{row['timeouts']:5d} "
                  f"{row['worker_cpu_us_per_request']:11.0f} {row['server_cpu_us_per_request']:13.0f} "
                  f"{row['server_core_share']:7.0%}")
        if "greenmongo" in by_driver and "pymongo" in by_driver:
            g, p = by_driver["greenmongo"], by_driver["pymongo"]
            print(f"{'':>7} {'':>7} {'':<12} {'gm/pm':<10} {_ratio(g['requests_per_s'], p['requests_per_s']):>7} "
                  f"{_ratio(g['p50_ms'], p['p50_ms']):>7} {_ratio(g['p99_ms'], p['p99_ms']):>7} "
                  f"{_ratio(g['max_ms'], p['max_ms']):>7} {'':>6} {'':>5} "
                  f"{_ratio(g['worker_cpu_us_per_request'], p['worker_cpu_us_per_request']):>11} "
                  f"{_ratio(g['server_cpu_us_per_request'], p['server_cpu_us_per_request']):>13}")
    for failure in results.get("boot_failures", []):
        print(f"\n* {failure['driver']} with --preload ({failure['workers']} worker(s), maxPoolSize "
              f"{failure['max_pool_size']}): gunicorn's workers failed to boot ({failure['reason']}); the row "
              "is with MongoClient(connect=False), PyMongo's advice for forking servers.")
    for failure in results.get("run_failures", []):
        print(f"\nFAILED: {failure['driver']} {failure['workers']} worker(s) "
              f"{'--preload ' if failure['preload'] else ''}{failure['scenario']}: {failure['reason']}")
    print(f"\nerrors: socket errors and non-2xx answers; t/o: requests unanswered after {REQUEST_TIMEOUT} s "
          "(the load generator then reconnects).")
    print("wCPU: the gunicorn workers' user+system CPU per request; srvCPU: SecantusDB's; srv core: its CPU "
          "as a share of one core over the run. greenmongo's p99 against its own p50 (a fair queue): "
          + ", ".join(f"{_label(k)}: {r['p99_ms'] / r['p50_ms']:.1f}x"
                      for k in keys for r in rows
                      if r["driver"] == "greenmongo" and (r["workers"], r["preload"], r["scenario"]) == k
                      and r["p50_ms"]))
    print_driver_share(results)


def print_driver_share(results: dict) -> None:
    """Each run's worker CPU per request less the control's (same driver and worker count): the driver's share."""
    controls = {(row["driver"], row["workers"]): row["worker_cpu_us_per_request"] for row in results["controls"]}
    if not controls:
        return
    print("\nworker CPU per request without the database (GET /ping: gunicorn, gevent, WSGI, JSON; same load): "
          + ", ".join(f"{driver} w={workers} {value:.0f} us" for (driver, workers), value in controls.items()))
    shares = (_share(results["runs"], controls, key) for key in
              dict.fromkeys((r["workers"], r["preload"], r["scenario"]) for r in results["runs"]))
    print("the drivers' share (wCPU less that, us/req), greenmongo / PyMongo: "
          + ", ".join(share for share in shares if share))


def _share(rows: list[dict], controls: dict, key: tuple) -> str:
    """One configuration's driver shares; empty when a run lacks its control (a control run that failed)."""
    own = {row["driver"]: row["worker_cpu_us_per_request"] - controls[row["driver"], row["workers"]]
           for row in rows if (row["workers"], row["preload"], row["scenario"]) == key
           and (row["driver"], row["workers"]) in controls}
    if "greenmongo" in own and "pymongo" in own:
        return (f"{_label(key)}: {own['greenmongo']:.0f}/{own['pymongo']:.0f} = "
                f"{_ratio(own['greenmongo'], own['pymongo'])}")
    return f"{_label(key)}: " + "/".join(f"{value:.0f}" for value in own.values()) if own else ""


def _label(key: tuple) -> str:
    """A configuration (workers, preload, scenario) as the report names it."""
    return f"{key[2]} w={key[0]}{' preload' if key[1] else ''}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loadgen-run", help=argparse.SUPPRESS)
    parser.add_argument("--smoke", action="store_true", help="a few seconds: 1 worker, 8 connections")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds measured per run (wrk: whole)")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds of load before each measured run")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--scenarios", default=",".join(name for name, _, _ in SCENARIOS))
    parser.add_argument("--drivers", default=",".join(DRIVERS))
    parser.add_argument("--no-preload", action="store_true", help="skip the --preload runs")
    parser.add_argument("--only-preload", action="store_true", help="only the --preload runs")
    parser.add_argument("--loadgen", choices=("auto", "wrk", "gevent"), default="auto")
    parser.add_argument("--wrk-threads", type=int, default=2)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    if args.loadgen_run:
        print(MARK + json.dumps(gevent_loadgen(*json.loads(args.loadgen_run))), flush=True)
        return
    if args.loadgen == "auto":
        args.loadgen = "wrk" if shutil.which("wrk") else "gevent"
    elif args.loadgen == "wrk" and not shutil.which("wrk"):
        parser.error("wrk is not installed (apt-get install wrk), use --loadgen gevent")
    by_name = {name: (name, connections, pool) for name, connections, pool in SCENARIOS}
    if args.smoke:
        args.duration, args.warmup, args.workers = 2.0, 0.0, "1"
        args.scenarios = [("c8-pool2", 8, 2)]  # more requests than connections: the pool's wait queue works
    else:
        args.scenarios = [by_name[name] for name in args.scenarios.split(",")]
    args.workers = [int(n) for n in str(args.workers).split(",")]
    args.drivers = args.drivers.split(",")
    args.preload = [False] if args.no_preload else [True] if args.only_preload else [False, True]
    if args.smoke:
        args.preload = [True]  # the case that can break (a forked client); the other is the usual one
    print(f"app_bench: {', '.join(args.drivers)}; workers {args.workers}; "
          f"{', '.join(f'{n} ({c} connections, maxPoolSize {p})' for n, c, p in args.scenarios)}; "
          f"preload {args.preload}; load generator {args.loadgen}", flush=True)
    results = run_matrix(args)
    print_table(results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
