"""The one path every operation takes: select a server, check out a connection, build, send, parse.

Operations (greenmongo/operations/) are pure build/parse objects; this module is the thin I/O
around them. Everything an operation holds is released in ``finally`` (the server's operation
count, the pooled connection), so a ``gevent.Timeout`` or ``kill()`` landing at any switch point
leaves nothing behind. Errors a connection raises are reported to SDAM (``Server.handle_error``)
while the connection is still checked out, so they are judged by its pool generation.

Retries (Retryable Reads/Writes specs, rules in ``greenmongo.engine.retry``), sessions and transactions
(``_session_fields`` is where lsid, txnNumber, startTransaction, autocommit and readConcern's
afterClusterTime are decided) all wrap the same ``_attempt``.
"""

from __future__ import annotations

import logging
import random
from contextvars import ContextVar
from typing import Any, Callable, Iterable, List, Mapping, Optional, Sequence, Tuple

from greenmongo.engine.deadline import LEGACY, Deadline
from greenmongo.engine.protocols import (
    AutoEncryption,
    ClusterTimeSource,
    CommandConnection,
    SelectedServer,
    ServerSelector,
    SessionSource,
)
from greenmongo.engine.retry import (
    MAX_OVERLOAD_RETRIES,
    RetryBudget,
    RetryMode,
    RetryState,
    WriteAttempt,
    add_retryable_write_label,
    retry_mode,
)
from greenmongo.engine.session_state import SessionState
from greenmongo.engine.transaction import (
    TRANSIENT_TRANSACTION_ERROR,
    UNKNOWN_COMMIT_RESULT,
    Transaction,
    label_commit_error,
)
from greenmongo.errors import ConnectionFailure, InvalidOperation, OperationFailure, ProtocolError, has_error_label
from greenmongo.hub.waiting import sleep
from greenmongo.logs.command import COMMAND_LOGGER, CommandMonitor
from greenmongo.monitoring.command import (
    CommandListener,
)
from greenmongo.operations.base import Command, ExecutionFields, Operation, WireInfo
from greenmongo.operations.cursor_state import CursorState
from greenmongo.operations.run_command import RunCommandOperation
from greenmongo.options.connection_settings import server_api_fields
from greenmongo.options.read_preferences import ReadPreference, ServerMode
from greenmongo.sdam.address import Address
from greenmongo.sdam.server_description import ServerDescription
from greenmongo.sdam.server_type import ServerType
from greenmongo.sdam.topology_type import TopologyType
from greenmongo.wire import reply_fields
from greenmongo.wire.versions import WIRE_5_0

_PRIMARY = ReadPreference.PRIMARY.mode


