"""GridFS: files larger than a BSON document, stored as chunks (the GridFS spec, PyMongo's ``gridfs``).

``GridFSBucket(db)`` is the API: ``upload_from_stream``/``open_upload_stream`` write a file
(a GridIn), ``open_download_stream``/``download_to_stream`` (and ``..._by_name`` with revisions)
read one (a GridOut), ``find`` queries the files collection (a GridOutCursor of GridOuts;
``{"metadata.<field>": ...}`` filters on the application's metadata), plus ``rename``,
``delete`` and ``drop``. MD5 is never computed (the spec deprecates it).

Layout: ``layout`` (the pure data model: chunk arithmetic and checks), ``indexes`` (index check
before the first write), ``grid_in``, ``grid_out``, ``bucket``.
"""

from __future__ import annotations

from greenmongo.gridfs.bucket import GridFSBucket
from greenmongo.gridfs.errors import CorruptGridFile, FileExists, GridFSError, NoFile
from greenmongo.gridfs.grid_in import GridIn
from greenmongo.gridfs.grid_out import GridOut, GridOutCursor
from greenmongo.gridfs.layout import DEFAULT_CHUNK_SIZE

__all__ = [
    "DEFAULT_CHUNK_SIZE", "CorruptGridFile", "FileExists", "GridFSBucket", "GridFSError", "GridIn", "GridOut",
    "GridOutCursor", "NoFile",
]
