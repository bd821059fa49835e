"""Header packing and the reply-header checks that guard the socket reader."""

from __future__ import annotations

import struct

import pytest

from greenmongo.errors import ProtocolError
from greenmongo.wire.header import (
    OP_COMPRESSED,
    OP_MSG,
    OP_QUERY,
    OP_REPLY,
    MsgHeader,
    next_request_id,
    pack_header,
    parse_header,
    validate_reply_header,
)


def test_pack_and_parse_round_trip() -> None:
    raw = pack_header(100, 7, 3, OP_MSG)
    assert raw == struct.pack("<iiii", 100, 7, 3, 2013)
    header = parse_header(raw)
    assert header == MsgHeader(100, 7, 3, OP_MSG)
    assert header.body_length == 84


def test_parse_rejects_wrong_size() -> None:
    with pytest.raises(ProtocolError):
        parse_header(b"\x00" * 15)


@pytest.mark.parametrize("opcode", [OP_MSG, OP_REPLY, OP_COMPRESSED])
def test_valid_reply_opcodes(opcode: int) -> None:
    header = MsgHeader(40, 1, 9, opcode)
    assert validate_reply_header(header, expected_response_to=9) is header


@pytest.mark.parametrize("header, match", [
    (MsgHeader(16, 1, 9, OP_MSG), "shorter"),
    (MsgHeader(-5, 1, 9, OP_MSG), "shorter"),
    (MsgHeader(1000, 1, 9, OP_MSG), "larger than the maximum"),
    (MsgHeader(40, 1, 9, OP_QUERY), "unexpected opcode 2004"),
    (MsgHeader(40, 1, 9, 4242), "unexpected opcode 4242"),
    (MsgHeader(40, 1, 8, OP_MSG), "responseTo 8 does not match the request id 9"),
])
def test_invalid_reply_headers(header: MsgHeader, match: str) -> None:
    with pytest.raises(ProtocolError, match=match):
        validate_reply_header(header, max_message_size=999, expected_response_to=9)


def test_response_to_check_can_be_skipped() -> None:
    header = MsgHeader(40, 1, 12345, OP_MSG)
    assert validate_reply_header(header, expected_response_to=None) == header


def test_request_ids_increase_and_stay_positive() -> None:
    first, second = next_request_id(), next_request_id()
    assert 0 < first < second <= 0x7FFFFFFF
