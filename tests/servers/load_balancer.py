"""A loopback TCP load balancer in front of one server, posing as one or several mongoses behind it.

The Load Balancer spec's tests run against a TCP load balancer fronting mongoses that answer a
``hello`` carrying ``loadBalanced: true`` with a ``serviceId``. SecantusDB answers no ``serviceId``, so
this proxy stands in for both: every accepted connection is forwarded to the one backend and assigned
a *service*, round robin, each with its own ObjectId. In the backend's replies to ``hello`` /
``isMaster`` it sets ``serviceId`` (when the request asked with ``loadBalanced: true``) and
``topologyVersion.processId`` to the service's id - so a driver that takes the serviceId from the
processId (the tests' README mode) sees the same services - and removes ``compression`` so no
compressor is negotiated (every reply stays readable by this proxy). The rewritten reply gets a new
length and no checksum flag. Everything else passes through byte for byte, and a close on either side
closes the other.

``services=1`` is SINGLE_MONGOS_LB_URI's load balancer, ``services=2`` MULTI_MONGOS_LB_URI's::

    with LoadBalancer(("127.0.0.1", 27017), services=2) as lb:
        client = MongoClient(lb.uri)  # mongodb://127.0.0.1:<port>/?loadBalanced=true

``LoadBalancerProcess`` runs it in a subprocess (``python -m tests.servers.load_balancer``), for clients
that block the OS thread.

What a real deployment does that this one cannot: a mongos kills the cursors and aborts the
transactions of a connection that closes (here the backend keeps them until they time out or are
killed), and the services share one backend (a cursor opened through one service is visible through
another, where a real mongos would answer CursorNotFound).
"""

from __future__ import annotations

import argparse
import itertools
import os
import select
import signal
import socket
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional, Sequence

import gevent
import gevent.event
from gevent.server import StreamServer

from greenmongo import bson
from greenmongo.bson.objectid import ObjectId

_HEADER = struct.Struct("<iiii")
_OP_REPLY = 1
_OP_QUERY = 2004
_OP_MSG = 2013
_CHECKSUM_PRESENT = 1 << 0
_MORE_TO_COME = 1 << 1
_HELLO_NAMES = frozenset({"hello", "ismaster"})
_MAX_MESSAGE = 48_000_000 + 16 * 1024


class _Endpoint:
    """What both kinds of load balancer show: a context manager, an address and the client's URI."""

    host: str
    port: int

    def start(self) -> Any:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    @property
    def uri(self) -> str:
        """The connection string a load-balanced client uses (SINGLE_/MULTI_MONGOS_LB_URI)."""
        return f"mongodb://{self.host}:{self.port}/?loadBalanced=true"


class LoadBalancer(_Endpoint):
    """A TCP proxy to ``backend`` presenting ``services`` services, round robin per connection."""

    def __init__(self, backend: tuple[str, int], services: int = 1, *, add_service_id: bool = True,
                 service_ids: Optional[Sequence[ObjectId]] = None, host: str = "127.0.0.1") -> None:
        if services < 1:
            raise ValueError("a load balancer fronts at least one service")
        self.backend = backend
        self.service_ids: list[ObjectId] = list(service_ids) if service_ids else [ObjectId() for _ in range(services)]
        #: False: leave serviceId out (a deployment older than the Load Balancer spec; the driver's test mode
        #: must then take it from topologyVersion.processId).
        self.add_service_id = add_service_id
        self.host = host
        self.port = 0
        self.connections_accepted = 0
        self._next_service = itertools.count()
        self._server = StreamServer((host, 0), self._handle)
        self._pairs: set = set()

    # -- lifecycle --
    def start(self) -> "LoadBalancer":
        self._server.start()
        self.port = self._server.server_port
        return self

    def stop(self) -> None:
        self._server.stop(timeout=1)
        for pair in list(self._pairs):
            pair.close()


    @property
    def open_connections(self) -> int:
        return len(self._pairs)

    def close_connections(self) -> None:
        """Drop every client connection (and its backend connection), as a load balancer restart would."""
        for pair in list(self._pairs):
            pair.close()

    # -- one client connection --
    def _handle(self, client: Any, _address: Any) -> None:
        self.connections_accepted += 1
        service_id = self.service_ids[next(self._next_service) % len(self.service_ids)]
        try:
            backend = gevent.socket.create_connection(self.backend)
        except OSError:
            client.close()
            return
        pair = _Pair(self, client, backend, service_id)
        self._pairs.add(pair)
        try:
            pair.run()
        finally:
            self._pairs.discard(pair)
            pair.close()


