"""greenmongo: a MongoDB driver written natively on gevent, with PyMongo's API."""

from __future__ import annotations

__version__ = "0.1.0.dev0"

from greenmongo import errors  # noqa: E402
