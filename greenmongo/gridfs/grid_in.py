"""GridIn: the upload stream (PyMongo's ``gridfs.GridIn``).

Bytes written are cut into chunks (greenmongo/gridfs/layout.py ChunkSplitter) and inserted in
batches of up to 16 MiB, so memory stays bounded whatever the file size; ``close()`` inserts the
last chunk and then the files document, whose ``uploadDate`` is the moment the upload completed.

Failure rules (GridFS spec "Operation Failure" and "Aborting an upload"):

* an insert that fails is reported at once and nothing is cleaned up (the chunks already in
  are orphans; a cleanup attempt would most likely fail the same way, slowly);
* a source stream that raises while ``write()`` reads it aborts the upload (its chunks are
  deleted) and its error is re-raised;
* ``abort()`` deletes what this upload inserted and closes the stream.

A failed, aborted or interrupted upload is closed: later writes raise ValueError. When a
``gevent.Timeout`` or ``GreenletExit`` interrupts an upload nothing more is sent (an
interrupted greenlet must not block again): its chunks stay behind as orphans.
"""

from __future__ import annotations

import datetime
import io
from typing import Any, Iterable, Literal, NoReturn, Optional, cast

from greenmongo.client_session import ClientSession
from greenmongo.bson.objectid import ObjectId
from greenmongo.errors import BulkWriteError, ConfigurationError, DuplicateKeyError, FileExists
from greenmongo.engine.deadline import resolve
from greenmongo.gridfs.common import gridfs_root, refuse_transaction, within_stream_deadline
from greenmongo.gridfs.indexes import IndexGuard
from greenmongo.gridfs.layout import (
    DEFAULT_CHUNK_SIZE,
    ChunkSplitter,
    chunk_document,
    files_document,
    upload_date_now,
    validate_chunk_size,
)
from greenmongo.operations.replies import raise_write_concern_error, raise_write_error
from greenmongo.wire.command_errors import DUPLICATE_KEY_CODES

#: Chunk data held before one insert_many: bounds an upload's memory, keeps round trips few.
UPLOAD_BUFFER_BYTES = 16 * 1024 * 1024
#: ... and a cap on the number of (small) chunk documents held.
UPLOAD_BUFFER_CHUNKS = 10_000
#: Rough BSON size of a chunk document besides its data (for the byte budget).
_CHUNK_OVERHEAD = 60

#: Keyword spellings PyMongo accepts for files-document fields.
_ALIASES = {"chunk_size": "chunkSize", "content_type": "contentType"}

_OPEN, _CLOSED, _ABORTED, _FAILED = "open", "closed", "aborted", "failed"


def _duplicate_key(exc: BulkWriteError) -> bool:
    """A chunk insert hit the unique (files_id, n) index: another file already uses the id."""
    write_errors = (exc.details or {}).get("writeErrors") or []
    return any(error.get("code") in DUPLICATE_KEY_CODES for error in write_errors)


def _raise_single_insert_error(exc: BulkWriteError) -> NoReturn:
    """An insert_many failure as the single-insert error PyMongo's GridIn raises."""
    details = exc.details or {}
    write_errors = details.get("writeErrors") or []
    if write_errors:
        raise_write_error(write_errors[-1])
    concern_errors = details.get("writeConcernErrors") or []
    if concern_errors:
        raise_write_concern_error(concern_errors[-1])
    try:
        raise exc
    finally:
        del exc  # its traceback holds this frame: no reference cycle through the argument


