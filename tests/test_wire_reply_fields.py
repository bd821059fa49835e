"""Typed reply-field reads (greenmongo/wire/reply_fields.py): any Mapping is a document, nothing else is."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from greenmongo import bson
from greenmongo.bson.raw_bson import RawBSONDocument
from greenmongo.bson.int64 import Int64
from greenmongo.bson.son import SON
from greenmongo.bson.timestamp import Timestamp
from greenmongo.errors import ProtocolError
from greenmongo.wire import reply_fields


class _ReadOnlyMapping(Mapping):
    """A Mapping that is not a dict: what a custom document_class may decode to."""

    def __init__(self, **items: Any) -> None:
        self._items = items

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


MAPPINGS = [{"a": 1}, SON([("a", 1)]), RawBSONDocument(bson.encode({"a": 1})), _ReadOnlyMapping(a=1)]


@pytest.mark.parametrize("value", MAPPINGS, ids=lambda value: type(value).__name__)
def test_any_mapping_is_a_document_field_and_a_batch_element(value: Any) -> None:
    assert reply_fields.document({"cursor": value}, "cursor") is value
    assert reply_fields.documents({"firstBatch": [value, value]}, "firstBatch") == [value, value]


@pytest.mark.parametrize("value", [[("a", 1)], "a", 1, b"a"], ids=lambda value: type(value).__name__)
def test_a_non_mapping_is_a_protocol_error_naming_the_field(value: Any) -> None:
    with pytest.raises(ProtocolError, match=r"cursor\.x is a .*, expected a document"):
        reply_fields.document({"x": value}, "x", where="cursor")
    with pytest.raises(ProtocolError, match=r"firstBatch\[1\] is a .*, expected a document"):
        reply_fields.documents({"firstBatch": [{}, value]}, "firstBatch")


class _Str(str):
    pass


# Each getter answers the exact type it expects without the general path; these hold the rest to it:
# subclasses are still accepted, bool is not an integer, None is absent, a missing field is an error.
@pytest.mark.parametrize("getter, good, bad", [
    (reply_fields.integer, [0, 7, Int64(5), 3.0], [True, "1", 1.5, {}]),
    (reply_fields.string, ["db.c", _Str("x")], [1, b"x", []]),
    (reply_fields.array, [[], [1], ], [(1,), {}, "ab"]),
    (reply_fields.document, [{}, SON()], [[], "a"]),
], ids=lambda value: getattr(value, "__name__", ""))
def test_getters_accept_their_type_and_subclasses_and_refuse_the_rest(getter: Any, good: list, bad: list) -> None:
    for value in good:
        assert getter({"f": value}, "f") == value
    for value in bad:
        with pytest.raises(ProtocolError, match=r"w\.f is a "):
            getter({"f": value}, "f", where="w")
    with pytest.raises(ProtocolError, match=r"w\.f is missing"):
        getter({}, "f", where="w")
    assert getter({"f": None}, "f", default="d") == "d"
    assert getter({}, "f", default="d") == "d"


def test_gossip_checks_cluster_time_of_any_mapping() -> None:
    reply_fields.check_gossip({"$clusterTime": {"clusterTime": Timestamp(1, 1)}})
    reply_fields.check_gossip({"$clusterTime": SON([("clusterTime", Timestamp(1, 1))])})
    for cluster_time in ({"clusterTime": 1}, SON([("clusterTime", "x")]), [1]):
        with pytest.raises(ProtocolError, match=r"\$clusterTime"):
            reply_fields.check_gossip({"$clusterTime": cluster_time})
