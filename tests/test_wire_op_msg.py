"""OP_MSG against hand-built bytes: kind 0 and kind 1 sections, flags, checksums, $db."""

from __future__ import annotations

import struct

import pytest

from greenmongo import bson
from greenmongo.errors import ProtocolError
from greenmongo.wire import op_msg
from greenmongo.wire.crc32c import crc32c
from greenmongo.wire.header import OP_MSG, parse_header


def int32_doc(key: str, value: int) -> bytes:
    """A one-field BSON document {key: int32}, built by hand."""
    element = b"\x10" + key.encode() + b"\x00" + struct.pack("<i", value)
    return struct.pack("<i", 4 + len(element) + 1) + element + b"\x00"


PING = int32_doc("ping", 1)          # {ping: 1}
DOC_A = int32_doc("a", 1)
DOC_B = int32_doc("b", 2)


def header(length: int, request_id: int = 5, response_to: int = 0) -> bytes:
    return struct.pack("<iiii", length, request_id, response_to, 2013)


def test_kind_zero_only_matches_hand_built_bytes() -> None:
    expected_payload = struct.pack("<I", 0) + b"\x00" + PING
    expected = header(16 + len(expected_payload)) + expected_payload
    assert op_msg.pack_op_msg(5, PING) == expected


def test_kind_one_sequence_matches_hand_built_bytes() -> None:
    sequence = b"documents\x00" + DOC_A + DOC_B
    section = b"\x01" + struct.pack("<i", 4 + len(sequence)) + sequence
    payload = struct.pack("<I", 0) + b"\x00" + PING + section
    expected = header(16 + len(payload)) + payload
    assert op_msg.pack_op_msg(5, PING, [("documents", [DOC_A, DOC_B])]) == expected


def test_empty_sequence_is_allowed() -> None:
    message = op_msg.pack_op_msg(5, PING, [("documents", [])])
    parsed = op_msg.unpack_op_msg(message[16:])
    assert parsed.sequences == {"documents": []}


def test_flags_are_little_endian_uint32() -> None:
    message = op_msg.pack_op_msg(5, PING, flags=op_msg.FLAG_MORE_TO_COME | op_msg.FLAG_EXHAUST_ALLOWED)
    assert message[16:20] == struct.pack("<I", 0x00010002)


def test_checksum_appended_and_flag_set() -> None:
    message = op_msg.pack_op_msg(5, PING, checksum=True)
    assert parse_header(message[:16]).length == len(message)
    (flags,) = struct.unpack_from("<I", message, 16)
    assert flags & op_msg.FLAG_CHECKSUM_PRESENT
    assert struct.unpack("<I", message[-4:])[0] == crc32c(message[:-4])


def test_unpack_round_trip_with_sequences_in_any_order() -> None:
    sequence = b"updates\x00" + DOC_A
    section1 = b"\x01" + struct.pack("<i", 4 + len(sequence)) + sequence
    payload = struct.pack("<I", 0) + section1 + b"\x00" + PING  # kind 1 before kind 0 is legal
    parsed = op_msg.unpack_op_msg(payload)
    assert parsed.body == PING
    assert parsed.sequences == {"updates": [DOC_A]}
    assert not parsed.more_to_come and not parsed.checksum_present


def test_unpack_more_to_come() -> None:
    payload = struct.pack("<I", op_msg.FLAG_MORE_TO_COME) + b"\x00" + PING
    assert op_msg.unpack_op_msg(payload).more_to_come


def test_unknown_optional_bits_are_ignored() -> None:
    payload = struct.pack("<I", op_msg.FLAG_EXHAUST_ALLOWED | (1 << 20)) + b"\x00" + PING
    assert op_msg.unpack_op_msg(payload).body == PING


