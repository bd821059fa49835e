"""The hub watchdog itself (tests/plugins/hub_watchdog.py): it watches during the session, it
attributes stretches to greenmongo only for greenmongo's own code, it discounts what was not
greenmongo running, and a block in greenmongo fails a session.

The controls run tiny pytest sessions in fresh interpreters (pytester, unpatched and patched), with
the plugin loaded as the suite loads it. Their "greenmongo" code is compiled under a file name in
greenmongo's package directory (no file is written there): the watchdog knows code by the file
its frames name, so that code is greenmongo's to it, and the same source compiled under the test's
own file name is not.
"""

from __future__ import annotations

import ast
import gc
import re
import sys
from pathlib import Path

import gevent
import pytest
from gevent import monkey

from tests.plugins.hub_watchdog import (GREENMONGO, LIBRARY, PROJECT, THRESHOLD, WATCHDOG, CodeMap, Mark,
                                        Stretch, frame_at, thread_stack)
from tests.waits import wait_until

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = str(ROOT / "greenmongo")
LIBRARY_DIR = "/usr/lib/python3.11"


# -- attribution and discounts, on synthetic frames and clocks ----------------------------------------

def _stack(*files: str) -> list:
    """A sampled stack, innermost first: frame ``i`` in ``files[i]``, at address ``1000 + i``."""
    return [(1000 + index, filename, index + 1, f"f{index}") for index, filename in enumerate(files)]


def test_code_is_known_by_its_file() -> None:
    code = CodeMap(PACKAGE, [LIBRARY_DIR])
    assert code.kind(f"{PACKAGE}/net/connection.py") == GREENMONGO
    assert code.kind(f"{LIBRARY_DIR}/socket.py") == LIBRARY
    assert code.kind("<frozen importlib._bootstrap>") == LIBRARY
    assert code.kind(f"{ROOT}/tests/test_x.py") == PROJECT
    assert code.kind(f"{PACKAGE}-extras/x.py") == PROJECT  # a sibling whose name starts the same


def test_the_innermost_code_that_is_not_a_library_decides() -> None:
    code = CodeMap(PACKAGE, [LIBRARY_DIR])
    gm, lib, test = f"{PACKAGE}/pool/__init__.py", f"{LIBRARY_DIR}/socket.py", f"{ROOT}/tests/test_x.py"
    # greenmongo calling the standard library, called by a test: greenmongo's frames are the call
    run, location = code.attribute(_stack(lib, gm, lib, gm, test, gm))
    assert run == [(1, 1001), (3, 1003)]  # not 5: beyond the test's frame
    assert location == (gm, 2, "f1")
    # a test's callback that greenmongo called: the callback's code is running, not greenmongo's
    run, location = code.attribute(_stack(lib, test, gm, gm))
    assert run == [] and location == (test, 2, "f1")
    # only library code (the hub's loop, pytest): nothing of greenmongo's or the tests'
    assert code.attribute(_stack(lib, lib)) == ([], None)
    assert code.attribute([]) == ([], None)  # a greenlet running C code only


def test_another_threads_stack_is_read_innermost_first_and_its_frames_not_kept() -> None:
    """As the monitor thread reads the hub's: from a real thread, while this one waits on a real
    lock. Only ``frame_at`` hands out a frame object, and only the one at the address asked for."""
    allocate_lock = monkey.get_original("_thread", "allocate_lock")
    here = monkey.get_original("_thread", "get_ident")()
    looked = allocate_lock()
    looked.acquire()
    seen: list = []

    def look() -> None:
        stack = thread_stack(here)
        seen.append(stack)
        seen.append(frame_at(here, 0, stack[0][0]))
        seen.append(frame_at(here, 0, stack[0][0] + 1))
        looked.release()

    marker = object()
    references = sys.getrefcount(marker)
    monkey.get_original("_thread", "start_new_thread")(look, ())
    looked.acquire()  # (this thread really waits: a few milliseconds)
    stack, frame, wrong = seen
    assert stack[0][1:] == (__file__, stack[0][2], "test_another_threads_stack_is_read_innermost_first_and_its_"
                                                   "frames_not_kept"), stack[:2]
    assert any(function == "pytest_pyfunc_call" for _address, _file, _line, function in stack)
    assert frame is sys._getframe() and id(frame) == stack[0][0] and wrong is None
    assert sys.getrefcount(marker) == references and gc.isenabled()
    assert len(thread_stack(here, depth=3)) == 3


