"""Root pytest configuration: how the whole suite runs under gevent.

``GREENMONGO_TEST_PATCHED=1`` runs everything in a fully monkey-patched process (patching must
happen before anything imports socket, ssl or threading, hence here, first). Without it the suite
runs unpatched: greenmongo must be cooperative in both worlds.
"""

import os

if os.environ.get("GREENMONGO_TEST_PATCHED", "").lower() in ("1", "true", "yes"):
    from gevent import monkey

    monkey.patch_all()

pytest_plugins = ["tests.plugins.hub_watchdog"]


def pytest_collection_modifyitems(config, items):
    """In the patched pass, skip ``one_pass`` tests: they already ran both worlds in subprocesses
    (or do no gevent I/O at all) during the unpatched pass; running them again only costs CI time."""
    if os.environ.get("GREENMONGO_TEST_PATCHED", "").lower() not in ("1", "true", "yes"):
        return
    import pytest

    skip = pytest.mark.skip(reason="one_pass: covered by the unpatched pass (own subprocesses / no gevent I/O)")
    for item in items:
        if item.get_closest_marker("one_pass") is not None:
            item.add_marker(skip)
