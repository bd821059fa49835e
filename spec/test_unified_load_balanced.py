"""The unified suites against a load-balanced deployment, one pytest item per test case.

The Load Balancer spec's tests README asks drivers to run its own suite and the other unified suites
against a load-balanced cluster. Here that cluster is the suite's SecantusDB behind two loopback load
balancers (tests/servers/load_balancer.py): one presenting one service (SINGLE_MONGOS_LB_URI, the
internal client's and ``useMultipleMongoses: false`` clients'), one presenting two services with
distinct serviceIds (MULTI_MONGOS_LB_URI). Set both variables (and MONGODB_URI) to run against a real
load-balanced deployment instead. Cases written for other topologies skip (spec/skip_ledger.py says
why); known failures are ``KNOWN_FAILURES_LOAD_BALANCED`` in spec/unified/known_failures.py.
"""

from __future__ import annotations

import pytest

from spec.unified.fixtures import run_case, unified_params, unified_servers  # noqa: F401 (fixture)
from spec.test_unified_suites import UNIFIED_SUITES
from spec.unified.known_failures import LOAD_BALANCED

#: The load-balancers suite, then every unified suite the replica-set run has (spec/test_unified_suites.py):
#: the README asks for all of them against a load-balanced cluster.
LOAD_BALANCED_SUITES = ["load-balancers/tests", *UNIFIED_SUITES]


@pytest.mark.parametrize("case", [param for suite in LOAD_BALANCED_SUITES
                                  for param in unified_params(suite, deployment=LOAD_BALANCED)])
def test_unified_load_balanced(case, unified_servers):  # noqa: F811 (the imported fixture)
    run_case(unified_servers, case)
