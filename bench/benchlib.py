"""Helpers shared by the benchmark scripts: spec data sets, the spec's timing rules, server processes.

Data sets come from the Driver Performance Benchmarking spec's directory
(``../shared/specifications/benchmarking/data``, or ``$GREENMONGO_SPEC_DIR/benchmarking/data``): the
unpacked ``extended_bson`` and ``single_and_multi_document`` JSON files, and the members of
``single_and_multi_document.tgz`` (``gridfs_large.bin``) and ``parallel.tgz`` (``ldjson_multi``,
``gridfs_multi``), which are streamed out of the tarballs into a cache directory
(``$GREENMONGO_BENCH_DATA``, default ``/tmp/greenmongo-bench-data-<uid>``), cut to the scale asked
for. When a tarball is missing, data of the spec's shape is generated deterministically instead
and every report says so (``Dataset.note``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

ROOT = Path(__file__).resolve().parent.parent
SPEC_DATA = Path(os.environ.get("GREENMONGO_SPEC_DIR") or ROOT.parent / "shared" / "specifications") \
    / "benchmarking" / "data"
SINGLE_DIR = SPEC_DATA / "single_and_multi_document"
BSON_DIR = SPEC_DATA / "extended_bson"
CACHE_DIR = Path(os.environ.get("GREENMONGO_BENCH_DATA") or Path(tempfile.gettempdir()) /
                 f"greenmongo-bench-data-{os.getuid() if hasattr(os, 'getuid') else 0}")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
PERCENTILES = (10, 25, 50, 75, 90, 95, 98, 99)

#: The spec's full scale of the parallel and GridFS data sets.
LDJSON_FILES, LDJSON_LINES = 100, 5000
GRIDFS_MULTI_FILES, GRIDFS_MULTI_BYTES = 50, 5 * 1024 * 1024
GRIDFS_LARGE_BYTES = 52_428_800


def child_env(*drop: str) -> dict[str, str]:
    """This process's environment for a benchmark's child process, less ``drop`` and the test suite's
    ``GREENMONGO_TEST_PATCHED``: each peer decides its own patching (the smoke tests run the scripts from a
    pass that sets it)."""
    return {key: value for key, value in os.environ.items() if key not in ("GREENMONGO_TEST_PATCHED", *drop)}


def nearest_rank(sorted_values: list[float], percentile: float) -> float:
    """The spec's percentile: index ``int(N * p / 100) - 1`` of the ascending values."""
    index = max(0, int(len(sorted_values) * percentile / 100) - 1)
    return sorted_values[index]


def percentiles(values: list[float]) -> dict[str, float]:
    """The spec's recorded percentiles (10th .. 99th) of iteration times."""
    ordered = sorted(values)
    return {f"p{p}": nearest_rank(ordered, p) for p in PERCENTILES}


def process_cpu_seconds(pid: Optional[int]) -> float:
    """user + system CPU of another process (the server), from /proc; 0 when unavailable."""
    if not pid:
        return 0.0
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    except (OSError, IndexError, ValueError):
        return 0.0


