"""One connection to one server: send a command, read and check its reply.

Every reply header is validated before its body is read (length bounds
against maxMessageSizeBytes, responseTo, opcode). Anything that leaves the
byte stream in doubt - a network error, a truncated or garbage reply, a
timeout, or a gevent.Timeout/GreenletExit arriving mid-message - closes this
connection and only this connection; the caller gets AutoReconnect,
NetworkTimeout or ProtocolError. An ``ok: 0`` reply leaves the connection
usable and raises OperationFailure (or the subclass the code calls for).
"""

from __future__ import annotations

import itertools
import mmap
import socket as _socket
import sys
import time
from typing import Any, Mapping, NamedTuple, NoReturn, Optional, Sequence, Union

from gevent import get_hub, getcurrent

from greenmongo.bson.codec_options import CodecOptions
from greenmongo.bson.objectid import ObjectId
from greenmongo.bson.raw import RawBSONDocument
from greenmongo.errors import (
    AutoReconnect,
    ConnectionFailure,
    DocumentTooLarge,
    InvalidOperation,
    NetworkTimeout,
    ProtocolError,
)
from greenmongo.options.connection_settings import ConnectionSettings, server_api_fields
from greenmongo.sdam.address import Address
from greenmongo.wire import legacy, op_msg
from greenmongo.wire.batching import (
    COMMAND_OVERHEAD,
    DEFAULT_MAX_BSON_SIZE,
    DEFAULT_MAX_WRITE_BATCH_SIZE,
    WireLimits,
)
from greenmongo.wire.command_errors import check_command_reply
from greenmongo.wire.compression import Compressor, compress_message, may_compress, unpack_compressed
from greenmongo.wire.header import (
    DEFAULT_MAX_MESSAGE_SIZE,
    HEADER_SIZE,
    OP_COMPRESSED,
    OP_MSG,
    OP_REPLY,
    MsgHeader,
    next_request_id,
    pack_header,
    parse_header,
    validate_reply_header,
)

_connection_ids = itertools.count(1)
#: Read-buffer size: small replies arrive whole in one recv.
_READ_CHUNK = 32 * 1024
#: A body up to this size is allocated at once: the largest a server sends (a maxBsonObjectSize document,
#: the 16 KiB a command may add, the OP_MSG framing). A larger one is read in parts as it arrives.
_EAGER_BODY = DEFAULT_MAX_BSON_SIZE + COMMAND_OVERHEAD + 1024
_FIRST_PART = 1 << 20
_UNSET: Any = object()


def _is_tls(stream: Any) -> bool:
    """Whether ``stream`` is a net.tls TlsSocket, without importing net.tls (pyOpenSSL) to find out.

    net.tls is imported by the first TLS connection (net.connect); until then no stream can be one.
    """
    tls = sys.modules.get("greenmongo.net.tls")
    return tls is not None and isinstance(stream, tls.TlsSocket)


class Reply(NamedTuple):
    """A reply read off the wire, before BSON decoding."""

    header: MsgHeader
    opcode: int  # OP_MSG or OP_REPLY (after any decompression)
    message: Union[op_msg.OpMsg, legacy.OpReply]
    compressor_id: Optional[int]

    @property
    def more_to_come(self) -> bool:
        return isinstance(self.message, op_msg.OpMsg) and self.message.more_to_come

    def document(self, codec_options: Optional[CodecOptions] = None, lazy_batches: bool = False) -> dict[str, Any]:
        if isinstance(self.message, op_msg.OpMsg):
            return op_msg.decode_reply(self.message, codec_options, lazy_batches)
        return legacy.decode_command_reply(self.message, codec_options)


