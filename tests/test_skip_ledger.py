"""The skip ledger: unlisted skips and stale entries fail a run; subsets judge only what they exercised."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from spec.skip_ledger import API_GAP, CATEGORIES, ENVIRONMENT, LEDGER, Allowed
from tests.plugins.skip_ledger import ONE_PASS_REASON, RunRecord, SkipLedger, describe, judge

pytestmark = pytest.mark.one_pass  # no gevent I/O

ROOT = Path(__file__).resolve().parent.parent
A = "t/test_a.py"
B = "t/test_b.py"


def record(collected, skips=None, ran=None, narrowed=(), covered=()):
    return RunRecord(collected=list(collected), narrowed_files=set(narrowed),
                     ran=set(collected if ran is None else ran), covered=set(covered), skips=dict(skips or {}))


def test_a_skip_needs_an_entry_matching_node_and_message() -> None:
    ledger = [Allowed(f"{A}::test_x[*]", r"^needs a sharded cluster$", "deployment", "why")]
    run = record([f"{A}::test_x[1]", f"{A}::test_x[2]", f"{A}::test_y"],
                 skips={f"{A}::test_x[1]": "needs a sharded cluster",
                        f"{A}::test_x[2]": "greenmongo's Collection has no find",
                        f"{A}::test_y": "needs a sharded cluster"})
    verdict = judge(run, ledger)
    assert verdict.allowed == {0: [f"{A}::test_x[1]"]}
    assert sorted(verdict.unlisted) == [(f"{A}::test_x[2]", "greenmongo's Collection has no find"),
                                        (f"{A}::test_y", "needs a sharded cluster")]
    assert not verdict.ok


def test_brackets_in_patterns_are_literal() -> None:
    ledger = [Allowed(f"{A}::test_x[a/b.json::*]", "skip", "decision", "why")]
    assert judge(record([f"{A}::test_x[a/b.json::c]"], skips={f"{A}::test_x[a/b.json::c]": "skip"}), ledger).ok
    run = record([f"{A}::test_x[a]"], skips={f"{A}::test_x[a]": "skip"})
    assert judge(run, ledger).unlisted  # "[ab]" is not a character class


def test_an_entry_is_stale_when_its_whole_file_ran_without_that_skip() -> None:
    ledger = [Allowed(f"{A}::test_x*", "gone", "requirement", "why"),
              Allowed(f"{A}::test_nothing_matches", "gone", "requirement", "why")]
    verdict = judge(record([f"{A}::test_x1", f"{A}::test_y"]), ledger)
    assert verdict.stale == [0, 1] and not verdict.ok
    lines = "\n".join(describe(verdict, record([]), ledger))
    assert "STALE LEDGER ENTRIES (2;" in lines and "test_nothing_matches" in lines


@pytest.mark.parametrize("run", [
    record([f"{A}::test_x1"], narrowed=[A]),                # -k / -m / --deselect, or A::node arguments
    record([f"{B}::test_z"]),                                # A not collected at all
    record([f"{A}::test_x1", f"{A}::test_x2"], ran=[f"{A}::test_x1"]),  # -x stopped before test_x2
    record([f"{A}::test_x1"], covered=[f"{A}::test_x1"]),   # the patched pass leaves it to the unpatched
], ids=["narrowed", "not-collected", "stopped-early", "patched-pass"])
def test_subsets_do_not_judge_entries_they_did_not_exercise(run) -> None:
    ledger = [Allowed(f"{A}::test_x*", "gone", "requirement", "why")]
    verdict = judge(run, ledger)
    assert verdict.stale == [] and verdict.unjudged == 1


def test_patched_pass_skips_are_counted_apart() -> None:
    run = record([f"{A}::t1", f"{A}::t2"], covered=[f"{A}::t1", f"{A}::t2"],
                 skips={f"{A}::t1": ONE_PASS_REASON, f"{A}::t2": "something else"})
    verdict = judge(run, [])
    assert verdict.covered == 1 and verdict.unlisted == [(f"{A}::t2", "something else")]


def test_inactive_entries_allow_nothing_and_are_never_stale() -> None:
    ledger = [Allowed(f"{A}::*", "x", ENVIRONMENT, "why", when=(lambda: False,))]
    verdict = judge(record([f"{A}::t"], skips={f"{A}::t": "x"}), ledger)
    assert verdict.unlisted == [(f"{A}::t", "x")] and verdict.stale == [] and verdict.unjudged == 0


def test_environment_entries_are_never_stale() -> None:
    ledger = [Allowed(f"{A}::*", "no C extension", ENVIRONMENT, "why")]
    verdict = judge(record([f"{A}::t"]), ledger)
    assert verdict.ok and verdict.stale == [] and verdict.unjudged == 0


def test_missing_spec_data_masks_the_files_other_entries() -> None:
    ledger = [Allowed("t/*", "^spec data for", ENVIRONMENT, "why", masks_file=True),
              Allowed(f"{A}::test_x[suite/*]", "requirement", "requirement", "why")]
    run = record([f"{A}::test_x[suite::MISSING]"], skips={f"{A}::test_x[suite::MISSING]": "spec data for suite"})
    verdict = judge(run, ledger)
    assert verdict.ok and verdict.unjudged == 1


def test_the_ledger_is_well_formed() -> None:
    seen = set()
    for entry in LEDGER:
        assert entry.category in CATEGORIES, entry
        assert entry.why.strip() and entry.reason.strip(), entry
        re.compile(entry.reason)
        assert (entry.nodes, entry.reason) not in seen, entry
        seen.add((entry.nodes, entry.reason))
        test_file = entry.nodes.split("::", 1)[0]
        if "*" in test_file:  # can never be judged stale: only for conditional environment rules
            assert entry.category == ENVIRONMENT and entry.when, entry
        else:
            assert (ROOT / test_file).is_file(), entry
    assert all(entry.reason for entry in LEDGER if entry.category == API_GAP)


@pytest.mark.parametrize("message", [
    "greenmongo's Collection has no find (unified operation find)",
    "greenmongo's Collection.find has no 'hint' parameter (unified operation find)",
    "greenmongo's MongoClient has no start_session (sessions)",
    "greenmongo has no GridFSBucket",
])
def test_a_missing_pymongo_method_or_argument_is_never_allowed_quietly(message) -> None:
    """The unified runner skips when the driver lacks a method or keyword: only an API_GAP entry may allow that."""
    suites = {entry.nodes.split("[", 1)[1].split("/*", 1)[0] for entry in LEDGER if "test_unified[" in entry.nodes}
    nodes = [f"spec/test_unified_suites.py::test_unified[{suite}/x.json::y]" for suite in suites]
    assert nodes
    ledger = [entry for entry in LEDGER if entry.category != ENVIRONMENT]  # e.g. the PyMongo peer's runs
    verdict = judge(record(nodes, skips={node: message for node in nodes}), ledger)
    allowed_by = {ledger[index].category for index in verdict.allowed}
    assert allowed_by <= {API_GAP}, allowed_by


# -- through pytest ------------------------------------------------------------------------------

TESTS = textwrap.dedent("""
    import pytest

    @pytest.mark.skip(reason="marker skip")
    def test_marker():
        pass

    @pytest.mark.skipif(True, reason="skipif skip")
    def test_skipif():
        pass

    @pytest.fixture
    def needs():
        pytest.skip("fixture skip")

    def test_fixture(needs):
        pass

    def test_inside():
        pytest.skip("call skip")

    @pytest.mark.xfail(strict=True, reason="known")
    def test_known():
        assert False

    def test_passes():
        pass