@pytest.mark.parametrize("bit", [2, 3, 8, 15])
def test_unknown_required_bits_are_rejected(bit: int) -> None:
    payload = struct.pack("<I", 1 << bit) + b"\x00" + PING
    with pytest.raises(ProtocolError, match="unknown required flag bits"):
        op_msg.unpack_op_msg(payload)


def test_pack_refuses_unknown_required_bits() -> None:
    with pytest.raises(ValueError):
        op_msg.pack_op_msg(1, PING, flags=1 << 5)


def test_checksum_verified_when_header_given() -> None:
    message = op_msg.pack_op_msg(5, PING, checksum=True)
    parsed = op_msg.unpack_op_msg(message[16:], header=message[:16])
    assert parsed.body == PING and parsed.checksum_present


def test_bad_checksum_rejected_unless_verification_skipped() -> None:
    message = bytearray(op_msg.pack_op_msg(5, PING, checksum=True))
    message[-1] ^= 0xFF
    with pytest.raises(ProtocolError, match="checksum mismatch"):
        op_msg.unpack_op_msg(bytes(message[16:]), header=bytes(message[:16]))
    # Over TLS the transport vouches for integrity: the checksum is stripped, not checked.
    parsed = op_msg.unpack_op_msg(bytes(message[16:]), header=bytes(message[:16]), verify_checksum=False)
    assert parsed.body == PING


def test_checksum_is_not_mistaken_for_a_section() -> None:
    message = op_msg.pack_op_msg(5, PING, [("documents", [DOC_A])], checksum=True)
    parsed = op_msg.unpack_op_msg(message[16:], verify_checksum=False)
    assert parsed.sequences == {"documents": [DOC_A]}


@pytest.mark.parametrize("payload, match", [
    (b"\x00\x00", "too short"),
    (struct.pack("<I", 0), "too short"),
    (struct.pack("<I", 0) + b"\x01" + struct.pack("<i", 4 + 4) + b"abcd", "not NUL-terminated"),
    (struct.pack("<I", 0) + b"\x02" + PING, "unknown section kind 2"),
    (struct.pack("<I", 0) + b"\x00" + PING + b"\x00" + PING, "more than one kind-0"),
    (struct.pack("<I", 0) + b"\x01" + struct.pack("<i", 6) + b"x\x00", "no kind-0"),
    (struct.pack("<I", 0) + b"\x00" + PING[:-3], "does not fit"),
    (struct.pack("<I", 0) + b"\x00" + struct.pack("<i", 2) + b"\x00" * 8, "does not fit"),
    (struct.pack("<I", 1) + b"\x00" + PING[:3], "too short to hold a checksum"),
])
def test_malformed_messages(payload: bytes, match: str) -> None:
    with pytest.raises(ProtocolError, match=match):
        op_msg.unpack_op_msg(payload)


def test_repeated_sequence_identifier_rejected() -> None:
    sequence = b"\x01" + struct.pack("<i", 4 + 2) + b"x\x00"
    with pytest.raises(ProtocolError, match="repeats"):
        op_msg.unpack_op_msg(struct.pack("<I", 0) + b"\x00" + PING + sequence + sequence)
    with pytest.raises(ValueError):
        op_msg.pack_op_msg(1, PING, [("x", []), ("x", [])])


def test_document_running_past_its_sequence() -> None:
    body = b"d\x00" + DOC_A[:-2]
    section = b"\x01" + struct.pack("<i", 4 + len(body)) + body
    with pytest.raises(ProtocolError, match="runs past|ends inside"):
        op_msg.unpack_op_msg(struct.pack("<I", 0) + b"\x00" + PING + section)


def test_encode_command_adds_db_without_mutating_the_spec() -> None:
    spec = {"insert": "coll", "ordered": True}
    message = op_msg.encode_command(9, spec, "test", sequences={"documents": [{"_id": 1}, {"_id": 2}]})
    assert spec == {"insert": "coll", "ordered": True}
    assert parse_header(message[:16]).opcode == OP_MSG
    parsed = op_msg.unpack_op_msg(message[16:])
    body = bson.decode(parsed.body)
    assert list(body) == ["insert", "ordered", "$db"]  # command name stays first
    assert body["$db"] == "test"
    assert [bson.decode(doc) for doc in parsed.sequences["documents"]] == [{"_id": 1}, {"_id": 2}]


