"""greenmongo's own version, and the PyMongo release whose public API it implements.

Kept apart from ``greenmongo/__init__`` so that no inner module has to import the package root
(net/metadata needs the version for the handshake).
"""

from __future__ import annotations

__version__ = "0.1.0.dev0"


def _version_tuple(text: str) -> tuple:
    """``"4.20.0"`` -> (4, 20, 0); ``"0.1.0.dev0"`` -> (0, 1, 0, ".dev0"): PyMongo's shape."""
    numbers, _, rest = text.partition(".dev")
    parts: tuple = tuple(int(part) for part in numbers.split("."))
    return parts + (f".dev{rest}",) if _ else parts


version_tuple = _version_tuple(__version__)

#: The PyMongo release whose synchronous public API (and ``bson``/``gridfs``) greenmongo follows.
#: Under ``install_as_pymongo()`` the ``pymongo`` module reports it as ``version``/``version_tuple``,
#: so that libraries gating features on PyMongo's version take the paths greenmongo supports.
PYMONGO_API_VERSION = "4.20.1"
PYMONGO_API_VERSION_TUPLE = (4, 20, 1)
