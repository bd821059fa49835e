"""Sphinx configuration for greenmongo's documentation (``tox -e docs``; README "Documentation").

The API reference is generated from the docstrings at build time (autodoc; one page per module from
the lists in docs/api/*/index.rst, written by autosummary into ``generated/`` folders that are not
committed). Everything else is committed source: the guides in Markdown (MyST, so they also read
on GitHub) and the spec-compliance snapshot, which ``python -m spec report --markdown`` rewrites.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
# Document the checkout beside this file, not an installed greenmongo.
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(DOCS / "_ext"))

from greenmongo._version import __version__  # noqa: E402

project = "greenmongo"
author = "the greenmongo authors"
copyright = "the greenmongo authors"
release = __version__
version = ".".join(__version__.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "myst_parser",
    "greenmongo_docs",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
templates_path = ["_templates"]

# Markdown pages: headings get anchors (``gevent.md#threads`` links work in Sphinx as on GitHub).
myst_heading_anchors = 3



def _reexports() -> dict[str, list[tuple[str, str]]]:
    """What the modules that exist at a PyMongo import path by ``from greenmongo.x import *``
    (``greenmongo.read_preferences``) document: the star-imported names plus the module's own classes
    and functions, each with its autodoc directive. ``automodule`` alone would document none of them
    (imported) or, with ``:imported-members:``, everything down to ``typing.Optional``."""
    found = {}
    for path in sorted((ROOT / "greenmongo").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        sources = [node.module for node in tree.body if isinstance(node, ast.ImportFrom) and node.module
                   and any(alias.name == "*" for alias in node.names)]
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if not sources or hasattr(importlib.import_module(name), "__all__"):
            continue
        module = importlib.import_module(name)
        names: list[str] = []
        for source in sources:
            imported = importlib.import_module(source)
            names += getattr(imported, "__all__", None) or [
                key for key, value in vars(imported).items() if not key.startswith("_")
                and getattr(value, "__module__", None) == source]
        names += [key for key, value in vars(module).items() if not key.startswith("_")
                  and (inspect.isclass(value) or inspect.isfunction(value)) and value.__module__ == name]
        # Data is left out: its ``#:`` comment is in the source module, so autodoc would show its type's docstring.
        found[name] = [(_directive(getattr(module, key)), key) for key in dict.fromkeys(names)
                       if inspect.isclass(getattr(module, key)) or inspect.isfunction(getattr(module, key))]
    return found


def _directive(value: object) -> str:
    if inspect.isclass(value):
        return "autoexception" if issubclass(value, BaseException) else "autoclass"
    return "autofunction"


def _drop_stale_api_pages() -> None:
    """Delete generated pages of modules no longer listed (a leftover page would be "not in any toctree")."""
    for index in DOCS.glob("api/*/index.rst"):
        listed = index.read_text(encoding="utf-8")
        for page in (index.parent / "generated").glob("*.rst"):
            if not re.search(rf"^\s+{re.escape(page.stem.rsplit('.', 1)[-1])}\s*$", listed, re.M):
                page.unlink()


_drop_stale_api_pages()

# API reference.
autosummary_generate = True
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
autodoc_inherit_docstrings = True
autoclass_content = "class"
# Per-module choices the generated pages read (docs/_templates/autosummary/module.rst): members that a
# module re-exports for import compatibility but another page documents.
autosummary_context = {
    "api_reexports": _reexports(),
    # Classes document what they inherit (Collection's ``watch``, a cursor's ``close``), but not what
    # these bases give every subclass (an exception's ``args``, a dict's ``keys``).
    "api_inherited_stop": "object, BaseException, dict, int, str, bytes, float, tuple, list, Generic, Enum, Mapping, "
                          "MutableMapping",
    # Exception hierarchies: each class shows its bases, and the base documents the members they share once.
    "api_hierarchies": ["greenmongo.errors", "greenmongo.bson.errors", "greenmongo.gridfs.errors"],
    "api_exclude": {
        "greenmongo.cursor": "CommandCursor, RawBatchCommandCursor",
        "greenmongo.command_cursor": "core_of, open_command_cursor, raw_codec_options, RAW_BATCH_CODEC_OPTIONS",
        "greenmongo.collection": "check_options",
        "greenmongo.database": "validate_database_name",
        "greenmongo.gridfs.grid_file": "GridFS, GridFSBucket, CorruptGridFile, FileExists, NoFile",
    },
}

html_theme = "furo"
html_title = f"greenmongo {release}"
html_static_path: list[str] = []
