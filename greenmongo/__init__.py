"""greenmongo: a MongoDB driver written natively on gevent, with PyMongo's API.

Moving an application from PyMongo should take changing the import: the public names below are
PyMongo's (``MongoClient``, ``ReadPreference``, ``InsertOne``, ``ASCENDING``, ...).
"""

from __future__ import annotations

from greenmongo._version import __version__, version_tuple

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
from greenmongo.wire.versions import CLIENT_MAX_WIRE_VERSION as MAX_SUPPORTED_WIRE_VERSION  # noqa: E402
from greenmongo.wire.versions import CLIENT_MIN_WIRE_VERSION as MIN_SUPPORTED_WIRE_VERSION  # noqa: E402

# The submodules ``import pymongo`` makes attributes of the package (``pymongo.uri_parser.parse_uri``
# works without importing it), so that code written for PyMongo finds them after ``import greenmongo``.
from greenmongo import (  # noqa: E402,F401
    change_stream,
    client_options,
    client_session,
    collation,
    collection,
    command_cursor,
    common,
    cursor,
    cursor_shared,
    database,
    driver_info,
    monitoring,
    operations,
    read_concern,
    read_preferences,
    results,
    server_api,
    server_description,
    server_type,
    topology_description,
    typings,
    uri_parser,
    write_concern,
)


def get_version_string() -> str:
    """greenmongo's version (under ``install_as_pymongo()``, ``pymongo.get_version_string()`` gives the
    PyMongo release whose API greenmongo implements)."""
    return __version__


def has_c() -> bool:
    """Is the C extension (greenmongo's BSON accelerator) in use?"""
    return common.has_c()

__all__ = [
    "ASCENDING", "DESCENDING", "GEO2D", "GEOSPHERE", "HASHED", "MAX_SUPPORTED_WIRE_VERSION",
    "MIN_SUPPORTED_WIRE_VERSION", "TEXT", "Collation", "CursorType", "DeleteMany", "DeleteOne", "IndexModel",
    "InsertOne", "MongoClient", "ReadConcern", "ReadPreference", "ReplaceOne", "ReturnDocument", "SearchIndexModel",
    "ServerApi", "ServerApiVersion", "UpdateMany", "UpdateOne", "WriteConcern", "__version__", "errors",
    "get_version_string", "has_c", "install_as_pymongo", "timeout", "TimeoutMode", "version", "version_tuple",
]
