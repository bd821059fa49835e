"""The fault-injecting proxy (tests/servers/faults.py) does what it says: its decisions are a pure function
of the seed and the request, and each fault, through a real SecantusDB, does to the bytes and to the server
what its name promises. Raw gevent sockets on the client side: no driver logic in the way."""

from __future__ import annotations

import struct
import time
from collections import Counter
from typing import Optional

import gevent
import pytest
from gevent import socket

from greenmongo import MongoClient, bson
from tests.servers.faults import HEADER, MESSAGE_FAULTS, FaultPlan, FaultProxy, command_fields, decide
from tests.waits import assert_stays, wait_until

pytestmark = pytest.mark.server

OP_MSG = 2013


def op_msg(command: dict, request_id: int = 7, sequence: Optional[tuple] = None) -> bytes:
    body = b"\x00\x00\x00\x00" + b"\x00" + bson.encode(command)
    if sequence is not None:
        name, documents = sequence
        payload = name.encode() + b"\x00" + b"".join(bson.encode(doc) for doc in documents)
        body += b"\x01" + struct.pack("<i", 4 + len(payload)) + payload
    return HEADER.pack(16 + len(body), request_id, 0, OP_MSG) + body


def read_all(sock: socket.socket, timeout: float = 5.0) -> bytes:
    """Every byte until the peer closes (or resets) the connection."""
    sock.settimeout(timeout)
    data = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return data
            data += chunk
    except ConnectionResetError:
        return data


def read_reply(sock: socket.socket, timeout: float = 5.0) -> dict:
    sock.settimeout(timeout)
    data = b""
    while len(data) < 16 or len(data) < HEADER.unpack_from(data)[0]:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed after {len(data)} bytes"
        data += chunk
    return bson.decode(data[21:])


@pytest.fixture
def upstream(server_uri):
    host, port = server_uri.split("//", 1)[1].split("/", 1)[0].split(",")[0].rsplit(":", 1)
    return host, int(port)


@pytest.fixture
def direct(server_uri):
    client = MongoClient(server_uri)
    client.fault_proxy.docs.drop()
    yield client.fault_proxy.docs
    client.close()


def connect(proxy: FaultProxy) -> socket.socket:
    return socket.create_connection((proxy.host, proxy.port), timeout=5)


def insert(_id: str, comment: Optional[str] = None) -> bytes:
    command = {"insert": "docs", "$db": "fault_proxy"}
    if comment is not None:
        command["comment"] = comment
    return op_msg(command, sequence=("documents", [{"_id": _id}]))


# -- the decisions (pure) -----------------------------------------------------------------------------------

def test_command_fields_reads_the_name_and_comment_past_document_sequences() -> None:
    message = op_msg({"insert": "docs", "comment": "fw-3.1", "$db": "x"}, sequence=("documents", [{"a": 1}]))
    assert command_fields(message) == ("insert", "fw-3.1")
    assert command_fields(op_msg({"ping": 1, "$db": "admin"})) == ("ping", None)
    assert command_fields(op_msg({"find": "c", "comment": {"not": "a string"}, "$db": "x"})) == ("find", None)


def test_decisions_are_a_function_of_the_seed_and_the_key() -> None:
    plan = FaultPlan(seed=3, reset_request=0.02, reset_reply=0.02, truncate_reply=0.02, stall=0.02, delay=0.02)
    keys = [f"fw-{n}/find/0" for n in range(20000)]
    first = [decide(plan, key) for key in keys]
    assert first == [decide(plan, key) for key in keys]
    assert first != [decide(FaultPlan(**{**plan.__dict__, "seed": 4}), key) for key in keys]
    kinds = Counter(fault.kind for fault in first if fault is not None)
    assert set(kinds) == set(MESSAGE_FAULTS)
    for kind in MESSAGE_FAULTS:  # 2% each: 400 expected of 20000
        assert 300 < kinds[kind] < 500, kinds
    scaled = Counter(decide(plan, key, 0.25) is not None for key in keys)[True]
    assert 350 < scaled < 650, scaled  # a quarter of the 10%


# -- each fault, through a real server ----------------------------------------------------------------------

def test_faults_off_pass_everything_through(upstream) -> None:
    plan = FaultPlan(seed=1, reset_request=1.0, blackhole=1.0)
    with FaultProxy(*upstream, plan, enabled=False) as proxy, connect(proxy) as sock:
        sock.sendall(op_msg({"ping": 1, "$db": "admin"}))
        assert read_reply(sock)["ok"] == 1
    assert not proxy.log


