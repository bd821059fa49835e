"""MongoClient: PyMongo's client-level API over one ClientCore (greenmongo/engine/core.py).

The core is what the client is at run time (topology, executor, server sessions, cluster clock,
queued killCursors, the thread and fork guard); MongoClient hands it to every Database,
Collection, cursor and session it creates. A client belongs to the gevent hub of the OS thread
that created it; after ``os.fork()`` a child's clients reconnect on first use; ``close()`` stops
every greenlet the client started.
"""

from __future__ import annotations

from types import GenericAlias
from typing import Any, Iterable, Mapping, NoReturn, Optional, Sequence, Union


import greenmongo.net.dns  # noqa: F401  (registers the mongodb+srv resolver; dnspython itself loads with the first one)
from greenmongo.bson.codec_options import CodecOptions
from greenmongo.change_stream import ClusterChangeStream, Watchable, WatchOptions
from greenmongo.client_session import ClientSession, SessionOptions, session_state
from greenmongo.command_cursor import open_command_cursor
from greenmongo.database import Database
from greenmongo.driver_info import DriverInfo
from greenmongo.engine.core import ClientCore
from greenmongo.engine.deadline import resolve
from greenmongo.errors import ConfigurationError, InvalidName, InvalidOperation
from greenmongo.logs.messages import apply_log_settings, parse_log_settings
from greenmongo.operations.client_bulk import ClientBulkWrite
from greenmongo.operations.databases import DropDatabaseOperation, ListDatabasesOperation
from greenmongo.client_options import ClientOptions
from greenmongo.options.uri import SRV_SCHEME  # noqa: F401  (PyMongo's pymongo.mongo_client has it)
from greenmongo.sdam.server_type import ServerType
from greenmongo.sdam.topology_type import TopologyType


