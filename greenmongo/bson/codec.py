"""Public BSON entry points: encode, decode, decode_all, decode_iter, decode_file_iter, is_valid,
plus the rest of PyMongo's top-level ``bson`` API (the ``BSON`` bytes class, the element type
bytes ``BSONNUM``..., ``gen_list_name``, ``get_data_and_view``).

The work happens in ``encoder`` and ``decoder``; this module checks arguments and turns every
internal decoding failure into ``InvalidBSON``. Every entry point reads any bytes-like buffer
(bytes, bytearray, memoryview, mmap, array), as PyMongo's do.
"""

from __future__ import annotations

import itertools
import struct
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from greenmongo.bson.codec_options import DEFAULT_CODEC_OPTIONS, CodecOptions
from greenmongo.bson.decoder import _fail, _Malformed, decode_document
from greenmongo.bson.decoder import _speedups as _c_decoder
from greenmongo.bson.encoder import BUILTIN_ENCODED_TYPES, encode_document
from greenmongo.bson.encoder import _speedups as _c_encoder
from greenmongo.bson.limits import MAX_NESTING_DEPTH
from greenmongo.errors import InvalidBSON, InvalidDocument

_UNPACK_INT_FROM = struct.Struct("<i").unpack_from

__all__ = ["BSON", "BSONARR", "BSONBIN", "BSONBOO", "BSONCOD", "BSONCWS", "BSONDAT", "BSONDEC", "BSONINT",
           "BSONLON", "BSONMAX", "BSONMIN", "BSONNUL", "BSONNUM", "BSONOBJ", "BSONOID", "BSONREF", "BSONRGX",
           "BSONSTR", "BSONSYM", "BSONTIM", "BSONUND", "BUILTIN_ENCODED_TYPES", "MAX_NESTING_DEPTH", "decode",
           "decode_all", "decode_file_iter", "decode_iter", "encode", "gen_list_name", "get_data_and_view",
           "has_c", "is_valid"]

# The element type bytes, under PyMongo's names.
BSONNUM = b"\x01"  # double
BSONSTR = b"\x02"  # string
BSONOBJ = b"\x03"  # embedded document
BSONARR = b"\x04"  # array
BSONBIN = b"\x05"  # binary
BSONUND = b"\x06"  # undefined (deprecated)
BSONOID = b"\x07"  # ObjectId
BSONBOO = b"\x08"  # boolean
BSONDAT = b"\x09"  # UTC datetime
BSONNUL = b"\x0a"  # null
BSONRGX = b"\x0b"  # regular expression
BSONREF = b"\x0c"  # DBPointer (deprecated)
BSONCOD = b"\x0d"  # JavaScript code
BSONSYM = b"\x0e"  # symbol (deprecated)
BSONCWS = b"\x0f"  # JavaScript code with scope (deprecated)
BSONINT = b"\x10"  # int32
BSONTIM = b"\x11"  # Timestamp
BSONLON = b"\x12"  # int64
BSONDEC = b"\x13"  # Decimal128
BSONMIN = b"\xff"  # MinKey
BSONMAX = b"\x7f"  # MaxKey


def _as_bytes(data: Any) -> bytes:
    if isinstance(data, bytes):
        return data
    try:
        return bytes(memoryview(data))  # any buffer; copied, so decoding sees fixed bytes
    except TypeError:
        raise TypeError("BSON data must be a bytes-like object (bytes, bytearray, memoryview, mmap, array), "
                        f"not {type(data).__name__}") from None


def get_data_and_view(data: Any) -> tuple[Any, memoryview]:
    """``(data, memoryview(data))``; a buffer other than bytes/bytearray is copied to bytes first."""
    if not isinstance(data, (bytes, bytearray)):
        data = memoryview(data).tobytes()
    return data, memoryview(data)


def gen_list_name() -> Iterator[bytes]:
    """The element names of a BSON array, as encoded cstrings: ``b"0\\x00"``, ``b"1\\x00"``, ... forever."""
    for index in itertools.count():
        yield b"%d\x00" % index


def _check_options(codec_options: Any) -> CodecOptions:
    if codec_options is None:
        return DEFAULT_CODEC_OPTIONS
    if not isinstance(codec_options, CodecOptions):
        raise TypeError("codec_options must be an instance of CodecOptions")
    return codec_options


