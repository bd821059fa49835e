"""The hub watchdog itself: gevent's monitor sees a spawned greenlet block, and the filter works."""

from __future__ import annotations

import time

import gevent
import gevent.events
from gevent import monkey

from tests.plugins.hub_watchdog import (
    THRESHOLD,
    WATCHDOG,
    blocked_stack,
    ensure_monitor_thread,
    points_into_greenmongo,
)

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
    seen = []

    def record(event: object) -> None:
        if isinstance(event, gevent.events.EventLoopBlocked):
            seen.append(event)

    ensure_monitor_thread()  # the session's, unless a test before us stopped it
    gevent.events.subscribers.append(record)
    try:
        blocking_sleep = monkey.get_original("time", "sleep")  # blocks the hub, patched or not
        worker = gevent.spawn(blocking_sleep, THRESHOLD * 4)
        worker.join()
        deadline = time.monotonic() + 5
        while not seen and time.monotonic() < deadline:
            gevent.sleep(0.05)
    finally:
        gevent.events.subscribers.remove(record)
    assert seen, "gevent's monitor thread did not report a 4x-threshold block"
    assert any(event.greenlet is worker for event in seen)
    assert not WATCHDOG.reports, "a block outside greenmongo must not fail the session"

