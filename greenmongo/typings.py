"""PyMongo's ``pymongo.typings``: the type aliases annotated code imports (``_DocumentType`` ...)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Optional, Tuple, TypeVar, Union

from greenmongo.bson.typings import _DocumentOut, _DocumentType, _DocumentTypeArg

if TYPE_CHECKING:
    from greenmongo.operations.collation import Collation

#: A server address: (host, port); a Unix socket's port is None.
_Address = Tuple[str, Optional[int]]
#: A collation as methods accept it: a document or a Collation.
_CollationIn = Union[Mapping[str, Any], "Collation"]
#: An aggregation pipeline.
_Pipeline = Sequence[Mapping[str, Any]]
#: A ``$clusterTime`` document.
ClusterTime = Mapping[str, Any]

_T = TypeVar("_T")


def strip_optional(elem: Optional[_T]) -> _T:
    """``elem`` typed as not None (for comprehensions over Optional values known to be set)."""
    assert elem is not None
    return elem


__all__ = ["_Address", "_CollationIn", "_DocumentOut", "_DocumentType", "_DocumentTypeArg", "_Pipeline",
           "strip_optional"]
