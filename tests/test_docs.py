"""The documentation: the site builds with warnings as errors, the tutorial's program runs, the spec snapshot
is dated and adds up.

CI runs only ``pytest``, so the docs build is a test: ``sphinx-build -W`` in a subprocess, as ``tox -e docs``
runs it (the ``test`` extra installs Sphinx, so a missing Sphinx fails here rather than skipping).
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from spec.report import SuiteTally

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


@pytest.mark.one_pass  # a subprocess with no gevent I/O
def test_sphinx_build_has_no_warnings(tmp_path: Path) -> None:
    for module in ("sphinx", "myst_parser", "furo"):
        if importlib.util.find_spec(module) is None:
            pytest.fail(f"{module} is not installed (pip install -e '.[test]' or '.[docs]')")
    out = tmp_path / "html"
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
                           "-d", str(tmp_path / "doctrees"), str(DOCS), str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"sphinx-build failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}"
    # The API pages come from the docstrings, and the migration guide quotes the tests' difference lists.
    collection = (out / "api" / "greenmongo" / "generated" / "greenmongo.collection.html").read_text("utf-8")
    assert 'id="greenmongo.collection.Collection.insert_one"' in collection
    assert 'id="greenmongo.collection.Collection.watch"' in collection  # inherited from Watchable
    read_preferences = (out / "api" / "greenmongo" / "generated" / "greenmongo.read_preferences.html").read_text(
        "utf-8")
    assert 'id="greenmongo.read_preferences.ReadPreference"' in read_preferences  # a star re-export
    migration = (out / "migration.html").read_text("utf-8")
    assert "json-uuid-text" in migration and "async-api" in migration


def _tutorial() -> tuple[str, list[str]]:
    """The tutorial's code blocks as one program, and the lines its ``# -> text`` comments say it prints."""
    text = (DOCS / "tutorial.md").read_text("utf-8")
    code = "\n".join(re.findall(r"^```python\n(.*?)^```", text, re.S | re.M))
    expected = [match.group(1) for match in re.finditer(r"^\s*print\(.*\)\s+# -> (.+)$", code, re.M)]
    return code, expected


def test_tutorial_extraction() -> None:
    code, expected = _tutorial()
    assert code.count("MongoClient(\"mongodb://localhost:27017/") == 2
    assert "client.close()" in code and len(expected) >= 10


@pytest.mark.server
@pytest.mark.one_pass  # its own process
def test_tutorial_program_prints_what_it_says(server_uri: str) -> None:
    code, expected = _tutorial()
    code = code.replace("mongodb://localhost:27017/", server_uri)
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    printed = iter(proc.stdout.splitlines())
    for line in expected:  # in order, each as a whole line
        assert any(seen == line for seen in printed), f"the tutorial does not print {line!r}:\n{proc.stdout}"


# -- the spec-compliance snapshot ---------------------------------------------------------------------

_ROW = re.compile(r"^\| `([^`]+)` \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|$", re.M)
_TOTAL = re.compile(r"^\| \*\*total\*\* \| \*\*(\d+)\*\* \| \*\*(\d+)\*\* \| \*\*(\d+)\*\* \| \*\*(\d+)\*\* \|$", re.M)


@pytest.mark.one_pass
def test_spec_snapshot_is_dated_and_adds_up() -> None:
    text = (DOCS / "spec-compliance.md").read_text("utf-8")
    assert re.search(r"^Snapshot of \d{4}-\d\d-\d\d \d\d:\d\d UTC, commit `[0-9a-f]{40}`", text, re.M), text[:2000]
    rows = [tuple(int(n) for n in match.groups()[1:]) for match in _ROW.finditer(text)]
    total = _TOTAL.search(text)
    assert rows and total
    assert tuple(sum(column) for column in zip(*rows)) == tuple(int(n) for n in total.groups())


@pytest.mark.one_pass
def test_spec_snapshot_markdown_counts_known_failures_among_skips() -> None:
    tally = SuiteTally()

    def report(nodeid: str, outcome: str, **extra: object) -> None:
        tally.pytest_runtest_logreport(SimpleNamespace(  # type: ignore[arg-type]
            nodeid=nodeid, when="call", passed=outcome == "passed", skipped=outcome == "skipped",
            failed=outcome == "failed", **extra))

    item = "spec/test_unified_suites.py::test_unified[crud/tests/unified/{}.json::case]"
    report(item.format("a"), "passed")
    report(item.format("b"), "skipped")
    report(item.format("c"), "skipped", wasxfail="server: SecantusDB ...")
    report(item.format("d"), "failed")
    report("tests/test_docs.py::not_a_spec_case", "failed")
    page = tally.markdown("Snapshot of now.")
    assert "| `crud/tests/unified` | 1 | 1 | 2 | 1 |" in page
    assert "| **total** | **1** | **1** | **2** | **1** |" in page
    assert "Snapshot of now." in page
    assert tally.table()[-1].split() == ["TOTAL", "1", "1", "2"]  # the terminal table is unchanged
