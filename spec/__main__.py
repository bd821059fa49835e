"""``python -m spec report|ledger|evidence``: the spec suites' table, the skip ledger's verdict, PyMongo evidence.

* ``report [--markdown PATH] [pytest args]`` runs only the spec suites and prints passed/failed/skipped
  per suite folder. The table comes from spec/report.py, which spec/conftest.py registers for every
  pytest run that includes spec/, so ``pytest`` (the README's test command) prints it too. ``--markdown``
  also writes it as the docs' dated snapshot (docs/spec-compliance.md), stamped with the date, commit
  and environment of the run.
* ``ledger DUMP`` judges a ``pytest --skip-ledger-dump=DUMP`` record against spec/skip_ledger.py
  as the session would have (tests/plugins/skip_ledger.py), without rerunning the tests.
* ``evidence [substring ...]`` runs the known failures of kind server/deployment with PyMongo and
  writes spec/unified/pymongo_evidence.json (spec/evidence.py).
"""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

USAGE = ("usage: python -m spec report [--markdown PATH] [pytest args] | ledger DUMP.json | "
         "evidence [case id substring ...]")


class _Snapshot:
    """Writes the tally of the run as Markdown when the session ends (``report --markdown PATH``)."""

    def __init__(self, path: str, argv: list[str]) -> None:
        self.path = path
        self.argv = argv

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        tally = session.config.pluginmanager.get_plugin("spec-suite-tally")
        if exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) or tally is None or not tally.counts:
            return  # interrupted, a usage error, or no spec item selected: keep the last snapshot
        with open(self.path, "w", encoding="utf-8") as fh:
            fh.write(tally.markdown(provenance(self.argv)))


def provenance(argv: list[str]) -> str:
    """When, at which commit, how and against what the suites ran: the snapshot's first lines."""
    root = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return ""

    commit = git("rev-parse", "HEAD") or "unknown"
    # The docs (this snapshot among them) do not change what the suites run.
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!docs")
    dirty = " (with uncommitted changes)" if dirty else ""
    if os.environ.get("MONGODB_URI"):
        server = "the deployment in `MONGODB_URI`"
    else:
        try:
            server = f"SecantusDB {importlib.metadata.version('secantusdb')} (started by the tests)"
        except importlib.metadata.PackageNotFoundError:
            server = "SecantusDB (started by the tests)"
    patched = os.environ.get("GREENMONGO_TEST_PATCHED", "").lower() in ("1", "true", "yes")
    command = shlex.join(["python", "-m", "spec", "report", *argv])
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f"Snapshot of {date}, commit `{commit}`{dirty}: `{command}` with Python "
            f"{platform.python_version()}, {'monkey-patched' if patched else 'unpatched'}, against {server}.")


def report(extra: list[str]) -> int:
    plugins: list[object] = []
    if extra[:1] == ["--markdown"]:
        if len(extra) < 2:
            print(USAGE, file=sys.stderr)
            return 2
        plugins.append(_Snapshot(extra[1], list(extra)))
        extra = extra[2:]
    targets = [] if any(not arg.startswith("-") for arg in extra) else ["spec"]
    return int(pytest.main([*targets, "-q", "-p", "no:cacheprovider", *extra], plugins=plugins))


def ledger(paths: list[str]) -> int:
    from spec.skip_ledger import LEDGER
    from tests.plugins.skip_ledger import RunRecord, describe, judge

    if len(paths) != 1:
        print(USAGE, file=sys.stderr)
        return 2
    with open(paths[0], encoding="utf-8") as fh:
        record = RunRecord.from_json(json.load(fh))
    judgement = judge(record, LEDGER)
    print("\n".join(describe(judgement, record, LEDGER)))
    return 0 if judgement.ok else 1


def main(argv: list[str]) -> int:
    if argv and argv[0] == "report":
        return report(argv[1:])
    if argv and argv[0] == "ledger":
        return ledger(argv[1:])
    if argv and argv[0] == "evidence":
        from spec import evidence

        return evidence.main(argv[1:])
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
