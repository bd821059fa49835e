"""Event and log capture for client entities, and the expectEvents / expectLogMessages assertions.

Each client entity gets one ``EventRecorder``: listener objects of the driver's
own listener base classes (PyMongo-shaped: ``started``/``succeeded``/... per
family) forward every event to it. The recorder keeps the events the client
observes (``observeEvents`` minus ignored and sensitive commands), feeds
``storeEventsAsEntities`` lists, and counts checked-out connections from CMAP
events. ``LogCollector`` is a ``logging.Handler`` on the driver's loggers that
keeps the structured fields of the spec's log messages for one client.

Drivers call listeners from their own greenlets or threads; appends to a list
are atomic under the GIL, which is all the sharing here needs.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Mapping
from typing import Any, Iterable, Optional, Sequence

from spec.unified.matching import MISSING, Matcher
from spec.unified.outcomes import MatchError, NotSupported, TestFileError

COMMAND_EVENTS = frozenset({"commandStartedEvent", "commandSucceededEvent", "commandFailedEvent"})
CMAP_EVENTS = frozenset({
    "poolCreatedEvent", "poolReadyEvent", "poolClearedEvent", "poolClosedEvent", "connectionCreatedEvent",
    "connectionReadyEvent", "connectionClosedEvent", "connectionCheckOutStartedEvent",
    "connectionCheckOutFailedEvent", "connectionCheckedOutEvent", "connectionCheckedInEvent",
})
SDAM_EVENTS = frozenset({
    "serverDescriptionChangedEvent", "serverHeartbeatStartedEvent", "serverHeartbeatSucceededEvent",
    "serverHeartbeatFailedEvent", "topologyDescriptionChangedEvent", "topologyOpeningEvent",
    "topologyClosedEvent", "serverOpeningEvent", "serverClosedEvent",
})
EVENT_TYPES = {"command": COMMAND_EVENTS, "cmap": CMAP_EVENTS, "sdam": SDAM_EVENTS}

#: Commands whose events are hidden unless observeSensitiveCommands (Command Logging and Monitoring spec).
SENSITIVE_COMMANDS = frozenset({
    "authenticate", "saslstart", "saslcontinue", "getnonce", "createuser", "updateuser",
    "copydbgetnonce", "copydbsaslstart", "copydb",
})
HELLO_COMMANDS = frozenset({"hello", "ismaster"})

#: Spec log severity -> Python logging level.
LOG_LEVELS = {
    "emergency": logging.CRITICAL, "alert": logging.CRITICAL, "critical": logging.CRITICAL,
    "error": logging.ERROR, "warn": logging.WARNING, "warning": logging.WARNING,
    "notice": logging.INFO, "info": logging.INFO, "informational": logging.INFO,
    "debug": logging.DEBUG, "trace": 5,
}

# Driver event attributes (PyMongo's names) -> field names for storeEventsAsEntities documents.
_STORED_FIELDS = (
    ("command_name", "commandName"), ("database_name", "databaseName"), ("request_id", "requestId"),
    ("operation_id", "operationId"), ("connection_id", "connectionId"),
    ("server_connection_id", "serverConnectionId"), ("service_id", "serviceId"), ("address", "address"),
    ("reason", "reason"), ("failure", "failure"), ("interrupt_connections", "interruptInUseConnections"),
)


def event_name(event: Any) -> str:
    """``CommandStartedEvent`` -> ``commandStartedEvent`` (the unified format's names)."""
    name = type(event).__name__
    if name == "TopologyOpenedEvent":
        name = "TopologyOpeningEvent"
    return name[:1].lower() + name[1:]


class EventRecorder:
    """Everything one client entity publishes, filtered the way the unified format asks."""

    def __init__(self, client_id: str, *, observe: Iterable[str] = (), ignore_commands: Iterable[str] = (),
                 observe_sensitive: bool = False) -> None:
        self.client_id = client_id
        self.observe = frozenset(observe)
        unknown = self.observe - COMMAND_EVENTS - CMAP_EVENTS - SDAM_EVENTS
        if unknown:
            raise TestFileError(f"client {client_id}: unknown observeEvents {sorted(unknown)}")
        self.ignore_commands = frozenset(name.lower() for name in ignore_commands) | {"configurefailpoint"}
        self.observe_sensitive = observe_sensitive
        self.observed: list[tuple[str, Any]] = []
        self.stores: list[tuple[frozenset[str], list]] = []
        self.checked_out = 0
        self.ready_connections = 0
        self.capturing = True

    def add_store(self, event_names: Iterable[str], target: list) -> None:
        """storeEventsAsEntities: serialize these (class-style) event names into ``target``."""
        self.stores.append((frozenset(event_names), target))

    def listeners(self, listener_bases: Mapping[str, type]) -> list:
        """One listener object per family the driver supports, each forwarding to ``handle``."""
        return [_forwarding_listener(base, self.handle) for base in listener_bases.values()]

    def stop(self) -> None:
        self.capturing = False

    # -- the listener callback ---------------------------------------------

    def handle(self, event: Any) -> None:
        name = event_name(event)
        if name == "connectionCheckedOutEvent":
            self.checked_out += 1
        elif name == "connectionCheckedInEvent":
            self.checked_out -= 1
        elif name == "connectionReadyEvent":
            self.ready_connections += 1
        elif name == "connectionClosedEvent":
            self.ready_connections -= 1
        if not self.capturing:
            return
        if self.stores:
            class_name = name[:1].upper() + name[1:]
            for names, target in self.stores:
                if class_name in names:
                    target.append(serialize_event(class_name, event))
        if name in self.observe and not self._ignored(name, event):
            self.observed.append((name, event))

    def _ignored(self, name: str, event: Any) -> bool:
        if name not in COMMAND_EVENTS:
            return False
        command_name = str(getattr(event, "command_name", "")).lower()
        if command_name in self.ignore_commands:
            return True
        if self.observe_sensitive:
            return False
        if command_name in SENSITIVE_COMMANDS:
            return True
        if command_name in HELLO_COMMANDS:
            # hello with speculativeAuthenticate is sensitive; the driver shows it by redacting to {}
            if name == "commandStartedEvent":
                return not getattr(event, "command", None)
            if name == "commandSucceededEvent":
                return not getattr(event, "reply", None)
        return False

    # -- queries -------------------------------------------------------------

    def events_of(self, event_type: str) -> list[tuple[str, Any]]:
        names = EVENT_TYPES[event_type]
        return [item for item in list(self.observed) if item[0] in names]

    def command_started(self) -> list[Any]:
        return [event for name, event in list(self.observed) if name == "commandStartedEvent"]


def _forwarding_listener(base: type, sink: Any) -> Any:
    return _forwarding_class(base)(sink)


@functools.lru_cache(maxsize=None)
def _forwarding_class(base: type) -> type:
    """A subclass of the driver's listener base whose every callback hands the event to ``sink``."""

    def __init__(self: Any, sink: Any) -> None:
        self._sink = sink

    def forward(self: Any, event: Any) -> None:
        self._sink(event)

    methods: dict[str, Any] = {"__init__": __init__}
    for attr in dir(base):
        if not attr.startswith("_") and callable(getattr(base, attr, None)):
            methods[attr] = forward
    return type(f"Unified{base.__name__}", (base,), methods)


def serialize_event(class_name: str, event: Any) -> dict:
    """A storeEventsAsEntities document: the event's documented fields plus name and observedAt."""
    doc: dict = {"name": class_name, "observedAt": time.time()}
    for attr, key in _STORED_FIELDS:
        value = getattr(event, attr, MISSING)
        if value is MISSING or value is None:
            continue
        doc[key] = _bson_safe(value)
    micros = getattr(event, "duration_micros", None)
    if micros is not None:
        doc["duration"] = micros / 1000.0
    return doc


def _bson_safe(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, tuple):
        return ":".join(str(part) for part in value)
    if isinstance(value, BaseException):
        return str(value)
    if isinstance(value, Mapping):
        return dict(value)
    return str(value)


# -- expectEvents ----------------------------------------------------------------

def _description_type(description: Any) -> Optional[str]:
    for attr in ("server_type_name", "topology_type_name"):
        value = getattr(description, attr, None)
        if value is not None:
            return value
    return None


def _assert_flag(what: str, want: Any, got: Any, path: str) -> None:
    if got is MISSING or got is None or bool(got) != bool(want):
        raise MatchError(f"{path}: expected {what}={want!r}, got {got!r}")


def match_event(matcher: Matcher, expected: Mapping[str, Any], actual: tuple[str, Any], path: str) -> None:
    """Raise MatchError unless the observed ``(name, event)`` matches one expectedEvent object."""
    if len(expected) != 1:
        raise TestFileError(f"{path}: an expected event needs exactly one key, got {list(expected)}")
    ((want_name, spec),) = expected.items()
    name, event = actual
    if want_name != name:
        raise MatchError(f"{path}: expected {want_name}, got {name} ({_describe(name, event)})")
    spec = spec or {}
    for key, want in spec.items():
        here = f"{path}.{want_name}.{key}"
        if key == "command":
            matcher.match(want, event.command, root=True, path=here)
        elif key == "reply":
            matcher.match(want, event.reply, root=True, path=here)
        elif key == "commandName":
            if event.command_name != want:
                raise MatchError(f"{here}: expected {want!r}, got {event.command_name!r}")
        elif key == "databaseName":
            got = getattr(event, "database_name", MISSING)
            if got != want:
                raise MatchError(f"{here}: expected {want!r}, got {got!r}")
        elif key == "hasServiceId":
            service_id = getattr(event, "service_id", None)
            has = service_id is not None and any(bytes(getattr(service_id, "binary", b"\x01")))
            if has != bool(want):
                raise MatchError(f"{here}: expected hasServiceId={want}, got serviceId={service_id!r}")
        elif key == "hasServerConnectionId":
            connection_id = getattr(event, "server_connection_id", None)
            has = isinstance(connection_id, int) and connection_id > 0
            if has != bool(want):
                raise MatchError(f"{here}: expected hasServerConnectionId={want}, got {connection_id!r}")
        elif key == "interruptInUseConnections":
            _assert_flag(key, want, getattr(event, "interrupt_connections", MISSING), here)
        elif key == "reason":
            got = getattr(event, "reason", MISSING)
            if got != want:
                raise MatchError(f"{here}: expected reason {want!r}, got {got!r}")
        elif key == "awaited":
            _assert_flag(key, want, getattr(event, "awaited", MISSING), here)
        elif key in ("previousDescription", "newDescription"):
            attr = "previous_description" if key == "previousDescription" else "new_description"
            description = getattr(event, attr)
            for field, field_want in (want or {}).items():
                if field != "type":
                    raise TestFileError(f"{here}: unsupported description field {field!r}")
                got = _description_type(description)
                if got != field_want:
                    raise MatchError(f"{here}.type: expected {field_want!r}, got {got!r}")
        else:
            raise TestFileError(f"{here}: unsupported assertion {key!r} for {want_name}")


def _describe(name: str, event: Any) -> str:
    if name in COMMAND_EVENTS:
        return f"command {getattr(event, 'command_name', '?')}"
    return type(event).__name__


def assert_events(matcher: Matcher, expected_for_client: Mapping[str, Any], recorder: EventRecorder) -> None:
    """One expectedEventsForClient object against what the client's recorder saw."""
    event_type = expected_for_client.get("eventType", "command")
    if event_type not in EVENT_TYPES:
        raise TestFileError(f"unknown eventType {event_type!r}")
    expected = expected_for_client["events"]
    actual = recorder.events_of(event_type)
    path = f"expectEvents[{recorder.client_id}/{event_type}]"
    if len(actual) < len(expected) or (len(actual) > len(expected)
                                        and not expected_for_client.get("ignoreExtraEvents", False)):
        raise MatchError(f"{path}: expected {len(expected)} events, got {len(actual)}: "
                         f"{[_describe(name, event) for name, event in actual]}")
    for index, want in enumerate(expected):
        match_event(matcher, want, actual[index], f"{path}[{index}]")


def count_matching(matcher: Matcher, expected_event: Mapping[str, Any], recorder: EventRecorder) -> int:
    ((name, _spec),) = expected_event.items()
    count = 0
    for item in list(recorder.observed):
        if item[0] != name:
            continue
        try:
            match_event(matcher, expected_event, item, "event")
        except MatchError:
            continue
        count += 1
    return count


# -- logs -----------------------------------------------------------------------------

class LogCollector(logging.Handler):
    """Keeps one client's spec log messages: (component, levelno, structured data)."""

    def __init__(self, adapter: Any, client_id: str, components: Mapping[str, str]) -> None:
        super().__init__(level=1)
        self.adapter = adapter
        self.client_id = client_id
        self.owner: Any = None
        self._records: list[tuple[str, int, dict, Any]] = []
        self.capturing = True
        self._thresholds: dict[str, int] = {}
        self._component_of: dict[str, str] = {}
        self._restore: list[tuple[logging.Logger, int]] = []
        for component, level in components.items():
            if level not in LOG_LEVELS:
                raise TestFileError(f"client {client_id}: unknown log level {level!r}")
            names = list(adapter.logger_names.values()) if component == "all" else [
                adapter.logger_names.get(component)]
            if None in names:
                raise NotSupported(f"{adapter.name} has no logger for component {component!r}")
            for logger_name in names:
                comp = next(c for c, n in adapter.logger_names.items() if n == logger_name)
                self._thresholds[logger_name] = LOG_LEVELS[level]
                self._component_of[logger_name] = comp
        for logger_name, threshold in self._thresholds.items():
            logger = logging.getLogger(logger_name)
            self._restore.append((logger, logger.level))
            if logger.level == logging.NOTSET or logger.level > threshold:
                logger.setLevel(threshold)
            logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        if not self.capturing:
            return
        threshold = self._thresholds.get(record.name)
        if threshold is None or record.levelno < threshold:
            return
        data = self.adapter.log_record_data(record)
        if data is None:
            return
        # The owner is only known once the client exists, so filter when reading, not here.
        self._records.append((self._component_of[record.name], record.levelno, data,
                              self.adapter.log_record_owner(data)))

    @property
    def messages(self) -> list[tuple[str, int, dict]]:
        """The messages of this client (records of other clients dropped when both ids are known)."""
        return [(component, level, data) for component, level, data, owner in list(self._records)
                if owner is None or self.owner is None or owner == self.owner]

    def clear(self) -> None:
        self._records.clear()

    def stop(self) -> None:
        self.capturing = False

    def close(self) -> None:
        self.capturing = False
        for logger, level in reversed(self._restore):
            logger.removeHandler(self)
            logger.setLevel(level)
        self._restore.clear()
        super().close()


def _failure_is_redacted(failure: Any) -> bool:
    """A server error's failure keeps only code, codeName and errorLabels once redacted."""
    if isinstance(failure, str):
        try:
            failure = json.loads(failure)
        except ValueError:
            return False  # an exception's text (a network error): never redacted
    if isinstance(failure, Mapping):
        return set(failure.keys()) <= {"code", "codeName", "errorLabels"}
    return False


def match_log_message(matcher: Matcher, expected: Mapping[str, Any], actual: tuple[str, int, dict],
                      path: str) -> None:
    component, levelno, data = actual
    if expected["component"] != component:
        raise MatchError(f"{path}: expected component {expected['component']!r}, got {component!r} ({data})")
    want_level = LOG_LEVELS.get(expected["level"])
    if want_level is None:
        raise TestFileError(f"{path}: unknown level {expected['level']!r}")
    if want_level != levelno:
        raise MatchError(f"{path}: expected level {expected['level']}, got {logging.getLevelName(levelno)}")
    matcher.match(expected["data"], data, root=True, path=f"{path}.data")
    if "failureIsRedacted" in expected:
        if "failure" not in data:
            raise MatchError(f"{path}: expected a failure in {data}")
        if _failure_is_redacted(data["failure"]) != bool(expected["failureIsRedacted"]):
            raise MatchError(f"{path}: expected failureIsRedacted={expected['failureIsRedacted']}, "
                             f"got failure {data['failure']!r}")


def assert_log_messages(matcher: Matcher, expected_for_client: Mapping[str, Any],
                        messages: Sequence[tuple[str, int, dict]]) -> None:
    ignore = expected_for_client.get("ignoreMessages", [])
    kept = []
    for message in messages:
        if any(_log_matches(matcher, pattern, message) for pattern in ignore):
            continue
        kept.append(message)
    expected = expected_for_client["messages"]
    path = f"expectLogMessages[{expected_for_client['client']}]"
    extra_ok = expected_for_client.get("ignoreExtraMessages", False)
    if len(kept) < len(expected) or (len(kept) > len(expected) and not extra_ok):
        raise MatchError(f"{path}: expected {len(expected)} messages, got {len(kept)}: "
                         f"{[data.get('message') for _c, _l, data in kept]}")
    for index, want in enumerate(expected):
        match_log_message(matcher, want, kept[index], f"{path}[{index}]")


def _log_matches(matcher: Matcher, expected: Mapping[str, Any], message: tuple[str, int, dict]) -> bool:
    try:
        match_log_message(matcher, expected, message, "ignoreMessages")
    except MatchError:
        return False
    return True
