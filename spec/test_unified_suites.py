"""Spec suites written in the unified test format, one pytest item per test case.

To run another suite, add its folder (relative to the specifications folder) to
``UNIFIED_SUITES`` below, or list extra folders ad hoc, comma separated, in
``GREENMONGO_UNIFIED_SUITES``. Each suite gets a fresh SecantusDB (unless
``MONGODB_URI`` is set); the driver is chosen by ``GREENMONGO_UNIFIED_DRIVER``.
"""

from __future__ import annotations

import os

import pytest

from spec.unified.fixtures import run_case, unified_params, unified_servers  # noqa: F401 (fixture)

UNIFIED_SUITES = [
    "crud/tests/unified",
    "collection-management/tests",
    "index-management/tests",
    "run-command/tests/unified",
    "command-logging-and-monitoring/tests/monitoring",
    "command-logging-and-monitoring/tests/logging",
    "retryable-writes/tests/unified",
    "transactions/tests/unified",
    "transactions-convenient-api/tests/unified",
    "sessions/tests",
    "causal-consistency/tests",
    "change-streams/tests/unified",
    "gridfs/tests",
    "client-backpressure/tests",
    "retryable-reads/tests/unified",
    "versioned-api/tests",
    "read-write-concern/tests/operation",
    "server-discovery-and-monitoring/tests/unified",
    "server-selection/tests/logging",
    "mongodb-handshake/tests/unified",
    "client-side-operations-timeout/tests",
    "open-telemetry/tests/operation",
    "open-telemetry/tests/transaction",
    "client-side-encryption/tests/unified",
    # Not run here: "load-balancers/tests" (spec/test_unified_load_balanced.py runs it, and these suites again,
    # behind the loopback load balancers) and "connection-monitoring-and-pooling/tests/logging" (needs auth on
    # the suite's server).
]


def selected_suites() -> list[str]:
    extra = [folder.strip() for folder in os.environ.get("GREENMONGO_UNIFIED_SUITES", "").split(",")]
    return UNIFIED_SUITES + [folder for folder in extra if folder and folder not in UNIFIED_SUITES]


@pytest.mark.parametrize("case", [param for suite in selected_suites() for param in unified_params(suite)])
def test_unified(case, unified_servers):  # noqa: F811 (the imported fixture)
    run_case(unified_servers, case)
