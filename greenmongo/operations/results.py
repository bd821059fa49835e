"""Write results with PyMongo's classes and attributes.

An unacknowledged write (w=0) has no server reply: every attribute that
would come from one raises InvalidOperation, with a message pointing at
``acknowledged`` (CRUD spec "Write Results"). Ids the driver generated
(``inserted_id``, ``inserted_ids``) are known either way.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from greenmongo.errors import InvalidOperation


class _WriteResult:
    __slots__ = ("__acknowledged",)

    def __init__(self, acknowledged: bool) -> None:
        self.__acknowledged = acknowledged

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.__acknowledged})"

    def _raise_if_unacknowledged(self, property_name: str) -> None:
        if not self.__acknowledged:
            raise InvalidOperation(
                f"A value for {property_name} is not available when the write is unacknowledged. Check the "
                "acknowledged attribute to avoid this error.")

    @property
    def acknowledged(self) -> bool:
        """False for a write concern of w=0: the other attributes then raise InvalidOperation."""
        return self.__acknowledged


class InsertOneResult(_WriteResult):
    """Returned by ``insert_one``."""

    __slots__ = ("__inserted_id",)

    def __init__(self, inserted_id: Any, acknowledged: bool) -> None:
        self.__inserted_id = inserted_id
        super().__init__(acknowledged)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.__inserted_id!r}, acknowledged={self.acknowledged})"

    @property
    def inserted_id(self) -> Any:
        return self.__inserted_id


class InsertManyResult(_WriteResult):
    """Returned by ``insert_many``."""

    __slots__ = ("__inserted_ids",)

    def __init__(self, inserted_ids: list[Any], acknowledged: bool) -> None:
        self.__inserted_ids = inserted_ids
        super().__init__(acknowledged)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.__inserted_ids!r}, acknowledged={self.acknowledged})"

    @property
    def inserted_ids(self) -> list[Any]:
        """The ``_id`` of each document, in input order (including any not inserted after an error)."""
        return self.__inserted_ids


class UpdateResult(_WriteResult):
    """Returned by ``update_one``, ``update_many`` and ``replace_one``; also a per-operation client bulk result.

    ``raw_result`` is the server reply with ``upserted`` reduced to the id
    (collection API), or a client bulk results-cursor document whose
    ``upserted`` is ``{"_id": ...}`` (``in_client_bulk=True``).
    """

    __slots__ = ("__raw_result", "__in_client_bulk")

    def __init__(self, raw_result: Optional[Mapping[str, Any]], acknowledged: bool,
                 in_client_bulk: bool = False) -> None:
        self.__raw_result = raw_result
        self.__in_client_bulk = in_client_bulk
        super().__init__(acknowledged)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.__raw_result!r}, acknowledged={self.acknowledged})"

    @property
    def raw_result(self) -> Optional[Mapping[str, Any]]:
        return self.__raw_result

    @property
    def matched_count(self) -> int:
        self._raise_if_unacknowledged("matched_count")
        raw = self.__raw_result or {}
        if not self.__in_client_bulk and "upserted" in raw:
            return 0
        matched: int = raw.get("n", 0)
        return matched

    @property
    def modified_count(self) -> int:
        self._raise_if_unacknowledged("modified_count")
        modified: int = (self.__raw_result or {}).get("nModified", 0)
        return modified

    @property
    def upserted_id(self) -> Any:
        """The ``_id`` of the upserted document, or None when no upsert happened (see ``did_upsert``)."""
        self._raise_if_unacknowledged("upserted_id")
        upserted = (self.__raw_result or {}).get("upserted")
        if self.__in_client_bulk and isinstance(upserted, Mapping):
            return upserted.get("_id")
        return upserted

    @property
    def did_upsert(self) -> bool:
        """True when an upsert happened, even one whose ``_id`` is null."""
        self._raise_if_unacknowledged("did_upsert")
        return "upserted" in (self.__raw_result or {})


class DeleteResult(_WriteResult):
    """Returned by ``delete_one`` and ``delete_many``; also a per-operation client bulk result."""

    __slots__ = ("__raw_result",)

    def __init__(self, raw_result: Optional[Mapping[str, Any]], acknowledged: bool) -> None:
        self.__raw_result = raw_result
        super().__init__(acknowledged)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.__raw_result!r}, acknowledged={self.acknowledged})"

    @property
    def raw_result(self) -> Optional[Mapping[str, Any]]:
        return self.__raw_result

    @property
    def deleted_count(self) -> int:
        self._raise_if_unacknowledged("deleted_count")
        deleted: int = (self.__raw_result or {}).get("n", 0)
        return deleted


class _BulkWriteResultBase(_WriteResult):
    __slots__ = ("__bulk_api_result",)

    def __init__(self, bulk_api_result: dict[str, Any], acknowledged: bool) -> None:
        self.__bulk_api_result = bulk_api_result
        super().__init__(acknowledged)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.__bulk_api_result!r}, acknowledged={self.acknowledged})"

    @property
    def bulk_api_result(self) -> dict[str, Any]:
        """The merged result document (``nInserted``, ``nMatched``, ``upserted``, ...)."""
        return self.__bulk_api_result

    def _count(self, property_name: str, key: str) -> int:
        self._raise_if_unacknowledged(property_name)
        count: int = self.__bulk_api_result.get(key, 0)
        return count

    @property
    def inserted_count(self) -> int:
        return self._count("inserted_count", "nInserted")

    @property
    def matched_count(self) -> int:
        return self._count("matched_count", "nMatched")

    @property
    def modified_count(self) -> int:
        return self._count("modified_count", "nModified")

    @property
    def upserted_count(self) -> int:
        return self._count("upserted_count", "nUpserted")


class BulkWriteResult(_BulkWriteResultBase):
    """Returned by ``Collection.bulk_write``; ``bulk_api_result`` holds PyMongo's merged document."""

    __slots__ = ()

    @property
    def deleted_count(self) -> int:
        return self._count("deleted_count", "nRemoved")

    @property
    def upserted_ids(self) -> Optional[dict[int, Any]]:
        """Operation index -> upserted ``_id``."""
        self._raise_if_unacknowledged("upserted_ids")
        upserted = self.bulk_api_result.get("upserted")
        if upserted is None:
            return None
        return {entry["index"]: entry["_id"] for entry in upserted}