def read_preference_field(topology_type: TopologyType, server_type: ServerType, read_preference: Optional[ServerMode],
                          is_write: bool) -> Optional[dict[str, Any]]:
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

    def __init__(self, topology: ServerSelector, listeners: Iterable[Any] = (), *, retry_reads: bool = True,
                 retry_writes: bool = True, sessions: Optional[SessionSource] = None,
                 clock: Optional[ClusterTimeSource] = None, max_adaptive_retries: Optional[int] = None,
                 enable_overload_retargeting: bool = False, tracer: Any = None) -> None:
        self._topology = topology
        #: OpenTelemetry (``greenmongo.logs.tracing.Tracer``), None when the client does not trace.
        self._tracer = tracer
        self._retry_reads = retry_reads
        self._retry_writes = retry_writes
        #: Client Backpressure: overload retries per operation, and whether they avoid the overloaded server.
        self._max_overload_retries = MAX_OVERLOAD_RETRIES if max_adaptive_retries is None else max_adaptive_retries
        self._overload_retargeting = enable_overload_retargeting
        self._retry_budget = RetryBudget()  # the client's token bucket for overload retries
        #: Gives implicit sessions; without one (tests) commands carry no lsid unless given a session.
        self._sessions = sessions
        #: The client's $clusterTime gossip.
        self._clock = clock
        self._command_listeners: Sequence[Any] = tuple(
            listener for listener in listeners if isinstance(listener, CommandListener))
        #: Automatic encryption (``crypt.auto.AutoEncrypter``) of a client with auto_encryption_opts.
        self.encrypter: Optional[AutoEncryption] = None

    @property
    def topology(self) -> Any:
        return self._topology

    def execute(self, operation: Operation[Any], *, address: Optional[Address] = None,
                read_preference: Optional[ServerMode] = None, session: Optional[SessionState] = None,
                deadline: Deadline = LEGACY, pin: Any = None) -> Any:
        """Run ``operation``; ``address`` pins it to one server (getMore, killCursors), ``pin`` (a
        cursor's ``PinnedConnection``, load-balanced mode) to one connection.

        ``read_preference`` overrides the operation's own for server selection. Without an explicit
        ``session`` the operation gets an implicit one when the deployment supports sessions; a
        cursor the operation opens keeps it (``CursorState.session``) until the cursor is done.
        Retries (one, on a newly selected server): retryable reads, retryable writes on a client
        with retryWrites, and commitTransaction/abortTransaction always; nothing inside a transaction.
        ``deadline`` (a timeoutMS, CSOT) bounds every step: selection and checkout within
        min(serverSelectionTimeoutMS, what is left), each send and receive, the maxTimeMS sent, and
        retries, which go on while time is left.
        """
        holder = _SessionHolder(self._sessions, session, deadline)
        tracer = self._tracer
        if tracer is not None:
            scope = _OPERATION_SPAN.get()
            if scope is None or scope.executor is not self:
                return self._execute_traced(tracer, operation, address, read_preference, holder, pin)
            holder.span = scope.span_for(operation, session)  # one of the commands of a larger operation
        try:
            result = self._execute(operation, address, read_preference, holder, pin)
        except BaseException:
            holder.release()
            raise
        if holder.session is not None and isinstance(result, CursorState) and result.alive:
            result.session = holder.session  # getMores reuse it; the cursor ends it if it is implicit
        else:
            holder.release()
        return result

    def operation_span(self) -> "OperationSpan":
        """``with executor.operation_span():`` one OpenTelemetry operation span for every command run in the
        block (insert_many's and bulk_write's batches, a client bulkWrite's getMores); nothing untraced."""
        return OperationSpan(self)

    def _execute_traced(self, tracer: Any, operation: Operation[Any], address: Optional[Address],
                        read_preference: Optional[ServerMode], holder: "_SessionHolder", pin: Any) -> Any:
        """``execute`` inside the operation's span (OpenTelemetry); its commands' spans nest under it."""
        span, token = tracer.start_operation(operation, holder.explicit)
        holder.span = span
        try:
            result = self._execute(operation, address, read_preference, holder, pin)
        except BaseException as exc:
            holder.release()
            tracer.end_operation(span, token, exc)
            raise
        if holder.session is not None and isinstance(result, CursorState) and result.alive:
            result.session = holder.session
        else:
            holder.release()
        tracer.end_operation(span, token)
        return result

    def _execute(self, operation: Operation[Any], address: Optional[Address], read_preference: Optional[ServerMode],
                 holder: "_SessionHolder", pin: Any) -> Any:
        session = holder.explicit
        transaction = None
        if operation.ends_transaction:
            assert session is not None
        elif session is not None:
            if session.in_transaction:
                transaction = session.transaction
                read_preference = transaction.read_preference()
                if operation.is_read and read_preference.mode != _PRIMARY:
                    raise InvalidOperation(
                        f"read preference in a transaction must be primary, not: {read_preference!r}")
            else:
                session.transaction.clear_finished()  # a plain operation ends what is left of the last one
        try:
            return self._with_retries(operation, address, read_preference, holder, transaction, pin)
        except Exception as exc:
            if operation.ends_transaction:
                if operation.name == "commitTransaction":
                    label_commit_error(exc)
                if session is not None and (has_error_label(exc, UNKNOWN_COMMIT_RESULT)
                                            or has_error_label(exc, TRANSIENT_TRANSACTION_ERROR)):
                    session.transaction.unpin()
            raise

    def _with_retries(self, operation: Operation[Any], given_address: Optional[Address],
                      read_preference: Optional[ServerMode], holder: "_SessionHolder",
                      transaction: Optional[Transaction], given_pin: Any) -> Any:
        """Run ``operation``, retrying as ``retry.RetryState`` decides (Retryable Reads/Writes,
        Transactions and Client Backpressure specs); this loop only applies its decisions."""
        session = holder.explicit
        ending = session.transaction if operation.ends_transaction and session is not None else None

        def target() -> Tuple[Optional[Address], Any]:
            """Where this attempt goes: the transaction's pinned server and connection (recomputed each
            attempt: a transient error unpins), else the caller's (a cursor's)."""
            pinned_by = ending or transaction
            if pinned_by is not None:
                return (given_address or pinned_by.pinned_address,
                        given_pin or pinned_by.pinned_connection)
            return given_address, given_pin

        address, pin = target()
        mode = retry_mode(is_read=operation.is_read, is_write=operation.is_write, retryable=operation.retryable,
                          ends_transaction=operation.ends_transaction, pinned=address is not None,
                          in_transaction=transaction is not None, retry_reads=self._retry_reads,
                          retry_writes=self._retry_writes, retry_unsent=operation.retry_unsent)
        deadline = holder.deadline
        retries: Optional[RetryState] = None  # made by the first error: most operations never need it
        holder.retryable_write = mode is RetryMode.WRITE or mode is RetryMode.END_TRANSACTION
        tried: list[Address] = []
        try:
            while True:
                starting = transaction is not None and transaction.starting
                try:
                    result = self._attempt(operation, address, read_preference,
                                           self._deprioritized(tried, retries.overloaded)
                                           if retries is not None and retries.retrying else (),
                                           holder, tried, pin)
                except _RetryNotPossible as exc:
                    assert retries is not None  # raised only by a retry
                    error = retries.retry_not_possible(deadline)
                    # A timeout replacing the last error is chained to what stopped the retry (its selection).
                    raise error from (exc.__cause__ if error is not retries.reached else None)
                except Exception as exc:
                    if retries is None:
                        retries = RetryState(mode, overload_allowed=self._overload_retries_allowed(operation),
                                             budget=self._retry_budget, in_transaction=transaction is not None,
                                             max_overload_retries=self._max_overload_retries)
                    attempt = WriteAttempt(holder.txn_number is not None, holder.write_retry_supported, holder.sent)
                    decision = retries.after_error(exc, write=attempt, starting=starting, jitter=random.random(),
                                                   deadline=deadline)
                    if decision.unpin and holder.explicit is not None:
                        holder.explicit.transaction.unpin()
                    if not decision.retry:
                        if decision.error is exc:
                            raise
                        raise decision.error from (exc if decision.chain else None)  # type: ignore[misc]
                    # Always through the hub, even without a backoff: an attempt may fail without any I/O (a
                    # paused pool) and, under a timeoutMS, retries go on until the deadline; a loop that never
                    # yields would block every other greenlet meanwhile (with timeoutMS=0, for ever).
                    sleep(decision.backoff)
                    holder.retrying = True
                    address, pin = target()
                    if operation.ends_transaction:
                        address = pin = None  # the retry selects a server (and a connection) afresh
                        if decision.commit_retry:
                            operation.for_retry()  # type: ignore[attr-defined]
                    if decision.restart_transaction:
                        assert transaction is not None
                        transaction.resend_first_statement()
                    continue
                if retries is None:
                    self._retry_budget.succeeded()
                else:
                    retries.succeeded()
                return result
        finally:
            # The error raised holds this frame in its traceback; the retry state and decision hold the
            # error: dropping them here leaves no reference cycle for the garbage collector (a failing
            # workload would otherwise keep every failed attempt's frames, connection and session alive).
            retries = decision = error = None  # type: ignore[assignment]

    def _overload_retries_allowed(self, operation: Operation) -> bool:
        """runCommand needs both retryReads and retryWrites; writes retryWrites; reads retryReads."""
        if isinstance(operation, RunCommandOperation):
            return self._retry_reads and self._retry_writes
        if operation.is_write or operation.ends_transaction:
            return self._retry_writes
        return self._retry_reads

    def _deprioritized(self, tried: list, overloaded: bool) -> tuple:
        """In a sharded cluster a retry prefers another mongos (the spec's deprioritized servers); with
        enableOverloadRetargeting, a retry after an overload error prefers another server in any topology."""
        if self._topology.description.topology_type is TopologyType.Sharded or (
                overloaded and self._overload_retargeting):
            return tuple(tried)
        return ()

    def _attempt(self, operation: Operation[Any], address: Optional[Address], read_preference: Optional[ServerMode],
                 deprioritized: Tuple[Address, ...], holder: "_SessionHolder",
                 tried: Optional[List[Address]] = None, pin: Any = None) -> Any:
        topology = self._topology
        preference = read_preference or operation.read_preference
        # Selection, checkout and connection establishment share min(serverSelectionTimeoutMS, what is left).
        deadline = holder.deadline
        selection_end = deadline.selection_end(topology.selection_timeout) if deadline.csot else None
        try:
            if address is not None:
                server = topology.select_server_by_address(address, operation=operation.name, deadline=selection_end)
            elif _chooses_own_preference(operation):
                # aggregate with $out/$merge: a write that may run on a secondary of a 5.0+ deployment;
                # its own rule picks the preference, used both to select and as $readPreference.
                preference = self._selection_preference(operation, preference)
                server = topology.select_server(preference, is_write=False, deprioritized=deprioritized,
                                                operation=operation.name, deadline=selection_end)
            else:
                if operation.is_write:
                    preference = ReadPreference.PRIMARY
                server = topology.select_server(preference, is_write=operation.is_write,
                                                deprioritized=deprioritized, operation=operation.name,
                                                deadline=selection_end)
        except Exception as exc:
            if holder.retrying:
                raise _RetryNotPossible() from exc
            raise
        if tried is not None:
            tried.append(server.address)
        description = server.description  # as selected: an error may mark the server Unknown
        holder.sent = False
        if holder.retryable_write and holder.txn_number is None:
            holder.write_retry_supported = (description.retryable_writes_supported
                                            and getattr(operation, "acknowledged", True))
        try:
            if pin is not None:
                return self._run_pinned(server, pin, operation, preference, holder)
            return self._run_on_server(server, operation, preference, holder, selection_end)
        except Exception as exc:
            if holder.retryable_write:
                # A load balancer's description has no wire version: the connection's counts.
                wire_version = description.max_wire_version
                add_retryable_write_label(exc, holder.wire_version if wire_version is None else wire_version,
                                          description.server_type)
            raise
        finally:
            server.end_operation()

    def execute_batches(self, bulk: Any, run_batch: Optional[Callable[[Any], Any]] = None,
                        deadline: Deadline = LEGACY) -> None:
        """Drive a bulk write (``next_batch`` until None), each batch selected and sent on its own; one
        ``deadline`` covers them all (``run_batch`` must pass it on)."""
        run = run_batch or (lambda batch: self.execute(batch, deadline=deadline))
        while True:
            batch = bulk.next_batch(self._for_encryption(self._current_wire_info(deadline)))
            if batch is None:
                return
            run(batch)

    # -- internals ---------------------------------------------------------------------------

    def _selection_preference(self, operation: Operation[Any], preference: ServerMode) -> ServerMode:
        description = self._topology.description
        wire_versions = [sd.max_wire_version or 0 for sd in description.server_descriptions().values()
                         if sd.is_server_type_known]
        load_balanced = description.topology_type is TopologyType.LoadBalanced
        return operation.selection_read_preference(wire_versions, load_balanced)

    def _for_encryption(self, wire: WireInfo) -> WireInfo:
        """The limits write batches are cut by: automatic encryption lowers them."""
        encrypter = self.encrypter
        return wire if encrypter is None else encrypter.batch_wire_info(wire)

    def _current_wire_info(self, deadline: Deadline = LEGACY) -> WireInfo:
        """Limits for batch splitting before a server is chosen: a writable server's as the topology
        knows it (no selection per batch: the batch's own execute selects), waiting only if none is known."""
        for description in self._topology.description.server_descriptions().values():
            if description.is_writable:
                return _wire_info(description)
        selection_end = deadline.selection_end(self._topology.selection_timeout) if deadline.csot else None
        server = self._topology.select_server(ReadPreference.PRIMARY, is_write=True, operation="bulkWrite",
                                              deadline=selection_end)
        try:
            return _wire_info(server.description)
        finally:
            server.end_operation()

    def _run_on_server(self, server: SelectedServer, operation: Operation[Any], read_preference: ServerMode,
                       holder: "_SessionHolder", selection_end: Optional[float] = None) -> Any:
        """Check a connection out, run, check it in - unless a transaction's first statement or a cursor
        the command opened took it (load-balanced mode: ``lease.pin``); then the pin's owner gives it back."""
        conn = server.check_out(selection_end, _pool_use(operation, holder))
        lease = _Lease(server, conn)
        holder.lease = lease
        try:
            result = self._send_leased(lease, operation, read_preference, holder)
            if (lease.pin is None and isinstance(result, CursorState) and result.needs_kill
                    and self._topology.description.topology_type is TopologyType.LoadBalanced):
                # Load Balancer spec: the cursor's getMores and killCursors must reach the same service.
                lease.pin = result.pin = server.pin(conn, "cursor")
            return result
        finally:
            holder.lease = None
            if lease.pin is None:
                server.check_in(conn)

    def _run_pinned(self, server: SelectedServer, pin: Any, operation: Operation[Any], read_preference: ServerMode,
                    holder: "_SessionHolder") -> Any:
        """Run on a cursor's or transaction's pinned connection: no checkout, no check-in (its owner releases
        it). An error still goes to SDAM with that connection; after a network error the pin stays with its
        owner, which sends nothing more on it."""
        lease = _Lease(server, pin.conn, pin)
        holder.lease = lease
        try:
            return self._send_leased(lease, operation, read_preference, holder)
        finally:
            holder.lease = None

    def _send_leased(self, lease: "_Lease", operation: Operation[Any], read_preference: ServerMode,
                     holder: "_SessionHolder") -> Any:
        """Send on the lease's connection; an error decides that connection's fate (and a transaction's pin)."""
        server, conn = lease.server, lease.conn
        try:
            return self._send(conn, server, operation, read_preference, holder)
        except ProtocolError as exc:
            # A reply that broke the protocol (the connection closed itself if the bytes did; a
            # reply whose fields have the wrong types is closed here): this connection is not reused.
            conn.close(f"malformed reply: {exc}")
            _drop_broken_transaction_pin(lease, holder)
            raise
        except (ConnectionFailure, OperationFailure) as exc:
            self._handle_error(exc, server, conn, holder)
            raise
        except BaseException:
            _drop_broken_transaction_pin(lease, holder)
            raise

    @staticmethod
    def _handle_error(exc: BaseException, server: SelectedServer, conn: CommandConnection,
                      holder: "_SessionHolder") -> None:
        if isinstance(exc, ConnectionFailure) and holder.session is not None:
            holder.session.mark_dirty()  # the server may still be running it: do not reuse
        server.handle_error(exc, conn, reply=getattr(exc, "details", None))

    def _send(self, conn: CommandConnection, server: SelectedServer, operation: Operation[Any],
              read_preference: ServerMode, holder: "_SessionHolder") -> Any:
        holder.wire_version = conn.max_wire_version
        wire = self._for_encryption(_connection_wire_info(conn))
        command = operation.build(wire)
        description = self._topology.description
        topology_type = description.topology_type
        is_write = operation.is_write and not _chooses_own_preference(operation)
        server_description = server.description
        session = holder.for_command(command, server_description)
        fields = ExecutionFields(
            read_preference=read_preference_field(topology_type, server_description.server_type, read_preference,
                                                  is_write),
            cluster_time=self._cluster_time_to_send(session, topology_type))
        if session is not None:
            self._session_fields(fields, session, operation, command, server, server_description, holder)
        deadline = holder.deadline
        if deadline.csot:
            # After every blocking step but the send: what is left minus the server's minimum RTT (from the
            # description it was selected by), or a timeout without sending anything.
            fields.csot = True
            fields.max_time_ms = operation.max_time_ms_for(
                deadline.max_time_ms(server_description.min_round_trip_time))
        command = operation.finalize(command, fields)
        server_api = conn.settings.server_api
        if server_api is not None:
            # Added here, not by the connection, so that monitoring shows what is sent; every command
            # carries them, getMore and transaction statements included (Stable API spec).
            command.body.update(server_api_fields(server_api))
        encrypter = self.encrypter
        codec_options = operation.codec_options
        if encrypter is not None:
            # Encrypted before its started event, its reply read raw and decrypted after its succeeded event:
            # events and spans show ciphertext (Client Side Encryption spec, "Interaction with Command Monitoring").
            command = encrypter.encrypt_command(command)
            codec_options = encrypter.reply_codec_options
        listeners = self._command_listeners
        logging_on = COMMAND_LOGGER.isEnabledFor(logging.DEBUG)
        holder.sent = True
        if operation.ends_transaction:
            session.transaction.end_sent = True  # type: ignore[union-attr]  # (an explicit session: _execute)
        # Under a timeoutMS the send and the whole reply share its deadline (0: no limit, and no
        # socketTimeoutMS either); otherwise the connection's socketTimeoutMS applies.
        io = _deadline_io(deadline)
        tracer = self._tracer
        if not listeners and not logging_on and tracer is None:
            # Nobody looks at the reply but the operation: a cursor's batch may stay encoded until it is read
            # (events, logs and spans show it decoded, so they get the plain reply).
            reply = conn.command(command.dbname, command.body, sequences=command.sequences_for_connection(),
                                 check=False, unacknowledged=not command.acknowledged,
                                 codec_options=codec_options, apply_server_api=False,
                                 lazy_batches=operation.lazy_batches and encrypter is None, **io)
            return self._parsed(reply, operation, wire, session)
        monitor = None
        if listeners or logging_on:
            monitor = CommandMonitor(self._topology.topology_id, conn, command, listeners, logging_on)
            io["request_id"] = monitor.request_id
        span = tracer.start_command(holder.span, command, conn) if tracer is not None else None
        if monitor is not None:
            monitor.started()
        try:
            reply = conn.command(command.dbname, command.body, sequences=command.sequences_for_connection(),
                                 check=False, unacknowledged=not command.acknowledged,
                                 codec_options=codec_options, apply_server_api=False, **io)
        except BaseException as exc:
            if monitor is not None and isinstance(exc, Exception):
                monitor.failed(exc)
            if span is not None:
                tracer.end_command(span, error=exc)
            raise
        shown = reply if encrypter is None else encrypter.shown_reply(reply)
        if monitor is not None:
            monitor.finished(shown)
        if span is None:
            return self._parsed(reply, operation, wire, session)
        try:
            result = self._parsed(reply, operation, wire, session)
        except BaseException as exc:
            tracer.end_command(span, shown, exc)
            raise
        tracer.end_command(span, shown)
        return result

    def _parsed(self, reply: Any, operation: Operation[Any], wire: WireInfo, session: Optional[SessionState]) -> Any:
        """The operation's result from its reply (decrypted first under automatic encryption)."""
        encrypter = self.encrypter
        if encrypter is not None:
            reply = encrypter.decrypt_reply(reply, operation.codec_options)
        self._observe(reply, session)
        return operation.parse(reply, wire)

    def _session_fields(self, fields: ExecutionFields, session: SessionState, operation: Operation[Any],
                        command: Command, server: SelectedServer, server_description: ServerDescription,
                        holder: "_SessionHolder") -> None:
        """lsid, and the transaction / retryable-write / causal-consistency fields of the session."""
        fields.lsid = session.lsid_for_command()
        transaction = session.transaction
        if operation.ends_transaction:
            fields.txn_number = session.txn_number()
            fields.autocommit = False
            return
        if transaction.active and holder.explicit is session:
            fields.txn_number = session.txn_number()
            fields.autocommit = False
            fields.in_transaction = True
            if transaction.starting:
                fields.start_transaction = True
                read_concern = transaction.options.read_concern if transaction.options is not None else None
                document = dict(read_concern.document) if read_concern is not None else {}
                document.update(session.read_concern_extra() or {})
                fields.read_concern = document or None  # the transaction's, sent once, on its first statement
                topology_type = self._topology.description.topology_type
                pins = topology_type in (TopologyType.Sharded, TopologyType.LoadBalanced)
                connection = None
                lease = holder.lease
                if topology_type is TopologyType.LoadBalanced and lease is not None and lease.pin is None:
                    # Load Balancer spec: the whole transaction uses this connection (kept from now on,
                    # whatever this statement's outcome; unpinned as the Transactions spec unpins).
                    connection = lease.pin = server.pin(lease.conn, "transaction")
                transaction.statement_sent(server.address if pins else None, connection)
            return
        if holder.retryable_write and command.acknowledged:
            if holder.retrying and not server_description.retryable_writes_supported:
                raise _RetryNotPossible()
            if holder.txn_number is None and server_description.retryable_writes_supported:
                holder.txn_number = session.next_txn_number()
            fields.txn_number = holder.txn_number
        if holder.explicit is session and operation.session_read_concern != "none":
            if session.snapshot:
                fields.read_concern = {"level": "snapshot", **(session.read_concern_extra() or {})}
                fields.session_read_concern = True
            elif operation.session_read_concern == "all":
                extra = session.read_concern_extra()
                if extra:
                    fields.read_concern_extra = extra
                    fields.session_read_concern = True

    def _cluster_time_to_send(self, session: Optional[SessionState],
                              topology_type: TopologyType) -> Optional[Mapping[str, Any]]:
        """The highest $clusterTime known to the client or the session (replica sets, sharded)."""
        if self._clock is None or topology_type in (TopologyType.Single, TopologyType.Unknown):
            return None
        cluster_time = self._clock.cluster_time
        if session is not None and session.cluster_time is not None and (
                cluster_time is None or session.cluster_time["clusterTime"] > cluster_time["clusterTime"]):
            cluster_time = session.cluster_time
        return cluster_time

    def _observe(self, reply: Optional[Mapping[str, Any]], session: Optional[SessionState]) -> None:
        if reply is None:
            return
        reply_fields.check_gossip(reply)
        cluster_time = reply.get("$clusterTime")
        if cluster_time is not None and self._clock is not None:
            self._clock.advance(cluster_time)
        if session is not None:
            session.observe_reply(reply)


