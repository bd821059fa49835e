"""``python -m spec report [pytest args]``: run the spec suites and print passed/failed/skipped per suite folder.

The table comes from spec/report.py, which spec/conftest.py registers for every pytest run that
includes spec/, so ``pytest`` (the README's test command) prints it too.
"""

from __future__ import annotations

import sys

import pytest


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "report":
        print("usage: python -m spec report [pytest args]", file=sys.stderr)
        return 2
    extra = argv[1:]
    targets = [] if any(not arg.startswith("-") for arg in extra) else ["spec"]
    return int(pytest.main([*targets, "-q", "-p", "no:cacheprovider", *extra]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