def test_reset_request_reaches_the_server_in_part_only(upstream, direct) -> None:
    plan = FaultPlan(seed=1, reset_request=1.0)
    with FaultProxy(*upstream, plan) as proxy, connect(proxy) as sock:
        sock.sendall(insert("cut", comment="fw-1"))
        assert read_all(sock) == b""  # reset: nothing back
    assert [(record.kind, record.key) for record in proxy.log] == [("reset-request", "fw-1/insert/0")]
    assert direct.find_one({"_id": "cut"}) is None  # the server never ran a request it did not receive whole


@pytest.mark.parametrize("kind", ["reset-reply", "truncate-reply"])
def test_a_cut_reply_comes_after_the_server_ran_the_request(upstream, direct, kind) -> None:
    with FaultProxy(*upstream, FaultPlan(seed=1)) as proxy, connect(proxy) as sock:
        proxy.force(kind, command="insert", cut=0.5)
        sock.sendall(insert(kind))
        data = read_all(sock)
    assert direct.find_one({"_id": kind}) == {"_id": kind}
    length = int(proxy.log[0].detail.split(" of ")[1].split()[0])
    assert len(data) == length // 2 < length  # half of the reply, then the end of the connection
    assert [record.kind for record in proxy.log] == [kind]


def test_a_stall_holds_the_reply_then_resumes_or_closes(upstream) -> None:
    with FaultProxy(*upstream, FaultPlan(seed=1)) as proxy:
        with connect(proxy) as sock:
            proxy.force("stall", command="ping", cut=0.3, seconds=0.4, close=False)
            started = time.monotonic()
            sock.sendall(op_msg({"ping": 1, "$db": "admin"}))
            assert read_reply(sock)["ok"] == 1
            assert time.monotonic() - started >= 0.4
        with connect(proxy) as sock:
            proxy.force("stall", command="ping", cut=0.0, seconds=0.4, close=True)
            started = time.monotonic()
            sock.sendall(op_msg({"ping": 1, "$db": "admin"}))
            assert read_all(sock) == b""
            assert time.monotonic() - started >= 0.4
    assert [record.kind for record in proxy.log] == ["stall", "stall"]


def test_switching_faults_off_ends_a_stall_at_once(upstream) -> None:
    plan = FaultPlan(seed=1, stall=1.0, stall_seconds=(30.0, 30.0), stall_close=0.0)
    with FaultProxy(*upstream, plan) as proxy, connect(proxy) as sock:
        sock.sendall(op_msg({"ping": 1, "comment": "fw-stall", "$db": "admin"}))
        wait_until(lambda: proxy.log, message="the stall")
        gevent.spawn_later(0.1, proxy.disable)
        started = time.monotonic()
        assert read_reply(sock)["ok"] == 1
        assert time.monotonic() - started < 5  # not the stall's 30 s
        sock.sendall(op_msg({"ping": 1, "comment": "fw-stall", "$db": "admin"}))
        assert read_reply(sock)["ok"] == 1  # faults off: no stall for the next one


def test_a_delay_holds_the_reply_a_little(upstream) -> None:
    plan = FaultPlan(seed=1, delay=1.0, delay_seconds=(0.2, 0.2))
    with FaultProxy(*upstream, plan) as proxy, connect(proxy) as sock:
        started = time.monotonic()
        sock.sendall(op_msg({"ping": 1, "comment": "fw-delay", "$db": "admin"}))
        assert read_reply(sock)["ok"] == 1
        assert time.monotonic() - started >= 0.2
    assert [record.kind for record in proxy.log] == ["delay"]


def test_connections_are_refused_during_a_window_only(upstream) -> None:
    plan = FaultPlan(seed=1, refuse_windows=((0.0, 60.0),))
    with FaultProxy(*upstream, plan) as proxy:
        with connect(proxy) as sock:
            sock.sendall(op_msg({"ping": 1, "$db": "admin"}))
            assert read_all(sock) == b""
        proxy.disable()
        with connect(proxy) as sock:
            sock.sendall(op_msg({"ping": 1, "$db": "admin"}))
            assert read_reply(sock)["ok"] == 1
    assert [record.kind for record in proxy.log] == ["refused"]


def test_a_blackhole_never_answers(upstream) -> None:
    with FaultProxy(*upstream, FaultPlan(seed=1, blackhole=1.0)) as proxy, connect(proxy) as sock:
        sock.sendall(op_msg({"ping": 1, "$db": "admin"}))
        sock.settimeout(0)
        # 0.5 s: a ping through a healthy proxy answers within milliseconds.
        assert_stays(lambda: _nothing_to_read(sock), 0.5, "silence")
        assert proxy.links == 1
    assert [record.kind for record in proxy.log] == ["blackhole"]
    assert proxy.links == 0


def _nothing_to_read(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) is None  # any byte (or the end of the stream) breaks the silence
    except BlockingIOError:
        return True
