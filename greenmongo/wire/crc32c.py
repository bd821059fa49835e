"""CRC-32C (Castagnoli), the checksum OP_MSG carries when ``checksumPresent`` is set.

Pure Python and table driven: checksums are optional on the wire (the server
only sends one when asked, and skips it over TLS), so simplicity beats speed.
"""

from __future__ import annotations

_POLYNOMIAL = 0x82F63B78  # reflected form of 0x1EDC6F41


def _build_table() -> tuple[int, ...]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ _POLYNOMIAL if crc & 1 else crc >> 1
        table.append(crc)
    return tuple(table)


_TABLE = _build_table()


def crc32c(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """Return the CRC-32C of ``data``; pass a previous result as ``value`` to continue it."""
    table = _TABLE
    crc = value ^ 0xFFFFFFFF
    for byte in bytes(data):
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF
