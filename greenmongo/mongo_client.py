"""MongoClient: options + topology + executor, and PyMongo's client-level API.

A client belongs to the gevent hub of the OS thread that created it: its greenlets, pools and
events live on that hub, so use from another OS thread fails at once with InvalidOperation
instead of hanging or raising "cannot switch to a different thread". After ``os.fork()`` a
child's clients drop what they inherited (sockets, pools, monitor greenlets) and reconnect on
first use; ``close()`` stops every greenlet the client started.
"""

from __future__ import annotations

import atexit
import os
import weakref
from collections import deque
from typing import Any, Iterable, Mapping, Optional, Sequence, Union


import greenmongo.net.dns  # noqa: F401  (imported eagerly: a first mongodb+srv lookup must not import in a greenlet)
from greenmongo.bson.codec_options import CodecOptions
from greenmongo.client_session import ClientSession, SessionOptions
from greenmongo.engine.executor import Executor
from greenmongo.engine.server_session import ServerSessionPool
from greenmongo.errors import ConfigurationError, InvalidName, InvalidOperation
from greenmongo.hub.waiting import current_hub, on_hub
from greenmongo.operations.client_bulk import ClientBulkWrite
from greenmongo.operations.cursor_state import KillCursorsOperation
from greenmongo.operations.databases import DropDatabaseOperation, ListDatabasesOperation
from greenmongo.options.client_options import ClientOptions
from greenmongo.topology.topology import Topology, _abandon

_LIVE_CLIENTS: "weakref.WeakSet[MongoClient]" = weakref.WeakSet()
#: Implicit sessions are never causally consistent (no afterClusterTime on a cursor's resumes or getMores).
_IMPLICIT_SESSION_OPTIONS = SessionOptions(causal_consistency=False)
#: Kills queued for servers that are down are kept, up to this many.
_MAX_PENDING_KILLS = 1000