""")


def _run(pytester: pytest.Pytester, ledger, *args):
    pytester.makepyfile(test_mod=TESTS, test_gone="import pytest\npytest.importorskip('no_such_module_xyz')\n")
    plugin = SkipLedger(ledger)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", *args, plugins=[plugin])
    return result, plugin


def _allow(name, message):
    return Allowed(f"test_mod.py::{name}", f"^{message}$", "decision", "why")


ALL = [_allow("test_marker", "marker skip"), _allow("test_skipif", "skipif skip"),
       _allow("test_fixture", "fixture skip"), _allow("test_inside", "call skip"),
       Allowed("test_gone.py", "no_such_module_xyz", "decision", "why")]


def test_every_kind_of_skip_is_recorded_and_unlisted_ones_fail(pytester: pytest.Pytester) -> None:
    result, plugin = _run(pytester, ALL[:2])
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert set(plugin.record.skips) == {"test_mod.py::test_marker", "test_mod.py::test_skipif",
                                        "test_mod.py::test_fixture", "test_mod.py::test_inside", "test_gone.py"}
    result.stdout.fnmatch_lines(["*xfails*1 failed as expected*", "*SKIPS NOT IN THE LEDGER (3;*", "  call skip",
                                 "      test_mod.py::test_inside", "  could not import 'no_such_module_xyz'*",
                                 "      test_gone.py", "  fixture skip"])


def test_a_fully_allowed_run_passes_and_a_stale_entry_fails_it(pytester: pytest.Pytester) -> None:
    result, _ = _run(pytester, ALL)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result, _ = _run(pytester, [*ALL, _allow("test_passes", "never")])
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*STALE LEDGER ENTRIES (1;*", "*test_passes*"])
    result, _ = _run(pytester, [*ALL, _allow("test_passes", "never")], "-k", "not test_inside")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()  # a subset: test_mod.py is not judged


# -- under pytest-xdist --------------------------------------------------------------------------

class _Node:
    """What pytest-xdist's controller sees of a finished worker."""

    def __init__(self, **output) -> None:
        self.workeroutput = output


