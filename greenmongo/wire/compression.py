"""OP_COMPRESSED (opcode 2012): snappy, zlib and zstd, per the wire compression spec.

Decompression is bounded: the declared uncompressed size is checked against
maxMessageSizeBytes before any work is done, and the output must match it
exactly, so a hostile or corrupt reply cannot balloon memory.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any, Callable, Iterable, NamedTuple, Optional

from greenmongo.errors import ProtocolError
from greenmongo.wire.header import HEADER_SIZE, OP_COMPRESSED, pack_header, parse_header

NOOP_ID = 0
SNAPPY_ID = 1
ZLIB_ID = 2
ZSTD_ID = 3

COMPRESSOR_IDS = {"noop": NOOP_ID, "snappy": SNAPPY_ID, "zlib": ZLIB_ID, "zstd": ZSTD_ID}
COMPRESSOR_NAMES = {value: name for name, value in COMPRESSOR_IDS.items()}

#: Compressor names a client may ask for in ``compressors=``.
KNOWN_COMPRESSORS = ("snappy", "zlib", "zstd")

#: Commands whose messages must never be compressed (lower-cased: ``isMaster`` and ``ismaster`` alike).
UNCOMPRESSIBLE_COMMANDS = frozenset({
    "hello", "ismaster", "saslstart", "saslcontinue", "getnonce", "authenticate",
    "createuser", "updateuser", "copydbsaslstart", "copydbgetnonce", "copydb",
})

_PREFIX = struct.Struct("<iiB")  # originalOpcode, uncompressedSize, compressorId


def may_compress(command_name: str) -> bool:
    """False for the handshake and authentication commands the spec keeps uncompressed."""
    return command_name.lower() not in UNCOMPRESSIBLE_COMMANDS


def _import_snappy() -> Any:
    """python-snappy (no type information), or None when it is not installed."""
    try:
        import snappy
    except ImportError:
        return None
    return snappy


def _import_zstandard() -> Any:
    """zstandard, or None when it is not installed."""
    try:
        import zstandard
    except ImportError:
        return None
    return zstandard


def preload(names: Iterable[str]) -> None:
    """Import the libraries of the compressors a client asks for, when the client is created: a first
    import inside a connection's handshake would stall the hub in the middle of a request."""
    for name in names:
        if name == "snappy":
            _import_snappy()
        elif name == "zstd":
            _import_zstandard()


def available_compressors() -> tuple[str, ...]:
    """The compressors whose libraries import here (zlib always; snappy and zstd when installed)."""
    names = []
    if _import_snappy() is not None:
        names.append("snappy")
    names.append("zlib")
    if _import_zstandard() is not None:
        names.append("zstd")
    return tuple(names)


class Compressor(NamedTuple):
    """One negotiated compressor: its wire id, its name and a bytes -> bytes function."""

    name: str
    id: int
    compress: Callable[[bytes], bytes]


def get_compressor(name: str, zlib_level: int = -1) -> Compressor:
    """The compressor called ``name``; ``zlib_level`` (-1..9) only matters for zlib."""
    if name == "snappy":
        snappy = _import_snappy()
        if snappy is None:
            raise ProtocolError("the snappy compressor needs python-snappy installed")
        return Compressor("snappy", SNAPPY_ID, snappy.compress)
    if name == "zlib":
        if not -1 <= zlib_level <= 9:
            raise ValueError(f"zlibCompressionLevel must be between -1 and 9, not {zlib_level}")
        return Compressor("zlib", ZLIB_ID, lambda data: zlib.compress(data, zlib_level))
    if name == "zstd":
        zstandard = _import_zstandard()
        if zstandard is None:
            raise ProtocolError("the zstd compressor needs the zstandard package installed")
        compressor = zstandard.ZstdCompressor()
        return Compressor("zstd", ZSTD_ID, compressor.compress)
    if name == "noop":
        return Compressor("noop", NOOP_ID, bytes)
    raise ValueError(f"unknown compressor {name!r}")


