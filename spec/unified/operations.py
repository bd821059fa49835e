"""Entity operations: a unified operation name and its arguments -> a call on the driver's API.

Each operation is declared once in ``OPERATIONS`` with the arguments it takes
and how each reaches the driver: ``snake`` arguments become PyMongo-style
keywords (``maxTimeMS`` -> ``max_time_ms``), ``camel`` ones travel unchanged
(PyMongo passes them straight into the command), ``positional`` ones in order.
An argument the operation does not declare, or a missing required one, is a
TestFileError (the spec: "MUST raise an error for an unsupported argument"),
raised before anything is sent. An argument or method the driver deliberately
lacks is NotSupported (a skip naming it).

``prepare`` does all of that and returns a zero-argument callable, so the
runner can tell the operation's own errors (expected or not) from mistakes in
the test file.

CSOT: every entity operation but the iteration ones takes ``timeoutMS``, which
the runner does not hand to the method: it runs the call inside the driver's
``timeout(seconds)`` block, as PyMongo's own runner does. A cursor-creating
operation is two phases, the call that creates the cursor and the iteration
(``iterate``); with a driver whose cursors keep the timeout they were created
with, only the first runs inside the block, so an ``iteration``-mode cursor's
``next`` calls each get the whole timeoutMS instead of the block's remainder.
With a driver whose cursors read the enclosing block at each call (PyMongo), the
iteration stays inside the block, and a cursor entity's later iteration
operations each run in a block of the creating operation's timeoutMS.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable, Optional

from spec.unified.entities import CursorEntity
from spec.unified.matching import MISSING
from spec.unified.encryption import operations as encryption_operations
from spec.unified.outcomes import NotSupported, TestFileError
from spec.unified.results import to_document

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def snake(name: str) -> str:
    """``maxTimeMS`` -> ``max_time_ms``; ``allowDiskUse`` -> ``allow_disk_use``."""
    return _CAMEL_BOUNDARY.sub("_", name).lower()


@dataclass(frozen=True)
class Operation:
    """How one unified operation maps onto the driver."""

    method: Optional[str]
    positional: tuple[str, ...] = ()
    snake_args: frozenset = frozenset()
    camel_args: frozenset = frozenset()
    required: frozenset = frozenset()
    ignored: frozenset = frozenset()
    call: Optional[Callable[..., Any]] = None
    """Custom implementation ``call(run, target, positional, keywords) -> result``."""
    result: str = "value"
    """value | documents (a list of root-level documents, fully iterated) | cursor | none."""
    iterate: Optional[Callable[[Any], Any]] = None
    """The second phase of a cursor-creating operation: the created cursor -> the result. It runs
    outside the operation's timeoutMS block when the driver's cursors keep their own timeout."""
    timed: bool = True
    """Takes the ``timeoutMS`` argument (every operation of the CSOT spec; not cursor iteration)."""

    @property
    def arguments(self) -> frozenset:
        names = frozenset(self.positional) | self.snake_args | self.camel_args | self.required | self.ignored
        return names | {"timeoutMS"} if self.timed else names


@dataclass
class Prepared:
    """A validated operation, ready to run."""

    invoke: Callable[[], Any]
    result_kind: str
    entity_kind: str = "bson"


def _op(method: Optional[str], positional: str = "", snake_args: str = "", camel_args: str = "", *,
        required: str = "", ignored: str = "", call: Optional[Callable[..., Any]] = None,
        result: str = "value", iterate: Optional[Callable[[Any], Any]] = None, timed: bool = True) -> Operation:
    """Arguments are space-separated names: passed positionally, as snake_case keywords, or unchanged."""
    return Operation(method, tuple(positional.split()), frozenset(snake_args.split()),
                     frozenset(camel_args.split()), frozenset(required.split()), frozenset(ignored.split()), call,
                     result, iterate, timed)


# -- custom operations -----------------------------------------------------------------

def _find(run: Any, collection: Any, args: list, kwargs: dict) -> Any:
    max_await = kwargs.pop("max_await_time_ms", None)
    cursor = collection.find(*args, **kwargs)
    if max_await is not None:
        cursor = cursor.max_await_time_ms(max_await)
    return cursor


def _find_cursor(run: Any, collection: Any, args: list, kwargs: dict) -> Any:
    tailable = kwargs.get("cursor_type") in (run.adapter.CursorType.TAILABLE, run.adapter.CursorType.TAILABLE_AWAIT)
    cursor = _find(run, collection, args, kwargs)
    return CursorEntity(cursor, "findCursor", prime=True, iteration_block=_blocking_iteration(run, cursor, tailable))


def _blocking_iteration(run: Any, cursor: Any, tailable: bool) -> Optional[Callable[[], Any]]:
    """For a tailable cursor with a timeoutMS: a ``timeout()`` block of that timeoutMS, under which
    iterateUntilDocumentOrError loops. The spec's blocking ``next`` on a tailable cursor gets one
    timeoutMS for all its getMores; PyMongo-shaped ``next`` returns at each empty batch instead, so
    the runner's loop stands in for the blocking call."""
    if not tailable or run.adapter.timeout is None:
        return None
    seconds = run.adapter.cursor_timeout(cursor)
    if seconds is None:
        return None
    return lambda: run.adapter.timeout(seconds)


