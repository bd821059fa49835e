"""PyMongo's import path ``pymongo.write_concern``: the names live in ``greenmongo.options.write_concern``."""

from greenmongo.common import validate_boolean  # noqa: F401  (PyMongo defines it here)
from greenmongo.options.write_concern import *  # noqa: F401,F403
