"""greenmongo: a MongoDB driver written natively on gevent, with PyMongo's API.

Moving an application from PyMongo should take changing the import: the public names below are
PyMongo's (``MongoClient``, ``ReadPreference``, ``InsertOne``, ``ASCENDING``, ...).
"""

from __future__ import annotations

from greenmongo._version import __version__

version = __version__

from greenmongo import errors  # noqa: E402
from greenmongo.dropin import install_as_pymongo  # noqa: E402
from greenmongo.engine.deadline import TimeoutMode, timeout  # noqa: E402
from greenmongo.mongo_client import MongoClient  # noqa: E402
from greenmongo.operations import (  # noqa: E402
    DeleteMany,
    DeleteOne,
    IndexModel,
    InsertOne,
    ReplaceOne,
    SearchIndexModel,
    UpdateMany,
    UpdateOne,
)
from greenmongo.operations.arguments import ASCENDING, DESCENDING, GEO2D, GEOSPHERE, HASHED, TEXT  # noqa: E402
from greenmongo.operations.collation import Collation  # noqa: E402
from greenmongo.operations.find import CursorType  # noqa: E402
from greenmongo.operations.find_and_modify import ReturnDocument  # noqa: E402
from greenmongo.options import ReadConcern, ReadPreference, ServerApi, ServerApiVersion, WriteConcern  # noqa: E402

__all__ = [
    "ASCENDING", "DESCENDING", "GEO2D", "GEOSPHERE", "HASHED", "TEXT", "Collation", "CursorType", "DeleteMany",
    "DeleteOne", "IndexModel", "InsertOne", "MongoClient", "ReadConcern", "ReadPreference", "ReplaceOne",
    "ReturnDocument", "SearchIndexModel", "ServerApi", "ServerApiVersion", "UpdateMany", "UpdateOne",
    "WriteConcern", "errors", "install_as_pymongo", "version", "timeout", "TimeoutMode",
]
