"""The entity map of one test, and how each entity type is created and cleaned up.

Every entity is stored with its kind (client, database, collection, session,
bucket, thread, changeStream, findCursor, commandCursor, eventList,
topologyDescription, bson, ...): lookups name the kinds they accept, so an
undefined or mistyped entity is a TestFileError, as the spec requires. Thread
entities are greenlets with a queue of operations; with a driver that blocks the
OS thread they hand each operation to gevent's thread pool to stay concurrent.
"""

from __future__ import annotations

import copy
import os
from collections import deque
from collections.abc import Mapping
from typing import Any, Callable, Iterable, Optional

import gevent
import gevent.queue

from spec.unified.encryption import auto_encryption_opts, create_client_encryption
from spec.unified.events import EventRecorder, LogCollector
from spec.unified.matching import MISSING
from spec.unified.outcomes import MatchError, NotSupported, TestFileError
from spec.unified.tracing import SpanCollector, tracing_option
from tests.waits import wait_until

#: Entity kinds that hold BSON values (may be matched with $$matchesEntity).
BSON_KINDS = frozenset({"bson", "eventList", "errorList"})
CURSOR_KINDS = ("changeStream", "findCursor", "commandCursor")

#: $$placeholder values in uriOptions, from the environment (e.g. OIDC's ENVIRONMENT property).
PLACEHOLDER_ENV = {
    "uriOptions/authMechanismProperties/ENVIRONMENT": "OIDC_ENV",
    "uriOptions/authMechanismProperties/TOKEN_RESOURCE": "OIDC_TOKEN_RESOURCE",
}

#: heartbeatFrequencyMS for clients of tests that set fail points (500 is the spec's minimum).
FAST_HEARTBEAT_MS = 500

_CLIENT_KEYS = frozenset({
    "id", "uriOptions", "useMultipleMongoses", "observeEvents", "ignoreCommandMonitoringEvents",
    "observeSensitiveCommands", "storeEventsAsEntities", "observeLogMessages", "serverApi", "autoEncryptOpts",
    "awaitMinPoolSizeMS", "observeTracingMessages",
})


class CursorEntity:
    """A find cursor, command cursor or change stream, iterated the way the unified format asks.

    A lazily created find cursor is primed with one ``next`` at creation (so the
    server cursor exists); that document is handed out by the first iteration.
    ``iteration_block``: a factory of the ``timeout()`` block each iteration
    operation runs in. For a tailable cursor with a timeoutMS, iterateUntilDocumentOrError's
    loop then shares one timeoutMS as the spec's blocking ``next`` would; for a
    driver whose cursors do not keep the timeout they were created with (PyMongo),
    it is the creating operation's timeoutMS, as its users bound ``next`` calls.
    """

    def __init__(self, cursor: Any, kind: str, prime: bool,
                 iteration_block: Optional[Callable[[], Any]] = None) -> None:
        self.cursor = cursor
        self.kind = kind
        self.iteration_block = iteration_block
        self.buffer: deque = deque()
        if prime:
            try:
                self.buffer.append(next(cursor))
            except StopIteration:
                pass

    def __iter__(self):
        while self.buffer:
            yield self.buffer.popleft()
        yield from self.cursor

    def iterate_until_document(self) -> Any:
        if self.buffer:
            return self.buffer.popleft()
        if self.iteration_block is None:
            return self._until_document()
        with self.iteration_block():
            return self._until_document()

    def _until_document(self) -> Any:
        while True:
            try:
                return next(self.cursor)
            except StopIteration:
                if not getattr(self.cursor, "alive", False):
                    raise MatchError(f"{self.kind} is exhausted: iterateUntilDocumentOrError found no document") \
                        from None

    def iterate_once(self) -> Any:
        if self.buffer:
            return self.buffer.popleft()
        if self.iteration_block is None:
            return self._once()
        with self.iteration_block():
            return self._once()

    def _once(self) -> Any:
        try_next = getattr(self.cursor, "try_next", None)
        if try_next is not None:
            result = try_next()
            return MISSING if result is None else result
        try:
            return next(self.cursor)
        except StopIteration:
            return MISSING

    def close(self) -> None:
        try:
            self.cursor.close()
        except Exception:  # the spec: errors from closing a cursor are suppressed
            pass


