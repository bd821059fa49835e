"""The compatibility suite's smoke subset in CI: MongoEngine's tests on PyMongo 4.20 and on greenmongo
(``install_as_pymongo()``), side by side against SecantusDB (compat/README.md has the whole suite).

greenmongo must pass every test PyMongo passes, but one: MongoEngine's
``test_no_dereference_context_manager_thread_safe`` uses one client from a second OS thread, which
greenmongo refuses by design in an unpatched process (one client per OS thread's hub: docs/gevent.md);
a gevent application patches threads into greenlets, and with ``--gevent-patch`` that test passes too.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.one_pass]  # its own processes and virtualenvs

ROOT = Path(__file__).resolve().parents[1]
#: PyMongo-only passes that are deliberate (see the module docstring).
BY_DESIGN = {"test_no_dereference_context_manager_thread_safe"}


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def test_mongoengine_smoke_subset_passes_what_pymongo_passes() -> None:
    if not _port_free(27017):
        pytest.fail("the compatibility suite needs 127.0.0.1:27017 (MongoEngine's tests assume it), which is taken")
    run = subprocess.run([sys.executable, str(ROOT / "compat" / "run_mongoengine.py"), "--subset", "smoke"],
                         cwd=ROOT, capture_output=True, text=True, timeout=1500)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    summary = json.loads((ROOT / "compat" / "results" / "summary.json").read_text())
    counts = {side: summary["sides"][side]["counts"] for side in ("pymongo", "greenmongo")}
    pymongo_only = {test.rsplit("::", 1)[-1] for test in summary["pass_pymongo_only"]}
    assert pymongo_only <= BY_DESIGN, f"greenmongo fails tests PyMongo passes: {sorted(pymongo_only - BY_DESIGN)}"
    assert counts["greenmongo"]["passed"] >= counts["pymongo"]["passed"] - len(pymongo_only), counts
    assert counts["pymongo"]["passed"] > 50, counts  # the subset really ran

