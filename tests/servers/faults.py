"""A loopback TCP proxy that injects network faults between a client and a MongoDB server, on a seeded
schedule.

It reads both byte streams message by message (the 16-byte wire header gives each message's length and,
for a reply, the request it answers), so a fault lands at a known point of an exchange:

* ``reset-request``: part of a request reaches the server, then both sockets are reset (RST): the server
  never runs it;
* ``reset-reply``: the request runs, part of its reply reaches the client, then both sockets are reset;
* ``truncate-reply``: the same, but the client's socket is closed in order (FIN), as by a crashed peer;
* ``stall``: the request runs and the reply stops (before its first byte or in its middle) for N seconds,
  then resumes or the connection is closed;
* ``delay``: the reply is held back a little (well under any socket timeout);
* ``refused``: during the plan's windows every new connection is closed as soon as it is accepted;
* ``blackhole``: an accepted connection never gets a byte (nor is anything passed on).

Decisions are deterministic. A request whose command carries a string ``comment`` is decided by
``random.Random(f"{seed}/{comment}/{command}/{n}")`` - n counts that comment's earlier commands of the same
name, so an operation's retry and its cursor's getMores get their own decisions - which gives two drivers
running the same workload (one comment per operation) the same faults for the same operations, whichever
connection carries them. Other messages (handshakes, monitoring, endSessions) are decided by their
connection's accept number and message number, at ``plan.uncommented`` times the rates; connection faults
(blackholes) by the accept number. Every fault applied is logged (``log``, ``injected`` by kind).

``disable()`` / ``enable()`` switch faults off and on at runtime (``calm()`` for a block): while off,
bytes pass through untouched and stalls in progress end at once (each as it was decided: resume or
close)::

    plan = FaultPlan(seed=7, reset_reply=0.02, stall=0.01)
    with FaultProxy(server.host, server.port, plan) as proxy:
        client = MongoClient(f"mongodb://{proxy.host}:{proxy.port}/?directConnection=true")
"""

from __future__ import annotations

import contextlib
import random
import socket
import struct
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterator, Optional

import gevent
from gevent.event import Event
from gevent.server import StreamServer

HEADER = struct.Struct("<iiii")  # messageLength, requestID, responseTo, opCode
OP_MSG = 2013
OP_QUERY = 2004
_MAX_MESSAGE = 48 * 1024 * 1024 + 16 * 1024  # a server's maxMessageSizeBytes, with room for a header
_COMMENT = b"\x02comment\x00"

#: The faults decided per request, in the order their probabilities are laid out on [0, 1).
MESSAGE_FAULTS = ("reset-request", "reset-reply", "truncate-reply", "stall", "delay")


@dataclass(frozen=True)
class FaultPlan:
    """What to inject and how often: per-request probabilities, the connection faults, and their ranges."""

    seed: int = 0
    reset_request: float = 0.0
    reset_reply: float = 0.0
    truncate_reply: float = 0.0
    stall: float = 0.0
    delay: float = 0.0
    #: Probability that an accepted connection is a blackhole.
    blackhole: float = 0.0
    #: (start, length) in seconds, counted from when faults were (last) switched on: new connections are refused.
    refuse_windows: tuple = ()
    #: How long a stall lasts (seconds), and the share of stalls that end with the connection closed.
    stall_seconds: tuple = (0.5, 2.0)
    stall_close: float = 0.5
    #: A delay's length (seconds).
    delay_seconds: tuple = (0.001, 0.05)
    #: Rates for requests without a comment (handshakes, monitoring, endSessions), relative to the others.
    uncommented: float = 0.25

    def probability(self, kind: str) -> float:
        return float(getattr(self, kind.replace("-", "_")))


@dataclass(frozen=True)
class Fault:
    """One fault as decided for a request (or a connection)."""

    kind: str
    key: str
    #: Where in the message the cut falls, as a fraction of its length (reset/truncate/stall).
    cut: float = 0.0
    #: A stall's or delay's length in seconds.
    seconds: float = 0.0
    #: A stall ends with the connection closed (else the reply resumes).
    close: bool = False


@dataclass
class FaultRecord:
    at: float  # seconds since the proxy started
    kind: str
    key: str
    link: int  # the accept number of the connection
    detail: str = ""


def decide(plan: FaultPlan, key: str, scale: float = 1.0) -> Optional[Fault]:
    """The fault (or None) for the request known by ``key``: a pure function of the plan and the key."""
    rng = random.Random(f"{plan.seed}/{key}")
    roll = rng.random()
    for kind in MESSAGE_FAULTS:
        share = plan.probability(kind) * scale
        if roll < share:
            low, high = plan.stall_seconds if kind == "stall" else plan.delay_seconds
            return Fault(kind, key, cut=rng.random(), seconds=rng.uniform(low, high),
                         close=rng.random() < plan.stall_close)
        roll -= share
    return None


