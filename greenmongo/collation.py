"""PyMongo's import path ``pymongo.collation``: the names live in ``greenmongo.operations.collation``."""

from typing import Any, Mapping, Optional

from greenmongo.operations.collation import *  # noqa: F401,F403
from greenmongo.operations.collation import Collation


def validate_collation_or_none(value: Any) -> Optional[Mapping[str, Any]]:
    """A collation argument as the command's document: a Collation's document, a dict as is, or None;
    TypeError for anything else."""
    if value is None:
        return None
    if isinstance(value, Collation):
        return value.document
    if isinstance(value, dict):
        return value
    raise TypeError("collation must be a dict, an instance of collation.Collation, or None")
