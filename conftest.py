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
