"""The WireInfo an operation is built for is its connection's, whatever the executor remembers between them."""

from __future__ import annotations

from types import SimpleNamespace

from greenmongo.bson.int64 import Int64
from greenmongo.engine import executor
from greenmongo.operations.base import WireInfo


def _conn(wire: int = 21, bson_size: int = 16 * 1024 * 1024, address: object = ("a", 1)) -> SimpleNamespace:
    return SimpleNamespace(max_wire_version=wire, max_bson_size=bson_size, max_message_size=48_000_000,
                           max_write_batch_size=100_000, address=address)


def test_each_connection_gets_its_own_limits() -> None:
    cases = [_conn(), _conn(wire=8), _conn(bson_size=1024), _conn(address=("b", 2)), _conn(wire=Int64(17)),
             SimpleNamespace(max_wire_version=21, max_bson_size=5, max_message_size=6, max_write_batch_size=7)]
    for _ in range(2):  # the second round is answered from what the first remembered
        for conn in cases:
            wire = executor._connection_wire_info(conn)
            assert wire == WireInfo.from_connection(conn)
            assert type(wire.max_wire_version) is int


def test_the_memory_is_bounded() -> None:
    for port in range(executor._WIRE_INFOS_MAX * 2):
        assert executor._connection_wire_info(_conn(address=("h", port))).address == ("h", port)
    assert len(executor._WIRE_INFOS) <= executor._WIRE_INFOS_MAX
