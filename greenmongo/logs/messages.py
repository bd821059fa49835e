"""Standardized log messages (Logging spec) for the command, serverSelection and topology components.

Pure builders: each returns a :class:`LogMessage`, a dict holding the spec's
exact structured field names (absent optional fields are left out, never
null), whose ``str()`` is the spec's unstructured sentence. The code that
owns the event logs it with ``logger.debug(message)`` after checking
``logger.isEnabledFor`` -- building a message costs an Extended JSON dump
(the executor for commands, ``greenmongo.logs.topology`` for SDAM and
server selection). Connection (CMAP) messages are built by
``greenmongo.logs.pool`` from the shared helpers here, its sentences
registered with :func:`register_renderer`.

Configuration follows the spec's fallback method, environment variables:
``MONGODB_LOG_ALL`` / ``MONGODB_LOG_COMMAND`` / ``MONGODB_LOG_TOPOLOGY`` /
``MONGODB_LOG_SERVER_SELECTION`` / ``MONGODB_LOG_CONNECTION`` (severity
names, a component's own variable winning over ``ALL``), ``MONGODB_LOG_PATH``
(``stdout``, ``stderr`` or a file, appended) and
``MONGODB_LOG_MAX_DOCUMENT_LENGTH`` (the spec's own spelling,
``MONGOB_LOG_MAX_DOCUMENT_LENGTH``, is read too). Invalid values are ignored.
Python's own logging configuration is programmatic configuration and wins:
``apply_log_settings`` leaves alone a logger whose level the application set.
"""

from __future__ import annotations

import datetime
import logging
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Union

from greenmongo.bson.binary import UuidRepresentation
from greenmongo.bson.objectid import ObjectId
from greenmongo.errors import OperationFailure
from greenmongo.monitoring.command import is_sensitive_command, redact_command, redact_reply
from greenmongo.sdam.address import Address

COMMAND = "command"
TOPOLOGY = "topology"
SERVER_SELECTION = "serverSelection"
CONNECTION = "connection"
COMPONENTS = (COMMAND, TOPOLOGY, SERVER_SELECTION, CONNECTION)

LOGGER_NAMES = {component: f"greenmongo.{component}" for component in COMPONENTS}
ENVIRONMENT_VARIABLES = {
    COMMAND: "MONGODB_LOG_COMMAND",
    TOPOLOGY: "MONGODB_LOG_TOPOLOGY",
    SERVER_SELECTION: "MONGODB_LOG_SERVER_SELECTION",
    CONNECTION: "MONGODB_LOG_CONNECTION",
}
ALL_VARIABLE = "MONGODB_LOG_ALL"
PATH_VARIABLE = "MONGODB_LOG_PATH"
MAX_DOCUMENT_LENGTH_VARIABLES = ("MONGODB_LOG_MAX_DOCUMENT_LENGTH", "MONGOB_LOG_MAX_DOCUMENT_LENGTH")
DEFAULT_MAX_DOCUMENT_LENGTH = 1000

#: Levels Python lacks, placed between its own so thresholds order as the spec's severities do.
NOTICE = 25
TRACE = 5
OFF = logging.CRITICAL + 10

#: Spec severity names (environment variable values) -> Python logging levels.
SEVERITY_LEVELS = {
    "off": OFF,
    "emergency": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "critical": logging.CRITICAL,
    "error": logging.ERROR,
    "warn": logging.WARNING,
    "notice": NOTICE,
    "info": logging.INFO,
    "debug": logging.DEBUG,
    "trace": TRACE,
}

Duration = Union[datetime.timedelta, float, int]


# -- configuration --------------------------------------------------------------------

@dataclass(frozen=True)
class LogSettings:
    """What the environment asks for: a level per configured component, a document length, a destination."""

    levels: Mapping[str, int] = field(default_factory=dict)
    max_document_length: int = DEFAULT_MAX_DOCUMENT_LENGTH
    destination: str = "stderr"


def parse_severity(value: Optional[str]) -> Optional[int]:
    """A Python level for a spec severity name, or None for a missing or invalid one."""
    if value is None:
        return None
    return SEVERITY_LEVELS.get(value.strip().lower())


