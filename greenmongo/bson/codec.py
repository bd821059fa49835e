"""Public BSON entry points: encode, decode, decode_all, decode_iter, decode_file_iter, is_valid.

The work happens in ``encoder`` and ``decoder``; this module checks arguments and turns every
internal decoding failure into ``InvalidBSON``.
"""

from __future__ import annotations

import struct
import warnings
from collections.abc import Iterator
from typing import Any

from greenmongo.bson.codec_options import DEFAULT_CODEC_OPTIONS, CodecOptions
from greenmongo.bson.decoder import _fail, _Malformed, decode_document
from greenmongo.bson.decoder import _speedups as _c_decoder
from greenmongo.bson.encoder import BUILTIN_ENCODED_TYPES, encode_document
from greenmongo.bson.encoder import _speedups as _c_encoder
from greenmongo.bson.limits import MAX_NESTING_DEPTH
from greenmongo.errors import InvalidBSON, InvalidDocument

_UNPACK_INT_FROM = struct.Struct("<i").unpack_from

__all__ = ["BUILTIN_ENCODED_TYPES", "MAX_NESTING_DEPTH", "decode", "decode_all", "decode_file_iter",
           "decode_iter", "encode", "has_c", "is_valid"]



def _as_bytes(data: Any) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"BSON data must be bytes, bytearray or memoryview, not {type(data).__name__}")


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


def decode_all(data: Any, codec_options: CodecOptions | None = None) -> list:
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
        raise InvalidDocument("document nests too deeply to encode (a reference cycle?)") from None
    except struct.error as exc:  # an Int64 (or subclass) outside 64 bits
        raise OverflowError(f"BSON can only handle up to 8-byte ints: {exc}") from None


def is_valid(data: Any) -> bool:
    """True if ``data`` is exactly one valid BSON document."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError("BSON data must be bytes, bytearray or memoryview")
    try:
        decode(data)
        return True
    except InvalidBSON:
        return False


def has_c() -> bool:
    """True when the C accelerator (greenmongo.bson._speedups) encodes and decodes."""
    return _c_decoder is not None and _c_encoder is not None


# -- the optional C accelerator (_speedups.c) -------------------------------------------------------
# Same signatures, values and errors; the pure functions stay importable as ``_py_*`` for tests.
# decode_iter, decode_file_iter and is_valid call the rebound names.

_py_decode_one, _py_decode, _py_decode_all, _py_encode = _decode_one, decode, decode_all, encode
if _c_decoder is not None or _c_encoder is not None:
    try:
        (_c_decoder or _c_encoder)._init_codec({
            "InvalidBSON": InvalidBSON, "InvalidDocument": InvalidDocument, "CodecOptions": CodecOptions,
            "DEFAULT_CODEC_OPTIONS": DEFAULT_CODEC_OPTIONS, "struct_error": struct.error,
            "_decode_one": _py_decode_one,
        })
    except Exception as exc:  # decode_document/encode_document stay accelerated; the entry points do not
        warnings.warn(f"greenmongo.bson: C entry points disabled: {exc}", RuntimeWarning, stacklevel=2)
        _c_decoder = _c_encoder = None
if _c_decoder is not None:
    _decode_one, decode, decode_all = _c_decoder._decode_one, _c_decoder.decode, _c_decoder.decode_all  # noqa: F811
if _c_encoder is not None:
    encode = _c_encoder.encode  # noqa: F811