class OperationSpan:
    """One driver operation's span over several ``execute`` calls (OpenTelemetry spec: a span for every
    driver operation, its commands nested in it): opened with the first command, so that it is named after
    it ("insert db.coll"), and ended, with the block's error, when the block ends. A class, not a generator:
    a gevent.Timeout landing in a generator-based context manager breaks ``ContextVar.reset`` (gevent#1930).
    Per greenlet (a ContextVar), and per executor: another client's commands in the block (a key vault's)
    keep their own spans."""

    __slots__ = ("executor", "_span", "_attached", "_reset")

    def __init__(self, executor: Executor) -> None:
        self.executor = executor
        self._span: Any = None
        self._attached: Any = None
        self._reset: Any = None

    def span_for(self, operation: Operation[Any], session: Optional[SessionState]) -> Any:
        if self._span is None:
            self._span, self._attached = self.executor._tracer.start_operation(operation, session)
        return self._span

    def __enter__(self) -> "OperationSpan":
        if self.executor._tracer is not None:
            self._reset = _OPERATION_SPAN.set(self)
        return self

    def __exit__(self, exc_type: Any, exc: Optional[BaseException], traceback: Any) -> None:
        if self._reset is None:
            return
        _OPERATION_SPAN.reset(self._reset)
        if self._span is not None:
            self.executor._tracer.end_operation(self._span, self._attached, exc)