def test_decode_reply_folds_in_sequences() -> None:
    body = bson.encode({"ok": 1.0, "cursor": {"id": 0}})
    message = op_msg.pack_op_msg(1, body, [("docs", [bson.encode({"x": 1})])])
    reply = op_msg.decode_reply(op_msg.unpack_op_msg(message[16:]))
    assert reply == {"ok": 1.0, "cursor": {"id": 0}, "docs": [{"x": 1}]}


def test_decode_reply_turns_bad_bson_into_protocol_error() -> None:
    garbage = struct.pack("<i", 12) + b"\x02\xff\xfe\x00zzz\x00"
    message = op_msg.pack_op_msg(1, garbage)
    with pytest.raises(ProtocolError, match="not valid BSON"):
        op_msg.decode_reply(op_msg.unpack_op_msg(message[16:]))


def test_empty_command_rejected() -> None:
    with pytest.raises(ValueError):
        op_msg.command_with_db({}, "db")


def test_body_as_a_view_decodes_as_the_copy_does() -> None:
    from greenmongo.bson.codec_options import CodecOptions
    from greenmongo.bson.raw_bson import RawBSONDocument

    document = {"ok": 1, "cursor": {"firstBatch": [{"_id": 1, "data": b"\x00" * 300}], "id": 0}}
    payload = bytearray(op_msg.pack_op_msg(1, bson.encode(document))[16:])
    copied = op_msg.unpack_op_msg(bytes(payload))
    viewed = op_msg.unpack_op_msg(payload, copy_body=False)
    assert type(copied.body) is bytes and type(viewed.body) is memoryview and viewed.body == copied.body
    assert op_msg.decode_reply(viewed) == op_msg.decode_reply(copied) == document
    raw = op_msg.decode_reply(viewed, CodecOptions(document_class=RawBSONDocument))
    payload[:] = b"\xff" * len(payload)  # what was decoded holds its own bytes, not the payload's
    assert type(raw) is RawBSONDocument and type(raw.raw) is bytes
    assert raw["cursor"]["firstBatch"][0]["data"] == b"\x00" * 300
    with pytest.raises(ProtocolError, match="not valid BSON"):
        op_msg.decode_reply(op_msg.unpack_op_msg(bytearray(b"\x00" * 5 + b"\x05\x00\x00\x00\x01"), copy_body=False))


@pytest.mark.parametrize("flags", [0, op_msg.FLAG_MORE_TO_COME, op_msg.FLAG_EXHAUST_ALLOWED])
def test_encode_body_shortcut_builds_the_same_bytes_as_pack_op_msg(flags: int) -> None:
    body = {"find": "c", "filter": {"_id": 1}, "$db": "test"}
    assert op_msg.encode_body(3, body, flags=flags) == op_msg.pack_op_msg(3, bson.encode(body), flags=flags)
    # With a checksum, sequences or an unknown required bit it goes the long way, which judges them.
    assert op_msg.encode_body(3, body, flags=flags, checksum=True) == op_msg.pack_op_msg(
        3, bson.encode(body), flags=flags, checksum=True)
    with pytest.raises(ValueError, match="unknown required"):
        op_msg.encode_body(3, body, flags=flags | 1 << 5)