class MongoClient:
    """A client for a MongoDB deployment; PyMongo's constructor and client-level methods.

    ``MongoClient(host=None, port=None, document_class=dict, tz_aware=False, connect=True, **kwargs)``:
    ``host`` is a connection string, a ``host[:port]`` or a list of them; keyword options win over
    the URI's. With ``connect=False`` nothing happens until the first operation.
    """

    HOST = "localhost"
    PORT = 27017

    def __init__(
        self,
        host: Union[str, Sequence[str], None] = None,
        port: Optional[int] = None,
        document_class: Optional[type] = None,
        tz_aware: Optional[bool] = None,
        connect: Optional[bool] = None,
        **kwargs: Any,
    ) -> None:
        if document_class is not None:
            kwargs["document_class"] = document_class
        if tz_aware is not None:
            kwargs["tz_aware"] = tz_aware
        self._options = ClientOptions(host, port, **kwargs)
        self._hub = current_hub()
        self._pid = os.getpid()
        self._closed = False
        self._pending_kills: deque = deque()
        self._server_sessions = ServerSessionPool()
        self._cluster_time: Optional[Mapping[str, Any]] = None
        self._new_topology()
        _LIVE_CLIENTS.add(self)
        if connect is None or connect:
            self._topology.open()

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
        return self._topology.description

    @property
    def address(self) -> Optional[tuple]:
        """(host, port) of the server operations go to, for a single server or a replica set primary."""
        self._check_usable()
        description = self._topology.description
        kind = description.topology_type.name
        if kind == "Sharded":
            raise InvalidOperation("Cannot use `address` on a sharded topology: use `nodes` instead")
        server = self._topology.select_server(self.read_preference if kind != "ReplicaSetNoPrimary" else None,
                                              is_write=kind != "Single", operation="address")
        try:
            return server.address
        finally:
            server.end_operation()

    @property
    def nodes(self) -> frozenset:
        """The addresses of the servers the client currently knows, as (host, port) pairs."""
        return frozenset(address for address, sd in self._topology.description.server_descriptions().items()
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
                     read_preference: Any = None, write_concern: Any = None, read_concern: Any = None) -> Any:
        from greenmongo.database import Database

        if name is None:
            name = self._options.database
            if name is None:
                raise ConfigurationError("No default database name defined or provided.")
        return Database(self, name, codec_options, read_preference, write_concern, read_concern)

    def get_default_database(self, default: Optional[str] = None, **kwargs: Any) -> Any:
        name = self._options.database or default
        if name is None:
            raise ConfigurationError("No default database name defined or provided.")
        return self.get_database(name, **kwargs)

    def list_databases(self, session: Any = None, comment: Any = None, **kwargs: Any) -> Any:
        from greenmongo.cursor import CommandCursor

        self._check_usable(session)
        options = dict(kwargs)
        operation = ListDatabasesOperation(
            filter=options.pop("filter", None), name_only=options.pop("nameOnly", None),
            authorized_databases=options.pop("authorizedDatabases", None), comment=comment,
            codec_options=self.codec_options, extra=options)
        state = self._executor.execute(operation, session=session)
        return CommandCursor(self, state, codec_options=self.codec_options)

    def list_database_names(self, session: Any = None, comment: Any = None) -> list:
        return [doc["name"] for doc in self.list_databases(session, comment=comment, nameOnly=True)]

    def drop_database(self, name_or_database: Any, session: Any = None, comment: Any = None) -> None:
        self._check_usable(session)
        name = getattr(name_or_database, "name", name_or_database)
        if not isinstance(name, str):
            raise TypeError("name_or_database must be an instance of str or a Database")
        if not name:
            raise InvalidName("database name cannot be empty")
        self._executor.execute(DropDatabaseOperation(name, write_concern=self.write_concern, comment=comment),
                               session=session)

    def server_info(self, session: Any = None) -> dict:
        return self.admin.command("buildinfo", session=session)

    def bulk_write(self, models: Iterable[Any], session: Any = None, ordered: bool = True,
                   verbose_results: bool = False, bypass_document_validation: Optional[bool] = None,
                   comment: Any = None, let: Optional[Mapping[str, Any]] = None,
                   write_concern: Any = None) -> Any:
        """The server 8.0 ``bulkWrite`` command across namespaces (CRUD "client bulk write")."""
        self._check_usable(session)
        in_transaction = session is not None and session.in_transaction
        if in_transaction and write_concern is not None:
            raise InvalidOperation("Cannot set write concern after starting a transaction")
        bulk = ClientBulkWrite(models, ordered=ordered, verbose_results=verbose_results,
                               bypass_document_validation=bypass_document_validation, comment=comment, let=let,
                               write_concern=None if in_transaction else write_concern or self.write_concern,
                               codec_options=self.codec_options)
        executor = self._executor

        def run(batch: Any) -> None:
            results = executor.execute(batch, session=session)  # a cursor over per-operation results
            try:
                while results is not None and results.needs_get_more:
                    batch.record_results(executor.execute(results.get_more_operation(),
                                                          address=results.address, session=results.session))
            finally:
                kill = results.close() if results is not None else None
                if kill is not None:
                    executor.execute(kill, address=results.address, session=results.session)
                if results is not None and results.session is not None and results.session._implicit:
                    results.session.end_session()

        try:
            executor.execute_batches(bulk, run)
        except Exception as exc:
            bulk.fail(exc)  # raises ClientBulkWriteException with the partial result, or exc itself
        return bulk.result()

    def watch(self, pipeline: Optional[list] = None, full_document: Optional[str] = None,
              resume_after: Optional[Mapping[str, Any]] = None, max_await_time_ms: Optional[int] = None,
              batch_size: Optional[int] = None, collation: Any = None, start_at_operation_time: Any = None,
              session: Any = None, start_after: Optional[Mapping[str, Any]] = None, comment: Any = None,
              full_document_before_change: Optional[str] = None,
              show_expanded_events: Optional[bool] = None) -> Any:
        """A change stream over every database but admin, config and local (server 4.0+); see
        ``Collection.watch``."""
        from greenmongo.change_stream import ClusterChangeStream

        return ClusterChangeStream(self.admin, pipeline, full_document, resume_after, max_await_time_ms,
                                   batch_size, collation, start_at_operation_time, session, start_after, comment,
                                   full_document_before_change, show_expanded_events)

    # -- sessions ----------------------------------------------------------------------------

    def start_session(self, causal_consistency: Optional[bool] = None, default_transaction_options: Any = None,
                      snapshot: Optional[bool] = False) -> ClientSession:
        """An explicit session (Driver Sessions spec); end it with ``end_session()`` or ``with``."""
        self._check_usable()
        return ClientSession(self, SessionOptions(causal_consistency, default_transaction_options, snapshot))

    def _end_transaction(self, operation: Any, session: ClientSession) -> Any:
        """commitTransaction / abortTransaction for ``session`` (ClientSession calls this)."""
        self._check_usable()
        return self._executor.execute(operation, session=session)

    def _implicit_session(self) -> ClientSession:
        return ClientSession(self, _IMPLICIT_SESSION_OPTIONS, implicit=True)

    def _session_timeout_minutes(self) -> Optional[int]:
        return self._topology.description.logical_session_timeout_minutes

    def _take_server_session(self) -> Any:
        return self._server_sessions.get(self._session_timeout_minutes())

    def _return_server_session(self, server_session: Any) -> None:
        if not self._closed:
            self._server_sessions.put(server_session, self._session_timeout_minutes())

    def _advance_cluster_time(self, cluster_time: Mapping[str, Any]) -> None:
        current = self._cluster_time
        if current is None or cluster_time.get("clusterTime") > current.get("clusterTime"):
            self._cluster_time = cluster_time

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Stop every monitor and pool greenlet and close every connection; idempotent."""
        if self._closed:
            return
        self._closed = True
        _LIVE_CLIENTS.discard(self)
        if on_hub(self._hub):
            self._flush_kills()
        self._topology.close()

    def __enter__(self) -> "MongoClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        seeds = ", ".join(f"{host}:{port}" for host, port in self._options.seeds)
        return f"MongoClient([{seeds}])"

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, MongoClient):
            return self._options.seeds == other._options.seeds
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._options.seeds)

    # -- internals used by the API classes ------------------------------------------------------

    def _check_usable(self, session: Any = None) -> None:
        """Every public operation starts here: wrong thread, closed client, fork, sessions."""
        if not on_hub(self._hub):
            raise InvalidOperation(
                "this MongoClient belongs to the gevent hub of the thread that created it and cannot be "
                "used from another OS thread; create one client per thread (greenlets may share one)")
        if self._pid != os.getpid():
            self._after_fork()
        if self._closed:
            raise InvalidOperation("Cannot use MongoClient after close")
        if session is not None:
            if not isinstance(session, ClientSession):
                raise TypeError(f"session must be a ClientSession, not {type(session).__name__}")
            if session.client is not self:
                raise InvalidOperation("Can only use session with the MongoClient that started it")
            session._check_not_ended()
        if self._pending_kills:
            self._flush_kills()

    def _kill_cursor_later(self, address: Any, namespace: str, cursor_id: int) -> None:
        """From a cursor's ``__del__``: no I/O there, so the kill is sent with the next operation."""
        if cursor_id and not self._closed:
            if len(self._pending_kills) >= _MAX_PENDING_KILLS:
                self._pending_kills.popleft()  # a server long gone: it reaps its cursors itself
            self._pending_kills.append((address, namespace, cursor_id))

    def _flush_kills(self) -> None:
        """Send queued kills to servers that are known now; keep the others for later, never wait."""
        waiting = []
        while self._pending_kills:
            address, namespace, cursor_id = self._pending_kills.popleft()
            known = self._topology.description.server_descriptions().get(address)
            if known is None:
                continue  # no longer part of the deployment
            if not known.is_server_type_known:
                waiting.append((address, namespace, cursor_id))
                continue
            dbname, _, collection = namespace.partition(".")
            try:
                self._executor.execute(KillCursorsOperation(dbname, collection, [cursor_id]), address=address)
            except Exception:
                pass  # the server reaps abandoned cursors itself after 10 minutes
        self._pending_kills.extend(waiting)

    def _new_topology(self) -> None:
        """A topology (not opened yet) and the executor that runs operations on it."""
        self._topology = Topology.from_options(self._options)
        self._executor = Executor(self._topology, self._options.event_listeners,
                                  retry_reads=self._options.retry_reads,
                                  retry_writes=self._options.retry_writes, sessions=self)

    def _after_fork(self) -> None:
        """In a forked child: drop the parent's monitors, pools and sockets; reconnect on first use.

        Nothing inherited is used again (a child reading a socket the parent also reads would steal
        its replies); the new topology opens lazily, at the child's first server selection.
        """
        self._pid = os.getpid()
        self._pending_kills.clear()
        self._server_sessions.clear()  # the parent's server sessions stay the parent's
        old = self._topology
        self._new_topology()
        # Stop the inherited greenlets without blocking; the pools' own fork hooks drop their sockets.
        _abandon(old._servers, old._srv_poller)


def _forget_parents_clients() -> None:
    for client in list(_LIVE_CLIENTS):
        if client._pid != os.getpid():
            client._after_fork()


os.register_at_fork(after_in_child=_forget_parents_clients)


def _close_all_clients() -> None:
    """At interpreter exit: close what is still open, quietly (the hub may already be gone)."""
    for client in list(_LIVE_CLIENTS):
        if client._pid != os.getpid() or not on_hub(client._hub):
            continue
        try:
            client.close()
        except Exception:
            pass


atexit.register(_close_all_clients)
