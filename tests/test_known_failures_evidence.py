"""Every server/deployment known failure has PyMongo evidence: the same case fails with PyMongo 4.20 too.

spec/unified/known_failures.py excuses a strict xfail as "SecantusDB behaves differently" or "the
deployment has one member" only with that evidence; ``python -m spec evidence`` (``tox -e evidence``)
runs the cases and writes spec/unified/pymongo_evidence.json. Adding an entry without rerunning it,
or with PyMongo passing the case, fails here.
"""

from __future__ import annotations

import json

import pytest

from spec.evidence import EVIDENCE_FILE, evidence_cases, suite_of_case

pytestmark = pytest.mark.one_pass  # reads files only

EVIDENCE = json.loads(EVIDENCE_FILE.read_text(encoding="utf-8"))


@pytest.mark.parametrize("case_id", sorted(evidence_cases()), ids=sorted(evidence_cases()))
def test_pymongo_failed_the_case(case_id: str) -> None:
    record = EVIDENCE["cases"].get(case_id)
    assert record is not None, f"no PyMongo evidence for {case_id}: run python -m spec evidence"
    assert record["kind"] == evidence_cases()[case_id]
    assert record["pymongo"]["outcome"] == "failed", record
    assert record["pymongo"]["error"], record
    suite_of_case(case_id)  # names a suite the test modules run


def test_no_evidence_for_cases_that_are_not_known_failures() -> None:
    assert set(EVIDENCE["cases"]) <= set(evidence_cases())


def test_the_evidence_names_its_versions() -> None:
    assert EVIDENCE["pymongo_version"].startswith("4.20")
    assert EVIDENCE["secantusdb_version"] and EVIDENCE["date"]
