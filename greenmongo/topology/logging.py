"""The standardized SDAM and server selection log messages.

SDAM messages go to ``greenmongo.topology``, selection messages to
``greenmongo.serverSelection``. Like the CMAP messages (``greenmongo.pool_logging``)
each record's ``msg`` is a dict of the spec's field names whose ``str()`` is
the spec's unstructured sentence, so formatting handlers print prose and code
that wants the fields (a unified test runner, a JSON shipper) reads a mapping.
Callers check ``enabled()`` first: a disabled logger costs one level lookup.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Mapping, Optional

from greenmongo.monitoring.topology import (
    ServerClosedEvent, ServerOpeningEvent, TopologyClosedEvent, TopologyDescriptionChangedEvent,
    TopologyOpenedEvent,
)
from greenmongo.pool_logging import split_address

TOPOLOGY_LOGGER = logging.getLogger("greenmongo.topology")
SERVER_SELECTION_LOGGER = logging.getLogger("greenmongo.serverSelection")

#: Logging spec: extended JSON in log messages is cut to this many characters by default.
DEFAULT_MAX_DOCUMENT_LENGTH = 1000


def max_document_length() -> int:
    """The Logging spec's max document length (its fallback environment variable, else 1000)."""
    for name in ("MONGODB_LOG_MAX_DOCUMENT_LENGTH", "MONGOB_LOG_MAX_DOCUMENT_LENGTH"):
        raw = os.environ.get(name)
        if raw is not None:
            try:
                value = int(raw)
            except ValueError:
                continue  # invalid values are ignored, never raised
            if value >= 0:
                return value
    return DEFAULT_MAX_DOCUMENT_LENGTH


def truncate(text: str, limit: Optional[int] = None) -> str:
    """Naive truncation with a trailing ellipsis that does not count toward the limit."""
    limit = max_document_length() if limit is None else limit
    return text if len(text) <= limit else text[:limit] + "..."


def document_text(document: Any) -> str:
    """Relaxed Extended JSON of a reply, truncated for logging."""
    try:
        from greenmongo.bson import json_util

        text = json_util.dumps(document)
    except Exception:  # never let logging break monitoring
        text = repr(document)
    return truncate(text)


def error_text(error: Any) -> str:
    if isinstance(error, BaseException):
        text = str(error)
        return f"{type(error).__name__}: {text}" if text else type(error).__name__
    return str(error)


class LogMessage(dict):
    """Structured fields of one message; ``str()`` renders the spec's sentence."""

    def __str__(self) -> str:
        return _render(self)


class TopologyLogger:
    """Emits the SDAM log messages of one topology."""

    __slots__ = ("_topology_id", "_logger")

    def __init__(self, topology_id: Any, logger: logging.Logger = TOPOLOGY_LOGGER) -> None:
        self._topology_id = topology_id
        self._logger = logger

    def enabled(self) -> bool:
        return self._logger.isEnabledFor(logging.DEBUG)

    def _emit(self, message: str, address: Any = None, **fields: Any) -> None:
        data = LogMessage(message=message, topologyId=self._topology_id)
        if address is not None:
            host, port = split_address(address)
            data["serverHost"] = host
            if port is not None:
                data["serverPort"] = port
        for key, value in fields.items():
            if value is not None:
                data[key] = value
        self._logger.debug(data)

    def event(self, event: Any) -> None:
        """The message that accompanies one SDAM event (ServerDescriptionChanged has none)."""
        if isinstance(event, TopologyOpenedEvent):
            self._emit("Starting topology monitoring")
        elif isinstance(event, TopologyClosedEvent):
            self._emit("Stopped topology monitoring")
        elif isinstance(event, ServerOpeningEvent):
            self._emit("Starting server monitoring", event.server_address)
        elif isinstance(event, ServerClosedEvent):
            self._emit("Stopped server monitoring", event.server_address)
        elif isinstance(event, TopologyDescriptionChangedEvent):
            self._emit("Topology description changed", previousDescription=repr(event.previous_description),
                       newDescription=repr(event.new_description))

    def heartbeat_started(self, address: Any, awaited: bool, connection_id: Optional[int],
                          server_connection_id: Optional[int]) -> None:
        self._emit("Server heartbeat started", address, awaited=awaited, driverConnectionId=connection_id,
                   serverConnectionId=server_connection_id)

    def heartbeat_succeeded(self, address: Any, awaited: bool, duration: float, reply: Mapping[str, Any],
                            connection_id: Optional[int], server_connection_id: Optional[int]) -> None:
        self._emit("Server heartbeat succeeded", address, awaited=awaited, durationMS=duration * 1000.0,
                   reply=document_text(reply), driverConnectionId=connection_id,
                   serverConnectionId=server_connection_id)

    def heartbeat_failed(self, address: Any, awaited: bool, duration: float, error: BaseException,
                         connection_id: Optional[int], server_connection_id: Optional[int]) -> None:
        self._emit("Server heartbeat failed", address, awaited=awaited, durationMS=duration * 1000.0,
                   failure=error_text(error), driverConnectionId=connection_id,
                   serverConnectionId=server_connection_id)


