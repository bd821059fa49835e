"""Hub watchdog: for the whole test session, gevent's monitor thread watches the hub; a spawned
greenlet that keeps the hub from running for more than ``THRESHOLD`` (0.1 s) inside greenmongo's
code fails the session.

How it watches. gevent's monitor thread (``PeriodicMonitoringThread``, an OS thread) runs the
watchdog's check every ``SAMPLE_INTERVAL``. gevent's greenlet tracer counts every switch in the
hub's thread; a check that finds the count unchanged since the previous one is inside a *stretch*:
one greenlet running without yielding. (The hub's own stretches are its waits for I/O and timers,
with only gevent's frames on its stack: those are not watched; a callback of greenmongo's that the
loop runs in the hub is, like any greenlet.) During a stretch each check takes a sample of the
running greenlet's stack (``sys._current_frames``; see ``thread_stack`` for how the monitor
thread reads it safely) and attributes it:

* frames of the standard library and of installed packages (gevent, dnspython, ...) are passed
  through; the innermost frame of *other* code decides. If it is greenmongo's, the sample's
  greenmongo frames are the greenmongo call the greenlet is in; if it is a test's (a listener, a
  callback, a CPU loop), the sample is not greenmongo's;
* a greenmongo call (the outermost greenmongo frame of those) is timed from the first sample that
  saw its frame to the last one: the same frame in consecutive samples is one call still running
  (the watchdog keeps that one frame object, so no other call's frame can take its address), and a
  loop of short greenmongo calls never adds up to a block. This is a lower bound of the call's
  length (samples 10 ms apart).

From that time the watchdog takes off what was not greenmongo running: garbage collection
(``gc.callbacks`` time the collections), the hub thread's run-queue time (Linux ``schedstat``: it
was runnable but the machine gave the CPU to something else) and the hypervisor's steal time
(``/proc/stat``). A block is what is left: at least ``THRESHOLD`` fails the session when the
greenlet was spawned (or is the hub); in the main greenlet (where the tests themselves call
greenmongo and run their own loops) it is listed, not failing. A reported block also says how much
of it the hub's thread was on a CPU (``schedstat``): near all of it, a computation or a kernel busy in
a system call; near none, a sleep. Stretches discounted below the threshold, and those
outside greenmongo, are counted in the summary line printed at the end of every session.

gevent's own blocking check is switched off in the session's monitor thread: its report formats
every greenlet while holding the GIL (the time that takes stalls the hub in turn) and could die
with ``RuntimeError: dictionary changed size during iteration``. The watchdog snapshots only the
blocked stack (file, line, function) and formats it at the end, in the main thread.

Liveness. gevent's monitor thread ends itself at its first pass when the hub greenlet has not
started yet (it reads a not-yet-started hub as a dead one): the watchdog starts the hub first.
Before every test it checks that the hub's monitor thread is running its check, and replaces a
thread that ended (counted as a restart). The check counts its passes (``HubWatchdog.passes``); at
the end of the session the watchdog waits for two more, and a watchdog that is not watching then
fails the session, as does an exception in its own check.
"""

from __future__ import annotations

import gc
import importlib.util
import linecache
import os
import sys
import sysconfig
import traceback
import warnings
from collections import deque
from dataclasses import dataclass
from functools import partial
from itertools import accumulate, repeat
from time import perf_counter
from typing import Any, Callable, Optional, Sequence

import gevent
import pytest

from tests.plugins import distributed

THRESHOLD = float(os.environ.get("GREENMONGO_HUB_BLOCK_THRESHOLD", "0.1"))
SAMPLE_INTERVAL = 0.01  # seconds between the watchdog's checks (the monitor thread's period)
STACK_LIMIT = 40  # frames kept in a report's stack, innermost first
STACK_DEPTH = 250  # frames of the hub's stack a sample looks at, innermost first

gevent.config.monitor_thread = True  # every hub started in the session starts its monitor thread
gevent.config.max_blocking_time = THRESHOLD
gevent.config.print_blocking_reports = False

GREENMONGO, LIBRARY, PROJECT = "greenmongo", "library", "project"

Frame = tuple[str, int, str]  # (file, line, function)
Entry = tuple[int, str, int, str]  # a frame of a sampled stack: (address of its frame object, file, line, function)


# -- where code lives ----------------------------------------------------------------------------

