"""examples/gunicorn_app under gunicorn -k gevent with 2 workers and --preload: every write lands once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from gevent import socket as gsocket
from gevent.pool import Pool

from greenmongo import MongoClient
from tests.servers.secantus import free_port
from tests.waits import wait_until

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.server, pytest.mark.slow, pytest.mark.one_pass]  # gunicorn's worker patches itself
WRITES = 1000
READS = 1000


def _http(port: int, method: str, path: str) -> tuple[int, bytes]:
    """One HTTP/1.0 request over a gevent socket (cooperative whether or not we are patched)."""
    with gsocket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(f"{method} {path} HTTP/1.0\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n".encode())
        chunks = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    response = b"".join(chunks)
    status = int(response.split(b" ", 2)[1])
    return status, response.split(b"\r\n\r\n", 1)[1]


@pytest.fixture
def gunicorn(server_uri: str):
    port = free_port()
    gunicorn_bin = Path(sys.executable).parent / "gunicorn"
    env = dict(os.environ, MONGODB_URI=server_uri, APP_DB="gunicorn_app_test", PYTHONPATH=str(ROOT))
    env.pop("GREENMONGO_TEST_PATCHED", None)  # gunicorn's gevent worker patches on its own
    process = subprocess.Popen(
        [str(gunicorn_bin), "-k", "gevent", "-w", "2", "--preload", "-b", f"127.0.0.1:{port}",
         "--worker-connections", "200", "examples.gunicorn_app.app:app"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    def healthy() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"gunicorn exited: {process.stdout.read().decode(errors='replace')}")
        try:
            return _http(port, "GET", "/health")[0] == 200
        except OSError:
            return False

    try:
        wait_until(healthy, 30, "gunicorn answering /health", error=RuntimeError, interval=0.1)
        yield port
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def test_two_thousand_requests_every_write_lands_once(server_uri: str, gunicorn: int) -> None:
    client = MongoClient(server_uri)
    log = client.gunicorn_app_test.requests
    log.drop()
    pool = Pool(50)
    statuses = []

    def write(i: int) -> None:
        statuses.append(_http(gunicorn, "POST", f"/write/k{i}")[0])

    def read(i: int) -> None:
        statuses.append(_http(gunicorn, "GET", f"/read/k{i}")[0])

    started = time.monotonic()
    for i in range(WRITES):
        pool.spawn(write, i)
    pool.join(raise_error=True)
    for i in range(READS):
        pool.spawn(read, i)
    pool.join(raise_error=True)
    elapsed = time.monotonic() - started
    try:
        assert statuses.count(200) == WRITES + READS, sorted(set(statuses))
        keys = [doc["key"] for doc in log.find({}, {"key": 1})]
        assert len(keys) == WRITES and len(set(keys)) == WRITES  # each write landed exactly once
        pids = {doc["pid"] for doc in log.find({}, {"pid": 1})}
        assert len(pids) >= 1
        print(f"gunicorn: {WRITES + READS} requests in {elapsed:.2f}s ({(WRITES + READS) / elapsed:.0f}/s), "
              f"workers used: {len(pids)}")
    finally:
        log.drop()
        client.close()
