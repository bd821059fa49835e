"""The one path every operation takes: select a server, check out a connection, build, send, parse.

Operations (greenmongo/operations/) are pure build/parse objects; this module is the thin I/O
around them. Everything an operation holds is released in ``finally`` (the server's operation
count, the pooled connection), so a ``gevent.Timeout`` or ``kill()`` landing at any switch point
leaves nothing behind. Errors a connection raises are reported to SDAM (``Server.handle_error``)
while the connection is still checked out, so they are judged by its pool generation.

Retryable reads are done here (one retry, on a newly selected server); retryable writes (which
need sessions' transaction numbers), sessions and client-side operation timeouts slot into the same
``execute`` / ``_attempt`` split.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from greenmongo import logging_format
from greenmongo.errors import (
    ConnectionFailure,
    InvalidOperation,
    OperationFailure,
    PoolClosedError,
    ServerSelectionTimeoutError,
    WaitQueueTimeoutError,
)
from greenmongo.net.settings import server_api_fields
from greenmongo.monitoring.command import (
    CommandFailedEvent,
    CommandListener,
    CommandStartedEvent,
    CommandSucceededEvent,
    publish,
)
from greenmongo.operations.base import ExecutionFields, Operation, WireInfo, reply_ok
from greenmongo.operations.cursor_state import CursorState
from greenmongo.options.read_preferences import ReadPreference
from greenmongo.sdam.server_type import ServerType
from greenmongo.sdam.topology_type import TopologyType
from greenmongo.wire.header import next_request_id

_COMMAND_LOGGER = logging.getLogger("greenmongo.command")
_PRIMARY = ReadPreference.PRIMARY.mode


def read_preference_field(topology_type: Any, server_type: Any, read_preference: Any,
                          is_write: bool) -> Optional[dict]:
    """The ``$readPreference`` to send, per the Server Selection spec's "passing read preference" rules.

    Writes never carry one. A mongos or load balancer gets the user's preference unless it is
    primary; a replica set member gets it unless it is primary; a directly connected server that
    is not a mongos gets primaryPreferred so that it answers even when it is a secondary.
    """
    if is_write or read_preference is None:
        return None
    mode = getattr(read_preference, "mode", _PRIMARY)
    if topology_type is TopologyType.Single and server_type not in (ServerType.Mongos, ServerType.LoadBalancer):
        return dict(read_preference.document) if mode != _PRIMARY else {"mode": "primaryPreferred"}
    if mode == _PRIMARY:
        return None
    return dict(read_preference.document)


class Executor:
    """Runs operations against one topology and publishes command monitoring events."""

    def __init__(self, topology: Any, listeners: Iterable[Any] = (), *, retry_reads: bool = True,
                 sessions: Any = None) -> None:
        self._topology = topology
        self._retry_reads = retry_reads
        #: The client: gives implicit sessions (``_implicit_session``) and gossips ``$clusterTime``.
        self._sessions = sessions
        self._command_listeners: Sequence[Any] = tuple(
            listener for listener in listeners if isinstance(listener, CommandListener))

    @property
    def topology(self) -> Any:
        return self._topology

    def execute(self, operation: Operation, *, address: Any = None, read_preference: Any = None,
                session: Any = None) -> Any:
        """Run ``operation``; ``address`` pins it to one server (getMore, killCursors).

        ``read_preference`` overrides the operation's own for server selection. A retryable read
        (Retryable Reads spec) that fails with a retryable error is tried once more, on a newly
        selected server (in a sharded cluster, another mongos if there is one). Without an explicit
        ``session`` the operation gets an implicit one when the deployment supports sessions; a
        cursor the operation opens keeps it (``CursorState.session``) until the cursor is done.
        """
        holder = _SessionHolder(self._sessions, session)
        try:
            result = self._execute(operation, address, read_preference, holder)
        except BaseException:
            holder.release()
            raise
        if holder.session is not None and isinstance(result, CursorState) and result.alive:
            result.session = holder.session  # getMores reuse it; the cursor ends it if it is implicit
        else:
            holder.release()
        return result

    def _execute(self, operation: Operation, address: Any, read_preference: Any, holder: "_SessionHolder") -> Any:
        if not (self._retry_reads and operation.retryable and operation.is_read and address is None):
            return self._attempt(operation, address, read_preference, (), holder)
        tried: list = []
        try:
            return self._attempt(operation, None, read_preference, (), holder, tried)
        except Exception as exc:
            if not is_retryable_read_error(exc):
                raise
            first = exc
        deprioritized = tuple(tried) if self._topology.description.topology_type is TopologyType.Sharded else ()
        try:
            return self._attempt(operation, None, read_preference, deprioritized, holder)
        except (ServerSelectionTimeoutError, WaitQueueTimeoutError, PoolClosedError, InvalidOperation):
            # No attempt reached a server: the first error says more about what happened.
            raise first from None

    def _attempt(self, operation: Operation, address: Any, read_preference: Any, deprioritized: tuple,
                 holder: "_SessionHolder", tried: Optional[list] = None) -> Any:
        topology = self._topology
        preference = read_preference or operation.read_preference
        if address is not None:
            server = topology.select_server_by_address(address, operation=operation.name)
        elif _chooses_own_preference(operation):
            # aggregate with $out/$merge: a write that may run on a secondary of a 5.0+ deployment;
            # its own rule picks the preference, used both to select and as $readPreference.
            preference = self._selection_preference(operation, preference)
            server = topology.select_server(preference, is_write=False, deprioritized=deprioritized,
                                            operation=operation.name)
        else:
            if operation.is_write:
                preference = ReadPreference.PRIMARY
            server = topology.select_server(preference, is_write=operation.is_write, deprioritized=deprioritized,
                                            operation=operation.name)
        if tried is not None:
            tried.append(server.address)
        try:
            return self._run_on_server(server, operation, preference, holder)
        finally:
            server.end_operation()

    def execute_batches(self, bulk: Any, run_batch: Optional[Callable[[Any], Any]] = None) -> None:
        """Drive a bulk write (``next_batch`` until None), each batch selected and sent on its own."""
        run = run_batch or self.execute
        while True:
            batch = bulk.next_batch(self._current_wire_info())
            if batch is None:
                return
            run(batch)

    # -- internals ---------------------------------------------------------------------------

    def _selection_preference(self, operation: Operation, preference: Any) -> Any:
        description = self._topology.description
        wire_versions = [sd.max_wire_version or 0 for sd in description.server_descriptions().values()
                         if sd.is_server_type_known]
        load_balanced = description.topology_type is TopologyType.LoadBalanced
        return operation.selection_read_preference(wire_versions, load_balanced)

    def _current_wire_info(self) -> WireInfo:
        """Limits for batch splitting before a server is chosen: the selected server's, else defaults."""
        server = self._topology.select_server(ReadPreference.PRIMARY, is_write=True, operation="bulkWrite")
        try:
            description = server.description
            hello = description.hello or {}
            return WireInfo.from_hello({**hello, "maxWireVersion": description.max_wire_version or 0},
                                       server.address)
        finally:
            server.end_operation()

    def _run_on_server(self, server: Any, operation: Operation, read_preference: Any,
                       holder: "_SessionHolder") -> Any:
        with server.checkout() as conn:
            try:
                return self._send(conn, server, operation, read_preference, holder)
            except (ConnectionFailure, OperationFailure) as exc:
                if isinstance(exc, ConnectionFailure) and holder.session is not None:
                    holder.session._mark_dirty()  # the server may still be running it: do not reuse
                server.handle_error(exc, conn, reply=getattr(exc, "details", None))
                raise

    def _send(self, conn: Any, server: Any, operation: Operation, read_preference: Any,
              holder: "_SessionHolder") -> Any:
        wire = WireInfo.from_connection(conn)
        command = operation.build(wire)
        description = self._topology.description
        topology_type = description.topology_type
        is_write = operation.is_write and not _chooses_own_preference(operation)
        session = holder.for_command(command, server.description)
        fields = ExecutionFields(
            read_preference=read_preference_field(topology_type, server.description.server_type, read_preference,
                                                  is_write),
            lsid=session._lsid_for_command() if session is not None else None,
            cluster_time=self._cluster_time_to_send(session, topology_type))
        command = operation.finalize(command, fields)
        server_api = conn.settings.server_api
        if server_api is not None and command.name != "getMore":
            # Added here, not by the connection, so that monitoring shows what is sent; the Stable API
            # spec keeps these fields off getMore.
            command.body.update(server_api_fields(server_api))
        listeners = self._command_listeners
        logging_on = _COMMAND_LOGGER.isEnabledFor(logging.DEBUG)
        if not listeners and not logging_on:
            reply = conn.command(command.dbname, command.body, sequences=command.sequences_for_connection(),
                                 check=False, unacknowledged=not command.acknowledged,
                                 codec_options=operation.codec_options, apply_server_api=False)
            self._observe(reply, session)
            return operation.parse(reply, wire)
        monitor = _CommandMonitor(self, conn, command, listeners, logging_on)
        monitor.started()
        try:
            reply = conn.command(command.dbname, command.body, sequences=command.sequences_for_connection(),
                                 check=False, unacknowledged=not command.acknowledged,
                                 codec_options=operation.codec_options, apply_server_api=False,
                                 request_id=monitor.request_id)
        except Exception as exc:
            monitor.failed(exc)
            raise
        monitor.finished(reply)
        self._observe(reply, session)
        return operation.parse(reply, wire)

    def _cluster_time_to_send(self, session: Any, topology_type: Any) -> Optional[Mapping[str, Any]]:
        """The highest $clusterTime known to the client or the session (replica sets, sharded)."""
        if self._sessions is None or topology_type in (TopologyType.Single, TopologyType.Unknown):
            return None
        cluster_time = self._sessions._cluster_time
        if session is not None and session.cluster_time is not None and (
                cluster_time is None or session.cluster_time["clusterTime"] > cluster_time["clusterTime"]):
            cluster_time = session.cluster_time
        return cluster_time

    def _observe(self, reply: Any, session: Any) -> None:
        if reply is None or self._sessions is None:
            return
        cluster_time = reply.get("$clusterTime")
        if cluster_time is not None:
            self._sessions._advance_cluster_time(cluster_time)
        if session is not None:
            session._observe_reply(reply)


