"""The SecantusDB fixture: it starts, answers hello over a plain socket, and is gone after stop()."""

from __future__ import annotations

import os
import socket

import pytest

from tests.servers.secantus import SecantusServer, listens, raw_command


def _address(uri: str) -> tuple[str, int]:
    hostport = uri.split("://", 1)[1].split("/", 1)[0].split(",")[0].rsplit("@", 1)[-1]
    host, port = hostport.rsplit(":", 1)
    return host, int(port)


@pytest.mark.server
def test_session_server_answers_hello(server_uri: str) -> None:
    reply = raw_command(*_address(server_uri), {"hello": 1, "$db": "admin"})
    assert reply["ok"] == 1
    assert reply["isWritablePrimary"] is True
    if not os.environ.get("MONGODB_URI"):
        assert reply["setName"] == "secantus"
        assert reply["maxWireVersion"] >= 17


@pytest.mark.server
def test_fresh_server_stops_for_good() -> None:
    server = SecantusServer().start()
    try:
        assert raw_command(*server.address, {"ping": 1, "$db": "admin"})["ok"] == 1
        pid = server.process.pid
    finally:
        server.stop()
    assert server.process is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(OSError):
        socket.create_connection(server.address, timeout=1).close()


def test_listens_tells_our_listener_from_another_process() -> None:
    with socket.socket() as mine:
        mine.bind(("127.0.0.1", 0))
        mine.listen()
        port = mine.getsockname()[1]
        if listens(os.getpid(), port) is None:
            pytest.skip("no /proc here: listens() cannot tell")
        assert listens(os.getpid(), port) is True
        assert listens(os.getppid(), port) is False
    assert listens(os.getpid(), port) is False


@pytest.mark.server
def test_server_on_a_port_another_process_took_moves_to_a_free_one() -> None:
    # The window a CI failure may have fallen into: free_port() handed out a port that a server of another pass
    # then held. A connect succeeds there, but it reaches the other server; ours must move instead.
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        server = SecantusServer()
        server._move_to(taken)
        try:
            server.start()
            assert server.port != taken
            assert listens(server.process.pid, server.port) in (True, None)
            assert raw_command(*server.address, {"ping": 1, "$db": "admin"})["ok"] == 1
        finally:
            server.stop()
