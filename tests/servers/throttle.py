"""A loopback TCP proxy that hands the server's bytes to the client in small pieces.

Over plain loopback a multi-megabyte reply usually sits whole in the kernel buffer when the client
reads it, so the reading greenlet never waits in the middle of a body and a deadline can only run out
before a reply or after it. Through this proxy every ``chunk`` bytes of a server-to-client stream is a
separate send, ``pause`` seconds apart (a slow link; 0: a turn of the hub): the client waits for the rest
of a body again and again, as over a real network::

    with ThrottleProxy(server.host, server.port, chunk=64 * 1024, pause=0.001) as proxy:
        client = MongoClient(f"mongodb://{proxy.host}:{proxy.port}/?directConnection=true")
"""

from __future__ import annotations

import socket
from typing import Any

import gevent
from gevent.server import StreamServer


class ThrottleProxy:
    """Forwards each accepted connection to ``upstream``; server-to-client bytes go ``chunk`` at a time,
    ``pause`` seconds apart."""

    def __init__(self, upstream_host: str, upstream_port: int, *, chunk: int = 64 * 1024, pause: float = 0.0,
                 host: str = "127.0.0.1") -> None:
        self.upstream = (upstream_host, upstream_port)
        self.chunk = chunk
        self.pause = pause
        self._server = StreamServer((host, 0), self._handle)
        self._pumps: set = set()
        self.host = host
        self.port = 0

    def start(self) -> "ThrottleProxy":
        self._server.start()
        self.port = self._server.server_port
        return self

    def stop(self) -> None:
        self._server.stop()
        gevent.killall(list(self._pumps))

    def __enter__(self) -> "ThrottleProxy":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _handle(self, client: Any, _address: Any) -> None:
        upstream = gevent.socket.create_connection(self.upstream)
        for sock in (client, upstream):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pumps = [gevent.spawn(self._pump, client, upstream, 1 << 20, 0.0),
                 gevent.spawn(self._pump, upstream, client, self.chunk, self.pause)]
        self._pumps.update(pumps)
        try:
            gevent.joinall(pumps, count=1)  # either side closing ends the pair
        finally:
            gevent.killall(pumps)
            self._pumps.difference_update(pumps)
            upstream.close()
            client.close()

    @staticmethod
    def _pump(source: Any, sink: Any, chunk: int, pause: float) -> None:
        try:
            while True:
                data = source.recv(chunk)
                if not data:
                    return
                sink.sendall(data)
                gevent.sleep(pause)  # the link's pace: the reader drains this piece before the next arrives
        except OSError:
            return  # the other side went away (a client closing a timed-out connection): the pair ends
