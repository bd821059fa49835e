"""A pytest plugin that tallies spec results per suite folder and prints the table at the end."""

from __future__ import annotations

import re
from collections import defaultdict

import pytest

_JSON_PATH = re.compile(r"\[([^\]]*?\.json)")


def suite_of(nodeid: str) -> str:
    """``spec/test_x.py::test[bson-corpus/tests/int32.json::case]`` -> ``bson-corpus/tests``."""
    match = _JSON_PATH.search(nodeid)
    if not match:
        return nodeid.split("::", 1)[0]
    return match.group(1).rsplit("/", 1)[0]


class SuiteTally:
    def __init__(self) -> None:
        self.counts: dict[str, dict[str, int]] = defaultdict(lambda: {"passed": 0, "failed": 0, "skipped": 0})

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not report.nodeid.startswith("spec/"):
            return
        counts = self.counts[suite_of(report.nodeid)]
        if report.when == "call" or (report.when == "setup" and not report.passed):
            if report.passed:
                counts["passed"] += 1
            elif report.skipped:
                counts["skipped"] += 1
            else:
                counts["failed"] += 1
        elif report.when == "teardown" and report.failed:
            counts["failed"] += 1

    def table(self) -> list[str]:
        rows = sorted(self.counts.items())
        width = max([len("suite")] + [len(name) for name, _ in rows])
        lines = [f"{'suite':<{width}}  {'passed':>7} {'failed':>7} {'skipped':>7}"]
        totals = {"passed": 0, "failed": 0, "skipped": 0}
        for name, counts in rows:
            lines.append(f"{name:<{width}}  {counts['passed']:>7} {counts['failed']:>7} {counts['skipped']:>7}")
            for key in totals:
                totals[key] += counts[key]
        lines.append(f"{'TOTAL':<{width}}  {totals['passed']:>7} {totals['failed']:>7} {totals['skipped']:>7}")
        return lines

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.counts:
            return
        terminalreporter.section("spec suites")
        for line in self.table():
            terminalreporter.write_line(line)
