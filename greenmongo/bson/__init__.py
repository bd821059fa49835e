"""greenmongo.bson: BSON, written here (greenmongo never imports PyMongo's ``bson``).

``encode``/``decode`` and friends live in ``codec``; each type has its own module.
"""

from __future__ import annotations

from greenmongo.bson.binary import (
    ALL_UUID_REPRESENTATIONS,
    BINARY_SUBTYPE,
    CSHARP_LEGACY,
    FUNCTION_SUBTYPE,
    JAVA_LEGACY,
    MD5_SUBTYPE,
    OLD_BINARY_SUBTYPE,
    OLD_UUID_SUBTYPE,
    PYTHON_LEGACY,
    STANDARD,
    USER_DEFINED_SUBTYPE,
    UUID_SUBTYPE,
    VECTOR_SUBTYPE,
    Binary,
    BinaryVector,
    BinaryVectorDtype,
    UuidRepresentation,
)
from greenmongo.bson.code import Code
from greenmongo.bson.codec import (
    MAX_NESTING_DEPTH,
    decode,
    decode_all,
    decode_file_iter,
    decode_iter,
    encode,
    has_c,
    is_valid,
)
from greenmongo.bson.codec_options import (
    DEFAULT_CODEC_OPTIONS,
    CodecOptions,
    TypeCodec,
    TypeDecoder,
    TypeEncoder,
    TypeRegistry,
)
from greenmongo.bson.datetime_ms import DatetimeConversion, DatetimeMS
from greenmongo.bson.dbref import DBRef
from greenmongo.bson.decimal128 import Decimal128
from greenmongo.bson.deprecated import UNDEFINED, DBPointer, Symbol, Undefined
from greenmongo.bson.int64 import Int64
from greenmongo.bson.min_max import MaxKey, MinKey
from greenmongo.bson.objectid import ObjectId
from greenmongo.bson.raw import RawBSONDocument
from greenmongo.bson.regex import Regex
from greenmongo.bson.timestamp import Timestamp
from greenmongo.errors import BSONError, InvalidBSON, InvalidDocument, InvalidId, InvalidStringData

__all__ = [
    "ALL_UUID_REPRESENTATIONS", "BINARY_SUBTYPE", "CSHARP_LEGACY", "FUNCTION_SUBTYPE", "JAVA_LEGACY",
    "MD5_SUBTYPE", "OLD_BINARY_SUBTYPE", "OLD_UUID_SUBTYPE", "PYTHON_LEGACY", "STANDARD",
    "USER_DEFINED_SUBTYPE", "UUID_SUBTYPE", "VECTOR_SUBTYPE", "Binary", "BinaryVector", "BinaryVectorDtype",
    "UuidRepresentation", "Code", "MAX_NESTING_DEPTH", "decode", "decode_all", "decode_file_iter",
    "decode_iter", "encode", "has_c", "is_valid", "DEFAULT_CODEC_OPTIONS", "CodecOptions", "TypeCodec", "TypeDecoder",
    "TypeEncoder", "TypeRegistry", "DatetimeConversion", "DatetimeMS", "DBRef", "Decimal128", "UNDEFINED",
    "DBPointer", "Symbol", "Undefined", "Int64", "MaxKey", "MinKey", "ObjectId", "RawBSONDocument", "Regex",
    "Timestamp", "BSONError", "InvalidBSON", "InvalidDocument", "InvalidId", "InvalidStringData",
]
