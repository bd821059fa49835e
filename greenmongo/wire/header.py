"""The 16-byte message header every wire message starts with, and its validation.

A reply header is the first thing read from the socket; validating it before
reading the body is what turns a lying length or a garbage opcode into a
``ProtocolError`` instead of a huge allocation or a hang.
"""

from __future__ import annotations

import itertools
import struct
from typing import NamedTuple, Optional

from greenmongo.errors import ProtocolError

OP_REPLY = 1
OP_QUERY = 2004
OP_COMPRESSED = 2012
OP_MSG = 2013

#: Opcodes a server may send to a driver.
REPLY_OPCODES = frozenset({OP_REPLY, OP_COMPRESSED, OP_MSG})

HEADER = struct.Struct("<iiii")
HEADER_SIZE = HEADER.size

#: The server's default maxMessageSizeBytes, used until a hello says otherwise.
DEFAULT_MAX_MESSAGE_SIZE = 48_000_000

_request_ids = itertools.count(1)


def next_request_id() -> int:
    """A process-wide increasing requestID, wrapped to stay a positive int32."""
    return next(_request_ids) & 0x7FFFFFFF or next(_request_ids)


class MsgHeader(NamedTuple):
    length: int
    request_id: int
    response_to: int
    opcode: int

    @property
    def body_length(self) -> int:
        return self.length - HEADER_SIZE


def pack_header(length: int, request_id: int, response_to: int, opcode: int) -> bytes:
    return HEADER.pack(length, request_id, response_to, opcode)


def parse_header(data: bytes | bytearray | memoryview) -> MsgHeader:
    """Split 16 bytes into their four fields, without judging them."""
    if len(data) != HEADER_SIZE:
        raise ProtocolError(f"a message header is {HEADER_SIZE} bytes, got {len(data)}")
    return MsgHeader(*HEADER.unpack(data))


def validate_reply_header(
    header: MsgHeader,
    *,
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    expected_response_to: Optional[int] = None,
) -> MsgHeader:
    """Check a reply header against what this connection expects; return it unchanged.

    ``expected_response_to`` is the requestID of the request (or, while an
    exhaust stream is open, of the previous reply); None skips that check.
    """
    if header.length < HEADER_SIZE + 1:
        raise ProtocolError(f"message length {header.length} is shorter than a header plus a body")
    if header.length > max_message_size:
        raise ProtocolError(
            f"message length {header.length} is larger than the maximum message size {max_message_size}")
    if header.opcode not in REPLY_OPCODES:
        raise ProtocolError(f"unexpected opcode {header.opcode} in a reply (expected OP_MSG, OP_REPLY "
                            f"or OP_COMPRESSED)")
    if expected_response_to is not None and header.response_to != expected_response_to:
        raise ProtocolError(
            f"reply responseTo {header.response_to} does not match the request id {expected_response_to}")
    return header
