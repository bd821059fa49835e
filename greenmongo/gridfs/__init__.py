"""GridFS: files larger than a BSON document, stored as chunks (the GridFS spec, PyMongo's ``gridfs``).

``GridFSBucket(db)`` is the spec's API: ``upload_from_stream``/``open_upload_stream`` write a file
(a GridIn), ``open_download_stream``/``download_to_stream`` (and ``..._by_name`` with revisions)
read one (a GridOut), ``find`` queries the files collection (a GridOutCursor of GridOuts;
``{"metadata.<field>": ...}`` filters on the application's metadata), plus ``rename``,
``delete`` and ``drop``. MD5 is never computed (the spec deprecates it).

``GridFS(db)`` is PyMongo's original API (``put``, ``get``, ``get_version``, ``find``, ``exists``,
``delete``, ``list``), a thin layer over the same GridIn/GridOut.

Layout: ``layout`` (the pure data model: chunk arithmetic and checks), ``indexes`` (index check
before the first write), ``grid_in``, ``grid_out``, ``bucket``, ``legacy`` (GridFS);
``grid_file`` and ``errors`` are PyMongo's import paths. PyMongo's ``Async*`` classes are not
here: greenmongo's API is the synchronous one, made cooperative by gevent.
"""

from __future__ import annotations

from greenmongo.gridfs import errors, grid_file  # noqa: F401  (PyMongo's submodules: loaded with the package)
from greenmongo.gridfs.bucket import GridFSBucket
from greenmongo.gridfs.errors import CorruptGridFile, FileExists, GridFSError, NoFile
from greenmongo.gridfs.grid_in import GridIn
from greenmongo.gridfs.grid_out import GridOut, GridOutCursor
from greenmongo.gridfs.layout import DEFAULT_CHUNK_SIZE
from greenmongo.gridfs.legacy import GridFS

__all__ = [
    "DEFAULT_CHUNK_SIZE", "CorruptGridFile", "FileExists", "GridFS", "GridFSBucket", "GridFSError", "GridIn",
    "GridOut", "GridOutCursor", "NoFile",
]
