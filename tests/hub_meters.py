"""Meters of how long greenlets keep the gevent hub from running, for the quiet hub tests
(tests/test_dns_hub_blocking.py, tests/test_hub_stress.py). Each runs in a fresh interpreter.

* ``StallMeter``: a greenlet trace hook times how long each non-hub greenlet runs without
  switching back (the hub cannot run meanwhile): wall time less the time Linux kept the thread
  runnable but not running (``schedstat``). Running and sleeping in a blocking system call both
  count in full; the OS preempting us on a busy machine does not.
* ``HubMonitor``: gevent's own monitor thread (``max_blocking_time``), each ``EventLoopBlocked``
  report checked against a switch clock before it counts (its docstring says how).

Only one meter per run: when gevent's monitor fires it formats a report of every greenlet while
holding the GIL, which the stall meter would rightly count as a stall of its own.
"""

from __future__ import annotations

import gc
import io
import os
import time
import warnings
from typing import Any, Callable, Optional

MAX_STALL = 0.010  # seconds: the bound the hub tests hold greenmongo to
GREENMONGO_PATH = os.sep + "greenmongo" + os.sep


class SchedClock:
    """The calling thread's ``schedstat`` (Linux; 0 elsewhere): ``()`` gives the seconds it has spent
    runnable but not running, ``on_cpu`` the seconds it has run, as of that reading. Opened by the
    thread it names (``/proc/thread-self``); any thread may read it."""

    def __init__(self) -> None:
        try:
            self._fd: Optional[int] = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
        except OSError:
            self._fd = None
        self.on_cpu = 0.0

    def __call__(self) -> float:
        if self._fd is None:
            return 0.0
        fields = os.pread(self._fd, 128, 0).split()
        self.on_cpu = int(fields[0]) / 1e9
        return int(fields[1]) / 1e9

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class GcPauses:
    """Times the garbage collector's pauses (``gc.callbacks``, whichever thread collects)."""

    def __init__(self) -> None:
        self.pauses: list = []  # (start, seconds)
        self._started = 0.0

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.pauses.append((self._started, time.perf_counter() - self._started))

    def start(self) -> None:
        gc.callbacks.append(self._callback)

    def stop(self) -> None:
        gc.callbacks.remove(self._callback)

    def between(self, start: float, end: float) -> float:
        """Seconds of collection that began in [start, end]."""
        return sum(seconds for begun, seconds in reversed(self.pauses) if start <= begun <= end)

    @property
    def longest(self) -> float:
        return max((seconds for _, seconds in self.pauses), default=0.0)


def stack_of(glet: Any) -> list:
    """``file:line function`` of a suspended greenlet's frames, innermost first."""
    frames = []
    frame = getattr(glet, "gr_frame", None)
    while frame is not None:
        frames.append(f"{frame.f_code.co_filename}:{frame.f_lineno} {frame.f_code.co_name}")
        frame = frame.f_back
    return frames


