"""OpenTelemetry tracing (OpenTelemetry spec): operation, command and transaction spans.

Off by default. A client traces when ``MongoClient(tracing={"enabled": True})`` says so, or, when its
``tracing`` leaves ``enabled`` out, when OTEL_PYTHON_INSTRUMENTATION_MONGODB_ENABLED is 1/true/yes. Only
the OpenTelemetry *API* is used (the ``greenmongo[otel]`` extra), imported when the first tracing client
is made; without an SDK configured by the application its spans are no-ops. A client that does not trace
has no ``Tracer`` at all (``ClientCore.tracer is None``): the executor pays one attribute check.

Parents are carried explicitly, not through the greenlet's context: a command span's parent is its
operation's span (the executor holds it for the operation), an operation's parent is its session's
``transaction`` span while one is open (so statements run from any greenlet nest under it), else the
span current in the calling greenlet (the application's). While an operation runs its span is the
current one in that greenlet, for whatever the application's listeners trace meanwhile.
"""

from __future__ import annotations

import os
import traceback
from typing import Any, Mapping, Optional

from greenmongo._version import __version__
from greenmongo.errors import ConfigurationError
from greenmongo.logs import messages
from greenmongo.monitoring.command import is_sensitive_command
from greenmongo.operations.base import Command, reply_ok
from greenmongo.operations.run_command import RunCommandOperation

ENABLED_ENV = "OTEL_PYTHON_INSTRUMENTATION_MONGODB_ENABLED"
QUERY_TEXT_MAX_LENGTH_ENV = "OTEL_PYTHON_INSTRUMENTATION_MONGODB_QUERY_TEXT_MAX_LENGTH"
_TRUE = frozenset({"1", "true", "yes"})
#: Operations whose driver operation name (the spec's covered operations) differs from their command's.
_OPERATION_NAMES = {"drop": "dropCollection", "create": "createCollection"}
#: CommandStartedEvent fields that db.query.text leaves out.
_NOT_IN_QUERY_TEXT = ("lsid", "$db", "$clusterTime", "signature")


def make_tracer(settings: Optional[Mapping[str, Any]], environ: Mapping[str, str] = os.environ) -> Optional["Tracer"]:
    """The client's Tracer, or None when it does not trace. ``settings`` is the validated ``tracing``
    option (``enabled``/``query_text_max_length``, None where not given: the environment decides)."""
    settings = settings or {}
    enabled = settings.get("enabled")
    if enabled is None:
        enabled = environ.get(ENABLED_ENV, "").strip().lower() in _TRUE
    if not enabled:
        return None
    max_length = settings.get("query_text_max_length")
    if max_length is None:
        text = environ.get(QUERY_TEXT_MAX_LENGTH_ENV, "").strip()
        try:
            max_length = int(text) if text else 0
        except ValueError:
            max_length = -1
        if max_length < 0:
            raise ConfigurationError(f"{QUERY_TEXT_MAX_LENGTH_ENV} must be a non-negative integer")
    try:
        from opentelemetry import context, trace
    except ImportError:
        raise ConfigurationError(
            "tracing needs the OpenTelemetry API, which is not installed: pip install 'greenmongo[otel]'"
        ) from None
    return Tracer(trace, context, max_length)


def operation_name(operation: Any) -> str:
    """The driver operation name of the spec's covered operations (findOneAndUpdate -> findAndModify...)."""
    if isinstance(operation, RunCommandOperation):
        return "runCommand"
    name = operation.name
    return _OPERATION_NAMES.get(name, name)


def _operation_collection(operation: Any) -> Optional[str]:
    collection = getattr(operation, "collection", None)
    if collection is None:
        state = getattr(operation, "state", None)  # a getMore: its cursor's collection
        collection = getattr(state, "collection_name", None)
    return collection if isinstance(collection, str) and collection else None


def _command_collection(command: Command) -> Optional[str]:
    """The collection a command names (its first value, a getMore's ``collection``); none on admin (the spec:
    a configureFailPoint's "failCommand" is no collection)."""
    if command.dbname == "admin":
        return None
    body = command.body
    value = body.get("collection") if command.name == "getMore" else next(iter(body.values()))
    return value if isinstance(value, str) and value else None


def _summary(name: str, dbname: Optional[str], collection: Optional[str]) -> str:
    if collection is not None:
        return f"{name} {dbname}.{collection}"
    return f"{name} {dbname}" if dbname else name


