"""GridOut (the download stream) and GridOutCursor (``GridFSBucket.find``), PyMongo's shapes.

A GridOut fetches its files document when first needed (GridFSBucket's open methods do it at
once, so a missing file raises NoFile there) and reads the chunks with one cursor sorted on
``n``, holding one chunk at a time. Every chunk is checked against the files document as it
arrives (layout.ChunkLayout.check_chunk): a missing, misnumbered or wrongly sized chunk raises
CorruptGridFile. Seeking costs no I/O; the next read re-queries from the chunk it needs if the
cursor is elsewhere. A zero-length file never queries the chunks collection.

Interrupted reads (``gevent.Timeout``, ``GreenletExit``) leave the stream usable: the position
only moves once a chunk is in hand, and the next read opens a new cursor at that chunk. Leaving
a ``with`` block through such an interruption, or garbage collection, closes without I/O (the
client kills the server cursor with its next operation).
"""

from __future__ import annotations

import datetime
import io
import os
from typing import Any, Iterator, Mapping, NoReturn, Optional, Sequence, cast

from greenmongo.client_session import ClientSession
from greenmongo.cursor import Cursor
from greenmongo.errors import CorruptGridFile, CursorNotFound, NoFile
from greenmongo.engine.deadline import resolve
from greenmongo.gridfs.common import gridfs_root, refuse_transaction, within_stream_deadline
from greenmongo.gridfs.layout import ChunkLayout

_NEWLINE = b"\n"


class _ChunkReader:
    """A file's chunks, in order, from one cursor; asking for another chunk re-queries from there."""

    __slots__ = ("_chunks", "_file_id", "_layout", "_session", "_cursor", "_next_n")

    def __init__(self, chunks: Any, file_id: Any, layout: ChunkLayout, session: Optional[ClientSession]) -> None:
        self._chunks = chunks
        self._file_id = file_id
        self._layout = layout
        self._session = session
        self._cursor: Optional[Cursor] = None
        self._next_n = 0

    def _open_cursor(self, n: int) -> None:
        query: dict[str, Any] = {"files_id": self._file_id}
        if n:
            query["n"] = {"$gte": n}
        self._cursor = self._chunks.find(query, sort=[("n", 1)], session=self._session)
        self._next_n = n

    def _next_document(self) -> Optional[Mapping[str, Any]]:
        """The cursor's next chunk document, None at its end; reopened once if the server lost it."""
        reopened = False
        while True:
            assert self._cursor is not None
            try:
                return next(self._cursor)
            except StopIteration:
                return None
            except CursorNotFound:
                # Idle longer than the server keeps cursors (10 minutes by default): start again here.
                self._cursor = None
                if reopened:
                    raise
                reopened = True
                self._open_cursor(self._next_n)
            except BaseException:
                # The cursor already dealt with its server side; the next read starts a new query.
                self._cursor = None
                raise

    def read_chunk(self, n: int) -> bytes:
        """The checked data of chunk ``n``."""
        if self._cursor is None or self._next_n != n:
            self.close()
            self._open_cursor(n)
        document = self._next_document()
        try:
            data = self._layout.check_chunk(document, n)
        except CorruptGridFile:
            self.close()
            raise
        self._next_n = n + 1
        return data

    def finish(self) -> None:
        """At the end of the file: report an extra chunk holding data if the cursor meets one; close."""
        try:
            if self._cursor is not None and self._next_n == self._layout.chunk_count:
                self._layout.check_no_extra_chunk(self._next_document())
        finally:
            self.close()

    def close(self) -> None:
        """Kill the server cursor now (if it still holds one)."""
        cursor, self._cursor = self._cursor, None
        if cursor is not None:
            cursor.close()

    def abandon(self) -> None:
        """Forget the cursor without I/O: the client kills its server side with its next operation."""
        self._cursor = None


def _file_property(field: str, doc: str) -> property:
    def get(self: "GridOut") -> Any:
        self.open()
        assert self._file is not None
        return self._file.get(field)

    return property(get, doc=doc + "\n\nRead-only.")


