"""PyMongo's import path ``pymongo.client_session``: sessions live in ``greenmongo.session``,
transaction options and state in ``greenmongo.transaction``."""

from greenmongo.session import ClientSession, SessionOptions
from greenmongo.transaction import TransactionOptions

__all__ = ["ClientSession", "SessionOptions", "TransactionOptions"]
