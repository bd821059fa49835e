"""SRV resolution never blocks the gevent hub, monkey-patched or not.

200 greenlets resolve ``mongodb+srv`` names (SRV + TXT, a TCP fallback, slow
answers) against the loopback DNS server, which runs in another process so
that a blocking resolver would still get its answers and only the hub
measurements could tell. Two independent measurements (tests/hub_meters.py):

* ``StallMeter``: a greenlet trace hook timing how long any non-hub greenlet
  runs without switching back (the hub cannot run meanwhile), less the time
  Linux kept the thread runnable but not running: running and sleeping in a
  blocking syscall both count in full, the OS preempting us does not;
* gevent's own monitor thread (``max_blocking_time`` = 10 ms) in ``HubMonitor``:
  a report counts only when it is not explained by the OS preempting the hub's
  thread or the monitor thread (which may hold the GIL meanwhile), by the
  garbage collector, or by gevent's own previous report.

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
import json
import os
import subprocess
import sys
import time
from itertools import cycle
from typing import Callable

import pytest

from tests.hub_meters import MAX_STALL, HubMonitor, StallMeter

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
        report.update(longest_stall=measured.longest, longest_wall=measured.longest_wall, stalls=measured.stalls)
    else:
        report.update(monitor_blocked=measured.blocked, monitor_preempted=measured.preempted,
                      monitor_self_inflicted=measured.self_inflicted, monitor_reports=measured.reports)
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
    return {"monitor_blocked": measured.blocked, "monitor_preempted": measured.preempted,
            "monitor_self_inflicted": measured.self_inflicted}


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


def resolve_until(port: int, meter: str, patched: bool, passed: Callable[[dict], bool]) -> list:
    """``resolve_many`` under ``meter`` in a fresh interpreter, and once more if the first run did not pass:
    every run's report (a real block in the resolver shows up in every run; a stray one of the machine's
    should not repeat). Every run must resolve every name right."""
    runs = []
    for _ in range(2):
        report = measure(port, "resolve_many", meter, patched)
        assert not report["wrong"], report["wrong"]
        runs.append(report)
        if passed(report):
            break
    return runs


@pytest.mark.parametrize("patched", [False, True], ids=["unpatched", "monkey-patched"])
def test_200_greenlets_never_stall_the_hub_10ms(dns_server, patched):
    # Idle, the longest stall is 2-4 ms (25 runs of each kind). A CI run once saw one of 12.5 ms that the
    # run-queue clock did not explain (its cause was not found); a resolver that blocks stalls every run
    # (the control sees >= 40 ms each time), so, as in the monitor's test below, a stall must repeat in a
    # second, fresh run to fail the test.
    runs = resolve_until(dns_server.port, "stall", patched, lambda report: report["longest_stall"] < MAX_STALL)
    assert runs[-1]["longest_stall"] < MAX_STALL, json.dumps(runs, indent=1)


@pytest.mark.parametrize("patched", [False, True], ids=["unpatched", "monkey-patched"])
def test_200_greenlets_gevent_monitor_reports_no_block(dns_server, patched):
    # Judged by the hub thread's run-queue time alone, one report in each of two fresh runs failed three
    # CI runs, never here (the monitor thread, preempted while it held the GIL, is one cause that time
    # cannot show; HubMonitor now takes both threads' off). A real block in the resolver shows up in
    # every run, so a report must still repeat in a second, fresh run to fail the test; the failure
    # message has every report whole.
    runs = resolve_until(dns_server.port, "monitor", patched, lambda report: report["monitor_blocked"] == 0)
    assert runs[-1]["monitor_blocked"] == 0, json.dumps(runs, indent=1)


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
