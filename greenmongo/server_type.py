"""PyMongo's import path ``pymongo.server_type``: ``SERVER_TYPE.RSPrimary`` and friends.

greenmongo's is an IntEnum (``greenmongo.sdam.server_type.ServerType``) with PyMongo's member names and
values, so ``SERVER_TYPE.RSPrimary == 2`` and comparisons with ``ServerDescription.server_type`` hold.
"""

from greenmongo.sdam.server_type import SERVER_TYPE

__all__ = ["SERVER_TYPE"]
