"""The waiting primitives monitors use: unreferenced timers and hub-delivered interruptions."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import gevent
import gevent.socket
import pytest
from gevent.event import Event
from gevent.hub import Waiter

from greenmongo.errors import NetworkTimeout
from greenmongo.hub.waiting import Interruptible, call_with_deadline, wait_for, wait_woken
from greenmongo.net.connection import Connection
from tests.waits import assert_stays, wait_until


_HUB_SCRIPT = r"""
import os, time
if os.environ.get("GREENMONGO_TEST_PATCHED", "").lower() in ("1", "true", "yes"):
    from gevent import monkey
    monkey.patch_all()
import gevent
from gevent.event import Event
from greenmongo.hub.waiting import wait_for

event = Event()
waiter = gevent.spawn(wait_for, event, 30.0)
gevent.sleep(0)
started = time.monotonic()
joined = gevent.get_hub().join(timeout=2.0)
elapsed = time.monotonic() - started
control = gevent.spawn(Event().wait, 30.0)  # an ordinary timed wait does keep the hub alive
gevent.sleep(0)
control_joined = gevent.get_hub().join(timeout=0.3)
control.kill()
print(joined, round(elapsed, 3), waiter.dead, control_joined)
"""


def test_wait_for_times_out_without_keeping_the_hub_alive():
    # In a clean process: test servers and subprocess watchers of other tests keep this one's hub alive.
    result = subprocess.run([sys.executable, "-c", _HUB_SCRIPT], capture_output=True, text=True, timeout=30,
                            env=dict(os.environ))
    assert result.returncode == 0, result.stderr[-2000:]
    joined, elapsed, waiter_dead, control_joined = result.stdout.split()
    assert joined == "True" and float(elapsed) < 0.5
    assert waiter_dead == "False"  # still waiting, just not counted
    assert control_joined == "False"


def test_unreferenced_wait_still_times_out_and_wakes():
    event = Event()
    waiter = gevent.spawn(wait_for, event, 30.0)
    gevent.sleep(0)
    event.set()
    assert waiter.get(timeout=1) is True
    # (From a spawned greenlet: in the main greenlet, an unreferenced wait alone is a LoopExit -
    # which is exactly why only background greenlets use these waits.)
    assert gevent.spawn(wait_for, Event(), 0.05).get(timeout=1) is False
    assert wait_for(Event(), 0) is False


def test_call_with_deadline_turns_expiry_into_network_timeout():
    with pytest.raises(NetworkTimeout, match="slow thing: timed out after 50.0ms"):
        call_with_deadline(0.05, "slow thing", gevent.sleep, 5)
    assert call_with_deadline(None, "x", lambda: 42) == 42
    # An outer timeout is not mistaken for ours.
    with pytest.raises(gevent.Timeout):
        with gevent.Timeout(0.05):
            call_with_deadline(5.0, "x", gevent.sleep, 1)


def _stale_loop_clock(seconds: float) -> None:
    """Run ``seconds`` without yielding, right after a loop iteration: the loop's clock is then that far behind."""
    gevent.sleep(0.001)
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        pass


def test_a_timed_wait_never_expires_before_its_time_however_stale_the_loops_clock():
    """libev sets a timer from the time its iteration began: after 50 ms of Python without a switch, a
    100 ms timer started without bringing that clock up to date fires 50 ms early (gevent.Timeout, which
    these waits use, brings it up to date; the connection's deadline timer must too, below)."""
    for _ in range(3):
        _stale_loop_clock(0.05)
        started = time.monotonic()
        assert wait_woken(Waiter(), 0.1) is False
        assert time.monotonic() - started >= 0.099


def test_a_deadline_round_trip_never_times_out_before_its_deadline_however_stale_the_loops_clock():
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)
    conn = Connection(gevent.socket.create_connection(silent.getsockname()), ("127.0.0.1", silent.getsockname()[1]))
    try:
        _stale_loop_clock(0.05)
        deadline = time.monotonic() + 0.1
        with pytest.raises(NetworkTimeout):
            conn.command("admin", {"ping": 1}, deadline=deadline, deadline_timeout=0.1)
        assert time.monotonic() >= deadline - 0.001  # (libev's own rounding: well under a millisecond)
    finally:
        conn.close()
        silent.close()


def test_interruptible_delivers_only_while_active():
    guard = Interruptible()
    caught = []

    def work():
        try:
            guard.active = True
            try:
                gevent.sleep(5)
            finally:
                guard.active = False
        except KeyError as exc:
            caught.append(exc)
        gevent.sleep(5)  # no longer interruptible

    guard.greenlet = gevent.spawn(work)
    wait_until(lambda: guard.active, message="the interruptible wait entered")
    assert guard.interrupt(lambda: KeyError("stop"))
    wait_until(lambda: caught, message="the interruption delivered")
    assert not guard.greenlet.dead and not guard.active
    assert not guard.interrupt(lambda: KeyError("again"))  # not active: nothing thrown
    # Nothing was thrown, so nothing can be waited for: the greenlet stays in its plain sleep.
    assert_stays(lambda: len(caught) == 1 and not guard.greenlet.dead, 0.05, "one interruption, still alive")
    guard.greenlet.kill()
