"""PyMongo's ``gridfs.grid_file`` import path: the GridFS classes, the default chunk size and the errors.

The classes live in legacy.py (GridFS), bucket.py (GridFSBucket), grid_in.py and grid_out.py.
PyMongo's chunk iterators (``GridOutChunkIterator``, ``GridOutIterator``) are its internals and
have no counterpart here: GridOut reads chunks itself (``readchunk``, iteration by lines).
"""

from __future__ import annotations

from greenmongo.errors import CorruptGridFile, FileExists, NoFile
from greenmongo.gridfs.bucket import GridFSBucket
from greenmongo.gridfs.grid_in import GridIn
from greenmongo.gridfs.grid_out import GridOut, GridOutCursor
from greenmongo.gridfs.layout import DEFAULT_CHUNK_SIZE
from greenmongo.gridfs.legacy import GridFS

#: PyMongo's names for the empty read and the line separator GridOut.readline stops at.
EMPTY = b""
NEWLN = b"\n"

__all__ = [
    "DEFAULT_CHUNK_SIZE", "EMPTY", "NEWLN", "CorruptGridFile", "FileExists", "GridFS", "GridFSBucket", "GridIn",
    "GridOut", "GridOutCursor", "NoFile",
]
