"""CI's static checks, run with the tests: ruff, mypy and the import-layer contract.

CI runs ``pytest`` (``.ci/run``), so the checks ``tox -e lint`` runs are tests too: each tool runs in a
subprocess from the repository root with this interpreter, and a failure shows the tool's own output.
Their configuration is the project's: ``[tool.ruff]`` in pyproject.toml, ``[mypy*]`` and ``[importlinter*]``
in setup.cfg. mypy keeps its incremental cache in ``.mypy_cache`` (a warm run takes a few seconds).
A tool that is not installed fails its test: the ``test`` extra has them all.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

pytestmark = pytest.mark.one_pass  # no gevent I/O here: once, in the unpatched pass

ROOT = Path(__file__).resolve().parent.parent


def _require(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.fail(f"{module} is not installed (pip install -e '.[test]')")


def _run(args: List[str], tool: str) -> None:
    proc = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (
        f"{tool} failed (exit status {proc.returncode}):\n{proc.stdout}{proc.stderr}")


def test_ruff() -> None:
    _require("ruff")
    _run(["-m", "ruff", "check", "greenmongo", "tests", "spec", "bench", "compat"], "ruff")


def test_mypy() -> None:
    _require("mypy")
    _run(["-m", "mypy", "greenmongo"], "mypy")


def test_import_layers() -> None:
    _require("importlinter")
    # lint-imports, with this interpreter; it puts the working directory (the root) on sys.path.
    _run(["-c", "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"],
         "lint-imports")