class SelectionLogger:
    """Emits the server selection messages of one select_server call."""

    __slots__ = ("_logger", "_base")

    def __init__(self, selector: str, operation: Optional[str], operation_id: Optional[int],
                 logger: logging.Logger = SERVER_SELECTION_LOGGER) -> None:
        self._logger = logger
        self._base = {"selector": selector, "operation": operation, "operationId": operation_id}

    def enabled(self, level: int = logging.DEBUG) -> bool:
        return self._logger.isEnabledFor(level)

    def _emit(self, level: int, message: str, description: Any, **fields: Any) -> None:
        data = LogMessage(message=message)
        for key, value in self._base.items():
            if value is not None:
                data[key] = value
        data["topologyDescription"] = repr(description)
        for key, value in fields.items():
            if value is not None:
                data[key] = value
        self._logger.log(level, data)

    def started(self, description: Any) -> None:
        self._emit(logging.DEBUG, "Server selection started", description)

    def succeeded(self, description: Any, address: Any) -> None:
        host, port = split_address(address)
        self._emit(logging.DEBUG, "Server selection succeeded", description, serverHost=host, serverPort=port)

    def failed(self, description: Any, error: BaseException) -> None:
        self._emit(logging.DEBUG, "Server selection failed", description, failure=error_text(error))

    def waiting(self, description: Any, remaining: Optional[float]) -> None:
        remaining_ms = None if remaining is None else int(max(remaining, 0.0) * 1000)
        self._emit(logging.INFO, "Waiting for suitable server to become available", description,
                   remainingTimeMS=remaining_ms)


def _where(data: Mapping[str, Any]) -> str:
    where = str(data.get("serverHost", ""))
    if "serverPort" in data:
        where = f"{where}:{data['serverPort']}"
    return where


def _connection_ids(data: Mapping[str, Any]) -> str:
    return (f"on connection with driver-generated ID {data.get('driverConnectionId')} and server-generated ID "
            f"{data.get('serverConnectionId')}")


def _render(data: Mapping[str, Any]) -> str:
    message = data.get("message", "")
    topology = data.get("topologyId")
    where = _where(data)
    if message == "Starting topology monitoring":
        return f"Starting monitoring for topology with ID {topology}"
    if message == "Stopped topology monitoring":
        return f"Stopped monitoring for topology with ID {topology}"
    if message == "Starting server monitoring":
        return f"Starting monitoring for server {where} in topology with ID {topology}"
    if message == "Stopped server monitoring":
        return f"Stopped monitoring for server {where} in topology with ID {topology}"
    if message == "Topology description changed":
        return (f"Description changed for topology with ID {topology}. Previous description: "
                f"{data.get('previousDescription')}. New description: {data.get('newDescription')}")
    if message == "Server heartbeat started":
        return (f"Heartbeat started for {where} {_connection_ids(data)} in topology with ID {topology}. "
                f"Awaited: {data.get('awaited')}")
    if message == "Server heartbeat succeeded":
        return (f"Heartbeat succeeded in {data.get('durationMS', 0):.3f} ms for {where} {_connection_ids(data)} "
                f"in topology with ID {topology}. Awaited: {data.get('awaited')}. Reply: {data.get('reply')}")
    if message == "Server heartbeat failed":
        return (f"Heartbeat failed in {data.get('durationMS', 0):.3f} ms for {where} {_connection_ids(data)} "
                f"in topology with ID {topology}. Awaited: {data.get('awaited')}. Failure: {data.get('failure')}")
    operation = f"for operation {data.get('operation')} with ID {data.get('operationId')}"
    selector = f"Selector: {data.get('selector')}, topology description: {data.get('topologyDescription')}"
    if message == "Server selection started":
        return f"Server selection started {operation}. {selector}"
    if message == "Server selection succeeded":
        return f"Server selection succeeded {operation}. Selected server: {where}. {selector}"
    if message == "Server selection failed":
        return f"Server selection failed {operation}. Failure: {data.get('failure')}. {selector}"
    if message == "Waiting for suitable server to become available":
        return (f"Waiting for server to become available {operation}. Remaining time: "
                f"{data.get('remainingTimeMS')} ms. {selector}.")
    return str(dict(data))