def negotiate(client_compressors: Iterable[str], server_compressors: Iterable[str]) -> Optional[str]:
    """The first compressor in the client's order that the server also offered, or None."""
    offered = set(server_compressors or ())
    for name in client_compressors or ():
        if name in offered:
            return name
    return None


def compress_message(message: bytes, compressor: Compressor) -> bytes:
    """Wrap a complete uncompressed message in OP_COMPRESSED, keeping its requestID and responseTo."""
    header = parse_header(message[:HEADER_SIZE])
    body = bytes(message[HEADER_SIZE:])
    compressed = compressor.compress(body)
    payload = _PREFIX.pack(header.opcode, len(body), compressor.id) + compressed
    return pack_header(HEADER_SIZE + len(payload), header.request_id, header.response_to, OP_COMPRESSED) + payload


def _snappy_declared_length(data: bytes) -> int:
    """The varint uncompressed length that opens a raw snappy block."""
    value = shift = 0
    for byte in data[:5]:
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value
        shift += 7
    raise ProtocolError("snappy data does not start with a valid length")


def decompress(compressor_id: int, data: bytes, uncompressed_size: int) -> bytes:
    """Decompress ``data``, insisting the result is exactly ``uncompressed_size`` bytes."""
    try:
        if compressor_id == NOOP_ID:
            result = bytes(data)
        elif compressor_id == SNAPPY_ID:
            snappy = _import_snappy()
            if snappy is None:
                raise ProtocolError("server sent snappy data but python-snappy is not installed")
            if _snappy_declared_length(data) != uncompressed_size:
                raise ProtocolError("snappy data declares a length other than uncompressedSize")
            result = snappy.uncompress(bytes(data))
        elif compressor_id == ZLIB_ID:
            inflater = zlib.decompressobj()
            result = inflater.decompress(data, uncompressed_size + 1)
        elif compressor_id == ZSTD_ID:
            zstandard = _import_zstandard()
            if zstandard is None:
                raise ProtocolError("server sent zstd data but zstandard is not installed")
            data = bytes(data)
            # zstandard allocates a frame's declared content size, whatever max_output_size says.
            declared = zstandard.frame_content_size(data)
            if declared not in (-1, uncompressed_size):
                raise ProtocolError(f"zstd frame declares {declared} bytes but OP_COMPRESSED declared "
                                    f"{uncompressed_size}")
            result = zstandard.ZstdDecompressor().decompress(data, max_output_size=uncompressed_size)
        else:
            raise ProtocolError(f"unknown compressorId {compressor_id}")
    except ProtocolError:
        raise
    except Exception as exc:
        name = COMPRESSOR_NAMES.get(compressor_id, compressor_id)
        raise ProtocolError(f"could not decompress {name} data: {type(exc).__name__}: {exc}") from exc
    if len(result) != uncompressed_size:
        raise ProtocolError(
            f"decompressed {len(result)} bytes but OP_COMPRESSED declared {uncompressed_size}")
    return result


def unpack_compressed(payload: bytes | bytearray | memoryview, *, max_message_size: int) -> tuple[int, bytes, int]:
    """Parse the bytes after an OP_COMPRESSED header: (original opcode, decompressed body, compressorId)."""
    data = bytes(payload)
    if len(data) < _PREFIX.size:
        raise ProtocolError(f"OP_COMPRESSED body of {len(data)} bytes is too short")
    original_opcode, uncompressed_size, compressor_id = _PREFIX.unpack_from(data, 0)
    if original_opcode == OP_COMPRESSED:
        raise ProtocolError("OP_COMPRESSED wraps another OP_COMPRESSED")
    if uncompressed_size < 0 or uncompressed_size + HEADER_SIZE > max_message_size:
        raise ProtocolError(f"OP_COMPRESSED uncompressedSize {uncompressed_size} is out of bounds "
                            f"(maximum message size {max_message_size})")
    body = decompress(compressor_id, data[_PREFIX.size:], uncompressed_size)
    return original_opcode, body, compressor_id
