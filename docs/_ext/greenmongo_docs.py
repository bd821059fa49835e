"""Sphinx directives of greenmongo's docs.

``deliberate-differences PATH NAME`` renders the ``NAME`` dict (difference key -> reason) of the test file
``PATH`` as a table. The tests keep those lists true (each entry is shown by a test), so the migration
guide quotes them instead of a copy that could drift. The file is read with ``ast``, not imported: the
docs build needs neither pytest nor PyMongo.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

ROOT = Path(__file__).resolve().parents[2]


def read_dict(path: Path, name: str) -> dict[str, str]:
    """The literal ``name = {...}`` (or ``name: dict[...] = {...}``) assigned at the top of ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            value = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            value = node.value
        else:
            continue
        found = ast.literal_eval(value) if value is not None else None
        if not isinstance(found, dict):
            raise ValueError(f"{name} in {path} is not a dict literal")
        return {str(key): str(reason) for key, reason in found.items()}
    raise ValueError(f"{path} assigns no {name}")


class DeliberateDifferences(SphinxDirective):
    required_arguments = 2
    has_content = False

    def run(self) -> list[nodes.Node]:
        relative, name = self.arguments
        path = ROOT / relative
        self.env.note_dependency(str(path))
        try:
            entries = read_dict(path, name)
        except (OSError, SyntaxError, ValueError) as exc:
            raise self.error(f"deliberate-differences: {exc}") from exc
        table = nodes.table(classes=["deliberate-differences"])
        group = nodes.tgroup(cols=2)
        table += group
        group += nodes.colspec(colwidth=1)
        group += nodes.colspec(colwidth=4)
        head = nodes.thead()
        head += self._row("difference", "what greenmongo does, and PyMongo")
        group += head
        body = nodes.tbody()
        for key, reason in entries.items():
            body += self._row(nodes.literal(text=key), reason)
        group += body
        source = nodes.paragraph()
        source += nodes.Text("From ")
        source += nodes.literal(text=f"{name}")
        source += nodes.Text(" in ")
        source += nodes.literal(text=relative)
        source += nodes.Text(f" ({len(entries)} entries; a test shows each one).")
        return [table, source]

    @staticmethod
    def _row(*cells: Any) -> nodes.row:
        row = nodes.row()
        for cell in cells:
            entry = nodes.entry()
            paragraph = nodes.paragraph()
            paragraph += cell if isinstance(cell, nodes.Node) else nodes.Text(cell)
            entry += paragraph
            row += entry
        return row


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("deliberate-differences", DeliberateDifferences)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
