"""Connection against the scripted server: replies, errors, malformed bytes, moreToCome, exhaust."""

from __future__ import annotations

from types import SimpleNamespace

import gevent
import gevent.event
import pytest

from greenmongo.errors import (
    AutoReconnect,
    ConfigurationError,
    DuplicateKeyError,
    InvalidOperation,
    NetworkTimeout,
    OperationFailure,
    ProtocolError,
)
from greenmongo.net.handshake import open_connection
from greenmongo.options.connection_settings import ConnectionSettings
from greenmongo.wire import op_msg
from greenmongo.wire.header import OP_MSG, OP_QUERY
from tests.servers.scripted import (
    Close,
    Malformed,
    NoReply,
    Reply,
    ScriptedServer,
    Stream,
    default_hello,
)
from tests.waits import wait_until


@pytest.fixture
def server():
    with ScriptedServer() as scripted:
        yield scripted


def connect(server: ScriptedServer, **settings) -> "Connection":  # noqa: F821
    settings.setdefault("connect_timeout", 2.0)
    settings.setdefault("socket_timeout", 2.0)
    return open_connection(server.address, ConnectionSettings(**settings))


def test_legacy_handshake_then_op_msg(server) -> None:
    conn = connect(server, appname="scripted")
    try:
        assert conn.supports_op_msg and conn.hello_ok
        assert conn.max_wire_version == 21 and conn.max_message_size == 48_000_000
        assert conn.max_bson_size == 16 * 1024 * 1024 and conn.max_write_batch_size == 100_000
        assert conn.compression is None and conn.service_id is None
        assert conn.command("admin", {"ping": 1}) == {"ok": 1.0}
    finally:
        conn.close()
    hello, ping = server.requests
    assert hello.opcode == OP_QUERY and hello.name == "isMaster" and hello.command["helloOk"] is True
    assert hello.db == "admin"
    assert hello.command["client"]["application"] == {"name": "scripted"}
    assert hello.command["client"]["driver"]["name"] == "greenmongo"
    assert ping.opcode == OP_MSG and ping.command == {"ping": 1, "$db": "admin"}
    assert conn.closed


def test_old_server_keeps_op_query(server) -> None:
    server.hello_reply = default_hello(maxWireVersion=5)
    with connect(server) as conn:
        assert not conn.supports_op_msg
        assert conn.command("admin", {"ping": 1}) == {"ok": 1.0}
    assert server.requests[-1].opcode == OP_QUERY


def test_ok_zero_raises_and_keeps_the_connection(server) -> None:
    failure = {"ok": 0.0, "errmsg": "bad value", "code": 2, "codeName": "BadValue",
               "errorLabels": ["TransientTransactionError"]}
    server.script("find", Reply(failure))
    with connect(server) as conn:
        with pytest.raises(OperationFailure) as info:
            conn.command("db", {"find": "c"})
        error = info.value
        assert error.code == 2 and error.code_name == "BadValue"
        assert error.has_error_label("TransientTransactionError")
        assert error.details == failure
        assert not conn.closed
        assert conn.command("db", {"find": "c"}, check=False)["ok"] == 0  # default: CommandNotFound
        server.script("insert", Reply({"ok": 0, "code": 11000, "errmsg": "dup"}))
        with pytest.raises(DuplicateKeyError):
            conn.command("db", {"insert": "c"}, sequences={"documents": [{"_id": 1}]})


def test_insert_uses_a_document_sequence(server) -> None:
    with connect(server) as conn:
        reply = conn.command("db", {"insert": "c"}, sequences={"documents": [{"_id": 1}, {"_id": 2}]})
    assert reply == {"n": 2, "ok": 1.0}
    insert = server.commands("insert")[0]
    assert insert.sequences == {"documents": [{"_id": 1}, {"_id": 2}]}
    assert "documents" not in insert.command


MALFORMED = [
    ("length_lie_then_close", Malformed.length_lie(close_after=True), AutoReconnect, "mid-message"),
    ("truncated_body", Malformed.truncated_body(), AutoReconnect, "mid-message"),
    ("wrong_response_to", Malformed.wrong_response_to(), ProtocolError, "responseTo"),
    ("garbage_opcode", Malformed.garbage_opcode(), ProtocolError, "unexpected opcode 4242"),
    ("oversized", Malformed.oversized(), ProtocolError, "larger than the maximum message size"),
    ("short_length", Malformed.short_length(), ProtocolError, "shorter than a header"),
    ("garbage_bson", Malformed.garbage_bson(), ProtocolError, "not valid BSON"),
    ("unknown_section_kind", Malformed.unknown_section_kind(), ProtocolError, "unknown section kind"),
    ("bad_checksum", Malformed.bad_checksum(), ProtocolError, "checksum mismatch"),
    ("close_instead_of_reply", Close(), AutoReconnect, "closed by the server"),
]


