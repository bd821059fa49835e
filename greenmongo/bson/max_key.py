"""PyMongo's ``bson.max_key`` import path; MaxKey lives in :mod:`greenmongo.bson.min_max`."""

from greenmongo.bson.min_max import MaxKey

__all__ = ["MaxKey"]