def _greenmongo_dir() -> str:
    spec = importlib.util.find_spec("greenmongo")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("hub watchdog: the greenmongo package is not importable")
    return os.path.realpath(list(spec.submodule_search_locations)[0])


def _library_dirs() -> list[str]:
    paths = sysconfig.get_paths()
    dirs = {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
    return sorted({os.path.realpath(d) for d in dirs})


class CodeMap:
    """Which code a file holds: greenmongo's, a library's (stdlib, installed packages), or other."""

    def __init__(self, package_dir: str, library_dirs: Sequence[str]) -> None:
        self._package = package_dir.rstrip(os.sep) + os.sep
        self._libraries = tuple(d.rstrip(os.sep) + os.sep for d in library_dirs)
        self._cache: dict[str, str] = {}

    def kind(self, filename: str) -> str:
        kind = self._cache.get(filename)
        if kind is None:
            kind = self._cache[filename] = self._classify(filename)
        return kind

    def _classify(self, filename: str) -> str:
        if filename.startswith("<"):  # <frozen importlib._bootstrap>, <string>: not greenmongo's files
            return LIBRARY
        path = os.path.realpath(filename)
        if path.startswith(self._package):  # first: greenmongo may itself be installed in site-packages
            return GREENMONGO
        if path.startswith(self._libraries):
            return LIBRARY
        return PROJECT

    def attribute(self, stack: Sequence[Entry]) -> tuple[list[tuple[int, int]], Optional[Frame]]:
        """The greenmongo frames (index in ``stack``, address) that the innermost non-library code
        of ``stack`` (innermost first) is running in, empty when that code is not greenmongo's;
        and that code's location.

        Library frames are passed through; the first other frame decides; if it is greenmongo's,
        the walk goes on through greenmongo and library frames and stops at the first frame of
        other code (the test that called it).
        """
        run: list[tuple[int, int]] = []
        location: Optional[Frame] = None
        for index, (address, filename, line, function) in enumerate(stack):
            kind = self.kind(filename)
            if kind == LIBRARY:
                continue
            if location is None:
                location = (filename, line, function)
            if kind == PROJECT:
                break
            run.append((index, address))
        return run, location


# Walking the hub's stack from the monitor thread, on Python 3.11, without harming the hub's thread:
#
# - The walk must not lose the GIL between two frames: following ``f_back`` through a stack that its
#   thread changes meanwhile crashed the interpreter (a segfault, as Python 3.11 profilers that
#   sample other threads in Python code are known to cause). So the walk is one C call:
#   ``deque.extend`` over ``accumulate(..., getattr)`` runs no bytecode, so the GIL stays put;
#   ``getattr(None, "f_back")`` ends it at the outermost frame.
# - The collector is off from ``sys._current_frames()`` on: that call holds the interpreter's
#   thread-list lock while it creates frame objects, and a collection starting on one of those
#   allocations can free a ``threading.local``, whose clean-up takes the same lock: the first full
#   session deadlocked so, the hub's thread waiting for the GIL forever. (A collection during the
#   walk could also run Python callbacks.)
# - The walk keeps no frame object: it maps each frame to its ``repr`` (address, file, line,
#   function), in the same C call. A frame object kept while the hub's thread returns from that
#   frame keeps the frame's locals alive: a reference-count test failed so, counting the
#   watchdog's references. Only the frame of the greenmongo call being timed is kept (its address
#   must not be reused by another call's frame meanwhile), fetched by ``frame_at``.

def thread_stack(thread_ident: int, depth: int = STACK_DEPTH) -> list[Entry]:
    """Another thread's stack, innermost first, at most ``depth`` frames (see above)."""
    texts: deque = deque()
    collecting = gc.isenabled()
    if collecting:
        gc.disable()
    try:
        texts.extend(map(repr, accumulate(repeat("f_back", depth - 1), getattr,
                                          initial=sys._current_frames().get(thread_ident))))
    except AttributeError:
        pass
    finally:
        if collecting:
            gc.enable()
    return [entry for entry in map(_entry, texts) if entry is not None]


def frame_at(thread_ident: int, index: int, address: int) -> Any:
    """The frame object ``index`` frames out from another thread's innermost one, if it is still the
    one at ``address``; else None."""
    last: deque = deque(maxlen=1)
    collecting = gc.isenabled()
    if collecting:
        gc.disable()
    try:
        last.extend(accumulate(repeat("f_back", index), getattr, initial=sys._current_frames().get(thread_ident)))
    except AttributeError:
        return None
    finally:
        if collecting:
            gc.enable()
    frame = last.pop() if last else None
    return frame if frame is not None and id(frame) == address else None


def _entry(text: str) -> Optional[Entry]:
    """``<frame at 0x7f.., file '/x.py', line 12, code name>`` -> (address, file, line, function)."""
    if not text.startswith("<frame at "):
        return None
    address, _, rest = text[len("<frame at "):-1].partition(", file ")
    rest, _, function = rest.rpartition(", code ")
    filename, _, line = rest.rpartition(", line ")
    return int(address, 16), filename[1:-1], int(line), function


def snapshot(stack: Sequence[Entry], limit: int = STACK_LIMIT) -> tuple[Frame, ...]:
    """(file, line, function) of the innermost ``limit`` frames; no source read here."""
    return tuple((filename, line, function) for _address, filename, line, function in stack[:limit])


# -- clocks of what is not the greenlet running ---------------------------------------------------

class ThreadClocks:
    """Cumulative seconds the hub's thread spent queued for a CPU (Linux ``schedstat``), and the
    hypervisor's steal time per CPU (``/proc/stat``). Zero where Linux does not provide them.

    Opened in the hub's thread (``/proc/thread-self`` names the thread that opens it); read from
    the monitor thread.
    """

    def __init__(self) -> None:
        self._schedstat = self._open("/proc/thread-self/schedstat")
        self._stat = self._open("/proc/stat")
        self._tick = 1.0 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01

    @staticmethod
    def _open(path: str) -> Optional[int]:
        try:
            return os.open(path, os.O_RDONLY)
        except OSError:
            return None

    def sched(self) -> tuple[float, float]:
        """(seconds on a CPU, seconds queued for one): a thread that neither ran nor queued slept."""
        if self._schedstat is None:
            return 0.0, 0.0
        fields = os.pread(self._schedstat, 128, 0).split()
        return int(fields[0]) / 1e9, int(fields[1]) / 1e9

    def steal(self) -> tuple[float, ...]:
        if self._stat is None:
            return ()
        steal = []
        for line in os.pread(self._stat, 65536, 0).split(b"\n"):
            if line.startswith(b"cpu") and line[3:4].isdigit():
                fields = line.split()
                steal.append(int(fields[8]) * self._tick if len(fields) > 8 else 0.0)
        return tuple(steal)

    def close(self) -> None:
        for fd in (self._schedstat, self._stat):
            if fd is not None:
                os.close(fd)
        self._schedstat = self._stat = None


@dataclass(frozen=True)
class Mark:
    """One sample's readings of the cumulative clocks."""

    at: float  # perf_counter
    queued: float = 0.0  # run-queue seconds of the hub's thread
    steal: tuple[float, ...] = ()  # steal seconds per CPU
    gc: float = 0.0  # seconds spent collecting garbage
    ran: float = 0.0  # seconds the hub's thread was on a CPU (user and kernel): not a discount, a diagnosis


def _steal_between(first: tuple[float, ...], last: tuple[float, ...]) -> float:
    """The most any one CPU lost to the hypervisor (the hub's thread ran on one of them)."""
    return max((b - a for a, b in zip(first, last)), default=0.0)


# -- what the watchdog found ---------------------------------------------------------------------

@dataclass
class Block:
    """A greenmongo call that kept the hub from running; ``net`` is what counts against THRESHOLD."""

    greenlet: str
    spawned: bool
    test: str
    wall: float  # first to last sample that saw the call, no switch between
    queued: float
    steal: float
    gc: float
    location: Optional[Frame] = None  # the innermost non-library code then
    stack: tuple[Frame, ...] = ()
    ran: float = 0.0  # on a CPU meanwhile: near ``wall`` a computation (or a kernel busy in a call), near 0 a sleep

    @property
    def net(self) -> float:
        return self.wall - self.queued - self.steal - self.gc

    def figures(self) -> str:
        return (f"{self.net * 1000:.0f} ms beyond discounts ({self.wall * 1000:.0f} ms seen, "
                f"{self.ran * 1000:.0f} ms of them on a CPU; less "
                f"{self.queued * 1000:.0f} ms queued for a CPU, {self.gc * 1000:.0f} ms collecting garbage, "
                f"{self.steal * 1000:.0f} ms stolen)")

    def reason(self) -> str:
        """What most of the discounted time was (for blocks the discounts brought under THRESHOLD)."""
        return max((self.gc, "gc"), (self.queued, "run queue"), (self.steal, "steal"))[1]

    def key(self) -> tuple:
        """Blocks at the same place group together: the greenmongo frames of the stack."""
        return tuple((name, function) for name, _line, function in self.stack if _is_greenmongo_path(name))


@dataclass
class Stretch:
    """One greenlet running without a switch, as the watchdog's samples saw it.

    ``sample`` takes the addresses of the greenmongo frames the greenlet was in, innermost first.
    The outermost is the greenmongo call being timed (the *anchor*): while later samples still show
    it, it is one call still running (the watchdog keeps that frame object, so no other frame can
    take its address), timed from the first sample that saw it.
    """

    greenlet: str
    spawned: bool
    test: str
    began: float  # the last check before the stretch was seen: it has run at least since then
    threshold: float = THRESHOLD
    last_at: float = 0.0
    anchor: Optional[int] = None  # address of the greenmongo call being timed
    anchor_mark: Optional[Mark] = None  # the first sample that saw it
    longest: Optional[Block] = None  # the longest greenmongo call seen (before discounts)
    worst: Optional[Block] = None  # the greenmongo call with the most time beyond discounts
    location: Optional[Frame] = None  # innermost non-library code at the last sample

    def sample(self, mark: Mark, run: Sequence[int], location: Optional[Frame] = None,
               stack: Callable[[], tuple[Frame, ...]] = tuple) -> None:
        self.last_at = mark.at
        self.location = location
        if self.anchor is None or self.anchor not in run:
            self.anchor, self.anchor_mark = (run[-1], mark) if run else (None, None)
        first = self.anchor_mark
        if first is None:
            return
        wall = mark.at - first.at
        if wall < self.threshold:
            return
        block = Block(self.greenlet, self.spawned, self.test, wall, mark.queued - first.queued,
                      _steal_between(first.steal, mark.steal), mark.gc - first.gc, location,
                      ran=mark.ran - first.ran)
        if self.longest is None or block.wall > self.longest.wall:
            self.longest = block
        if block.net >= self.threshold and (self.worst is None or block.net > self.worst.net):
            block.stack = stack()
            self.worst = block

    def forget_anchor(self) -> None:
        self.anchor = self.anchor_mark = None

    @property
    def wall(self) -> float:
        return self.last_at - self.began

    def verdict(self) -> Optional[str]:
        """"greenmongo" (a block), "discounted" (a greenmongo call that GC, the run queue or steal
        explain), "elsewhere" (a stretch of THRESHOLD outside greenmongo), or None."""
        if self.worst is not None:
            return "greenmongo"
        if self.longest is not None:
            return "discounted"
        if self.wall >= self.threshold:
            return "elsewhere"
        return None


def _is_greenmongo_path(filename: str) -> bool:
    return WATCHDOG.code.kind(filename) == GREENMONGO


def describe(glet: Any, hub: Any = None) -> str:
    """A short name for a greenlet, without calling its ``repr`` (gevent's formats its arguments)."""
    if glet is hub:
        return "the hub (a callback of its loop)"
    if getattr(glet, "parent", None) is None:
        return "the main greenlet"
    run = getattr(glet, "_run", None) or getattr(glet, "run", None)
    function = getattr(run, "__qualname__", None) or type(run).__name__
    module = getattr(run, "__module__", None)
    return f"{type(glet).__name__} running {module + '.' if module else ''}{function}"


def _gevent_check_off(hub: Any) -> None:
    """Stands in for gevent's ``monitor_blocking`` in the session's monitor thread (see the module
    docstring)."""


# -- the watchdog ----------------------------------------------------------------------------------

class HubWatchdog:
    def __init__(self, threshold: float = THRESHOLD) -> None:
        self.threshold = threshold
        self.code = CodeMap(_greenmongo_dir(), _library_dirs())
        self.blocks: list[Block] = []  # appended by the monitor thread
        self.discounted: list[Block] = []
        self.elsewhere: list[tuple[float, bool, Optional[Frame], str]] = []  # (wall, spawned, location, test)
        self.errors: list[str] = []
        self.passes = 0
        self.restarts = 0
        self.longest_gap = 0.0
        self.current_test = "(no test: collection or session set-up)"
        self.watching_at_end: Optional[bool] = None
        self._thread: Any = None
        self._tracer: Any = None
        self._clocks: Optional[ThreadClocks] = None
        self._count: Any = None
        self._changed_at = 0.0
        self._last_pass = 0.0
        self._stretch: Optional[Stretch] = None
        self._anchor_frame: Any = None  # the frame of the greenmongo call being timed (see thread_stack)
        self._gc = (0.0, None)  # (seconds collected so far, start of the collection under way or None)
        self._gc_epoch = 0

    # - in the hub's thread

    def start(self) -> None:
        if self._on_gc not in gc.callbacks:
            gc.callbacks.append(self._on_gc)
        if self._clocks is None:
            self._clocks = ThreadClocks()
        self.ensure()

    def stop(self) -> None:
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.add_monitoring_function(self._check, None)  # None removes it
        if self._clocks is not None:
            self._clocks.close()
            self._clocks = None

    def ensure(self) -> None:
        """The hub runs, its monitor thread runs, and the thread runs this watchdog's check."""
        hub = gevent.get_hub()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # gevent's "Install psutil" (memory monitoring is not wanted)
            if not hub:  # not started: a monitor thread would take it for dead and end itself
                gevent.sleep(0)  # the hub's first run starts its monitor thread (monitor_thread is on)
            thread = hub.periodic_monitoring_thread
            if thread is None or not thread.should_run:
                hub.periodic_monitoring_thread = None
                thread = hub.start_periodic_monitoring_thread()
        if thread is not self._thread:
            if self._thread is not None:  # it ended, or the hub was replaced: unwatched for a while
                self.restarts += 1
            thread._monitoring_functions[0].function = _gevent_check_off  # gevent: the first is its own check
            thread.add_monitoring_function(self._check, SAMPLE_INTERVAL)
            self._stretch, self._count, self._anchor_frame = None, None, None
            self._tracer = thread._greenlet_tracer
            self._thread = thread

    def wait_for_passes(self, count: int, timeout: float = 5.0) -> bool:
        """Whether the check makes ``count`` more passes within ``timeout`` seconds (yielding)."""
        from tests.waits import poll

        target = self.passes + count
        return bool(poll(lambda: self.passes >= target, timeout))

    def _on_gc(self, phase: str, info: dict) -> None:
        now = perf_counter()
        collected, started = self._gc
        if phase == "start":
            self._gc = (collected, now)
            if info.get("generation") == 2:
                # gc.collect() and full collections: drop the frame the watchdog keeps (its call may
                # have returned), so that what its locals hold can be collected now.
                self._gc_epoch += 1
                self._anchor_frame = None
                stretch = self._stretch
                if stretch is not None:
                    stretch.forget_anchor()
        else:
            self._gc = (collected + (now - started if started is not None else 0.0), None)

    # - in the monitor thread

    def _check(self, hub: Any) -> None:
        try:
            self._pass(hub)
        except Exception:  # a watchdog that fails is reported (and fails the session), never silent
            self._stretch = None
            if len(self.errors) < 20:
                self.errors.append(traceback.format_exc())

    def _gc_clock(self, at: float) -> float:
        collected, started = self._gc
        return collected + (at - started if started is not None else 0.0)

    def _pass(self, hub: Any) -> None:
        now = perf_counter()
        self.passes += 1
        if self._last_pass:
            self.longest_gap = max(self.longest_gap, now - self._last_pass)
        self._last_pass = now
        tracer = self._tracer
        count, glet = tracer.greenlet_switch_counter, tracer.active_greenlet
        if count != self._count or glet is None:
            self._count, self._changed_at = count, now
            self._end_stretch()
            return
        epoch = self._gc_epoch
        stack = thread_stack(hub.thread_ident)  # empty: a greenlet running C code only
        at = perf_counter()
        run, location = self.code.attribute(stack)
        if glet is hub and not run:  # the hub waiting for I/O and timers, or running gevent's own code
            self._changed_at = now
            self._end_stretch()
            return
        stretch = self._stretch
        if stretch is None:
            stretch = self._stretch = Stretch(describe(glet, hub), glet.parent is not None, self.current_test,
                                              self._changed_at, self.threshold)
        addresses = [address for _index, address in run]
        if run and stretch.anchor not in addresses:  # a greenmongo call not seen before: keep its frame
            index, address = run[-1]
            frame = frame_at(hub.thread_ident, index, address)
            if frame is None:
                addresses = []  # the stack changed meanwhile: this sample says nothing
            # Only the attribute holds it: a gc.collect() in the hub's thread drops it at once (``_on_gc``).
            # A local kept until this pass ends, across the GIL releases below, held the frame's locals past
            # that collect: a reference-count test saw its objects one reference lighter afterwards.
            self._anchor_frame, frame = frame, None
        mark = Mark(at)
        if addresses and self._clocks is not None:
            ran, queued = self._clocks.sched()  # these release the GIL
            mark = Mark(at, queued, self._clocks.steal(), self._gc_clock(at), ran)
        if self._gc_epoch != epoch or tracer.greenlet_switch_counter != count:
            self._anchor_frame = None  # a full collection or a switch meanwhile: the next pass decides
            stretch.forget_anchor()
            return
        stretch.test = self.current_test  # a stretch in the main greenlet can outlast a test
        stretch.sample(mark, addresses, location, partial(snapshot, stack))
        if stretch.anchor is None:
            self._anchor_frame = None

    def _end_stretch(self) -> None:
        stretch, self._stretch = self._stretch, None
        self._anchor_frame = None
        if stretch is None:
            return
        verdict = stretch.verdict()
        if verdict == "greenmongo":
            self.blocks.append(stretch.worst)
        elif verdict == "discounted" and len(self.discounted) < 10000:
            self.discounted.append(stretch.longest)
        elif verdict == "elsewhere" and len(self.elsewhere) < 10000:
            self.elsewhere.append((stretch.wall, stretch.spawned, stretch.location, stretch.test))

    # - pytest hooks (registered as a plugin object)

    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        self.current_test = item.nodeid
        self.ensure()

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.current_test = "(no test: session tear-down)"
        self.ensure()
        self.watching_at_end = self.wait_for_passes(2)  # and the last stretch has ended (this yielded)
        if self.failing() and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def failing(self) -> list[str]:
        """Why this session fails (empty: it does not)."""
        why = []
        spawned = [block for block in list(self.blocks) if block.spawned]
        if spawned:
            why.append(f"{len(spawned)} block(s) of the hub inside greenmongo in spawned greenlets")
        if self.errors:
            why.append(f"the watchdog's check raised {len(self.errors)} time(s)")
        if not self.passes or self.watching_at_end is False:
            why.append("the watchdog was not watching at the end of the session")
        return why

    def summary_line(self) -> str:
        blocks = list(self.blocks)
        spawned = sum(1 for block in blocks if block.spawned)
        discounted = list(self.discounted)
        reasons: dict[str, int] = {}
        for block in discounted:
            reasons[block.reason()] = reasons.get(block.reason(), 0) + 1
        elsewhere = list(self.elsewhere)
        return (f"hub watchdog: {self.passes} checks (longest gap {self.longest_gap:.3f}s, {self.restarts} monitor "
                f"restarts), threshold {self.threshold:.3f}s; blocks inside greenmongo: {spawned} in spawned "
                f"greenlets, {len(blocks) - spawned} in the main greenlet (listed, not failing); discounted: "
                f"{len(discounted)} {dict(sorted(reasons.items()))}; stretches outside greenmongo: {len(elsewhere)} "
                f"({sum(1 for entry in elsewhere if entry[1])} in spawned greenlets)")

    def report_lines(self) -> list[str]:
        """The summary line, then the blocks, the longest discounted calls and any check errors."""
        lines = [self.summary_line()]
        lines.extend(f"FAILS THE SESSION: {reason}" for reason in self.failing())
        for title, blocks, limit in (("greenmongo blocked the hub in a spawned greenlet",
                                      [block for block in list(self.blocks) if block.spawned], None),
                                     ("greenmongo held the hub in the main greenlet (not failing)",
                                      [block for block in list(self.blocks) if not block.spawned], 10)):
            lines.extend(format_blocks(title, blocks, limit))
        discounted = list(self.discounted)
        if discounted:
            lines.append("greenmongo calls the discounts explain (the longest):")
            lines.extend(format_discounted(discounted))
        lines.extend(f"watchdog check error:\n{error}" for error in list(self.errors)[:3])
        return lines


class WatchdogPlugin:
    """The watchdog's pytest side. Under pytest-xdist each worker watches its own hub and hands its
    verdict and report over; the controller, which runs no test, prints them and fails the session for
    any worker's block."""

    def __init__(self, watchdog: HubWatchdog, role: str) -> None:
        self.watchdog = watchdog
        self.role = role
        self.workers: list[tuple[str, list[str], list[str]]] = []  # (worker, failing, report lines)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        self.watchdog.pytest_runtest_setup(item)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        verdict = distributed.handed_over(node, "hub_watchdog")
        if verdict is None:
            verdict = {"failing": ["the worker ended without the watchdog's verdict"], "lines": []}
        self.workers.append((distributed.worker_name(node), verdict["failing"], verdict["lines"]))

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.role == distributed.CONTROLLER:
            if any(failing for _, failing, _ in self.workers) and session.exitstatus == 0:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
            return
        self.watchdog.pytest_sessionfinish(session, exitstatus)
        distributed.hand_over(session.config, "hub_watchdog",
                              {"failing": self.watchdog.failing(), "lines": self.watchdog.report_lines()})

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.role == distributed.CONTROLLER:
            reports = sorted(self.workers)
        else:
            reports = [("", self.watchdog.failing(), self.watchdog.report_lines())]
        terminalreporter.section("greenmongo hub watchdog", red=any(failing for _, failing, _ in reports))
        for worker, _failing, lines in reports:
            for index, line in enumerate(lines):
                prefix = f"[{worker}] " if worker and index == 0 else ""
                terminalreporter.write_line(prefix + line, red=line.startswith("FAILS THE SESSION"))


def format_blocks(title: str, blocks: Sequence[Block], limit: Optional[int] = None) -> list[str]:
    """Blocks grouped by their greenmongo frames, the worst of each group with its stack (the
    ``limit`` worst groups)."""
    groups: dict[tuple, list[Block]] = {}
    for block in blocks:
        groups.setdefault(block.key(), []).append(block)
    lines = []
    ranked = sorted(groups.values(), key=lambda g: -max(b.net for b in g))
    if limit is not None and len(ranked) > limit:
        lines.append(f"{title}: {len(ranked)} places, the {limit} worst shown")
        ranked = ranked[:limit]
    for group in ranked:
        worst = max(group, key=lambda b: b.net)
        tests = sorted({block.test for block in group})
        lines.append(f"{title}: {len(group)} time(s), worst {worst.figures()}")
        lines.append(f"  in {worst.greenlet}, during {', '.join(tests[:5])}{' ...' if len(tests) > 5 else ''}")
        lines.append("  stack at the block (innermost first; * greenmongo):")
        shown = _up_to_the_caller(worst.stack)
        for filename, lineno, function in shown:
            source = linecache.getline(filename, lineno).strip()
            mark = "*" if _is_greenmongo_path(filename) else " "
            lines.append(f"  {mark} {filename}:{lineno} in {function}" + (f"\n        {source}" if source else ""))
        if len(worst.stack) > len(shown):
            lines.append(f"    ({len(worst.stack) - len(shown)} outer frames not shown)")
    return lines


def _up_to_the_caller(stack: Sequence[Frame]) -> Sequence[Frame]:
    """The frames up to the first of other code that called greenmongo (pytest's frames beyond it say
    nothing about the block)."""
    inside = False
    for index, (filename, _line, _function) in enumerate(stack):
        kind = WATCHDOG.code.kind(filename)
        if kind == GREENMONGO:
            inside = True
        elif kind == PROJECT and inside:
            return stack[:index + 1]
    return stack


def format_discounted(blocks: Sequence[Block], limit: int = 5) -> list[str]:
    """The longest greenmongo calls that the discounts brought under the threshold, one line each."""
    lines = []
    for block in sorted(blocks, key=lambda b: -b.wall)[:limit]:
        where = f"{block.location[0]}:{block.location[1]} in {block.location[2]}" if block.location else "?"
        lines.append(f"  discounted ({block.reason()}): {block.figures()}; {where}; {block.greenlet}; {block.test}")
    return lines


WATCHDOG = HubWatchdog()


def pytest_configure(config: pytest.Config) -> None:
    role = distributed.role(config)
    config.pluginmanager.register(WatchdogPlugin(WATCHDOG, role), "greenmongo-hub-watchdog")
    if role != distributed.CONTROLLER:  # the controller runs no test: nothing to watch
        WATCHDOG.start()


def pytest_unconfigure(config: pytest.Config) -> None:
    WATCHDOG.stop()