@pytest.mark.parametrize("action, error, match", [case[1:] for case in MALFORMED],
                         ids=[case[0] for case in MALFORMED])
def test_malformed_replies_close_only_that_connection(server, action, error, match) -> None:
    victim = connect(server)
    bystander = connect(server)
    try:
        server.script("find", action)
        with pytest.raises(error, match=match) as info:
            victim.command("db", {"find": "c"})
        assert "127.0.0.1:" in str(info.value)  # the message names the server
        assert victim.closed
        with pytest.raises(AutoReconnect, match="is closed"):
            victim.command("db", {"ping": 1})
        assert bystander.command("db", {"ping": 1}) == {"ok": 1.0}
        assert not bystander.closed
    finally:
        victim.close()
        bystander.close()


def test_length_lie_with_the_socket_held_open_times_out(server) -> None:
    server.script("find", Malformed.length_lie(close_after=False, hold=2.0))
    with connect(server, socket_timeout=0.2) as conn:
        with pytest.raises(NetworkTimeout, match="timed out"):
            conn.command("db", {"find": "c"})
        assert conn.closed


def test_socket_timeout_and_per_call_timeout(server) -> None:
    server.script("find", NoReply(), Reply({"ok": 1}, delay=0.3))
    with connect(server, socket_timeout=0.2) as conn:
        with pytest.raises(NetworkTimeout) as info:
            conn.command("db", {"find": "c"})
        assert info.value.timeout
        assert conn.closed
    with connect(server, socket_timeout=0.1) as conn:
        assert conn.command("db", {"find": "c"}, timeout=2.0) == {"ok": 1}


def test_unacknowledged_write_sets_more_to_come_and_reads_nothing(server) -> None:
    with connect(server) as conn:
        assert conn.command("db", {"insert": "c", "writeConcern": {"w": 0}},
                            sequences={"documents": [{"x": 1}]}, unacknowledged=True) is None
        # The server sent nothing back; the next round trip must pair up correctly.
        assert conn.command("db", {"ping": 1}) == {"ok": 1.0}
    insert = server.commands("insert")[0]
    assert insert.more_to_come and insert.flags & op_msg.FLAG_MORE_TO_COME


def test_exhaust_stream(server) -> None:
    server.script("getMore", Stream([{"n": 1, "ok": 1}, {"n": 2, "ok": 1}, {"n": 3, "ok": 1}]))
    with connect(server) as conn:
        first = conn.command("db", {"getMore": 1, "collection": "c"}, exhaust_allowed=True)
        assert first["n"] == 1 and conn.more_to_come
        with pytest.raises(InvalidOperation):
            conn.command("db", {"ping": 1})
        assert conn.receive_more()["n"] == 2 and conn.more_to_come
        assert conn.receive_more()["n"] == 3 and not conn.more_to_come
        with pytest.raises(InvalidOperation):
            conn.receive_more()
        assert conn.command("db", {"ping": 1}) == {"ok": 1.0}
    assert server.commands("getMore")[0].exhaust_allowed


def test_gevent_timeout_mid_reply_closes_the_connection(server) -> None:
    server.script("find", Reply({"ok": 1}, delay=1.0))
    with connect(server) as conn, connect(server) as other:
        with pytest.raises(gevent.Timeout):
            with gevent.Timeout(0.1):
                conn.command("db", {"find": "c"})
        assert conn.closed and "Timeout" in conn.close_reason
        assert other.command("db", {"ping": 1}) == {"ok": 1.0}


def test_killed_greenlet_closes_the_connection(server) -> None:
    server.script("find", Reply({"ok": 1}, delay=1.0))
    with connect(server) as conn:
        worker = gevent.spawn(conn.command, "db", {"find": "c"})
        wait_until(lambda: server.commands("find"), message="the find received")  # the worker awaits the reply
        worker.kill()
        assert conn.closed


def test_concurrent_use_is_refused(server) -> None:
    answer = gevent.event.Event()  # the find's reply waits for it: the connection stays in use until then

    def held_find(request):
        answer.wait(5)
        return {"ok": 1}

    server.on("find", held_find)
    with connect(server) as conn:
        first = gevent.spawn(conn.command, "db", {"find": "c"})
        wait_until(lambda: server.commands("find"), message="the find received")
        with pytest.raises(InvalidOperation, match="already in use"):
            conn.command("db", {"ping": 1})
        answer.set()
        assert first.get(timeout=2) == {"ok": 1}
        assert not conn.closed


