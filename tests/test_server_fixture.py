"""The SecantusDB fixture: it starts, answers hello over a plain socket, and is gone after stop()."""

from __future__ import annotations

import os
import socket

import pytest

from tests.servers.secantus import SecantusServer, raw_command


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