_OPERATION_SPAN: ContextVar[Optional[OperationSpan]] = ContextVar("greenmongo_operation_span", default=None)


class _RetryNotPossible(Exception):
    """No server for the retry, or one without retryable writes: the first error stands."""


class _Lease:
    """The connection one attempt runs on, and the pin that keeps it checked out afterwards, if any."""

    __slots__ = ("server", "conn", "pin")

    def __init__(self, server: SelectedServer, conn: CommandConnection, pin: Any = None) -> None:
        self.server = server
        self.conn = conn
        self.pin = pin


def _drop_broken_transaction_pin(lease: _Lease, holder: "_SessionHolder") -> None:
    """Interrupted (Timeout, GreenletExit) mid-command on a transaction's connection: it was closed, so the
    transaction lets go of it now (nothing else would until its abort)."""
    pin = lease.pin
    session = holder.explicit
    if pin is not None and pin.kind == "transaction" and pin.broken and session is not None:
        if session.transaction.pinned_connection is pin:
            session.transaction.unpin()


class _SessionHolder:
    """The session one operation runs with (the caller's, or an implicit one taken on first need),
    and the operation's retry state: a retryable write keeps its txnNumber across its retry."""

    __slots__ = ("source", "explicit", "implicit", "retryable_write", "retrying", "txn_number",
                 "write_retry_supported", "sent", "deadline", "lease", "wire_version",
                 "span")
    span: Any  # the operation's OpenTelemetry span: set (and read) only when the client traces

    def __init__(self, source: Optional[SessionSource], explicit: Optional[SessionState],
                 deadline: Deadline = LEGACY) -> None:
        self.source = source
        self.deadline = deadline
        self.explicit = explicit
        self.implicit: Optional[SessionState] = None
        self.retryable_write = False
        self.retrying = False
        self.txn_number: Optional[int] = None
        self.write_retry_supported = False  # the selected server takes retryable writes, and it is acknowledged
        self.sent = False  # this attempt reached the wire
        self.lease: Optional[_Lease] = None  # the attempt's connection, while it runs
        self.wire_version: Optional[int] = None  # of the last attempt's connection

    @property
    def session(self) -> Optional[SessionState]:
        return self.explicit or self.implicit

    def for_command(self, command: Command, server_description: ServerDescription) -> Optional[SessionState]:
        if self.explicit is not None:
            if not command.acknowledged and not self.explicit.in_transaction:
                raise InvalidOperation("explicit sessions are incompatible with unacknowledged write concern")
            return self.explicit
        # Implicit sessions only where the server supports sessions (a load balancer always does: Load
        # Balancer spec), never for unacknowledged writes.
        if (self.source is None or not command.acknowledged
                or (server_description.logical_session_timeout_minutes is None
                    and server_description.server_type is not ServerType.LoadBalancer)):
            return None
        if self.implicit is None:
            self.implicit = self.source.implicit_session()
        return self.implicit

    def release(self) -> None:
        if self.implicit is not None:
            self.implicit.end()
            self.implicit = None