def _watch(run: Any, target: Any, args: list, kwargs: dict) -> Any:
    return CursorEntity(target.watch(*args, **kwargs), "changeStream", prime=False)


def _bulk_models(run: Any, requests: list, with_namespace: bool) -> list:
    models = []
    for request in requests:
        if not isinstance(request, Mapping) or len(request) != 1:
            raise TestFileError(f"a write model needs exactly one key, got {request!r}")
        ((kind, spec),) = request.items()
        model_class = run.adapter.write_models.get(kind)
        if model_class is None:
            raise TestFileError(f"unknown write model {kind!r}")
        spec = dict(spec)
        kwargs: dict = {}
        if with_namespace:
            kwargs["namespace"] = spec.pop("namespace")
        first = {"insertOne": ("document",), "replaceOne": ("filter", "replacement"),
                 "updateOne": ("filter", "update"), "updateMany": ("filter", "update")}.get(kind, ("filter",))
        try:
            positional = [spec.pop(name) for name in first]
        except KeyError as exc:
            raise TestFileError(f"{kind} needs {exc.args[0]!r}") from None
        for key, value in spec.items():
            if key == "rawData":
                raise NotSupported(run.adapter.unsupported_arguments.get("rawData", UNWIRED_ARGUMENTS["rawData"]))
            if key not in ("upsert", "collation", "arrayFilters", "hint", "sort"):
                raise TestFileError(f"{kind}: unknown argument {key!r}")
            kwargs[snake(key)] = value
        models.append(model_class(*positional, **kwargs))
    return models


def _bulk_write(run: Any, collection: Any, args: list, kwargs: dict) -> Any:
    return collection.bulk_write(_bulk_models(run, args[0], False), **kwargs)


def _client_bulk_write(run: Any, client: Any, args: list, kwargs: dict) -> Any:
    return client.bulk_write(_bulk_models(run, args[0], True), **kwargs)


def _create_index(run: Any, collection: Any, args: list, kwargs: dict) -> Any:
    return collection.create_index(list(args[0].items()), **kwargs)


def _search_model(run: Any, model: Mapping[str, Any]) -> Any:
    if run.adapter.SearchIndexModel is None:
        raise NotSupported(f"{run.adapter.name} has no SearchIndexModel")
    return run.adapter.SearchIndexModel(model["definition"], name=model.get("name"), type=model.get("type"))


def _create_search_index(run: Any, collection: Any, args: list, kwargs: dict) -> Any:
    return collection.create_search_index(_search_model(run, args[0]), **kwargs)


def _create_search_indexes(run: Any, collection: Any, args: list, kwargs: dict) -> Any:
    return collection.create_search_indexes([_search_model(run, model) for model in args[0]], **kwargs)


def _list_search_indexes(run: Any, collection: Any, args: list, kwargs: dict) -> Any:
    options = kwargs.pop("aggregation_options", None) or {}
    return list(collection.list_search_indexes(*args, **kwargs, **options))


def _index_names(cursor: Any) -> list:
    return [index["name"] for index in cursor]


