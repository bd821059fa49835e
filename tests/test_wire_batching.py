"""Write batch splitting by maxMessageSizeBytes, maxWriteBatchSize and maxBsonObjectSize."""

from __future__ import annotations

import pytest

from greenmongo import bson
from greenmongo.errors import DocumentTooLarge
from greenmongo.wire import op_msg
from greenmongo.wire.batching import WireLimits, iter_batches, op_msg_overhead, split_batches


def test_overhead_matches_a_real_message() -> None:
    body = bson.encode({"insert": "c", "$db": "test"})
    docs = [bson.encode({"_id": i}) for i in range(3)]
    message = op_msg.pack_op_msg(1, body, [("documents", docs)])
    assert op_msg_overhead(len(body), "documents") + sum(map(len, docs)) == len(message)
    checked = op_msg.pack_op_msg(1, body, [("documents", docs)], checksum=True)
    assert op_msg_overhead(len(body), "documents", checksum=True) + sum(map(len, docs)) == len(checked)


def test_split_by_count() -> None:
    limits = WireLimits(max_write_batch_size=3)
    assert list(iter_batches([10] * 7, overhead=50, limits=limits)) == [(0, 3), (3, 6), (6, 7)]


def test_split_by_message_size() -> None:
    limits = WireLimits(max_message_size=100)
    # room = 100 - 40 = 60: 25+25 fits, a third does not
    assert list(iter_batches([25, 25, 25, 25, 60], overhead=40, limits=limits)) == [(0, 2), (2, 4), (4, 5)]


def test_a_batch_bytes_cap_cuts_batches_but_lets_a_larger_document_go_alone() -> None:
    """Automatic encryption's 2 MiB (Client Side Encryption spec): the cap splits, it never refuses."""
    limits = WireLimits(max_message_size=1000)
    sizes = [30, 30, 30, 80, 10, 10]
    assert list(iter_batches(sizes, overhead=40, limits=limits, max_batch_bytes=60)) == [
        (0, 2), (2, 3), (3, 4), (4, 6)]
    assert list(iter_batches(sizes, overhead=40, limits=limits)) == [(0, 6)]


def test_message_is_never_over_the_limit() -> None:
    limits = WireLimits(max_message_size=1000, max_write_batch_size=50)
    sizes = [(i * 37) % 200 + 5 for i in range(300)]
    covered = 0
    for start, end in iter_batches(sizes, overhead=100, limits=limits):
        assert start == covered and end > start
        assert 100 + sum(sizes[start:end]) <= 1000
        assert end - start <= 50
        covered = end
    assert covered == len(sizes)


def test_document_that_cannot_fit_even_alone() -> None:
    with pytest.raises(DocumentTooLarge, match="insert command document too large"):
        list(iter_batches([10, 500], overhead=100, limits=WireLimits(max_message_size=400)))


def test_unacknowledged_checks_max_bson_size() -> None:
    limits = WireLimits(max_bson_size=100, max_message_size=10_000)
    assert list(iter_batches([150], overhead=10, limits=limits)) == [(0, 1)]  # server will report it
    with pytest.raises(DocumentTooLarge, match="update command"):
        list(iter_batches([150], overhead=10, limits=limits, acknowledged=False, operation="update"))


def test_empty_input() -> None:
    assert list(iter_batches([], overhead=10)) == []


def test_split_batches_returns_the_documents() -> None:
    docs = [b"a" * 10, b"b" * 10, b"c" * 10]
    assert split_batches(docs, overhead=0, limits=WireLimits(max_message_size=25)) == [docs[:2], docs[2:]]


def test_limits_from_hello() -> None:
    limits = WireLimits.from_hello({"maxBsonObjectSize": 1, "maxMessageSizeBytes": 2, "maxWriteBatchSize": 3})
    assert limits == WireLimits(1, 2, 3)
    assert WireLimits.from_hello({}) == WireLimits()
