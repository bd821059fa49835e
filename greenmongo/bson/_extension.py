"""Finding the optional C accelerator (``_speedups``), for decoder.py and encoder.py."""

from __future__ import annotations

import os
from typing import Any, Optional


def import_speedups() -> Optional[Any]:
    """The extension module, or None when it was not built or GREENMONGO_NO_EXTENSIONS=1 forbids it."""
    if os.environ.get("GREENMONGO_NO_EXTENSIONS", "") not in ("", "0"):
        return None
    try:
        from greenmongo.bson import _speedups
    except ImportError:
        return None
    return _speedups
