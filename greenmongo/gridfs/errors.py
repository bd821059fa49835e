"""GridFS errors (PyMongo's ``gridfs.errors``); defined in the driver's one hierarchy, greenmongo.errors."""

from __future__ import annotations

from greenmongo.errors import CorruptGridFile, FileExists, GridFSError, NoFile

__all__ = ["CorruptGridFile", "FileExists", "GridFSError", "NoFile"]
