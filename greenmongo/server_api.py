"""PyMongo's import path ``pymongo.server_api``: the names live in ``greenmongo.options.server_api``."""

from greenmongo.options.server_api import *  # noqa: F401,F403