def rss_bytes() -> int:
    """This process's resident set size, from /proc (0 when unavailable)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


# -- the spec's timing rules --------------------------------------------------------------------

@dataclass
class IterationPolicy:
    """How many timed iterations a micro-benchmark gets.

    The spec: loop for at least ``min_time`` (60 s) of cumulative "do task" time, stop after
    ``max_iterations`` (100) or ``max_time`` (300 s), whichever comes first. ``min_iterations``
    is for the scaled-down quick mode, whose ``min_time`` is small.
    """

    min_time: float = 60.0
    max_time: float = 300.0
    max_iterations: int = 100
    min_iterations: int = 1

    def more(self, iterations: int, elapsed: float) -> bool:
        if iterations >= self.max_iterations or elapsed >= self.max_time:
            return False
        return elapsed < self.min_time or iterations < self.min_iterations


SPEC_POLICY = IterationPolicy()
QUICK_POLICY = IterationPolicy(min_time=1.0, max_time=8.0, max_iterations=10, min_iterations=3)
SMOKE_POLICY = IterationPolicy(min_time=0.0, max_time=1.0, max_iterations=1, min_iterations=1)


# -- data sets ------------------------------------------------------------------------------------

@dataclass
class Dataset:
    """Files of one data set at one scale; ``note`` says where they came from."""

    paths: list[Path]
    note: str
    size_bytes: int = field(default=0)

    def __post_init__(self) -> None:
        self.size_bytes = sum(path.stat().st_size for path in self.paths)


def _from_tarball(tarball: Path, members: dict[str, Path], cut: Callable[[bytes], bytes]) -> bool:
    """Stream ``members`` out of ``tarball`` (each cut by ``cut``); False when the tarball is missing."""
    if not tarball.exists():
        return False
    wanted = dict(members)
    with tarfile.open(tarball, "r|gz") as archive:
        for member in archive:
            target = wanted.pop(member.name, None)
            if target is None:
                continue
            source = archive.extractfile(member)
            assert source is not None
            target.write_bytes(cut(source.read()))
            if not wanted:
                break
    if wanted:
        raise RuntimeError(f"{tarball} lacks {', '.join(sorted(wanted))}")
    return True


def _prepared(directory: Path, build: Callable[[Path], str]) -> str:
    """Build ``directory`` once (atomically, via a temporary sibling); its note is kept beside it."""
    note_file = directory / ".note"
    if note_file.exists():
        return note_file.read_text()
    directory.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=directory.name + ".", dir=directory.parent))
    note = build(scratch)
    (scratch / ".note").write_text(note)
    try:
        scratch.rename(directory)
    except OSError:  # another run made it first
        subprocess.run(["rm", "-rf", str(scratch)], check=False)
    return note_file.read_text()


def _tweet_line() -> bytes:
    return json.dumps(json.loads((SINGLE_DIR / "tweet.json").read_text()), separators=(",", ":")).encode()


def ldjson_multi(files: int = LDJSON_FILES, lines: int = LDJSON_LINES) -> Dataset:
    """``files`` LDJSON files of ``lines`` documents (the spec: 100 x 5,000, each document ~1 KB)."""
    directory = CACHE_DIR / f"ldjson_multi-{files}x{lines}"
    names = [f"ldjson{index:03d}.txt" for index in range(files)]

    def build(scratch: Path) -> str:
        members = {f"parallel/ldjson_multi/{name}": scratch / name for name in names}

        def cut(data: bytes) -> bytes:
            return b"".join(data.splitlines(keepends=True)[:lines])

        if files <= LDJSON_FILES and _from_tarball(SPEC_DATA / "parallel.tgz", members, cut):
            scale = "" if (files, lines) == (LDJSON_FILES, LDJSON_LINES) else f", first {files} files x {lines} lines"
            return f"spec data set (parallel.tgz{scale})"
        line = _tweet_line() + b"\n"  # the spec's files repeat one tweet-shaped document per line
        for name in names:
            (scratch / name).write_bytes(line * lines)
        return f"GENERATED: parallel.tgz missing; {files} files x {lines} copies of tweet.json per line"

    note = _prepared(directory, build)
    return Dataset([directory / name for name in names], note)


def gridfs_multi(files: int = GRIDFS_MULTI_FILES, size: int = GRIDFS_MULTI_BYTES) -> Dataset:
    """``files`` binary files of ``size`` bytes (the spec: 50 x 5 MiB)."""
    directory = CACHE_DIR / f"gridfs_multi-{files}x{size}"
    names = [f"file{index:02d}.txt" for index in range(files)]

    def build(scratch: Path) -> str:
        members = {f"parallel/gridfs_multi/{name}": scratch / name for name in names}
        if files <= GRIDFS_MULTI_FILES and size <= GRIDFS_MULTI_BYTES and \
                _from_tarball(SPEC_DATA / "parallel.tgz", members, lambda data: data[:size]):
            scale = "" if (files, size) == (GRIDFS_MULTI_FILES, GRIDFS_MULTI_BYTES) else \
                f", first {files} files x {size} bytes"
            return f"spec data set (parallel.tgz{scale})"
        for index, name in enumerate(names):
            (scratch / name).write_bytes(_pattern(size, index))
        return f"GENERATED: parallel.tgz missing; {files} files x {size} deterministic bytes"

    note = _prepared(directory, build)
    return Dataset([directory / name for name in names], note)


def gridfs_large(size: int = GRIDFS_LARGE_BYTES) -> Dataset:
    """One binary file of ``size`` bytes (the spec: ``gridfs_large.bin``, 52,428,800 bytes)."""
    directory = CACHE_DIR / f"gridfs_large-{size}"

    def build(scratch: Path) -> str:
        members = {"single_and_multi_document/gridfs_large.bin": scratch / "gridfs_large.bin"}
        if size <= GRIDFS_LARGE_BYTES and \
                _from_tarball(SPEC_DATA / "single_and_multi_document.tgz", members, lambda data: data[:size]):
            scale = "" if size == GRIDFS_LARGE_BYTES else f", first {size} bytes"
            return f"spec data set (single_and_multi_document.tgz{scale})"
        (scratch / "gridfs_large.bin").write_bytes(_pattern(size, 99))
        return f"GENERATED: single_and_multi_document.tgz missing; {size} deterministic bytes"

    note = _prepared(directory, build)
    return Dataset([directory / "gridfs_large.bin"], note)


def _pattern(size: int, seed: int) -> bytes:
    import random

    return random.Random(seed).randbytes(size)


# -- servers in their own processes ----------------------------------------------------------------

class CannedServerProcess:
    """bench/canned_server.py in its own process."""

    def __init__(self, many: int, ids: int, sessions: bool = True, find_delay_ms: float = 0.0) -> None:
        self.many, self.ids, self.sessions, self.find_delay_ms = many, ids, sessions, find_delay_ms
        self.process: Optional[subprocess.Popen] = None

    def __enter__(self) -> "CannedServerProcess":
        port_file = tempfile.mktemp(prefix="canned-server-port-")
        self.process = subprocess.Popen(
            [sys.executable, str(ROOT / "bench" / "canned_server.py"), port_file,
             "--many", str(self.many), "--ids", str(self.ids), "--find-delay-ms", str(self.find_delay_ms),
             *([] if self.sessions else ["--no-sessions"])],
            cwd=ROOT)
        deadline = time.monotonic() + 60
        try:
            while not os.path.exists(port_file):
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError("the canned-reply server did not start")
                time.sleep(0.05)
            self.port = int(Path(port_file).read_text())
        except BaseException:
            self.__exit__()
            raise
        finally:
            if os.path.exists(port_file):
                os.unlink(port_file)
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def uri(self) -> str:
        return f"mongodb://127.0.0.1:{self.port}/"

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


class SecantusProcess:
    """SecantusDB (tests/servers/secantus.py) in its own process."""

    def __enter__(self) -> "SecantusProcess":
        sys.path.insert(0, str(ROOT))
        from tests.servers.secantus import SecantusServer

        self.server = SecantusServer().start()
        return self

    @property
    def pid(self) -> int:
        return self.server.process.pid

    @property
    def uri(self) -> str:
        return self.server.uri

    def __exit__(self, *exc: object) -> None:
        self.server.stop()
