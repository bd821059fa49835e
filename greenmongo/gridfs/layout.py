"""The GridFS data model as pure functions: chunk arithmetic, chunk checks, files documents, indexes.

Nothing here does I/O, so the rules the spec sets for stored files (how many chunks a length
implies, how long each must be, what a revision number selects, when an existing index counts
as the one GridFS needs) are tested without a server. GridIn, GridOut and GridFSBucket do the
I/O around them.
"""

from __future__ import annotations

import datetime
import numbers
from typing import Any, Iterator, Mapping, Optional, Sequence

from greenmongo.bson.int64 import Int64
from greenmongo.errors import CorruptGridFile

#: 255 KiB: a chunk document with its ``_id``, ``files_id`` and ``n`` still fits in 256 KiB.
DEFAULT_CHUNK_SIZE = 255 * 1024

#: The indexes GridFS needs (spec "Indexes"), as ordered (field, direction) pairs.
FILES_INDEX: tuple[tuple[str, int], ...] = (("filename", 1), ("uploadDate", 1))
CHUNKS_INDEX: tuple[tuple[str, int], ...] = (("files_id", 1), ("n", 1))

_INT32_MAX = 2 ** 31 - 1


def validate_chunk_size(chunk_size: Any) -> int:
    """A chunk size for new files: a positive int that fits the files document's Int32."""
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int):
        raise TypeError(f"chunk size must be an integer, not {type(chunk_size).__name__}")
    if not 0 < chunk_size <= _INT32_MAX:
        raise ValueError(f"chunk size must be between 1 and {_INT32_MAX}, got {chunk_size}")
    return chunk_size


def _stored_integer(document: Mapping[str, Any], field: str, default: Optional[int] = None) -> int:
    """A numeric field of a stored document as an int, whatever numeric BSON type wrote it."""
    value = document.get(field, default)
    if isinstance(value, bool) or not isinstance(value, (int, float, numbers.Integral)) or value != int(value):
        raise CorruptGridFile(f"files document field {field!r} is not a whole number: {value!r}")
    return int(value)


