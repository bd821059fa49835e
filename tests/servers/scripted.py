"""A scriptable MongoDB stand-in on a loopback port, for fault injection and topology tests.

It speaks OP_MSG, OP_QUERY (legacy hello) and OP_COMPRESSED. Each command
name can be given a queue of one-shot actions (``script``) or a standing
handler (``on``); everything else gets a sensible default (hello, ping,
insert/update/delete counts, ``CommandNotFound``). Actions can reply, delay,
close, stream exhaust replies, or send deliberately broken bytes::

    with ScriptedServer(compressors=("zlib",)) as server:
        server.script("find", Reply({"ok": 0, "code": 2, "errmsg": "bad"}, delay=0.1))
        server.script("ping", Malformed.wrong_response_to())
        ...

``hello`` is configurable (``ScriptedServer(hello=replica_set_member(...))``)
so one process can pose as several replica-set members or mongoses.
"""

from __future__ import annotations

import collections
import datetime
import itertools
import struct
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, Union

import gevent
import gevent.event
from gevent.server import StreamServer

from greenmongo import bson
from greenmongo.wire import compression, op_msg
from greenmongo.wire.header import (
    HEADER_SIZE,
    OP_COMPRESSED,
    OP_MSG,
    OP_QUERY,
    OP_REPLY,
    pack_header,
    parse_header,
)

MAX_WIRE_VERSION = 21  # MongoDB 7.0

_server_request_ids = itertools.count(1_000_000)


def default_hello(**overrides: Any) -> dict[str, Any]:
    """A standalone's hello reply; ``overrides`` replace or add fields."""
    reply: dict[str, Any] = {
        "isWritablePrimary": True,
        "helloOk": True,
        "maxBsonObjectSize": 16 * 1024 * 1024,
        "maxMessageSizeBytes": 48_000_000,
        "maxWriteBatchSize": 100_000,
        "localTime": datetime.datetime.now(datetime.timezone.utc),
        "logicalSessionTimeoutMinutes": 30,
        "minWireVersion": 0,
        "maxWireVersion": MAX_WIRE_VERSION,
        "readOnly": False,
        "ok": 1.0,
    }
    reply.update(overrides)
    return reply


def replica_set_member(set_name: str, hosts: Sequence[str], me: str, *, primary: Optional[str] = None,
                       **overrides: Any) -> dict[str, Any]:
    """The hello of a replica-set member; it is primary when ``me == primary``."""
    is_primary = primary is not None and me == primary
    reply = default_hello(setName=set_name, hosts=list(hosts), me=me, isWritablePrimary=is_primary,
                          secondary=not is_primary, setVersion=1)
    if primary is not None:
        reply["primary"] = primary
    reply.update(overrides)
    return reply


def mongos(**overrides: Any) -> dict[str, Any]:
    return default_hello(msg="isdbgrid", **overrides)


@dataclass
class Request:
    """One request as the server saw it."""

    opcode: int  # OP_MSG or OP_QUERY (after decompression)
    request_id: int
    flags: int
    command: dict[str, Any]
    db: str
    sequences: dict[str, list[dict[str, Any]]]
    compressor_id: Optional[int]
    connection_number: int

    @property
    def name(self) -> str:
        return next(iter(self.command), "")

    @property
    def more_to_come(self) -> bool:
        return self.opcode == OP_MSG and bool(self.flags & op_msg.FLAG_MORE_TO_COME)

    @property
    def exhaust_allowed(self) -> bool:
        return self.opcode == OP_MSG and bool(self.flags & op_msg.FLAG_EXHAUST_ALLOWED)


# -- actions ------------------------------------------------------------------

@dataclass
class Reply:
    """Answer with ``document``; ``compressor`` overrides the negotiated one ("none" disables)."""

    document: Mapping[str, Any]
    delay: float = 0.0
    compressor: Optional[str] = None
    checksum: bool = False


@dataclass
class Stream:
    """Several replies to one exhaust request: moreToCome on all but the last."""

    documents: Sequence[Mapping[str, Any]]
    interval: float = 0.0


@dataclass
class Exhaust:
    """Replies produced one at a time by ``replies``, an iterable of ``(document, more_to_come)``.

    The iterable may block (a greenlet wait) between replies, so a test can
    stream awaitable-hello answers as its simulated topology changes. The
    stream ends after a reply without more_to_come or when the iterable ends;
    an exception from it closes the connection.
    """

    replies: Iterable[tuple[Mapping[str, Any], bool]]


