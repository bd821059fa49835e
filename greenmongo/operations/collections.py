"""Collection administration: listCollections, create, drop, renameCollection, collMod.

listCollections is a retryable read run on the primary (Enumerating
Collections spec); ``name_only`` is set for name listings unless the filter
looks at more than ``name``, and its comment is not repeated on getMore.
create/drop/rename/collMod take the write concern and raise its errors.
Dropping a missing collection is not an error.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from greenmongo.bson.codec_options import CodecOptions
from greenmongo.errors import InvalidName
from greenmongo.operations.arguments import (
    collation_document,
    validate_boolean,
    validate_is_mapping,
    validate_optional_non_negative_integer,
)
from greenmongo.operations.base import Command, Operation, WireInfo, raw_data_field
from greenmongo.operations.cursor_state import CursorState
from greenmongo.operations.indexes import NAMESPACE_NOT_FOUND, _WritingCommand


def name_only_applies(filter: Optional[Mapping[str, Any]]) -> bool:
    """``nameOnly`` may only be sent when the filter is absent or looks only at ``name``."""
    return not filter or (len(filter) == 1 and "name" in filter)


def validate_collection_name(name: Any) -> str:
    """The checks PyMongo makes before sending a collection name."""
    if not isinstance(name, str):
        raise TypeError(f"name must be an instance of str, not {type(name).__name__}")
    if not name or ".." in name:
        raise InvalidName("collection names cannot be empty")
    if "$" in name and not (name.startswith(("oplog.$main", "$cmd"))):
        raise InvalidName(f"collection names must not contain '$': {name!r}")
    if name[0] == "." or name[-1] == ".":
        raise InvalidName(f"collection names must not start or end with '.': {name!r}")
    if "\x00" in name:
        raise InvalidName("collection names must not contain the null character")
    return name


class ListCollectionsOperation(Operation[CursorState]):
    """``listCollections`` (``cursor: {}`` always requested)."""

    name = "listCollections"
    retryable = True

    def __init__(self, dbname: str, *, filter: Optional[Mapping[str, Any]] = None,
                 name_only: Optional[bool] = None, authorized_collections: Optional[bool] = None,
                 batch_size: Optional[int] = None, comment: Any = None,
                 codec_options: Optional[CodecOptions] = None, raw_data: Optional[bool] = None,
                 extra: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(dbname, codec_options=codec_options)
        if filter is not None:
            validate_is_mapping("filter", filter)
        if name_only is not None:
            validate_boolean("name_only", name_only)
        if authorized_collections is not None:
            validate_boolean("authorized_collections", authorized_collections)
        validate_optional_non_negative_integer("batch_size", batch_size)
        self.filter = filter
        self.name_only = name_only
        self.authorized_collections = authorized_collections
        self.batch_size = batch_size
        self.comment = comment
        self.raw_data = raw_data
        self.extra = dict(extra or {})

    @classmethod
    def for_names(cls, dbname: str, *, filter: Optional[Mapping[str, Any]] = None,
                  **options: Any) -> "ListCollectionsOperation":
        """``list_collection_names``: nameOnly whenever the filter allows it."""
        return cls(dbname, filter=filter, name_only=True if name_only_applies(filter) else None, **options)

    def build(self, wire: WireInfo) -> Command:
        cursor: dict[str, Any] = {}
        if self.batch_size is not None:
            cursor["batchSize"] = self.batch_size
        body: dict[str, Any] = {"listCollections": 1, "cursor": cursor}
        if self.filter is not None:
            body["filter"] = self.filter
        if self.name_only is not None:
            body["nameOnly"] = self.name_only
        if self.authorized_collections is not None:
            body["authorizedCollections"] = self.authorized_collections
        if self.comment is not None:
            body["comment"] = self.comment
        body.update(self.extra)
        raw_data_field(body, self.raw_data, wire)
        return Command(self.dbname, body)

    def parse(self, reply: Optional[Mapping[str, Any]], wire: WireInfo) -> CursorState:
        if reply is None:
            raise ValueError("listCollections is always acknowledged")
        self.check_reply(reply, wire)
        # The server keeps the comment for the cursor's getMores; the spec forbids resending it.
        return CursorState.from_reply(reply, default_namespace=f"{self.dbname}.$cmd.listCollections",
                                      address=wire.address, batch_size=self.batch_size or 0,
                                      codec_options=self.codec_options)


class CreateCollectionOperation(_WritingCommand):
    """``create`` with any collection option (capped, size, max, validator, timeseries, clusteredIndex,
    changeStreamPreAndPostImages, expireAfterSeconds, collation, viewOn/pipeline, ...)."""

    name = "create"

    def __init__(self, dbname: str, collection: str, options: Optional[Mapping[str, Any]] = None,
                 **command_options: Any) -> None:
        super().__init__(dbname, **command_options)
        self.collection = validate_collection_name(collection)
        self.options = dict(options or {})
        if "collation" in self.options:
            collation = collation_document(self.options.pop("collation"))
            if collation is not None:
                self.options["collation"] = collation

    def build(self, wire: WireInfo) -> Command:
        body: dict[str, Any] = {"create": self.collection}
        body.update(self.options)
        return self._finish_body(body, wire)


class DropCollectionOperation(_WritingCommand):
    """``drop``; the reply is returned, and a missing collection is not an error."""

    name = "drop"
    allowable_errors = ("ns not found", NAMESPACE_NOT_FOUND)

    def __init__(self, dbname: str, collection: str, **options: Any) -> None:
        super().__init__(dbname, **options)
        self.collection = collection

    def build(self, wire: WireInfo) -> Command:
        return self._finish_body({"drop": self.collection}, wire)


class RenameCollectionOperation(_WritingCommand):
    """``renameCollection`` (run on ``admin``); ``drop_target`` replaces an existing target."""

    name = "renameCollection"

    def __init__(self, dbname: str, collection: str, new_name: str, *, drop_target: Optional[bool] = None,
                 **options: Any) -> None:
        super().__init__("admin", **options)
        validate_collection_name(new_name)
        if drop_target is not None:
            validate_boolean("drop_target", drop_target)
        self.source = f"{dbname}.{collection}"
        self.target = f"{dbname}.{new_name}"
        self.drop_target = drop_target

    def build(self, wire: WireInfo) -> Command:
        body: dict[str, Any] = {"renameCollection": self.source, "to": self.target}
        if self.drop_target is not None:
            body["dropTarget"] = self.drop_target
        return self._finish_body(body, wire)


class CollModOperation(_WritingCommand):
    """``collMod`` (the unified format's modifyCollection)."""

    name = "collMod"

    def __init__(self, dbname: str, collection: str, options: Optional[Mapping[str, Any]] = None,
                 **command_options: Any) -> None:
        super().__init__(dbname, **command_options)
        self.collection = collection
        self.options = dict(options or {})

    def build(self, wire: WireInfo) -> Command:
        body: dict[str, Any] = {"collMod": self.collection}
        body.update(self.options)
        return self._finish_body(body, wire)