class ChunkLayout:
    """How a stored file of ``length`` bytes is cut into chunks of ``chunk_size`` bytes."""

    __slots__ = ("length", "chunk_size", "chunk_count")

    def __init__(self, length: int, chunk_size: int) -> None:
        if length < 0:
            raise CorruptGridFile(f"files document has a negative length: {length}")
        if length and chunk_size <= 0:
            raise CorruptGridFile(f"files document has a non-positive chunkSize: {chunk_size}")
        self.length = length
        self.chunk_size = chunk_size
        self.chunk_count = -(-length // chunk_size) if length else 0

    @classmethod
    def of_file(cls, file_document: Mapping[str, Any]) -> "ChunkLayout":
        """The layout a files document declares (length and chunkSize of any numeric type).

        A missing length means 0, as drivers have always read it; a missing chunkSize is only
        corrupt when there is data to cut.
        """
        length = _stored_integer(file_document, "length", 0)
        chunk_size = _stored_integer(file_document, "chunkSize", 0)
        return cls(length, chunk_size)

    def expected_size(self, n: int) -> int:
        """The data length chunk ``n`` must have: all are full but the last."""
        if n < self.chunk_count - 1:
            return self.chunk_size
        return self.length - self.chunk_size * (self.chunk_count - 1)

    def chunk_of(self, position: int) -> tuple[int, int]:
        """(chunk number, offset inside it) of a byte position."""
        return divmod(position, self.chunk_size)

    def check_chunk(self, document: Optional[Mapping[str, Any]], n: int) -> bytes:
        """The data of chunk ``n`` from the next chunk document the query returned (None: none left).

        The spec's download checks: the chunk must be the expected one (a different ``n`` means
        one is missing) and its data exactly as long as the layout says.
        """
        if document is None:
            raise CorruptGridFile(f"missing chunk: expected chunk #{n} of {self.chunk_count} but found none")
        found = document.get("n")
        if found != n:
            raise CorruptGridFile(f"missing chunk: expected chunk #{n} but found chunk with n={found!r}")
        data = document.get("data")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise CorruptGridFile(f"chunk #{n} has no binary data field")
        expected = self.expected_size(n)
        if len(data) != expected:
            raise CorruptGridFile(f"truncated chunk: chunk #{n} should be {expected} bytes but is {len(data)}")
        return data if type(data) is bytes else bytes(data)

    def check_no_extra_chunk(self, document: Optional[Mapping[str, Any]]) -> None:
        """After the last chunk: another one holding data means the file is inconsistent.

        An empty extra chunk is tolerated (old drivers wrote one for empty files); the spec lets
        drivers ignore extra chunks, but one that is met anyway is reported.
        """
        if document is None:
            return
        data = document.get("data")
        if data is not None and len(data):
            raise CorruptGridFile(f"extra chunk: expected {self.chunk_count} chunks but found chunk with "
                                  f"n={document.get('n')!r}")


class ChunkSplitter:
    """Cuts the bytes written to an upload into chunk-sized pieces, numbering them from 0.

    Whole chunks come out as soon as they are complete; the tail waits for more data or for
    ``finish()``. No empty chunk is ever produced (an empty file has no chunks).
    """

    __slots__ = ("chunk_size", "_tail", "chunks_cut", "bytes_cut")

    def __init__(self, chunk_size: int) -> None:
        self.chunk_size = chunk_size
        self._tail = bytearray()
        self.chunks_cut = 0
        self.bytes_cut = 0

    @property
    def length(self) -> int:
        """Bytes written so far, cut or not."""
        return self.bytes_cut + len(self._tail)

    @property
    def room(self) -> int:
        """How many bytes complete the current chunk (a natural read size for a source stream)."""
        return self.chunk_size - len(self._tail)

    def _cut(self, data: bytes) -> tuple[int, bytes]:
        n = self.chunks_cut
        self.chunks_cut = n + 1
        self.bytes_cut += len(data)
        return n, data

    def feed(self, data: Any) -> Iterator[tuple[int, bytes]]:
        """(n, data) for every chunk ``data`` completes; consume it fully before feeding more."""
        view = memoryview(data).cast("B")
        size = self.chunk_size
        tail = self._tail
        if tail:
            taken = view[:size - len(tail)]
            tail += taken
            view = view[len(taken):]
            if len(tail) < size:
                return
            piece = bytes(tail)
            tail.clear()
            yield self._cut(piece)
        while len(view) >= size:
            piece = bytes(view[:size])
            view = view[size:]
            yield self._cut(piece)
        tail += view

    def finish(self) -> Optional[tuple[int, bytes]]:
        """The last, short chunk (None when the data ended on a chunk boundary)."""
        if not self._tail:
            return None
        piece = bytes(self._tail)
        self._tail.clear()
        return self._cut(piece)


def chunk_document(files_id: Any, n: int, data: bytes) -> dict[str, Any]:
    """A chunks-collection document (the server-side ``_id`` is added by the insert)."""
    return {"files_id": files_id, "n": n, "data": data}


def upload_date_now() -> datetime.datetime:
    """Now in UTC, cut to the millisecond BSON keeps, so the GridIn's value equals the stored one."""
    now = datetime.datetime.now(tz=datetime.timezone.utc)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def files_document(fields: Mapping[str, Any], length: int, upload_date: datetime.datetime) -> dict[str, Any]:
    """The files-collection document for a finished upload.

    ``fields`` are the upload's own (``_id``, ``chunkSize``, ``filename``, ``metadata`` and any
    extra field the application set); length is stored as Int64 and chunkSize as Int32, as the
    spec recommends, and nothing is stored for options that were not given.
    """
    document: dict[str, Any] = {"_id": fields["_id"], "length": Int64(length),
                                "chunkSize": int(fields["chunkSize"]), "uploadDate": upload_date}
    for key, value in fields.items():
        if key not in document:
            document[key] = value
    return document


def revision_query(revision: Any) -> tuple[int, int]:
    """(uploadDate sort direction, documents to skip) for a revision number.

    0 is the first upload, 1 the next, ...; -1 the latest, -2 the one before, ...
    """
    if isinstance(revision, bool) or not isinstance(revision, int):
        raise TypeError(f"revision must be an integer, not {type(revision).__name__}")
    if revision < 0:
        return -1, -revision - 1
    return 1, revision


def _same_number(found: Any, wanted: int) -> bool:
    return (not isinstance(found, bool) and isinstance(found, numbers.Real) and found == wanted)


def index_key_matches(key: Any, wanted: Sequence[tuple[str, int]]) -> bool:
    """Whether an existing index's ``key`` document is ``wanted``: same fields, same order, and
    directions equal by value whatever their numeric type (the shell writes doubles)."""
    if not isinstance(key, Mapping):
        return False
    items = list(key.items())
    if len(items) != len(wanted):
        return False
    return all(name == wanted_name and _same_number(direction, wanted_direction)
               for (name, direction), (wanted_name, wanted_direction) in zip(items, wanted))


__all__ = [
    "CHUNKS_INDEX", "DEFAULT_CHUNK_SIZE", "FILES_INDEX", "ChunkLayout", "ChunkSplitter", "chunk_document",
    "files_document", "index_key_matches", "revision_query", "upload_date_now", "validate_chunk_size",
]
