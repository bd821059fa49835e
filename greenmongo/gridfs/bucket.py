"""GridFSBucket: the GridFS spec's API (basic and advanced) with PyMongo's names and signatures.

A bucket is two collections, ``<bucket>.files`` and ``<bucket>.chunks``, both carrying the
bucket's write concern, read preference and read concern (by default the database's). Every
method takes ``session`` and passes it to every command it sends. The spec's indexes are
checked before the bucket's first write (greenmongo/gridfs/indexes.py); reads assume them.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from greenmongo.client_session import ClientSession
from greenmongo.database import Database
from greenmongo.errors import ConfigurationError, NoFile
from greenmongo.gridfs.common import gridfs_root, one_operation, refuse_transaction
from greenmongo.gridfs.grid_in import GridIn
from greenmongo.gridfs.grid_out import GridOut, GridOutCursor
from greenmongo.gridfs.indexes import IndexGuard
from greenmongo.gridfs.layout import DEFAULT_CHUNK_SIZE, revision_query, validate_chunk_size
from greenmongo.options.read_concern import ReadConcern
from greenmongo.options.read_preferences import ServerMode
from greenmongo.options.write_concern import WriteConcern


def _validate_filename(filename: Any) -> str:
    if not isinstance(filename, str):
        raise TypeError(f"filename must be an instance of str, not {type(filename).__name__}")
    return filename


def _copy(source: GridOut, destination: Any) -> None:
    """Stream a download into a writable object chunk by chunk."""
    while True:
        data = source.readchunk()
        if not data:
            return
        destination.write(data)


class GridFSBucket:
    """A GridFS bucket in a database: upload, download, find, rename and delete stored files.

    ``GridFSBucket(db, bucket_name="fs", chunk_size_bytes=255 * 1024, write_concern=None,
    read_preference=None, read_concern=None)``; the write concern must be acknowledged.
    """

    def __init__(self, db: Database, bucket_name: str = "fs", chunk_size_bytes: int = DEFAULT_CHUNK_SIZE,
                 write_concern: Optional[WriteConcern] = None, read_preference: Optional[ServerMode] = None,
                 read_concern: Optional[ReadConcern] = None) -> None:
        if not isinstance(db, Database):
            raise TypeError(f"database must be an instance of Database, not {type(db).__name__}")
        if not isinstance(bucket_name, str):
            raise TypeError(f"bucket_name must be an instance of str, not {type(bucket_name).__name__}")
        self._chunk_size_bytes = validate_chunk_size(chunk_size_bytes)
        root = gridfs_root(db.get_collection(bucket_name, write_concern=write_concern,
                                             read_preference=read_preference, read_concern=read_concern))
        if not root.write_concern.acknowledged:
            raise ConfigurationError("write concern must be acknowledged")
        self._bucket_name = bucket_name
        self._root = root
        self._files = root["files"]
        self._chunks = root["chunks"]
        self._indexes = IndexGuard()

    def __repr__(self) -> str:
        return f"GridFSBucket({self._root.database!r}, bucket_name={self._bucket_name!r})"

    # -- upload ---------------------------------------------------------------------------------

    def _upload_stream(self, fields: dict[str, Any], chunk_size_bytes: Optional[int],
                       metadata: Optional[Mapping[str, Any]], session: Optional[ClientSession]) -> GridIn:
        fields["chunkSize"] = self._chunk_size_bytes if chunk_size_bytes is None else chunk_size_bytes
        if metadata is not None:
            fields["metadata"] = metadata
        upload = GridIn(self._root, session=session, **fields)
        upload._indexes = self._indexes  # one index check per bucket, not per upload
        return upload

    def open_upload_stream(self, filename: str, chunk_size_bytes: Optional[int] = None,
                           metadata: Optional[Mapping[str, Any]] = None,
                           session: Optional[ClientSession] = None) -> GridIn:
        """A GridIn for a new file with a new ObjectId (``gridin._id``); stored when closed."""
        return self._upload_stream({"filename": _validate_filename(filename)}, chunk_size_bytes, metadata, session)

    def open_upload_stream_with_id(self, file_id: Any, filename: str, chunk_size_bytes: Optional[int] = None,
                                   metadata: Optional[Mapping[str, Any]] = None,
                                   session: Optional[ClientSession] = None) -> GridIn:
        """A GridIn for a new file with the application's id (FileExists if the id is taken)."""
        return self._upload_stream({"_id": file_id, "filename": _validate_filename(filename)}, chunk_size_bytes,
                                   metadata, session)

    @one_operation
    def upload_from_stream(self, filename: str, source: Any, chunk_size_bytes: Optional[int] = None,
                           metadata: Optional[Mapping[str, Any]] = None,
                           session: Optional[ClientSession] = None) -> Any:
        """Store ``source`` (bytes, or a readable object read to its end) as a new file; returns its id.

        The source is not closed. If reading it raises, the chunks already stored are deleted and
        the source's error is re-raised.
        """
        with self.open_upload_stream(filename, chunk_size_bytes, metadata, session=session) as upload:
            upload.write(source)
        return upload._id

    @one_operation
    def upload_from_stream_with_id(self, file_id: Any, filename: str, source: Any,
                                   chunk_size_bytes: Optional[int] = None,
                                   metadata: Optional[Mapping[str, Any]] = None,
                                   session: Optional[ClientSession] = None) -> None:
        """Like ``upload_from_stream`` with the application's file id."""
        with self.open_upload_stream_with_id(file_id, filename, chunk_size_bytes, metadata,
                                             session=session) as upload:
            upload.write(source)

    # -- download -------------------------------------------------------------------------------

    def open_download_stream(self, file_id: Any, session: Optional[ClientSession] = None) -> GridOut:
        """A GridOut for the stored file; raises NoFile now if there is none."""
        download = GridOut(self._root, file_id, session=session)
        download.open()
        return download

    @one_operation
    def download_to_stream(self, file_id: Any, destination: Any, session: Optional[ClientSession] = None) -> None:
        """Write the stored file's bytes to ``destination`` (not closed afterwards)."""
        with self.open_download_stream(file_id, session=session) as download:
            _copy(download, destination)

    @one_operation
    def open_download_stream_by_name(self, filename: str, revision: int = -1,
                                     session: Optional[ClientSession] = None) -> GridOut:
        """A GridOut for one revision of ``filename``: 0 the first upload, 1 the next, ...; -1 the
        latest (default), -2 the one before, ... Raises NoFile, saying whether the name or only
        that revision is missing."""
        _validate_filename(filename)
        direction, skip = revision_query(revision)
        refuse_transaction(session)
        query = {"filename": filename}
        cursor = self._files.find(query, sort=[("uploadDate", direction)], skip=skip, limit=-1, session=session)
        document = next(cursor, None)
        if document is None:
            if self._files.find_one(query, projection={"_id": 1}, session=session) is None:
                raise NoFile(f"no file named {filename!r}")
            raise NoFile(f"no version {revision} for filename {filename!r}")
        return GridOut(self._root, file_document=document, session=session)

    @one_operation
    def download_to_stream_by_name(self, filename: str, destination: Any, revision: int = -1,
                                   session: Optional[ClientSession] = None) -> None:
        """Write one revision of ``filename`` (see ``open_download_stream_by_name``) to ``destination``."""
        with self.open_download_stream_by_name(filename, revision, session=session) as download:
            _copy(download, destination)

    # -- find, rename, delete, drop ------------------------------------------------------------

    def find(self, *args: Any, **kwargs: Any) -> GridOutCursor:
        """GridOuts for the files documents matching a filter, e.g. ``{"metadata.owner": "ann"}``.

        ``find(filter=None, skip=0, limit=0, no_cursor_timeout=False, sort=None, batch_size=0,
        session=None, *, allow_disk_use=None, max_time_ms=None)``; the cursor's builders
        (``sort``, ``limit``, ...) work as on any find cursor.
        """
        return GridOutCursor(self._root, *args, **kwargs)

    @one_operation
    def rename(self, file_id: Any, new_filename: str, session: Optional[ClientSession] = None) -> None:
        """Rename the stored file; raises NoFile if there is none with that id."""
        refuse_transaction(session)
        result = self._files.update_one({"_id": file_id}, {"$set": {"filename": new_filename}},
                                        session=session)
        if not result.matched_count:
            raise NoFile(f"no file could be renamed {new_filename!r} because none matched file_id {file_id!r}")

    @one_operation
    def rename_by_name(self, filename: str, new_filename: str, session: Optional[ClientSession] = None) -> None:
        """Rename every revision of ``filename``; raises NoFile if there is none."""
        refuse_transaction(session)
        result = self._files.update_many({"filename": filename}, {"$set": {"filename": new_filename}},
                                         session=session)
        if not result.matched_count:
            raise NoFile(f"no file could be renamed {new_filename!r} because none matched filename {filename!r}")

    @one_operation
    def delete(self, file_id: Any, session: Optional[ClientSession] = None) -> None:
        """Delete the files document, then the chunks (so readers see the file vanish first).

        Raises NoFile if there was no files document; orphaned chunks with that id are deleted
        all the same.
        """
        refuse_transaction(session)
        result = self._files.delete_one({"_id": file_id}, session=session)
        self._chunks.delete_many({"files_id": file_id}, session=session)
        if not result.deleted_count:
            raise NoFile(f"no file could be deleted because none matched {file_id!r}")

    @one_operation
    def delete_by_name(self, filename: str, session: Optional[ClientSession] = None) -> None:
        """Delete every revision of ``filename`` (files documents first); raises NoFile if there is none."""
        refuse_transaction(session)
        file_ids = [document["_id"] for document in
                    self._files.find({"filename": filename}, projection={"_id": 1}, session=session)]
        result = self._files.delete_many({"_id": {"$in": file_ids}}, session=session)
        self._chunks.delete_many({"files_id": {"$in": file_ids}}, session=session)
        if not result.deleted_count:
            raise NoFile(f"no file could be deleted because none matched filename {filename!r}")

    @one_operation
    def drop(self, session: Optional[ClientSession] = None) -> None:
        """Drop the files collection, then the chunks collection."""
        refuse_transaction(session)
        self._files.drop(session=session)
        self._chunks.drop(session=session)


__all__ = ["GridFSBucket"]
