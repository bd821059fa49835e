"""``python -m spec evidence``: run the server and deployment known failures with PyMongo, and record how each went.

Every ``SERVER`` and ``DEPLOYMENT`` entry of spec/unified/known_failures.py claims that PyMongo 4.20
fails the case the same way against the same server. This runs exactly those cases through the
unified runner with the PyMongo driver (deployment cases included, as ``GREENMONGO_UNIFIED_RUN_ALL=1``
would), then with greenmongo for comparison, each suite on a fresh SecantusDB as in the test suite
(``KNOWN_FAILURES_LOAD_BALANCED``' cases behind the loopback load balancers, as
spec/test_unified_load_balanced.py runs them; their keys are ``load-balanced:<case id>``), and writes
``spec/unified/pymongo_evidence.json``: per case the outcome (``failed`` / ``passed`` / ``skipped``) and
the error's first line for each driver, with the PyMongo, SecantusDB and greenmongo versions and the
date. tests/test_known_failures_evidence.py checks every such entry has a record in which PyMongo failed.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import os
import sys
from pathlib import Path
from typing import Any, Optional

from spec.support import spec_dir
from spec.unified.known_failures import (
    DEPLOYMENT,
    KNOWN_FAILURES,
    KNOWN_FAILURES_LOAD_BALANCED,
    LOAD_BALANCED,
    REPLICA_SET,
    SERVER,
)

EVIDENCE_FILE = Path(__file__).resolve().parent / "unified" / "pymongo_evidence.json"
KINDS = (SERVER, DEPLOYMENT)
_ERROR_CHARS = 400


#: Evidence keys of cases run against the loopback load balancers start with this.
LOAD_BALANCED_PREFIX = LOAD_BALANCED + ":"


def evidence_cases() -> dict[str, str]:
    """Evidence key -> kind, for the known failures PyMongo must fail too (the case id; for the
    load-balanced run's, ``load-balanced:<case id>``)."""
    cases = {case_id: kind for case_id, (kind, _) in KNOWN_FAILURES.items() if kind in KINDS}
    cases.update({LOAD_BALANCED_PREFIX + case_id: kind
                  for case_id, (kind, _) in KNOWN_FAILURES_LOAD_BALANCED.items() if kind in KINDS})
    return cases


def split_key(key: str) -> tuple[str, str]:
    """An evidence key -> (deployment, case id)."""
    if key.startswith(LOAD_BALANCED_PREFIX):
        return LOAD_BALANCED, key[len(LOAD_BALANCED_PREFIX):]
    return REPLICA_SET, key


def suite_of_case(key: str) -> str:
    """The unified suite folder (as the test modules list them) whose files hold the case."""
    from spec.test_unified_format import VALID_PASS
    from spec.test_unified_load_balanced import LOAD_BALANCED_SUITES
    from spec.test_unified_suites import UNIFIED_SUITES

    deployment, case_id = split_key(key)
    file_part = case_id.split("::", 1)[0]
    folder = file_part.rsplit("/", 1)[0]
    suites = LOAD_BALANCED_SUITES if deployment == LOAD_BALANCED else [*UNIFIED_SUITES, VALID_PASS]
    for suite in suites:
        if folder == suite:
            return suite
    raise LookupError(f"{key}: no unified suite folder {folder!r} in the {deployment} test module")


def _summary(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    return first if len(first) <= _ERROR_CHARS else first[:_ERROR_CHARS] + "..."


def run_cases(driver: str, cases: dict[str, str]) -> tuple[dict[str, dict], dict[str, Any]]:
    """Run ``cases`` with ``driver``: (case id -> {outcome, error}, facts about the driver and server)."""
    import pytest

    from spec.unified.fixtures import UnifiedCase, UnifiedServers
    from spec.unified.outcomes import NotSupported
    from spec.unified.runner import run_test, test_descriptions

    os.environ["GREENMONGO_UNIFIED_DRIVER"] = driver
    servers = UnifiedServers()
    results: dict[str, dict] = {}
    facts: dict[str, Any] = {}
    try:
        for key in sorted(cases, key=lambda c: (split_key(c)[0], suite_of_case(c), c)):
            deployment, case_id = split_key(key)
            file_part, description = case_id.split("::", 1)
            path = spec_dir() / file_part
            case = UnifiedCase(suite_of_case(key), path, test_descriptions(path).index(description), deployment)
            print(f"[{driver}] {key}", file=sys.stderr, flush=True)
            context = servers.context_for(case.suite, case.deployment)
            facts.setdefault("driver_version", context.adapter.version)
            facts.setdefault("server_version", ".".join(str(part) for part in context.server.version))
            try:
                run_test(context, case.path, case.index)
            except (NotSupported, pytest.skip.Exception) as exc:
                results[key] = {"outcome": "skipped", "error": _summary(exc)}
            except (Exception, pytest.fail.Exception) as exc:  # a MatchError, a driver error, a timeout...
                results[key] = {"outcome": "failed", "error": _summary(exc)}
            else:
                results[key] = {"outcome": "passed", "error": None}
    finally:
        servers.close()
    return results, facts


def collect(only: Optional[list[str]] = None) -> dict:
    cases = evidence_cases()
    if only:
        cases = {case_id: kind for case_id, kind in cases.items() if any(part in case_id for part in only)}
    pymongo_results, pymongo_facts = run_cases("pymongo", cases)
    greenmongo_results, greenmongo_facts = run_cases("greenmongo", cases)
    return {
        "about": "spec/unified/known_failures.py's SERVER and DEPLOYMENT cases run with PyMongo (and greenmongo, "
                 "for comparison) against SecantusDB by `python -m spec evidence` (keys load-balanced:<case>: "
                 "against SecantusDB behind the loopback load balancers, tests/servers/load_balancer.py); outcome "
                 "failed/passed/skipped and the first line of the error",
        "date": datetime.date.today().isoformat(),
        "pymongo_version": pymongo_facts.get("driver_version"),
        "greenmongo_version": greenmongo_facts.get("driver_version"),
        "secantusdb_version": importlib.metadata.version("secantusdb"),
        "server_reported_version": pymongo_facts.get("server_version"),
        "cases": {
            case_id: {"kind": cases[case_id], "pymongo": pymongo_results[case_id],
                      "greenmongo": greenmongo_results[case_id]}
            for case_id in sorted(cases)
        },
    }


def main(argv: list[str]) -> int:
    """``python -m spec evidence [substring ...]``: all cases (or those whose id contains a substring)."""
    evidence = collect(argv or None)
    if argv and EVIDENCE_FILE.exists():  # a partial rerun replaces those records only
        previous = json.loads(EVIDENCE_FILE.read_text(encoding="utf-8")).get("cases", {})
        evidence["cases"] = {case_id: record for case_id, record in sorted({**previous, **evidence["cases"]}.items())
                             if case_id in evidence_cases()}
    EVIDENCE_FILE.write_text(json.dumps(evidence, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    not_failed = [case_id for case_id, record in evidence["cases"].items() if record["pymongo"]["outcome"] != "failed"]
    print(f"{len(evidence['cases'])} cases written to {EVIDENCE_FILE}; PyMongo did not fail {len(not_failed)}")
    for case_id in not_failed:
        print(f"  {evidence['cases'][case_id]['pymongo']['outcome']}: {case_id}")
    return 1 if not_failed else 0
