"""Result classes: PyMongo's attributes, and InvalidOperation for unacknowledged writes."""

from __future__ import annotations

import pytest

from greenmongo.errors import InvalidOperation
from greenmongo.operations.bulk import empty_bulk_result
from greenmongo.operations.results import (
    BulkWriteResult,
    ClientBulkWriteResult,
    DeleteResult,
    InsertManyResult,
    InsertOneResult,
    UpdateResult,
)


def test_insert_results_know_their_ids_even_unacknowledged():
    assert InsertOneResult(5, True).inserted_id == 5
    unacknowledged = InsertOneResult(6, False)
    assert unacknowledged.inserted_id == 6 and not unacknowledged.acknowledged
    many = InsertManyResult([1, 2], False)
    assert many.inserted_ids == [1, 2] and not many.acknowledged
    assert repr(many) == "InsertManyResult([1, 2], acknowledged=False)"


def test_update_result_attributes():
    result = UpdateResult({"n": 3, "nModified": 2, "ok": 1.0, "updatedExisting": True}, True)
    assert (result.matched_count, result.modified_count, result.upserted_id) == (3, 2, None)
    assert not result.did_upsert and result.raw_result["ok"] == 1.0
    upsert = UpdateResult({"n": 1, "nModified": 0, "upserted": "id"}, True)
    assert upsert.matched_count == 0 and upsert.upserted_id == "id" and upsert.did_upsert


def test_update_result_in_client_bulk():
    result = UpdateResult({"ok": 1, "idx": 3, "n": 1, "nModified": 0, "upserted": {"_id": 4}}, True,
                          in_client_bulk=True)
    assert result.upserted_id == 4 and result.matched_count == 1


def test_delete_result():
    assert DeleteResult({"n": 4, "ok": 1}, True).deleted_count == 4
    assert DeleteResult({"n": 4}, True).raw_result == {"n": 4}


@pytest.mark.parametrize("result, attributes", [
    (UpdateResult(None, False), ["matched_count", "modified_count", "upserted_id", "did_upsert"]),
    (DeleteResult(None, False), ["deleted_count"]),
    (BulkWriteResult({}, False), ["inserted_count", "matched_count", "modified_count", "deleted_count",
                                  "upserted_count", "upserted_ids"]),
    (ClientBulkWriteResult({}, False, False), ["inserted_count", "deleted_count", "insert_results",
                                               "update_results", "delete_results"]),
])
def test_unacknowledged_results_raise(result, attributes):
    assert result.acknowledged is False
    for name in attributes:
        with pytest.raises(InvalidOperation, match="acknowledged"):
            getattr(result, name)


def test_bulk_write_result():
    full = empty_bulk_result()
    full.update(nInserted=2, nMatched=3, nModified=1, nRemoved=4, nUpserted=1, upserted=[{"index": 2, "_id": "u"}])
    result = BulkWriteResult(full, True)
    assert (result.inserted_count, result.matched_count, result.modified_count, result.deleted_count,
            result.upserted_count) == (2, 3, 1, 4, 1)
    assert result.upserted_ids == {2: "u"} and result.bulk_api_result is full
    assert "acknowledged=True" in repr(result)


def test_client_bulk_write_result():
    full = {"nInserted": 1, "nUpserted": 0, "nMatched": 2, "nModified": 2, "nDeleted": 3,
            "insertResults": {0: InsertOneResult(1, True)}, "updateResults": {}, "deleteResults": {}}
    verbose = ClientBulkWriteResult(full, True, True)
    assert verbose.deleted_count == 3 and verbose.insert_results[0].inserted_id == 1
    summary = ClientBulkWriteResult(full, True, False)
    assert summary.matched_count == 2
    with pytest.raises(InvalidOperation, match="verbose"):
        _ = summary.update_results