def _marks(*readings: tuple) -> list:
    return [Mark(at, queued, (steal,), collected) for at, queued, steal, collected in readings]


def test_a_greenmongo_call_is_timed_over_consecutive_samples_less_the_discounts() -> None:
    clean = Stretch("g", True, "t", began=0.0)
    for mark in _marks((0.01, 0, 0, 0), (0.2, 0, 0, 0), (0.31, 0.01, 0, 0.005)):
        clean.sample(mark, ["call", "inner"], stack=lambda: (("f", 1, "x"),))
    assert clean.verdict() == "greenmongo"
    assert clean.worst.wall == pytest.approx(0.30) and clean.worst.net == pytest.approx(0.285)
    assert clean.worst.stack == (("f", 1, "x"),)

    for readings, reason in [(((0.0, 0, 0, 0), (0.3, 0.25, 0, 0)), "run queue"),
                             (((0.0, 0, 0, 0), (0.3, 0, 0, 0.25)), "gc"),
                             (((0.0, 0, 0, 0), (0.3, 0, 0.25, 0)), "steal")]:
        stretch = Stretch("g", True, "t", began=0.0)
        for mark in _marks(*readings):
            stretch.sample(mark, ["call"])
        assert stretch.verdict() == "discounted" and stretch.longest.reason() == reason, reason


def test_a_loop_of_short_greenmongo_calls_is_not_one_block() -> None:
    """Each sample sees a new call (another frame object): no call lasts, however long the loop."""
    stretch = Stretch("g", True, "t", began=0.0)
    for step in range(40):
        stretch.sample(Mark(step * 0.01), [object()])
    assert stretch.verdict() == "elsewhere" and stretch.wall == pytest.approx(0.39)
    # a call that left the samples (the test's own code was running) starts again when seen again
    broken = Stretch("g", True, "t", began=0.0)
    for at, frames in [(0.0, ["call"]), (0.08, ["call"]), (0.09, []), (0.17, ["call"])]:
        broken.sample(Mark(at), frames)
    assert broken.verdict() == "elsewhere"


# -- the session's own watchdog ------------------------------------------------------------------------

def test_the_session_watchdog_is_watching(request) -> None:
    """The session's monitor thread is running the watchdog's check, pass after pass, and the check
    sees a greenlet that holds the hub (here the test's own code: counted apart, never failing)."""
    thread = gevent.get_hub().periodic_monitoring_thread
    assert thread is not None and thread.should_run and thread is WATCHDOG._thread
    passes = WATCHDOG.passes
    wait_until(lambda: WATCHDOG.passes >= passes + 3, message="three checks of the session's watchdog")
    seen = len(WATCHDOG.elsewhere)
    gevent.spawn(monkey.get_original("time", "sleep"), 3 * THRESHOLD).join()
    wait_until(lambda: len(WATCHDOG.elsewhere) > seen, message="the watchdog's record of the stretch")
    wall, spawned, _location, test = WATCHDOG.elsewhere[-1]
    assert spawned and test == request.node.nodeid and wall >= THRESHOLD


# -- controls: whole sessions in fresh interpreters ----------------------------------------------------

CONFTEST = """
import os
if os.environ.get("WATCHDOG_CONTROL_PATCHED") == "1":
    from gevent import monkey
    monkey.patch_all()
pytest_plugins = ["tests.plugins.hub_watchdog"]
"""

