"""PyMongo's ``bson.errors``: the BSON exceptions, whose home is :mod:`greenmongo.errors`.

One class per error across the driver, so ``except bson.errors.InvalidDocument`` and
``except pymongo.errors.InvalidDocument`` catch the same thing. Unlike PyMongo, ``BSONError``
derives from ``PyMongoError`` (greenmongo's single hierarchy).
"""

from __future__ import annotations

from greenmongo.errors import BSONError, InvalidBSON, InvalidDocument, InvalidId, InvalidStringData

__all__ = ["BSONError", "InvalidBSON", "InvalidDocument", "InvalidId", "InvalidStringData"]
