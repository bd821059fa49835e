"""Hub watchdog: gevent's blocking monitor runs for the whole test session; a report of a spawned
greenlet blocking the hub inside greenmongo fails the session.

gevent's monitor thread notices when one greenlet runs for longer than ``max_blocking_time``
without yielding to the hub, and publishes an ``EventLoopBlocked`` event with the blocked stack.
Only spawned greenlets count: the main greenlet is where the tests themselves run CPU-bound loops
(fuzzing, spec suites), which would be noise. Blocking I/O inside greenmongo's own greenlets
(monitors, pool maintenance) and inside greenlets that tests spawn as workloads is what this
catches; dedicated tests measure hub latency directly at a 10 ms threshold.
"""

from __future__ import annotations

import os

import gevent
import gevent.events
import pytest

THRESHOLD = float(os.environ.get("GREENMONGO_HUB_BLOCK_THRESHOLD", "0.1"))
_PACKAGE_MARKER = os.sep + "greenmongo" + os.sep

gevent.config.monitor_thread = True
gevent.config.max_blocking_time = THRESHOLD
gevent.config.print_blocking_reports = False  # we print only the reports that matter, at the end


def blocked_stack(info: list[str]) -> str:
    """The "Blocked Stack" section of a gevent report (the frames of the greenlet that blocked)."""
    text = "\n".join(info)
    start = text.find("Blocked Stack")
    if start < 0:
        return ""
    end = text.find("Info:", start)
    return text[start:end if end > 0 else None]


def points_into_greenmongo(info: list[str]) -> bool:
    return _PACKAGE_MARKER in blocked_stack(info)


class HubWatchdog:
    def __init__(self) -> None:
        self.reports: dict[str, float] = {}  # blocked stack -> longest blocking time seen

    def on_event(self, event: object) -> None:
        if not isinstance(event, gevent.events.EventLoopBlocked):
            return
        if getattr(event.greenlet, "parent", None) is None:  # the main greenlet: the tests' own code
            return
        if points_into_greenmongo(event.info):
            stack = blocked_stack(event.info)
            self.reports[stack] = max(self.reports.get(stack, 0.0), event.blocking_time)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.reports and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.reports:
            return
        terminalreporter.section("greenmongo blocked the gevent hub", red=True)
        for stack, seconds in self.reports.items():
            terminalreporter.write_line(f"blocked for >= {seconds:.3f}s:\n{stack}")


WATCHDOG = HubWatchdog()


def ensure_monitor_thread() -> None:
    """Start the hub's monitor thread now (idempotent): the hub would start it lazily, and a test that
    starts one of its own would otherwise own -- and stop -- the session's."""
    gevent.get_hub().start_periodic_monitoring_thread()


def pytest_configure(config: pytest.Config) -> None:
    if WATCHDOG.on_event not in gevent.events.subscribers:
        gevent.events.subscribers.append(WATCHDOG.on_event)
    config.pluginmanager.register(WATCHDOG, "greenmongo-hub-watchdog")
    ensure_monitor_thread()
