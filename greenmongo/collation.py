"""PyMongo's import path ``pymongo.collation``: the names live in ``greenmongo.operations.collation``."""

from greenmongo.operations.collation import *  # noqa: F401,F403