def _decode_one(data: bytes, pos: int, end: int, opts: CodecOptions) -> tuple[Any, int]:
    """Decode the document starting at ``pos``; return it and the offset just past it."""
    try:
        if end - pos < 5:
            raise _fail(f"not enough data for a BSON document ({end - pos} bytes)", pos)
        length = _UNPACK_INT_FROM(data, pos)[0]
        if length < 5:
            raise _fail(f"document length {length} is below the minimum of 5", pos)
        stop = pos + length
        if stop > end:
            raise _fail(f"document length {length} exceeds the {end - pos} bytes available", pos)
        if data[stop - 1] != 0:
            raise _fail("document is not NUL-terminated", stop - 1)
        return decode_document(data, pos, stop, opts), stop
    except _Malformed as exc:
        raise InvalidBSON(str(exc)) from None
    except (struct.error, IndexError, ValueError, OverflowError, TypeError, RecursionError) as exc:
        # A type constructor refused a decoded value (e.g. an invalid Decimal128 bit pattern).
        raise InvalidBSON(f"invalid BSON in document at byte {pos}: {exc}") from None


def decode(data: Any, codec_options: CodecOptions | None = None) -> Any:
    """Decode exactly one BSON document; trailing bytes are an error."""
    data = _as_bytes(data)
    opts = _check_options(codec_options)
    doc, stop = _decode_one(data, 0, len(data), opts)
    if stop != len(data):
        raise InvalidBSON(f"{len(data) - stop} bytes of trailing data after the document at byte {stop}")
    return doc


class DocumentBatch(Sequence[Any]):
    """The documents of a cursor batch, left encoded in the reply and decoded one by one as they are read.

    ``decode_cursor_reply`` makes one for ``cursor.firstBatch`` / ``cursor.nextBatch`` when the array is
    well framed and holds only documents. A cursor that hands each document on and drops it never holds
    the whole batch decoded: decoding a batch at once costs about twice as much per document (the garbage
    collector tracing thousands of live containers, and fresh memory for every document).
    A document whose own bytes are bad raises ``InvalidBSON`` when it is read, and only then.
    """

    __slots__ = ("_data", "_starts", "_codec_options")

    def __init__(self, data: Any, starts: Any, codec_options: CodecOptions) -> None:
        self._data = data  # bytes, or a memoryview of the reply's own buffer
        #: Where each document starts in ``data``: int64s, or a memoryview of them cast to "q".
        self._starts = starts if isinstance(starts, memoryview) else memoryview(starts).cast("q")
        self._codec_options = codec_options

    def __len__(self) -> int:
        return len(self._starts)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return DocumentBatch(self._data, self._starts[index], self._codec_options)
        return _decode_at(self._data, self._starts[index], self._codec_options)

    def __iter__(self) -> Iterator[Any]:
        data, opts = self._data, self._codec_options
        for start in self._starts:
            yield _decode_at(data, start, opts)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (DocumentBatch, list)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"DocumentBatch({len(self)} documents)"


def _decode_at(data: Any, pos: int, codec_options: CodecOptions) -> Any:
    """The document at ``pos`` of ``data`` (bytes, or a memoryview of them): a DocumentBatch read."""
    if not isinstance(data, bytes):
        data = bytes(data)
    return _decode_one(data, pos, len(data), codec_options)[0]


def decode_cursor_reply(data: Any, codec_options: CodecOptions | None = None) -> Any:
    """``decode`` for a command reply whose ``cursor.firstBatch`` or ``cursor.nextBatch`` a cursor will read
    one document at a time: with the C accelerator the batch is a ``DocumentBatch``; the pure-Python codec
    decodes it whole, as a list."""
    return decode(data, codec_options)


def decode_all(data: Any, codec_options: CodecOptions | None = None) -> list[Any]:
    """Decode a buffer of concatenated BSON documents."""
    data = _as_bytes(data)
    opts = _check_options(codec_options)
    docs = []
    pos, end = 0, len(data)
    while pos < end:
        doc, pos = _decode_one(data, pos, end, opts)
        docs.append(doc)
    return docs


def decode_iter(data: Any, codec_options: CodecOptions | None = None) -> Iterator[Any]:
    """Lazily decode concatenated BSON documents, one at a time."""
    data = _as_bytes(data)
    opts = _check_options(codec_options)
    pos, end = 0, len(data)
    while pos < end:
        doc, pos = _decode_one(data, pos, end, opts)
        yield doc