class _CommandMonitor:
    """Command monitoring events and log messages for one command (only built when someone listens)."""

    def __init__(self, executor: Executor, conn: Any, command: Any, listeners: Sequence[Any],
                 logging_on: bool) -> None:
        self.conn = conn
        self.command = command
        self.listeners = listeners
        self.logging_on = logging_on
        self.request_id = next_request_id()
        self.operation_id = self.request_id
        self.client_id = executor.topology.topology_id
        self.server_connection_id = _server_connection_id(conn)
        self.started_at = time.monotonic()
        # A hello carrying speculative authentication is as sensitive as an auth command.
        self.speculative_hello = (command.name.lower() in ("hello", "ismaster")
                                  and "speculativeAuthenticate" in command.body)

    def _common(self) -> dict:
        return dict(service_id=self.conn.service_id, server_connection_id=self.server_connection_id)

    def started(self) -> None:
        command = self.command
        body = dict(command.body)
        body["$db"] = command.dbname
        full = command.for_monitoring(body)
        if self.listeners:
            publish(self.listeners, CommandStartedEvent(full, command.dbname, self.request_id, self.conn.address,
                                                        self.operation_id, **self._common()))
        if self.logging_on:
            self._log(logging_format.command_started(
                full, command.dbname, self.request_id, address=self.conn.address, operation_id=self.operation_id,
                driver_connection_id=self.conn.id, **self._common()))
        self.started_at = time.monotonic()

    def failed(self, error: BaseException) -> None:
        duration = time.monotonic() - self.started_at
        command = self.command
        if self.listeners:
            publish(self.listeners, CommandFailedEvent.from_exception(
                duration, error, command.name, self.request_id, self.conn.address, self.operation_id,
                database_name=command.dbname, speculative_hello=self.speculative_hello, **self._common()))
        if self.logging_on:
            self._log(logging_format.command_failed(
                error, command.name, command.dbname, self.request_id, duration, address=self.conn.address,
                operation_id=self.operation_id, driver_connection_id=self.conn.id,
                speculative_hello=self.speculative_hello, **self._common()))

    def finished(self, reply: Any) -> None:
        if reply is not None and not reply_ok(reply):
            self.failed(OperationFailure(str(reply.get("errmsg", "")), reply.get("code"), reply))
            return
        duration = time.monotonic() - self.started_at
        command = self.command
        reply = reply if reply is not None else {"ok": 1}
        if self.listeners:
            publish(self.listeners, CommandSucceededEvent(
                duration, reply, command.name, self.request_id, self.conn.address, self.operation_id,
                database_name=command.dbname, speculative_hello=self.speculative_hello, **self._common()))
        if self.logging_on:
            self._log(logging_format.command_succeeded(
                reply, command.name, command.dbname, self.request_id, duration, address=self.conn.address,
                operation_id=self.operation_id, driver_connection_id=self.conn.id,
                speculative_hello=self.speculative_hello, **self._common()))

    def _log(self, message: Any) -> None:
        message["clientId"] = self.client_id  # which client logged it, for applications with several
        _COMMAND_LOGGER.debug(message)


