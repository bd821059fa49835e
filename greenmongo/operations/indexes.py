"""Index management (Index Management spec): createIndexes, listIndexes, dropIndexes, search indexes.

Index names default to ``key_direction`` pairs joined by underscores
(``{a: 1, b: -1}`` -> ``a_1_b_-1``). Search index commands take neither a read
nor a write concern (they are proxied to Atlas Search), and dropping a
search index, like dropping an index, ignores a missing collection.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence, Union

from greenmongo.bson.codec_options import CodecOptions
from greenmongo.errors import ConfigurationError
from greenmongo.operations.aggregate import AggregateOperation
from greenmongo.operations.arguments import (
    KeySpec,
    collation_document,
    index_document,
    index_list,
    index_name,
    validate_is_mapping,
    validate_optional_non_negative_integer,
)
from greenmongo.operations.base import (
    WIRE_4_4,
    Command,
    Operation,
    WireInfo,
    raw_data_field,
    write_concern_field,
)
from greenmongo.operations.cursor_state import CursorState
from greenmongo.operations.replies import raise_write_concern_error, write_concern_error_document
from greenmongo.options.write_concern import DEFAULT_WRITE_CONCERN, WriteConcern

NAMESPACE_NOT_FOUND = 26


class IndexModel:
    """One index to create: its keys plus index options (``name``, ``unique``, ``collation``, ...)."""

    __slots__ = ("__document",)

    def __init__(self, keys: KeySpec, **kwargs: Any) -> None:
        pairs = index_list(keys)
        if kwargs.get("name") is None:
            kwargs["name"] = index_name(pairs)
        collation = collation_document(kwargs.pop("collation", None))
        document: dict[str, Any] = {"key": index_document(pairs)}
        document.update(kwargs)
        if collation is not None:
            document["collation"] = collation
        self.__document = document

    @property
    def document(self) -> dict[str, Any]:
        """The index specification sent in ``createIndexes.indexes``."""
        return self.__document

    def __repr__(self) -> str:
        return f"IndexModel({self.__document!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, IndexModel):
            return self.__document == other.__document
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


class SearchIndexModel:
    """One Atlas Search (or vector search) index: a definition plus optional name and type."""

    __slots__ = ("__document",)

    def __init__(self, definition: Mapping[str, Any], name: Optional[str] = None, type: Optional[str] = None,
                 **kwargs: Any) -> None:
        document: dict[str, Any] = {"definition": definition}
        if name is not None:
            document["name"] = name
        if type is not None:
            document["type"] = type
        document.update(kwargs)
        self.__document = document

    @property
    def document(self) -> dict[str, Any]:
        return self.__document

    def __repr__(self) -> str:
        return f"SearchIndexModel({self.__document!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SearchIndexModel):
            return self.__document == other.__document
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


def index_information(indexes: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """PyMongo's ``index_information()`` shape: name -> spec, with ``key`` as a list of pairs."""
    info: dict[str, dict[str, Any]] = {}
    for index in indexes:
        spec = dict(index)
        spec["key"] = list(spec["key"].items())
        info[spec.pop("name")] = spec
    return info