@dataclass
class Close:
    """Close the connection instead of answering (after ``delay`` seconds)."""

    delay: float = 0.0


@dataclass
class NoReply:
    """Read the request and say nothing (the client should time out)."""


@dataclass
class Raw:
    """Send bytes built by ``build(request)``, then close if ``close_after`` else wait ``hold`` seconds."""

    build: Callable[[Request], bytes]
    close_after: bool = True
    hold: float = 0.0


@dataclass
class Dribble:
    """Send the reply to ``document`` ``step`` bytes at a time, ``interval`` seconds apart (a slow link).

    ``sent`` counts the bytes that went out: a client that gave up stops the dribble early.
    """

    document: Mapping[str, Any]
    interval: float = 0.05
    step: int = 1
    sent: int = 0


Action = Union[Reply, Stream, Exhaust, Close, NoReply, Raw, Dribble, Mapping[str, Any]]
Handler = Callable[[Request], Action]


def _msg_bytes(request: Request, document: Mapping[str, Any]) -> bytes:
    return op_msg.pack_op_msg(next(_server_request_ids), bson.encode(document),
                              response_to=request.request_id)


def _framed(request: Request, payload: bytes, opcode: int = OP_MSG) -> bytes:
    """``payload`` behind a correct header (its length, the request's id as responseTo)."""
    return pack_header(HEADER_SIZE + len(payload), next(_server_request_ids), request.request_id, opcode) + payload


#: What the broken replies below carry when they carry a document: ``{"ok": 1}``.
_OK = {"ok": 1}