class MongoClient(Watchable):
    """A client for a MongoDB deployment; PyMongo's constructor and client-level methods.

    ``MongoClient(host=None, port=None, document_class=dict, tz_aware=False, connect=True, **kwargs)``:
    ``host`` is a connection string, a ``host[:port]`` or a list of them; keyword options win over
    the URI's. With ``connect=False`` nothing happens until the first operation.
    ``MongoClient[dict]`` is a generic alias, as PyMongo's ``MongoClient[_DocumentType]``.

    ``auto_encryption_opts`` (an :class:`~greenmongo.encryption_options.AutoEncryptionOpts`) turns on automatic
    encryption and decryption. Enabling Client Side Encryption reduces the maximum write batch size and may
    have a negative performance impact.
    """

    HOST = "localhost"
    PORT = 27017
    __class_getitem__: Any = classmethod(GenericAlias)

    def __init__(
        self,
        host: Union[str, Sequence[str], None] = None,
        port: Optional[int] = None,
        document_class: Optional[type] = None,
        tz_aware: Optional[bool] = None,
        connect: Optional[bool] = None,
        type_registry: Any = None,
        **kwargs: Any,
    ) -> None:
        if document_class is not None:
            kwargs["document_class"] = document_class
        if tz_aware is not None:
            kwargs["tz_aware"] = tz_aware
        if type_registry is not None:
            kwargs["type_registry"] = type_registry
        self._options = ClientOptions(host, port, **kwargs)
        # The Logging spec's environment variables, read at each client's construction; a logger the
        # application configured itself keeps its level (programmatic configuration wins).
        apply_log_settings(parse_log_settings())
        self._core = ClientCore(self._options)
        if self._options.auto_encryption_opts is not None:
            self._start_auto_encryption(host, port, kwargs)
        #: timeoutMS in seconds (None: not set), the default of every database and collection.
        self._timeout = self._options.timeout
        if self._options.connect if connect is None else connect:  # the keyword, else the URI's connect=
            self._core.open()

    def _start_auto_encryption(self, host: Any, port: Any, kwargs: dict[str, Any]) -> None:
        """Wire automatic encryption (greenmongo/crypt/auto.py); the internal client, when needed, has this
        client's options but minPoolSize=0 and no auto_encryption_opts (Client Side Encryption spec)."""
        def internal_client() -> "MongoClient":
            options = {key: value for key, value in kwargs.items()
                       if key.lower() not in ("auto_encryption_opts", "minpoolsize", "connect")}
            return type(self)(host, port, minPoolSize=0, connect=False, **options)

        try:
            from greenmongo.crypt.auto import build as build_auto_encrypter  # libmongocrypt's glue: on demand
            encrypter = build_auto_encrypter(self, self._options.auto_encryption_opts, internal_client,
                                             self._options.max_pool_size or 0)
        except BaseException:
            self._core.close()
            raise
        self._core.encrypter = encrypter

    # -- configuration -------------------------------------------------------------------

    @property
    def options(self) -> ClientOptions:
        return self._options

    @property
    def codec_options(self) -> CodecOptions:
        return self._options.codec_options

    @property
    def read_preference(self) -> Any:
        return self._options.read_preference

    @property
    def write_concern(self) -> Any:
        return self._options.write_concern

    @property
    def read_concern(self) -> Any:
        return self._options.read_concern

    @property
    def topology_description(self) -> Any:
        return self._core.topology.description

    @property
    def address(self) -> Optional[tuple]:
        """(host, port) of the server operations go to, for a single server or a replica set primary."""
        core = self._core
        core.check_usable()
        description = core.topology.description
        kind = description.topology_type.name
        if kind == "Sharded":
            raise InvalidOperation("Cannot use `address` on a sharded topology: use `nodes` instead")
        server = core.topology.select_server(self.read_preference if kind != "ReplicaSetNoPrimary" else None,
                                              is_write=kind != "Single", operation="address")
        try:
            return server.address
        finally:
            server.end_operation()

    @property
    def nodes(self) -> frozenset:
        """The addresses of the servers the client currently knows, as (host, port) pairs."""
        return frozenset(address for address, sd in self._core.topology.description.server_descriptions().items()
                         if sd.is_server_type_known)

    # -- databases -----------------------------------------------------------------------

    def __getitem__(self, name: str) -> Any:
        return self.get_database(name)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(f"MongoClient has no attribute {name!r}. To access the {name} database, "
                                 f"use client[{name!r}].")
        return self.get_database(name)

    def get_database(self, name: Optional[str] = None, codec_options: Optional[CodecOptions] = None,
                     read_preference: Any = None, write_concern: Any = None, read_concern: Any = None, *,
                     timeout_ms: Optional[int] = None) -> Any:
        if name is None:
            name = self._options.database
            if name is None:
                raise ConfigurationError("No default database name defined or provided.")
        return Database(self, name, codec_options, read_preference, write_concern, read_concern,
                        timeout_ms=timeout_ms)

    def get_default_database(self, default: Optional[str] = None, codec_options: Optional[CodecOptions] = None,
                             read_preference: Any = None, write_concern: Any = None,
                             read_concern: Any = None) -> Any:
        """The connection string's database, else ``default``; ConfigurationError when neither names one."""
        name = self._options.database or default
        if name is None:
            raise ConfigurationError("No default database name defined or provided.")
        return self.get_database(name, codec_options, read_preference, write_concern, read_concern)

    def list_databases(self, session: Optional[ClientSession] = None, comment: Any = None, **kwargs: Any) -> Any:
        options = dict(kwargs)
        operation = ListDatabasesOperation(
            filter=options.pop("filter", None), name_only=options.pop("nameOnly", None),
            authorized_databases=options.pop("authorizedDatabases", None), comment=comment,
            codec_options=self.codec_options, extra=options)
        return open_command_cursor(self, operation, session)

    def list_database_names(self, session: Optional[ClientSession] = None, comment: Any = None) -> list:
        return [doc["name"] for doc in self.list_databases(session, comment=comment, nameOnly=True)]

    def drop_database(self, name_or_database: Any, session: Optional[ClientSession] = None,
                      comment: Any = None) -> None:
        name = getattr(name_or_database, "name", name_or_database)
        if not isinstance(name, str):
            raise TypeError("name_or_database must be an instance of str or a Database")
        if not name:
            raise InvalidName("database name cannot be empty")
        state = session_state(session, self._core)
        self._core.execute(DropDatabaseOperation(name, write_concern=self.write_concern, comment=comment),
                           session=state, deadline=resolve(self._timeout, state))

    def server_info(self, session: Optional[ClientSession] = None) -> dict:
        return self.admin.command("buildinfo", session=session)

    def bulk_write(self, models: Iterable[Any], session: Optional[ClientSession] = None, ordered: bool = True,
                   verbose_results: bool = False, bypass_document_validation: Optional[bool] = None,
                   comment: Any = None, let: Optional[Mapping[str, Any]] = None,
                   write_concern: Any = None) -> Any:
        """The server 8.0 ``bulkWrite`` command across namespaces (CRUD "client bulk write")."""
        if self._options.auto_encryption_opts is not None:
            # CRUD spec (client bulk write, "Auto-Encryption"): this exact message.
            raise InvalidOperation("bulkWrite does not currently support automatic encryption")
        core = self._core
        state = session_state(session, core)
        core.check_usable(state)
        in_transaction = state is not None and state.in_transaction
        if in_transaction and write_concern is not None:
            raise InvalidOperation("Cannot set write concern after starting a transaction")
        bulk = ClientBulkWrite(models, ordered=ordered, verbose_results=verbose_results,
                               bypass_document_validation=bypass_document_validation, comment=comment, let=let,
                               write_concern=None if in_transaction else write_concern or self.write_concern,
                               codec_options=self.codec_options)

        deadline = resolve(self._timeout, state)  # one deadline for every batch and its results

        def run(batch: Any) -> None:
            # The batch's reply is a cursor over per-operation results: the core drains it.
            core.drain(core.execute(batch, session=state, deadline=deadline), batch.record_results, deadline)

        with core.operation_span():
            try:
                core.execute_batches(bulk, state, run, deadline)
            except Exception as exc:
                bulk.fail(exc)  # raises ClientBulkWriteException with the partial result, or exc itself
            return bulk.result()

    def _change_stream(self, options: WatchOptions, session: Optional[ClientSession]) -> ClusterChangeStream:
        """The aggregate runs on the admin database, with allChangesForCluster (server 4.0+)."""
        return ClusterChangeStream(self.admin, options, session)

    # -- sessions ----------------------------------------------------------------------------

    def start_session(self, causal_consistency: Optional[bool] = None, default_transaction_options: Any = None,
                      snapshot: Optional[bool] = False, *, default_timeout_ms: Optional[int] = None) -> ClientSession:
        """An explicit session (Driver Sessions spec); end it with ``end_session()`` or ``with``.

        ``default_timeout_ms`` is the timeoutMS of its commit, abort, end and ``with_transaction`` (else the
        client's timeoutMS).
        """
        return ClientSession(self, self._core, SessionOptions(causal_consistency, default_transaction_options,
                                                              snapshot, default_timeout_ms=default_timeout_ms))

    # -- pool diagnostics (greenmongo extensions; PyMongo has neither) ------------------------

    def pool_stats(self) -> dict[str, dict[str, Any]]:
        """A snapshot of every server's connection pool, keyed ``"host:port"`` (JSON-ready), for dashboards:
        ``size`` (in use + available + being established), ``in_use`` (of which ``in_use_by_cursors`` and
        ``in_use_by_transactions``), ``available``, ``pending``, ``waiters``, ``longest_wait`` (seconds),
        ``generation``, ``max_pool_size``, ``state``. Reads counters only: no I/O, no lock, cheap to poll."""
        return self._core.pool_stats()

    def pool_holders(self, limit: Optional[int] = None) -> list[dict[str, Any]]:
        """Who holds the checked-out connections, longest held first: ``address``, ``connection_id``, ``use``
        (cursor, transaction, other), ``greenlet`` (name), ``greenlet_alive``, ``held_for`` (seconds), ``api``
        (the greenmongo call) and ``stack`` (the caller's frames, innermost first). Needs
        ``MongoClient(pool_debug=True)`` or ``GREENMONGO_POOL_DEBUG=1``; otherwise raises InvalidOperation."""
        if not self._options.pool_debug:
            raise InvalidOperation("pool_holders() needs MongoClient(pool_debug=True) or GREENMONGO_POOL_DEBUG=1")
        return self._core.pool_holders(limit)

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Stop every monitor and pool greenlet and close every connection; idempotent."""
        self._core.close()

    def __enter__(self) -> "MongoClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        seeds = ", ".join(f"{host}:{port}" for host, port in self._options.seeds)
        return f"MongoClient([{seeds}])"

    def eq_props(self) -> tuple:
        """What client equality compares: (sorted seeds, replicaSet, SRV host name, SRV service name)."""
        options = self._options
        seeds = tuple(sorted(options.seeds, key=lambda address: (address[0], address[1] or 0)))
        return seeds, options.replica_set_name, options.srv_host, options.srv_service_name

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, MongoClient):
            return self.eq_props() == other.eq_props()
        return NotImplemented

    def __ne__(self, other: Any) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self.eq_props())

    def __iter__(self) -> "MongoClient":
        return self

    def __next__(self) -> NoReturn:
        raise TypeError("'MongoClient' object is not iterable")

    next = __next__

    # -- the deployment, as PyMongo's properties describe it ----------------------------------

    def append_metadata(self, driver_info: DriverInfo) -> None:
        """Append a wrapping library's name, version and platform to the handshake metadata of the
        connections opened from now on (existing connections keep theirs; PyMongo 4.14)."""
        if not isinstance(driver_info, DriverInfo):
            raise TypeError(f"driver_info must be an instance of DriverInfo, not {type(driver_info)}")
        self._options.append_driver_info(driver_info)

    def _current_description(self) -> Any:
        """The topology description now, after starting the topology if ``connect=False`` left it idle."""
        core = self._core
        core.check_usable()
        core.open()
        return core.topology.description

    def _members(self, server_type: ServerType) -> set:
        description = self._current_description()
        if description.topology_type not in (TopologyType.ReplicaSetWithPrimary, TopologyType.ReplicaSetNoPrimary):
            return set()
        return {sd.address for sd in description.server_descriptions().values() if sd.server_type is server_type}

    @property
    def primary(self) -> Optional[tuple]:
        """(host, port) of the replica set's primary as currently known; None when this is not a replica
        set or no primary is known (does not wait)."""
        description = self._current_description()
        if description.topology_type is not TopologyType.ReplicaSetWithPrimary:
            return None
        primary = description.primary
        return primary.address if primary is not None else None

    @property
    def secondaries(self) -> set:
        """The (host, port) of each secondary currently known; empty unless this is a replica set."""
        return self._members(ServerType.RSSecondary)

    @property
    def arbiters(self) -> set:
        """The (host, port) of each arbiter currently known; empty unless this is a replica set."""
        return self._members(ServerType.RSArbiter)

    def _writable_server_description(self) -> Any:
        """The description of the server a write would go to, waiting for one (ServerSelectionTimeoutError)."""
        core = self._core
        core.check_usable()
        server = core.topology.select_server(None, is_write=True, operation="test")
        try:
            return server.description
        finally:
            server.end_operation()

    @property
    def is_primary(self) -> bool:
        """Whether the server writes go to accepts them: a standalone, a mongos or a replica set primary.
        Waits for such a server like an operation would."""
        return self._writable_server_description().is_writable

    @property
    def is_mongos(self) -> bool:
        """Whether the server writes go to is a mongos (waits for a writable server like ``is_primary``)."""
        return self._writable_server_description().server_type is ServerType.Mongos
