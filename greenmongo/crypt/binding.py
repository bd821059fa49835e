"""The one place pymongocrypt is imported: lazily, and without letting it pull in ``bson``/``pymongo``.

pymongocrypt's ``mongocrypt`` module imports its credentials helper, which imports ``pymongo_auth_aws``
when that is installed (and that imports PyMongo's ``bson``). greenmongo never uses those helpers (it
answers libmongocrypt's credential requests itself), so the import is blocked for the duration of ours
when nobody has imported it yet.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

from greenmongo.errors import ConfigurationError

#: What ``pip install`` needs for client-side encryption.
EXTRA_HINT = "install it with: python -m pip install 'greenmongo[encryption]'"
_BLOCKED = ("pymongo_auth_aws", "pymongo_auth_aws.auth")


class Crypt:
    """The pymongocrypt pieces greenmongo uses (attributes filled by :func:`load`)."""

    lib: Any
    MongoCrypt: Any
    MongoCryptOptions: Any
    ExplicitEncryptOpts: Any
    DataKeyOpts: Any
    MongoCryptCallback: Any
    MongoCryptError: type[Exception]
    version: str


_loaded: Crypt | None = None


def load() -> Crypt:
    """pymongocrypt's binding, or ConfigurationError naming the ``encryption`` extra."""
    global _loaded
    if _loaded is not None:
        return _loaded
    blocked = [name for name in _BLOCKED if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None  # type: ignore[assignment]  # makes "import" raise ImportError
    try:
        import pymongocrypt
        from pymongocrypt import mongocrypt, options
        from pymongocrypt.binding import lib
        from pymongocrypt.errors import MongoCryptError
        from pymongocrypt.synchronous.state_machine import MongoCryptCallback
    except ImportError as exc:
        raise ConfigurationError(
            f"client-side field level encryption requires the pymongocrypt library ({exc}): {EXTRA_HINT}"
        ) from None
    finally:
        for name in blocked:
            if sys.modules.get(name) is None:
                del sys.modules[name]
    crypt = Crypt()
    crypt.lib = lib
    crypt.MongoCrypt = mongocrypt.MongoCrypt
    crypt.MongoCryptOptions = options.MongoCryptOptions
    crypt.ExplicitEncryptOpts = options.ExplicitEncryptOpts
    crypt.DataKeyOpts = options.DataKeyOpts
    crypt.MongoCryptCallback = MongoCryptCallback
    crypt.MongoCryptError = MongoCryptError
    crypt.version = getattr(pymongocrypt, "__version__", "?")
    _loaded = crypt
    return crypt


def available() -> bool:
    try:
        load()
    except ConfigurationError:
        return False
    return True


def module() -> ModuleType:
    """pymongocrypt itself (for isinstance checks on its errors)."""
    load()
    return sys.modules["pymongocrypt"]
