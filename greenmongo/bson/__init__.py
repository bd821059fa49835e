"""greenmongo.bson: BSON, written here (greenmongo never imports PyMongo's ``bson``).

``encode``/``decode`` and friends live in ``codec``; each type has its own module. Every public
module and name of PyMongo 4.20's ``bson`` package is here too (``install_as_pymongo()`` serves
this package as ``bson``), some as thin modules re-exporting greenmongo's own: ``bson.errors``
(greenmongo.errors), ``bson.raw_bson`` (raw), ``bson.min_key``/``bson.max_key`` (min_max).

Deliberate differences from PyMongo's ``bson`` (the full list, each with its reason and a test:
``DELIBERATE_DIFFERENCES`` in tests/test_bson_public_api.py), chiefly:

- the deprecated types decode to their own classes (``Symbol``, ``DBPointer``, ``UNDEFINED``) and
  re-encode byte for byte; PyMongo decodes them lossily (str, DBRef, None);
- ``BSONError`` derives from ``PyMongoError`` (greenmongo has one exception hierarchy);
- ``tz_util.utc`` is ``datetime.timezone.utc``, the tzinfo decoded datetimes carry;
- Extended JSON writes ``$uuid`` in the spec's hyphenated form, ``$date`` strings in UTC and never
  a bare ``NaN`` (which is not JSON).

UUIDs follow the Binary UUID spec, as PyMongo 4 does: under ``UuidRepresentation.UNSPECIFIED`` a
native ``uuid.UUID`` is refused (ValueError) and subtypes 3/4 decode as ``Binary``.
"""

from __future__ import annotations

from greenmongo.bson.binary import (
    ALL_UUID_REPRESENTATIONS,
    ALL_UUID_SUBTYPES,
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
    BSON,
    BSONARR,
    BSONBIN,
    BSONBOO,
    BSONCOD,
    BSONCWS,
    BSONDAT,
    BSONDEC,
    BSONINT,
    BSONLON,
    BSONMAX,
    BSONMIN,
    BSONNUL,
    BSONNUM,
    BSONOBJ,
    BSONOID,
    BSONREF,
    BSONRGX,
    BSONSTR,
    BSONSYM,
    BSONTIM,
    BSONUND,
    MAX_NESTING_DEPTH,
    decode,
    decode_all,
    decode_file_iter,
    decode_iter,
    encode,
    gen_list_name,
    get_data_and_view,
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
from greenmongo.bson.datetime_ms import EPOCH_AWARE, EPOCH_NAIVE, DatetimeConversion, DatetimeMS
from greenmongo.bson.dbref import DBRef
from greenmongo.bson.decimal128 import Decimal128
from greenmongo.bson.deprecated import UNDEFINED, DBPointer, Symbol, Undefined
from greenmongo.bson.int64 import Int64
from greenmongo.bson.min_max import MaxKey, MinKey
from greenmongo.bson.objectid import ObjectId
from greenmongo.bson.raw import RawBSONDocument
from greenmongo.bson.regex import Regex
from greenmongo.bson.son import RE_TYPE, SON
from greenmongo.bson.timestamp import Timestamp
from greenmongo.bson.tz_util import utc
from greenmongo.errors import BSONError, InvalidBSON, InvalidDocument, InvalidId, InvalidStringData

# ``import bson`` makes these submodules attributes under PyMongo (``bson.errors.InvalidId``).
from greenmongo.bson import errors, max_key, min_key  # noqa: E402, F401  isort: skip

# PyMongo's bson.__all__, then greenmongo's additions (the vector types, the deprecated types,
# TypeRegistry and friends, the other subtypes, has_c's siblings).
__all__ = [
    "ALL_UUID_SUBTYPES", "BSON", "BSONARR", "BSONBIN", "BSONBOO", "BSONCOD", "BSONCWS", "BSONDAT", "BSONDEC",
    "BSONINT", "BSONLON", "BSONMAX", "BSONMIN", "BSONNUL", "BSONNUM", "BSONOBJ", "BSONOID", "BSONREF", "BSONRGX",
    "BSONSTR", "BSONSYM", "BSONTIM", "BSONUND", "CSHARP_LEGACY", "DEFAULT_CODEC_OPTIONS", "EPOCH_AWARE",
    "EPOCH_NAIVE", "JAVA_LEGACY", "OLD_UUID_SUBTYPE", "RE_TYPE", "SON", "STANDARD", "UUID_SUBTYPE", "Binary",
    "Code", "CodecOptions", "DBRef", "DatetimeConversion", "DatetimeMS", "Decimal128", "Int64", "InvalidBSON",
    "InvalidDocument", "InvalidStringData", "MaxKey", "MinKey", "ObjectId", "Regex", "Timestamp",
    "UuidRepresentation", "decode", "decode_all", "decode_file_iter", "decode_iter", "encode", "gen_list_name",
    "get_data_and_view", "has_c", "is_valid", "utc",
    # greenmongo's
    "ALL_UUID_REPRESENTATIONS", "BINARY_SUBTYPE", "FUNCTION_SUBTYPE", "MD5_SUBTYPE", "OLD_BINARY_SUBTYPE",
    "PYTHON_LEGACY", "USER_DEFINED_SUBTYPE", "VECTOR_SUBTYPE", "BinaryVector", "BinaryVectorDtype",
    "MAX_NESTING_DEPTH", "TypeCodec", "TypeDecoder", "TypeEncoder", "TypeRegistry", "UNDEFINED", "DBPointer",
    "Symbol", "Undefined", "RawBSONDocument", "BSONError", "InvalidId",
]
