"""GridFS: PyMongo's original GridFS API (``gridfs.GridFS``), kept for code written against it.

New code should use GridFSBucket (the GridFS spec's API). This class differs from it the way
PyMongo's does: files are created with any top-level fields (``put(data, filename=..., foo=1)``
stores ``foo`` in the files document, where the spec puts application fields under
``metadata``); versions are chosen among files matching a filename *and* any such fields;
``delete`` of a missing file is not an error; ``exists`` and ``find_one`` take an id or a query.

It is a thin layer over the same GridIn, GridOut, GridOutCursor and index check the bucket uses:
one chunking and one reading implementation. Like the bucket, an instance checks the indexes
once, before its first write (PyMongo checks once per file written).
"""

from __future__ import annotations

from collections import abc
from typing import Any, Optional

from greenmongo.client_session import ClientSession
from greenmongo.database import Database
from greenmongo.errors import ConfigurationError, NoFile
from greenmongo.gridfs.common import gridfs_root, one_operation, refuse_transaction
from greenmongo.gridfs.grid_in import GridIn
from greenmongo.gridfs.grid_out import GridOut, GridOutCursor
from greenmongo.gridfs.indexes import IndexGuard
from greenmongo.gridfs.layout import revision_query


def _id_query(file_id: Any) -> dict[str, Any]:
    """Match one id exactly, even an id that looks like a query operator document."""
    return {"_id": {"$eq": file_id}}


class GridFS:
    """The files stored under one root collection (``fs``: ``fs.files`` and ``fs.chunks``) of a database.

    ``GridFS(database, collection="fs")``; the database's write concern must be acknowledged. Its
    read preference, read concern and write concern apply to every command; the application's
    custom type codecs do not (GridFS reads and writes its own documents).
    """

    def __init__(self, database: Database, collection: str = "fs") -> None:
        if not isinstance(database, Database):
            raise TypeError(f"database must be an instance of Database, not {type(database).__name__}")
        if not isinstance(collection, str):
            raise TypeError(f"collection must be an instance of str, not {type(collection).__name__}")
        root = gridfs_root(database[collection])
        if not root.write_concern.acknowledged:
            raise ConfigurationError("database must use acknowledged write_concern")
        self._collection = root
        self._files = root["files"]
        self._chunks = root["chunks"]
        self._indexes = IndexGuard()

    def __repr__(self) -> str:
        return f"GridFS({self._collection.database!r}, collection={self._collection.name!r})"

    # -- writing --------------------------------------------------------------------------------

    def new_file(self, **kwargs: Any) -> GridIn:
        """A GridIn to write a new file to; stored when closed.

        Keywords are GridIn's: ``_id`` (FileExists if taken), ``filename``, ``chunk_size``/``chunkSize``,
        ``content_type``/``contentType``, ``encoding`` (lets ``write`` take str), ``session``, and any
        other field to store at the top level of the files document.
        """
        upload = GridIn(self._collection, **kwargs)
        upload._indexes = self._indexes  # one index check per GridFS instance, not per file
        return upload

    @one_operation
    def put(self, data: Any, **kwargs: Any) -> Any:
        """Store ``data`` (bytes, str with an ``encoding`` keyword, or a readable object read to its
        end) as a new file; returns its ``_id``. Keywords as for ``new_file``."""
        with self.new_file(**kwargs) as upload:
            upload.write(data)
        return upload._id

    # -- reading --------------------------------------------------------------------------------

    @one_operation
    def get(self, file_id: Any, session: Optional[ClientSession] = None) -> GridOut:
        """A GridOut for the file with this ``_id``; raises NoFile now if there is none."""
        download = GridOut(self._collection, file_id, session=session)
        download.open()
        return download

    @one_operation
    def get_version(self, filename: Optional[str] = None, version: Optional[int] = -1,
                    session: Optional[ClientSession] = None,
                    **kwargs: Any) -> GridOut:
        """One version among the files matching ``filename`` (if given) and ``kwargs`` (top-level
        field values or conditions), ordered by upload date: 0 the first, 1 the next, ...; -1 (the
        default, also None) the latest, -2 the one before, ... Raises NoFile if there is no such version.
        """
        query = dict(kwargs)
        if filename is not None:
            query["filename"] = filename
        if version is None:
            version = -1
        direction, skip = revision_query(version)
        refuse_transaction(session)
        cursor = self._files.find(query, sort=[("uploadDate", direction)], skip=skip, limit=-1, session=session)
        document = next(cursor, None)
        if document is None:
            raise NoFile(f"no version {version} for filename {filename!r}")
        return GridOut(self._collection, file_document=document, session=session)

    def get_last_version(self, filename: Optional[str] = None, session: Optional[ClientSession] = None,
                         **kwargs: Any) -> GridOut:
        """The latest version (``get_version`` with version -1)."""
        return self.get_version(filename=filename, session=session, **kwargs)

    @one_operation
    def list(self, session: Optional[ClientSession] = None) -> list[str]:
        """The distinct filenames stored (files without a filename are not listed)."""
        refuse_transaction(session)
        return [name for name in self._files.distinct("filename", session=session) if name is not None]

    def find(self, *args: Any, **kwargs: Any) -> GridOutCursor:
        """GridOuts for the files documents matching a filter on their fields.

        ``find(filter=None, skip=0, limit=0, no_cursor_timeout=False, sort=None, batch_size=0,
        session=None, *, allow_disk_use=None, max_time_ms=None)``; the cursor's builders
        (``sort``, ``limit``, ...) work as on any find cursor. GridOuts share the cursor's session.
        """
        return GridOutCursor(self._collection, *args, **kwargs)

    @one_operation
    def find_one(self, filter: Any = None, session: Optional[ClientSession] = None, *args: Any,
                 **kwargs: Any) -> Optional[GridOut]:
        """The first GridOut ``find`` would give, or None; a filter that is not a mapping is an ``_id``.

        Further arguments are ``find``'s (after ``filter``); a ``limit`` among them is overridden.
        """
        if filter is not None and not isinstance(filter, abc.Mapping):
            filter = _id_query(filter)
        refuse_transaction(session)
        cursor = self.find(filter, *args, session=session, **kwargs)
        try:
            return next(cursor.limit(-1), None)
        finally:
            cursor.close()

    @one_operation
    def exists(self, document_or_id: Any = None, session: Optional[ClientSession] = None, **kwargs: Any) -> bool:
        """Whether a file matches: an ``_id`` value, a query document, or keywords as the query
        (``exists(filename="a.txt")``, ``exists(length={"$gt": 10})``). With no argument: whether
        any file exists. Giving both a positional query and keywords is a TypeError (PyMongo
        ignores the positional one).
        """
        refuse_transaction(session)
        if kwargs:
            if document_or_id is not None:
                raise TypeError("exists() takes either document_or_id or keyword arguments as the query, not both")
            query: Any = kwargs
        elif document_or_id is None or isinstance(document_or_id, abc.Mapping):
            query = document_or_id
        else:
            query = _id_query(document_or_id)
        return self._files.find_one(query, projection={"_id": 1}, session=session) is not None

    # -- deleting -------------------------------------------------------------------------------

    @one_operation
    def delete(self, file_id: Any, session: Optional[ClientSession] = None) -> None:
        """Delete the file with this ``_id``: its files document first (readers see it vanish), then
        its chunks. A missing file is not an error: afterwards there is none either way."""
        refuse_transaction(session)
        self._files.delete_one(_id_query(file_id), session=session)
        self._chunks.delete_many({"files_id": {"$eq": file_id}}, session=session)


__all__ = ["GridFS"]