def command_fields(message: bytes) -> tuple[Optional[str], Optional[str]]:
    """(command name, string comment) of an OP_MSG or OP_QUERY request, each None where absent.

    A byte-level reading of the first document (no BSON decoder: the proxy serves any driver)."""
    length, _request_id, _response_to, opcode = HEADER.unpack_from(message)
    if opcode == OP_MSG:
        position = 20
        while position < length and message[position] != 0:  # skip document sequences (kind 1)
            position += 1 + struct.unpack_from("<i", message, position + 1)[0]
        start = position + 1
    elif opcode == OP_QUERY:
        start = message.index(b"\x00", 20) + 1 + 8  # flags, fullCollectionName, numberToSkip, numberToReturn
    else:
        return None, None
    if start + 5 > length:
        return None, None
    doc_length = struct.unpack_from("<i", message, start)[0]
    document = message[start:start + doc_length]
    name_end = document.find(b"\x00", 5)
    name = document[5:name_end].decode("utf-8", "replace") if name_end > 5 else None
    comment = None
    found = document.find(_COMMENT)
    if found >= 0:
        value_at = found + len(_COMMENT)
        size = struct.unpack_from("<i", document, value_at)[0]
        comment = document[value_at + 4:value_at + 3 + size].decode("utf-8", "replace")
    return name, comment


class _Reader:
    """Whole wire messages off a socket (None at end of stream)."""

    def __init__(self, sock: Any) -> None:
        self.sock = sock
        self.buffer = bytearray()

    def _fill(self, count: int) -> bool:
        while len(self.buffer) < count:
            data = self.sock.recv(max(64 * 1024, count - len(self.buffer)))
            if not data:
                return False
            self.buffer += data
        return True

    def message(self) -> Optional[bytes]:
        if not self._fill(16):
            return None
        length = HEADER.unpack_from(self.buffer)[0]
        if not 16 <= length <= _MAX_MESSAGE:
            raise ValueError(f"not a wire message: length {length}")
        if not self._fill(length):
            return None
        message = bytes(self.buffer[:length])
        del self.buffer[:length]
        return message