def test_a_controller_judges_the_merge_of_its_workers_records() -> None:
    from types import SimpleNamespace

    from tests.plugins import distributed

    collected = [f"{A}::one", f"{A}::two", f"{B}::three"]
    first = record(collected, skips={f"{A}::one": "allowed"}, ran=[f"{A}::one", f"{A}::two"])
    second = record(collected, skips={f"{B}::three": "nobody allows this"}, ran=[f"{B}::three"])
    entries = [Allowed(f"{A}::one", "^allowed$", "decision", "why"),
               Allowed(f"{A}::two", "^never$", "decision", "why")]  # ran on the first worker without skipping
    controller = SkipLedger(entries, role=distributed.CONTROLLER)
    controller.pytest_runtest_logreport(SimpleNamespace(when="setup", nodeid="ignored"))  # the workers record
    for worker in (first, second):
        controller.pytest_testnodedown(_Node(skip_ledger=worker.to_json()), None)
    controller.pytest_testnodedown(_Node(), None)  # a worker that crashed hands nothing over
    session = SimpleNamespace(exitstatus=pytest.ExitCode.OK)
    controller.pytest_sessionfinish(session, 0)
    assert controller.record.ran == set(collected) and controller.workers_down == 2
    assert controller.judgement.allowed == {0: [f"{A}::one"]}
    assert controller.judgement.unlisted == [(f"{B}::three", "nobody allows this")]
    assert controller.judgement.stale == [1]
    assert session.exitstatus == pytest.ExitCode.TESTS_FAILED


def test_a_worker_hands_its_record_over_and_does_not_judge_its_share() -> None:
    from types import SimpleNamespace

    from tests.plugins import distributed

    worker = SkipLedger([], role=distributed.WORKER)
    worker.record = record([f"{A}::one"], skips={f"{A}::one": "unlisted"})
    config = SimpleNamespace(workeroutput={})
    session = SimpleNamespace(config=config, exitstatus=pytest.ExitCode.OK)
    worker.pytest_sessionfinish(session, 0)
    assert RunRecord.from_json(config.workeroutput["skip_ledger"]) == worker.record
    assert worker.judgement is None and session.exitstatus == pytest.ExitCode.OK


def test_the_xdist_group_suffix_is_not_part_of_a_node_id_the_ledger_sees() -> None:
    from types import SimpleNamespace

    from tests.plugins import distributed

    worker = SkipLedger([], role=distributed.WORKER)
    worker.pytest_runtest_logreport(SimpleNamespace(
        when="setup", nodeid="tests/test_x.py::test_y[user@host]@gm:test_x.py", skipped=True, passed=False,
        failed=False, longrepr=("f", 1, "Skipped: why")))
    assert worker.record.ran == {"tests/test_x.py::test_y[user@host]"}
    assert worker.record.skips == {"tests/test_x.py::test_y[user@host]": "why"}
    assert distributed.plain_nodeid("spec/t.py::c[mongodb://u@h/?x=@gm:y]") == "spec/t.py::c[mongodb://u@h/?x=@gm:y]"