class ClientBulkWriteResult(_BulkWriteResultBase):
    """Returned by ``MongoClient.bulk_write``.

    The per-operation maps exist only with ``verbose_results=True``
    (``has_verbose_results``); reading them otherwise raises InvalidOperation.
    """

    __slots__ = ("__has_verbose_results",)

    def __init__(self, bulk_api_result: dict[str, Any], acknowledged: bool, has_verbose_results: bool) -> None:
        self.__has_verbose_results = has_verbose_results
        super().__init__(bulk_api_result, acknowledged)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.bulk_api_result!r}, acknowledged={self.acknowledged}, "
                f"verbose={self.__has_verbose_results})")

    @property
    def has_verbose_results(self) -> bool:
        return self.__has_verbose_results

    @property
    def deleted_count(self) -> int:
        return self._count("deleted_count", "nDeleted")

    def _verbose(self, property_name: str, key: str) -> dict[int, Any]:
        self._raise_if_unacknowledged(property_name)
        if not self.__has_verbose_results:
            raise InvalidOperation(f"A value for {property_name} is not available when the results are not "
                                   "set to be verbose. Check the verbose_results attribute to avoid this error.")
        results: dict[int, Any] = self.bulk_api_result.get(key, {})
        return results

    @property
    def insert_results(self) -> dict[int, InsertOneResult]:
        return self._verbose("insert_results", "insertResults")

    @property
    def update_results(self) -> dict[int, UpdateResult]:
        return self._verbose("update_results", "updateResults")

    @property
    def delete_results(self) -> dict[int, DeleteResult]:
        return self._verbose("delete_results", "deleteResults")