class Connection:
    """A socket (plain or TLS) speaking the wire protocol to ``address``.

    Not for concurrent use: one greenlet at a time (the pool hands it out);
    overlapping use raises InvalidOperation rather than mixing replies.
    """

    def __init__(
        self,
        stream: Any,
        address: Address,
        settings: Optional[ConnectionSettings] = None,
        *,
        conn_id: Optional[int] = None,
    ) -> None:
        self.id = next(_connection_ids) if conn_id is None else conn_id
        self.address = address
        self.settings = settings = settings or ConnectionSettings()
        self._stream = stream
        self._stream_timeout: Any = _UNSET
        self.is_tls = _is_tls(stream)
        # A plain gevent socket: the first read after a send waits for the socket to be readable before its
        # recv (see _await_reply), on gevent's own watcher of the socket, as detach_from_hub uses it.
        self._waits_first = (not self.is_tls and hasattr(stream, "_wait")
                             and getattr(stream, "_read_event", None) is not None)
        self._reply_due = False
        #: Timeout for calls that pass none; open_connection uses connectTimeoutMS during the handshake.
        self.default_timeout: Optional[float] = settings.socket_timeout
        self.hello: Optional[dict[str, Any]] = None
        self.max_wire_version = 0
        self.min_wire_version = 0
        self.max_bson_size = DEFAULT_MAX_BSON_SIZE
        self.max_message_size = DEFAULT_MAX_MESSAGE_SIZE
        self.max_write_batch_size = DEFAULT_MAX_WRITE_BATCH_SIZE
        self.service_id: Optional[ObjectId] = None
        self.compressor: Optional[Compressor] = None
        self.supports_op_msg = False
        self.hello_ok = False
        self.created_at = time.monotonic()
        self.last_used = self.created_at
        self.close_reason: Optional[str] = None
        self._closed = False
        self._busy = False
        self._exhaust_response_to: Optional[int] = None
        # Anonymous memory of its own, not the malloc heap: a connection outlives the bursts of short-lived
        # allocations around it (a pool refilled after a clear), and a long-lived block there would keep the
        # heap's freed pages from going back to the system. Pages are resident only once a reply reaches them.
        self._read_buffer = mmap.mmap(-1, _READ_CHUNK)
        self._read_view = memoryview(self._read_buffer)
        self._read_pos = self._read_end = 0
        #: The expiry a round trip under an absolute deadline (CSOT) throws when its timer fires.
        self._deadline_expired: Optional[_DeadlineExpired] = None
        #: A deadline for commands that pass none (the handshake and authentication under an operation's timeoutMS).
        self.default_deadline: Optional[float] = None

    # -- state ------------------------------------------------------------------

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<Connection id={self.id} {self._label} {state}>"

    @property
    def _label(self) -> str:
        host, port = self.address
        return host if host.endswith(".sock") else f"{host}:{port}"

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def compression(self) -> Optional[str]:
        """The negotiated compressor's name, or None."""
        return self.compressor.name if self.compressor else None

    @property
    def limits(self) -> WireLimits:
        return WireLimits(self.max_bson_size, self.max_message_size, self.max_write_batch_size)

    @property
    def more_to_come(self) -> bool:
        """True while an exhaust reply stream is open: read on with ``receive_more`` or close."""
        return self._exhaust_response_to is not None

    def close(self, reason: Optional[str] = None) -> None:
        """Close the socket; idempotent, never raises."""
        if self._closed:
            return
        self._closed = True
        self.close_reason = reason
        try:
            self._stream.close()
        except Exception:
            pass

    def detach_from_hub(self) -> None:
        """Waits on this connection's socket no longer keep ``gevent.get_hub().join()`` waiting.

        For background connections (monitors): an open client must not pin the hub.
        """
        stream = self._stream
        if self.is_tls:
            stream.unref_watchers()
            return
        for name in ("_read_event", "_write_event"):  # gevent's own socket watchers
            watcher = getattr(stream, name, None)
            if watcher is not None:
                watcher.ref = False

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close("context exit")

    # -- commands ---------------------------------------------------------------

    def command(
        self,
        dbname: str,
        spec: Mapping[str, Any],
        *,
        sequences: Optional[Mapping[str, Sequence[Mapping[str, Any]]]] = None,
        codec_options: Optional[CodecOptions] = None,
        check: bool = True,
        allowable_errors: Sequence[Any] = (),
        parse_write_concern_error: bool = False,
        unacknowledged: bool = False,
        exhaust_allowed: bool = False,
        timeout: Any = _UNSET,
        apply_server_api: bool = True,
        request_id: Optional[int] = None,
        deadline: Optional[float] = None,
        deadline_timeout: Optional[float] = None,
        lazy_batches: bool = False,
    ) -> Optional[dict[str, Any]]:
        """Run ``spec`` on ``dbname`` and return the decoded reply.

        ``sequences`` go as OP_MSG document sequences (e.g. ``{"documents":
        [...]}`` for an insert). ``unacknowledged`` sets moreToCome: nothing is
        read and None is returned. ``check`` raises OperationFailure (or a
        subclass) for ``ok: 0``. The configured server API fields are added
        unless ``apply_server_api`` is false; ``spec`` itself is never mutated.
        ``request_id`` (from ``wire.header.next_request_id``) lets a caller announce the
        request before sending it. ``deadline`` (``time.monotonic()`` based; the operation's timeoutMS)
        replaces ``timeout`` and bounds the send and the whole reply together: expired before the send,
        NetworkTimeout and the connection stays usable; expired after it, NetworkTimeout and the
        connection is closed. ``deadline_timeout`` (the timeoutMS in seconds) is for the error's message.
        ``lazy_batches``: a cursor reply's batch stays encoded, a ``bson.DocumentBatch`` (``op_msg.decode_body``).
        """
        if not spec:
            raise InvalidOperation("a command document cannot be empty")
        if self._exhaust_response_to is not None:
            raise InvalidOperation("cannot send a command while an exhaust reply stream is still open")
        body = dict(spec)
        if apply_server_api and self.settings.server_api is not None:
            body.update(server_api_fields(self.settings.server_api))
        command_name = next(iter(spec))
        if request_id is None:  # command monitoring passes its own, to name it in the started event
            request_id = next_request_id()
        if self.supports_op_msg:
            flags = 0
            if unacknowledged:
                flags |= op_msg.FLAG_MORE_TO_COME
            if exhaust_allowed:
                flags |= op_msg.FLAG_EXHAUST_ALLOWED
            body["$db"] = dbname  # on our own copy: the command is copied once
            message = op_msg.encode_body(request_id, body, sequences=sequences, flags=flags,
                                         checksum=self.settings.send_checksums, codec_options=codec_options)
        else:
            if sequences:
                body.update({name: [RawBSONDocument(doc) if type(doc) is bytes else doc for doc in docs]
                             for name, docs in sequences.items()})
            message = legacy.encode_command_query(request_id, body, dbname)
            unacknowledged = False  # OP_QUERY always answers
        if len(message) > self.max_message_size:  # the server limits the uncompressed size too
            raise DocumentTooLarge(f"command {command_name!r} is {len(message)} bytes, over the server's "
                                   f"maxMessageSizeBytes {self.max_message_size}")
        if self.compressor is not None and may_compress(command_name):
            message = compress_message(message, self.compressor)
        if deadline is None and timeout is _UNSET and self.default_deadline is not None:
            deadline = self.default_deadline
        if deadline is not None:
            document = self._round_trip_until(message, request_id, deadline, deadline_timeout,
                                              expect_reply=not unacknowledged, codec_options=codec_options,
                                              exhaust_allowed=exhaust_allowed, lazy_batches=lazy_batches)
        else:
            document = self._round_trip(message, request_id, timeout, expect_reply=not unacknowledged,
                                        codec_options=codec_options, exhaust_allowed=exhaust_allowed,
                                        lazy_batches=lazy_batches)
        if document is None:
            return None
        return self._check(document, check, allowable_errors, parse_write_concern_error)

    def receive_more(
        self,
        *,
        codec_options: Optional[CodecOptions] = None,
        check: bool = True,
        timeout: Any = _UNSET,
    ) -> dict[str, Any]:
        """The next reply of an exhaust stream (``more_to_come`` must be true)."""
        if self._exhaust_response_to is None:
            raise InvalidOperation("no exhaust reply stream is open on this connection")
        document = self._round_trip(None, self._exhaust_response_to, timeout, expect_reply=True,
                                    codec_options=codec_options, exhaust_allowed=True)
        return self._check(document, check, (), False)

    def _check(self, document: dict[str, Any], check: bool, allowable_errors, parse_write_concern_error):
        if check:
            check_command_reply(document, max_wire_version=self.max_wire_version,
                                allowable_errors=allowable_errors,
                                parse_write_concern_error=parse_write_concern_error)
        return document

    # -- raw messages -------------------------------------------------------------

    def receive_message(self, response_to: Optional[int], *, timeout: Any = _UNSET) -> Reply:
        """Read one reply whose responseTo must equal ``response_to`` (None: any)."""
        self._enter()
        try:
            self._set_timeout(timeout)
            return self._receive(response_to, exhaust_allowed=True)
        except BaseException as exc:
            self._fail(exc)
        finally:
            self._busy = False

    def _enter(self) -> None:
        if self._closed:
            raise AutoReconnect(f"{self._label}: connection {self.id} is closed"
                                + (f" ({self.close_reason})" if self.close_reason else ""))
        if self._busy:
            raise InvalidOperation(f"connection {self.id} is already in use by another greenlet")
        self._busy = True

    def _round_trip(self, message: Optional[bytes], request_id: int, timeout, *, expect_reply: bool,
                    codec_options: Optional[CodecOptions] = None, exhaust_allowed: bool = False,
                    lazy_batches: bool = False):
        self._enter()
        try:
            self._set_timeout(timeout)
            if message is not None:
                self._send(message)
            self.last_used = time.monotonic()
            if not expect_reply:
                return None
            document = self._receive_document(request_id, exhaust_allowed, codec_options, lazy_batches)
            self.last_used = time.monotonic()
            return document
        except BaseException as exc:
            self._fail(exc)
        finally:
            self._busy = False

    def _round_trip_until(self, message: bytes, request_id: int, deadline: float, deadline_timeout: Optional[float],
                          *, expect_reply: bool, codec_options: Any = None,
                          exhaust_allowed: bool = False, lazy_batches: bool = False) -> Optional[dict[str, Any]]:
        """``_round_trip`` bounded by one absolute deadline (CSOT): one loop timer for the send and every
        read of the reply, with no socket timeout (a socket timeout would arm a timer per read)."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:  # nothing sent: the connection is still in step with the server
            raise NetworkTimeout(f"{self._label}: timed out before sending ({_describe(deadline_timeout)})")
        expired = self._deadline_expired = _DeadlineExpired(deadline_timeout)
        timer = get_hub().loop.timer(remaining)  # referenced: the operation waits on it
        # update=True (as gevent.Timeout starts its timer): the loop's clock is the time its iteration began,
        # and a timer set from it would fire early by however long Python has run since. An early expiry
        # looked like time left to retry in: a second attempt went out after the deadline had passed.
        timer.start(getcurrent().throw, expired, update=True)
        try:
            return self._round_trip(message, request_id, None, expect_reply=expect_reply,
                                    codec_options=codec_options, exhaust_allowed=exhaust_allowed,
                                    lazy_batches=lazy_batches)
        finally:
            timer.close()
            self._deadline_expired = None
            del expired  # a traceback of it holds this frame: no cycle

    def _send(self, message: bytes) -> None:
        """All of ``message``. A plain socket first gets one non-waiting ``send`` (timeout 0: it raises
        instead of waiting), which takes a command whole when the kernel has room, the usual case; what is
        left goes through ``sendall`` under the socket's timeout as before (gevent's sendall costs a
        getsockopt system call and several Python calls per message)."""
        stream = self._stream
        if self.is_tls:
            stream.sendall(message)
            return
        try:
            sent = stream.send(message, 0, 0.0)
        except BlockingIOError:
            sent = 0
        if sent < len(message):
            stream.sendall(memoryview(message)[sent:])
        self._reply_due = self._waits_first

    def _set_timeout(self, timeout) -> None:
        value = self.default_timeout if timeout is _UNSET else timeout
        if self._stream_timeout is _UNSET or value != self._stream_timeout:
            self._stream.settimeout(value)
            self._stream_timeout = value

    def _fail(self, exc: BaseException) -> NoReturn:
        """Close after anything that may have desynchronised the stream, then raise the right error."""
        if exc is self._deadline_expired and exc is not None:
            self.close("timeout")
            # Chained, as a socket timeout is: the traceback shows the read or send the deadline cut.
            raise NetworkTimeout(f"{self._label}: timed out ({_describe(exc.timeout)})") from exc
        if isinstance(exc, _socket.timeout):
            self.close("timeout")
            raise NetworkTimeout(f"{self._label}: timed out (socket timeout "
                                 f"{self._describe_timeout()})") from exc
        if isinstance(exc, ProtocolError):
            self.close(f"protocol error: {exc}")
            raise ProtocolError(f"{self._label}: {exc}") from exc
        if isinstance(exc, ConnectionFailure):
            self.close(str(exc))
        elif isinstance(exc, OSError):
            self.close(f"network error: {exc}")
            raise AutoReconnect(f"{self._label}: {exc}") from exc
        else:
            self.close(f"interrupted by {type(exc).__name__}")
        try:
            raise exc
        finally:
            del exc  # its traceback holds this frame: no reference cycle through the argument

    def _describe_timeout(self) -> str:
        value = self._stream_timeout
        return "none" if value is None or value is _UNSET else f"{value * 1000:.1f}ms"

    # -- reading ---------------------------------------------------------------

    def _read_exactly(self, count: int, *, message_start: bool = False) -> Union[bytes, bytearray]:
        """``count`` bytes; past _EAGER_BODY in parts, each as large as all before it.

        A length was checked against maxMessageSizeBytes, but one past what any server sends (a lie, or
        a hello's maxMessageSizeBytes of 2 GB) must not cost what it claims: memory is then allocated
        only as the bytes arrive (at most twice what was received).
        """
        if count <= _EAGER_BODY:
            return self._read_part(count, message_start=message_start)
        parts = []
        received = 0
        while received < count:
            parts.append(self._read_part(min(max(received, _FIRST_PART), count - received), done=received,
                                         total=count))
            received += len(parts[-1])
        return b"".join(parts)

    def _read_part(self, count: int, *, message_start: bool = False, done: int = 0,
                   total: Optional[int] = None) -> Union[bytes, bytearray]:
        """``count`` bytes, served from the read buffer first (one recv usually brings a whole reply).

        ``done`` and ``total`` place the part in a larger read, for the error message.
        """
        available = self._read_end - self._read_pos
        if available >= count:
            start = self._read_pos
            self._read_pos += count
            return self._read_buffer[start:start + count]
        out = bytearray(count)
        out[:available] = self._read_view[self._read_pos:self._read_end]
        self._read_pos = self._read_end = 0
        received = available
        if self._reply_due:
            self._await_reply()
        recv_into = self._stream.recv_into
        while received < count:
            missing = count - received
            if missing >= _READ_CHUNK:  # large bodies go straight into place
                chunk = recv_into(memoryview(out)[received:], missing)
                taken = chunk
            else:
                chunk = recv_into(self._read_view, _READ_CHUNK)
                taken = min(chunk, missing)
                out[received:received + taken] = self._read_view[:taken]
                self._read_pos, self._read_end = taken, chunk
            if not chunk:
                if received or done or not message_start:
                    raise AutoReconnect(f"{self._label}: connection closed mid-message ({done + received} of "
                                        f"{total or count} bytes read)")
                raise AutoReconnect(f"{self._label}: connection closed by the server")
            received += taken
        return out

    def _await_reply(self) -> None:
        """Just sent a request: its reply cannot be there yet. gevent's recv_into would first try the system
        call, fail with EWOULDBLOCK, and raise and catch an OSError before waiting; this waits first (the same
        wait, on the same watcher, under the socket's timeout). A socket another greenlet closed has no
        watcher: its recv then fails as it always did."""
        self._reply_due = False
        stream = self._stream
        watcher = stream._read_event
        if watcher is not None and stream.timeout != 0.0:
            stream._wait(watcher)

    def _receive_document(self, expected_response_to: Optional[int], exhaust_allowed: bool,
                          codec_options: Optional[CodecOptions], lazy_batches: bool) -> dict[str, Any]:
        """One reply, decoded (inside the round trip's guard: garbage BSON closes the connection too). A plain
        OP_MSG (one body section, no flags: nearly every reply) is decoded straight from its bytes."""
        if self._read_pos == self._read_end:
            document = self._receive_plain_reply(expected_response_to, codec_options, lazy_batches)
            if document is not None:
                return document
        raw_header, header = self._receive_header(expected_response_to)
        payload: Union[bytes, bytearray] = self._read_exactly(header.body_length)
        if header.opcode == OP_MSG:
            body = op_msg.plain_reply_body(payload)
            if body is not None:
                self._exhaust_response_to = None
                return op_msg.decode_body(body, codec_options, lazy_batches)
        return self._reply(raw_header, header, payload, exhaust_allowed).document(codec_options, lazy_batches)

    def _receive_plain_reply(self, expected_response_to: Optional[int],
                             codec_options: Optional[CodecOptions], lazy_batches: bool) -> Optional[dict[str, Any]]:
        """The usual reply, read and checked in one step: one recv brings exactly one plain OP_MSG (no flags,
        one body section) whose header passes every check ``_receive_header`` makes. None for anything else:
        the bytes stay in the read buffer, and the general path reads, judges and reports them."""
        if self._reply_due:
            self._await_reply()
        received = self._stream.recv_into(self._read_view, _READ_CHUNK)
        if not received:
            raise AutoReconnect(f"{self._label}: connection closed by the server")
        self._read_pos, self._read_end = 0, received
        length = op_msg.whole_plain_reply(self._read_buffer, received, max_message_size=self.max_message_size,
                                          expected_response_to=expected_response_to)
        if not length:
            return None
        self._read_end = 0
        self._exhaust_response_to = None
        # A copy (a slice of the mmap is bytes): a RawBSONDocument reply keeps its bytes, and the buffer is reused.
        return op_msg.decode_body(self._read_buffer[op_msg.PLAIN_BODY_START:length], codec_options, lazy_batches)

    def _receive_header(self, expected_response_to: Optional[int]) -> tuple[Union[bytes, bytearray], MsgHeader]:
        raw_header: Union[bytes, bytearray] = self._read_exactly(HEADER_SIZE, message_start=True)
        header = validate_reply_header(parse_header(raw_header), max_message_size=self.max_message_size,
                                       expected_response_to=expected_response_to or None)
        return raw_header, header

    def _receive(self, expected_response_to: Optional[int], *, exhaust_allowed: bool) -> Reply:
        """One reply; ``exhaust_allowed`` says whether the request let the server stream (moreToCome)."""
        raw_header, header = self._receive_header(expected_response_to)
        return self._reply(raw_header, header, self._read_exactly(header.body_length), exhaust_allowed)

    def _reply(self, raw_header: Union[bytes, bytearray], header: MsgHeader, payload: Union[bytes, bytearray],
               exhaust_allowed: bool) -> Reply:
        opcode = header.opcode
        compressor_id = None
        if opcode == OP_COMPRESSED:
            opcode, payload, compressor_id = unpack_compressed(payload, max_message_size=self.max_message_size)
            raw_header = pack_header(HEADER_SIZE + len(payload), header.request_id, header.response_to, opcode)
        if opcode == OP_MSG:
            # The payload is this reply's own buffer (never the read buffer), so the body need not be copied.
            message: Any = op_msg.unpack_op_msg(payload, header=bytes(raw_header),
                                                verify_checksum=not self.is_tls, copy_body=False)
            if message.more_to_come and not exhaust_allowed:
                raise ProtocolError("reply has moreToCome set, but the request did not set exhaustAllowed")
            self._exhaust_response_to = header.request_id if message.more_to_come else None
        elif opcode == OP_REPLY:
            message = legacy.unpack_op_reply(payload)
            self._exhaust_response_to = None
        else:
            raise ProtocolError(f"OP_COMPRESSED wraps unexpected opcode {opcode}")
        return Reply(header, opcode, message, compressor_id)


class _DeadlineExpired(BaseException):
    """Thrown into a round trip by its deadline's timer (a BaseException: nothing on the way swallows it)."""

    def __init__(self, timeout: Optional[float]) -> None:
        super().__init__(f"the deadline ran out ({_describe(timeout)})")
        self.timeout = timeout


def _describe(timeout: Optional[float]) -> str:
    return "the operation's deadline" if timeout is None else f"timeoutMS: {timeout * 1000:g}ms"
