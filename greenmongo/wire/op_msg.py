"""OP_MSG (opcode 2013): build requests and take replies apart.

The byte-level functions (``pack_op_msg``/``unpack_op_msg``) work on already
encoded BSON, so they can be checked against hand-built bytes; the
``encode_command``/``decode_reply`` wrappers add BSON on top.
"""

from __future__ import annotations

import struct
from typing import Any, Iterable, Mapping, NamedTuple, Optional, Sequence, Union, cast

from greenmongo import bson
from greenmongo.bson.codec import decode_cursor_reply
from greenmongo.bson.codec_options import CodecOptions
from greenmongo.errors import ProtocolError
from greenmongo.wire.crc32c import crc32c
from greenmongo.wire.header import HEADER_SIZE, OP_MSG, pack_header

FLAG_CHECKSUM_PRESENT = 1 << 0
FLAG_MORE_TO_COME = 1 << 1
FLAG_EXHAUST_ALLOWED = 1 << 16

#: The low 16 bits are "required": a receiver must reject any it does not know.
_REQUIRED_BITS = 0xFFFF
_KNOWN_REQUIRED_BITS = FLAG_CHECKSUM_PRESENT | FLAG_MORE_TO_COME

_INT32 = struct.Struct("<i")
_UINT32 = struct.Struct("<I")

#: A document sequence as bytes: its identifier and the encoded documents.
EncodedSequence = tuple[str, Sequence[bytes]]


class OpMsg(NamedTuple):
    """A parsed OP_MSG: flag bits, the kind-0 body and any kind-1 sequences (all still BSON bytes)."""

    flags: int
    #: bytes, or with ``unpack_op_msg(copy_body=False)`` a memoryview of the payload (the codec reads either).
    body: Union[bytes, memoryview]
    sequences: dict[str, list[bytes]]

    @property
    def more_to_come(self) -> bool:
        return bool(self.flags & FLAG_MORE_TO_COME)

    @property
    def checksum_present(self) -> bool:
        return bool(self.flags & FLAG_CHECKSUM_PRESENT)


# -- building ----------------------------------------------------------------

def _sequence_header(identifier: str, payload_size: int) -> bytes:
    """A kind-1 section's kind byte, size and identifier; its documents follow."""
    name = identifier.encode("utf-8")
    if b"\x00" in name:
        raise ValueError(f"document sequence identifier {identifier!r} contains a NUL byte")
    return b"\x01" + _INT32.pack(4 + len(name) + 1 + payload_size) + name + b"\x00"


def pack_op_msg(
    request_id: int,
    body: bytes,
    sequences: Iterable[EncodedSequence] = (),
    *,
    flags: int = 0,
    checksum: bool = False,
    response_to: int = 0,
) -> bytes:
    """A complete OP_MSG (header included) from an encoded body and encoded document sequences.

    ``checksum`` appends a CRC-32C and sets ``checksumPresent``.
    """
    if flags & _REQUIRED_BITS & ~_KNOWN_REQUIRED_BITS:
        raise ValueError(f"unknown required OP_MSG flag bits in {flags:#x}")
    flags &= ~FLAG_CHECKSUM_PRESENT
    if checksum:
        flags |= FLAG_CHECKSUM_PRESENT
    seen: set[str] = set()
    # One join over every piece (header, body, section headers, documents): large documents are
    # copied once, not once per level of nesting.
    parts = [b"", _UINT32.pack(flags), b"\x00", body]
    size = 5 + len(body)
    for identifier, documents in sequences:
        if identifier in seen:
            raise ValueError(f"document sequence identifier {identifier!r} appears twice")
        seen.add(identifier)
        payload_size = sum(map(len, documents))
        header = _sequence_header(identifier, payload_size)
        parts.append(header)
        parts.extend(documents)
        size += len(header) + payload_size
    length = HEADER_SIZE + size + (4 if checksum else 0)
    parts[0] = pack_header(length, request_id, response_to, OP_MSG)
    message = b"".join(parts)
    if checksum:
        message += _UINT32.pack(crc32c(message))
    return message


# -- parsing -----------------------------------------------------------------

def _read_cstring(data: memoryview, start: int, end: int) -> tuple[str, int]:
    nul = bytes(data[start:end]).find(b"\x00")
    if nul < 0:
        raise ProtocolError("OP_MSG document sequence identifier is not NUL-terminated")
    raw = bytes(data[start:start + nul])
    try:
        return raw.decode("utf-8"), start + nul + 1
    except UnicodeDecodeError:
        raise ProtocolError("OP_MSG document sequence identifier is not valid UTF-8") from None


def _read_documents(data: memoryview, start: int, end: int) -> list[bytes]:
    documents = []
    position = start
    while position < end:
        if end - position < 5:
            raise ProtocolError("OP_MSG document sequence ends inside a document")
        (size,) = _INT32.unpack_from(data, position)
        if size < 5 or position + size > end:
            raise ProtocolError(f"OP_MSG document length {size} runs past its section")
        documents.append(bytes(data[position:position + size]))
        position += size
    return documents


