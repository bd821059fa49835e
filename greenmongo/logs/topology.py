"""Emitting the standardized SDAM and server selection log messages from a topology.

SDAM messages go to ``greenmongo.topology``, selection messages to
``greenmongo.serverSelection``. The messages themselves (fields and sentences)
are built by ``greenmongo.logs.messages``; this module decides which one
accompanies what a topology does, and at which level. Callers check
``enabled()`` first: a disabled logger costs one level lookup, and building a
message costs an Extended JSON dump.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping, Optional

from greenmongo.bson.objectid import ObjectId
from greenmongo.logs import messages
from greenmongo.logs.messages import LogMessage, max_document_length, truncate
from greenmongo.monitoring.topology import (
    ServerClosedEvent,
    ServerOpeningEvent,
    TopologyClosedEvent,
    TopologyDescriptionChangedEvent,
    TopologyOpenedEvent,
)
from greenmongo.sdam.address import Address

TOPOLOGY_LOGGER = logging.getLogger(messages.LOGGER_NAMES[messages.TOPOLOGY])
SERVER_SELECTION_LOGGER = logging.getLogger(messages.LOGGER_NAMES[messages.SERVER_SELECTION])


class TopologyLogger:
    """Emits the SDAM log messages of one topology."""

    __slots__ = ("_topology_id", "_logger")

    def __init__(self, topology_id: ObjectId, logger: logging.Logger = TOPOLOGY_LOGGER) -> None:
        self._topology_id = topology_id
        self._logger = logger

    def enabled(self) -> bool:
        return self._logger.isEnabledFor(logging.DEBUG)

    def event(self, event: Any) -> None:
        """The message that accompanies one SDAM event (ServerDescriptionChanged has none)."""
        topology_id = self._topology_id
        if isinstance(event, TopologyOpenedEvent):
            message = messages.starting_topology_monitoring(topology_id)
        elif isinstance(event, TopologyClosedEvent):
            message = messages.stopped_topology_monitoring(topology_id)
        elif isinstance(event, ServerOpeningEvent):
            message = messages.starting_server_monitoring(topology_id, event.server_address)
        elif isinstance(event, ServerClosedEvent):
            message = messages.stopped_server_monitoring(topology_id, event.server_address)
        elif isinstance(event, TopologyDescriptionChangedEvent):
            message = messages.topology_description_changed(topology_id, event.previous_description,
                                                            event.new_description)
        else:
            return
        self._logger.debug(message)

    def heartbeat_started(self, address: Address, awaited: bool, connection_id: Optional[int],
                          server_connection_id: Optional[int]) -> None:
        self._logger.debug(messages.heartbeat_started(
            self._topology_id, address, awaited, driver_connection_id=connection_id,
            server_connection_id=server_connection_id))

    def heartbeat_succeeded(self, address: Address, awaited: bool, duration: float, reply: Mapping[str, Any],
                            connection_id: Optional[int], server_connection_id: Optional[int]) -> None:
        self._logger.debug(messages.heartbeat_succeeded(
            self._topology_id, address, awaited, duration, reply, driver_connection_id=connection_id,
            server_connection_id=server_connection_id))

    def heartbeat_failed(self, address: Address, awaited: bool, duration: float, error: BaseException,
                         connection_id: Optional[int], server_connection_id: Optional[int]) -> None:
        self._logger.debug(messages.heartbeat_failed(
            self._topology_id, address, awaited, duration, error, driver_connection_id=connection_id,
            server_connection_id=server_connection_id))


class SelectionLogger:
    """Emits the server selection messages of one select_server call."""

    __slots__ = ("_logger", "_selector", "_operation", "_operation_id")

    def __init__(self, selector: str, operation: Optional[str], operation_id: Optional[int],
                 logger: logging.Logger = SERVER_SELECTION_LOGGER) -> None:
        self._logger = logger
        self._selector = selector
        self._operation = operation
        self._operation_id = operation_id

    def enabled(self, level: int = logging.DEBUG) -> bool:
        return self._logger.isEnabledFor(level)

    def started(self, description: Any) -> None:
        self._logger.debug(messages.server_selection_started(
            self._operation, self._selector, description, operation_id=self._operation_id))

    def succeeded(self, description: Any, address: Address) -> None:
        self._logger.debug(messages.server_selection_succeeded(
            self._operation, self._selector, description, address, operation_id=self._operation_id))

    def failed(self, description: Any, error: BaseException) -> None:
        self._logger.debug(messages.server_selection_failed(
            self._operation, self._selector, description, error, operation_id=self._operation_id))

    def waiting(self, description: Any, remaining: Optional[float]) -> None:
        """Logged at INFO (the spec's level for this message), once per selection."""
        remaining_ms = None if remaining is None else int(max(remaining, 0.0) * 1000)
        self._logger.info(messages.waiting_for_suitable_server(
            self._operation, self._selector, description, remaining_ms, operation_id=self._operation_id))


#: LogMessage, max_document_length and truncate stay importable from here for existing importers.
__all__ = ["SERVER_SELECTION_LOGGER", "TOPOLOGY_LOGGER", "LogMessage", "SelectionLogger", "TopologyLogger",
           "max_document_length", "truncate"]
