"""The skip ledger: every test skip the suite allows, each with why. Any other skip fails the run.

tests/plugins/skip_ledger.py (registered by the root conftest.py) checks each session against
``LEDGER``: a skip must match one active entry (node id pattern and skip message), and an entry
whose tests all ran without skipping that way is stale and fails the run as well. Patterns: ``*``
matches anything, every other character is literal (brackets included); the part before the first
``::`` must name one test file for the entry to be judged stale. ``reason`` is a regular expression
searched in the skip message, so the same test skipping for another reason is not allowed.

Categories, and what each promises:

* ``requirement``: the test's own requirements (runOnRequirements, runOn) exclude the test server,
  SecantusDB 8.2 as a one-member replica set. Permanent while that is the test deployment.
* ``deployment``: the test needs a deployment the suite does not run (load balancer, several
  members or mongoses, TLS cluster, authentication). Permanent for the same reason.
* ``not in PyMongo``: what the test exercises is not part of PyMongo 4.20's API either (removed
  in PyMongo 4, or never there), and greenmongo has PyMongo's API. Permanent.
* ``decision``: a choice the specifications allow or one greenmongo made and documents.
* ``not built``: a feature greenmongo does not have yet and says so (README "Not yet"); the entry
  goes when the feature lands.
* ``API gap``: PyMongo 4.20 has it and greenmongo does not. To fix: these are listed under their
  own heading below so that they stay visible.
* ``environment``: conditions of a local run (no spec data, no C extension, your own server);
  conditional, and never reported stale.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

REQUIREMENT = "requirement"
DEPLOYMENT = "deployment"
NOT_IN_PYMONGO = "not in PyMongo"
DECISION = "decision"
NOT_BUILT = "not built"
API_GAP = "API gap"
ENVIRONMENT = "environment"
CATEGORIES = (REQUIREMENT, DEPLOYMENT, NOT_IN_PYMONGO, DECISION, NOT_BUILT, API_GAP, ENVIRONMENT)


@dataclass(frozen=True)
class Allowed:
    """One allowed skip: which tests (``nodes``), which skip message (``reason``, a regex), and why."""

    nodes: str
    reason: str
    category: str
    why: str
    when: tuple[Callable[[], bool], ...] = ()
    """Conditions under which the entry applies (all must hold); outside them it allows nothing."""
    masks_file: bool = False
    """A skip it allows means the file's cases were not generated, so the file's other entries
    cannot be judged stale in that run (missing spec data)."""

    def is_active(self) -> bool:
        return all(condition() for condition in self.when)


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def local_run() -> bool:
    """Not CI: missing spec data is a skip (under CI, spec/conftest.py fails those tests)."""
    return not _in_ci()


def on_secantus() -> bool:
    """The tests start their own SecantusDB (no MONGODB_URI): the requirement entries describe that server."""
    return not os.environ.get("MONGODB_URI")


def own_server() -> bool:
    return not on_secantus()


def greenmongo_driver() -> bool:
    """The unified runner drives greenmongo (the default), not the PyMongo peer."""
    return (os.environ.get("GREENMONGO_UNIFIED_DRIVER") or "greenmongo").strip().lower() == "greenmongo"


def without_c_extension() -> bool:
    from greenmongo import bson

    return not bson.has_c()


UNIFIED = "spec/test_unified_suites.py::test_unified"
VALID_PASS = "spec/test_unified_format.py::test_valid_pass"
VALID_FAIL = "spec/test_unified_format.py::test_valid_fail"

_RUN_ON = r"runOnRequirements not met: "

ENVIRONMENT_ENTRIES = [
    Allowed("spec/*", r"^spec data for .+ not found under ", ENVIRONMENT,
            "a local run without the specifications' JSON (GREENMONGO_SPEC_DIR): each missing suite is one "
            "skipped MISSING case; under CI=true spec/conftest.py fails it instead", when=(local_run,),
            masks_file=True),
    Allowed("tests/test_bson_speedups.py::*", r"^bson-corpus spec data is not on disk$", ENVIRONMENT,
            "a local run without the specifications' JSON: the C/Python corpus comparison has no cases",
            when=(local_run,)),
    Allowed("tests/test_bson_speedups.py::*", r"^C extension not built, or GREENMONGO_NO_EXTENSIONS is set$|"
            r"^the C extension is not built here$", ENVIRONMENT,
            "the C accelerator is optional (no compiler, or GREENMONGO_NO_EXTENSIONS=1): its own tests skip",
            when=(without_c_extension,)),
    Allowed("spec/*", _RUN_ON, ENVIRONMENT,
            "MONGODB_URI points at your own deployment: which requirements it meets depends on it",
            when=(own_server,)),
]

LEDGER: list[Allowed] = [
    *ENVIRONMENT_ENTRIES,
]
