"""``install_as_pymongo()``: code written for PyMongo imports greenmongo unchanged.

Most gevent applications do not call the driver alone: ODMs, Flask extensions, task-queue result
backends and load-test tools import ``pymongo``, ``bson`` and ``gridfs`` themselves. Called first
thing in the process (before anything imports those), ``install_as_pymongo()`` puts a finder at
the front of ``sys.meta_path`` that resolves

- ``pymongo`` and ``pymongo.<module>`` to ``greenmongo`` and ``greenmongo.<module>``,
- ``bson`` and ``bson.<module>`` to ``greenmongo.bson`` and ``greenmongo.bson.<module>``,
- ``gridfs`` and ``gridfs.<module>`` to ``greenmongo.gridfs`` and ``greenmongo.gridfs.<module>``,

the convention ``pymysql.install_as_MySQLdb()`` set. Submodules are greenmongo's own module
objects (``pymongo.errors is greenmongo.errors``), so exception classes, ``isinstance`` checks and
monkey-patches agree whichever name was used. The one exception is the root ``pymongo`` module:
it is a thin facade over ``greenmongo`` whose ``version``/``version_tuple``/``__version__`` report
the PyMongo release whose API greenmongo implements, because libraries gate features on them
(greenmongo's own version stays ``greenmongo.version``).

Limits (also in the migration guide): only PyMongo's synchronous API is there
(``pymongo.asynchronous`` is not); PyMongo's private modules (``pymongo.synchronous.*``,
``bson._cbson``, ``pymongo.message``, ...) do not exist; ``importlib.metadata`` still describes the
installed distributions, not greenmongo; objects report greenmongo module names in ``repr`` and
pickles. If the real ``pymongo``, ``bson`` or ``gridfs`` is already imported, two drivers would be
live in one process with different classes: that is refused with ``ImportError``.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import types
from typing import TYPE_CHECKING, Any, Optional, Sequence

from greenmongo._version import PYMONGO_API_VERSION, PYMONGO_API_VERSION_TUPLE

#: The names libraries import, and the greenmongo package each one resolves to.
ALIASES = {"pymongo": "greenmongo", "bson": "greenmongo.bson", "gridfs": "greenmongo.gridfs"}
#: greenmongo packages that are their own alias root, never reachable as ``pymongo.<name>``.
_NOT_UNDER_PYMONGO = frozenset({"bson", "gridfs", "dropin"})


class _PymongoFacade(types.ModuleType):
    """The ``pymongo`` root: greenmongo's namespace, with PyMongo's version attributes."""

    def __init__(self, target: types.ModuleType) -> None:
        super().__init__("pymongo", target.__doc__)
        self.__dict__["_greenmongo"] = target
        # A package whose submodules only the finder resolves: with an empty path, a name the finder
        # declines (``pymongo.bson``) is not found instead of being loaded a second time from disk.
        self.__path__: list = []
        self.version = self.__version__ = PYMONGO_API_VERSION
        self.version_tuple = PYMONGO_API_VERSION_TUPLE

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["_greenmongo"], name)

    def __dir__(self) -> list:
        return sorted(set(dir(self.__dict__["_greenmongo"])) | set(self.__dict__))

    def get_version_string(self) -> str:
        return PYMONGO_API_VERSION


if TYPE_CHECKING:
    from importlib.abc import Loader as _LoaderBase
else:
    _LoaderBase = object


class _AliasLoader(_LoaderBase):
    """Hands importlib greenmongo's already-importable module instead of executing anything.

    Not an ``importlib.abc.Loader`` subclass (importlib needs only these two methods): importing
    importlib.abc imports importlib.resources and with it tempfile, shutil, bz2 and lzma, ~20 ms of every
    ``import greenmongo``.
    """

    def __init__(self, real_name: str, root: bool) -> None:
        self.real_name = real_name
        self.root = root

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = importlib.import_module(self.real_name)
        if self.root and spec.name == "pymongo":
            return _PymongoFacade(module)
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: the greenmongo module is already initialised."""


class AliasFinder:
    """Resolves ``pymongo``/``bson``/``gridfs`` (and their submodules) to greenmongo's modules.

    A meta path finder needs only ``find_spec`` (see _AliasLoader for why no importlib.abc base).
    """

    def find_spec(self, fullname: str, path: Optional[Sequence[str]] = None,
                  target: Optional[types.ModuleType] = None) -> Optional[importlib.machinery.ModuleSpec]:
        head, _, rest = fullname.partition(".")
        real_root = ALIASES.get(head)
        if real_root is None:
            return None
        if head == "pymongo" and rest.partition(".")[0] in _NOT_UNDER_PYMONGO:
            return None
        real_name = f"{real_root}.{rest}" if rest else real_root
        try:
            real_spec = importlib.util.find_spec(real_name)
        except ModuleNotFoundError:
            return None
        if real_spec is None:
            return None
        return importlib.machinery.ModuleSpec(
            fullname, _AliasLoader(real_name, root=not rest),
            is_package=real_spec.submodule_search_locations is not None)


def _foreign(name: str) -> bool:
    """A ``name`` module (or submodule) is imported and is not greenmongo's."""
    for key, module in list(sys.modules.items()):
        if key == name or key.startswith(name + "."):
            real = getattr(module, "__name__", "")
            if isinstance(module, _PymongoFacade) or real.startswith("greenmongo"):
                continue
            return True
    return False


def install_as_pymongo() -> None:
    """Make ``import pymongo``/``bson``/``gridfs`` (and submodules) resolve to greenmongo.

    Call it first thing in a gevent process, before any library imports PyMongo. Idempotent.
    Raises ImportError if the real ``pymongo``, ``bson`` or ``gridfs`` is already imported.
    """
    if any(isinstance(finder, AliasFinder) for finder in sys.meta_path):
        return
    already = [name for name in ALIASES if _foreign(name)]
    if already:
        raise ImportError(
            f"install_as_pymongo() must run before anything imports {', '.join(already)}: the real "
            f"PyMongo/bson modules are already loaded in this process, and two drivers with different classes "
            f"cannot share it. Call greenmongo.install_as_pymongo() first thing (e.g. at the top of your WSGI "
            f"module or gunicorn config), before importing libraries built on PyMongo.")
    sys.meta_path.insert(0, AliasFinder())


def uninstall() -> None:
    """Remove the finder and the alias modules (for tests; a running app has no reason to)."""
    sys.meta_path[:] = [finder for finder in sys.meta_path if not isinstance(finder, AliasFinder)]
    for key in list(sys.modules):
        if key.partition(".")[0] in ALIASES and _alias_module(key):
            del sys.modules[key]


def _alias_module(key: str) -> bool:
    module = sys.modules.get(key)
    return isinstance(module, _PymongoFacade) or getattr(module, "__name__", "").startswith("greenmongo")