def parse_max_document_length(environ: Mapping[str, str]) -> int:
    """The first valid (non-negative integer) max document length variable, else the default."""
    for variable in MAX_DOCUMENT_LENGTH_VARIABLES:
        text = environ.get(variable)
        if text is None:
            continue
        try:
            value = int(text.strip())
        except ValueError:
            continue  # invalid values are ignored, never raised
        if value >= 0:
            return value
    return DEFAULT_MAX_DOCUMENT_LENGTH


def parse_log_settings(environ: Optional[Mapping[str, str]] = None) -> LogSettings:
    environ = os.environ if environ is None else environ
    default_level = parse_severity(environ.get(ALL_VARIABLE))
    levels: dict[str, int] = {}
    for component, variable in ENVIRONMENT_VARIABLES.items():
        level = parse_severity(environ.get(variable))
        if level is None:
            level = default_level
        if level is not None:
            levels[component] = level
    destination = (environ.get(PATH_VARIABLE) or "stderr").strip() or "stderr"
    if destination.lower() in ("stdout", "stderr"):
        destination = destination.lower()
    return LogSettings(levels, parse_max_document_length(environ), destination)


def _handler_for(destination: str) -> logging.Handler:
    if destination == "stdout":
        return logging.StreamHandler(sys.stdout)
    if destination != "stderr":
        try:
            return logging.FileHandler(destination, mode="a", encoding="utf-8")
        except OSError:
            pass  # the spec: an unusable path means stderr, never an exception
    return logging.StreamHandler(sys.stderr)


def apply_log_settings(settings: LogSettings) -> None:
    """Set levels and a handler on the configured ``greenmongo.<component>`` loggers.

    A logger the application already configured (level set) is left as it
    is; calling this again does not add a second handler.
    """
    handler: Optional[logging.Handler] = None
    for component, level in settings.levels.items():
        logger = logging.getLogger(LOGGER_NAMES[component])
        if logger.level != logging.NOTSET:
            continue
        logger.setLevel(level)
        if any(getattr(existing, "_greenmongo_env", False) for existing in logger.handlers):
            continue
        if handler is None:
            handler = _handler_for(settings.destination)
            handler._greenmongo_env = True  # type: ignore[attr-defined]
            handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
        logger.addHandler(handler)


def max_document_length() -> int:
    """The max document length the environment asks for now (read on each call: two lookups)."""
    return parse_max_document_length(os.environ)


# -- documents and errors ------------------------------------------------------------

def _json_options() -> Any:
    from greenmongo.bson import json_util  # Extended JSON (json, ~3 ms) only once a message is logged
    try:
        return json_util.RELAXED_JSON_OPTIONS.with_options(uuid_representation=UuidRepresentation.STANDARD)
    except Exception:
        return json_util.RELAXED_JSON_OPTIONS


_JSON_OPTIONS: Any = None


def truncate(text: str, max_length: Optional[int] = None) -> str:
    """Cut at ``max_length`` (default: the configured length) code points and mark the cut with ``...``
    (not counted in the length)."""
    if max_length is None:
        max_length = max_document_length()
    if len(text) <= max_length:
        return text
    return text[:max_length] + "..."


def format_document(document: Mapping[str, Any], max_length: Optional[int] = None) -> str:
    """Relaxed Extended JSON of ``document``, truncated to the configured length."""
    global _JSON_OPTIONS
    if _JSON_OPTIONS is None:
        _JSON_OPTIONS = _json_options()
    from greenmongo.bson import json_util
    try:
        text = json_util.dumps(document, json_options=_JSON_OPTIONS)
    except Exception:  # never let logging break the operation or the monitor
        text = repr(document)
    return truncate(text, max_length)


def error_text(error: Any) -> str:
    """An error as ``"ClassName: message"`` (just the class name when the message is empty), untruncated."""
    if isinstance(error, BaseException):
        text = str(error)
        return f"{type(error).__name__}: {text}" if text else type(error).__name__
    return str(error)


def format_failure(error: Any, *, redacted: bool = False, max_length: Optional[int] = None) -> str:
    """An error for a log message: a server error's reply document (or its redacted form), else its text."""
    details = getattr(error, "details", None)
    if isinstance(error, OperationFailure) and isinstance(details, Mapping):
        document = dict(details)
        if redacted:
            document = {key: document[key] for key in ("code", "codeName", "errorLabels") if key in document}
        return format_document(document, max_length)
    if isinstance(error, Mapping):
        return format_document(error, max_length)
    return truncate(error_text(error), max_length)