def create_collection(database: Any, name: str, **options: Any) -> Any:
    """``create`` exactly once: PyMongo-shaped drivers would otherwise send listCollections first."""
    if "check_exists" in inspect.signature(database.create_collection).parameters:
        options["check_exists"] = False
    return database.create_collection(name, **options)


def _create_collection(run: Any, database: Any, args: list, kwargs: dict) -> Any:
    return create_collection(database, *args, **kwargs)


def _modify_collection(run: Any, database: Any, args: list, kwargs: dict) -> Any:
    return database.command("collMod", args[0], **kwargs)


def _run_command(run: Any, database: Any, args: list, kwargs: dict) -> Any:
    return database.command(args[0], **kwargs)


def _cursor_type_fields(run: Any, cursor_type: Any) -> dict:
    """runCursorCommand's cursorType as the command document says it: the driver derives the cursor's
    kind from the command (PyMongo's cursor_command has no cursor type parameter)."""
    types = run.adapter.CursorType
    if cursor_type == types.TAILABLE:
        return {"tailable": True}
    if cursor_type == types.TAILABLE_AWAIT:
        return {"tailable": True, "awaitData": True}
    return {}


def _command_cursor(run: Any, database: Any, args: list, kwargs: dict) -> Any:
    batch_size = kwargs.pop("batch_size", None)
    max_time_ms = kwargs.pop("max_time_ms", None)
    if max_time_ms is not None:
        kwargs["max_await_time_ms"] = max_time_ms  # maxTimeMS of the getMores
    # A dict update keeps the command name first (a key the command already has keeps its place).
    command = {**args[0], **_cursor_type_fields(run, kwargs.pop("cursor_type", None))}
    cursor = database.cursor_command(command, **kwargs)
    if batch_size is not None:
        cursor.batch_size(batch_size)
    return cursor


def _create_command_cursor(run: Any, database: Any, args: list, kwargs: dict) -> Any:
    tailable = bool(args[0].get("tailable") or _cursor_type_fields(run, kwargs.get("cursor_type")))
    cursor = _command_cursor(run, database, args, kwargs)
    return CursorEntity(cursor, "commandCursor", prime=False,
                        iteration_block=_blocking_iteration(run, cursor, tailable))


def _append_metadata(run: Any, client: Any, args: list, kwargs: dict) -> Any:
    if run.adapter.DriverInfo is None:
        raise NotSupported(f"{run.adapter.name} has no DriverInfo")
    options = {key: value for key, value in args[0].items() if key in ("name", "version", "platform")}
    client.append_metadata(run.adapter.DriverInfo(**options))
    return MISSING


def _with_transaction(run: Any, session: Any, args: list, kwargs: dict) -> Any:
    operations = args[0]

    def callback(_session: Any) -> None:
        for operation in operations:
            run.execute(operation, in_callback=True)

    return session.with_transaction(callback, **kwargs)


def _start_transaction(run: Any, session: Any, args: list, kwargs: dict) -> Any:
    run.started_transaction = True
    session.start_transaction(**kwargs)
    return MISSING


def _hex_source(source: Any) -> io.BytesIO:
    if not isinstance(source, Mapping) or set(source) != {"$$hexBytes"}:
        raise TestFileError(f"upload source must be {{$$hexBytes: ...}}, got {source!r}")
    text = source["$$hexBytes"]
    if not isinstance(text, str) or not re.fullmatch(r"(?:[0-9a-fA-F]{2})*", text):
        raise TestFileError(f"malformed $$hexBytes {text!r}")
    return io.BytesIO(bytes.fromhex(text))


def _upload(run: Any, bucket: Any, args: list, kwargs: dict) -> Any:
    filename, source = args
    return bucket.upload_from_stream(filename, _hex_source(source), **kwargs)


def _upload_with_id(run: Any, bucket: Any, args: list, kwargs: dict) -> Any:
    file_id, filename, source = args
    bucket.upload_from_stream_with_id(file_id, filename, _hex_source(source), **kwargs)
    return MISSING


def _download(run: Any, bucket: Any, args: list, kwargs: dict) -> Any:
    return bucket.open_download_stream(*args, **kwargs).read()