def _reset(sock: Any) -> None:
    """Close with an RST (SO_LINGER 0), not a FIN: the peer's next read or write fails."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


class _Link:
    """One accepted connection and its upstream twin."""

    def __init__(self, index: int, client: Any) -> None:
        self.index = index
        self.client = client
        self.upstream: Any = None
        self.messages = 0
        #: requestID -> the fault its reply gets
        self.pending: dict = {}
        self.pumps: list = []

    def reset(self) -> None:
        for sock in (self.client, self.upstream):
            if sock is not None:
                _reset(sock)

    def close(self) -> None:
        for sock in (self.client, self.upstream):
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.close()


class FaultProxy:
    """Forwards each accepted connection to ``upstream``, injecting ``plan``'s faults while enabled."""

    def __init__(self, upstream_host: str, upstream_port: int, plan: FaultPlan, *, host: str = "127.0.0.1",
                 enabled: bool = True) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.plan = plan
        self.host = host
        self.port = 0
        self._server = StreamServer((host, 0), self._handle)
        self._links: set = set()
        self._accepted = 0
        self._occurrences: Counter = Counter()  # comment/command -> requests seen
        self._started = time.monotonic()
        self._enabled_at = self._started
        self._release = Event()  # set (and replaced) by disable(): the stalls in progress end
        self._forced: list = []  # (command name or None, Fault): the next such requests get these faults
        self.enabled = False
        self.log: list[FaultRecord] = []
        self.injected: Counter = Counter()
        if enabled:
            self.enable()

    # -- control ---------------------------------------------------------------------------------------

    def start(self) -> "FaultProxy":
        self._server.start()
        self.port = self._server.server_port
        self._started = time.monotonic()
        if self.enabled:
            self._enabled_at = self._started
        return self

    def stop(self) -> None:
        self._server.close()  # no new connections; then end the open ones (stop() would wait for them)
        for link in list(self._links):
            gevent.killall(link.pumps)
            link.close()
        self._links.clear()
        self._server.stop()

    def __enter__(self) -> "FaultProxy":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def enable(self) -> None:
        """Faults on (the refuse windows count from now)."""
        self.enabled = True
        self._enabled_at = time.monotonic()

    def disable(self) -> None:
        """Faults off: bytes pass through; stalls in progress (forced ones too) end now, resuming or closing
        as decided."""
        self.enabled = False
        release, self._release = self._release, Event()
        release.set()

    @contextlib.contextmanager
    def calm(self) -> Iterator[None]:
        was = self.enabled
        self.disable()
        try:
            yield
        finally:
            if was:
                self.enable()

    def force(self, kind: str, *, command: Optional[str] = None, cut: float = 0.5, seconds: float = 1.0,
              close: bool = False) -> None:
        """The next request (of ``command``, if given) gets this fault, whatever the plan says (even with
        faults off): for tests that need one fault at one moment."""
        if kind not in MESSAGE_FAULTS:
            raise ValueError(f"not a message fault: {kind!r}")
        self._forced.append((command, Fault(kind, f"forced/{kind}", cut=cut, seconds=seconds, close=close)))

    @property
    def links(self) -> int:
        """Connections open through the proxy now."""
        return len(self._links)

    def _record(self, kind: str, key: str, link: _Link, detail: str = "") -> None:
        self.log.append(FaultRecord(time.monotonic() - self._started, kind, key, link.index, detail))
        self.injected[kind] += 1

    # -- connections -----------------------------------------------------------------------------------

    def _refusing(self) -> bool:
        if not self.enabled:
            return False
        since = time.monotonic() - self._enabled_at
        return any(start <= since < start + length for start, length in self.plan.refuse_windows)

    def _handle(self, client: Any, _address: Any) -> None:
        self._accepted += 1
        link = _Link(self._accepted, client)
        if self._refusing():
            self._record("refused", f"accept/{link.index}", link)
            client.close()
            return
        if self.enabled and random.Random(f"{self.plan.seed}/accept/{link.index}").random() < self.plan.blackhole:
            self._record("blackhole", f"accept/{link.index}", link)
            self._links.add(link)
            link.pumps = [gevent.getcurrent()]
            try:
                self._swallow(client)  # never a byte back; the client's timeout ends it
            finally:
                self._links.discard(link)
                client.close()
            return
        try:
            upstream = gevent.socket.create_connection(self.upstream)
        except OSError:
            client.close()
            return
        link.upstream = upstream
        for sock in (client, upstream):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        link.pumps = [gevent.spawn(self._requests, link), gevent.spawn(self._replies, link)]
        self._links.add(link)
        try:
            gevent.joinall(link.pumps, count=1)  # either side closing (or a fault) ends the pair
        finally:
            gevent.killall(link.pumps)
            self._links.discard(link)
            link.close()

    @staticmethod
    def _swallow(sock: Any) -> None:
        try:
            while sock.recv(64 * 1024):
                pass
        except OSError:
            return

    # -- the two directions ----------------------------------------------------------------------------

    def _decide(self, link: _Link, message: bytes) -> Optional[Fault]:
        link.messages += 1
        if not (self.enabled or self._forced):
            return None
        try:
            name, comment = command_fields(message)
        except (struct.error, ValueError, IndexError):
            name, comment = None, None
        for index, (command, fault) in enumerate(self._forced):
            if command is None or command == name:
                del self._forced[index]
                return fault
        if not self.enabled:
            return None
        if comment is not None:
            base = f"{comment}/{name}"
            occurrence = self._occurrences[base]
            self._occurrences[base] += 1
            return decide(self.plan, f"{base}/{occurrence}")
        return decide(self.plan, f"link{link.index}/{link.messages}/{name}", self.plan.uncommented)

    def _requests(self, link: _Link) -> None:
        reader = _Reader(link.client)
        try:
            while True:
                message = reader.message()
                if message is None:
                    return
                fault = self._decide(link, message)
                if fault is not None and fault.kind == "reset-request":
                    cut = max(1, int(fault.cut * len(message)))
                    link.upstream.sendall(message[:cut])
                    self._record("reset-request", fault.key, link, f"{cut} of {len(message)} bytes sent")
                    link.reset()
                    return
                if fault is not None:
                    link.pending[HEADER.unpack_from(message)[1]] = fault
                link.upstream.sendall(message)
        except (OSError, ValueError):
            return

    def _replies(self, link: _Link) -> None:
        reader = _Reader(link.upstream)
        try:
            while True:
                message = reader.message()
                if message is None:
                    return
                fault = link.pending.pop(HEADER.unpack_from(message)[2], None)
                if fault is None or not (self.enabled or fault.key.startswith("forced/")):
                    link.client.sendall(message)
                    continue
                if not self._apply(link, fault, message):
                    return
        except (OSError, ValueError):
            return

    def _apply(self, link: _Link, fault: Fault, message: bytes) -> bool:
        """Send ``message`` (a reply) as ``fault`` says; False if the link is finished."""
        cut = int(fault.cut * len(message))  # 0: nothing of the reply goes out
        detail = f"{cut} of {len(message)} bytes sent"
        if fault.kind in ("reset-reply", "truncate-reply"):
            link.client.sendall(message[:cut])
            self._record(fault.kind, fault.key, link, detail)
            if fault.kind == "reset-reply":
                link.reset()
            else:
                with contextlib.suppress(OSError):
                    link.client.shutdown(socket.SHUT_RDWR)
                link.close()
            return False
        if fault.kind == "stall":
            link.client.sendall(message[:cut])
            self._record("stall", fault.key, link,
                         f"{fault.seconds:.2f}s after {detail}, then {'close' if fault.close else 'resume'}")
            self._release.wait(fault.seconds)
            if fault.close:
                link.close()
                return False
            link.client.sendall(message[cut:])
            return True
        self._record("delay", fault.key, link, f"{fault.seconds * 1000:.0f}ms")
        gevent.sleep(fault.seconds)
        link.client.sendall(message)
        return True
