"""Wire compression end to end against the scripted server, for each compressor."""

from __future__ import annotations

import pytest

from greenmongo.net.handshake import open_connection
from greenmongo.options.connection_settings import ConnectionSettings
from greenmongo.wire.compression import COMPRESSOR_IDS
from tests.servers.scripted import Reply, ScriptedServer

BIG = {"text": "compress me " * 200}


def connect(server, compressors, **settings):
    return open_connection(server.address, ConnectionSettings(compressors=tuple(compressors), socket_timeout=2,
                                                              **settings))


@pytest.mark.parametrize("name", ["snappy", "zlib", "zstd"])
def test_each_compressor(name: str) -> None:
    with ScriptedServer(compressors=(name,)) as server:
        server.on("find", lambda request: Reply({"ok": 1, "echo": request.command["filter"]}))
        with connect(server, [name]) as conn:
            assert conn.compression == name
            assert conn.command("db", {"find": "c", "filter": BIG}) == {"ok": 1, "echo": BIG}
            conn.command("db", {"insert": "c"}, sequences={"documents": [BIG]}, unacknowledged=True)
            assert conn.command("db", {"ping": 1}) == {"ok": 1.0}
        hello, find, insert, ping = server.requests
        assert hello.compressor_id is None  # the handshake is never compressed...
        assert hello.command["compression"] == [name]
        for request in (find, insert, ping):  # ...everything after it is
            assert request.compressor_id == COMPRESSOR_IDS[name]
        assert insert.sequences["documents"] == [BIG]


def test_client_order_decides() -> None:
    with ScriptedServer(compressors=("zlib", "snappy", "zstd")) as server:
        with connect(server, ["zstd", "zlib"]) as conn:
            assert conn.compression == "zstd"
            conn.command("db", {"ping": 1})
        assert server.requests[-1].compressor_id == COMPRESSOR_IDS["zstd"]


def test_no_common_compressor_is_not_an_error() -> None:
    with ScriptedServer(compressors=("snappy",)) as server:
        with connect(server, ["zlib"]) as conn:
            assert conn.compression is None
            conn.command("db", {"ping": 1})
        assert server.requests[-1].compressor_id is None


def test_replies_in_any_compressor_or_none_are_read() -> None:
    with ScriptedServer(compressors=("zlib",)) as server:
        server.script("find", Reply({"ok": 1, "via": "snappy"}, compressor="snappy"),
                      Reply({"ok": 1, "via": "none"}, compressor="none"),
                      Reply({"ok": 1, "via": "zstd"}, compressor="zstd"))
        with connect(server, ["zlib"]) as conn:
            assert [conn.command("db", {"find": "c"})["via"] for _ in range(3)] == ["snappy", "none", "zstd"]


def test_auth_commands_are_not_compressed() -> None:
    with ScriptedServer(compressors=("zlib",)) as server:
        server.on("saslStart", {"ok": 1, "done": True})
        server.on("createUser", {"ok": 1})
        with connect(server, ["zlib"], zlib_compression_level=9) as conn:
            conn.command("admin", {"saslStart": 1, "mechanism": "PLAIN", "payload": b"x"})
            conn.command("admin", {"createUser": "u", "pwd": "p", "roles": []})
            conn.command("admin", {"hello": 1})
            conn.command("admin", {"ping": 1})
        compressed = {request.name: request.compressor_id for request in server.requests[1:]}
        assert compressed == {"saslStart": None, "createUser": None, "hello": None, "ping": COMPRESSOR_IDS["zlib"]}


def test_compressed_hello_reply_is_read() -> None:
    # The server may compress even its reply to the handshake that negotiated compression.
    with ScriptedServer(compressors=("snappy",)) as server:
        with connect(server, ["snappy"]) as conn:
            assert conn.compression == "snappy" and conn.hello["ok"] == 1.0


@pytest.mark.parametrize("name", ["snappy", "zlib", "zstd"])
def test_checksummed_replies_inside_op_compressed(name: str) -> None:
    # The CRC-32C covers the uncompressed OP_MSG (header included): it must verify after decompression.
    with ScriptedServer(compressors=(name,)) as server:
        server.script("find", Reply({"ok": 1, "sum": "checked"}, checksum=True))
        with connect(server, [name], send_checksums=True) as conn:
            assert conn.command("db", {"find": "c"}) == {"ok": 1, "sum": "checked"}
        assert server.commands("find")[0].compressor_id == COMPRESSOR_IDS[name]
