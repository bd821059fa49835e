"""PyMongo's import path ``pymongo.read_concern``: the names live in ``greenmongo.options.read_concern``."""

from greenmongo.options.read_concern import *  # noqa: F401,F403
