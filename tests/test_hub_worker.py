"""The background-worker base every monitor, poller and pool maintainer is built on."""

from __future__ import annotations

import os
import subprocess
import sys
from time import monotonic
from typing import Any, List

import gevent
import pytest
from gevent.event import Event
from gevent.hub import Waiter

from greenmongo.hub.waiting import Interrupted, Interruptible, wait_woken
from greenmongo.hub.worker import BackgroundWorker, WorkerStopped


class Recording(BackgroundWorker):
    """Sleeps, then runs one step per wake-up; a step may block inside interruptible I/O."""

    def __init__(self, timeout: Any = None) -> None:
        super().__init__()
        self.timeout = timeout
        self.log: List[str] = []
        self.in_io = Event()
        self.io_gate = Event()  # the I/O "completes" when set
        self.busy_gate: Any = None  # when set to an Event: a non-interruptible wait after the I/O
        self.in_busy = Event()
        self.interrupted: List[BaseException] = []
        self.steps = 0
        self._stepped = Event()

    def wait_steps(self, count: int, timeout: float = 1.0) -> None:
        while self.steps < count:
            assert self._stepped.wait(timeout), f"{self.steps} steps, expected {count}"

    def run(self) -> None:
        while not self.stopped:
            woken = self.sleep(self.timeout)
            self.log.append("woken" if woken else "timeout")
            if self.stopped:
                return
            try:
                with self.interruptible():
                    self.in_io.set()
                    self.io_gate.wait()
            except Interrupted as exc:
                self.interrupted.append(exc)
                raise
            if self.busy_gate is not None:
                self.in_busy.set()
                self.busy_gate.wait()
            self.steps += 1
            fired, self._stepped = self._stepped, Event()
            fired.set()

    def cleanup(self) -> None:
        self.log.append("cleanup")

    def release(self) -> None:
        self.log.append("release")


def test_start_spawns_once_and_never_after_stop() -> None:
    worker = Recording()
    worker.start()
    glet = worker.greenlet
    worker.start()
    assert worker.greenlet is glet and worker.greenlets == (glet,)
    worker.stop()  # before the greenlet first ran: released here; it ends at its first check
    glet.join(1)
    assert glet.dead and worker.log == ["release", "cleanup"]
    never = Recording()
    never.stop()
    never.start()
    assert never.greenlet is None and never.greenlets == ()
    assert never.log == ["release"]  # nothing to interrupt: stop() releases in the caller


def test_wake_ends_a_sleep_and_a_wake_while_busy_is_kept() -> None:
    worker = Recording()
    worker.io_gate.set()
    worker.start()
    worker.wake()
    worker.wait_steps(1)
    # A wake-up made while the worker is busy (not sleeping) ends its next sleep at once.
    worker.busy_gate = busy = Event()
    worker.wake()
    assert worker.in_busy.wait(1)
    worker.wake()
    busy.set()
    worker.wait_steps(3)  # the kept wake-up ran one more step without another wake()
    assert worker.log == ["woken", "woken", "woken"]
    worker.stop()
    worker.greenlet.join(1)
    assert worker.greenlet.dead


def test_sleep_times_out_and_an_unwakeable_sleep_ends_only_at_stop() -> None:
    worker = Recording(timeout=0.02)
    worker.io_gate.set()
    worker.start()
    worker.wait_steps(1)
    assert worker.log[0] == "timeout"
    worker.stop()
    worker.greenlet.join(1)

    class Resting(BackgroundWorker):
        def __init__(self) -> None:
            super().__init__()
            self.result: Any = None

        def run(self) -> None:
            self.result = self.sleep(30.0, wakeable=False)

    resting = Resting()
    resting.start()
    gevent.idle()
    resting.wake()
    gevent.idle()
    assert not resting.greenlet.dead  # wake() does not end it
    started = monotonic()
    resting.stop()
    resting.greenlet.join(1)
    assert resting.greenlet.dead and resting.result is True and monotonic() - started < 0.5


def test_stop_interrupts_only_inside_interruptible_io() -> None:
    worker = Recording()
    worker.start()
    worker.wake()
    assert worker.in_io.wait(1)
    worker.stop()
    worker.greenlet.join(1)
    assert worker.greenlet.dead
    assert [type(e) for e in worker.interrupted] == [WorkerStopped]
    assert worker.log == ["woken", "cleanup"]  # interrupted: nothing to release from outside

    # Outside the span, stop() releases at once and the worker ends at its next check.
    outside = Recording()
    outside.io_gate.set()
    outside.busy_gate = busy = Event()
    outside.start()
    outside.wake()
    assert outside.in_busy.wait(1)
    outside.stop()
    assert outside.log == ["woken", "release"] and not outside.greenlet.dead
    assert not outside.interrupted
    busy.set()
    outside.greenlet.join(1)
    assert outside.greenlet.dead and outside.log == ["woken", "release", "cleanup"]


def test_an_interruption_never_lands_after_the_span_was_left() -> None:
    # Scheduled while the target was inside, delivered (by the hub) after it left: dropped.
    guard = Interruptible()
    left = Event()
    release = Event()
    caught: List[BaseException] = []

    def work() -> None:
        try:
            with guard:
                release.wait()
            left.set()
            gevent.idle()
            gevent.idle()
        except KeyError as exc:
            caught.append(exc)

    guard.greenlet = glet = gevent.spawn(work)
    gevent.idle()
    release.set()  # its wake-up is queued before our interruption...
    assert guard.interrupt(lambda: KeyError("late"))
    glet.join(1)
    assert left.is_set() and not caught  # ...so it left the span before delivery


def test_wait_woken_is_bounded_and_reports_expiry() -> None:
    waiter = Waiter()
    gevent.get_hub().loop.run_callback(waiter.switch, None)
    assert wait_woken(waiter, 1.0) is True
    assert wait_woken(Waiter(), 0.01) is False
    assert wait_woken(Waiter(), -1) is False
    with pytest.raises(gevent.Timeout):  # an outer timeout is not mistaken for ours
        with gevent.Timeout(0.01):
            wait_woken(Waiter(), 5.0)


_HUB_SCRIPT = r"""
import os
if os.environ.get("GREENMONGO_TEST_PATCHED", "").lower() in ("1", "true", "yes"):
    from gevent import monkey
    monkey.patch_all()
import gevent
from greenmongo.hub.worker import BackgroundWorker

class Sleeper(BackgroundWorker):
    def __init__(self, timeout):
        super().__init__()
        self.timeout = timeout
    def run(self):
        while not self.stopped:
            self.sleep(self.timeout)

sleeper = Sleeper(30.0)
sleeper.start()
forever = Sleeper(None)
forever.start()
gevent.sleep(0)
print(gevent.get_hub().join(timeout=5.0), sleeper.greenlet.dead, forever.greenlet.dead)
"""


def test_a_sleeping_worker_never_keeps_the_hub_alive() -> None:
    # In a clean process: other tests' servers keep this one's hub alive.
    result = subprocess.run([sys.executable, "-c", _HUB_SCRIPT], capture_output=True, text=True, timeout=30,
                            env=dict(os.environ))
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["True", "False", "False"]  # joined while both still sleep