def duration_ms(duration: Duration) -> float:
    if isinstance(duration, datetime.timedelta):
        return duration.total_seconds() * 1000.0
    return float(duration) * 1000.0


def split_address(address: Any) -> tuple[str, Optional[int]]:
    """(serverHost, serverPort); no port for a Unix domain socket."""
    if isinstance(address, tuple):
        host = str(address[0])
        port = address[1] if len(address) > 1 else None
        if host.endswith(".sock"):
            return host, None
        return host, 27017 if port is None else int(port)
    text = str(address)
    if text.endswith(".sock"):
        return text, None
    host, sep, port = text.rpartition(":")
    if sep and port.isdigit():
        return host.strip("[]"), int(port)
    return text, 27017


# -- messages -----------------------------------------------------------------------

class LogMessage(dict):
    """One log message's structured fields; ``str()`` renders the spec's unstructured sentence."""

    def __str__(self) -> str:
        render = _RENDERERS.get(self.get("message", ""))
        return render(self) if render else repr(dict(self))


Renderer = Callable[[Mapping[str, Any]], str]


def register_renderer(render: Renderer, *messages: str) -> None:
    """Let ``render`` write the sentence of the named messages (how greenmongo.logs.pool adds CMAP's)."""
    for message in messages:
        _RENDERERS[message] = render


def log_message(message: str, **fields: Any) -> LogMessage:
    """A message with ``fields`` in the given order; a None field is left out (the spec: never null)."""
    data = LogMessage(message=message)
    for key, value in fields.items():
        if value is not None:
            data[key] = value
    return data


def server_where(data: Mapping[str, Any]) -> str:
    """``host:port`` of a message's server (just the path for a Unix domain socket)."""
    host = data.get("serverHost", "")
    return f"{host}:{data['serverPort']}" if "serverPort" in data else str(host)


def service_id_text(service_id: Any) -> Optional[str]:
    """A load balancer's service id as hex (an ObjectId's bytes), None when there is none."""
    if service_id is None:
        return None
    binary = getattr(service_id, "binary", None)
    if isinstance(binary, (bytes, bytearray)):
        return bytes(binary).hex()
    return str(service_id)


def _connection_ids(data: Mapping[str, Any]) -> str:
    """" with driver-generated ID d and server-generated ID s", leaving out whichever is absent."""
    text = ""
    if "driverConnectionId" in data:
        text += f" with driver-generated ID {data['driverConnectionId']}"
        if "serverConnectionId" in data:
            text += f" and server-generated ID {data['serverConnectionId']}"
    elif "serverConnectionId" in data:
        text += f" with server-generated ID {data['serverConnectionId']}"
    return text


# -- commands -------------------------------------------------------------------------

def _command_fields(command_name: str, database_name: str, request_id: int, operation_id: Optional[int],
                    driver_connection_id: Optional[int], address: Address, server_connection_id: Optional[int],
                    service_id: Optional[ObjectId]) -> dict[str, Any]:
    host, port = split_address(address)
    return dict(commandName=command_name, databaseName=database_name, requestId=request_id,
                operationId=operation_id, driverConnectionId=driver_connection_id, serverHost=host,
                serverPort=port, serverConnectionId=server_connection_id, serviceId=service_id_text(service_id))


def command_started(command: Mapping[str, Any], database_name: str, request_id: int, *, address: Address,
                    operation_id: Optional[int] = None, driver_connection_id: Optional[int] = None,
                    server_connection_id: Optional[int] = None, service_id: Optional[ObjectId] = None,
                    max_length: Optional[int] = None) -> LogMessage:
    """"Command started": pass the full command; a sensitive one is logged as ``{}``."""
    command_name = next(iter(command))
    return log_message("Command started", **_command_fields(
        command_name, database_name, request_id, operation_id, driver_connection_id, address,
        server_connection_id, service_id), command=format_document(redact_command(command_name, command),
                                                                   max_length))


def command_succeeded(reply: Mapping[str, Any], command_name: str, database_name: str, request_id: int,
                      duration: Duration, *, address: Address, operation_id: Optional[int] = None,
                      driver_connection_id: Optional[int] = None, server_connection_id: Optional[int] = None,
                      service_id: Optional[ObjectId] = None, speculative_hello: bool = False,
                      max_length: Optional[int] = None) -> LogMessage:
    return log_message("Command succeeded", **_command_fields(
        command_name, database_name, request_id, operation_id, driver_connection_id, address,
        server_connection_id, service_id), durationMS=duration_ms(duration),
        reply=format_document(redact_reply(command_name, reply, speculative_hello), max_length))


