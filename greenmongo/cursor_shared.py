"""PyMongo's import path ``pymongo.cursor_shared``: CursorType (it lives in ``greenmongo.operations.find``)."""

from greenmongo.operations.find import CursorType

__all__ = ["CursorType"]