class StallMeter:
    """Longest time a non-hub greenlet kept the hub from running (see the module docstring).

    Each stall of ``record_from`` or more is described in ``stalls``: where the greenlet switched
    out, how much of it was on the CPU, garbage-collector pauses inside it, and whether it switched
    out from greenmongo's code.
    """

    record_from = MAX_STALL

    def __init__(self) -> None:
        self.longest = 0.0
        self.longest_wall = 0.0
        self.stalls: list = []
        self.gc = GcPauses()
        self._previous: Optional[Callable] = None

    def __enter__(self) -> "StallMeter":
        import greenlet
        import gevent

        self._hub = gevent.get_hub()
        gevent.sleep(0)  # the hub's first run installs gevent's own tracer: let it, then chain onto it
        self.gc.start()
        self._clock = SchedClock()
        self._wall, self._queued = time.perf_counter(), self._clock()
        self._on_cpu = self._clock.on_cpu
        self._active = True
        self._previous = greenlet.settrace(self._trace)
        return self

    def _trace(self, event: str, args: Any) -> None:
        if self._active and event in ("switch", "throw"):
            origin, _target = args
            wall, queued = time.perf_counter(), self._clock()
            if origin is not self._hub:
                elapsed = wall - self._wall
                stall = elapsed - (queued - self._queued)
                self.longest = max(self.longest, stall)
                self.longest_wall = max(self.longest_wall, elapsed)
                if stall >= self.record_from:
                    frames = stack_of(origin)
                    collecting = self.gc.between(self._wall, wall)
                    self.stalls.append({
                        "stall": stall, "wall": elapsed, "gc": collecting, "beyond_gc": stall - collecting,
                        "on_cpu": self._clock.on_cpu - self._on_cpu,
                        "greenmongo": any(GREENMONGO_PATH in line for line in frames), "stack": frames[:12]})
            self._wall, self._queued = time.perf_counter(), self._clock()
            self._on_cpu = self._clock.on_cpu
        if self._previous is not None:
            self._previous(event, args)

    def __exit__(self, *exc_info: Any) -> None:
        import greenlet

        self._active = False
        if greenlet.gettrace() == self._trace:  # else someone chained onto us: we just forward from now on
            greenlet.settrace(self._previous)
        self._clock.close()
        self.gc.stop()