class Malformed:
    """Builders of deliberately broken replies."""

    @staticmethod
    def length_lie(extra: int = 100, close_after: bool = True, hold: float = 0.0) -> Raw:
        """A header claiming ``extra`` more bytes than are sent."""
        def build(request: Request) -> bytes:
            message = _msg_bytes(request, {"ok": 1})
            return struct.pack("<i", len(message) + extra) + message[4:]
        return Raw(build, close_after=close_after, hold=hold)

    @staticmethod
    def truncated_body() -> Raw:
        """A correct header and only half of the body, then close."""
        def build(request: Request) -> bytes:
            message = _msg_bytes(request, {"ok": 1, "padding": "x" * 64})
            return message[:HEADER_SIZE + (len(message) - HEADER_SIZE) // 2]
        return Raw(build, close_after=True)

    @staticmethod
    def wrong_response_to() -> Raw:
        def build(request: Request) -> bytes:
            return op_msg.pack_op_msg(next(_server_request_ids), bson.encode({"ok": 1}),
                                      response_to=request.request_id + 12345)
        return Raw(build, close_after=False, hold=1.0)

    @staticmethod
    def garbage_opcode(opcode: int = 4242) -> Raw:
        def build(request: Request) -> bytes:
            message = _msg_bytes(request, {"ok": 1})
            return message[:12] + struct.pack("<i", opcode) + message[16:]
        return Raw(build, close_after=False, hold=1.0)

    @staticmethod
    def oversized(length: int = 64 * 1024 * 1024) -> Raw:
        def build(request: Request) -> bytes:
            return pack_header(length, next(_server_request_ids), request.request_id, OP_MSG) + b"\x00" * 64
        return Raw(build, close_after=False, hold=1.0)

    @staticmethod
    def short_length() -> Raw:
        def build(request: Request) -> bytes:
            return pack_header(8, next(_server_request_ids), request.request_id, OP_MSG)
        return Raw(build, close_after=False, hold=1.0)

    @staticmethod
    def garbage_bson() -> Raw:
        def build(request: Request) -> bytes:
            body = struct.pack("<i", 12) + b"\x02\xff\xfe\x00garbage"[:8]
            return op_msg.pack_op_msg(next(_server_request_ids), body, response_to=request.request_id)
        return Raw(build, close_after=False, hold=1.0)

    @staticmethod
    def unknown_section_kind() -> Raw:
        def build(request: Request) -> bytes:
            message = bytearray(_msg_bytes(request, {"ok": 1}))
            message[HEADER_SIZE + 4] = 7
            return bytes(message)
        return Raw(build, close_after=False, hold=1.0)

    @staticmethod
    def header_length(length: int, document: Mapping[str, Any] = _OK, *, close_after: bool = False,
                      hold: float = 1.0) -> Raw:
        """A header claiming ``length`` bytes (below 16, 2 GB, ...) in front of a valid OP_MSG body."""
        def build(request: Request) -> bytes:
            message = _msg_bytes(request, document)
            return struct.pack("<i", length) + message[4:]
        return Raw(build, close_after=close_after, hold=hold)

    @staticmethod
    def op_msg_payload(payload: bytes, *, opcode: int = OP_MSG, hold: float = 1.0) -> Raw:
        """Hand-made message bytes after the header (flag bits, sections, checksum), correctly framed."""
        return Raw(lambda request: _framed(request, payload, opcode), close_after=False, hold=hold)

    @staticmethod
    def flag_bits(flags: int, document: Mapping[str, Any] = _OK, *, hold: float = 1.0) -> Raw:
        """An OP_MSG with these flag bits and no checksum (even when checksumPresent is among them)."""
        payload = struct.pack("<I", flags) + b"\x00" + bson.encode(document)
        return Malformed.op_msg_payload(payload, hold=hold)

    @staticmethod
    def body(raw_body: bytes) -> Raw:
        """An OP_MSG whose kind-0 section is ``raw_body`` (not a valid document, or not one at all)."""
        return Malformed.op_msg_payload(struct.pack("<I", 0) + b"\x00" + raw_body)

    @staticmethod
    def compressed(compressor_id: int, data: bytes, uncompressed_size: int, *,
                   original_opcode: int = OP_MSG) -> Raw:
        """An OP_COMPRESSED with the given compressorId, compressed bytes and uncompressedSize."""
        payload = struct.pack("<iiB", original_opcode, uncompressed_size, compressor_id) + data
        return Malformed.op_msg_payload(payload, opcode=OP_COMPRESSED)

    @staticmethod
    def op_reply(number_returned: int, documents: bytes = b"") -> Raw:
        """A legacy OP_REPLY claiming ``number_returned`` documents and carrying ``documents``."""
        return Malformed.op_msg_payload(struct.pack("<iqii", 0, 0, 0, number_returned) + documents,
                                        opcode=OP_REPLY)

    @staticmethod
    def bad_checksum() -> Raw:
        def build(request: Request) -> bytes:
            message = op_msg.pack_op_msg(next(_server_request_ids), bson.encode({"ok": 1}),
                                         response_to=request.request_id, checksum=True)
            return message[:-4] + bytes(b ^ 0xFF for b in message[-4:])
        return Raw(build, close_after=False, hold=1.0)


# -- the server -------------------------------------------------------------------

_HELLO_NAMES = ("hello", "ismaster", "isMaster")


class ScriptedServer:
    """A gevent StreamServer answering wire-protocol requests from a script."""

    def __init__(
        self,
        *,
        hello: Optional[Mapping[str, Any]] = None,
        host: str = "127.0.0.1",
        port: int = 0,
        compressors: Iterable[str] = (),
        tls_context: Any = None,
        service_id: Any = None,
        unix_path: Optional[str] = None,
        tls_handshake_delay: float = 0.0,
    ) -> None:
        self.hello_reply: dict[str, Any] = dict(hello) if hello is not None else default_hello()
        self.compressors = tuple(compressors)
        self.tls_context = tls_context
        self.tls_handshake_delay = tls_handshake_delay
        self.service_id = service_id
        self.requests: list[Request] = []
        self.connections_accepted = 0
        self._scripts: dict[str, collections.deque] = collections.defaultdict(collections.deque)
        self._handlers: dict[str, Handler] = {}
        self._open_sockets: set = set()
        self._stopping = gevent.event.Event()  # ends a Raw action's hold at once when the server stops
        self.unix_path = unix_path
        if unix_path is not None:
            from gevent import socket as gsocket

            listener = gsocket.socket(gsocket.AF_UNIX, gsocket.SOCK_STREAM)
            listener.bind(unix_path)
            listener.listen(128)
            self._server = StreamServer(listener, self._handle)
        else:
            self._server = StreamServer((host, port), self._handle)

    # -- lifecycle --
    def start(self) -> "ScriptedServer":
        self._server.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        for sock in list(self._open_sockets):
            try:
                sock.close()
            except Exception:
                pass
        self._server.stop(timeout=1)

    def __enter__(self) -> "ScriptedServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def address(self) -> tuple[str, int]:
        if self.unix_path is not None:
            return self.unix_path, 0
        host, port = self._server.address[:2]
        return host, port

    @property
    def uri(self) -> str:
        host, port = self.address
        return f"mongodb://{host}:{port}/"

    def close_connections(self) -> None:
        """Drop every client connection (simulates a network blip)."""
        for sock in list(self._open_sockets):
            try:
                sock.close()
            except Exception:
                pass

    # -- scripting --
    def script(self, command_name: str, *actions: Action) -> None:
        """Queue one-shot actions for the next requests named ``command_name``."""
        self._scripts[command_name.lower()].extend(actions)

    def on(self, command_name: str, handler: Union[Handler, Action]) -> None:
        """A standing answer for ``command_name``: an action or a function of the request."""
        self._handlers[command_name.lower()] = handler if callable(handler) else (lambda _request: handler)

    def commands(self, name: Optional[str] = None) -> list[Request]:
        """Requests seen so far, optionally only those named ``name`` (case-insensitive)."""
        if name is None:
            return list(self.requests)
        return [request for request in self.requests if request.name.lower() == name.lower()]

    # -- defaults --
    def _hello(self, request: Request, negotiated: list[str]) -> dict[str, Any]:
        reply = dict(self.hello_reply)
        reply.setdefault("connectionId", request.connection_number)
        if request.name != "hello":
            reply.setdefault("ismaster", reply.get("isWritablePrimary", False))
            reply.pop("isWritablePrimary", None)
        if negotiated:
            reply["compression"] = negotiated
        if request.command.get("loadBalanced") and self.service_id is not None:
            reply["serviceId"] = self.service_id
        return reply

    def _default_action(self, request: Request) -> Action:
        name = request.name.lower()
        if name in ("insert", "update", "delete"):
            field_name = {"insert": "documents", "update": "updates", "delete": "deletes"}[name]
            count = len(request.sequences.get(field_name, request.command.get(field_name, [])))
            return {"n": count, "ok": 1.0}
        if name in ("ping", "endsessions", "killcursors"):
            return {"ok": 1.0}
        return {"ok": 0.0, "errmsg": f"no such command: '{request.name}'", "code": 59,
                "codeName": "CommandNotFound"}

    def _action_for(self, request: Request) -> Optional[Action]:
        name = request.name.lower()
        queue = self._scripts.get(name)
        if queue:
            return queue.popleft()
        handler = self._handlers.get(name)
        if handler is not None:
            return handler(request)
        return None

    # -- I/O --
    def _handle(self, sock, _peer) -> None:
        self.connections_accepted += 1
        number = self.connections_accepted
        raw_sock = sock
        self._open_sockets.add(raw_sock)
        negotiated: list[str] = []
        try:
            if self.tls_context is not None:
                sock = self._accept_tls(sock)
            while True:
                request = self._read_request(sock, number)
                if request is None:
                    return
                self.requests.append(request)
                if request.name in _HELLO_NAMES and request.command.get("compression") is not None:
                    offered = list(request.command.get("compression") or [])
                    negotiated = [name for name in offered if name in self.compressors]
                action = self._action_for(request)
                if action is None and request.name in _HELLO_NAMES:
                    action = self._hello(request, negotiated)
                if action is None and request.more_to_come:
                    continue  # fire-and-forget: the protocol says no reply
                if action is None:
                    action = self._default_action(request)
                if not self._perform(sock, request, action, negotiated):
                    return
        except (OSError, gevent.GreenletExit):
            return
        except Exception:  # a parse error on our side: drop the connection like a real server would
            return
        finally:
            self._open_sockets.discard(raw_sock)
            try:
                sock.close()
            except Exception:
                pass

    def _accept_tls(self, sock):
        from OpenSSL import SSL

        from greenmongo.net.tls import TlsSocket

        if self.tls_handshake_delay:
            gevent.sleep(self.tls_handshake_delay)  # a slow peer: the client must keep the hub free
        connection = SSL.Connection(self.tls_context, sock)
        connection.set_accept_state()
        tls_socket = TlsSocket(sock, connection)
        tls_socket.do_handshake(5.0)
        return tls_socket

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
        return bytes(buffer)

    def _read_request(self, sock, number: int) -> Optional[Request]:
        raw_header = self._recv_exactly(sock, HEADER_SIZE)
        if raw_header is None:
            return None
        header = parse_header(raw_header)
        payload = self._recv_exactly(sock, header.length - HEADER_SIZE)
        if payload is None:
            return None
        opcode, compressor_id = header.opcode, None
        if opcode == OP_COMPRESSED:
            opcode, payload, compressor_id = compression.unpack_compressed(payload, max_message_size=64 << 20)
            raw_header = pack_header(HEADER_SIZE + len(payload), header.request_id, 0, opcode)
        if opcode == OP_MSG:
            message = op_msg.unpack_op_msg(payload, header=raw_header)
            command = bson.decode(message.body)
            db = command.get("$db", "")
            sequences = {name: [bson.decode(doc) for doc in docs] for name, docs in message.sequences.items()}
            return Request(OP_MSG, header.request_id, message.flags, command, db, sequences, compressor_id, number)
        if opcode == OP_QUERY:
            flags = struct.unpack_from("<i", payload, 0)[0]
            end = payload.index(b"\x00", 4)
            collection = payload[4:end].decode()
            command = bson.decode(payload[end + 1 + 8:])
            return Request(OP_QUERY, header.request_id, flags, command, collection.split(".")[0], {},
                           compressor_id, number)
        raise ValueError(f"scripted server cannot handle opcode {opcode}")

    def _encode_reply(self, request: Request, document: Mapping[str, Any], *, flags: int = 0,
                      response_to: Optional[int] = None, compressor: Optional[str] = None,
                      negotiated: Sequence[str] = (), checksum: bool = False) -> tuple[bytes, int]:
        request_id = next(_server_request_ids)
        response_to = request.request_id if response_to is None else response_to
        body = bson.encode(document)
        if request.opcode == OP_QUERY:
            payload = struct.pack("<iqii", 0, 0, 0, 1) + body
            message = pack_header(HEADER_SIZE + len(payload), request_id, response_to, OP_REPLY) + payload
        else:
            message = op_msg.pack_op_msg(request_id, body, flags=flags, response_to=response_to, checksum=checksum)
        name = compressor if compressor is not None else (negotiated[0] if negotiated else "none")
        if name != "none" and request.name.lower() not in ("saslstart", "saslcontinue"):
            message = compression.compress_message(message, compression.get_compressor(name))
        return message, request_id

    def _perform(self, sock, request: Request, action: Action, negotiated: Sequence[str]) -> bool:
        """Carry out ``action``; False means the connection is finished."""
        if isinstance(action, Mapping):
            action = Reply(action)
        if isinstance(action, Reply):
            if action.delay:
                gevent.sleep(action.delay)
            message, _ = self._encode_reply(request, action.document, compressor=action.compressor,
                                            negotiated=negotiated, checksum=action.checksum)
            sock.sendall(message)
            return True
        if isinstance(action, Stream):
            response_to = request.request_id
            documents = list(action.documents)
            for index, document in enumerate(documents):
                last = index == len(documents) - 1
                flags = 0 if last else op_msg.FLAG_MORE_TO_COME
                message, response_to = self._encode_reply(request, document, flags=flags, response_to=response_to,
                                                          negotiated=negotiated)
                sock.sendall(message)
                if action.interval and not last:
                    gevent.sleep(action.interval)
            return True
        if isinstance(action, Exhaust):
            response_to = request.request_id
            for document, more_to_come in action.replies:
                flags = op_msg.FLAG_MORE_TO_COME if more_to_come else 0
                message, response_to = self._encode_reply(request, document, flags=flags, response_to=response_to,
                                                          negotiated=negotiated)
                sock.sendall(message)
                if not more_to_come:
                    break
            return True
        if isinstance(action, Close):
            if action.delay:
                gevent.sleep(action.delay)
            return False
        if isinstance(action, NoReply):
            return True
        if isinstance(action, Dribble):
            message, _ = self._encode_reply(request, action.document, negotiated=negotiated)
            for start in range(0, len(message), action.step):
                sock.sendall(message[start:start + action.step])
                action.sent = start + len(message[start:start + action.step])
                if action.sent < len(message):
                    gevent.sleep(action.interval)  # the pace of the slow link, not a synchronisation
            return True
        if isinstance(action, Raw):
            sock.sendall(action.build(request))
            if action.hold:
                self._stopping.wait(action.hold)
            return not action.close_after and not action.hold
        raise TypeError(f"unknown scripted action {action!r}")
