"""Database: PyMongo's database object over the operations layer and the client's executor.

A Database is a cheap handle (a client, a name and four option objects); nothing is sent
until a method runs a command. ``command``/``cursor_command`` follow the Run Command spec: the
user's document is sent as written, primary unless a read preference is given, never
retried, with no read or write concern added.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence, Union

from greenmongo.bson.codec_options import DEFAULT_CODEC_OPTIONS, CodecOptions
from greenmongo.bson.dbref import DBRef
from greenmongo.change_stream import DatabaseChangeStream, Watchable, WatchOptions
from greenmongo.client_session import ClientSession, session_state
from greenmongo.collection import Collection, check_options
from greenmongo.command_cursor import CommandCursor, open_command_cursor
from greenmongo.common import BaseObject, timeout_seconds
from greenmongo.errors import CollectionInvalid, InvalidName, InvalidOperation
from greenmongo.operations.collections import (
    CreateCollectionOperation,
    DropCollectionOperation,
    ListCollectionsOperation,
    validate_collection_name,
)
from greenmongo.operations.run_command import RunCommandOperation, RunCursorCommandOperation, command_document
from greenmongo.options.read_concern import ReadConcern
from greenmongo.options.read_preferences import ReadPreference, ServerMode
from greenmongo.options.write_concern import WriteConcern

_INVALID_DATABASE_CHARACTERS = (" ", ".", "$", "/", "\\", "\x00", '"')

#: PyMongo methods greenmongo does not have yet: attribute access must not turn them into collections.
def validate_database_name(name: Any) -> str:
    if not isinstance(name, str):
        raise TypeError(f"name must be an instance of str, not {type(name).__name__}")
    if not name:
        raise InvalidName("database name cannot be the empty string")
    if name == "$external":
        return name
    for character in _INVALID_DATABASE_CHARACTERS:
        if character in name:
            raise InvalidName(f"database names cannot contain the character {character!r}")
    return name


def _check_name(name: str) -> None:
    """PyMongo's private database-name check, which libraries import (MongoEngine): InvalidName for an
    empty name or a forbidden character. As PyMongo's, it refuses ``$external`` (which only Database()
    lets through)."""
    if name == "$external":
        raise InvalidName("database names cannot contain the character '$'")
    validate_database_name(name)


class Database(BaseObject, Watchable):
    """A MongoDB database: ``client[name]`` or ``client.get_database(name, ...)``."""

    _kind = "Database"

    def __init__(self, client: Any, name: str, codec_options: Optional[CodecOptions] = None,
                 read_preference: Optional[ServerMode] = None, write_concern: Optional[WriteConcern] = None,
                 read_concern: Optional[ReadConcern] = None, *, timeout_ms: Optional[int] = None) -> None:
        check_options(codec_options, read_preference, write_concern, read_concern)
        self._client = client
        self._core = client._core
        self._timeout = timeout_seconds(timeout_ms, client.options.timeout)
        self._name = validate_database_name(name)
        self._codec_options: CodecOptions = codec_options or client.codec_options
        self._read_preference: ServerMode = read_preference or client.read_preference
        self._write_concern: WriteConcern = write_concern or client.write_concern
        self._read_concern: ReadConcern = read_concern or client.read_concern

    # -- attributes ------------------------------------------------------------------------

    @property
    def client(self) -> Any:
        return self._client

    @property
    def name(self) -> str:
        return self._name

    def with_options(self, codec_options: Optional[CodecOptions] = None, read_preference: Optional[ServerMode] = None,
                     write_concern: Optional[WriteConcern] = None, read_concern: Optional[ReadConcern] = None,
                     *, timeout_ms: Optional[int] = None) -> "Database":
        """A copy of this Database with some options replaced (``timeout_ms``: its timeoutMS)."""
        copy = Database(self._client, self._name, codec_options or self._codec_options,
                        read_preference or self._read_preference, write_concern or self._write_concern,
                        read_concern or self._read_concern)
        copy._timeout = timeout_seconds(timeout_ms, self._timeout)
        return copy

    # -- collections ---------------------------------------------------------------------------

    def __getattr__(self, name: str) -> Collection:
        if name.startswith("_"):
            raise AttributeError(f"Database has no attribute {name!r}. To access the {name} collection, use "
                                 f"database[{name!r}].")
        return self.__getitem__(name)

    def __getitem__(self, name: str) -> Collection:
        return Collection(self, name)

    def get_collection(self, name: str, codec_options: Optional[CodecOptions] = None,
                       read_preference: Optional[ServerMode] = None, write_concern: Optional[WriteConcern] = None,
                       read_concern: Optional[ReadConcern] = None, *, timeout_ms: Optional[int] = None) -> Collection:
        """A Collection with options of its own (unset ones come from this Database)."""
        return Collection(self, name, False, codec_options, read_preference, write_concern, read_concern,
                          timeout_ms=timeout_ms)

    def _run(self, operation: Any, session: Optional[ClientSession] = None,
             read_preference: Optional[ServerMode] = None) -> Any:
        state = session_state(session, self._core)
        return self._core.execute(operation, read_preference=read_preference, session=state,
                                  deadline=self._deadline(state))

    def list_collections(self, session: Optional[ClientSession] = None, filter: Optional[Mapping[str, Any]] = None,
                         comment: Any = None, **kwargs: Any) -> CommandCursor:
        """A cursor over the collection descriptions (``nameOnly``, ``authorizedCollections``, ``batchSize``)."""
        timeout_mode = kwargs.pop("timeout_mode", None)
        operation = ListCollectionsOperation(
            self._name, filter=filter, name_only=kwargs.pop("nameOnly", None),
            authorized_collections=kwargs.pop("authorizedCollections", None),
            batch_size=kwargs.pop("batchSize", None), comment=comment, codec_options=self._codec_options,
            extra=kwargs)
        return open_command_cursor(self, operation, session, timeout_mode=timeout_mode)

    def list_collection_names(self, session: Optional[ClientSession] = None, filter: Optional[Mapping[str, Any]] = None,
                              comment: Any = None, **kwargs: Any) -> list[str]:
        """The collection names (``nameOnly: true`` whenever the filter looks only at ``name``)."""
        operation = ListCollectionsOperation.for_names(
            self._name, filter=filter, authorized_collections=kwargs.pop("authorizedCollections", None),
            batch_size=kwargs.pop("batchSize", None), comment=comment,
            codec_options=DEFAULT_CODEC_OPTIONS, extra=kwargs)
        return [document["name"] for document in open_command_cursor(self, operation, session)]

    def create_collection(self, name: str, codec_options: Optional[CodecOptions] = None,
                          read_preference: Optional[ServerMode] = None, write_concern: Optional[WriteConcern] = None,
                          read_concern: Optional[ReadConcern] = None, session: Optional[ClientSession] = None,
                          check_exists: Optional[bool] = True, **kwargs: Any) -> Collection:
        """Create a collection with any ``create`` option (capped, size, validator, timeseries, ...).

        Raises CollectionInvalid when ``check_exists`` and the collection already exists.
        """
        validate_collection_name(name)
        self._core.check_usable(session_state(session, self._core))
        if "encryptedFields" in kwargs:
            raise NotImplementedError("Queryable Encryption (encryptedFields) is not supported by greenmongo")
        collection = Collection(self, name, False, codec_options, read_preference, write_concern, read_concern)
        if check_exists and name in self.list_collection_names(filter={"name": name}, session=session):
            raise CollectionInvalid(f"collection {name} already exists")
        comment = kwargs.pop("comment", None)
        max_time_ms = kwargs.pop("maxTimeMS", None)
        self._run(CreateCollectionOperation(self._name, name, kwargs, write_concern=collection.write_concern,
                                            comment=comment, max_time_ms=max_time_ms), session)
        return collection

    def drop_collection(self, name_or_collection: Union[str, Collection], session: Optional[ClientSession] = None,
                        comment: Any = None,
                        encrypted_fields: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
        """Drop a collection; dropping one that does not exist is not an error."""
        name = name_or_collection.name if isinstance(name_or_collection, Collection) else name_or_collection
        if not isinstance(name, str):
            raise TypeError(f"name_or_collection must be an instance of str or Collection, not {type(name).__name__}")
        if encrypted_fields is not None:
            raise NotImplementedError("Queryable Encryption (encrypted_fields) is not supported by greenmongo")
        reply = self._run(DropCollectionOperation(self._name, name, write_concern=self._write_concern,
                                                  comment=comment), session)
        return dict(reply)

    def validate_collection(self, name_or_collection: Union[str, Collection], scandata: bool = False,
                            full: bool = False, session: Optional[ClientSession] = None,
                            background: Optional[bool] = None,
                            comment: Any = None) -> dict[str, Any]:
        """Run ``validate``; raises CollectionInvalid when the server reports the collection invalid."""
        name = name_or_collection.name if isinstance(name_or_collection, Collection) else name_or_collection
        if not isinstance(name, str):
            raise TypeError(f"name_or_collection must be an instance of str or Collection, not {type(name).__name__}")
        command: dict[str, Any] = {"validate": name, "scandata": scandata, "full": full}
        if comment is not None:
            command["comment"] = comment
        if background is not None:
            command["background"] = background
        result = self.command(command, session=session)
        if "result" in result:  # very old servers report in text
            text = str(result["result"])
            if "exception" in text or "corrupt" in text:
                raise CollectionInvalid(f"{name} invalid: {text}")
        elif "raw" in result:  # mongos: one result per shard
            for shard in result["raw"].values():
                if not shard.get("valid", False):
                    raise CollectionInvalid(f"{name} invalid: {result!r}")
        elif not result.get("valid", False):
            raise CollectionInvalid(f"{name} invalid: {result!r}")
        return result

    def dereference(self, dbref: DBRef, session: Optional[ClientSession] = None, comment: Any = None,
                    **kwargs: Any) -> Any:
        """The document a DBRef points to (None if it is gone); the DBRef must name this database."""
        if not isinstance(dbref, DBRef):
            raise TypeError(f"cannot dereference a {type(dbref).__name__}")
        if dbref.database is not None and dbref.database != self._name:
            raise ValueError(f"trying to dereference a DBRef that points to another database "
                             f"({dbref.database!r} not {self._name!r})")
        return self[dbref.collection].find_one({"_id": dbref.id}, session=session, comment=comment, **kwargs)

    # -- commands -----------------------------------------------------------------------------

    def command(self, command: Union[str, Mapping[str, Any]], value: Any = 1, check: bool = True,
                allowable_errors: Optional[Sequence[Union[str, int]]] = None,
                read_preference: Optional[ServerMode] = None, codec_options: Optional[CodecOptions] = None,
                session: Optional[ClientSession] = None, comment: Any = None, **kwargs: Any) -> Any:
        """Run a command as written: ``db.command("ping")``, ``db.command("collMod", "c", validator=...)``.

        Runs on the primary unless ``read_preference`` says otherwise; not retried; no read or
        write concern is added. ``check=False`` returns an ``ok: 0`` reply instead of raising.
        Replies decode as dicts unless ``codec_options`` says otherwise.
        """
        if read_preference is not None and not isinstance(read_preference, ServerMode):
            raise TypeError(f"{read_preference!r} is not valid for read_preference")
        if codec_options is not None and not isinstance(codec_options, CodecOptions):
            raise TypeError("codec_options must be an instance of CodecOptions")
        document = command_document(command, value, comment, **kwargs)
        preference = read_preference or ReadPreference.PRIMARY
        if (getattr(session, "in_transaction", False) and read_preference is not None
                and read_preference.mode != ReadPreference.PRIMARY.mode):
            raise InvalidOperation(f"read preference in a transaction must be primary, not: {read_preference!r}")
        operation = RunCommandOperation(self._name, document, read_preference=preference,
                                        codec_options=codec_options or DEFAULT_CODEC_OPTIONS, check=check,
                                        allowable_errors=allowable_errors)
        return self._run(operation, session, preference)

    def cursor_command(self, command: Union[str, Mapping[str, Any]], value: Any = 1,
                       read_preference: Optional[ServerMode] = None, codec_options: Optional[CodecOptions] = None,
                       session: Optional[ClientSession] = None, comment: Any = None,
                       max_await_time_ms: Optional[int] = None,
                       *, timeout_mode: Optional[str] = None, **kwargs: Any) -> CommandCursor:
        """Run a command that returns a cursor and iterate it (getMores go to the same server).

        ``comment`` and ``max_await_time_ms`` apply to the getMores (as ``comment`` and
        ``maxTimeMS``); the command itself is sent as written.
        """
        if read_preference is not None and not isinstance(read_preference, ServerMode):
            raise TypeError(f"{read_preference!r} is not valid for read_preference")
        document = command_document(command, value, None, **kwargs)
        preference = read_preference or ReadPreference.PRIMARY
        operation = RunCursorCommandOperation(
            self._name, document, max_await_time_ms=max_await_time_ms, comment=comment,
            read_preference=preference, codec_options=codec_options or DEFAULT_CODEC_OPTIONS)
        # A tailable command (``tailable``/``awaitData`` in the document) makes a tailable cursor.
        return open_command_cursor(self, operation, session, timeout_mode=timeout_mode, read_preference=preference,
                                   tailable=bool(document.get("tailable")), await_data=bool(document.get("awaitData")),
                                   max_await_time_ms=max_await_time_ms)

    def aggregate(self, pipeline: list, session: Optional[ClientSession] = None, **kwargs: Any) -> CommandCursor:
        """A database-level pipeline (``$currentOp``, ``$listLocalSessions``, ``$documents``, ...).

        Options are the aggregate command's, camelCase (``allowDiskUse``, ``batchSize``,
        ``maxTimeMS``, ``collation``, ``hint``, ``let``, ``comment``, ``maxAwaitTimeMS``).
        """
        timeout_mode = kwargs.pop("timeout_mode", None)
        operation = self._aggregate_operation(self._name, None, pipeline, kwargs.pop("let", None),
                                              kwargs.pop("comment", None), kwargs, self._codec_options)
        return open_command_cursor(self, operation, session, timeout_mode=timeout_mode, writes=operation.is_write,
                                   max_await_time_ms=operation.max_await_time_ms)

    def _change_stream(self, options: WatchOptions, session: Optional[ClientSession]) -> DatabaseChangeStream:
        return DatabaseChangeStream(self, options, session)

    # -- dunder (equality, hash, repr, bool and iteration: BaseObject) -------------------------------

    def _identity(self) -> tuple[Any, str]:
        return self._client, self._name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"'Database' object is not callable. If you meant to call the {self._name!r} method on "
                        "a 'MongoClient' object it is failing because no such method exists.")


__all__ = ["Database", "validate_database_name"]
