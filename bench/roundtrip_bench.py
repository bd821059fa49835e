"""Round-trip micro-benchmark: ``hello`` and a one-document insert over one connection.

A canned-reply server (its own process, answering every request with
precomputed bytes) stands in for mongod, so the figures measure the client:
building the message, the socket round trip through the gevent hub, reading
and decoding the reply. Each client runs in its own process:

* greenmongo: ``Connection.command`` on one connection from ``open_connection``
  (there is no client object yet, so no server selection or pool checkout);
* PyMongo + ``gevent.monkey.patch_all()``: the public API on a
  ``MongoClient(directConnection=True)`` - ``db.command("hello")`` and
  ``insert_one`` - which also pays for server selection, pool checkout and
  implicit sessions.

Usage: ``python bench/roundtrip_bench.py [--ops 5000] [--repeat 5]``
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_HEADER = struct.Struct("<iiii")
OP_REPLY, OP_QUERY, OP_MSG = 1, 2004, 2013


# -- the canned-reply server (subprocess) -------------------------------------------

def serve(port_file: str) -> None:
    from gevent.server import StreamServer

    sys.path.insert(0, ROOT)
    import datetime

    from greenmongo import bson

    hello = bson.encode({
        "isWritablePrimary": True, "ismaster": True, "helloOk": True, "maxBsonObjectSize": 16 * 1024 * 1024,
        "maxMessageSizeBytes": 48_000_000, "maxWriteBatchSize": 100_000,
        "localTime": datetime.datetime.now(datetime.timezone.utc), "logicalSessionTimeoutMinutes": 30,
        "connectionId": 1, "minWireVersion": 0, "maxWireVersion": 21, "readOnly": False, "ok": 1.0,
    })
    inserted = bson.encode({"n": 1, "ok": 1.0})
    ok = bson.encode({"ok": 1.0})

    def op_msg_reply(request_id: int, body: bytes) -> bytes:
        payload = b"\x00\x00\x00\x00\x00" + body
        return _HEADER.pack(16 + len(payload), 0, request_id, OP_MSG) + payload

    def op_reply(request_id: int, body: bytes) -> bytes:
        payload = struct.pack("<iqii", 0, 0, 0, 1) + body
        return _HEADER.pack(16 + len(payload), 0, request_id, OP_REPLY) + payload

    def read_exactly(sock, count: int) -> bytes:
        data = b""
        while len(data) < count:
            chunk = sock.recv(count - len(data))
            if not chunk:
                raise ConnectionError
            data += chunk
        return data

    def handle(sock, _address) -> None:
        try:
            while True:
                length, request_id, _, opcode = _HEADER.unpack(read_exactly(sock, 16))
                body = read_exactly(sock, length - 16)
                if opcode == OP_QUERY:
                    sock.sendall(op_reply(request_id, hello))
                    continue
                flags = struct.unpack_from("<I", body, 0)[0]
                name = body[10:body.index(b"\x00", 10)]  # flags, kind 0, int32 size, type byte
                if flags & 2:
                    continue  # moreToCome: no reply
                reply = hello if name in (b"hello", b"isMaster", b"ismaster") else (
                    inserted if name == b"insert" else ok)
                sock.sendall(op_msg_reply(request_id, reply))
        except (ConnectionError, OSError):
            pass
        finally:
            sock.close()

    server = StreamServer(("127.0.0.1", 0), handle)
    server.start()
    with open(port_file, "w") as handle_file:
        handle_file.write(str(server.address[1]))
    server.serve_forever()


# -- the clients (each in a subprocess) ----------------------------------------------------

def _time_ops(operation, ops: int, repeat: int) -> float:
    """Best µs/op over ``repeat`` runs of ``ops`` calls, after a warm-up."""
    for _ in range(min(ops, 1000)):
        operation()
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        for _ in range(ops):
            operation()
        best = min(best, (time.perf_counter() - started) / ops * 1e6)
    return best


def run_greenmongo(port: int, ops: int, repeat: int) -> dict:
    sys.path.insert(0, ROOT)
    from greenmongo.net.handshake import open_connection
    from greenmongo.options.connection_settings import ConnectionSettings

    conn = open_connection(("127.0.0.1", port), ConnectionSettings(socket_timeout=10))
    counter = iter(range(10**9))

    def hello() -> None:
        conn.command("admin", {"hello": 1})

    def insert() -> None:
        conn.command("bench", {"insert": "c", "ordered": True},
                     sequences={"documents": [{"_id": next(counter), "x": 1}]})

    try:
        return {"hello": _time_ops(hello, ops, repeat), "insert": _time_ops(insert, ops, repeat)}
    finally:
        conn.close()


def run_pymongo(port: int, ops: int, repeat: int) -> dict:
    from gevent import monkey

    monkey.patch_all()
    import pymongo

    client = pymongo.MongoClient("127.0.0.1", port, directConnection=True, serverSelectionTimeoutMS=5000)
    collection = client.bench.c
    counter = iter(range(10**9))

    def hello() -> None:
        client.admin.command("hello")

    def insert() -> None:
        collection.insert_one({"_id": next(counter), "x": 1})

    try:
        return {"hello": _time_ops(hello, ops, repeat), "insert": _time_ops(insert, ops, repeat),
                "version": pymongo.version}
    finally:
        client.close()


# -- the driver --------------------------------------------------------------------------

def _spawn(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, os.path.abspath(__file__), *args], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--serve", metavar="PORT_FILE", help=argparse.SUPPRESS)
    parser.add_argument("--client", choices=["greenmongo", "pymongo"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.serve:
        serve(args.serve)
        return
    if args.client:
        runner = run_greenmongo if args.client == "greenmongo" else run_pymongo
        print(json.dumps(runner(args.port, args.ops, args.repeat)))
        return

    import tempfile

    port_file = tempfile.mktemp(prefix="roundtrip-bench-port-")
    server = _spawn("--serve", port_file)
    try:
        deadline = time.monotonic() + 20
        while not (os.path.exists(port_file) and open(port_file).read().strip()):
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit("the canned-reply server did not start")
            time.sleep(0.05)
        port = open(port_file).read().strip()
        results = {}
        for client in ("greenmongo", "pymongo"):
            process = _spawn("--client", client, "--port", port, "--ops", str(args.ops),
                             "--repeat", str(args.repeat))
            output, _ = process.communicate(timeout=600)
            if process.returncode != 0:
                raise SystemExit(f"{client} benchmark failed with exit code {process.returncode}")
            results[client] = json.loads(output.strip().splitlines()[-1])
    finally:
        server.kill()
        server.wait()
        if os.path.exists(port_file):
            os.unlink(port_file)

    pymongo_label = f"pymongo {results['pymongo'].get('version', '')} + gevent"
    print(f"round trip over one connection, canned-reply server, best of {args.repeat} x {args.ops} ops")
    print(f"{'operation':<10} {'greenmongo µs/op':>18} {pymongo_label + ' µs/op':>30} {'ratio':>7}")
    for operation in ("hello", "insert"):
        ours, theirs = results["greenmongo"][operation], results["pymongo"][operation]
        print(f"{operation:<10} {ours:>18.1f} {theirs:>30.1f} {ours / theirs:>7.2f}")


if __name__ == "__main__":
    main()
