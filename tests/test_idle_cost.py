"""Idle cost: an idle client with the streaming monitor uses ~0 CPU and wakes up only for its
heartbeats.

With the streaming protocol the monitor sends an awaitable hello and then just waits: the server
answers when something changes or after maxAwaitTimeMS (= heartbeatFrequencyMS, 10 s by
default), and the RTT monitor pings once per heartbeatFrequencyMS. Nothing else should run: no
polling timer, no pool maintenance tick, no busy loop.

In a fresh interpreter (unpatched, then monkey-patched), a client connects, settles, and then the
process sleeps for a window (GREENMONGO_IDLE_WINDOW seconds, 10 by default; the issue asks for
30, run by hand) while a greenlet trace hook records every greenlet switch and which greenlet
the hub woke (the monitor, the RTT monitor, pool maintenance, anything else), and the hub's loop
iterations and CPU time (getrusage) are taken before and after.

The assertions: the hub woke no greenlet but the monitor and the RTT monitor (and the sleeping
main greenlet at the end); each of them woke in at most one burst per heartbeatFrequencyMS (a
burst being the few switches one heartbeat or one ping takes); the switches per minute stay under
a bound derived from that; the CPU used is a few milliseconds. Figures are printed (``-s``).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from typing import Any

import pytest

pytestmark = [pytest.mark.server]

WINDOW = float(os.environ.get("GREENMONGO_IDLE_WINDOW", "10"))
HEARTBEAT = 10.0  # heartbeatFrequencyMS default, in seconds
BURST_GAP = 0.25  # seconds: wakeups closer than this belong to the same heartbeat or ping
WAKEUPS_PER_BURST = 4  # a heartbeat reply or a ping: its timer, reading the reply (maybe twice)
MAX_CPU_SECONDS = 0.05  # for the whole window, the hub's thread
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# -- the meter (also used in the measured interpreter) ----------------------------------------------

class WakeupRecorder:
    """A greenlet trace hook: every switch, and every greenlet the hub switches to, with a role."""

    def __init__(self, roles: dict) -> None:
        self.roles = roles  # greenlet -> role name
        self.switches = 0
        self.wakeups: list = []  # (seconds since start, role)

    def __enter__(self) -> "WakeupRecorder":
        import time

        import gevent
        import greenlet

        self._time = time.monotonic
        self._hub = gevent.get_hub()
        gevent.sleep(0)  # let the hub install gevent's own tracer (if any) first: we chain onto it
        self._started = self._time()
        self._previous = greenlet.settrace(self._trace)
        return self

    def _trace(self, event: str, args: Any) -> None:
        if event in ("switch", "throw"):
            self.switches += 1
            origin, target = args
            if origin is self._hub:
                self.wakeups.append((self._time() - self._started, self.roles.get(target, "other")))
        if self._previous is not None:
            self._previous(event, args)

    def __exit__(self, *exc_info: Any) -> None:
        import greenlet

        if greenlet.gettrace() == self._trace:
            greenlet.settrace(self._previous)


def bursts(times: list, gap: float = BURST_GAP) -> list:
    """Group sorted times into bursts (a new burst after ``gap`` seconds of quiet)."""
    groups: list = []
    for moment in sorted(times):
        if groups and moment - groups[-1][-1] < gap:
            groups[-1].append(moment)
        else:
            groups.append([moment])
    return groups


def cpu_seconds(before: Any, after: Any) -> float:
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure_idle(uri: str, window: float) -> dict:
    """Connect, settle, then sleep ``window`` seconds under the recorder; the figures as a dict."""
    import resource

    import gevent

    from greenmongo import MongoClient
    from tests.waits import observe, wait_until

    client = MongoClient(uri)
    client.admin.command("ping")
    (server,) = client._core.topology.servers().values()
    # The first exchanges are over once the RTT monitor has its first sample: the monitor started
    # it after its first check and sent the awaitable hello at once, long before the RTT greenlet
    # finished connecting and pinging; and the RTT greenlet sleeps once it has counted its ping.
    wait_until(lambda: server.monitor.rtt_monitor and server.monitor.rtt_monitor.samples_taken >= 1
               and server.monitor.checks >= 1, 15, "the monitor streaming and the first RTT ping taken")
    roles = {server.monitor.greenlets[0]: "monitor", server.monitor.rtt_monitor.greenlet: "rtt",
             gevent.getcurrent(): "main (end of the window)"}
    if server.pool._maintenance is not None:
        roles[server.pool._maintenance] = "pool maintenance"
    loop = gevent.get_hub().loop
    checks_before = server.monitor.checks
    pings_before = server.monitor.rtt_monitor.samples_taken
    this_thread = getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF)  # Linux has the former
    process_before = resource.getrusage(resource.RUSAGE_SELF)
    thread_before = resource.getrusage(this_thread)
    iterations_before = loop.iteration
    with WakeupRecorder(roles) as recorder:
        observe(window)
    iterations = loop.iteration - iterations_before
    thread_after = resource.getrusage(this_thread)
    process_after = resource.getrusage(resource.RUSAGE_SELF)
    report = {
        "window": window, "switches": recorder.switches, "loop_iterations": iterations,
        "wakeups": recorder.wakeups,
        "heartbeats": server.monitor.checks - checks_before,
        "pings": server.monitor.rtt_monitor.samples_taken - pings_before,
        "streaming": client._core.topology.streaming,
        "cpu_thread": cpu_seconds(thread_before, thread_after),
        "cpu_process": cpu_seconds(process_before, process_after),
    }
    client.close()
    return report


# -- the tests ----------------------------------------------------------------------------------------

def run_measurement(uri: str, patched: bool) -> dict:
    script = (("from gevent import monkey; monkey.patch_all()\n" if patched else "")
              + "import json\nfrom tests.test_idle_cost import measure_idle\n"
              + f"print(json.dumps(measure_idle({uri!r}, {WINDOW!r})))\n")
    env = {key: value for key, value in os.environ.items() if key != "GREENMONGO_TEST_PATCHED"}
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=WINDOW + 60, env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def check_idle(report: dict) -> list:
    """What is wrong with an idle measurement (empty when it is as idle as it should be)."""
    problems = []
    window = report["window"]
    by_role: dict = {}
    for moment, role in report["wakeups"]:
        by_role.setdefault(role, []).append(moment)
    allowed_bursts = math.ceil(window / HEARTBEAT) + 1
    for role, times in by_role.items():
        if role == "main (end of the window)":
            if len(times) > 1:
                problems.append(f"the sleeping main greenlet woke {len(times)} times")
            continue
        if role not in ("monitor", "rtt"):
            problems.append(f"{role} woke {len(times)} times: {times[:10]}")
            continue
        groups = bursts(times)
        if len(groups) > allowed_bursts:
            problems.append(f"{role} woke in {len(groups)} bursts (at most {allowed_bursts} in {window}s): "
                            f"{[round(group[0], 2) for group in groups]}")
        crowded = [group for group in groups if len(group) > WAKEUPS_PER_BURST]
        if crowded:
            problems.append(f"{role}: bursts of more than {WAKEUPS_PER_BURST} wakeups: {crowded[:3]}")
    switch_bound = 2 * (2 * allowed_bursts * WAKEUPS_PER_BURST + 1)  # two switches per wakeup
    if report["switches"] > switch_bound:
        problems.append(f"{report['switches']} switches in {window}s (bound {switch_bound})")
    return problems


def _print_figures(label: str, report: dict) -> None:
    per_minute = 60.0 / report["window"]
    roles: dict = {}
    for moment, role in report["wakeups"]:
        roles.setdefault(role, []).append(round(moment, 2))
    print(f"\n[idle cost, {label}] window {report['window']:.0f}s, streaming={report['streaming']}: "
          f"{report['switches'] * per_minute:.1f} switches/min, "
          f"{report['loop_iterations'] * per_minute:.1f} hub loop iterations/min, "
          f"wakeups (seconds into the window) by greenlet {roles}, "
          f"heartbeats {report['heartbeats']}, RTT pings {report['pings']}, "
          f"CPU {report['cpu_thread'] * 1000:.1f} ms (hub thread) / {report['cpu_process'] * 1000:.1f} ms "
          f"(process) = {report['cpu_process'] / report['window'] * 100:.3f}% of a core")


@pytest.mark.one_pass  # each case is its own (patched or unpatched) subprocess
@pytest.mark.parametrize("patched", [False, True], ids=["unpatched", "monkey-patched"])
def test_idle_client_wakes_only_for_heartbeats(server_uri: str, patched: bool) -> None:
    report = run_measurement(server_uri, patched)
    _print_figures("patched" if patched else "unpatched", report)
    assert report["streaming"], "the streaming monitor is what this test is about"
    assert not check_idle(report), check_idle(report)
    assert report["cpu_thread"] <= MAX_CPU_SECONDS * max(1.0, report["window"] / 10), report


def test_the_recorder_sees_a_busy_greenlet() -> None:
    """Without this, a recorder that saw nothing would make the test above pass vacuously."""
    import gevent

    from tests.waits import observe

    def ticker() -> None:
        while True:
            gevent.sleep(0.05)

    busy = gevent.spawn(ticker)
    try:
        with WakeupRecorder({}) as recorder:
            observe(1.0)
    finally:
        busy.kill()
    report = {"window": 1.0, "switches": recorder.switches, "wakeups": recorder.wakeups}
    problems = check_idle(report)
    assert recorder.switches >= 30, recorder.switches
    assert any("other woke" in problem for problem in problems), problems
