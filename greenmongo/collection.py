"""Collection: PyMongo's CRUD, index and administration methods over the operations layer.

Each method validates its arguments, builds one pure operation (greenmongo/operations/) and
hands it to the client's executor; multi-command work (insert_many, bulk_write) is a BulkWrite
driven batch by batch. Methods keep PyMongo's names, signatures, return types and errors, so
``import greenmongo as pymongo`` code keeps working. Options not given to a Collection come
from its Database (and from the client before that).
"""

from __future__ import annotations

from collections import abc
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional, Sequence, Union, cast

from greenmongo.bson.codec_options import CodecOptions
from greenmongo.change_stream import CollectionChangeStream, Watchable, WatchOptions
from greenmongo.client_session import ClientSession, session_state
from greenmongo.command_cursor import CommandCursor, RawBatchCommandCursor, open_command_cursor, raw_codec_options
from greenmongo.common import BaseObject, timeout_seconds
from greenmongo.cursor import Cursor, RawBatchCursor
from greenmongo.errors import ConfigurationError, InvalidName
from greenmongo.operations.arguments import ASCENDING  # noqa: F401  (PyMongo's pymongo.collection has it)
from greenmongo.operations.arguments import (
    require_acknowledged_for,
    validate_boolean,
    validate_is_mapping,
    validate_list,
)
from greenmongo.operations.bulk import BulkWrite
from greenmongo.operations.collections import (
    CreateCollectionOperation,
    RenameCollectionOperation,
    validate_collection_name,
)
from greenmongo.operations.count import (
    CountDocumentsOperation,
    DistinctOperation,
    EstimatedDocumentCountOperation,
)
from greenmongo.operations.find import FindOneOperation, FindSpec
from greenmongo.operations.find_and_modify import DELETE, REPLACE, UPDATE, FindAndModifyOperation, ReturnDocument
from greenmongo.operations.indexes import (
    CreateIndexesOperation,
    CreateSearchIndexesOperation,
    DropIndexesOperation,
    DropSearchIndexOperation,
    IndexModel,
    ListIndexesOperation,
    SearchIndexModel,
    UpdateSearchIndexOperation,
    index_information,
    list_search_indexes_operation,
)
from greenmongo.operations.results import (
    BulkWriteResult,
    DeleteResult,
    InsertManyResult,
    InsertOneResult,
    UpdateResult,
)
from greenmongo.operations.write import DeleteOperation, InsertOneOperation, UpdateOperation
from greenmongo.options.read_concern import ReadConcern
from greenmongo.options.read_preferences import ServerMode
from greenmongo.options.write_concern import DEFAULT_WRITE_CONCERN, WriteConcern

if TYPE_CHECKING:
    from greenmongo.database import Database

#: PyMongo methods greenmongo does not have yet: attribute access must not turn them into sub-collections.
#: find_one options that go straight into the find command (anything else takes the Cursor path).
_FIND_ONE_DIRECT_OPTIONS = frozenset({"projection", "session", "sort", "skip", "comment", "max_time_ms", "hint",
                                      "collation", "let", "allow_disk_use", "return_key", "show_record_id"})


def check_options(codec_options: Any, read_preference: Any, write_concern: Any, read_concern: Any) -> None:
    """PyMongo's TypeErrors for option objects of the wrong class."""
    if codec_options is not None and not isinstance(codec_options, CodecOptions):
        raise TypeError("codec_options must be an instance of greenmongo.bson.codec_options.CodecOptions")
    if read_preference is not None and not isinstance(read_preference, ServerMode):
        raise TypeError(f"{read_preference!r} is not valid for read_preference")
    if write_concern is not None and not isinstance(write_concern, WriteConcern):
        raise TypeError("write_concern must be an instance of greenmongo.write_concern.WriteConcern")
    if read_concern is not None and not isinstance(read_concern, ReadConcern):
        raise TypeError("read_concern must be an instance of greenmongo.read_concern.ReadConcern")


