"""PyMongo's import path ``pymongo.read_preferences``: the names live in ``greenmongo.options.read_preferences``."""

from greenmongo.options.read_preferences import *  # noqa: F401,F403
