from __future__ import annotations

import atexit
import os

import pytest

from tests.servers.secantus import SecantusServer


@pytest.fixture(scope="session")
def server_uri() -> str:
    """A MongoDB URI for the integration tests: ``MONGODB_URI`` or a fresh SecantusDB for this session."""
    override = os.environ.get("MONGODB_URI")
    if override:
        yield override
        return
    server = SecantusServer()
    atexit.register(server.stop)  # even if pytest is killed past its teardown
    server.start()
    try:
        yield server.uri
    finally:
        server.stop()


@pytest.fixture
def fresh_server():
    """A SecantusDB of this test's own (for heavy modules, restarts or special flags)."""
    servers = []

    def start(**kwargs) -> SecantusServer:
        server = SecantusServer(**kwargs).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def recorder():
    """A tests.api_support.Recorder: every command event of the ``client`` fixture, in order."""
    from tests.api_support import Recorder

    return Recorder()


@pytest.fixture
def client(server_uri, recorder):
    """A MongoClient on the session's server whose command events go to ``recorder``; closed afterwards."""
    from greenmongo import MongoClient

    client = MongoClient(server_uri, event_listeners=[recorder])
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def internal(server_uri):
    """A plain MongoClient (no timeoutMS, no listeners) for setting fail points and preparing data."""
    from greenmongo import MongoClient

    client = MongoClient(server_uri)
    try:
        yield client
    finally:
        client.close()
