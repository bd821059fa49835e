"""SRV resolution never blocks the gevent hub, monkey-patched or not.

200 greenlets resolve ``mongodb+srv`` names (SRV + TXT, a TCP fallback, slow
answers) against the loopback DNS server, which runs in another process so
that a blocking resolver would still get its answers and only the hub
measurements could tell. Two independent measurements:

* ``StallMeter``: a greenlet trace hook timing how long any non-hub greenlet
  runs without switching back (the hub cannot run meanwhile): wall time minus
  the time Linux kept the thread runnable but descheduled (``schedstat``), so
  running and sleeping in a blocking syscall both count in full, while the OS
  preempting us on a busy shared machine is not blamed on the resolver;
* gevent's own monitor thread (``monitor_thread`` / ``max_blocking_time``),
  collecting every ``EventLoopBlocked`` it reports.

  Its check is wall-clock, so each report is classed against the thread's
  run-queue delay and only reports not explained by preemption count.

Each meter gets its own pass, and every pass runs in a fresh interpreter
(``measure``), unpatched or after ``monkey.patch_all()``. A control runs
dnspython's blocking ``dns.query.udp`` the same way and must be caught, so
the measurement itself is shown able to fail.

Objects that existed before the measured run are frozen (``gc.freeze``) so a
full collection of older objects is not charged to DNS. Parsing costs about
55 us per SRV record in dnspython, so even the 30-record answer ("many", via
TCP) stays far below the bound.
"""

from __future__ import annotations

import gc
import io
import json
import os
import subprocess
import sys
import time
import warnings
from itertools import cycle
from typing import Any, Callable, Optional

import pytest

MAX_STALL = 0.010  # seconds: the bound
GREENLETS = 200
#: name -> number of seeds expected (slow answers take 50 ms; "many" needs TCP)
NAMES = {
    "test1.test.build.10gen.cc": 2,
    "test3.test.build.10gen.cc": 1,
    "test5.test.build.10gen.cc": 1,
    "test11.test.build.10gen.cc": 1,
    "three.greenmongo.test": 3,
    "slow.greenmongo.test": 1,
    "many.greenmongo.test": 30,
}
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class _RunQueueClock:
    """Seconds this thread has spent runnable but not running (Linux ``schedstat``), or 0 elsewhere."""

    def __init__(self) -> None:
        try:  # opened by the hub's thread, so it names that thread
            self._fd: Optional[int] = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
        except OSError:
            self._fd = None

    def __call__(self) -> float:
        if self._fd is None:
            return 0.0
        return int(os.pread(self._fd, 128, 0).split()[1]) / 1e9

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)


class StallMeter:
    """Longest time a non-hub greenlet kept the hub from running (see the module docstring)."""

    def __init__(self) -> None:
        self.longest = 0.0
        self.longest_wall = 0.0
        self._previous: Optional[Callable] = None

    def __enter__(self) -> "StallMeter":
        import greenlet
        import gevent

        self._hub = gevent.get_hub()
        gevent.sleep(0)  # the hub's first run installs gevent's own tracer: let it, then chain onto it
        self._run_queue = _RunQueueClock()
        self._wall, self._queued = time.perf_counter(), self._run_queue()
        self._active = True
        self._previous = greenlet.settrace(self._trace)
        return self

    def _trace(self, event: str, args: Any) -> None:
        if self._active and event in ("switch", "throw"):
            origin, _target = args
            wall, queued = time.perf_counter(), self._run_queue()
            if origin is not self._hub:
                elapsed = wall - self._wall
                self.longest = max(self.longest, elapsed - (queued - self._queued))
                self.longest_wall = max(self.longest_wall, elapsed)
            self._wall, self._queued = time.perf_counter(), self._run_queue()
        if self._previous is not None:
            self._previous(event, args)

    def __exit__(self, *exc_info: Any) -> None:
        import greenlet

        self._active = False
        if greenlet.gettrace() == self._trace:  # else someone chained onto us: we just forward from now on
            greenlet.settrace(self._previous)
        self._run_queue.close()