class GridIn:
    """A file being written to GridFS: ``write()`` bytes, then ``close()`` (or use ``with``).

    ``GridIn(root_collection, session=None, **fields)``: ``root_collection`` is the bucket's root
    (``db.fs``); ``fields`` are files-document fields: ``_id`` (default: a new ObjectId),
    ``filename``, ``chunkSize``/``chunk_size`` (default 255 KiB), ``metadata``, ``encoding``
    (lets ``write()`` take str) and any other field to store. Setting an unknown attribute sets
    a field too (after ``close()``, it updates the stored document, as in PyMongo).
    """

    __slots__ = ("_files", "_chunks", "_session", "_fields", "_splitter", "_pending", "_pending_bytes",
                 "_indexes", "_state", "_id_in_use", "_deadline")

    def __init__(self, root_collection: Any, session: Optional[ClientSession] = None, **kwargs: Any) -> None:
        root = _root_for_writing(root_collection)
        refuse_transaction(session)
        fields: dict[str, Any] = {}
        for key, value in kwargs.items():
            fields[_ALIASES.get(key, key)] = value
        if "_id" not in fields:
            fields["_id"] = ObjectId()
        fields["chunkSize"] = validate_chunk_size(fields.get("chunkSize", DEFAULT_CHUNK_SIZE))
        self._files = root["files"]
        self._chunks = root["chunks"]
        self._session = session
        # The upload's timeoutMS (an enclosing timeout() block's, else the database's) caps its whole life.
        self._deadline = resolve(self._files._timeout)
        self._fields = fields
        self._splitter = ChunkSplitter(fields["chunkSize"])
        self._pending: list = []
        self._pending_bytes = 0
        self._indexes = IndexGuard()
        self._state = _OPEN
        self._id_in_use = False

    # -- attributes ------------------------------------------------------------------------

    @property
    def _id(self) -> Any:
        """The file's id (read-only)."""
        return self._fields["_id"]

    @property
    def filename(self) -> Optional[str]:
        return self._fields.get("filename")

    @filename.setter
    def filename(self, value: Optional[str]) -> None:
        self.set("filename", value)

    name = filename

    @property
    def content_type(self) -> Optional[str]:
        """The legacy top-level ``contentType`` field (the spec deprecates it: prefer ``metadata``)."""
        return self._fields.get("contentType")

    @content_type.setter
    def content_type(self, value: Optional[str]) -> None:
        self.set("contentType", value)

    @property
    def chunk_size(self) -> int:
        """Bytes per chunk of this file (read-only)."""
        return self._fields["chunkSize"]

    @property
    def length(self) -> int:
        """The file's length in bytes (the Int64 stored); only known once closed."""
        self._require_closed("length")
        return self._fields["length"]

    @property
    def upload_date(self) -> datetime.datetime:
        """When the upload completed (UTC); only known once closed."""
        self._require_closed("upload_date")
        return cast(datetime.datetime, self._fields.get("uploadDate"))  # set by close()

    @property
    def md5(self) -> Optional[str]:
        """Always None once closed: greenmongo never computes MD5 (the spec deprecates it)."""
        self._require_closed("md5")
        return self._fields.get("md5")

    @property
    def closed(self) -> bool:
        """True once closed, aborted or failed: no more writes."""
        return self._state != _OPEN

    def _require_closed(self, name: str) -> None:
        if self._state != _CLOSED:
            raise AttributeError(f"can only get {name!r} on a closed file")

    def __getattr__(self, name: str) -> Any:
        # Reached only for names that are neither slots nor class attributes: files-document fields.
        try:
            fields = object.__getattribute__(self, "_fields")
        except AttributeError:
            raise AttributeError(name) from None
        if not name.startswith("__") and name in fields:
            return fields[name]
        raise AttributeError(f"GridIn object has no attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        if hasattr(type(self), name):  # slots and properties
            object.__setattr__(self, name, value)
        else:
            self.set(name, value)

    def set(self, name: str, value: Any) -> None:
        """Set a files-document field; after ``close()`` the stored document is updated at once."""
        if name in ("_id", "chunkSize", "length", "uploadDate"):
            raise AttributeError(f"{name!r} of a GridIn cannot be changed")
        self._fields[name] = value
        if self._state == _CLOSED:
            self._files.update_one({"_id": self._fields["_id"]}, {"$set": {name: value}},
                                   session=self._session)

    # -- writing ---------------------------------------------------------------------------

    @within_stream_deadline
    def write(self, data: Any) -> None:
        """Write bytes, a str (needs ``encoding``) or everything a file-like object's ``read()`` gives.

        Full chunks go to the server in batches; the rest waits for more data or ``close()``.
        """
        if self._state != _OPEN:
            raise ValueError("cannot write to a closed file")
        read = getattr(data, "read", None)
        if read is None:
            self._accept(self._as_bytes(data))
            return
        while True:
            try:
                piece = read(self._splitter.room)
            except Exception:
                self._abort_for_source_error()
                raise
            except BaseException:
                self._state = _FAILED  # interrupted: no more I/O here
                raise
            if not piece:
                return
            self._accept(self._as_bytes(piece))

    @within_stream_deadline
    def writelines(self, sequence: Iterable[Any]) -> None:
        """Write each item in turn (no separators are added)."""
        for item in sequence:
            self.write(item)

    def _as_bytes(self, data: Any) -> Any:
        if isinstance(data, str):
            encoding = self._fields.get("encoding")
            if encoding is None:
                raise TypeError("must specify an encoding for file in order to write str")
            return data.encode(encoding)
        if isinstance(data, (bytes, bytearray, memoryview)):
            return data
        raise TypeError("can only write strings or file-like objects")

    def _accept(self, data: Any) -> None:
        file_id = self._fields["_id"]
        for n, piece in self._splitter.feed(data):
            self._pending.append(chunk_document(file_id, n, piece))
            self._pending_bytes += len(piece) + _CHUNK_OVERHEAD
            if self._pending_bytes >= UPLOAD_BUFFER_BYTES or len(self._pending) >= UPLOAD_BUFFER_CHUNKS:
                self._flush()

    def _flush(self) -> None:
        """Insert the held chunks. Any failure closes the upload: what reached the server is unknown."""
        if not self._pending:
            return
        try:
            self._indexes.ensure(self._files, self._chunks, self._session)
            self._chunks.insert_many(self._pending, session=self._session)
        except BulkWriteError as exc:
            self._state = _FAILED
            if _duplicate_key(exc):
                self._id_in_use = True
                raise FileExists(f"file with _id {self._fields['_id']!r} already exists") from exc
            _raise_single_insert_error(exc)
        except BaseException:
            self._state = _FAILED
            raise
        self._pending = []
        self._pending_bytes = 0

    # -- finishing ---------------------------------------------------------------------------

    @within_stream_deadline
    def close(self) -> None:
        """Insert the last chunk and the files document. Closing again (or after abort) does nothing."""
        if self._state != _OPEN:
            return
        last = self._splitter.finish()
        if last is not None:
            n, piece = last
            self._pending.append(chunk_document(self._fields["_id"], n, piece))
        self._flush()
        upload_date = upload_date_now()
        document = files_document(self._fields, self._splitter.length, upload_date)
        try:
            self._indexes.ensure(self._files, self._chunks, self._session)
            self._files.insert_one(document, session=self._session)
        except DuplicateKeyError as exc:
            self._state = _FAILED
            raise FileExists(f"file with _id {self._fields['_id']!r} already exists") from exc
        except BaseException:
            self._state = _FAILED
            raise
        self._fields["length"] = document["length"]
        self._fields["uploadDate"] = upload_date
        self._state = _CLOSED

    @within_stream_deadline
    def abort(self) -> None:
        """Delete the chunks this upload inserted (and its files document, if it completed); close.

        Raises if the deletes fail (the stream is closed all the same). Nothing is deleted when
        the id turned out to belong to another file.
        """
        completed = self._state == _CLOSED
        self._state = _ABORTED
        self._pending = []
        if self._id_in_use:
            return
        file_id = self._fields["_id"]
        self._chunks.delete_many({"files_id": file_id}, session=self._session)
        if completed:
            self._files.delete_one({"_id": file_id}, session=self._session)

    def _abort_for_source_error(self) -> None:
        """The source stream failed: abort; the source's error is what the caller sees."""
        try:
            self.abort()
        except Exception:
            pass

    # -- file-object protocol -------------------------------------------------------------------

    def read(self, size: int = -1) -> NoReturn:
        raise io.UnsupportedOperation("read")

    def readable(self) -> bool:
        return False

    def seekable(self) -> bool:
        return False

    def writable(self) -> bool:
        return True

    writeable = writable  # PyMongo's spelling

    def __enter__(self) -> "GridIn":
        return self

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> Literal[False]:
        """Close on success; on an error just stop (no I/O while an error or kill is in flight)."""
        if exc_type is None:
            self.close()
        elif self._state == _OPEN:
            self._state = _FAILED
        return False

    def __repr__(self) -> str:
        return f"<GridIn _id={self._fields['_id']!r} filename={self._fields.get('filename')!r} state={self._state}>"


def _root_for_writing(collection: Any) -> Any:
    root = gridfs_root(collection)
    if not root.write_concern.acknowledged:
        raise ConfigurationError("root_collection must use acknowledged write_concern")
    return root


__all__ = ["GridIn", "UPLOAD_BUFFER_BYTES", "UPLOAD_BUFFER_CHUNKS"]
