"""Finding the optional C accelerator (``_speedups``), for decoder.py and encoder.py."""

from __future__ import annotations

import importlib
import os
from typing import Any, Optional


def import_speedups() -> Optional[Any]:
    """The extension module, or None when it was not built or GREENMONGO_NO_EXTENSIONS=1 forbids it."""
    if os.environ.get("GREENMONGO_NO_EXTENSIONS", "") not in ("", "0"):
        return None
    try:
        # By name: the extension has no stub, and an absent one is the normal pure-Python case.
        return importlib.import_module("greenmongo.bson._speedups")
    except ImportError:
        return None
