"""The hub watchdog itself: gevent's monitor sees a spawned greenlet block, and the filter works."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.plugins.hub_watchdog import WATCHDOG, blocked_stack, points_into_greenmongo

ROOT = Path(__file__).resolve().parent.parent

REPORT = [
    "Greenlet <Greenlet at 0x1: worker> appears to be blocked",
    "Blocked Stack (for thread id 0x2):",
    '  File "/src/greenmongo/net/connection.py", line 10, in receive',
    "",
    "Info:",
    '  File "/usr/lib/python3.11/site-packages/gevent/hub.py", line 1, in run',
]


def test_filter_reads_only_the_blocked_stack() -> None:
    assert "connection.py" in blocked_stack(REPORT)
    assert points_into_greenmongo(REPORT)
    elsewhere = [line.replace("/src/greenmongo/net/", "/app/") for line in REPORT[:4]] + REPORT[4:]
    elsewhere.append('  File "/src/greenmongo/pool.py", line 1, in x')  # after "Info:": not the blocker
    assert not points_into_greenmongo(elsewhere)


def test_monitor_reports_a_blocking_spawned_greenlet() -> None:
    """In a fresh interpreter (other tests measure the hub with monitors of their own): the watchdog's
    settings make gevent's monitor thread report a spawned greenlet that blocks the hub."""
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        import tests.plugins.hub_watchdog as watchdog
        import gevent, gevent.events
        from gevent import monkey
        from tests.waits import poll, wait_until
        gevent.sleep(0)  # the hub first: a monitor thread that finds it not started ends itself
        watchdog.ensure_monitor_thread()
        seen = []
        gevent.events.subscribers.append(
            lambda e: seen.append(e) if isinstance(e, gevent.events.EventLoopBlocked) else None)
        passes = []  # the monitor thread is running its checks once this one has run
        monitor = gevent.get_hub().periodic_monitoring_thread
        monitor.add_monitoring_function(passes.append, 0.01)
        wait_until(lambda: len(passes) >= 2, message="the monitor thread running")
        monitor.add_monitoring_function(passes.append, None)  # None removes it
        worker = gevent.spawn(monkey.get_original("time", "sleep"), watchdog.THRESHOLD * 4)
        worker.join()
        poll(lambda: seen, 5)  # the report comes from the monitor thread: none in 5 s is a failure
        print("reports", len(seen), "from-worker", any(e.greenlet is worker for e in seen))
    """)
    env = dict(os.environ)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "from-worker True" in proc.stdout, proc.stdout + proc.stderr
    assert not WATCHDOG.reports, "a block outside greenmongo must not fail the session"
