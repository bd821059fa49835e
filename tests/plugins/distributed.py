"""The suite under pytest-xdist (``-n N``): which process this is, and how a worker's session-wide
findings reach the controller.

Workers run the tests; the controller only schedules them and receives their reports. What a plugin
judges over the whole session (the skip ledger, the hub watchdog, the timing reruns) is therefore
gathered by each worker and handed over in ``config.workeroutput`` when its session ends; the
controller's ``pytest_testnodedown`` collects it before its own session ends, and judges there.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

SINGLE, CONTROLLER, WORKER = "single", "controller", "worker"

#: ``--dist loadgroup`` appends ``@<group>`` to the node id of a test in an xdist group; the root
#: conftest.py names its groups ``gm:<module>``.
GROUP_SUFFIX = re.compile(r"@gm:[^@\]]*\Z")


def plain_nodeid(nodeid: str) -> str:
    """The node id without the xdist group suffix: what the ledger's patterns name."""
    return GROUP_SUFFIX.sub("", nodeid)


def role(config: pytest.Config) -> str:
    if hasattr(config, "workerinput"):
        return WORKER
    return CONTROLLER if getattr(config.option, "dist", "no") != "no" else SINGLE


def hand_over(config: pytest.Config, key: str, value: Any) -> None:
    """On a worker: ``value`` (JSON-like) goes to the controller with the worker's end of session."""
    output = getattr(config, "workeroutput", None)
    if output is not None:
        output[key] = value


def handed_over(node: Any, key: str) -> Any:
    """On the controller, in ``pytest_testnodedown``: what the worker handed over under ``key`` (None if
    it crashed before its session ended)."""
    output = getattr(node, "workeroutput", None) or {}
    return output.get(key)


def worker_name(node: Any) -> str:
    return str(getattr(node, "gateway", None) and node.gateway.id or "worker")