def unpack_op_msg(
    payload: bytes | bytearray | memoryview,
    *,
    header: bytes | None = None,
    verify_checksum: bool = True,
    copy_body: bool = True,
) -> OpMsg:
    """Parse the bytes after the header of an OP_MSG.

    A checksum, when present, is verified against ``header + payload`` if both
    ``verify_checksum`` is true and ``header`` is given; callers skip it on TLS
    connections, where the transport already guarantees integrity (the server
    does the same). ``copy_body=False``: the body is a memoryview of ``payload`` instead of a copy
    (a reply body may be 16 MB), for a caller that owns ``payload`` and never changes it.
    """
    data = memoryview(payload)
    if len(data) < 5:
        raise ProtocolError(f"OP_MSG body of {len(data)} bytes is too short")
    (flags,) = _UINT32.unpack_from(data, 0)
    unknown = flags & _REQUIRED_BITS & ~_KNOWN_REQUIRED_BITS
    if unknown:
        raise ProtocolError(f"OP_MSG has unknown required flag bits {unknown:#x}")
    end = len(data)
    if flags & FLAG_CHECKSUM_PRESENT:
        if end < 4 + 1 + 4:
            raise ProtocolError("OP_MSG with checksumPresent is too short to hold a checksum")
        end -= 4
        if verify_checksum and header is not None:
            (expected,) = _UINT32.unpack_from(data, end)
            actual = crc32c(data[:end], crc32c(header))
            if actual != expected:
                raise ProtocolError(f"OP_MSG checksum mismatch: computed {actual:#010x}, message says "
                                    f"{expected:#010x}")
    body: Union[bytes, memoryview, None] = None
    sequences: dict[str, list[bytes]] = {}
    position = 4
    while position < end:
        kind = data[position]
        position += 1
        if end - position < 4:
            raise ProtocolError("OP_MSG section is truncated")
        (size,) = _INT32.unpack_from(data, position)
        if size < 5 or position + size > end:
            raise ProtocolError(f"OP_MSG section size {size} does not fit the message")
        if kind == 0:
            if body is not None:
                raise ProtocolError("OP_MSG has more than one kind-0 body section")
            body = data[position:position + size] if not copy_body else bytes(data[position:position + size])
        elif kind == 1:
            identifier, docs_start = _read_cstring(data, position + 4, position + size)
            if identifier in sequences:
                raise ProtocolError(f"OP_MSG repeats document sequence {identifier!r}")
            sequences[identifier] = _read_documents(data, docs_start, position + size)
        else:
            raise ProtocolError(f"OP_MSG has unknown section kind {kind}")
        position += size
    if body is None:
        raise ProtocolError("OP_MSG has no kind-0 body section")
    return OpMsg(flags, body, sequences)


# -- with BSON -----------------------------------------------------------------

def command_with_db(command: Mapping[str, Any], dbname: str) -> dict[str, Any]:
    """A copy of ``command`` with ``$db`` set: user documents are never mutated."""
    if not command:
        raise ValueError("a command document cannot be empty")
    body = dict(command)
    body["$db"] = dbname
    return body


def encode_command(
    request_id: int,
    command: Mapping[str, Any],
    dbname: str,
    *,
    sequences: Optional[Mapping[str, Sequence[Union[Mapping[str, Any], bytes]]]] = None,
    flags: int = 0,
    checksum: bool = False,
    codec_options: Optional[CodecOptions] = None,
) -> bytes:
    """Encode ``command`` (plus ``$db``) and optional document sequences as one OP_MSG.

    A sequence's documents may already be BSON (``bytes``): they are sent as they are.
    """
    return encode_body(request_id, command_with_db(command, dbname), sequences=sequences, flags=flags,
                       checksum=checksum, codec_options=codec_options)


def encode_body(
    request_id: int,
    body: Mapping[str, Any],
    *,
    sequences: Optional[Mapping[str, Sequence[Union[Mapping[str, Any], bytes]]]] = None,
    flags: int = 0,
    checksum: bool = False,
    codec_options: Optional[CodecOptions] = None,
) -> bytes:
    """``encode_command`` for a body that already carries its ``$db`` (a connection's own copy, so that
    the command is copied once per send, not twice)."""
    encoded = _encode(body, codec_options)
    if not checksum and not flags & ~_PLAIN_FLAGS:
        if not sequences:
            # The usual request: a header, the flags and one body section, joined once.
            return b"".join((_PLAIN_PREFIX.pack(HEADER_SIZE + 5 + len(encoded), request_id, 0, OP_MSG, flags, 0),
                             encoded))
        if len(sequences) == 1:
            # The usual write: one sequence of documents already encoded (an insert's, an update's), one join.
            ((identifier, documents),) = sequences.items()
            name = _SEQUENCE_NAMES.get(identifier)
            if name is not None and all(type(document) is bytes for document in documents):
                section = 4 + len(name) + sum(map(len, documents))
                return b"".join((_PLAIN_PREFIX.pack(HEADER_SIZE + 5 + len(encoded) + 1 + section, request_id, 0,
                                                    OP_MSG, flags, 0),
                                 encoded, _SEQUENCE_PREFIX.pack(1, section), name,
                                 *cast("Sequence[bytes]", documents)))
    encoded_sequences = [(name, [doc if isinstance(doc, bytes) else _encode(doc, codec_options) for doc in docs])
                         for name, docs in (sequences or {}).items()]
    return pack_op_msg(request_id, encoded, encoded_sequences, flags=flags, checksum=checksum)