class HubMonitor:
    """gevent's monitor thread at ``max_blocking_time``, its EventLoopBlocked reports checked against
    a switch clock before they count.

    gevent's check runs in its monitor thread every ``max_blocking_time`` and reports when no
    greenlet switched since its previous check: wall-clock. What kept the hub away may have been:

    * the OS, preempting the hub's thread (its run-queue time), or the monitor thread itself: that
      thread needs the GIL to look, and preempted while holding it, it keeps the hub's thread
      waiting asleep, which the hub thread's own run-queue time does not show;
    * the garbage collector;
    * gevent's own previous report, formatted holding the GIL (with 1,000 greenlets that takes a while).

    So a greenlet trace hook notes each switch (its time, and both threads' run-queue time, read at
    most once a millisecond), the check is wrapped to note when it ran, and a report counts as
    ``blocked`` only if, of the time since the last switch, at least the bound is left after taking
    off both threads' run-queue time and garbage collection; ``self_inflicted`` if the last switch
    came before gevent's previous report was finished; else ``preempted``. Every blocked report is
    kept whole in ``reports``; those whose stack is in greenmongo are also counted apart. In its
    checks the monitor thread makes no system call but when a report comes (each call costs it the
    GIL, for up to 5 ms, and would make it look less often).
    """

    def __init__(self, max_blocking_time: float = MAX_STALL) -> None:
        self.max_blocking_time = max_blocking_time
        self.blocked = 0
        self.preempted = 0
        self.self_inflicted = 0
        self.greenmongo_blocked = 0
        self.reports: list[str] = []
        self.greenmongo_reports: list[str] = []
        self.gc = GcPauses()
        self._passes = 0  # the monitor thread's passes so far, for waiting on them
        self._last_switch = 0.0
        self._queued_at_switch = (0.0, 0.0)  # (hub thread, monitor thread)
        self._queued_read_at = 0.0
        self._last_report_end = 0.0
        self._at_check: Optional[tuple] = None
        self._reported = False
        self._monitor_clock: Optional[SchedClock] = None  # opened by the monitor thread at its first check
        self._previous_trace: Any = None

    def _queued(self) -> tuple[float, float]:
        monitor = self._monitor_clock
        return self._hub_clock(), (monitor() if monitor is not None else 0.0)

    def _on_pass(self, hub: Any) -> None:
        self._passes += 1

    def _wait_for_passes(self, count: int) -> None:
        """Wait until the monitor thread has made ``count`` more passes (its blocking check, every
        ``max_blocking_time``, runs at least every second one: a pass comes every half of that).
        A monitor thread that died fails here rather than letting the measurement pass unwatched."""
        from tests.waits import wait_until

        target = self._passes + count
        wait_until(lambda: self._passes >= target, message=f"{count} passes of the monitor thread")

    def _trace(self, event: str, args: Any) -> None:
        if event in ("switch", "throw"):
            now = time.perf_counter()
            self._last_switch = now
            if now - self._queued_read_at >= 0.001:
                self._queued_at_switch, self._queued_read_at = self._queued(), now
        if self._previous_trace is not None:
            self._previous_trace(event, args)

    def _on_event(self, event: Any) -> None:
        from gevent.events import EventLoopBlocked

        if not isinstance(event, EventLoopBlocked) or self._at_check is None:
            return
        self._reported = True
        now, switched, (hub_then, monitor_then) = self._at_check
        if switched < self._last_report_end:
            self.self_inflicted += 1
            return
        since = now - switched
        hub_queued, monitor_queued = self._queued()
        ran = since - (hub_queued - hub_then) - (monitor_queued - monitor_then) - self.gc.between(switched, now)
        if ran < self.max_blocking_time:
            self.preempted += 1
            return
        self.blocked += 1
        text = "\n".join(event.info)
        start = text.find("Blocked Stack")
        stack = text[start:text.find("Info:", start)] if start >= 0 else text
        report = (f"{since * 1000:.1f} ms since the last switch, {ran * 1000:.1f} ms of them neither queued "
                  f"(hub thread {(hub_queued - hub_then) * 1000:.1f} ms, monitor thread "
                  f"{(monitor_queued - monitor_then) * 1000:.1f} ms) nor collecting\n{stack}")
        self.reports.append(report)
        if GREENMONGO_PATH in stack:
            self.greenmongo_blocked += 1
            self.greenmongo_reports.append(report)

    def __enter__(self) -> "HubMonitor":
        import greenlet
        import gevent
        from gevent import events

        import tests.waits  # noqa: F401 - imported now, not while the monitor thread's first pass is due

        # The monitor thread ends itself at its first pass if the hub greenlet has not started yet
        # (it takes a not-yet-started hub for a dead one): start the hub first.
        gevent.sleep(0)
        self._hub_clock = SchedClock()  # opened here, in the hub's thread
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
        entry = thread._monitoring_functions[0]  # gevent: "the first entry is always monitor_blocking"
        self._original_check = original = entry.function

        def checked(hub: Any) -> Any:
            if self._monitor_clock is None:
                self._monitor_clock = SchedClock()  # in the monitor thread, so it names that thread
            self._at_check = (time.perf_counter(), self._last_switch, self._queued_at_switch)
            self._reported = False
            try:
                return original(hub)
            finally:
                self._at_check = None
                if self._reported:
                    self._last_report_end = time.perf_counter()

        entry.function = checked
        self._entry = entry
        thread.add_monitoring_function(self._on_pass, self.max_blocking_time / 2)
        self.gc.start()
        self._previous_trace = greenlet.settrace(self._trace)  # chained onto gevent's own tracer
        events.subscribers.append(self._on_event)
        self._wait_for_passes(3)  # the monitor has taken its first looks (a blocking check among them)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        import greenlet
        import gevent
        from gevent import events

        self._wait_for_passes(3)  # and a last one, past the end of the work
        events.subscribers.remove(self._on_event)
        if greenlet.gettrace() == self._trace:
            greenlet.settrace(self._previous_trace)
        self.gc.stop()
        self._entry.function = self._original_check
        hub = gevent.get_hub()
        if self._owned_thread and hub.periodic_monitoring_thread is not None:
            hub.periodic_monitoring_thread.kill()
            hub.periodic_monitoring_thread = None
        else:
            self._thread.add_monitoring_function(self._on_pass, None)  # None removes it
        gevent.config.monitor_thread, gevent.config.max_blocking_time = self._saved
        hub.exception_stream = self._stream
        # Both clocks stay open: the monitor thread, told to stop but maybe still inside a check, may be
        # reading them, and a closed descriptor's number may be reused meanwhile. (Two descriptors, in an
        # interpreter that ends with the measurement.)