def test_checksums_both_ways(server) -> None:
    server.script("find", Reply({"ok": 1, "checked": True}, checksum=True))
    with connect(server, send_checksums=True) as conn:
        assert conn.command("db", {"find": "c"}) == {"ok": 1, "checked": True}
    find = server.commands("find")[0]
    assert find.flags & op_msg.FLAG_CHECKSUM_PRESENT


def test_server_api_uses_op_msg_hello_and_tags_every_command(server) -> None:
    api = SimpleNamespace(version="1", strict=False, deprecation_errors=True)
    with connect(server, server_api=api) as conn:
        conn.command("db", {"ping": 1})
    hello, ping = server.requests
    assert hello.opcode == OP_MSG and hello.name == "hello"
    assert hello.command["apiVersion"] == "1" and hello.command["apiStrict"] is False
    assert ping.command["apiVersion"] == "1" and ping.command["apiDeprecationErrors"] is True


def test_load_balanced_service_id() -> None:
    from greenmongo import bson

    service_id = bson.ObjectId()
    with ScriptedServer(service_id=service_id) as server:
        with connect(server, load_balanced=True) as conn:
            assert conn.service_id == service_id
        assert server.requests[0].command["loadBalanced"] is True
        assert server.requests[0].opcode == OP_MSG
    with ScriptedServer() as server:
        with pytest.raises(ConfigurationError, match="load balancing mode"):
            connect(server, load_balanced=True)


def test_failed_handshake_raises_and_closes(server) -> None:
    server.script("isMaster", Reply({"ok": 0, "errmsg": "go away", "code": 18}))
    with pytest.raises(OperationFailure) as info:
        connect(server)
    assert info.value.code == 18
    server.script("isMaster", Close())
    with pytest.raises(AutoReconnect):
        connect(server)


class RecordingAuthenticator:
    def __init__(self, fail: bool = False) -> None:
        self.calls = []
        self.fail = fail

    def handshake_fields(self):
        return {"saslSupportedMechs": "admin.alice", "speculativeAuthenticate": {"saslStart": 1, "db": "admin"}}

    def authenticate(self, conn, hello_reply):
        self.calls.append((conn, hello_reply))
        if self.fail:
            raise OperationFailure("Authentication failed.", 18)
        conn.command("admin", {"ping": 1})


def test_authenticator_hook(server) -> None:
    server.hello_reply = default_hello(saslSupportedMechs=["SCRAM-SHA-256"],
                                       speculativeAuthenticate={"conversationId": 1, "done": False})
    authenticator = RecordingAuthenticator()
    with open_connection(server.address, ConnectionSettings(), authenticator=authenticator) as conn:
        (seen_conn, reply), = authenticator.calls
        assert seen_conn is conn
        assert reply["speculativeAuthenticate"] == {"conversationId": 1, "done": False}
    hello = server.requests[0]
    assert hello.command["saslSupportedMechs"] == "admin.alice"
    assert hello.command["speculativeAuthenticate"] == {"saslStart": 1, "db": "admin"}
    assert server.requests[1].name == "ping" and server.requests[1].opcode == OP_MSG


def test_failed_authentication_closes(server) -> None:
    authenticator = RecordingAuthenticator(fail=True)
    with pytest.raises(OperationFailure):
        open_connection(server.address, ConnectionSettings(), authenticator=authenticator)
    conn = authenticator.calls[0][0]
    assert conn.closed


def test_unix_socket(tmp_path) -> None:
    path = str(tmp_path / "mongodb-test.sock")
    with ScriptedServer(unix_path=path) as server:
        with open_connection((path, 0), ConnectionSettings(connect_timeout=2)) as conn:
            assert conn.command("admin", {"ping": 1}) == {"ok": 1.0}
    assert server.requests[0].name == "isMaster"


def test_ids_are_unique(server) -> None:
    with connect(server) as first, connect(server) as second:
        assert first.id != second.id
    with open_connection(server.address, ConnectionSettings(), conn_id=42) as third:
        assert third.id == 42


