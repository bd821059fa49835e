from __future__ import annotations

import pytest

from spec.report import SuiteTally
from spec.support import in_ci, iter_missing, spec_dir


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
