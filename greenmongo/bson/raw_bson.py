"""PyMongo's ``bson.raw_bson`` import path; RawBSONDocument lives in :mod:`greenmongo.bson.raw`."""

from greenmongo.bson.codec_options import DEFAULT_CODEC_OPTIONS as DEFAULT  # noqa: F401  (PyMongo's name here)
from greenmongo.bson.codec_options import CodecOptions  # noqa: F401  (PyMongo's name here)
from greenmongo.bson.raw import DEFAULT_RAW_BSON_OPTIONS, RawBSONDocument

__all__ = ["DEFAULT_RAW_BSON_OPTIONS", "RawBSONDocument"]
