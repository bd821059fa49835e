"""Max Staleness spec tests.

Per the suite's README: build the TopologyDescription (with the file's
heartbeatFrequencyMS, else the default), select with the read preference, and
check ``suitable_servers`` and ``in_latency_window``, or that selection raises
for an invalid read preference (``error: true``). Uses the same builders as the
server selection runner.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from spec.support import file_params, load_json
from spec.test_server_selection import extended_json, run_selection_case, topology_from_spec


@pytest.mark.parametrize("path", file_params("max-staleness/tests", pattern="**/*.json"))
def test_max_staleness(path: Path) -> None:
    case = load_json(path, object_hook=extended_json)
    description = topology_from_spec(case["topology_description"], case.get("heartbeatFrequencyMS"))
    run_selection_case(case, description)
