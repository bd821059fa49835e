"""PyMongo's import path ``pymongo.server_description``: the class lives in ``greenmongo.sdam.server_description``."""

from greenmongo.sdam.server_description import ServerDescription

__all__ = ["ServerDescription"]
