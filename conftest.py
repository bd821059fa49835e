"""Root pytest configuration: how the whole suite runs under gevent.

``GREENMONGO_TEST_PATCHED=1`` runs everything in a fully monkey-patched process (patching must
happen before anything imports socket, ssl or threading, hence here, first). Without it the suite
runs unpatched: greenmongo must be cooperative in both worlds.
"""

import os

if os.environ.get("GREENMONGO_TEST_PATCHED", "").lower() in ("1", "true", "yes"):
    from gevent import monkey

    monkey.patch_all()

import pytest  # noqa: E402 (after patching)

pytest_plugins = ["tests.plugins.hub_watchdog", "tests.plugins.skip_ledger", "pytester"]


#: Spec runners that only call pure functions on JSON (no sockets, no greenlets): the same calls in
#: both worlds, so the patched pass skips them.
_PURE_SPEC_MODULES = frozenset({
    "test_bson_corpus.py", "test_bson_binary_vector.py", "test_connection_string.py", "test_uri_options.py",
    "test_sdam.py", "test_server_selection.py", "test_max_staleness.py", "test_read_write_concern.py",
    "test_auth_legacy.py",
})
#: Unified suites the patched pass runs again: every kind of I/O path (CRUD, cursors, bulk, sessions,
#: transactions, retries with failpoints, change streams, GridFS, overload backoff, timeoutMS deadlines:
#: the CSOT suite is the only end-to-end test of greenlet-local timeout() blocks, deadline-bounded
#: sockets and waits in a patched process; it is timing-based, and as reliable patched as unpatched
#: with its reruns, spec/unified/fixtures.py TIMING_RERUNS). The other suites exercise the same paths
#: with other command shapes; the unpatched pass runs them all. The load-balanced run
#: (test_unified_load_balanced.py) runs the same suites again patched, plus the load-balancers suite.
_PATCHED_PASS_UNIFIED = ("crud/", "transactions/", "transactions-convenient-api/", "retryable-writes/",
                         "sessions/", "change-streams/", "gridfs/", "client-backpressure/", "valid-pass/",
                         "client-side-operations-timeout/")


#: Tests that time the hub, a pool's fairness, a deadline's overshoot or a workload against PyMongo's:
#: their bounds hold on a quiet machine, not beside other test processes. The CI runner
#: (tests/run.py) runs them after the rest, alone; ``pytest -n N`` users should do the same
#: (``-m "not quiet"``, then ``-m quiet``).
_QUIET_MODULES = frozenset({
    "test_hub_stress.py", "test_dns_hub_blocking.py", "test_pool_kill.py", "test_kill_safety_e2e.py",
    "test_pool_fairness.py", "test_idle_cost.py", "test_csot.py", "test_csot_prose.py", "test_fault_workload.py",
    "test_monitor_hub_waits.py", "test_hub_watchdog.py",
})


def _single_pass(item) -> bool:
    if item.get_closest_marker("one_pass") is not None:
        return True
    if item.path.name in _PURE_SPEC_MODULES:
        return True
    if item.path.name in ("test_unified_suites.py", "test_unified_format.py", "test_unified_load_balanced.py"):
        return not any(part in item.nodeid for part in _PATCHED_PASS_UNIFIED + ("load-balancers/",))
    return False


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by the markers added here
def pytest_collection_modifyitems(config, items):
    """In the patched pass, skip what the unpatched pass already covers for both worlds: ``one_pass``
    tests (own patched/unpatched subprocesses, or no gevent I/O), the pure JSON spec runners, and the
    unified suites outside ``_PATCHED_PASS_UNIFIED``: CI has 30 minutes for both passes (tests/run.py)."""
    grouped = getattr(config.option, "dist", "no") == "loadgroup"
    for item in items:
        if item.path.name in _QUIET_MODULES:
            item.add_marker(pytest.mark.quiet)
        if grouped and item.nodeid.startswith("tests/"):
            # pytest-xdist (tests/run.py): a module's tests stay on one worker, in order, with one set of
            # module fixtures; spec cases go one by one. The suffix xdist gives node ids is
            # tests/plugins/distributed.GROUP_SUFFIX.
            item.add_marker(pytest.mark.xdist_group(f"gm:{item.path.name}"))
    if os.environ.get("GREENMONGO_TEST_PATCHED", "").lower() not in ("1", "true", "yes"):
        return
    from tests.plugins.skip_ledger import mark_covered_by_unpatched_pass

    for item in items:
        if _single_pass(item):
            mark_covered_by_unpatched_pass(item)