@pytest.mark.parametrize("size", [10, 32 * 1024 - 40, 32 * 1024, 32 * 1024 + 7, 1_500_000])
def test_replies_of_every_size(server, size: int) -> None:
    server.on("find", lambda request: {"ok": 1, "blob": "z" * request.command["size"]})
    with connect(server) as conn:
        for _ in range(3):  # consecutive replies must not bleed into each other through the read buffer
            assert conn.command("db", {"find": "c", "size": size})["blob"] == "z" * size
        assert conn.command("db", {"ping": 1}) == {"ok": 1.0}


def test_message_over_max_message_size_is_refused_before_sending(server) -> None:
    server.hello_reply = default_hello(maxMessageSizeBytes=1000)
    with connect(server) as conn:
        from greenmongo.errors import DocumentTooLarge

        with pytest.raises(DocumentTooLarge):
            conn.command("db", {"insert": "c"}, sequences={"documents": [{"x": "y" * 2000}]})
        assert not conn.closed
        assert conn.command("db", {"ping": 1}) == {"ok": 1.0}
    assert not server.commands("insert")


def test_reply_over_max_message_size_is_a_protocol_error(server) -> None:
    server.hello_reply = default_hello(maxMessageSizeBytes=1000)
    server.on("find", {"ok": 1, "blob": "z" * 2000})
    with connect(server) as conn:
        with pytest.raises(ProtocolError, match="larger than the maximum message size 1000"):
            conn.command("db", {"find": "c"})
        assert conn.closed


def test_posing_as_replica_set_members_and_mongos() -> None:
    from tests.servers.scripted import mongos, replica_set_member

    hosts = ["a:1", "b:2"]
    with ScriptedServer(hello=replica_set_member("rs", hosts, "a:1", primary="a:1")) as primary, \
            ScriptedServer(hello=replica_set_member("rs", hosts, "b:2", primary="a:1")) as secondary, \
            ScriptedServer(hello=mongos()) as router:
        with connect(primary) as conn:
            assert conn.hello["setName"] == "rs" and conn.hello["ismaster"] is True
        with connect(secondary) as conn:
            assert conn.hello["secondary"] is True and conn.hello["ismaster"] is False
        with connect(router, server_api=SimpleNamespace(version="1")) as conn:
            assert conn.hello["msg"] == "isdbgrid" and conn.hello["isWritablePrimary"] is True


@pytest.mark.parametrize("size", [10, 32 * 1024 + 7, 1_500_000])
def test_raw_documents_outlive_later_replies(server, size: int) -> None:
    """Reply bodies are decoded from views of each reply's own buffer: a RawBSONDocument kept from one
    reply must not change when the next ones are read."""
    from greenmongo.bson.codec_options import CodecOptions
    from greenmongo.bson.raw_bson import RawBSONDocument

    server.on("find", lambda request: {"ok": 1, "blob": request.command["fill"] * size})
    raw = CodecOptions(document_class=RawBSONDocument)
    with connect(server) as conn:
        kept = [conn.command("db", {"find": "c", "fill": fill}, codec_options=raw) for fill in "abc"]
        assert [document["blob"] for document in kept] == [fill * size for fill in "abc"]
        assert all(type(document.raw) is bytes for document in kept)


@pytest.mark.parametrize("size", [100, 300_000])
def test_a_command_is_sent_whole_when_the_socket_buffer_is_full(size: int) -> None:
    """The first, non-waiting send may take nothing (buffer full) or part of a command: the rest still goes,
    after waiting, byte for byte."""

    from gevent import socket as gsocket

    from greenmongo.bson import decode
    from greenmongo.net.connection import Connection
    from greenmongo.wire.header import parse_header

    ours, peer = gsocket.socketpair()
    ours.setblocking(False)
    filler = 0
    while True:  # fill the kernel's buffers so that nothing more can be sent now
        try:
            filler += ours.send(b"\x00" * 65536, 0, 0.0)
        except BlockingIOError:
            break
    ours.settimeout(5)
    conn = Connection(ours, ("127.0.0.1", 27017), ConnectionSettings(socket_timeout=5))
    conn.supports_op_msg = True
    received = bytearray()

    def drain() -> None:
        while True:
            chunk = peer.recv(1 << 20)
            if not chunk:
                return
            received.extend(chunk)

    reader = gevent.spawn(drain)
    try:
        assert conn.command("db", {"insert": "c", "x": "y" * size}, unacknowledged=True) is None
        conn.close()
        ours.close()
        reader.join(timeout=5)
    finally:
        reader.kill()
        peer.close()
    message = bytes(received[filler:])
    header = parse_header(message[:16])
    assert header.length == len(message) and header.opcode == OP_MSG
    assert decode(message[21:])["x"] == "y" * size