@pytest.mark.parametrize("flags", [0, op_msg.FLAG_MORE_TO_COME])
def test_encode_body_one_sequence_shortcut_builds_the_same_bytes_as_pack_op_msg(flags: int) -> None:
    body = {"insert": "c", "ordered": True, "$db": "test"}
    for identifier, count in [("documents", 3), ("updates", 1), ("deletes", 2), ("ops", 1), ("nsInfo", 1)]:
        documents = [bson.encode({"_id": number, "x": "y" * number}) for number in range(count)]
        assert op_msg.encode_body(9, body, sequences={identifier: documents}, flags=flags) == op_msg.pack_op_msg(
            9, bson.encode(body), [(identifier, documents)], flags=flags), identifier
    # Other identifiers, documents not yet encoded and two sequences go the long way, with the same bytes.
    mixed = {"documents": [{"_id": 1}, bson.encode({"_id": 2})]}
    assert op_msg.encode_body(9, body, sequences=mixed) == op_msg.pack_op_msg(
        9, bson.encode(body), [("documents", [bson.encode({"_id": 1}), bson.encode({"_id": 2})])])
    two = {"ops": [bson.encode({"insert": 0})], "nsInfo": [bson.encode({"ns": "a.b"})]}
    assert op_msg.encode_body(9, body, sequences=two) == op_msg.pack_op_msg(9, bson.encode(body), list(two.items()))
    with pytest.raises(ValueError, match="NUL"):
        op_msg.encode_body(9, body, sequences={"bad\x00name": [bson.encode({})]})


def test_plain_reply_body_takes_only_a_flagless_single_body_reply() -> None:
    document = {"ok": 1.0, "n": 2}
    plain = op_msg.pack_op_msg(1, bson.encode(document))[16:]
    view = op_msg.plain_reply_body(plain)
    assert view is not None and op_msg.decode_body(view) == document
    others = [
        op_msg.pack_op_msg(1, bson.encode(document), checksum=True)[16:],                    # checksum
        op_msg.pack_op_msg(1, bson.encode(document), flags=op_msg.FLAG_MORE_TO_COME)[16:],   # moreToCome
        op_msg.pack_op_msg(1, bson.encode(document), [("docs", [bson.encode({})])])[16:],    # a sequence
        plain + b"\x00",                                                                      # size mismatch
        plain[:9],                                                                            # too short
    ]
    for payload in others:
        assert op_msg.plain_reply_body(payload) is None, payload


def test_whole_plain_reply_takes_only_one_plain_reply_whose_header_passes_every_check() -> None:
    document = {"ok": 1.0, "n": 2}
    message = op_msg.pack_op_msg(1, bson.encode(document), response_to=7)
    length = op_msg.whole_plain_reply(message, len(message), max_message_size=1000, expected_response_to=7)
    assert length == len(message)
    assert op_msg.decode_body(message[op_msg.PLAIN_BODY_START:length]) == document
    assert op_msg.whole_plain_reply(message, len(message), max_message_size=1000, expected_response_to=None)
    others = [
        (message + message, 1000, 7),                                                           # two replies
        (message[:-1], 1000, 7),                                                                # truncated
        (message, len(message) - 1, 7),                                                         # over the limit
        (message, 1000, 8),                                                                     # wrong responseTo
        (op_msg.pack_op_msg(1, bson.encode(document), checksum=True, response_to=7), 1000, 7),  # checksum
        (op_msg.pack_op_msg(1, bson.encode(document), flags=op_msg.FLAG_MORE_TO_COME, response_to=7), 1000, 7),
        (op_msg.pack_op_msg(1, bson.encode(document), [("docs", [bson.encode({})])], response_to=7), 1000, 7),
        (message[:12] + (1).to_bytes(4, "little") + message[16:], 1000, 7),                     # OP_REPLY opcode
        (message[:20], 1000, 7),                                                                # too short to tell
    ]
    for data, max_message_size, expected in others:
        assert op_msg.whole_plain_reply(data, len(data), max_message_size=max_message_size,
                                        expected_response_to=expected) == 0, data


def test_decode_body_turns_bad_bson_into_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="not valid BSON"):
        op_msg.decode_body(b"\x05\x00\x00\x00\x01")