class ThreadEntity:
    """A test runner "thread": a greenlet running scheduled operations in order."""

    _STOP = object()

    def __init__(self, name: str, run_operation: Callable[[Mapping], None], blocking_io: bool) -> None:
        self.name = name
        self.run_operation = run_operation
        self.blocking_io = blocking_io
        self.queue: gevent.queue.Queue = gevent.queue.Queue()
        self.error: Optional[BaseException] = None
        self.greenlet = gevent.spawn(self._loop)

    def _loop(self) -> None:
        while True:
            operation = self.queue.get()
            if operation is self._STOP:
                return
            if self.error is not None:
                continue
            if self.blocking_io:
                self.error = gevent.get_hub().threadpool.apply(self._run, (operation,))
            else:
                self.error = self._run(operation)

    def _run(self, operation: Mapping) -> Optional[BaseException]:
        """The operation's failure, returned rather than raised (the thread pool would print it)."""
        try:
            self.run_operation(operation)
        except Exception as exc:
            return exc
        return None

    def schedule(self, operation: Mapping) -> None:
        self.queue.put(operation)
        gevent.sleep(0)  # let the thread start the operation now, as runOnThread requires

    def wait(self, timeout: float = 10.0) -> None:
        self.queue.put(self._STOP)
        self.greenlet.join(timeout)
        if not self.greenlet.dead:
            self.greenlet.kill(block=False)
            raise MatchError(f"thread {self.name} did not finish its operations within {timeout}s")
        if self.error is not None:
            raise self.error

    def kill(self) -> None:
        self.greenlet.kill(block=True, timeout=5)