def _download_by_name(run: Any, bucket: Any, args: list, kwargs: dict) -> Any:
    return bucket.open_download_stream_by_name(*args, **kwargs).read()


def _bucket_find(run: Any, bucket: Any, args: list, kwargs: dict) -> Any:
    return bucket.find(*args, **kwargs)


def _files_documents(cursor: Any) -> list:
    """GridOut objects -> their files collection documents (the spec's result: the documents)."""
    return [grid_out._file for grid_out in cursor]  # PyMongo's and greenmongo's GridOut keep it there


def _iterate_until_document(run: Any, cursor: CursorEntity, args: list, kwargs: dict) -> Any:
    return cursor.iterate_until_document()


def _iterate_once(run: Any, cursor: CursorEntity, args: list, kwargs: dict) -> Any:
    return cursor.iterate_once()


def _close_cursor(run: Any, cursor: CursorEntity, args: list, kwargs: dict) -> Any:
    cursor.close()
    return MISSING


_FIND = "projection skip limit batchSize sort hint maxTimeMS collation comment session allowDiskUse let min max " \
        "returnKey showRecordId noCursorTimeout allowPartialResults cursorType maxAwaitTimeMS timeoutMode"
_WATCH = "batchSize collation comment fullDocument fullDocumentBeforeChange maxAwaitTimeMS resumeAfter " \
         "startAfter startAtOperationTime showExpandedEvents session"
_CURSOR_COMMAND = "readPreference session batchSize maxTimeMS comment cursorType timeoutMode"
#: Spec arguments of many operations that the runner does not hand to a PyMongo-shaped driver yet:
#: a test using one is skipped with this reason (or the adapter's own, when it gives one).
UNWIRED_ARGUMENTS = {
    "rawData": "rawData (time-series bucket access) is not passed to the driver by the runner yet",
}

