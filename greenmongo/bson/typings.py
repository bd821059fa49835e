"""PyMongo's ``bson.typings``: the type aliases annotated code imports (``_DocumentType`` ...)."""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import TYPE_CHECKING, Any, TypeVar, Union

if TYPE_CHECKING:
    from array import array
    from mmap import mmap

    from greenmongo.bson.raw import RawBSONDocument

#: What the decoder can return: a mutable mapping or a RawBSONDocument.
_DocumentOut = Union[MutableMapping[str, Any], "RawBSONDocument"]
#: The document class a CodecOptions (and so a client, collection or cursor) is parameterised by.
_DocumentType = TypeVar("_DocumentType", bound=Mapping[str, Any])
_DocumentTypeArg = TypeVar("_DocumentTypeArg", bound=Mapping[str, Any])
#: The buffers ``decode`` and friends read.
_ReadableBuffer = Union[bytes, memoryview, bytearray, "mmap", "array"]  # type: ignore[type-arg]