class _WritingCommand(Operation[Mapping[str, Any]]):
    """A DDL command that takes a write concern and reports writeConcernError as an exception."""

    is_write = True
    supports_write_concern = True

    def __init__(self, dbname: str, *, write_concern: Optional[WriteConcern] = None, comment: Any = None,
                 max_time_ms: Optional[int] = None, codec_options: Optional[CodecOptions] = None,
                 raw_data: Optional[bool] = None, extra: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(dbname, codec_options=codec_options)
        validate_optional_non_negative_integer("max_time_ms", max_time_ms)
        self.write_concern = write_concern or DEFAULT_WRITE_CONCERN
        self.comment = comment
        self.max_time_ms = max_time_ms
        self.raw_data = raw_data
        self.extra = dict(extra or {})

    def _finish_body(self, body: dict[str, Any], wire: WireInfo) -> Command:
        if self.max_time_ms is not None:
            body["maxTimeMS"] = self.max_time_ms
        if self.comment is not None:
            body["comment"] = self.comment
        body.update(self.extra)
        if "writeConcern" not in body:
            write_concern_field(body, self.write_concern)
        raw_data_field(body, self.raw_data, wire)
        return Command(self.dbname, body, acknowledged=self.write_concern.acknowledged)

    def _checked(self, reply: Optional[Mapping[str, Any]], wire: WireInfo) -> Mapping[str, Any]:
        if reply is None:
            return {"ok": 1}
        self.check_reply(reply, wire)
        error = write_concern_error_document(reply)
        if error:
            raise_write_concern_error(error)
        return reply

    def parse(self, reply: Optional[Mapping[str, Any]], wire: WireInfo) -> Mapping[str, Any]:
        return self._checked(reply, wire)


class CreateIndexesOperation(_WritingCommand):
    """``createIndexes``; ``parse`` returns the names of the indexes asked for."""

    name = "createIndexes"

    def __init__(self, dbname: str, collection: str, indexes: Sequence[IndexModel], *,
                 commit_quorum: Optional[Union[int, str]] = None, **options: Any) -> None:
        super().__init__(dbname, **options)
        if not isinstance(indexes, (list, tuple)):
            raise TypeError(f"indexes must be a list, not {type(indexes).__name__}")
        for model in indexes:
            if not isinstance(model, IndexModel):
                raise TypeError(f"{model!r} is not an instance of greenmongo.operations.IndexModel")
        if "commitQuorum" in self.extra:
            commit_quorum = self.extra.pop("commitQuorum")
        self.collection = collection
        self.indexes = [model.document for model in indexes]
        self.commit_quorum = commit_quorum

    @property
    def names(self) -> list[str]:
        return [index["name"] for index in self.indexes]

    def build(self, wire: WireInfo) -> Command:
        body: dict[str, Any] = {"createIndexes": self.collection, "indexes": self.indexes}
        if self.commit_quorum is not None:
            if wire.max_wire_version < WIRE_4_4:
                raise ConfigurationError("Must be connected to MongoDB 4.4+ to use the commitQuorum option "
                                         "for createIndexes")
            body["commitQuorum"] = self.commit_quorum
        return self._finish_body(body, wire)

    def parse(self, reply: Optional[Mapping[str, Any]], wire: WireInfo) -> list[str]:  # type: ignore[override]
        self._checked(reply, wire)
        return self.names


class DropIndexesOperation(_WritingCommand):
    """``dropIndexes`` of one index (by name or key spec) or of all (``"*"``); a missing collection is fine."""

    name = "dropIndexes"
    allowable_errors = ("ns not found", NAMESPACE_NOT_FOUND)

    def __init__(self, dbname: str, collection: str, index: Any = "*", *, drop_all: bool = False,
                 **options: Any) -> None:
        super().__init__(dbname, **options)
        if not drop_all:
            if index == "*":
                raise ValueError("use drop_indexes() to drop all indexes")
            if isinstance(index, (list, tuple)):
                index = index_name(index)
            elif isinstance(index, Mapping):
                index = index_document(index)  # the server also drops by key pattern
            if not isinstance(index, (str, dict)):
                raise TypeError(f"index_or_name must be an instance of str or list, not {type(index).__name__}")
        self.collection = collection
        self.index = "*" if drop_all else index

    def build(self, wire: WireInfo) -> Command:
        return self._finish_body({"dropIndexes": self.collection, "index": self.index}, wire)


class ListIndexesOperation(Operation[CursorState]):
    """``listIndexes``: a retryable read; a missing collection lists nothing."""

    name = "listIndexes"
    retryable = True
    allowable_errors = (NAMESPACE_NOT_FOUND,)

    def __init__(self, dbname: str, collection: str, *, batch_size: Optional[int] = None, comment: Any = None,
                 codec_options: Optional[CodecOptions] = None, raw_data: Optional[bool] = None) -> None:
        super().__init__(dbname, codec_options=codec_options)
        validate_optional_non_negative_integer("batch_size", batch_size)
        self.collection = collection
        self.batch_size = batch_size
        self.comment = comment
        self.raw_data = raw_data

    def build(self, wire: WireInfo) -> Command:
        cursor: dict[str, Any] = {}
        if self.batch_size is not None:
            cursor["batchSize"] = self.batch_size
        body: dict[str, Any] = {"listIndexes": self.collection, "cursor": cursor}
        if self.comment is not None:
            body["comment"] = self.comment
        raw_data_field(body, self.raw_data, wire)
        return Command(self.dbname, body)

    def parse(self, reply: Optional[Mapping[str, Any]], wire: WireInfo) -> CursorState:
        if reply is None:
            raise ValueError("listIndexes is always acknowledged")
        self.check_reply(reply, wire)
        return CursorState.from_reply(reply, default_namespace=f"{self.dbname}.{self.collection}",
                                      address=wire.address, batch_size=self.batch_size or 0,
                                      comment=self.comment, codec_options=self.codec_options)


class _SearchIndexCommand(Operation[Any]):
    """Search index commands: no read or write concern, ever (Index Management spec)."""

    is_write = True

    def __init__(self, dbname: str, collection: str, *, comment: Any = None,
                 codec_options: Optional[CodecOptions] = None) -> None:
        super().__init__(dbname, codec_options=codec_options)
        self.collection = collection
        self.comment = comment

    def _command(self, body: dict[str, Any]) -> Command:
        if self.comment is not None:
            body["comment"] = self.comment
        return Command(self.dbname, body)


class CreateSearchIndexesOperation(_SearchIndexCommand):
    """``createSearchIndexes``; ``parse`` returns the created index names."""

    name = "createSearchIndexes"

    def __init__(self, dbname: str, collection: str, models: Sequence[Any], **options: Any) -> None:
        super().__init__(dbname, collection, **options)
        documents = []
        for model in models:
            if isinstance(model, SearchIndexModel):
                documents.append(model.document)
            elif isinstance(model, Mapping):
                documents.append(dict(model))
            else:
                raise TypeError(f"{model!r} is not an instance of greenmongo.operations.SearchIndexModel")
        self.indexes = documents

    def build(self, wire: WireInfo) -> Command:
        return self._command({"createSearchIndexes": self.collection, "indexes": self.indexes})

    def parse(self, reply: Optional[Mapping[str, Any]], wire: WireInfo) -> list[str]:
        assert reply is not None
        self.check_reply(reply, wire)
        return [index["name"] for index in reply.get("indexesCreated", [])]


class UpdateSearchIndexOperation(_SearchIndexCommand):
    name = "updateSearchIndex"

    def __init__(self, dbname: str, collection: str, index_name: str, definition: Mapping[str, Any],
                 **options: Any) -> None:
        super().__init__(dbname, collection, **options)
        validate_is_mapping("definition", definition)
        self.index_name = index_name
        self.definition = definition

    def build(self, wire: WireInfo) -> Command:
        return self._command({"updateSearchIndex": self.collection, "name": self.index_name,
                              "definition": self.definition})

    def parse(self, reply: Optional[Mapping[str, Any]], wire: WireInfo) -> None:
        assert reply is not None
        self.check_reply(reply, wire)


class DropSearchIndexOperation(_SearchIndexCommand):
    """``dropSearchIndex``: idempotent, so NamespaceNotFound is not an error."""

    name = "dropSearchIndex"
    allowable_errors = ("ns not found", NAMESPACE_NOT_FOUND)

    def __init__(self, dbname: str, collection: str, index_name: str, **options: Any) -> None:
        super().__init__(dbname, collection, **options)
        self.index_name = index_name

    def build(self, wire: WireInfo) -> Command:
        return self._command({"dropSearchIndex": self.collection, "name": self.index_name})

    def parse(self, reply: Optional[Mapping[str, Any]], wire: WireInfo) -> None:
        assert reply is not None
        self.check_reply(reply, wire)


def list_search_indexes_operation(dbname: str, collection: str, name: Optional[str] = None,
                                  **aggregate_options: Any) -> AggregateOperation:
    """``$listSearchIndexes`` as an aggregate, without read or write concern."""
    stage: dict[str, Any] = {} if name is None else {"name": name}
    aggregate_options.pop("read_concern", None)
    aggregate_options.pop("write_concern", None)
    return AggregateOperation(dbname, collection, [{"$listSearchIndexes": stage}], **aggregate_options)