class EntityMap:
    """Named entities of one test; enforces unique names and entity kinds."""

    def __init__(self, context: Any) -> None:
        self.context = context
        self.adapter = context.adapter
        self._entities: dict[str, tuple[str, Any]] = {}
        self.recorders: dict[str, EventRecorder] = {}
        self.log_collectors: dict[str, LogCollector] = {}
        self.span_collectors: dict[str, SpanCollector] = {}
        self.session_lsids: dict[str, Any] = {}
        self.run_operation: Optional[Callable[[Mapping], None]] = None  # set by the runner, for threads
        self.fast_heartbeat = False
        """Set for tests that configure fail points: clients then check the server every 500 ms
        (spec: "MAY specify a reduced value for heartbeatFrequencyMS"), unless they set it themselves."""

    # -- storage ---------------------------------------------------------------

    def add(self, name: str, kind: str, value: Any) -> None:
        if not isinstance(name, str):
            raise TestFileError(f"entity names are strings, got {name!r}")
        if name in self._entities:
            raise TestFileError(f"entity {name!r} already exists")
        self._entities[name] = (kind, value)

    def __contains__(self, name: str) -> bool:
        return name in self._entities

    def kind(self, name: str) -> str:
        return self._lookup(name)[0]

    def get(self, name: str, *kinds: str) -> Any:
        kind, value = self._lookup(name)
        if kinds and kind not in kinds:
            raise TestFileError(f"entity {name!r} is a {kind}, expected {' or '.join(kinds)}")
        return value

    def _lookup(self, name: str) -> tuple[str, Any]:
        try:
            return self._entities[name]
        except (KeyError, TypeError):
            raise TestFileError(f"no entity named {name!r}") from None

    def items(self) -> Iterable[tuple[str, str, Any]]:
        return [(name, kind, value) for name, (kind, value) in self._entities.items()]

    # -- EntityLookup (for the matcher) -------------------------------------------

    def entity_value(self, name: str) -> Any:
        kind, value = self._lookup(name)
        if kind not in BSON_KINDS:
            raise TestFileError(f"entity {name!r} is a {kind}, not a BSON value")
        return value

    def session_lsid(self, name: str) -> Any:
        self.get(name, "session")
        return self.session_lsids[name]

    def recorder(self, client_name: str) -> EventRecorder:
        self.get(client_name, "client")
        return self.recorders[client_name]

    # -- creation ----------------------------------------------------------------

    def create_all(self, specs: Iterable[Mapping[str, Any]]) -> None:
        for spec in specs:
            self.create(spec)

    def create(self, entity: Mapping[str, Any]) -> None:
        if not isinstance(entity, Mapping) or len(entity) != 1:
            raise TestFileError(f"an entity needs exactly one top-level key, got {entity!r}")
        ((kind, spec),) = entity.items()
        creator = getattr(self, f"_create_{kind}", None)
        if creator is None:
            raise TestFileError(f"unknown entity type {kind!r}")
        creator(spec)

    def _create_client(self, spec: Mapping[str, Any]) -> None:
        unknown = set(spec) - _CLIENT_KEYS
        if unknown:
            raise TestFileError(f"client {spec.get('id')!r}: unknown keys {sorted(unknown)}")
        name = spec["id"]
        tracing = None
        if "observeTracingMessages" in spec:
            if not self.adapter.tracing:
                raise NotSupported(f"{self.adapter.name} has no OpenTelemetry tracing (observeTracingMessages)")
            if self.span_collectors:
                raise NotSupported("OpenTelemetry spans do not say which client made them: one tracing client "
                                   "per test")
            tracing = tracing_option(spec["observeTracingMessages"])
        uri_options = resolve_placeholders(dict(spec.get("uriOptions", {})), "uriOptions")
        if self.fast_heartbeat and not any(key.lower() == "heartbeatfrequencyms" for key in uri_options):
            uri_options["heartbeatFrequencyMS"] = FAST_HEARTBEAT_MS
        for option in uri_options:
            reason = self.adapter.unsupported_uri_options.get(option)
            if reason:
                raise NotSupported(reason)
        recorder = EventRecorder(name, observe=spec.get("observeEvents", ()),
                                 ignore_commands=spec.get("ignoreCommandMonitoringEvents", ()),
                                 observe_sensitive=spec.get("observeSensitiveCommands", False))
        for store in spec.get("storeEventsAsEntities", ()):
            events: list = []
            self.add(store["id"], "eventList", events)
            recorder.add_store(store["events"], events)
        collector = None
        if spec.get("observeLogMessages"):
            collector = LogCollector(self.adapter, name, spec["observeLogMessages"])
            self.log_collectors[name] = collector
        host, kwargs = self.context.client_arguments(uri_options, spec.get("useMultipleMongoses"))
        server_api = spec.get("serverApi")
        if server_api:
            kwargs["server_api"] = self.adapter.ServerApi(
                server_api["version"], strict=server_api.get("strict"),
                deprecation_errors=server_api.get("deprecationErrors"))
        kwargs["event_listeners"] = recorder.listeners(self.adapter.listener_bases)
        if "autoEncryptOpts" in spec:
            kwargs["auto_encryption_opts"] = auto_encryption_opts(self.adapter, self, spec["autoEncryptOpts"])
        self.recorders[name] = recorder
        if tracing is not None:
            kwargs["tracing"] = tracing
            self.span_collectors[name] = SpanCollector(name)
        client = self.adapter.MongoClient(host, **kwargs)
        self.add(name, "client", client)
        if collector is not None:
            collector.owner = self.adapter.client_log_owner(client)
        if "awaitMinPoolSizeMS" in spec:
            self._await_min_pool(name, recorder, kwargs, spec["awaitMinPoolSizeMS"], collector)

    def _await_min_pool(self, name: str, recorder: EventRecorder, kwargs: Mapping[str, Any], wait_ms: int,
                        collector: Optional[LogCollector]) -> None:
        wanted = int(next((value for key, value in kwargs.items() if key.lower() == "minpoolsize"), 0))
        wait_until(lambda: recorder.ready_connections >= wanted, wait_ms / 1000.0,
                   lambda: f"client {name}: pool did not reach minPoolSize={wanted} within {wait_ms}ms",
                   error=MatchError)
        recorder.observed.clear()  # events of the warm-up are not the test's
        if collector is not None:
            collector.clear()

    def _create_database(self, spec: Mapping[str, Any]) -> None:
        _check_keys("database", spec, {"id", "client", "databaseName", "databaseOptions"})
        client = self.get(spec["client"], "client")
        options = self.context.collection_options(spec.get("databaseOptions", {}))
        self.add(spec["id"], "database", client.get_database(spec["databaseName"], **options))

    def _create_collection(self, spec: Mapping[str, Any]) -> None:
        _check_keys("collection", spec, {"id", "database", "collectionName", "collectionOptions"})
        database = self.get(spec["database"], "database")
        options = self.context.collection_options(spec.get("collectionOptions", {}))
        self.add(spec["id"], "collection", database.get_collection(spec["collectionName"], **options))

    def _create_session(self, spec: Mapping[str, Any]) -> None:
        _check_keys("session", spec, {"id", "client", "sessionOptions"})
        client = self.get(spec["client"], "client")
        if getattr(type(client), "start_session", None) is None:
            raise NotSupported(f"{self.adapter.name}'s MongoClient has no start_session (sessions)")
        options: dict = {}
        for key, value in (spec.get("sessionOptions") or {}).items():
            if key == "causalConsistency":
                options["causal_consistency"] = value
            elif key == "snapshot":
                options["snapshot"] = value
            elif key == "defaultTransactionOptions":
                options["default_transaction_options"] = self.context.transaction_options(value)
            elif key == "defaultTimeoutMS":
                keyword = self.adapter.session_timeout_keyword
                if keyword is None:
                    raise NotSupported(f"{self.adapter.name} has no session-level timeoutMS (sessionOptions "
                                       "defaultTimeoutMS)")
                options[keyword] = value
            else:
                raise TestFileError(f"session {spec['id']!r}: unknown sessionOptions key {key!r}")
        session = client.start_session(**options)
        self.add(spec["id"], "session", session)
        self.session_lsids[spec["id"]] = copy.deepcopy(session.session_id)

    def _create_bucket(self, spec: Mapping[str, Any]) -> None:
        _check_keys("bucket", spec, {"id", "database", "bucketOptions"})
        database = self.get(spec["database"], "database")
        bucket_class = self.adapter.GridFSBucket
        if bucket_class is None:
            raise NotSupported(f"{self.adapter.name} has no GridFSBucket")
        kwargs: dict = {}
        for key, value in (spec.get("bucketOptions") or {}).items():
            if key == "bucketName":
                kwargs["bucket_name"] = value
            elif key == "chunkSizeBytes":
                kwargs["chunk_size_bytes"] = value
            elif key == "writeConcern":
                kwargs["write_concern"] = self.context.write_concern(value)
            elif key == "readPreference":
                kwargs["read_preference"] = self.adapter.read_preference(value)
            elif key == "readConcern":
                raise NotSupported("GridFSBucket has no readConcern option in the PyMongo-shaped API")
            else:
                raise TestFileError(f"bucket {spec['id']!r}: unknown bucketOptions key {key!r}")
        self.add(spec["id"], "bucket", bucket_class(database, **kwargs))

    def _create_thread(self, spec: Mapping[str, Any]) -> None:
        _check_keys("thread", spec, {"id"})
        if self.run_operation is None:
            raise TestFileError("thread entities need the runner's operation callback")
        self.add(spec["id"], "thread", ThreadEntity(spec["id"], self.run_operation, self.adapter.blocking_io))

    def _create_clientEncryption(self, spec: Mapping[str, Any]) -> None:  # noqa: N802 (the spec's name)
        create_client_encryption(self, spec)

    # -- clean-up ------------------------------------------------------------------

    def stop_capture(self) -> None:
        for recorder in self.recorders.values():
            recorder.stop()
        for collector in self.log_collectors.values():
            collector.stop()
        for spans in self.span_collectors.values():
            spans.stop()

    def close(self) -> None:
        """End sessions, close cursors, stop threads, close clients; errors here never mask the test's."""
        self.stop_capture()
        entities = list(self._entities.values())
        for kind, value in entities:
            if kind == "thread":
                _quietly(value.kill)
        for kind, value in entities:
            if kind in CURSOR_KINDS:
                value.close()
        for kind, value in entities:
            if kind == "session":
                _quietly(value.end_session)
        for kind, value in entities:
            if kind == "clientEncryption":
                _quietly(value.close)
        for kind, value in entities:
            if kind == "client":
                _quietly(lambda client=value: self.context.close_client(client))
        for collector in reversed(list(self.log_collectors.values())):  # each restores the levels it found
            collector.close()
        self._entities.clear()


def _check_keys(kind: str, spec: Mapping[str, Any], allowed: set[str]) -> None:
    unknown = set(spec) - allowed
    if unknown:
        raise TestFileError(f"{kind} {spec.get('id')!r}: unknown keys {sorted(unknown)}")


def _quietly(action: Callable[[], Any]) -> None:
    try:
        action()
    except Exception:
        pass


def resolve_placeholders(value: Any, path: str) -> Any:
    """Replace ``{$$placeholder: 1}`` values with ones from the environment, or refuse."""
    if isinstance(value, Mapping):
        if len(value) == 1 and "$$placeholder" in value:
            variable = PLACEHOLDER_ENV.get(path)
            if variable is None or not os.environ.get(variable):
                raise NotSupported(f"no value for the $$placeholder at {path}"
                                   + (f" (set {variable})" if variable else ""))
            return os.environ[variable]
        return {key: resolve_placeholders(item, f"{path}/{key}") for key, item in value.items()}
    return value
