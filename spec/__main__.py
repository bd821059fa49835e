"""``python -m spec report [pytest args]``: run the spec suites, print passed/failed/skipped per suite folder."""

from __future__ import annotations

import re
import sys
from collections import defaultdict

import pytest

_SUITE = re.compile(r"\[([^\]]*?\.json)")


class _Tally:
    def __init__(self) -> None:
        self.counts: dict[str, dict[str, int]] = defaultdict(lambda: {"passed": 0, "failed": 0, "skipped": 0})

    @staticmethod
    def suite_of(nodeid: str) -> str:
        match = _SUITE.search(nodeid)
        if not match:
            return nodeid.split("::", 1)[0]
        return match.group(1).rsplit("/", 1)[0]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        counts = self.counts[self.suite_of(report.nodeid)]
        if report.when == "call" or (report.when == "setup" and not report.passed):
            if report.passed:
                counts["passed"] += 1
            elif report.skipped:
                counts["skipped"] += 1
            else:
                counts["failed"] += 1
        elif report.when == "teardown" and report.failed:
            counts["failed"] += 1


def report(args: list[str]) -> int:
    tally = _Tally()
    code = pytest.main(["spec", "-q", "-p", "no:cacheprovider", "--no-header", "-o", "addopts=", *args],
                       plugins=[tally])
    rows = sorted(tally.counts.items())
    width = max([len("suite")] + [len(name) for name, _ in rows])
    print()
    print(f"{'suite':<{width}}  {'passed':>7} {'failed':>7} {'skipped':>7}")
    totals = {"passed": 0, "failed": 0, "skipped": 0}
    for name, counts in rows:
        print(f"{name:<{width}}  {counts['passed']:>7} {counts['failed']:>7} {counts['skipped']:>7}")
        for key in totals:
            totals[key] += counts[key]
    print(f"{'TOTAL':<{width}}  {totals['passed']:>7} {totals['failed']:>7} {totals['skipped']:>7}")
    return int(code)


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "report":
        print("usage: python -m spec report [pytest args]", file=sys.stderr)
        return 2
    return report(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
