"""A pytest plugin that tallies spec results per suite folder and prints the table at the end.

``python -m spec report --markdown PATH`` also writes the table as the Markdown page the docs publish
(docs/spec-compliance.md): a dated snapshot, because the suites need minutes and a server, which a docs
build must not.
"""

from __future__ import annotations

import re
from collections import defaultdict

import pytest

_JSON_PATH = re.compile(r"\[([^\]]*?\.json)")


#: The module running the unified suites against the loopback load balancers: its rows are its own.
_LOAD_BALANCED_MODULE = "spec/test_unified_load_balanced.py"


def suite_of(nodeid: str) -> str:
    """``spec/test_x.py::test[bson-corpus/tests/int32.json::case]`` -> ``bson-corpus/tests`` (with
    `` (load-balanced)`` for the load-balanced run's cases)."""
    match = _JSON_PATH.search(nodeid)
    if not match:
        return nodeid.split("::", 1)[0]
    suite = match.group(1).rsplit("/", 1)[0]
    return f"{suite} (load-balanced)" if nodeid.startswith(_LOAD_BALANCED_MODULE) else suite


class SuiteTally:
    def __init__(self) -> None:
        # "xfailed" counts the skips that are known failures (spec/unified/known_failures.py): a subset of "skipped".
        self.counts: dict[str, dict[str, int]] = defaultdict(
            lambda: {"passed": 0, "failed": 0, "skipped": 0, "xfailed": 0})

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not report.nodeid.startswith("spec/"):
            return
        counts = self.counts[suite_of(report.nodeid)]
        if report.when == "call" or (report.when == "setup" and not report.passed):
            if report.passed:
                counts["passed"] += 1
            elif report.skipped:
                counts["skipped"] += 1
                counts["xfailed"] += int(hasattr(report, "wasxfail"))
            else:
                counts["failed"] += 1
        elif report.when == "teardown" and report.failed:
            counts["failed"] += 1

    def table(self) -> list[str]:
        rows = sorted(self.counts.items())
        width = max([len("suite")] + [len(name) for name, _ in rows])
        lines = [f"{'suite':<{width}}  {'passed':>7} {'failed':>7} {'skipped':>7}"]
        for name, counts in rows:
            lines.append(f"{name:<{width}}  {counts['passed']:>7} {counts['failed']:>7} {counts['skipped']:>7}")
        totals = self.totals()
        lines.append(f"{'TOTAL':<{width}}  {totals['passed']:>7} {totals['failed']:>7} {totals['skipped']:>7}")
        return lines

    def totals(self) -> dict[str, int]:
        totals = {"passed": 0, "failed": 0, "skipped": 0, "xfailed": 0}
        for counts in self.counts.values():
            for key in totals:
                totals[key] += counts[key]
        return totals

    def markdown(self, provenance: str) -> str:
        """The docs' spec-compliance page: ``provenance`` (when, which commit, against what) and the table."""
        totals = self.totals()
        lines = [
            "# Spec compliance",
            "",
            "The MongoDB driver specifications' own JSON test suites, run against greenmongo: passed, failed and",
            "skipped cases per suite folder of the specifications repository. Every skip is allowed by the skip",
            "ledger (`spec/skip_ledger.py`) with its category and reason. *Known failures* are counted with the",
            "skips: expected failures listed with their reasons in `spec/unified/known_failures.py`, either the",
            "test server's behaviour or its one-member deployment (each shown failing with PyMongo too, in",
            "`spec/unified/pymongo_evidence.json`) or a greenmongo feature not built yet.",
            "",
            provenance,
            "",
            "To refresh this page, run `python -m spec report --markdown docs/spec-compliance.md` (or",
            "`tox -e spec-snapshot`) and commit the result; it takes minutes and starts its own SecantusDB",
            "server (set `MONGODB_URI` to use another deployment).",
            "",
            f"**Total: {totals['passed']} passed, {totals['failed']} failed, {totals['skipped']} skipped "
            f"(of which {totals['xfailed']} known failures).**",
            "",
            "| suite | passed | failed | skipped | known failures (skipped) |",
            "| --- | ---: | ---: | ---: | ---: |",
        ]
        for name, counts in sorted(self.counts.items()):
            lines.append(f"| `{name}` | {counts['passed']} | {counts['failed']} | {counts['skipped']} | "
                         f"{counts['xfailed']} |")
        lines.append(f"| **total** | **{totals['passed']}** | **{totals['failed']}** | **{totals['skipped']}** | "
                     f"**{totals['xfailed']}** |")
        return "\n".join(lines) + "\n"

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.counts:
            return
        terminalreporter.section("spec suites")
        for line in self.table():
            terminalreporter.write_line(line)