def _upsert_field(upsert: Any) -> Optional[bool]:
    """PyMongo validates ``upsert`` as a bool; False is the server's default, so it is left out."""
    validate_boolean("upsert", upsert)
    return True if upsert else None


def _check_unacknowledged(write_concern: WriteConcern, collation: Any = None, array_filters: Any = None) -> None:
    """Options whose effect an unacknowledged write could not report (PyMongo's ConfigurationErrors)."""
    if write_concern.acknowledged:
        return
    if collation is not None:
        require_acknowledged_for("Collation", False)
    if array_filters is not None:
        require_acknowledged_for("arrayFilters", False)


class Collection(BaseObject, Watchable):
    """A MongoDB collection: ``database[name]``, ``database.get_collection(name, ...)``."""

    _kind = "Collection"

    def __init__(self, database: "Database", name: str, create: Optional[bool] = False,
                 codec_options: Optional[CodecOptions] = None, read_preference: Optional[ServerMode] = None,
                 write_concern: Optional[WriteConcern] = None, read_concern: Optional[ReadConcern] = None,
                 session: Optional[ClientSession] = None, *, timeout_ms: Optional[int] = None, **kwargs: Any) -> None:
        check_options(codec_options, read_preference, write_concern, read_concern)
        self._database = database
        self._client = database.client
        self._core = database._core
        self._timeout = timeout_seconds(timeout_ms, database._timeout)
        self._name = validate_collection_name(name)
        self._full_name = f"{database.name}.{name}"
        self._codec_options: CodecOptions = codec_options or database.codec_options
        self._read_preference: ServerMode = read_preference or database.read_preference
        self._write_concern: WriteConcern = write_concern or database.write_concern
        self._read_concern: ReadConcern = read_concern or database.read_concern
        if create or kwargs:
            if "encryptedFields" in kwargs:
                raise NotImplementedError("Queryable Encryption (encryptedFields) is not supported by greenmongo")
            comment = kwargs.pop("comment", None)
            self._run(CreateCollectionOperation(database.name, name, kwargs, write_concern=self._write_concern,
                                                comment=comment), session)

    # -- attributes ----------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self._name

    @property
    def full_name(self) -> str:
        """``"database.collection"``."""
        return self._full_name

    @property
    def database(self) -> "Database":
        return self._database

    def with_options(self, codec_options: Optional[CodecOptions] = None, read_preference: Optional[ServerMode] = None,
                     write_concern: Optional[WriteConcern] = None, read_concern: Optional[ReadConcern] = None,
                     *, timeout_ms: Optional[int] = None) -> "Collection":
        """A copy of this Collection with some options replaced (``timeout_ms``: its timeoutMS)."""
        return self._copy(self._name, codec_options or self._codec_options, read_preference or self._read_preference,
                          write_concern or self._write_concern, read_concern or self._read_concern,
                          timeout_seconds(timeout_ms, self._timeout))

    def _copy(self, name: str, codec_options: CodecOptions, read_preference: ServerMode, write_concern: WriteConcern,
              read_concern: ReadConcern, timeout: Optional[float]) -> "Collection":
        collection = Collection(self._database, name, False, codec_options, read_preference, write_concern,
                                read_concern)
        collection._timeout = timeout
        return collection

    def __getattr__(self, name: str) -> "Collection":
        if name.startswith("_"):
            full_name = f"{self._name}.{name}"
            raise AttributeError(f"Collection has no attribute {name!r}. To access the {full_name} collection, "
                                 f"use database[{full_name!r}].")
        return self.__getitem__(name)

    def __getitem__(self, name: str) -> "Collection":
        """The sub-collection ``<this name>.<name>`` with this Collection's options."""
        return self._copy(f"{self._name}.{name}", self._codec_options, self._read_preference, self._write_concern,
                          self._read_concern, self._timeout)

    def _run(self, operation: Any, session: Optional[ClientSession] = None) -> Any:
        state = session_state(session, self._core)
        return self._core.execute(operation, session=state, deadline=self._deadline(state))

    def _run_bulk(self, bulk: BulkWrite, session: Optional[ClientSession]) -> None:
        state = session_state(session, self._core)
        self._core.execute_batches(bulk, state, deadline=self._deadline(state))

    def _write_concern_for(self, session: Optional[ClientSession]) -> WriteConcern:
        """Inside a transaction statements are acknowledged; the transaction's concern is the commit's."""
        state = session_state(session, self._core)
        if state is not None and state.in_transaction:
            return DEFAULT_WRITE_CONCERN
        return self._write_concern

    # -- inserts ---------------------------------------------------------------------------------

    def insert_one(self, document: Any, bypass_document_validation: Optional[bool] = None,
                   session: Optional[ClientSession] = None,
                   comment: Any = None) -> InsertOneResult:
        """Insert one document; an ``_id`` is added to it when it has none."""
        operation = InsertOneOperation(self._database.name, self._name, document,
                                       bypass_document_validation=bypass_document_validation, comment=comment,
                                       write_concern=self._write_concern_for(session),
                                       codec_options=self._codec_options)
        return self._run(operation, session)

    def insert_many(self, documents: Iterable[Any], ordered: bool = True,
                    bypass_document_validation: Optional[bool] = None, session: Optional[ClientSession] = None,
                    comment: Any = None) -> InsertManyResult:
        """Insert documents in as few batches as the server's limits allow."""
        bulk = BulkWrite.for_insert_many(self._database.name, self._name, documents, ordered=ordered,
                                         bypass_document_validation=bypass_document_validation, comment=comment,
                                         write_concern=self._write_concern_for(session),
                                         codec_options=self._codec_options)
        with self._core.operation_span():
            self._run_bulk(bulk, session)
            return bulk.insert_many_result()

    def bulk_write(self, requests: Sequence[Any], ordered: bool = True,
                   bypass_document_validation: Optional[bool] = None, session: Optional[ClientSession] = None,
                   comment: Any = None,
                   let: Optional[Mapping[str, Any]] = None) -> BulkWriteResult:
        """InsertOne/UpdateOne/UpdateMany/ReplaceOne/DeleteOne/DeleteMany in batches.

        Raises BulkWriteError (``details`` holds the partial result) on write or write concern errors.
        """
        validate_list("requests", requests)
        bulk = BulkWrite(self._database.name, self._name, requests, ordered=ordered,
                         bypass_document_validation=bypass_document_validation, comment=comment, let=let,
                         write_concern=self._write_concern_for(session), codec_options=self._codec_options)
        if not self._write_concern_for(session).acknowledged:
            if any(model.uses_collation for model in bulk.models):
                require_acknowledged_for("Collation", False)
            if any(model.uses_array_filters for model in bulk.models):
                require_acknowledged_for("arrayFilters", False)
        with self._core.operation_span():
            self._run_bulk(bulk, session)
            return bulk.result()

    # -- updates and deletes ---------------------------------------------------------------------

    def _update(self, filter: Mapping[str, Any], update: Any, *, multi: bool, replacement: bool, upsert: bool,
                bypass_document_validation: Optional[bool], collation: Any, array_filters: Any, hint: Any,
                session: Optional[ClientSession], let: Optional[Mapping[str, Any]], sort: Any,
                comment: Any) -> UpdateResult:
        _check_unacknowledged(self._write_concern_for(session), collation, array_filters)
        operation = UpdateOperation(
            self._database.name, self._name, filter, update, multi=multi, replacement=replacement,
            upsert=_upsert_field(upsert), collation=collation, array_filters=array_filters, hint=hint, sort=sort,
            bypass_document_validation=bypass_document_validation, comment=comment, let=let,
            write_concern=self._write_concern_for(session), codec_options=self._codec_options)
        return self._run(operation, session)

    def replace_one(self, filter: Mapping[str, Any], replacement: Mapping[str, Any], upsert: bool = False,
                    bypass_document_validation: Optional[bool] = None, collation: Any = None, hint: Any = None,
                    session: Optional[ClientSession] = None, let: Optional[Mapping[str, Any]] = None, sort: Any = None,
                    comment: Any = None) -> UpdateResult:
        return self._update(filter, replacement, multi=False, replacement=True, upsert=upsert,
                            bypass_document_validation=bypass_document_validation, collation=collation,
                            array_filters=None, hint=hint, session=session, let=let, sort=sort, comment=comment)

    def update_one(self, filter: Mapping[str, Any], update: Any, upsert: bool = False,
                   bypass_document_validation: Optional[bool] = None, collation: Any = None,
                   array_filters: Optional[Sequence[Mapping[str, Any]]] = None, hint: Any = None,
                   session: Optional[ClientSession] = None, let: Optional[Mapping[str, Any]] = None, sort: Any = None,
                   comment: Any = None) -> UpdateResult:
        return self._update(filter, update, multi=False, replacement=False, upsert=upsert,
                            bypass_document_validation=bypass_document_validation, collation=collation,
                            array_filters=array_filters, hint=hint, session=session, let=let, sort=sort,
                            comment=comment)

    def update_many(self, filter: Mapping[str, Any], update: Any, upsert: bool = False,
                    array_filters: Optional[Sequence[Mapping[str, Any]]] = None,
                    bypass_document_validation: Optional[bool] = None, collation: Any = None, hint: Any = None,
                    session: Optional[ClientSession] = None, let: Optional[Mapping[str, Any]] = None,
                    comment: Any = None) -> UpdateResult:
        return self._update(filter, update, multi=True, replacement=False, upsert=upsert,
                            bypass_document_validation=bypass_document_validation, collation=collation,
                            array_filters=array_filters, hint=hint, session=session, let=let, sort=None,
                            comment=comment)

    def _delete(self, filter: Mapping[str, Any], *, multi: bool, collation: Any, hint: Any,
                session: Optional[ClientSession],
                let: Optional[Mapping[str, Any]], comment: Any) -> DeleteResult:
        _check_unacknowledged(self._write_concern_for(session), collation)
        operation = DeleteOperation(self._database.name, self._name, filter, multi=multi, collation=collation,
                                    hint=hint, comment=comment, let=let, write_concern=self._write_concern_for(session),
                                    codec_options=self._codec_options)
        return self._run(operation, session)

    def delete_one(self, filter: Mapping[str, Any], collation: Any = None, hint: Any = None,
                   session: Optional[ClientSession] = None,
                   let: Optional[Mapping[str, Any]] = None, comment: Any = None) -> DeleteResult:
        return self._delete(filter, multi=False, collation=collation, hint=hint, session=session, let=let,
                            comment=comment)

    def delete_many(self, filter: Mapping[str, Any], collation: Any = None, hint: Any = None,
                    session: Optional[ClientSession] = None,
                    let: Optional[Mapping[str, Any]] = None, comment: Any = None) -> DeleteResult:
        return self._delete(filter, multi=True, collation=collation, hint=hint, session=session, let=let,
                            comment=comment)

    # -- finds -----------------------------------------------------------------------------------

    def find(self, *args: Any, **kwargs: Any) -> Cursor:
        """A lazy Cursor: ``find(filter=None, projection=None, skip=0, limit=0, ...)`` as in PyMongo."""
        return Cursor(self, *args, **kwargs)

    def find_raw_batches(self, *args: Any, **kwargs: Any) -> RawBatchCursor:
        """Like ``find`` but each iteration yields one batch as concatenated BSON bytes."""
        return RawBatchCursor(self, *args, **kwargs)

    def find_one(self, filter: Any = None, *args: Any, **kwargs: Any) -> Any:
        """The first matching document or None; a non-mapping filter means ``{"_id": filter}``."""
        if filter is not None and type(filter) is not dict and not isinstance(filter, abc.Mapping):
            filter = {"_id": filter}
        if not args and kwargs.keys() <= _FIND_ONE_DIRECT_OPTIONS:
            return self._find_one_direct(filter, kwargs)
        if len(args) >= 3:  # find(filter, projection, skip, limit, ...): limit is positional
            args = args[:2] + (-1,) + args[3:]
        else:
            kwargs["limit"] = -1
        cursor = Cursor(self, filter, *args, **kwargs)
        for document in cursor:
            return document
        return None

    def _find_one_direct(self, filter: Any, options: dict[str, Any]) -> Any:
        """find_one without a Cursor: one find with limit -1 (a single batch, which closes the cursor)."""
        session = options.pop("session", None)
        spec = FindSpec(filter, limit=-1, **options).validated() if options else FindSpec.find_one(filter)
        operation = FindOneOperation(self._database.name, self._name, spec, validated=True, plain=not options,
                                     read_concern=self._read_concern, read_preference=self._read_preference,
                                     codec_options=self._codec_options)
        session_in_use = session_state(session, self._core)
        result = self._core.execute(operation, session=session_in_use, deadline=self._deadline(session_in_use))
        if type(result) is list:  # the server closed the cursor, as it does for limit -1
            return result[0] if result else None
        batch = result.first_batch
        if result.alive:  # a cursor left open: its close kills it and ends its session
            CommandCursor(self, result).close()
        return batch[0] if batch else None

    def _find_and_modify(self, filter: Mapping[str, Any], kind: str, update: Any, projection: Any, sort: Any,
                         upsert: Optional[bool], return_document: bool, array_filters: Any, hint: Any,
                         session: Optional[ClientSession], let: Optional[Mapping[str, Any]], comment: Any,
                         kwargs: dict[str, Any]) -> Any:
        validate_is_mapping("filter", filter)
        if not isinstance(return_document, bool):
            raise ValueError("return_document must be ReturnDocument.BEFORE or ReturnDocument.AFTER")
        collation = kwargs.pop("collation", None)
        _check_unacknowledged(self._write_concern_for(session), collation, array_filters)
        operation = FindAndModifyOperation(
            self._database.name, self._name, filter, kind, update=update, projection=projection, sort=sort,
            upsert=upsert, return_document=return_document, array_filters=array_filters, hint=hint,
            collation=collation, let=let, comment=comment, write_concern=self._write_concern_for(session),
            codec_options=self._codec_options, extra=kwargs)
        return self._run(operation, session)

    def find_one_and_delete(self, filter: Mapping[str, Any], projection: Any = None, sort: Any = None,
                            hint: Any = None, session: Optional[ClientSession] = None, let: Optional[Mapping[str,
                            Any]] = None,
                            comment: Any = None, **kwargs: Any) -> Any:
        """Delete one document and return it (None if nothing matched)."""
        return self._find_and_modify(filter, DELETE, None, projection, sort, None, ReturnDocument.BEFORE, None,
                                     hint, session, let, comment, kwargs)

    def find_one_and_replace(self, filter: Mapping[str, Any], replacement: Mapping[str, Any], projection: Any = None,
                             sort: Any = None, upsert: bool = False, return_document: bool = ReturnDocument.BEFORE,
                             hint: Any = None, session: Optional[ClientSession] = None, let: Optional[Mapping[str,
                             Any]] = None,
                             comment: Any = None, **kwargs: Any) -> Any:
        """Replace one document; return it as it was (or as it is, with ``ReturnDocument.AFTER``)."""
        return self._find_and_modify(filter, REPLACE, replacement, projection, sort, _upsert_field(upsert),
                                     return_document, None, hint, session, let, comment, kwargs)

    def find_one_and_update(self, filter: Mapping[str, Any], update: Any, projection: Any = None, sort: Any = None,
                            upsert: bool = False, return_document: bool = ReturnDocument.BEFORE,
                            array_filters: Optional[Sequence[Mapping[str, Any]]] = None, hint: Any = None,
                            session: Optional[ClientSession] = None, let: Optional[Mapping[str, Any]] = None,
                            comment: Any = None,
                            **kwargs: Any) -> Any:
        """Update one document; return it as it was (or as it is, with ``ReturnDocument.AFTER``)."""
        return self._find_and_modify(filter, UPDATE, update, projection, sort, _upsert_field(upsert),
                                     return_document, array_filters, hint, session, let, comment, kwargs)

    # -- counting --------------------------------------------------------------------------------

    def count_documents(self, filter: Mapping[str, Any], session: Optional[ClientSession] = None, comment: Any = None,
                        **kwargs: Any) -> int:
        """The exact number of matching documents (an aggregate); options: skip, limit, hint,
        collation, maxTimeMS."""
        operation = CountDocumentsOperation(
            self._database.name, self._name, filter, skip=kwargs.pop("skip", None),
            limit=kwargs.pop("limit", None), hint=kwargs.pop("hint", None),
            collation=kwargs.pop("collation", None), max_time_ms=kwargs.pop("maxTimeMS", None), comment=comment,
            read_concern=self._read_concern, read_preference=self._read_preference,
            codec_options=self._codec_options, extra=kwargs)
        return self._run(operation, session)

    def estimated_document_count(self, comment: Any = None, **kwargs: Any) -> int:
        """The collection's document count from its metadata (the ``count`` command); option: maxTimeMS."""
        if "session" in kwargs:
            raise ConfigurationError("estimated_document_count does not support sessions")
        max_time_ms = kwargs.pop("maxTimeMS", None)
        if kwargs:
            raise TypeError(f"estimated_document_count got unexpected options {sorted(kwargs)}")
        operation = EstimatedDocumentCountOperation(
            self._database.name, self._name, max_time_ms=max_time_ms, comment=comment,
            read_concern=self._read_concern, read_preference=self._read_preference,
            codec_options=self._codec_options)
        return self._run(operation)

    def distinct(self, key: str, filter: Optional[Mapping[str, Any]] = None, session: Optional[ClientSession] = None,
                 comment: Any = None, hint: Any = None, **kwargs: Any) -> list:
        """The distinct values of ``key`` among matching documents; options: collation, maxTimeMS."""
        operation = DistinctOperation(
            self._database.name, self._name, key, filter, collation=kwargs.pop("collation", None), hint=hint,
            max_time_ms=kwargs.pop("maxTimeMS", None), comment=comment, read_concern=self._read_concern,
            read_preference=self._read_preference, codec_options=self._codec_options, extra=kwargs)
        return self._run(operation, session)

    # -- aggregation -----------------------------------------------------------------------------

    def aggregate(self, pipeline: list, session: Optional[ClientSession] = None, let: Optional[Mapping[str,
                  Any]] = None,
                  comment: Any = None, **kwargs: Any) -> CommandCursor:
        """Run a pipeline; options are the command's, camelCase (allowDiskUse, batchSize, maxTimeMS,
        maxAwaitTimeMS, collation, hint, bypassDocumentValidation). ``$out``/``$merge`` pipelines
        write, and run on the primary unless every server is 5.0+."""
        timeout_mode = kwargs.pop("timeout_mode", None)
        operation = self._aggregate_operation(self._database.name, self._name, pipeline, let, comment, kwargs,
                                              self._codec_options)
        return open_command_cursor(self, operation, session, timeout_mode=timeout_mode, writes=operation.is_write,
                                   max_await_time_ms=operation.max_await_time_ms)

    def aggregate_raw_batches(self, pipeline: list, session: Optional[ClientSession] = None, comment: Any = None,
                              **kwargs: Any) -> RawBatchCommandCursor:
        """Like ``aggregate`` but each iteration yields one batch as concatenated BSON bytes."""
        timeout_mode = kwargs.pop("timeout_mode", None)
        operation = self._aggregate_operation(self._database.name, self._name, pipeline, kwargs.pop("let", None),
                                              comment, kwargs, raw_codec_options(self._codec_options))
        cursor = open_command_cursor(self, operation, session, timeout_mode=timeout_mode,
                                     cursor_class=RawBatchCommandCursor, writes=operation.is_write,
                                     max_await_time_ms=operation.max_await_time_ms)
        return cast(RawBatchCommandCursor, cursor)  # an instance of the cursor_class given

    def _change_stream(self, options: WatchOptions, session: Optional[ClientSession]) -> CollectionChangeStream:
        return CollectionChangeStream(self, options, session)

    # -- indexes ---------------------------------------------------------------------------------

    def create_indexes(self, indexes: Sequence[IndexModel], session: Optional[ClientSession] = None,
                       comment: Any = None,
                       **kwargs: Any) -> list[str]:
        """Create several indexes in one command; returns their names. Options: maxTimeMS, commitQuorum."""
        validate_list("indexes", list(indexes) if isinstance(indexes, tuple) else indexes)
        operation = CreateIndexesOperation(
            self._database.name, self._name, list(indexes), commit_quorum=kwargs.pop("commitQuorum", None),
            max_time_ms=kwargs.pop("maxTimeMS", None), comment=comment, write_concern=self._write_concern,
            extra=kwargs)
        return self._run(operation, session)

    def create_index(self, keys: Any, session: Optional[ClientSession] = None, comment: Any = None,
                     **kwargs: Any) -> str:
        """Create one index from a key, a list of (key, direction) pairs or a mapping; returns its name.

        Index options (``name``, ``unique``, ``sparse``, ``expireAfterSeconds``,
        ``partialFilterExpression``, ``collation``, ``hidden``, ...) are keywords, plus the
        command's ``maxTimeMS`` and ``commitQuorum``.
        """
        command_options = {name: kwargs.pop(name) for name in ("maxTimeMS", "commitQuorum") if name in kwargs}
        return self.create_indexes([IndexModel(keys, **kwargs)], session=session, comment=comment,
                                   **command_options)[0]

    def drop_index(self, index_or_name: Any, session: Optional[ClientSession] = None, comment: Any = None,
                   **kwargs: Any) -> None:
        """Drop one index, by name or by the key list it was created with."""
        if index_or_name == "*":
            operation = DropIndexesOperation(self._database.name, self._name, drop_all=True, comment=comment,
                                             max_time_ms=kwargs.pop("maxTimeMS", None),
                                             write_concern=self._write_concern, extra=kwargs)
        else:
            if not isinstance(index_or_name, (str, list)):
                raise TypeError("index_or_name must be an instance of str or list")
            operation = DropIndexesOperation(self._database.name, self._name, index_or_name, comment=comment,
                                             max_time_ms=kwargs.pop("maxTimeMS", None),
                                             write_concern=self._write_concern, extra=kwargs)
        self._run(operation, session)

    def drop_indexes(self, session: Optional[ClientSession] = None, comment: Any = None, **kwargs: Any) -> None:
        """Drop every index but ``_id``'s."""
        self.drop_index("*", session=session, comment=comment, **kwargs)

    def list_indexes(self, session: Optional[ClientSession] = None, comment: Any = None, *,
                     timeout_mode: Optional[str] = None) -> CommandCursor:
        """A cursor over the index specifications (empty for a missing collection)."""
        operation = ListIndexesOperation(self._database.name, self._name, comment=comment,
                                         codec_options=self._codec_options.with_options(document_class=dict))
        return open_command_cursor(self, operation, session, timeout_mode=timeout_mode)

    def index_information(self, session: Optional[ClientSession] = None, comment: Any = None) -> dict[str, dict[str,
                          Any]]:
        """Index name -> specification, with ``key`` as a list of (key, direction) pairs."""
        return index_information(list(self.list_indexes(session=session, comment=comment)))

    # -- search indexes --------------------------------------------------------------------------

    def list_search_indexes(self, name: Optional[str] = None, session: Optional[ClientSession] = None,
                            comment: Any = None,
                            **kwargs: Any) -> CommandCursor:
        """Atlas Search indexes (all, or the one named); keywords are aggregate options."""
        if name is not None and not isinstance(name, str):
            raise TypeError(f"name must be an instance of str, not {type(name).__name__}")
        operation = list_search_indexes_operation(
            self._database.name, self._name, name, comment=comment, hint=kwargs.pop("hint", None),
            max_time_ms=kwargs.pop("maxTimeMS", None), read_preference=self._read_preference,
            codec_options=self._codec_options, extra=kwargs)
        return open_command_cursor(self, operation, session)

    def create_search_index(self, model: Union[Mapping[str, Any], SearchIndexModel],
                            session: Optional[ClientSession] = None,
                            comment: Any = None, **kwargs: Any) -> str:
        """Create one Atlas Search index; returns its name."""
        if isinstance(model, abc.Mapping):
            model = SearchIndexModel(**model)
        return self.create_search_indexes([model], session=session, comment=comment, **kwargs)[0]

    def create_search_indexes(self, models: list[SearchIndexModel], session: Optional[ClientSession] = None,
                              comment: Any = None,
                              **kwargs: Any) -> list[str]:
        """Create Atlas Search indexes; returns their names."""
        _no_extra_options("create_search_indexes", kwargs)
        operation = CreateSearchIndexesOperation(self._database.name, self._name, models, comment=comment)
        return self._run(operation, session)

    def drop_search_index(self, name: str, session: Optional[ClientSession] = None, comment: Any = None,
                          **kwargs: Any) -> None:
        _no_extra_options("drop_search_index", kwargs)
        self._run(DropSearchIndexOperation(self._database.name, self._name, name, comment=comment), session)

    def update_search_index(self, name: str, definition: Mapping[str, Any], session: Optional[ClientSession] = None,
                            comment: Any = None, **kwargs: Any) -> None:
        _no_extra_options("update_search_index", kwargs)
        self._run(UpdateSearchIndexOperation(self._database.name, self._name, name, definition, comment=comment),
                  session)

    # -- administration --------------------------------------------------------------------------

    def rename(self, new_name: str, session: Optional[ClientSession] = None, comment: Any = None,
               **kwargs: Any) -> dict[str, Any]:
        """Rename within the database; ``dropTarget=True`` replaces an existing collection."""
        if not isinstance(new_name, str):
            raise TypeError(f"new_name must be an instance of str, not {type(new_name).__name__}")
        if not new_name or ".." in new_name:
            raise InvalidName("collection names cannot be empty")
        if new_name[0] == "." or new_name[-1] == ".":
            raise InvalidName("collection names must not start or end with '.'")
        if "$" in new_name and not new_name.startswith("oplog.$main"):
            raise InvalidName("collection names must not contain '$'")
        operation = RenameCollectionOperation(
            self._database.name, self._name, new_name, drop_target=kwargs.pop("dropTarget", None),
            comment=comment, max_time_ms=kwargs.pop("maxTimeMS", None), write_concern=self._write_concern,
            extra=kwargs)
        return dict(self._run(operation, session))

    def drop(self, session: Optional[ClientSession] = None, comment: Any = None,
             encrypted_fields: Optional[Mapping[str, Any]] = None) -> None:
        """Drop this collection (with its indexes); a missing collection is not an error."""
        database = self._database.with_options(self._codec_options, self._read_preference, self._write_concern,
                                               self._read_concern, timeout_ms=self.timeout_ms)
        database.drop_collection(self._name, session=session, comment=comment, encrypted_fields=encrypted_fields)

    def options(self, session: Optional[ClientSession] = None, comment: Any = None) -> dict[str, Any]:
        """The options the collection was created with ({} if it does not exist)."""
        database = self._database.with_options(self._codec_options, self._read_preference, self._write_concern,
                                               self._read_concern, timeout_ms=self.timeout_ms)
        for description in database.list_collections(session=session, filter={"name": self._name},
                                                     comment=comment):
            options = dict(description.get("options", {}))
            options.pop("create", None)
            return options
        return {}

    # -- dunder (equality, hash, repr, bool and iteration: BaseObject) ---------------------------------

    def _identity(self) -> tuple[Any, str]:
        return self._database, self._name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        method = self._name.rsplit(".", 1)[-1]
        owner = "Collection" if "." in self._name else "Database"
        raise TypeError(f"'Collection' object is not callable. If you meant to call the {method!r} method on a "
                        f"{owner!r} object it is failing because no such method exists.")


def _no_extra_options(method: str, options: Mapping[str, Any]) -> None:
    if options:
        raise TypeError(f"{method} got options greenmongo does not send yet: {sorted(options)}")


__all__ = ["Collection", "ReturnDocument", "check_options"]
