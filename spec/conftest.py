from __future__ import annotations

import pytest

from spec.report import SuiteTally
from spec.support import in_ci, iter_missing, spec_dir
from spec.unified import fixtures as unified_fixtures
from tests.plugins import distributed


def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.has_plugin("spec-suite-tally"):
        config.pluginmanager.register(SuiteTally(), "spec-suite-tally")


def pytest_runtest_setup(item: pytest.Item) -> None:
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return
    for missing in iter_missing(callspec.params.values()):
        message = f"spec data for {missing.where} not found under {spec_dir()} (set GREENMONGO_SPEC_DIR)"
        if in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


def pytest_sessionfinish(session: pytest.Session) -> None:
    distributed.hand_over(session.config, "timing_reruns", [list(rerun) for rerun in unified_fixtures.RERUNS])


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: object, error: object) -> None:
    """pytest-xdist's controller: a worker's reruns join the session's."""
    unified_fixtures.RERUNS.extend((case, failure) for case, failure in distributed.handed_over(node, "timing_reruns")
                                   or ())


def pytest_terminal_summary(terminalreporter) -> None:
    """The unified cases that failed and then passed on a rerun (spec/unified/fixtures.py TIMING_RERUNS)."""
    if not unified_fixtures.RERUNS:
        return
    terminalreporter.section("timing reruns")
    terminalreporter.write_line(f"{len(unified_fixtures.RERUNS)} unified case(s) passed only on a rerun; "
                                "their first failure:")
    for case, error in unified_fixtures.RERUNS:
        terminalreporter.write_line(f"  {case}")
        terminalreporter.write_line(f"      {error}")