def _encode(document: Mapping[str, Any], codec_options: Optional[CodecOptions]) -> bytes:
    return bson.encode(document) if codec_options is None else bson.encode(document, codec_options=codec_options)


#: The identifiers of the write commands' sequences, as a kind-1 section spells them.
_SEQUENCE_NAMES = {name: name.encode() + b"\x00" for name in ("documents", "updates", "deletes", "ops", "nsInfo")}
#: A kind-1 section's kind byte and size.
_SEQUENCE_PREFIX = struct.Struct("<Bi")
#: Flags the usual request may carry; any other bit goes through ``pack_op_msg``, which judges it.
_PLAIN_FLAGS = FLAG_MORE_TO_COME | FLAG_EXHAUST_ALLOWED
#: A header, flag bits and a kind-0 section's kind byte: what precedes the body of an OP_MSG.
_PLAIN_PREFIX = struct.Struct("<iiiiIB")
#: The flag bits, the first section's kind and its size: a reply is "plain" when they are 0, 0 and
#: what is left of the message (one body section, no checksum, no moreToCome): nearly every reply.
_PLAIN_REPLY = struct.Struct("<IBi")
#: The same for a whole message: the header first.
_PLAIN_MESSAGE = struct.Struct("<iiii" + _PLAIN_REPLY.format[1:])
#: Where a plain message's body starts: after the header, the flag bits and the section's kind byte.
PLAIN_BODY_START = HEADER_SIZE + 5


def plain_reply_body(payload: Union[bytes, bytearray]) -> Optional[memoryview]:
    """The body of a plain OP_MSG reply (see ``_PLAIN_REPLY``) as a view of ``payload``; None for any
    other reply, which ``unpack_op_msg`` takes apart (and judges)."""
    if len(payload) < 10:
        return None
    flags, kind, size = _PLAIN_REPLY.unpack_from(payload)
    if flags or kind or size != len(payload) - 5:
        return None
    return memoryview(payload)[5:]


def whole_plain_reply(data: Any, available: int, *, max_message_size: int,
                      expected_response_to: Optional[int]) -> int:
    """The length of the reply that ``data[:available]`` holds (any buffer: a connection's read buffer), when it
    holds exactly one plain OP_MSG reply (no flags, one body section, as ``plain_reply_body`` takes) whose header
    passes every check of ``header.validate_reply_header``; 0 for anything else (which the general path reads
    and judges). Its body is ``data[PLAIN_BODY_START:length]``."""
    if available < _PLAIN_MESSAGE.size:
        return 0
    length: int
    length, _request_id, response_to, opcode, flags, kind, size = _PLAIN_MESSAGE.unpack_from(data)
    if (length != available or opcode != OP_MSG or flags or kind or size != length - PLAIN_BODY_START
            or length > max_message_size or (expected_response_to and response_to != expected_response_to)):
        return 0
    return length


def decode_body(data: Union[bytes, memoryview], codec_options: Optional[CodecOptions] = None,
                lazy_batches: bool = False) -> dict[str, Any]:
    """One document of a reply: bytes that do not decode are the server's protocol error.

    ``lazy_batches``: the reply opens or continues a cursor that will read its batch one document at a time;
    ``cursor.firstBatch`` / ``cursor.nextBatch`` may then stay encoded (``bson.codec.decode_cursor_reply``).
    """
    document: dict[str, Any]
    try:
        if lazy_batches:
            document = decode_cursor_reply(data, codec_options)
        elif codec_options is None:
            document = bson.decode(data)
        else:
            document = bson.decode(data, codec_options=codec_options)
        return document
    except Exception as exc:  # any failure to read server bytes is the server's protocol error
        raise not_valid_bson(exc) from exc


def not_valid_bson(exc: BaseException, part: str = "") -> ProtocolError:
    """The protocol error for server bytes that do not decode (``part``: which part of the reply, when the
    reply itself was read before: a document of a cursor batch left encoded)."""
    return ProtocolError(f"reply is not valid BSON: {part + ': ' if part else ''}{exc}")


def decode_reply(message: OpMsg, codec_options: Optional[CodecOptions] = None,
                 lazy_batches: bool = False) -> dict[str, Any]:
    """The decoded kind-0 body of a reply; any reply document sequences are folded in as lists."""
    document = decode_body(message.body, codec_options, lazy_batches)
    for identifier, documents in message.sequences.items():
        document[identifier] = [decode_body(doc, codec_options) for doc in documents]
    return document