def _deadline_io(deadline: Deadline) -> dict[str, Any]:
    """How ``Connection.command`` is bounded for this deadline (no arguments: socketTimeoutMS)."""
    if not deadline.csot:
        return {}
    if not deadline.finite:
        return {"timeout": None}
    return {"deadline": deadline.expires, "deadline_timeout": deadline.timeout}


#: WireInfo is immutable and a connection's limits are fixed by its handshake: one per distinct set of limits
#: (a handful: one per server), instead of a frozen dataclass built per operation.
_WIRE_INFOS: dict[tuple, WireInfo] = {}
_WIRE_INFOS_MAX = 256


def _connection_wire_info(conn: CommandConnection) -> WireInfo:
    key = (conn.max_wire_version, conn.max_bson_size, conn.max_message_size, conn.max_write_batch_size,
           getattr(conn, "address", None))
    wire = _WIRE_INFOS.get(key)
    if wire is None:
        if len(_WIRE_INFOS) >= _WIRE_INFOS_MAX:
            _WIRE_INFOS.clear()
        wire = _WIRE_INFOS[key] = WireInfo.from_connection(conn)
    return wire


def _wire_info(description: Any) -> WireInfo:
    hello = description.hello or {}
    wire_version = description.max_wire_version or 0
    if description.server_type is ServerType.LoadBalancer:
        # A load balancer's description stays empty (Load Balancer spec): load-balanced mode needs 5.0+, and
        # each batch is built for the connection it goes out on anyway.
        wire_version = WIRE_5_0
    return WireInfo.from_hello({**hello, "maxWireVersion": wire_version}, description.address)


#: Commands counted as a cursor's use of a connection (the pool's exhaustion diagnostics).
_CURSOR_COMMANDS = frozenset({"find", "aggregate", "getMore", "killCursors", "listCollections", "listIndexes"})


def _pool_use(operation: Operation, holder: "_SessionHolder") -> Optional[str]:
    """What the pool counts this attempt's connection as in use for: "transaction", "cursor" or None."""
    session = holder.explicit
    if operation.ends_transaction or (session is not None and session.in_transaction):
        return "transaction"
    return "cursor" if operation.name in _CURSOR_COMMANDS else None


def _chooses_own_preference(operation: Operation) -> bool:
    return type(operation).selection_read_preference is not Operation.selection_read_preference
