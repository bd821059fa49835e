"""Where spec data lives and how a JSON case becomes one pytest item.

Every item's id starts with the JSON file's path relative to the
specifications folder, so ``python -m spec report`` and ``-k`` both work
by suite folder and file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


def spec_dir() -> Path:
    return Path(os.environ.get("GREENMONGO_SPEC_DIR") or REPO_ROOT.parent / "shared" / "specifications")


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


class MissingSpecData:
    """Stands in for a suite whose JSON is not on disk: a skip locally, a failure in CI."""

    def __init__(self, where: str) -> None:
        self.where = where

    def __repr__(self) -> str:
        return f"MissingSpecData({self.where!r})"


def relpath(path: Path) -> str:
    return path.resolve().relative_to(spec_dir().resolve()).as_posix()


def spec_files(subdir: str, pattern: str = "*.json") -> list[Path]:
    folder = spec_dir() / subdir
    if not folder.is_dir():
        return []
    return sorted(folder.glob(pattern))


def load_json(path: Path, **kwargs: Any) -> Any:
    with open(path, "rb") as fh:
        return json.loads(fh.read().decode("utf-8"), **kwargs)


def case_id(path: Path, description: str = "") -> str:
    rel = relpath(path)
    return f"{rel}::{description}" if description else rel


def params(
    subdir: str,
    cases: Callable[[Path, Any], Iterable[tuple[str, Any]]],
    pattern: str = "*.json",
    json_kwargs: dict | None = None,
) -> list:
    """One ``pytest.param`` per case: ``cases(path, parsed_json)`` yields (description, case)."""
    files = spec_files(subdir, pattern)
    if not files:
        return [pytest.param(MissingSpecData(subdir), id=f"{subdir}::MISSING")]
    out = []
    for path in files:
        data = load_json(path, **(json_kwargs or {}))
        for description, case in cases(path, data):
            out.append(pytest.param(case, id=case_id(path, description)))
    return out


def file_params(subdir: str, pattern: str = "*.json") -> list:
    """One ``pytest.param`` per JSON file (for suites where a file is one case)."""
    files = spec_files(subdir, pattern)
    if not files:
        return [pytest.param(MissingSpecData(subdir), id=f"{subdir}::MISSING")]
    return [pytest.param(path, id=case_id(path)) for path in files]


def iter_missing(values: Iterable[Any]) -> Iterator[MissingSpecData]:
    for value in values:
        if isinstance(value, MissingSpecData):
            yield value
