"""PyMongo's ``bson.min_key`` import path; MinKey lives in :mod:`greenmongo.bson.min_max`."""

from greenmongo.bson.min_max import MinKey

__all__ = ["MinKey"]