OPERATIONS: dict[str, dict[str, Operation]] = {
    "client": {
        "listDatabases": _op("list_databases", "", "session comment", "filter nameOnly authorizedDatabases",
                             call=lambda run, c, a, k: list(c.list_databases(*a, **k)), result="documents"),
        "listDatabaseNames": _op("list_database_names", "", "session comment"),
        "listDatabaseObjects": _op("list_database_objects", "", "session comment filter"),
        "createChangeStream": _op("watch", "", "pipeline " + _WATCH, call=_watch, result="cursor"),
        "clientBulkWrite": _op("bulk_write", "models", "session ordered verboseResults bypassDocumentValidation "
                               "comment let writeConcern", call=_client_bulk_write),
        "dropDatabase": _op("drop_database", "database", "session comment"),
        "close": _op("close", result="none"),
        "appendMetadata": _op("append_metadata", "driverInfoOptions", call=_append_metadata),
    },
    "database": {
        "runCommand": _op("command", "command", "readPreference session", required="commandName",
                          ignored="commandName", call=_run_command),
        "runCursorCommand": _op("cursor_command", "command", _CURSOR_COMMAND, required="commandName",
                                ignored="commandName", call=_command_cursor, iterate=list, result="documents"),
        "createCommandCursor": _op("cursor_command", "command", _CURSOR_COMMAND, required="commandName",
                                   ignored="commandName", call=_create_command_cursor, result="cursor"),
        "aggregate": _op("aggregate", "pipeline", "session timeoutMode", "allowDiskUse batchSize "
                         "bypassDocumentValidation collation comment let maxTimeMS maxAwaitTimeMS hint",
                         iterate=list, result="documents"),
        "listCollections": _op("list_collections", "", "session filter comment timeoutMode",
                               "batchSize nameOnly authorizedCollections", iterate=list, result="documents"),
        "listCollectionNames": _op("list_collection_names", "", "session filter comment", "authorizedCollections"),
        "listCollectionObjects": _op("list_collection_objects", "", "session filter comment"),
        "createCollection": _op("create_collection", "collection", "session",
                                "capped size max timeseries clusteredIndex changeStreamPreAndPostImages "
                                "expireAfterSeconds viewOn pipeline validator validationLevel validationAction "
                                "collation storageEngine indexOptionDefaults encryptedFields comment",
                                call=_create_collection),
        "dropCollection": _op("drop_collection", "collection", "session comment encryptedFields"),
        "modifyCollection": _op("command", "collection", "session",
                                "validator validationLevel validationAction index changeStreamPreAndPostImages "
                                "expireAfterSeconds timeseries comment", call=_modify_collection),
        "createChangeStream": _op("watch", "", "pipeline " + _WATCH, call=_watch, result="cursor"),
    },
    "collection": {
        "aggregate": _op("aggregate", "pipeline", "session let comment timeoutMode",
                         "allowDiskUse batchSize bypassDocumentValidation collation maxTimeMS maxAwaitTimeMS hint",
                         iterate=list, result="documents"),
        "bulkWrite": _op("bulk_write", "requests", "ordered bypassDocumentValidation session comment let",
                         call=_bulk_write),
        "countDocuments": _op("count_documents", "filter", "session comment", "skip limit collation hint maxTimeMS"),
        "count": _op("count", "", "session comment filter", "skip limit collation hint maxTimeMS"),
        "estimatedDocumentCount": _op("estimated_document_count", "", "comment", "maxTimeMS"),
        "find": _op("find", "filter", _FIND, call=_find, iterate=list, result="documents"),
        "findOne": _op("find_one", "filter", _FIND),
        "createFindCursor": _op("find", "filter", _FIND, call=_find_cursor, result="cursor"),
        "findOneAndDelete": _op("find_one_and_delete", "filter", "projection sort hint session let comment",
                                "collation maxTimeMS"),
        "findOneAndReplace": _op("find_one_and_replace", "filter replacement",
                                 "projection sort upsert returnDocument hint session let comment",
                                 "collation maxTimeMS bypassDocumentValidation"),
        "findOneAndUpdate": _op("find_one_and_update", "filter update",
                                "projection sort upsert returnDocument arrayFilters hint session let comment",
                                "collation maxTimeMS bypassDocumentValidation"),
        "insertOne": _op("insert_one", "document", "bypassDocumentValidation session comment"),
        "insertMany": _op("insert_many", "documents", "ordered bypassDocumentValidation session comment"),
        "updateOne": _op("update_one", "filter update", "upsert bypassDocumentValidation collation arrayFilters "
                         "hint session let sort comment"),
        "updateMany": _op("update_many", "filter update", "upsert arrayFilters bypassDocumentValidation collation "
                          "hint session let comment"),
        "replaceOne": _op("replace_one", "filter replacement", "upsert bypassDocumentValidation collation hint "
                          "session let sort comment"),
        "deleteOne": _op("delete_one", "filter", "collation hint session let comment"),
        "deleteMany": _op("delete_many", "filter", "collation hint session let comment"),
        "distinct": _op("distinct", "fieldName filter", "session comment hint", "collation maxTimeMS"),
        "createIndex": _op("create_index", "keys", "session comment",
                           "name unique sparse expireAfterSeconds hidden partialFilterExpression collation "
                           "maxTimeMS", call=_create_index),
        "dropIndex": _op("drop_index", "name", "session comment", "maxTimeMS"),
        "dropIndexes": _op("drop_indexes", "", "session comment", "maxTimeMS"),
        "listIndexes": _op("list_indexes", "", "session comment timeoutMode", "batchSize", iterate=list,
                           result="documents"),
        "listIndexNames": _op("list_indexes", "", "session comment", iterate=_index_names),
        "drop": _op("drop", "", "session comment encryptedFields", result="none"),
        "rename": _op("rename", "to", "session comment", "dropTarget"),
        "createChangeStream": _op("watch", "", "pipeline " + _WATCH, call=_watch, result="cursor"),
        "createSearchIndex": _op("create_search_index", "model", call=_create_search_index),
        "createSearchIndexes": _op("create_search_indexes", "models", call=_create_search_indexes),
        "dropSearchIndex": _op("drop_search_index", "name", result="none"),
        "updateSearchIndex": _op("update_search_index", "name definition", result="none"),
        "listSearchIndexes": _op("list_search_indexes", "", "name aggregationOptions",
                                 call=_list_search_indexes, result="documents"),
        "mapReduce": _op("map_reduce", "map reduce out", "session"),
    },
    "session": {
        "startTransaction": _op("start_transaction", "", "readConcern writeConcern readPreference maxCommitTimeMS",
                                call=_start_transaction),
        "commitTransaction": _op("commit_transaction", result="none"),
        "abortTransaction": _op("abort_transaction", result="none"),
        "endSession": _op("end_session", result="none"),
        "withTransaction": _op("with_transaction", "callback",
                               "readConcern writeConcern readPreference maxCommitTimeMS", call=_with_transaction),
        "getSnapshotTime": _op("snapshot_time"),
    },
    "bucket": {
        "delete": _op("delete", "id", "session", result="none"),
        "download": _op("open_download_stream", "id", "session", call=_download),
        "downloadByName": _op("open_download_stream_by_name", "filename", "revision session",
                              call=_download_by_name),
        "upload": _op("upload_from_stream", "filename source", "chunkSizeBytes metadata session",
                      ignored="disableMD5 contentType", call=_upload),
        "uploadWithId": _op("upload_from_stream_with_id", "id filename source", "chunkSizeBytes metadata session",
                            ignored="disableMD5 contentType", call=_upload_with_id),
        "rename": _op("rename", "id newFilename", "session", result="none"),
        "renameByName": _op("rename_by_name", "filename newFilename", "session", result="none"),
        "deleteByName": _op("delete_by_name", "filename", "session", result="none"),
        "drop": _op("drop", "", "session", result="none"),
        "find": _op("find", "filter", "batchSize limit skip sort noCursorTimeout maxTimeMS session",
                    call=_bucket_find, iterate=_files_documents, result="documents"),
    },
}

