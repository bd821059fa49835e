"""JSON schema validation of unified test files, and the runner's schema version support.

A file is validated against the schema of its own ``schemaVersion``
(``schema-1.3.json`` for "1.3"; a schema validates every earlier minor version
of its major too), falling back to ``schema-latest.json`` when the version is
malformed or has no file of its own. Validation reads the file as plain JSON:
the schema describes the text, not the Extended JSON values.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any, Optional

import jsonschema

from spec.support import spec_dir

#: The newest schema version this runner accepts (files up to 1.28 are processed; features the
#: runner lacks are reported as NotSupported skips, never silently ignored).
SUPPORTED_SCHEMA_VERSION = (1, 28)

_VERSION = re.compile(r"^[0-9]+(\.[0-9]+){0,2}$")


def schema_folder() -> Path:
    return spec_dir() / "unified-test-format"


def parse_version(text: Any) -> Optional[tuple[int, int, int]]:
    """"1.2" -> (1, 2, 0); None for anything that is not a version string."""
    if not isinstance(text, str) or not _VERSION.match(text):
        return None
    parts = [int(part) for part in text.split(".")] + [0, 0]
    return parts[0], parts[1], parts[2]


def is_supported(schema_version: Any) -> bool:
    """Same major as ours and no newer minor (patch levels never change the format)."""
    version = parse_version(schema_version)
    if version is None:
        return False
    major, minor, _patch = version
    return major == SUPPORTED_SCHEMA_VERSION[0] and minor <= SUPPORTED_SCHEMA_VERSION[1]


@functools.lru_cache(maxsize=None)
def _validator(name: str) -> Any:
    with open(schema_folder() / f"schema-{name}.json", "rb") as fh:
        schema = json.load(fh)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def schema_name_for(schema_version: Any) -> str:
    version = parse_version(schema_version)
    if version is not None:
        name = f"{version[0]}.{version[1]}"
        if (schema_folder() / f"schema-{name}.json").exists():
            return name
    return "latest"


def schema_errors(document: Any) -> list[str]:
    """Every schema violation of a parsed (plain JSON) test file; empty when it is valid."""
    schema_version = document.get("schemaVersion") if isinstance(document, dict) else None
    validator = _validator(schema_name_for(schema_version))
    errors = sorted(validator.iter_errors(document), key=lambda error: list(error.absolute_path))
    return [f"{'/'.join(str(part) for part in error.absolute_path) or '<root>'}: {error.message}"
            for error in errors]


def validate(document: Any) -> None:
    """Raise ``jsonschema.ValidationError`` when the test file breaks its schema."""
    errors = schema_errors(document)
    if errors:
        raise jsonschema.ValidationError("; ".join(errors[:5]) + (" ..." if len(errors) > 5 else ""))
