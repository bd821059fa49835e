"""A canned-reply MongoDB stand-in for driver benchmarks: replies are built before the clock starts.

It poses as the primary of a one-member replica set ("bench") and answers only what the
DriverBench single/multi-document tasks send, reading requests as raw bytes (no BSON decoding
of request bodies), so the server costs next to nothing and the figures measure the client:

* ``hello``/``isMaster`` (OP_MSG, and legacy OP_QUERY for a first handshake);
* ``find`` with filter ``{_id: <int 1..N>}``: the tweet with that ``_id`` (one prepared reply
  per id, looked up by the filter's raw bytes); an unknown id gets an empty batch;
* ``find`` with an empty filter: a new cursor over ``--many`` tweets, 101 in the first batch and
  then, like mongod, as many as fit in 16 MiB per ``getMore``; ``killCursors`` drops cursors;
* ``insert``: ``{n: <documents sent>, ok: 1}`` (documents counted in the OP_MSG sequence or the
  body array); ``drop``, ``create``, ``dropDatabase``, ``endSessions``, ``ping``: ``{ok: 1}``;
* anything else: ``CommandNotFound``, so a driver sending something unexpected fails loudly.

With ``--no-sessions`` its hello omits ``logicalSessionTimeoutMinutes``: drivers then send no
``lsid`` and no ``txnNumber``, for a like-for-like comparison with a driver that has neither yet.

Run as a script: ``python bench/canned_server.py PORT_FILE [--many N] [--ids N] [--no-sessions]``;
it writes its port to PORT_FILE once listening.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import os
import struct
import sys
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = Path(os.environ.get("GREENMONGO_SPEC_DIR") or ROOT.parent / "shared" / "specifications") \
    / "benchmarking" / "data" / "single_and_multi_document"

OP_REPLY, OP_QUERY, OP_MSG = 1, 2004, 2013
FLAG_CHECKSUM, FLAG_MORE_TO_COME = 1, 2
FIRST_BATCH = 101
MAX_BATCH_BYTES = 16 * 1024 * 1024
NAMESPACE = "perftest.corpus"
SET_NAME = "bench"

_HEADER = struct.Struct("<iiii")
_INT32 = struct.Struct("<i")
_INT64 = struct.Struct("<q")
_ID_MARKER = 0x0123456789ABCDEF  # a cursor id placeholder, patched per cursor


def _cstring_end(data: bytes, start: int) -> int:
    return data.index(b"\x00", start)


def _element(body: bytes, type_byte: int, name: bytes) -> int:
    """Offset of the value of top-level element ``name`` (of ``type_byte``) in ``body``, or -1."""
    key = bytes((type_byte,)) + name + b"\x00"
    offset = 4
    end = len(body) - 1
    while offset < end:
        element_type = body[offset]
        name_end = _cstring_end(body, offset + 1)
        value = name_end + 1
        if body[offset:value] == key:
            return value
        offset = value + _value_size(body, element_type, value)
    return -1


def _value_size(body: bytes, element_type: int, value: int) -> int:
    if element_type in (0x03, 0x04, 0x05):  # document, array, binary (binary adds its subtype byte)
        return _INT32.unpack_from(body, value)[0] + (5 if element_type == 0x05 else 0)
    if element_type in (0x02, 0x0D, 0x0E):  # string, code, symbol
        return 4 + _INT32.unpack_from(body, value)[0]
    if element_type in (0x01, 0x09, 0x11, 0x12):
        return 8
    if element_type == 0x10:
        return 4
    if element_type == 0x08:
        return 1
    if element_type in (0x06, 0x0A, 0x7F, 0xFF):
        return 0
    if element_type == 0x07:
        return 12
    if element_type == 0x13:
        return 16
    if element_type == 0x0B:  # regex: two cstrings
        return _cstring_end(body, _cstring_end(body, value) + 1) + 1 - value
    if element_type == 0x0F:
        return _INT32.unpack_from(body, value)[0]
    if element_type == 0x0C:
        return 4 + _INT32.unpack_from(body, value)[0] + 12
    raise ValueError(f"unexpected BSON type {element_type:#x}")


def _count_array(body: bytes, value: int) -> int:
    """Number of elements in the BSON array starting at ``value``."""
    end = value + _INT32.unpack_from(body, value)[0] - 1
    offset, count = value + 4, 0
    while offset < end:
        element_type = body[offset]
        start = _cstring_end(body, offset + 1) + 1
        offset = start + _value_size(body, element_type, start)
        count += 1
    return count


class CannedReplies:
    """Every reply body the server can send, encoded once."""

    def __init__(self, port: int, many: int, ids: int, sessions: bool = True) -> None:
        from greenmongo import bson

        self.bson = bson
        address = f"127.0.0.1:{port}"
        hello = {
            "helloOk": True, "isWritablePrimary": True, "ismaster": True, "secondary": False,
            "setName": SET_NAME, "setVersion": 1, "hosts": [address], "me": address, "primary": address,
            "electionId": bson.ObjectId("7fffffff0000000000000001"),
            "maxBsonObjectSize": 16 * 1024 * 1024, "maxMessageSizeBytes": 48_000_000,
            "maxWriteBatchSize": 100_000, "localTime": datetime.datetime.now(datetime.timezone.utc),
            "logicalSessionTimeoutMinutes": 30, "connectionId": 1, "minWireVersion": 0,
            "maxWireVersion": 21, "readOnly": False, "ok": 1.0,
        }
        if not sessions:  # a server without sessions: drivers send no lsid and no txnNumber
            del hello["logicalSessionTimeoutMinutes"]
        self.hello = bson.encode(hello)
        self.ok = bson.encode({"ok": 1.0})
        self.not_found = bson.encode({"ok": 0.0, "errmsg": "canned server: unsupported command",
                                      "code": 59, "codeName": "CommandNotFound"})
        self._inserted: dict[int, bytes] = {}

        tweet = json.loads((DATA_DIR / "tweet.json").read_text())
        # find by _id: keyed by the raw bytes of the filter the driver sends ({_id: int32}).
        self.by_filter: dict[bytes, bytes] = {}
        for number in range(1, ids + 1):
            document = {"_id": number, **{k: v for k, v in tweet.items() if k != "_id"}}
            reply = {"cursor": {"firstBatch": [document], "id": bson.Int64(0), "ns": NAMESPACE}, "ok": 1.0}
            self.by_filter[bson.encode({"_id": number})] = bson.encode(reply)
        self.no_match = bson.encode({"cursor": {"firstBatch": [], "id": bson.Int64(0), "ns": NAMESPACE},
                                     "ok": 1.0})

        # find {} + getMores over ``many`` tweets with ObjectIds.
        documents = [{"_id": bson.ObjectId(), **tweet} for _ in range(many)]
        per_getmore = max(1, MAX_BATCH_BYTES // len(bson.encode(documents[0])))
        first = documents[:FIRST_BATCH]
        rest = documents[FIRST_BATCH:]
        self.middle_batches = max(0, (len(rest) - 1) // per_getmore) if rest else 0
        last = rest[self.middle_batches * per_getmore:]
        self.first_batch = self._cursor_reply("firstBatch", first, open_cursor=bool(rest))
        self.middle_batch = self._cursor_reply("nextBatch", rest[:per_getmore], open_cursor=True) \
            if self.middle_batches else None
        self.last_batch = self._cursor_reply("nextBatch", last, open_cursor=False)

    def _cursor_reply(self, field: str, documents: list, *, open_cursor: bool) -> tuple[bytes, int]:
        """(body, offset of the cursor id in body, or -1 when the id is 0)."""
        bson = self.bson
        cursor_id = bson.Int64(_ID_MARKER if open_cursor else 0)
        body = bson.encode({"cursor": {field: documents, "id": cursor_id, "ns": NAMESPACE}, "ok": 1.0})
        return body, (body.index(_INT64.pack(_ID_MARKER)) if open_cursor else -1)

    def inserted(self, count: int) -> bytes:
        reply = self._inserted.get(count)
        if reply is None:
            reply = self._inserted[count] = self.bson.encode({"n": count, "ok": 1.0})
        return reply

    def killed(self, cursor_ids: list[int]) -> bytes:
        bson = self.bson
        return bson.encode({"cursorsKilled": [bson.Int64(i) for i in cursor_ids], "cursorsNotFound": [],
                            "cursorsAlive": [], "cursorsUnknown": [], "ok": 1.0})


class CannedServer:
    """Reads requests as bytes and sends prepared replies; cursor state is server-wide."""

    def __init__(self, replies: CannedReplies, find_delay: float = 0.0) -> None:
        self.replies = replies
        #: Seconds every ``find`` reply is held back (a slow server, for the timeout benchmark).
        self.find_delay = find_delay
        self.cursors: dict[int, int] = {}  # cursor id -> middle batches still to send
        self.cursor_ids = itertools.count(1000)
        self.request_ids = itertools.count(1)

    def handle(self, sock, _address) -> None:
        import socket

        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as mongod does
        try:
            while True:
                header = self._recv_exactly(sock, 16)
                if header is None:
                    return
                length, request_id, _, opcode = _HEADER.unpack(header)
                payload = self._recv_exactly(sock, length - 16)
                if payload is None:
                    return
                if opcode == OP_QUERY:  # legacy hello on a new connection
                    reply = struct.pack("<iqii", 0, 0, 0, 1) + self.replies.hello
                    sock.sendall(_HEADER.pack(16 + len(reply), next(self.request_ids), request_id, OP_REPLY)
                                 + reply)
                    continue
                if opcode != OP_MSG:
                    return
                flags = _INT32.unpack_from(payload, 0)[0]
                body = self.answer(payload, flags)
                if flags & FLAG_MORE_TO_COME:
                    continue
                sock.sendall(_HEADER.pack(21 + len(body), next(self.request_ids), request_id, OP_MSG)
                             + b"\x00\x00\x00\x00\x00" + body)
        except OSError:
            pass
        finally:
            sock.close()

    @staticmethod
    def _recv_exactly(sock, count: int) -> Optional[bytes]:
        buffer = bytearray(count)
        view = memoryview(buffer)
        received = 0
        while received < count:
            chunk = sock.recv_into(view[received:], count - received)
            if not chunk:
                return None
            received += chunk
        return buffer

    def answer(self, payload: bytes, flags: int) -> bytes:
        end = len(payload) - (4 if flags & FLAG_CHECKSUM else 0)
        body, sequence_count = b"", None
        offset = 4
        while offset < end:  # sections
            kind = payload[offset]
            size = _INT32.unpack_from(payload, offset + 1)[0]
            if kind == 0:
                body = bytes(payload[offset + 1:offset + 1 + size])
            else:  # a document sequence: count its documents
                docs = _cstring_end(payload, offset + 5) + 1
                stop, count = offset + 1 + size, 0
                while docs < stop:
                    docs += _INT32.unpack_from(payload, docs)[0]
                    count += 1
                sequence_count = (sequence_count or 0) + count
            offset += 1 + size
        name = bytes(body[5:_cstring_end(body, 5)])
        replies = self.replies
        if name in (b"hello", b"isMaster", b"ismaster"):
            return replies.hello
        if name == b"find":
            if self.find_delay:
                import gevent

                gevent.sleep(self.find_delay)
            start = _element(body, 0x03, b"filter")
            filter_bytes = body[start:start + _INT32.unpack_from(body, start)[0]] if start >= 0 else b"\x05\0\0\0\0"
            if filter_bytes == b"\x05\x00\x00\x00\x00":
                return self._open_cursor()
            return replies.by_filter.get(filter_bytes, replies.no_match)
        if name == b"getMore":
            return self._get_more(_INT64.unpack_from(body, 5 + len(name) + 1)[0])
        if name == b"insert":
            if sequence_count is None:
                start = _element(body, 0x04, b"documents")
                sequence_count = _count_array(body, start) if start >= 0 else 0
            return replies.inserted(sequence_count)
        if name == b"killCursors":
            start = _element(body, 0x04, b"cursors")
            killed = []
            if start >= 0:
                stop, offset = start + _INT32.unpack_from(body, start)[0] - 1, start + 4
                while offset < stop:
                    value = _cstring_end(body, offset + 1) + 1
                    killed.append(_INT64.unpack_from(body, value)[0])
                    offset = value + 8
            for cursor_id in killed:
                self.cursors.pop(cursor_id, None)
            return replies.killed(killed)
        if name in (b"drop", b"create", b"dropDatabase", b"endSessions", b"ping"):
            return replies.ok
        print(f"canned server: unsupported command {name!r}", file=sys.stderr)
        return replies.not_found

    def _open_cursor(self) -> bytes:
        body, id_offset = self.replies.first_batch
        if id_offset < 0:
            return body
        cursor_id = next(self.cursor_ids)
        self.cursors[cursor_id] = self.replies.middle_batches
        return self._with_id(body, id_offset, cursor_id)

    def _get_more(self, cursor_id: int) -> bytes:
        middle_left = self.cursors.get(cursor_id)
        if middle_left is None:
            return self.replies.bson.encode({"ok": 0.0, "errmsg": f"cursor id {cursor_id} not found",
                                             "code": 43, "codeName": "CursorNotFound"})
        if middle_left > 0:
            self.cursors[cursor_id] = middle_left - 1
            body, id_offset = self.replies.middle_batch
            return self._with_id(body, id_offset, cursor_id)
        del self.cursors[cursor_id]
        return self.replies.last_batch[0]

    @staticmethod
    def _with_id(body: bytes, id_offset: int, cursor_id: int) -> bytes:
        return body[:id_offset] + _INT64.pack(cursor_id) + body[id_offset + 8:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("port_file")
    parser.add_argument("--many", type=int, default=10_000, help="documents returned by find({})")
    parser.add_argument("--ids", type=int, default=10_000, help="find-by-_id answers prepared (ids 1..N)")
    parser.add_argument("--find-delay-ms", type=float, default=0.0,
                        help="hold every find reply back this long (a slow server)")
    parser.add_argument("--no-sessions", action="store_true",
                        help="omit logicalSessionTimeoutMinutes from hello (no implicit sessions, no retryable writes)")
    args = parser.parse_args()

    sys.path.insert(0, str(ROOT))
    from gevent.server import StreamServer

    import gevent.socket

    listener = gevent.socket.socket()
    listener.setsockopt(gevent.socket.SOL_SOCKET, gevent.socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1024)
    port = listener.getsockname()[1]
    replies = CannedReplies(port, args.many, args.ids, not args.no_sessions)
    server = StreamServer(listener, CannedServer(replies, args.find_delay_ms / 1000.0).handle)
    server.start()
    Path(args.port_file + ".tmp").write_text(str(port))
    os.replace(args.port_file + ".tmp", args.port_file)  # atomic: the reader never sees half a number
    server.serve_forever()


if __name__ == "__main__":
    main()