class _Pair:
    """A client connection and its backend connection, with the requests whose replies get rewritten."""

    def __init__(self, balancer: LoadBalancer, client: Any, backend: Any, service_id: ObjectId) -> None:
        self.balancer = balancer
        self.client = client
        self.backend = backend
        self.service_id = service_id
        #: requestId of a hello -> whether it asked with loadBalanced: true.
        self.hellos: dict[int, bool] = {}
        self.pumps: list[gevent.Greenlet] = []
        for sock in (client, backend):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def run(self) -> None:
        self.pumps = [gevent.spawn(self._pump, self.client, self.backend, self._request),
                      gevent.spawn(self._pump, self.backend, self.client, self._reply)]
        gevent.joinall(self.pumps, count=1)  # either side closing (or garbage) ends the pair

    def close(self) -> None:
        for sock in (self.client, self.backend):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        current = gevent.getcurrent()
        gevent.killall([pump for pump in self.pumps if pump is not current], block=False)

    def _pump(self, source: Any, sink: Any, transform: Any) -> None:
        try:
            while True:
                header = _recv_exactly(source, 16)
                if header is None:
                    return
                length, request_id, response_to, opcode = _HEADER.unpack(header)
                if not 16 <= length <= _MAX_MESSAGE:
                    return  # not the wire protocol: drop the pair
                body = _recv_exactly(source, length - 16)
                if body is None:
                    return
                sink.sendall(transform(header, request_id, response_to, opcode, body))
        except OSError:
            return  # a side went away: the pair ends

    # -- client -> backend: remember the hellos --
    def _request(self, header: bytes, request_id: int, _response_to: int, opcode: int, body: bytes) -> bytes:
        command = _request_command(opcode, body)
        if command is not None and next(iter(command), "").lower() in _HELLO_NAMES:
            self.hellos[request_id] = bool(command.get("loadBalanced"))
        return header + body

    # -- backend -> client: rewrite the hello replies --
    def _reply(self, header: bytes, request_id: int, response_to: int, opcode: int, body: bytes) -> bytes:
        if response_to not in self.hellos:
            return header + body
        load_balanced = self.hellos.pop(response_to)
        if opcode == _OP_MSG:
            flags = struct.unpack_from("<I", body)[0]
            if flags & _MORE_TO_COME:
                self.hellos[request_id] = load_balanced  # an exhaust hello: the next reply answers this one
            end = len(body) - 4 if flags & _CHECKSUM_PRESENT else len(body)
            if body[4] != 0:
                return header + body  # not a body section first: leave it alone
            reply = bson.decode(body[5:end])
            new_body = struct.pack("<I", flags & ~_CHECKSUM_PRESENT) + b"\x00" + bson.encode(self._rewrite(
                reply, load_balanced))
            return _HEADER.pack(16 + len(new_body), request_id, response_to, opcode) + new_body
        if opcode == _OP_REPLY:
            prefix = body[:20]  # responseFlags, cursorID, startingFrom, numberReturned
            reply = bson.decode(body[20:])
            new_body = prefix + bson.encode(self._rewrite(reply, load_balanced))
            return _HEADER.pack(16 + len(new_body), request_id, response_to, opcode) + new_body
        return header + body

    def _rewrite(self, reply: dict, load_balanced: bool) -> dict:
        reply = dict(reply)
        reply.pop("compression", None)
        topology_version = reply.get("topologyVersion")
        if isinstance(topology_version, dict):
            reply["topologyVersion"] = {**topology_version, "processId": self.service_id}
        if load_balanced and self.balancer.add_service_id and reply.get("ok"):
            reply["serviceId"] = self.service_id
        return reply


def _request_command(opcode: int, body: bytes) -> Optional[dict]:
    """The command document of an OP_MSG or OP_QUERY request (None for anything else)."""
    try:
        if opcode == _OP_MSG and body[4] == 0:
            flags = struct.unpack_from("<I", body)[0]
            end = len(body) - 4 if flags & _CHECKSUM_PRESENT else len(body)
            size = struct.unpack_from("<i", body, 5)[0]
            return bson.decode(body[5:min(5 + size, end)])
        if opcode == _OP_QUERY:
            name_end = body.index(b"\x00", 4)
            start = name_end + 1 + 8  # numberToSkip, numberToReturn
            size = struct.unpack_from("<i", body, start)[0]
            command = bson.decode(body[start:start + size])
            return command.get("$query", command) if isinstance(command.get("$query"), dict) else command
    except Exception:
        return None
    return None


def _recv_exactly(sock: Any, count: int) -> Optional[bytes]:
    chunks = []
    while count:
        chunk = sock.recv(min(count, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)


class LoadBalancerProcess(_Endpoint):
    """The same load balancer in a subprocess of its own: for a client that blocks the OS thread (PyMongo
    unpatched, the unified runner's evidence peer), which would otherwise starve an in-process proxy."""

    def __init__(self, backend: tuple[str, int], services: int = 1, *, add_service_id: bool = True,
                 host: str = "127.0.0.1") -> None:
        self.backend = backend
        self.services = services
        self.add_service_id = add_service_id
        self.host = host
        self.port = 0
        self.process: Optional[subprocess.Popen] = None

    def start(self, timeout: float = 30.0) -> "LoadBalancerProcess":
        backend = f"{self.backend[0]}:{self.backend[1]}"
        args = [sys.executable, "-m", "tests.servers.load_balancer", "--backend", backend,
                "--services", str(self.services), "--host", self.host]
        if not self.add_service_id:
            args.append("--no-service-id")
        root = Path(__file__).resolve().parents[2]
        self.process = subprocess.Popen(args, cwd=root, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            ready = select.select([self.process.stdout], [], [], timeout)[0]
            line = self.process.stdout.readline().decode() if ready else ""  # type: ignore[union-attr]
            if not line.startswith("listening "):
                raise RuntimeError(f"the load balancer process did not start within {timeout}s ({line!r})")
            self.port = int(line.split()[1])
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(5)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait(5)



def main(argv: Optional[Sequence[str]] = None) -> None:
    """``python -m tests.servers.load_balancer --backend HOST:PORT [--services N]``: run until SIGTERM."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", required=True)
    parser.add_argument("--services", type=int, default=1)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--no-service-id", action="store_true")
    options = parser.parse_args(argv)
    host, _, port = options.backend.rpartition(":")
    balancer = LoadBalancer((host, int(port)), options.services, add_service_id=not options.no_service_id,
                            host=options.host).start()
    print(f"listening {balancer.port}", flush=True)
    stopped = gevent.event.Event()
    gevent.signal_handler(signal.SIGTERM, stopped.set)
    stopped.wait()
    balancer.stop()


if __name__ == "__main__":
    main()