CODE = '''
import gc
import os
import time
from types import SimpleNamespace

import gevent
from gevent import monkey

import greenmongo

blocking_sleep = monkey.get_original("time", "sleep")
SOURCE = """
def block(seconds):
    blocking_sleep(seconds)  # a blocking call: the hub cannot run meanwhile

def spin(seconds):
    until = time.thread_time() + seconds  # CPU seconds: however busy the machine, it runs this long
    while time.thread_time() < until:
        pass

def spin_wall(seconds):
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass

def short():
    return sum(range(100))

def collect():
    gc.collect()

def pause_collection(phase, info):
    if phase == "start" and info["generation"] == 2:
        blocking_sleep(0.3)  # a full collection that takes 0.3 s
"""


def compiled_as(filename):
    namespace = {"blocking_sleep": blocking_sleep, "gc": gc, "time": time}
    exec(compile(SOURCE, filename, "exec"), namespace)
    return SimpleNamespace(**namespace)


# Never written to disk: only the frames' file name is in greenmongo's package.
GREENMONGO = compiled_as(os.path.join(os.path.dirname(greenmongo.__file__), "_watchdog_control.py"))
TESTS = compiled_as(__file__)
'''

# A second, not 0.3 s: a call is timed from the first sample that saw it to the last, and on a busy
# machine the monitor thread's checks can come 0.16 s apart, which left a 0.3 s spin timed under the
# threshold (seen as a stretch outside greenmongo).
FAILING = CODE + '''

def test_sleep_in_greenmongo():
    gevent.spawn(GREENMONGO.block, 1.0).join()


def test_spin_in_greenmongo():
    gevent.spawn(GREENMONGO.spin, 1.0).join()
'''

PASSING = CODE + '''
import subprocess
import sys


def test_sleep_in_test_code():
    gevent.spawn(TESTS.block, 0.3).join()


def test_short_greenmongo_calls_in_a_loop():
    def loop():
        until = time.perf_counter() + 0.3
        while time.perf_counter() < until:
            GREENMONGO.short()
    gevent.spawn(loop).join()


def test_gc_pause_in_greenmongo():
    gc.callbacks.append(GREENMONGO.pause_collection)
    try:
        gevent.spawn(GREENMONGO.collect).join()
    finally:
        gc.callbacks.remove(GREENMONGO.pause_collection)


def test_block_in_greenmongo_in_the_main_greenlet():
    GREENMONGO.block(0.3)


def test_spin_in_greenmongo_while_other_processes_have_the_cpu():
    """Pinned to one CPU with four busy processes, the greenlet runs about a fifth of its 0.3 s:
    the rest is run-queue time, which the watchdog takes off."""
    cpu = min(os.sched_getaffinity(0))
    hog = ("import os, sys; os.sched_setaffinity(0, {%d}); print('ready', flush=True)\\nwhile True: pass" % cpu)
    hogs = [subprocess.Popen([sys.executable, "-c", hog], stdout=subprocess.PIPE, text=True) for _ in range(4)]
    everywhere = os.sched_getaffinity(0)
    try:
        assert all(h.stdout.readline().strip() == "ready" for h in hogs)
        os.sched_setaffinity(0, {cpu})  # this thread (the hub's); the monitor thread stays free
        gevent.spawn(GREENMONGO.spin_wall, 0.3).join()
    finally:
        os.sched_setaffinity(0, everywhere)
        for h in hogs:
            h.kill()
            h.wait()
            h.stdout.close()
'''


def _session(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, source: str, patched: bool, *args: str):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("WATCHDOG_CONTROL_PATCHED", "1" if patched else "0")
    monkeypatch.delenv("GREENMONGO_HUB_BLOCK_THRESHOLD", raising=False)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_control=source)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", *args, timeout=120)
    return result, "\n".join(result.outlines)


def _summary(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("hub watchdog:"))


