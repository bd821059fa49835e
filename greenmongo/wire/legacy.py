"""OP_QUERY and OP_REPLY, kept only for the legacy ``hello`` (isMaster) handshake.

Servers older than 3.6 answer nothing else, and the handshake spec requires
the first message to use OP_QUERY unless serverApi or loadBalanced is set.
"""

from __future__ import annotations

import struct
from typing import Any, Mapping, NamedTuple, Optional

from greenmongo import bson
from greenmongo.bson.codec_options import CodecOptions
from greenmongo.errors import ProtocolError
from greenmongo.wire.header import HEADER_SIZE, OP_QUERY, pack_header

QUERY_FLAG_SECONDARY_OK = 1 << 2

REPLY_FLAG_CURSOR_NOT_FOUND = 1 << 0
REPLY_FLAG_QUERY_FAILURE = 1 << 1

_QUERY_PREFIX = struct.Struct("<i")
_QUERY_NUMBERS = struct.Struct("<ii")
_REPLY_PREFIX = struct.Struct("<iqii")
_INT32 = struct.Struct("<i")


class OpReply(NamedTuple):
    flags: int
    cursor_id: int
    starting_from: int
    documents: list[bytes]

    @property
    def query_failure(self) -> bool:
        return bool(self.flags & REPLY_FLAG_QUERY_FAILURE)


def pack_op_query(
    request_id: int,
    collection: str,
    query: bytes,
    *,
    flags: int = 0,
    number_to_skip: int = 0,
    number_to_return: int = -1,
) -> bytes:
    """A complete OP_QUERY; ``collection`` is the full name, e.g. ``admin.$cmd``."""
    payload = (_QUERY_PREFIX.pack(flags) + collection.encode("utf-8") + b"\x00"
               + _QUERY_NUMBERS.pack(number_to_skip, number_to_return) + query)
    return pack_header(HEADER_SIZE + len(payload), request_id, 0, OP_QUERY) + payload


def unpack_op_reply(payload: bytes | bytearray | memoryview) -> OpReply:
    """Parse the bytes after the header of an OP_REPLY."""
    data = memoryview(payload)
    if len(data) < _REPLY_PREFIX.size:
        raise ProtocolError(f"OP_REPLY body of {len(data)} bytes is too short")
    flags, cursor_id, starting_from, number_returned = _REPLY_PREFIX.unpack_from(data, 0)
    if number_returned < 0:
        raise ProtocolError(f"OP_REPLY numberReturned {number_returned} is negative")
    documents = []
    position = _REPLY_PREFIX.size
    for _ in range(number_returned):
        if len(data) - position < 5:
            raise ProtocolError("OP_REPLY ends before its numberReturned documents")
        (size,) = _INT32.unpack_from(data, position)
        if size < 5 or position + size > len(data):
            raise ProtocolError(f"OP_REPLY document length {size} runs past the message")
        documents.append(bytes(data[position:position + size]))
        position += size
    if position != len(data):
        raise ProtocolError(f"OP_REPLY has {len(data) - position} bytes after its documents")
    return OpReply(flags, cursor_id, starting_from, documents)


def encode_command_query(request_id: int, command: Mapping[str, Any], dbname: str = "admin") -> bytes:
    """A command sent the pre-3.6 way: an OP_QUERY on ``<db>.$cmd`` returning one document."""
    return pack_op_query(request_id, f"{dbname}.$cmd", bson.encode(command), number_to_return=-1)


def decode_command_reply(reply: OpReply, codec_options: Optional[CodecOptions] = None) -> dict[str, Any]:
    """The single document of a command's OP_REPLY (a ``$err`` document becomes ``ok: 0``)."""
    if len(reply.documents) != 1:
        raise ProtocolError(f"a command OP_REPLY must hold one document, it holds {len(reply.documents)}")
    document: dict[str, Any]
    try:
        if codec_options is None:
            document = bson.decode(reply.documents[0])
        else:
            document = bson.decode(reply.documents[0], codec_options=codec_options)
    except Exception as exc:  # any failure to read server bytes is the server's protocol error
        raise ProtocolError(f"reply is not valid BSON: {exc}") from exc
    if reply.query_failure and "$err" in document:
        document.setdefault("ok", 0)
        document.setdefault("errmsg", document["$err"])
    return document
