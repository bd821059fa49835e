"""The client as a gevent citizen: one hub per client, fork safety, clean close, atexit."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import gevent
import gevent.socket
import pytest
from gevent import monkey

from greenmongo import MongoClient
from greenmongo.errors import InvalidOperation

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.server


def test_use_from_another_os_thread_fails_fast(server_uri: str) -> None:
    client = MongoClient(server_uri)
    try:
        client.admin.command("ping")
        # A true OS thread, patched process or not (patched threading would give us a greenlet).
        start_new_thread = monkey.get_original("_thread", "start_new_thread")
        read, write = os.pipe()

        def other_thread() -> None:
            try:
                client.admin.command("ping")
                result = "no error"
            except InvalidOperation as exc:
                result = str(exc)
            except BaseException as exc:  # noqa: BLE001 - anything else is the failure we look for
                result = repr(exc)
            os.write(write, result.encode())
            os.close(write)

        start_new_thread(other_thread, ())
        chunks = []
        with gevent.Timeout(10, AssertionError("use from another thread hung")):
            while True:
                gevent.socket.wait_read(read)
                chunk = os.read(read, 4096)
                if not chunk:
                    break
                chunks.append(chunk)
        os.close(read)
        outcome = b"".join(chunks).decode()
        assert "another OS thread" in outcome, outcome
        assert client.admin.command("ping")["ok"] == 1  # still fine on its own thread
    finally:
        client.close()


def test_fork_child_gets_fresh_connections_and_parent_is_unaffected(server_uri: str) -> None:
    client = MongoClient(server_uri)
    try:
        collection = client.citizenship.fork
        collection.drop()
        collection.insert_one({"who": "parent-before"})
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report, then leave without running pytest's teardown
            code = 1
            try:
                os.close(read)
                collection.insert_one({"who": "child"})
                count = collection.count_documents({})
                os.write(write, f"{count}".encode())
                code = 0
            except BaseException as exc:  # noqa: BLE001
                os.write(write, f"error {exc!r}".encode())
            finally:
                os._exit(code)
        os.close(write)
        with gevent.Timeout(30):
            chunks = []
            while True:
                gevent.socket.wait_read(read)
                chunk = os.read(read, 1024)
                if not chunk:
                    break
                chunks.append(chunk)
        os.close(read)
        _, status = os.waitpid(pid, 0)
        report = b"".join(chunks).decode()
        assert os.WEXITSTATUS(status) == 0, report
        assert report == "2", report
        collection.insert_one({"who": "parent-after"})
        assert sorted(doc["who"] for doc in collection.find({}, {"_id": 0})) == \
            ["child", "parent-after", "parent-before"]
    finally:
        client.close()


def test_close_stops_every_greenlet_and_an_unclosed_client_does_not_pin_the_hub(server_uri: str) -> None:
    script = textwrap.dedent(f"""
        import gevent, sys
        sys.path.insert(0, {str(ROOT)!r})
        from greenmongo import MongoClient
        closed = MongoClient({server_uri!r})
        closed.admin.command("ping")
        closed.close()
        leaked = MongoClient({server_uri!r})
        leaked.admin.command("ping")
        with gevent.Timeout(5, False, ref=False):  # an unreferenced guard: it must not pin the loop itself
            gevent.get_hub().join()  # returns only if nothing keeps the loop alive
            print("hub-joined")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "hub-joined" in proc.stdout, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