@pytest.mark.one_pass  # runs its own unpatched and patched sessions
@pytest.mark.parametrize("patched", [False, True], ids=["unpatched", "patched"])
def test_a_block_inside_greenmongo_fails_the_session(pytester, monkeypatch, patched) -> None:
    result, text = _session(pytester, monkeypatch, FAILING, patched)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, text
    assert re.search(r"\b2 passed\b", text), text  # the tests passed: the watchdog failed the session
    assert "blocks inside greenmongo: 2 in spawned greenlets" in _summary(text), text
    assert "FAILS THE SESSION: 2 block(s) of the hub inside greenmongo in spawned greenlets" in text, text
    for function, test in [("block", "test_sleep_in_greenmongo"), ("spin", "test_spin_in_greenmongo")]:
        report = re.search(r"greenmongo blocked the hub in a spawned greenlet: 1 time\(s\), worst (\d+) ms beyond "
                           r"discounts \((\d+) ms seen, (\d+) ms of them on a CPU[^\n]*\n"
                           rf"  in [^\n]*, during test_control.py::{test}\n[^\n]*\n"
                           rf"  \* [^\n]*_watchdog_control.py:\d+ in {function}\n", text)
        assert report and int(report.group(1)) >= 1000 * THRESHOLD, text
        seen, ran = int(report.group(2)), int(report.group(3))
        # the diagnosis: a spin ran on a CPU for most of what was seen, a blocking sleep hardly at all
        assert (ran >= seen // 2) if function == "spin" else (ran < seen // 4), text
    assert "watchdog check error" not in text, text


@pytest.mark.one_pass
def test_a_block_on_a_pytest_xdist_worker_fails_the_whole_session(pytester, monkeypatch) -> None:
    """Each worker watches its own hub; the controller prints every worker's report and fails the session."""
    result, text = _session(pytester, monkeypatch, FAILING, False, "-n", "2")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, text
    assert re.search(r"\b2 passed\b", text), text
    summaries = re.findall(r"^\[gw[01]\] hub watchdog: .*blocks inside greenmongo: (\d) in spawned", text, re.M)
    assert len(summaries) == 2 and sum(map(int, summaries)) == 2, text
    assert "FAILS THE SESSION" in text, text
    for test in ("test_sleep_in_greenmongo", "test_spin_in_greenmongo"):
        assert f"during test_control.py::{test}" in text, text


@pytest.mark.one_pass
@pytest.mark.parametrize("patched", [False, True], ids=["unpatched", "patched"])
def test_blocks_outside_greenmongo_gc_and_preemption_do_not_fail_the_session(pytester, monkeypatch, patched) -> None:
    result, text = _session(pytester, monkeypatch, PASSING, patched)
    assert result.ret == pytest.ExitCode.OK, text
    assert re.search(r"\b5 passed\b", text), text
    summary = _summary(text)
    # seen, and judged: the main greenlet's block is listed; GC and the run queue are taken off
    assert "blocks inside greenmongo: 0 in spawned greenlets" in summary, text
    main = re.search(r"greenmongo held the hub in the main greenlet \(not failing\): 1 time\(s\), [^\n]*\n"
                     r"  in the main greenlet, during test_control.py::test_block_in_greenmongo_in_the_main_greenlet\n"
                     r"[^\n]*\n  \* [^\n]*_watchdog_control.py:\d+ in block\n", text)
    assert main, text
    discounted = re.search(r"discounted: \d+ ({[^}]*})", summary)
    reasons = ast.literal_eval(discounted.group(1)) if discounted else {}  # the line prints a dict of counts
    assert reasons.get("gc", 0) >= 1 and reasons.get("run queue", 0) >= 1, text
    outside = re.search(r"stretches outside greenmongo: \d+ \((\d+) in spawned greenlets\)", summary)
    assert outside and int(outside.group(1)) >= 2, text  # the test code's sleep, the loop of short calls
    assert "FAILS THE SESSION" not in text and "watchdog check error" not in text, text