_CURSOR_OPERATIONS = {
    "iterateUntilDocumentOrError": _op(None, call=_iterate_until_document, timed=False),
    "iterateOnce": _op(None, call=_iterate_once, timed=False),
    "close": _op(None, call=_close_cursor, result="none"),
}
for _kind in ("changeStream", "findCursor", "commandCursor"):
    OPERATIONS[_kind] = dict(_CURSOR_OPERATIONS)
OPERATIONS["clientEncryption"] = encryption_operations(_op)

_ENTITY_KIND_OF_RESULT = {"createCollection": "collection"}


# -- argument conversion -----------------------------------------------------------------------

def _convert(run: Any, name: str, value: Any) -> Any:
    """Unified argument values that stand for driver objects (sessions, concerns, enums)."""
    if name == "session":
        return run.entities.get(value, "session")
    if name == "readConcern":
        return run.context.read_concern(value)
    if name == "writeConcern":
        return run.context.write_concern(value)
    if name == "readPreference":
        return run.context.read_preference(value)
    if name == "returnDocument":
        if not isinstance(value, str) or value.lower() not in ("before", "after"):
            raise TestFileError(f"returnDocument must be Before or After, got {value!r}")
        return getattr(run.adapter.ReturnDocument, value.upper())
    if name == "cursorType":
        cursor_types = {"nontailable": "NON_TAILABLE", "tailable": "TAILABLE", "tailableawait": "TAILABLE_AWAIT"}
        if not isinstance(value, str) or value.lower() not in cursor_types:
            raise TestFileError(f"unknown cursorType {value!r}")
        return getattr(run.adapter.CursorType, cursor_types[value.lower()])
    if name == "timeoutMode":
        modes = {"cursorLifetime": "CURSOR_LIFETIME", "iteration": "ITERATION"}
        if value not in modes:
            raise TestFileError(f"unknown timeoutMode {value!r}")
        return getattr(run.adapter.TimeoutMode, modes[value])
    return value


def _keyword(operation: Operation, name: str) -> str:
    return name if name in operation.camel_args else snake(name)