class HubMonitor:
    """gevent's monitor thread with max_blocking_time=10 ms, collecting its EventLoopBlocked reports.

    Its check is wall-clock: a greenlet preempted by the OS for 10 ms looks
    blocked too. A sampler on the same monitor thread records this thread's
    run-queue delay, so each report is classed: ``preempted`` when the thread
    spent at least half the bound waiting for a CPU around the report, else
    ``blocked``.
    """

    def __init__(self, max_blocking_time: float = MAX_STALL) -> None:
        self.max_blocking_time = max_blocking_time
        self.blocked = 0
        self.preempted = 0
        self.reports: list[str] = []
        self._samples: list[tuple[float, float]] = []
        self._passes = 0  # the monitor thread's passes so far, for waiting on them

    def _on_pass(self, hub: Any) -> None:
        self._passes += 1
        self._sample(hub)

    def _sample(self, hub: Any) -> None:
        self._samples.append((time.perf_counter(), self._run_queue()))
        del self._samples[:-64]

    def _wait_for_passes(self, count: int) -> None:
        """Wait until the monitor thread has made ``count`` more passes (its blocking check, every
        ``max_blocking_time``, runs at least every second one: a pass comes every half of that).
        A monitor thread that died fails here rather than letting the measurement pass unwatched."""
        from tests.waits import wait_until

        target = self._passes + count
        wait_until(lambda: self._passes >= target, message=f"{count} passes of the monitor thread")

    def _on_event(self, event: Any) -> None:
        from gevent.events import EventLoopBlocked

        if not isinstance(event, EventLoopBlocked):
            return
        now, queued = time.perf_counter(), self._run_queue()
        window = [q for t, q in self._samples if t >= now - 0.1] or [queued]
        if queued - min(window) >= self.max_blocking_time / 2:
            self.preempted += 1
        else:
            self.blocked += 1
            self.reports.append("\n".join(event.info)[:2000])

    def __enter__(self) -> "HubMonitor":
        import gevent
        from gevent import events

        import tests.waits  # noqa: F401 - imported now, not while the monitor thread's first pass is due

        # The monitor thread ends itself at its first pass if the hub greenlet has not started yet
        # (it takes a not-yet-started hub for a dead one): start the hub first.
        gevent.sleep(0)
        self._run_queue = _RunQueueClock()  # opened here, in the hub's thread
        self._saved = (gevent.config.monitor_thread, gevent.config.max_blocking_time)
        hub = gevent.get_hub()
        self._stream, hub.exception_stream = hub.exception_stream, io.StringIO()  # reports: counted, not printed
        gevent.config.monitor_thread = True
        gevent.config.max_blocking_time = self.max_blocking_time
        self._owned_thread = hub.periodic_monitoring_thread is None  # else the session watchdog's: keep it
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Install psutil" (memory monitoring is not wanted here)
            thread = hub.start_periodic_monitoring_thread()
        self._thread = thread
        thread.add_monitoring_function(self._on_pass, self.max_blocking_time / 2)
        events.subscribers.append(self._on_event)
        self._wait_for_passes(3)  # the monitor has taken its first looks (a blocking check among them)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        import gevent
        from gevent import events

        self._wait_for_passes(3)  # and a last one, past the end of the work
        events.subscribers.remove(self._on_event)
        hub = gevent.get_hub()
        if self._owned_thread and hub.periodic_monitoring_thread is not None:
            hub.periodic_monitoring_thread.kill()
            hub.periodic_monitoring_thread = None
        else:
            self._thread.add_monitoring_function(self._on_pass, None)  # None removes it
        gevent.config.monitor_thread, gevent.config.max_blocking_time = self._saved
        hub.exception_stream = self._stream
        self._run_queue.close()


def resolve_many(address: tuple[str, int], meter: str) -> dict:
    """GREENLETS concurrent mongodb+srv resolutions under one meter ("stall" or "monitor").

    One meter per pass: when gevent's monitor fires it formats a report of
    every greenlet while holding the GIL, which the stall meter would rightly
    count as a stall of its own.
    """
    import gevent

    from greenmongo.net.dns import DnsResolver
    from greenmongo.options import ClientOptions

    resolver = DnsResolver([address], attempt_timeout=5.0, lifetime=20.0)

    def one(name: str) -> int:
        return len(ClientOptions(f"mongodb+srv://{name}/", srv_resolver=resolver).seeds)

    names = [name for name, _ in zip(cycle(NAMES), range(GREENLETS))]
    gc.collect()
    gc.freeze()
    try:
        with (StallMeter() if meter == "stall" else HubMonitor()) as measured:
            started = time.perf_counter()
            jobs = [gevent.spawn(one, name) for name in names]
            gevent.joinall(jobs, raise_error=True)
            elapsed = time.perf_counter() - started
    finally:
        gc.unfreeze()
    report = {"elapsed": elapsed,
              "wrong": [(name, job.value) for name, job in zip(names, jobs) if job.value != NAMES[name]]}
    if meter == "stall":
        report.update(longest_stall=measured.longest, longest_wall=measured.longest_wall)
    else:
        report.update(monitor_blocked=measured.blocked, monitor_preempted=measured.preempted,
                      monitor_reports=measured.reports)
    return report


