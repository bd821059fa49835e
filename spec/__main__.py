"""``python -m spec report|ledger|evidence``: the spec suites' table, the skip ledger's verdict, PyMongo evidence.

* ``report [pytest args]`` runs only the spec suites and prints passed/failed/skipped per suite
  folder. The table comes from spec/report.py, which spec/conftest.py registers for every pytest run
  that includes spec/, so ``pytest`` (the README's test command) prints it too.
* ``ledger DUMP`` judges a ``pytest --skip-ledger-dump=DUMP`` record against spec/skip_ledger.py
  as the session would have (tests/plugins/skip_ledger.py), without rerunning the tests.
* ``evidence [substring ...]`` runs the known failures of kind server/deployment with PyMongo and
  writes spec/unified/pymongo_evidence.json (spec/evidence.py).
"""

from __future__ import annotations

import json
import sys

import pytest

USAGE = "usage: python -m spec report [pytest args] | ledger DUMP.json | evidence [case id substring ...]"


def report(extra: list[str]) -> int:
    targets = [] if any(not arg.startswith("-") for arg in extra) else ["spec"]
    return int(pytest.main([*targets, "-q", "-p", "no:cacheprovider", *extra]))


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