def prepare(run: Any, kind: str, target: Any, name: str, arguments: Optional[Mapping[str, Any]]) -> Prepared:
    """Validate and convert one operation's arguments; return what to call (nothing is sent yet)."""
    table = OPERATIONS.get(kind)
    if table is None or name not in table:
        raise TestFileError(f"unsupported operation {name!r} on a {kind} entity")
    operation = table[name]
    arguments = dict(arguments or {})
    for argument in arguments:
        reason = run.adapter.unsupported_arguments.get(argument)
        if argument in UNWIRED_ARGUMENTS and argument not in operation.arguments:
            reason = reason or UNWIRED_ARGUMENTS[argument]
        if reason and (argument in operation.arguments or argument in UNWIRED_ARGUMENTS):
            raise NotSupported(reason)
    unknown = set(arguments) - operation.arguments
    if unknown:
        raise TestFileError(f"{name}: unsupported arguments {sorted(unknown)}")
    missing = (set(operation.positional) | operation.required) - set(arguments)
    if missing:
        raise TestFileError(f"{name}: missing required arguments {sorted(missing)}")
    reason = run.adapter.unsupported_operations.get(name)
    if reason:
        raise NotSupported(reason)
    timeout = _timeout_seconds(run, arguments.pop("timeoutMS", None))
    positional = [_convert(run, arg, arguments[arg]) for arg in operation.positional]
    keywords = {_keyword(operation, arg): _convert(run, arg, value) for arg, value in arguments.items()
                if arg not in operation.positional and arg not in operation.ignored}
    if operation.method is not None:
        # Look on the class: Database/Collection.__getattr__ would hand back a sub-collection.
        if getattr(type(target), operation.method, None) is None:
            raise NotSupported(f"{run.adapter.name}'s {type(target).__name__} has no {operation.method} "
                               f"(unified operation {name})")
        if operation.call is None:
            _check_keywords(run, getattr(target, operation.method), keywords, name)

    iterate = operation.iterate
    iterate_in_block = not run.adapter.cursors_keep_timeout

    def invoke() -> Any:
        with _timeout_block(run, timeout):
            if operation.call is not None:
                result = operation.call(run, target, positional, keywords)
            else:
                result = getattr(target, operation.method)(*positional, **keywords)
            if iterate is not None and iterate_in_block:
                result = iterate(result)
        if iterate is not None and not iterate_in_block:
            result = iterate(result)  # the cursor keeps the timeout it was created with
        if (timeout is not None and iterate_in_block and isinstance(result, CursorEntity)
                and result.iteration_block is None):
            # The driver's iteration reads the enclosing block only: bound each iteration operation by
            # the creating one's timeoutMS (else a change stream created under it would wait forever).
            result.iteration_block = lambda: run.adapter.timeout(timeout)
        if operation.result == "none":
            return MISSING
        return result

    entity_kind = "bson"
    if operation.result == "cursor":
        entity_kind = {"createChangeStream": "changeStream", "createFindCursor": "findCursor",
                       "createCommandCursor": "commandCursor"}[name]
    entity_kind = _ENTITY_KIND_OF_RESULT.get(name, entity_kind)
    return Prepared(invoke, operation.result, entity_kind)


def _timeout_seconds(run: Any, timeout_ms: Any) -> Optional[float]:
    """The ``timeoutMS`` argument in seconds (None: not given)."""
    if timeout_ms is None:
        return None
    if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, (int, float)):
        raise TestFileError(f"timeoutMS must be a number, got {timeout_ms!r}")
    if run.adapter.timeout is None:
        raise NotSupported(f"{run.adapter.name} has no timeout() block for an operation's timeoutMS")
    return timeout_ms / 1000.0


def _timeout_block(run: Any, seconds: Optional[float]) -> Any:
    """The driver's ``timeout(seconds)`` block for an operation's timeoutMS, or nothing."""
    if seconds is None:
        return contextlib.nullcontext()
    return run.adapter.timeout(seconds)


def _check_keywords(run: Any, method: Callable, keywords: Mapping[str, Any], name: str) -> None:
    """A keyword the driver's method cannot take is a driver limitation, not an operation error."""
    try:
        parameters = inspect.signature(method).parameters
    except (TypeError, ValueError):
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return
    for keyword in keywords:
        if keyword not in parameters:
            raise NotSupported(f"{run.adapter.name}'s {getattr(method, '__qualname__', name)} has no "
                               f"{keyword!r} parameter (unified operation {name})")


def result_document(value: Any) -> Any:
    """Convert a driver result for matching or saving (model objects -> documents)."""
    return to_document(value)