def command_failed(error: Any, command_name: str, database_name: str, request_id: int, duration: Duration, *,
                   address: Address, operation_id: Optional[int] = None, driver_connection_id: Optional[int] = None,
                   server_connection_id: Optional[int] = None, service_id: Optional[ObjectId] = None,
                   speculative_hello: bool = False, max_length: Optional[int] = None) -> LogMessage:
    """"Command failed": a server error from a sensitive command keeps only code/codeName/errorLabels."""
    redacted = isinstance(error, OperationFailure) and is_sensitive_command(command_name, None, speculative_hello)
    return log_message("Command failed", **_command_fields(
        command_name, database_name, request_id, operation_id, driver_connection_id, address,
        server_connection_id, service_id), durationMS=duration_ms(duration),
        failure=format_failure(error, redacted=redacted, max_length=max_length))


def _connection_phrase(data: Mapping[str, Any]) -> str:
    text = f"using a connection{_connection_ids(data)} to {server_where(data)}"
    if "serviceId" in data:
        text += f" with service ID {data['serviceId']}"
    text += f". The requestID is {data.get('requestId')}"
    if "operationId" in data:
        text += f" and the operation ID is {data['operationId']}"
    return text


def _render_command(data: Mapping[str, Any]) -> str:
    message = data["message"]
    head = f"Command \"{data.get('commandName')}\" "
    database = f"on database \"{data.get('databaseName')}\""
    if message == "Command started":
        return f"{head}started {database} {_connection_phrase(data)}. Command: {data.get('command')}"
    took = f" in {data.get('durationMS', 0)} ms "
    if message == "Command succeeded":
        return f"{head}succeeded {database}{took}{_connection_phrase(data)}. Command reply: {data.get('reply')}"
    return f"{head}failed {database}{took}{_connection_phrase(data)}. Error: {data.get('failure')}"


# -- server selection ---------------------------------------------------------------

def _selection_fields(operation: Optional[str], selector: Any, topology_description: Any,
                      operation_id: Optional[int]) -> dict[str, Any]:
    return dict(selector=str(selector), operation=operation, operationId=operation_id,
                topologyDescription=str(topology_description))


def server_selection_started(operation: Optional[str], selector: Any, topology_description: Any, *,
                             operation_id: Optional[int] = None) -> LogMessage:
    return log_message("Server selection started",
                       **_selection_fields(operation, selector, topology_description, operation_id))


def server_selection_succeeded(operation: Optional[str], selector: Any, topology_description: Any, address: Address, *,
                               operation_id: Optional[int] = None) -> LogMessage:
    host, port = split_address(address)
    return log_message("Server selection succeeded", **_selection_fields(
        operation, selector, topology_description, operation_id), serverHost=host, serverPort=port)


def server_selection_failed(operation: Optional[str], selector: Any, topology_description: Any, error: Any, *,
                            operation_id: Optional[int] = None) -> LogMessage:
    return log_message("Server selection failed", **_selection_fields(
        operation, selector, topology_description, operation_id), failure=error_text(error))


def waiting_for_suitable_server(operation: Optional[str], selector: Any, topology_description: Any,
                                remaining_time_ms: Optional[float], *,
                                operation_id: Optional[int] = None) -> LogMessage:
    """Logged at INFO, once per operation."""
    return log_message("Waiting for suitable server to become available", **_selection_fields(
        operation, selector, topology_description, operation_id), remainingTimeMS=remaining_time_ms)


def _render_selection(data: Mapping[str, Any]) -> str:
    message = data["message"]
    operation = f"for operation {data.get('operation')}"
    if "operationId" in data:
        operation += f" with ID {data['operationId']}"
    tail = f"Selector: {data.get('selector')}, topology description: {data.get('topologyDescription')}"
    if message == "Server selection started":
        return f"Server selection started {operation}. {tail}"
    if message == "Server selection succeeded":
        return f"Server selection succeeded {operation}. Selected server: {server_where(data)}. {tail}"
    if message == "Server selection failed":
        return f"Server selection failed {operation}. Failure: {data.get('failure')}. {tail}"
    remaining = f" Remaining time: {data['remainingTimeMS']} ms." if "remainingTimeMS" in data else ""
    return f"Waiting for server to become available {operation}.{remaining} {tail}."