class Tracer:
    """One tracing client's spans; built by ``make_tracer`` only when the client traces."""

    __slots__ = ("_trace", "_context", "_tracer", "_client_kind", "_error", "query_text_max_length")

    def __init__(self, trace_api: Any, context_api: Any, query_text_max_length: int = 0) -> None:
        self._trace = trace_api
        self._context = context_api
        self._tracer = trace_api.get_tracer("greenmongo", __version__)
        self._client_kind = trace_api.SpanKind.CLIENT
        self._error = trace_api.StatusCode.ERROR
        #: 0: no db.query.text; else its length, past which it is cut (and ends with "...").
        self.query_text_max_length = query_text_max_length

    # -- transactions -----------------------------------------------------------------------

    def start_transaction(self, session: Any) -> None:
        """startTransaction: a ``transaction`` span on the session (the previous one ends if still open)."""
        self.end_transaction(session)
        session.trace_span = self._tracer.start_span(
            "transaction", kind=self._client_kind, attributes={"db.system.name": "mongodb"})
        session.trace_span_open = True

    def end_transaction(self, session: Any) -> None:
        """commit/abort: the span ends (once); it stays on the session as the parent of a repeated commit."""
        if getattr(session, "trace_span_open", False):
            session.trace_span_open = False
            session.trace_span.end()

    # -- operations -------------------------------------------------------------------------

    def start_operation(self, operation: Any, session: Any) -> tuple[Any, Any]:
        """The operation's span, made current in this greenlet: (span, the token to detach it)."""
        name = operation_name(operation)
        dbname = getattr(operation, "dbname", None)
        collection = _operation_collection(operation)
        summary = _summary(name, dbname, collection)
        attributes: dict[str, Any] = {"db.system.name": "mongodb", "db.operation.name": name,
                                      "db.operation.summary": summary}
        if dbname:
            attributes["db.namespace"] = dbname
        if collection is not None:
            attributes["db.collection.name"] = collection
        cursor_id = getattr(operation, "cursor_id", None)
        if name == "getMore" and cursor_id:
            attributes["db.mongodb.cursor_id"] = int(cursor_id)
        parent = None
        transaction_span = getattr(session, "trace_span", None)
        if transaction_span is not None and (session.in_transaction or operation.ends_transaction):
            parent = self._trace.set_span_in_context(transaction_span)
        span = self._tracer.start_span(summary, context=parent, kind=self._client_kind, attributes=attributes)
        token = self._context.attach(self._trace.set_span_in_context(span))
        return span, token

    def end_operation(self, span: Any, token: Any, error: Optional[BaseException] = None) -> None:
        try:
            self._context.detach(token)
        finally:
            if error is not None:
                self._record(span, error)
            span.end()

    # -- commands -------------------------------------------------------------------------------

    def start_command(self, parent: Any, command: Command, conn: Any) -> Any:
        """A command's span under its operation's; None for sensitive commands (never traced)."""
        name = command.name
        body = command.body
        if is_sensitive_command(name, body):
            return None
        dbname = command.dbname
        collection = _command_collection(command)
        host, port = conn.address
        attributes: dict[str, Any] = {
            "db.system.name": "mongodb", "db.namespace": dbname, "db.command.name": name,
            "db.query.summary": _summary(name, dbname, collection), "server.address": host,
            "network.transport": "unix" if str(host).endswith(".sock") else "tcp",
            "db.mongodb.driver_connection_id": conn.id,
        }
        if port is not None and not str(host).endswith(".sock"):
            attributes["server.port"] = int(port)
        if collection is not None:
            attributes["db.collection.name"] = collection
        hello = getattr(conn, "hello", None) or {}
        if hello.get("connectionId") is not None:
            attributes["db.mongodb.server_connection_id"] = int(hello["connectionId"])
        lsid = body.get("lsid")
        if lsid is not None:
            attributes["db.mongodb.lsid"] = messages.format_document(lsid, 1000)
        if body.get("txnNumber") is not None:
            attributes["db.mongodb.txn_number"] = int(body["txnNumber"])
        if name == "getMore":
            attributes["db.mongodb.cursor_id"] = int(body["getMore"])
        elif name == "killCursors" and len(body.get("cursors") or ()) == 1:
            attributes["db.mongodb.cursor_id"] = int(body["cursors"][0])
        if self.query_text_max_length:
            document = command.for_monitoring(body)
            for key in _NOT_IN_QUERY_TEXT:
                document.pop(key, None)
            attributes["db.query.text"] = messages.format_document(document, self.query_text_max_length)
        context = self._trace.set_span_in_context(parent) if parent is not None else None
        return self._tracer.start_span(name, context=context, kind=self._client_kind, attributes=attributes)

    def end_command(self, span: Any, reply: Optional[Mapping[str, Any]] = None,
                    error: Optional[BaseException] = None) -> None:
        """The reply's cursor id (a getMore keeps the one it sent); an error is the command's only if it
        came from the wire or the server said ok: 0 (write errors in an ok reply are the operation's)."""
        if reply is not None:
            cursor = reply.get("cursor")
            if isinstance(cursor, Mapping) and cursor.get("id") and "firstBatch" in cursor:
                span.set_attribute("db.mongodb.cursor_id", int(cursor["id"]))
        if error is not None and (reply is None or not reply_ok(reply)):
            code = getattr(error, "code", None)
            if code is None and reply is not None:
                code = reply.get("code")
            if code is not None:
                span.set_attribute("db.response.status_code", str(code))
            self._record(span, error)
        span.end()

    def _record(self, span: Any, error: BaseException) -> None:
        """The spec's exception.type/message/stacktrace, as OpenTelemetry's exception event and attributes."""
        message = str(error)
        error_type = f"{type(error).__module__}.{type(error).__qualname__}"
        stacktrace = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        span.set_attributes({"exception.type": error_type, "exception.message": message,
                             "exception.stacktrace": stacktrace})
        span.record_exception(error, attributes={"exception.stacktrace": stacktrace})
        span.set_status(self._trace.Status(self._error, message))
