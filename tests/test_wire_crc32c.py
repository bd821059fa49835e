"""CRC-32C against the published check value and the RFC 3720 (iSCSI) test vectors."""

from __future__ import annotations

import pytest

from greenmongo.wire.crc32c import crc32c


@pytest.mark.parametrize("data, expected", [
    (b"", 0x00000000),
    (b"123456789", 0xE3069283),                 # the CRC catalogue check value
    (b"\x00" * 32, 0x8A9136AA),                 # RFC 3720 B.4: 32 bytes of zeros
    (b"\xff" * 32, 0x62A8AB43),                 # RFC 3720 B.4: 32 bytes of ones
    (bytes(range(32)), 0x46DD794E),             # RFC 3720 B.4: incrementing
    (bytes(range(31, -1, -1)), 0x113FDB5C),     # RFC 3720 B.4: decrementing
    (b"a", 0xC1D04330),
])
def test_vectors(data: bytes, expected: int) -> None:
    assert crc32c(data) == expected


def test_continuation_equals_one_shot() -> None:
    data = bytes(range(256)) * 3
    assert crc32c(data[100:], crc32c(data[:100])) == crc32c(data)


def test_accepts_memoryview_and_bytearray() -> None:
    assert crc32c(memoryview(b"123456789")) == crc32c(bytearray(b"123456789")) == 0xE3069283
