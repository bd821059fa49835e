"""PyMongo's import path ``pymongo.results``: the names live in ``greenmongo.operations.results``."""

from greenmongo.operations.results import *  # noqa: F401,F403