class GridOut(io.IOBase):
    """A stored file opened for reading: ``read``, ``readline``, ``readchunk``, ``seek``, iteration.

    ``GridOut(root_collection, file_id=None, file_document=None, session=None)``: give the id
    (the files document is fetched when first needed) or the files document itself. Fields of
    the files document are attributes (``gridout.metadata``, ``gridout.filename``, or any
    legacy top-level field).
    """

    def __init__(self, root_collection: Any, file_id: Any = None, file_document: Optional[Mapping[str, Any]] = None,
                 session: Optional[ClientSession] = None) -> None:
        root = gridfs_root(root_collection)
        refuse_transaction(session)
        super().__init__()
        self._files = root["files"]
        self._chunks = root["chunks"]
        # The download's timeoutMS (an enclosing timeout() block's, else the database's) caps its whole life.
        self._deadline = resolve(self._files._timeout)
        self._file_id = file_document["_id"] if file_document is not None else file_id
        self._file: Optional[Mapping[str, Any]] = file_document
        self._session = session
        self._layout: Optional[ChunkLayout] = None
        self._reader: Optional[_ChunkReader] = None
        self._position = 0
        self._chunk_n = -1
        self._chunk_data = b""

    # -- the files document ---------------------------------------------------------------

    @within_stream_deadline
    def open(self) -> None:
        """Fetch the files document now (if not yet): raises NoFile when there is none."""
        if self._file is None:
            document = self._files.find_one({"_id": self._file_id}, session=self._session)
            if document is None:
                raise NoFile(f"no file in gridfs collection {self._files.full_name!r} with _id {self._file_id!r}")
            self._file = document

    def __getattr__(self, name: str) -> Any:
        # Only names that are not real attributes get here: files-document fields. Private and
        # special names never trigger I/O (io.IOBase looks some up during close and finalization).
        if name.startswith("_"):
            raise AttributeError(f"GridOut object has no attribute {name!r}")
        self.open()
        assert self._file is not None
        if name in self._file:
            return self._file[name]
        raise AttributeError(f"GridOut object has no attribute {name!r}")

    @property
    def _id(self) -> Any:
        """The file's id."""
        if self._file is None and self._file_id is not None:
            return self._file_id
        self.open()
        assert self._file is not None
        return self._file["_id"]

    filename = _file_property("filename", "The file's name (None for legacy files without one).")
    name = filename
    metadata = _file_property("metadata", "The application's metadata document, if any.")
    content_type = _file_property("contentType", "Legacy top-level MIME type (deprecated field), if any.")
    aliases = _file_property("aliases", "Legacy top-level aliases (deprecated field), if any.")
    md5 = _file_property("md5", "Legacy MD5 hex digest (deprecated field; greenmongo never writes it), if any.")

    @property
    def upload_date(self) -> datetime.datetime:
        """When the upload completed."""
        self.open()
        assert self._file is not None
        # PyMongo's annotation; a legacy files document without the field gives None.
        return cast(datetime.datetime, self._file.get("uploadDate"))

    @property
    def length(self) -> int:
        """The file's length in bytes: the stored value (an Int64 as the spec recommends), so that
        copying it into another document keeps its BSON type; a whole number of another numeric
        type (legacy files) as an int."""
        layout = self._ensure_layout()
        stored = self._file.get("length", 0) if self._file is not None else 0
        if isinstance(stored, int) and not isinstance(stored, bool):
            return stored
        return layout.length

    @property
    def chunk_size(self) -> int:
        """Bytes per chunk of this file."""
        return self._ensure_layout().chunk_size

    def _ensure_layout(self) -> ChunkLayout:
        if self._layout is None:
            self.open()
            assert self._file is not None
            self._layout = ChunkLayout.of_file(self._file)
        return self._layout

    # -- reading ----------------------------------------------------------------------------

    def _remaining(self) -> int:
        if self.closed:
            raise ValueError("I/O operation on closed file")
        return max(self._ensure_layout().length - self._position, 0)

    def _current_chunk(self) -> tuple[bytes, int]:
        """(data of the chunk holding the position, offset of the position in it); position < length."""
        layout = self._ensure_layout()
        n, offset = layout.chunk_of(self._position)
        if n != self._chunk_n:
            if self._reader is None:
                self._reader = _ChunkReader(self._chunks, self._file_id, layout, self._session)
            data = self._reader.read_chunk(n)
            self._chunk_n, self._chunk_data = n, data
        if offset >= len(self._chunk_data):  # read_chunk checked the size: never, but never loop on it
            raise CorruptGridFile(f"truncated chunk #{n}")
        return self._chunk_data, offset

    def _after_read(self) -> None:
        """At the end of the file, check for an extra chunk and release the cursor."""
        if self._reader is not None and self._position >= self._ensure_layout().length:
            reader, self._reader = self._reader, None
            reader.finish()

    @within_stream_deadline
    def read(self, size: Optional[int] = -1) -> bytes:
        """Up to ``size`` bytes (all the rest if ``size`` is negative or None)."""
        return self._read(size, up_to_newline=False)

    @within_stream_deadline
    def readchunk(self) -> bytes:
        """The rest of the current chunk (b"" at the end of the file)."""
        if not self._remaining():
            return b""
        data, offset = self._current_chunk()
        piece = data[offset:]
        self._position += len(piece)
        self._after_read()
        return piece

    @within_stream_deadline
    def readline(self, size: Optional[int] = -1) -> bytes:
        """Up to and including the next ``b"\\n"``, or at most ``size`` bytes."""
        return self._read(size, up_to_newline=True)

    def _read(self, size: Optional[int], *, up_to_newline: bool) -> bytes:
        remaining = self._remaining()
        if size is None or size < 0 or size > remaining:
            size = remaining
        parts = []
        while size > 0:
            data, offset = self._current_chunk()
            stop = min(offset + size, len(data))
            found = data.find(_NEWLINE, offset, stop) if up_to_newline else -1
            if found >= 0:
                stop = found + 1
            piece = data[offset:stop]
            self._position += len(piece)
            size -= len(piece)
            parts.append(piece)
            if found >= 0:
                break
        self._after_read()
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def __iter__(self) -> Iterator[bytes]:
        """Lines, as for any binary file (``readchunk`` reads chunk by chunk)."""
        if self.closed:
            raise ValueError("I/O operation on closed file")
        return self

    def __next__(self) -> bytes:
        line = self.readline()
        if not line:
            raise StopIteration
        return line

    def tell(self) -> int:
        return self._position

    @within_stream_deadline
    def seek(self, pos: int, whence: int = os.SEEK_SET) -> int:
        """Move the read position (no I/O until the next read); returns the new position."""
        if whence == os.SEEK_SET:
            new_position = pos
        elif whence == os.SEEK_CUR:
            new_position = self._position + pos
        elif whence == os.SEEK_END:
            new_position = self._ensure_layout().length + pos
        else:
            raise OSError(22, "Invalid value for `whence`")
        if new_position < 0:
            raise OSError(22, "Invalid value for `pos` - must be positive")
        self._position = new_position
        return new_position

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    def write(self, value: Any) -> NoReturn:
        raise io.UnsupportedOperation("write")

    def writelines(self, lines: Any) -> NoReturn:
        raise io.UnsupportedOperation("writelines")

    def truncate(self, size: Optional[int] = None) -> NoReturn:
        raise io.UnsupportedOperation("truncate")

    def fileno(self) -> NoReturn:
        raise io.UnsupportedOperation("fileno")

    def isatty(self) -> bool:
        return False

    def flush(self) -> None:
        """Nothing to flush: the stream is read-only."""

    # -- closing ----------------------------------------------------------------------------

    def close(self) -> None:
        """Release the chunk cursor (killing it on the server now); reads then raise ValueError."""
        reader, self._reader = self._reader, None
        try:
            if reader is not None:
                reader.close()
        finally:
            super().close()

    def _close_without_io(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.abandon()
        super().close()

    def __enter__(self) -> "GridOut":
        return self

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> Any:  # io.IOBase's says None: PyMongo's Any
        if exc_type is not None and not issubclass(exc_type, Exception):
            self._close_without_io()  # a kill or timeout: do not block again
        else:
            self.close()
        return False

    def __del__(self) -> None:
        # io.IOBase would call close() here; finalizers must not do I/O.
        try:
            reader = self.__dict__.get("_reader")
            if reader is not None:
                reader.abandon()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"<GridOut _id={self._file_id!r} position={self._position}>"


class GridOutCursor(Cursor):
    """``GridFSBucket.find``: a Cursor over the files collection that yields GridOut objects."""

    def __init__(self, collection: Any, filter: Optional[Mapping[str, Any]] = None, skip: int = 0, limit: int = 0,
                 no_cursor_timeout: bool = False, sort: Any = None, batch_size: int = 0,
                 session: Optional[ClientSession] = None, *,
                 allow_disk_use: Optional[bool] = None, max_time_ms: Optional[int] = None) -> None:
        refuse_transaction(session)
        root = gridfs_root(collection)
        self._root_collection = root
        super().__init__(root["files"], filter, skip=skip, limit=limit, no_cursor_timeout=no_cursor_timeout,
                         sort=sort, batch_size=batch_size, session=session, allow_disk_use=allow_disk_use,
                         max_time_ms=max_time_ms)

    def _accept(self, documents: Sequence[Any]) -> None:
        root, session = self._root_collection, self._explicit_session
        self._buffer.extend(GridOut(root, file_document=document, session=session) for document in documents)

    def clone(self) -> "GridOutCursor":
        clone = super().clone()
        assert isinstance(clone, GridOutCursor)
        clone._root_collection = self._root_collection
        clone._explicit_session = self._explicit_session
        return clone

    __copy__ = clone

    def add_option(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise NotImplementedError("Method does not exist for GridOutCursor")

    def remove_option(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise NotImplementedError("Method does not exist for GridOutCursor")


__all__ = ["GridOut", "GridOutCursor"]