#: Server error codes after which a read may be retried (Retryable Reads spec, "Retryable Error").
RETRYABLE_READ_CODES = frozenset({262, 11600, 11602, 10107, 13435, 13436, 189, 134, 91, 7, 6, 89, 9001})


def is_retryable_read_error(error: BaseException) -> bool:
    """A network error, a cleared pool, or one of the spec's server error codes."""
    if isinstance(error, (ServerSelectionTimeoutError, WaitQueueTimeoutError)):
        return False
    if isinstance(error, ConnectionFailure):  # network errors and timeouts, PoolClearedError
        return True
    return isinstance(error, OperationFailure) and error.code in RETRYABLE_READ_CODES


class _SessionHolder:
    """The session one operation runs with: the caller's, or an implicit one taken on first need."""

    __slots__ = ("source", "explicit", "implicit")

    def __init__(self, source: Any, explicit: Any) -> None:
        self.source = source
        self.explicit = explicit
        self.implicit: Any = None

    @property
    def session(self) -> Any:
        return self.explicit or self.implicit

    def for_command(self, command: Any, server_description: Any) -> Any:
        if self.explicit is not None:
            if not command.acknowledged:
                raise InvalidOperation("explicit sessions are incompatible with unacknowledged write concern")
            return self.explicit
        # Implicit sessions only where the server supports sessions, never for unacknowledged writes.
        if (self.source is None or not command.acknowledged
                or server_description.logical_session_timeout_minutes is None):
            return None
        if self.implicit is None:
            self.implicit = self.source._implicit_session()
        return self.implicit

    def release(self) -> None:
        if self.implicit is not None:
            self.implicit.end_session()
            self.implicit = None


def _chooses_own_preference(operation: Operation) -> bool:
    return type(operation).selection_read_preference is not Operation.selection_read_preference


def _server_connection_id(conn: Any) -> Optional[int]:
    hello = getattr(conn, "hello", None) or {}
    value = hello.get("connectionId")
    return int(value) if value is not None else None
