"""PyMongo's import path ``pymongo.write_concern``: the names live in ``greenmongo.options.write_concern``."""

from greenmongo.options.write_concern import *  # noqa: F401,F403