# -- topology -------------------------------------------------------------------------

def _server_fields(topology_id: ObjectId, address: Address) -> dict[str, Any]:
    host, port = split_address(address)
    return dict(topologyId=topology_id, serverHost=host, serverPort=port)


def starting_topology_monitoring(topology_id: ObjectId) -> LogMessage:
    return log_message("Starting topology monitoring", topologyId=topology_id)


def stopped_topology_monitoring(topology_id: ObjectId) -> LogMessage:
    return log_message("Stopped topology monitoring", topologyId=topology_id)


def starting_server_monitoring(topology_id: ObjectId, address: Address) -> LogMessage:
    return log_message("Starting server monitoring", **_server_fields(topology_id, address))


def stopped_server_monitoring(topology_id: ObjectId, address: Address) -> LogMessage:
    return log_message("Stopped server monitoring", **_server_fields(topology_id, address))


def topology_description_changed(topology_id: ObjectId, previous: Any, new: Any) -> LogMessage:
    return log_message("Topology description changed", topologyId=topology_id,
                       previousDescription=str(previous), newDescription=str(new))


def heartbeat_started(topology_id: ObjectId, address: Address, awaited: bool, *,
                      driver_connection_id: Optional[int] = None,
                      server_connection_id: Optional[int] = None) -> LogMessage:
    return log_message("Server heartbeat started", **_server_fields(topology_id, address), awaited=awaited,
                       driverConnectionId=driver_connection_id, serverConnectionId=server_connection_id)


def heartbeat_succeeded(topology_id: ObjectId, address: Address, awaited: bool, duration: Duration,
                        reply: Mapping[str, Any], *, driver_connection_id: Optional[int] = None,
                        server_connection_id: Optional[int] = None, max_length: Optional[int] = None) -> LogMessage:
    return log_message("Server heartbeat succeeded", **_server_fields(topology_id, address), awaited=awaited,
                       durationMS=duration_ms(duration), reply=format_document(reply, max_length),
                       driverConnectionId=driver_connection_id, serverConnectionId=server_connection_id)


def heartbeat_failed(topology_id: ObjectId, address: Address, awaited: bool, duration: Duration, error: Any, *,
                     driver_connection_id: Optional[int] = None,
                     server_connection_id: Optional[int] = None) -> LogMessage:
    return log_message("Server heartbeat failed", **_server_fields(topology_id, address), awaited=awaited,
                       durationMS=duration_ms(duration), failure=error_text(error),
                       driverConnectionId=driver_connection_id, serverConnectionId=server_connection_id)


def _render_topology(data: Mapping[str, Any]) -> str:
    message = data["message"]
    topology = f"topology with ID {data.get('topologyId')}"
    if message == "Starting topology monitoring":
        return f"Starting monitoring for {topology}"
    if message == "Stopped topology monitoring":
        return f"Stopped monitoring for {topology}"
    if message == "Starting server monitoring":
        return f"Starting monitoring for server {server_where(data)} in {topology}"
    if message == "Stopped server monitoring":
        return f"Stopped monitoring for server {server_where(data)} in {topology}"
    if message == "Topology description changed":
        return (f"Description changed for {topology}. Previous description: {data.get('previousDescription')}. "
                f"New description: {data.get('newDescription')}")
    where = f"{server_where(data)} on connection{_connection_ids(data)} in {topology}"
    awaited = f"Awaited: {data.get('awaited')}"
    if message == "Server heartbeat started":
        return f"Heartbeat started for {where}. {awaited}"
    took = f"in {data.get('durationMS', 0):.3f} ms for {where}. {awaited}"
    if message == "Server heartbeat succeeded":
        return f"Heartbeat succeeded {took}. Reply: {data.get('reply')}"
    return f"Heartbeat failed {took}. Failure: {data.get('failure')}"


_RENDERERS: dict[str, Renderer] = {}
register_renderer(_render_command, "Command started", "Command succeeded", "Command failed")
register_renderer(_render_selection, "Server selection started", "Server selection succeeded",
                  "Server selection failed", "Waiting for suitable server to become available")
register_renderer(_render_topology, "Starting topology monitoring", "Stopped topology monitoring",
                  "Starting server monitoring", "Stopped server monitoring", "Topology description changed",
                  "Server heartbeat started", "Server heartbeat succeeded", "Server heartbeat failed")