def decode_file_iter(file_obj: Any, codec_options: CodecOptions | None = None) -> Iterator[Any]:
    """Decode documents from a binary file object, reading one document at a time."""
    opts = _check_options(codec_options)
    offset = 0
    while True:
        size_bytes = file_obj.read(4)
        if not size_bytes:
            return
        if len(size_bytes) != 4:
            raise InvalidBSON(f"cut off in the middle of a document length at byte {offset}")
        length = _UNPACK_INT_FROM(size_bytes, 0)[0]
        if length < 5:
            raise InvalidBSON(f"document length {length} is below the minimum of 5 at byte {offset}")
        rest = file_obj.read(length - 4)
        if len(rest) != length - 4:
            raise InvalidBSON(f"file ends inside the document that starts at byte {offset}")
        data = size_bytes + rest
        doc, _ = _decode_one(data, 0, length, opts)
        offset += length
        yield doc


def encode(document: Any, check_keys: bool = False, codec_options: CodecOptions | None = None) -> bytes:
    """Encode a mapping as BSON. Top-level ``_id`` is written first, as the server expects."""
    opts = _check_options(codec_options)
    try:
        return encode_document(document, check_keys, opts)
    except RecursionError:
        raise InvalidDocument("document nests too deeply to encode (a reference cycle?)", document) from None
    except InvalidDocument as exc:  # PyMongo's InvalidDocument.document: the document being encoded
        if exc.document is None:
            exc._document = document
        raise
    except struct.error as exc:  # an Int64 (or subclass) outside 64 bits
        raise OverflowError(f"BSON can only handle up to 8-byte ints: {exc}") from None


def is_valid(bson: Any) -> bool:
    """True if ``bson`` (any bytes-like buffer) is exactly one valid BSON document."""
    try:
        memoryview(bson)
    except TypeError:
        raise TypeError(f"BSON data must be a bytes-like object, not {type(bson).__name__}") from None
    try:
        decode(bson)
        return True
    except InvalidBSON:
        return False


class BSON(bytes):
    """Encoded BSON as a ``bytes`` subclass: PyMongo's older API. ``encode``/``decode`` are faster."""

    @classmethod
    def encode(cls, document: Mapping[str, Any], check_keys: bool = False,
               codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS) -> BSON:
        """``document`` encoded, as an instance of this class."""
        return cls(encode(document, check_keys, codec_options))

    def decode(self, codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS) -> Any:  # type: ignore[override]
        """The document these bytes hold (``bytes.decode``'s text decoding does not apply)."""
        return decode(self, codec_options)


def has_c() -> bool:
    """True when the C accelerator (greenmongo.bson._speedups) encodes and decodes."""
    return _c_decoder is not None and _c_encoder is not None


# -- the optional C accelerator (_speedups.c) -------------------------------------------------------
# Same signatures, values and errors; the pure functions stay importable as ``_py_*`` for tests.
# decode_iter, decode_file_iter and is_valid call the rebound names.

_py_decode_one, _py_decode, _py_decode_all, _py_encode = _decode_one, decode, decode_all, encode
_py_decode_cursor_reply, _py_decode_at = decode_cursor_reply, _decode_at
if _c_decoder is not None or _c_encoder is not None:
    try:
        (_c_decoder or _c_encoder)._init_codec({
            "InvalidBSON": InvalidBSON, "InvalidDocument": InvalidDocument, "CodecOptions": CodecOptions,
            "DEFAULT_CODEC_OPTIONS": DEFAULT_CODEC_OPTIONS, "struct_error": struct.error,
            "_decode_one": _py_decode_one, "DocumentBatch": DocumentBatch,
        })
    except Exception as exc:  # decode_document/encode_document stay accelerated; the entry points do not
        warnings.warn(f"greenmongo.bson: C entry points disabled: {exc}", RuntimeWarning, stacklevel=2)
        _c_decoder = _c_encoder = None
if _c_decoder is not None:
    _decode_one, decode, decode_all = _c_decoder._decode_one, _c_decoder.decode, _c_decoder.decode_all  # noqa: F811
    decode_cursor_reply, _decode_at = _c_decoder.decode_cursor_reply, _c_decoder._decode_at  # noqa: F811
if _c_encoder is not None:
    encode = _c_encoder.encode  # noqa: F811