def blocking_control(address: tuple[str, int], meter: str) -> dict:
    """dnspython's blocking dns.query.udp in greenlets: the meters must see the hub stall."""
    import dns.message
    import dns.query
    import gevent

    def one() -> None:
        query = dns.message.make_query("_mongodb._tcp.slow.greenmongo.test", "SRV")
        dns.query.udp(query, address[0], port=address[1], timeout=5.0)

    with (StallMeter() if meter == "stall" else HubMonitor()) as measured:
        gevent.joinall([gevent.spawn(one) for _ in range(4)], raise_error=True)
    if meter == "stall":
        return {"longest_stall": measured.longest, "longest_wall": measured.longest_wall}
    return {"monitor_blocked": measured.blocked, "monitor_preempted": measured.preempted}


@pytest.fixture(scope="module")
def dns_server():
    from tests.servers.dns import LoopbackDnsServer

    with LoopbackDnsServer() as server:
        yield server


def measure(port: int, function: str, meter: str, patched: bool) -> dict:
    """Run ``function(address, meter)`` in a fresh interpreter, monkey-patched or not.

    A fresh process shares nothing with the test session: not its heap, not its
    imports (first-use costs are measured too), and not the session-wide hub
    watchdog (tests/plugins/hub_watchdog.py), which switches gevent's own blocking
    check (the one HubMonitor counts) off in the session's monitor thread.
    """
    script = (
        ("from gevent import monkey; monkey.patch_all()\n" if patched else "")
        + "import json\n"
        + f"from tests.test_dns_hub_blocking import {function}\n"
        + f"print(json.dumps({function}(('127.0.0.1', {port}), {meter!r})))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("patched", [False, True], ids=["unpatched", "monkey-patched"])
def test_200_greenlets_never_stall_the_hub_10ms(dns_server, patched):
    # Idle, the longest stall is 2-4 ms (25 runs of each kind). A CI run once saw one of 12.5 ms that the
    # run-queue clock did not explain (its cause was not found); a resolver that blocks stalls every run
    # (the control sees >= 40 ms each time), so, as in the monitor's test below, a stall must repeat in a
    # second, fresh run to fail the test.
    runs = []
    for _ in range(2):
        report = measure(dns_server.port, "resolve_many", "stall", patched)
        assert not report["wrong"], report["wrong"]
        runs.append(report)
        if report["longest_stall"] < MAX_STALL:
            break
    assert report["longest_stall"] < MAX_STALL, runs


@pytest.mark.parametrize("patched", [False, True], ids=["unpatched", "monkey-patched"])
def test_200_greenlets_gevent_monitor_reports_no_block(dns_server, patched):
    # At a 10 ms threshold a busy shared machine can still produce one stray report that the
    # run-queue check does not explain; a real block inside greenmongo shows up in every run,
    # so a report must repeat in a second, fresh run to fail the test.
    runs = []
    for _ in range(2):
        report = measure(dns_server.port, "resolve_many", "monitor", patched)
        assert not report["wrong"], report["wrong"]
        runs.append(report)
        if report["monitor_blocked"] == 0:
            break
    assert report["monitor_blocked"] == 0, json.dumps(runs, indent=1)


def test_the_meters_catch_a_blocking_resolver(dns_server):
    """Without this, a meter that never fired would make the tests above pass vacuously."""
    stall = measure(dns_server.port, "blocking_control", "stall", patched=False)
    assert stall["longest_stall"] >= 0.04, stall  # the server holds each answer 50 ms
    # gevent's monitor thread is an OS thread: on a loaded machine it may not be scheduled during
    # one 200 ms run, so a miss is retried; a meter that never fires fails all three.
    for _ in range(3):
        monitor = measure(dns_server.port, "blocking_control", "monitor", patched=False)
        if monitor["monitor_blocked"] >= 1:
            break
    assert monitor["monitor_blocked"] >= 1, monitor


def test_slow_answers_overlap(dns_server):
    """40 answers held 50 ms each by the server come back together, not one after another (2 s)."""
    import gevent

    from greenmongo.net.dns import DnsResolver

    resolver = DnsResolver([dns_server.address], attempt_timeout=5.0)
    started = time.perf_counter()
    jobs = [gevent.spawn(resolver.resolve_srv, "_mongodb._tcp.slow.greenmongo.test") for _ in range(40)]
    gevent.joinall(jobs, raise_error=True)
    assert all(job.value == [("db.slow.greenmongo.test", 27017)] for job in jobs)
    assert time.perf_counter() - started < 40 * 0.05 / 2
