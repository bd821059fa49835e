#!/usr/bin/env python3
"""MongoEngine 0.29.3's own test suite against SecantusDB, on PyMongo 4.20 and on greenmongo, side by side.

Each side is a virtualenv under ``compat/.venvs/`` built from PyPI (plus, on the greenmongo side, this
repository): the ``pymongo`` side has PyMongo 4.20.0, the ``greenmongo`` side has greenmongo and no
PyMongo at all, ``greenmongo.install_as_pymongo()`` (``plugin/mongoengine_compat.py``) answering every
``import pymongo``/``bson``/``gridfs``. The server is SecantusDB, run from a third venv (it depends on
PyMongo itself) on a fresh in-memory store per side. Results (JUnit XML, pytest logs, the summary)
go to ``compat/results/``. See ``compat/README.md``.

Usage: python3 compat/run_mongoengine.py [--only pymongo|greenmongo] [--subset smoke]
       [--tests-from MONGOENGINE_CHECKOUT] [-k EXPR] [-- extra pytest args]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Optional

COMPAT = Path(__file__).resolve().parent
REPO = COMPAT.parent
VENVS = COMPAT / ".venvs"
RESULTS = COMPAT / "results"
PLUGIN_DIR = COMPAT / "plugin"
SDIST_SUPPORT = COMPAT / "sdist_support" / "tests"

MONGOENGINE = "mongoengine==0.29.3"
PYMONGO = "pymongo==4.20.0"
SECANTUSDB = "secantusdb==0.7.0b3"
# MongoEngine's own test extra (setup.py) less coverage tooling, plus a per-test time limit.
TEST_DEPS = ["pytest>=8,<10", "pytest-timeout>=2.3", "blinker>=1.6", "Pillow>=7.0.0"]

SIDES = ("pymongo", "greenmongo")
SIDE_TITLES = {"pymongo": "PyMongo 4.20.0", "greenmongo": "greenmongo"}

# The CI subset: all MongoEngine test modules that its PyPI sdist ships and that talk to a server
# (connections and their options, switch_db/context managers and query_counter's profiler use,
# references and dereferencing, signals around save/delete, pymongo interop), minus the trivial ones.
SMOKE = [
    "tests/test_connection.py",
    "tests/test_context_managers.py",
    "tests/test_dereference.py",
    "tests/test_signals.py",
    "tests/test_pymongo_support.py",
    "tests/test_replicaset_connection.py",
]


def log(message: str) -> None:
    print(f"[compat] {message}", flush=True)


def run(cmd: list, **kwargs) -> None:
    subprocess.run([str(c) for c in cmd], check=True, **kwargs)


# --- virtualenvs ---------------------------------------------------------------------------------


def venv_python(name: str) -> Path:
    return VENVS / name / "bin" / "python"


def ensure_venv(name: str, installs: list[list[str]], python: str, recreate: bool, stamp_extra: str = "") -> Path:
    """Create ``.venvs/<name>`` and run the ``pip install`` argument lists, unless a stamp says it is done."""
    home = VENVS / name
    stamp = home / ".compat-stamp"
    wanted = json.dumps({"python": python, "installs": installs, "extra": stamp_extra}, sort_keys=True)
    if recreate and home.exists():
        shutil.rmtree(home)
    if stamp.exists() and stamp.read_text() == wanted and venv_python(name).exists():
        return venv_python(name)
    if home.exists():
        shutil.rmtree(home)
    log(f"creating venv {home}")
    run([python, "-m", "venv", home])
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    for args in installs:
        log(f"  pip install {' '.join(args)}")
        run([venv_python(name), "-m", "pip", "install", "-q", *args], env=env)
    stamp.write_text(wanted)
    return venv_python(name)


def pyproject_digest() -> str:
    """Reinstall the editable greenmongo when its dependencies (pyproject.toml) change."""
    return hashlib.sha256((REPO / "pyproject.toml").read_bytes()).hexdigest()


def ensure_venvs(sides: list[str], python: str, recreate: bool) -> dict[str, Path]:
    pythons = {"server": ensure_venv("server", [[SECANTUSDB]], python, recreate)}
    if "pymongo" in sides:
        pythons["pymongo"] = ensure_venv("pymongo", [[PYMONGO, MONGOENGINE, *TEST_DEPS]], python, recreate)
    if "greenmongo" in sides:
        pythons["greenmongo"] = ensure_venv(
            "greenmongo",
            # mongoengine's only install requirement is pymongo, which greenmongo stands in for.
            [["-e", str(REPO)], ["--no-deps", MONGOENGINE], TEST_DEPS],
            python, recreate, stamp_extra=pyproject_digest())
        probe = subprocess.run([str(pythons["greenmongo"]), "-c",
                                "import importlib.util as u; print([n for n in ('pymongo', 'bson', 'gridfs') "
                                "if u.find_spec(n)])"], capture_output=True, text=True, check=True)
        if probe.stdout.strip() != "[]":
            raise SystemExit(f"the greenmongo venv has real driver packages {probe.stdout.strip()}: "
                             f"rebuild it with --recreate")
    return pythons


# --- mongoengine's tests -------------------------------------------------------------------------


def _safe_members(archive: tarfile.TarFile, prefix: str):
    for member in archive.getmembers():
        name = member.name
        if name.startswith("/") or ".." in Path(name).parts or not (member.isfile() or member.isdir()):
            continue
        if name.startswith(prefix):
            yield member


def sdist_tree(python: Path) -> Path:
    """MongoEngine 0.29.3's sdist from PyPI, unpacked: its top-level tests and docs (no git needed)."""
    downloads = VENVS / "downloads"
    archive = downloads / "mongoengine-0.29.3.tar.gz"
    if not archive.exists():
        downloads.mkdir(parents=True, exist_ok=True)
        log(f"downloading the {MONGOENGINE} sdist")
        run([python, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:", MONGOENGINE,
             "-d", downloads], env=dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1"))
    unpacked = VENVS / "src" / "mongoengine-0.29.3-sdist"
    if not unpacked.exists():
        staging = Path(tempfile.mkdtemp(dir=VENVS))
        with tarfile.open(archive) as tar:
            tar.extractall(staging, members=list(_safe_members(tar, "mongoengine-0.29.3/")))
        unpacked.parent.mkdir(parents=True, exist_ok=True)
        (staging / "mongoengine-0.29.3").rename(unpacked)
        shutil.rmtree(staging)
    return unpacked


def prepare_tests(tests_from: Optional[str], python: Path) -> tuple[Path, str]:
    """A directory holding ``tests/`` and ``docs/`` (no ``mongoengine/`` to shadow the installed one)."""
    sdist = sdist_tree(python)
    if tests_from:
        source = Path(tests_from).resolve()
        if (source / "tests").is_dir():
            pass
        elif source.name == "tests" and source.is_dir():
            source = source.parent
        else:
            raise SystemExit(f"--tests-from {tests_from}: no tests/ folder there")
        label = f"checkout {source}"
        # The sdist's copies of the top-level test modules must match: a checkout at another tag would not.
        differing = [p.name for p in (sdist / "tests").glob("test_*.py")
                     if not (source / "tests" / p.name).exists()
                     or (source / "tests" / p.name).read_bytes() != p.read_bytes()]
        if differing:
            log(f"WARNING: {source} is not MongoEngine 0.29.3's tests (differs from the sdist in {differing})")
        dest = VENVS / "tests" / "checkout"
    else:
        source, label, dest = sdist, "PyPI sdist (top-level tests/ modules only)", VENVS / "tests" / "sdist"
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    shutil.copytree(source / "tests", dest / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    docs = source / "docs" if (source / "docs").is_dir() else sdist / "docs"
    shutil.copytree(docs, dest / "docs")
    for support in SDIST_SUPPORT.glob("*.py"):
        if not (dest / "tests" / support.name).exists():
            shutil.copy(support, dest / "tests" / support.name)
    # MongoEngine's setup.cfg pytest section; also stops pytest from reading this repository's config.
    (dest / "pytest.ini").write_text("[pytest]\ntestpaths = tests\n")
    return dest, label


# --- the server ----------------------------------------------------------------------------------


class Secantus:
    """A fresh in-memory SecantusDB (single-node replica set ``secantus``) for one side's run."""

    def __init__(self, python: Path, port: int, log_path: Path) -> None:
        self.exe = python.parent / "secantusd-py"
        self.port = port
        self.log_path = log_path
        self.process: Optional[subprocess.Popen] = None
        self.workdir = ""

    def start(self, timeout: float = 60.0) -> None:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", self.port))
            except OSError as exc:
                raise SystemExit(f"port {self.port} is in use ({exc}); MongoEngine's tests expect the server at "
                                 f"localhost:27017 - free it, or pass --port (tests naming 27017 then fail)") from None
        # An empty working directory: secantusd-py would read a ./secantusd.toml.
        self.workdir = tempfile.mkdtemp(prefix="compat-secantus-")
        out = open(self.log_path, "wb")
        self.process = subprocess.Popen(
            [str(self.exe), "--host", "127.0.0.1", "--port", str(self.port), "--storage-path", ":memory:",
             "--enable-test-commands", "--log-level", "WARNING"],
            cwd=self.workdir, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True)
        out.close()
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                pass
            try:
                code = self.process.wait(timeout=0.2)  # the poll interval; also notices an early exit
            except subprocess.TimeoutExpired:
                code = None
            if code is not None:
                raise SystemExit(f"secantusd-py exited with {code} while starting; see {self.log_path}")
            if time.monotonic() > deadline:
                self.stop()
                raise SystemExit(f"secantusd-py did not listen on port {self.port} within {timeout}s")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)


# --- running one side ----------------------------------------------------------------------------


def run_side(side: str, python: Path, server_python: Path, tests_root: Path, paths: list[str], args) -> dict:
    RESULTS.mkdir(exist_ok=True)
    junit = RESULTS / f"{side}.xml"
    log_file = RESULTS / f"{side}.log"
    for stale in (junit, log_file):
        stale.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(PYTHONPATH=str(PLUGIN_DIR), PYTHONNOUSERSITE="1", COMPAT_DRIVER=side, COMPAT_PORT=str(args.port))
    if side == "greenmongo":
        if args.gevent_patch:
            env["COMPAT_GEVENT_PATCH"] = "1"
        if args.greenmongo_plugin:
            env["COMPAT_EXTRA_PLUGIN"] = str(Path(args.greenmongo_plugin).resolve())
    cmd = [str(python), "-m", "pytest", "-p", "mongoengine_compat", "-p", "no:cacheprovider",
           "--rootdir", str(tests_root), f"--junitxml={junit}", "-o", "junit_family=xunit2",
           # native tracebacks: pytest's own formatter parses source and can die on a RecursionError
           "-rfE", "--tb=native", "--continue-on-collection-errors",
           f"--timeout={args.timeout}", "-o", "timeout_method=signal"]
    if args.k:
        cmd += ["-k", args.k]
    cmd += args.pytest_args
    if not any(a == "tests" or a.startswith("tests/") for a in args.pytest_args):
        cmd += paths
    server = Secantus(server_python, args.port, RESULTS / f"{side}-server.log")
    log(f"{side}: starting SecantusDB on 127.0.0.1:{args.port}")
    server.start()
    started = time.monotonic()
    try:
        log(f"{side}: pytest {' '.join(paths)} (log: {log_file})")
        with open(log_file, "wb") as out:
            proc = subprocess.Popen(cmd, cwd=tests_root, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            try:
                code = proc.wait(timeout=args.side_timeout)
            except subprocess.TimeoutExpired:
                code = -1
                log(f"{side}: killed after {args.side_timeout}s")
            finally:  # also on Ctrl-C: pytest runs in its own session and would outlive us
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
    finally:
        server.stop()
    seconds = time.monotonic() - started
    tail = log_file.read_text(errors="replace").strip().splitlines()[-1:] or [""]
    log(f"{side}: pytest exit {code} in {seconds:.0f}s: {tail[0]}")
    return {"exit": code, "seconds": seconds, "tests": parse_junit(junit, tests_root) if junit.exists() else {}}


# --- results ---------------------------------------------------------------------------------------


def node_id(case: ET.Element, tests_root: Path) -> str:
    """A pytest node id: ``tests/fields/test_x.py::TestX::test_y``; a module that did not collect: its path."""
    classname, name = case.get("classname", ""), case.get("name", "")
    if not classname:  # collection errors: name is the dotted module
        parts, rest = [p for p in name.split(".") if p], []
    else:
        parts, rest = [p for p in classname.split(".") if p], [name]
    for cut in range(len(parts), 0, -1):
        module = Path(*parts[:cut]).with_suffix(".py")
        if (tests_root / module).exists():
            return "::".join([module.as_posix(), *parts[cut:], *rest])
    return "::".join([*parts, *rest]) or "<unnamed>"


def cause(text: str) -> str:
    """The exception line that ends a native traceback (``ImportError: cannot import name ...``)."""
    lines = [line for line in text.splitlines() if line.strip()]
    marked = [line[1:].strip() for line in lines if line.startswith("E ")]  # pytest's collection-error style
    if marked:
        return re.sub(r"0x[0-9a-f]+", "0x...", marked[-1])[:240]
    for line in reversed(lines):
        if not line[0].isspace() and re.match(r"[A-Za-z_][\w.]*(: |$)", line) and not line.startswith("Traceback"):
            return re.sub(r"0x[0-9a-f]+", "0x...", line)[:240]
    return ""


def parse_junit(path: Path, tests_root: Path) -> dict[str, dict]:
    tests: dict[str, dict] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        nid = node_id(case, tests_root)
        outcome, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            element = case.find(tag)
            if element is not None:
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[tag]
                message = cause(element.text or "") or (element.get("message") or "").strip()[:240]
                break
        if not case.get("classname"):
            outcome = "collection error"
        if outcome == "error" and tests.get(nid, {}).get("outcome") == "failed":
            continue  # a failed test whose teardown failed too: reported once, as failed
        tests[nid] = {"outcome": outcome, "message": message}
    return tests


def counts(tests: dict[str, dict]) -> dict[str, int]:
    result = {k: 0 for k in ("passed", "failed", "error", "skipped", "collection error")}
    for test in tests.values():
        result[test["outcome"]] += 1
    return result


def summarise(outcomes: dict[str, dict], label: str, subset: str, listed: Optional[int]) -> tuple[str, dict]:
    """The side-by-side table, then each side's tests that pass only there (grouped by cause, then listed).

    ``listed`` caps the per-test lists (None: all of them).
    """
    sides = [s for s in SIDES if s in outcomes]
    tally = {s: counts(outcomes[s]["tests"]) for s in sides}
    lines = [f"MongoEngine 0.29.3 test suite against SecantusDB 0.7.0b3 - tests: {label}; subset: {subset}", ""]

    def row(title: str, values: list) -> None:
        lines.append(f"| {title:<28} | " + " | ".join(f"{v:>14}" for v in values) + " |")

    row("", [SIDE_TITLES[s] for s in sides])
    lines.append("|" + "|".join(["-" * 30] + ["-" * 16 for _ in sides]) + "|")
    for title, key in (("passed", "passed"), ("failed", "failed"), ("errors", "error"), ("skipped", "skipped")):
        row(title, [tally[s][key] for s in sides])
    row("modules that did not collect", [tally[s]["collection error"] for s in sides])
    row("tests run", [len(outcomes[s]["tests"]) - tally[s]["collection error"] for s in sides])
    row("pytest exit code", [outcomes[s]["exit"] for s in sides])
    row("wall time (s)", [f"{outcomes[s]['seconds']:.0f}" for s in sides])
    diff: dict[str, list] = {}
    if len(sides) == 2:
        for a, b in (("pymongo", "greenmongo"), ("greenmongo", "pymongo")):
            ta, tb = outcomes[a]["tests"], outcomes[b]["tests"]
            only = sorted(t for t, r in ta.items()
                          if r["outcome"] == "passed" and tb.get(t, {}).get("outcome") != "passed")
            diff[f"pass_{a}_only"] = only
            why = {t: f"{tb[t]['outcome']}: {tb[t]['message']}" if t in tb else "not run: its module did not collect"
                   for t in only}
            lines += ["", f"Pass on {SIDE_TITLES[a]}, not on {SIDE_TITLES[b]}: {len(only)}"]
            grouped: dict[str, int] = {}
            for t in only:
                grouped[why[t]] = grouped.get(why[t], 0) + 1
            lines += [f"  {n:5d} x {reason[:200]}" for reason, n in sorted(grouped.items(), key=lambda kv: -kv[1])]
            if only:
                lines.append("  tests:")
                shown = only if listed is None else only[:listed]
                lines += [f"    {t}  [{why[t][:160]}]" for t in shown]
                if len(shown) < len(only):
                    lines.append(f"    ... {len(only) - len(shown)} more in compat/results/summary.txt")
        gm = outcomes["greenmongo"]["tests"]
        broken = sorted(t for t, r in gm.items() if r["outcome"] == "collection error")
        if broken:
            lines += ["", f"Modules that did not collect on greenmongo: {len(broken)}"]
            lines += [f"  {t}  [{gm[t]['message'][:200]}]" for t in broken]
    return "\n".join(lines), {"tally": tally, **diff}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=SIDES, help="run one side")
    parser.add_argument("--subset", choices=("full", "smoke"), default="full",
                        help="smoke: the fixed CI subset %s" % " ".join(SMOKE))
    parser.add_argument("-k", help="pytest -k expression (both sides)")
    parser.add_argument("--tests-from", metavar="DIR",
                        help="a MongoEngine v0.29.3 source tree (with tests/); default: the PyPI sdist's tests")
    parser.add_argument("--port", type=int, default=27017,
                        help="SecantusDB port (default 27017, which MongoEngine's tests assume)")
    parser.add_argument("--python", default=sys.executable, help="interpreter for the venvs")
    parser.add_argument("--recreate", action="store_true", help="rebuild the venvs")
    parser.add_argument("--timeout", type=int, default=300, help="per-test time limit in seconds (0: none)")
    parser.add_argument("--side-timeout", type=int, default=3600, help="time limit for one side's pytest run")
    parser.add_argument("--gevent-patch", action="store_true",
                        help="greenmongo side: gevent.monkey.patch_all() before anything else")
    parser.add_argument("--greenmongo-plugin", metavar="FILE",
                        help="greenmongo side: a Python file run after install_as_pymongo() (local diagnosis)")
    parser.add_argument("--fail-on-diff", action="store_true",
                        help="exit 1 when a test passes on PyMongo and not on greenmongo")
    parser.add_argument("--list", type=int, default=40, metavar="N",
                        help="print at most N tests per difference list (all are in results/summary.txt)")
    parser.add_argument("pytest_args", nargs="*", help="after --: more pytest arguments for both sides; test paths "
                        "(tests/...) given there replace the subset's")
    args = parser.parse_args()

    sides = [args.only] if args.only else list(SIDES)
    VENVS.mkdir(parents=True, exist_ok=True)
    pythons = ensure_venvs(sides, args.python, args.recreate)
    tests_root, label = prepare_tests(args.tests_from, pythons["server"])
    paths = SMOKE if args.subset == "smoke" else ["tests"]
    missing = [p for p in paths if not (tests_root / p).exists()]
    if missing:
        raise SystemExit(f"not in the tests: {missing}")

    outcomes = {side: run_side(side, pythons[side], pythons["server"], tests_root, paths, args) for side in sides}
    text, data = summarise(outcomes, label, args.subset, listed=None)
    print("\n" + summarise(outcomes, label, args.subset, listed=args.list)[0], flush=True)
    (RESULTS / "summary.txt").write_text(text + "\n")
    (RESULTS / "summary.json").write_text(json.dumps(
        {"tests": label, "subset": args.subset, "k": args.k,
         "sides": {s: {"exit": o["exit"], "seconds": round(o["seconds"], 1), "counts": data["tally"][s],
                       "tests": o["tests"]} for s, o in outcomes.items()},
         **{k: v for k, v in data.items() if k != "tally"}}, indent=1, sort_keys=True))
    # pytest: 0 all passed, 1 some failed; anything else (interrupted, internal error, usage, no tests) is ours.
    broken = [s for s, o in outcomes.items() if o["exit"] not in (0, 1)]
    if broken:
        log(f"pytest did not complete normally on: {', '.join(broken)}")
        return 2
    if args.fail_on_diff and data.get("pass_pymongo_only"):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
