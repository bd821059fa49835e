"""Driver result objects as the documents the unified format matches (spec: Converting Returned Model Objects).

Both drivers use PyMongo's result classes and attribute names, so conversion
goes by class name. Unacknowledged results become ``{acknowledged: false}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _ids(mapping: Mapping[int, Any]) -> dict:
    return {str(index): value for index, value in mapping.items()}


def to_document(result: Any) -> Any:
    """A result object -> its document; anything else is returned unchanged."""
    name = type(result).__name__
    converter = _CONVERTERS.get(name)
    if converter is None:
        return result
    if getattr(result, "acknowledged", True) is False:
        return {"acknowledged": False}
    return converter(result)


def _insert_one(result: Any) -> dict:
    return {"insertedId": result.inserted_id}


def _insert_many(result: Any) -> dict:
    return {"insertedIds": {str(index): value for index, value in enumerate(result.inserted_ids)}}


def _update(result: Any) -> dict:
    doc = {"matchedCount": result.matched_count, "modifiedCount": result.modified_count,
           "upsertedCount": 0 if result.upserted_id is None else 1}
    if result.upserted_id is not None:
        doc["upsertedId"] = result.upserted_id
    return doc


def _client_update(result: Any) -> dict:
    """A verbose client bulk write's update result: no upsertedCount (the spec's UpdateResult there)."""
    doc = {"matchedCount": result.matched_count, "modifiedCount": result.modified_count}
    if result.upserted_id is not None:
        doc["upsertedId"] = result.upserted_id
    return doc


def _delete(result: Any) -> dict:
    return {"deletedCount": result.deleted_count}


def _bulk(result: Any) -> dict:
    return {
        "deletedCount": result.deleted_count, "insertedCount": result.inserted_count,
        "matchedCount": result.matched_count, "modifiedCount": result.modified_count,
        "upsertedCount": result.upserted_count, "upsertedIds": _ids(result.upserted_ids or {}),
    }


def _client_bulk(result: Any) -> dict:
    doc = {
        "insertedCount": result.inserted_count, "upsertedCount": result.upserted_count,
        "matchedCount": result.matched_count, "modifiedCount": result.modified_count,
        "deletedCount": result.deleted_count,
    }
    if getattr(result, "has_verbose_results", False):
        doc["insertResults"] = {str(i): {"insertedId": r.inserted_id} for i, r in result.insert_results.items()}
        doc["updateResults"] = {str(i): _client_update(r) for i, r in result.update_results.items()}
        doc["deleteResults"] = {str(i): _delete(r) for i, r in result.delete_results.items()}
    return doc


_CONVERTERS = {
    "InsertOneResult": _insert_one,
    "InsertManyResult": _insert_many,
    "UpdateResult": _update,
    "DeleteResult": _delete,
    "BulkWriteResult": _bulk,
    "ClientBulkWriteResult": _client_bulk,
}


def bulk_error_result(details: Mapping[str, Any]) -> dict:
    """A BulkWriteError's ``details`` (the raw merged result) -> a BulkWriteResult document."""
    return {
        "deletedCount": details.get("nRemoved", 0), "insertedCount": details.get("nInserted", 0),
        "matchedCount": details.get("nMatched", 0), "modifiedCount": details.get("nModified", 0),
        "upsertedCount": details.get("nUpserted", 0),
        "upsertedIds": {str(upsert["index"]): upsert["_id"] for upsert in details.get("upserted", [])},
    }
