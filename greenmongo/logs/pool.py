"""The CMAP spec's standardized log messages, on the ``greenmongo.connection`` logger.

Every message is logged at DEBUG with a :class:`StructuredMessage` (the
shared ``greenmongo.logs.messages.LogMessage``) as the record's ``msg``: a
dict holding the spec's exact field names (``message``, ``serverHost``,
``serverPort``, ``driverConnectionId``, ``durationMS``, ...), whose ``str()``
is the spec's unstructured sentence, written here and registered with
``logging_format``. Handlers that format records print the sentence; code that
wants the fields (the unified test runner, JSON log shippers) reads
``record.msg`` as a mapping. Absent optional fields are omitted, never logged
as null.

Callers check :meth:`ConnectionLogger.enabled` first, so a disabled logger
costs one cached level lookup.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping, Optional

from greenmongo.bson.objectid import ObjectId
from greenmongo.logs.messages import (
    CONNECTION,
    LOGGER_NAMES,
    LogMessage,
    duration_ms,
    error_text,
    log_message,
    register_renderer,
    server_where,
    service_id_text,
    split_address,
)
from greenmongo.sdam.address import Address

CONNECTION_LOGGER = logging.getLogger(LOGGER_NAMES[CONNECTION])

_DEBUG = logging.DEBUG

CLOSED_REASON_TEXT = {
    "stale": "Connection became stale because the pool was cleared",
    "idle": "Connection has been available but unused for longer than the configured max idle time",
    "error": "An error occurred while using the connection",
    "poolClosed": "Connection pool was closed",
}

CHECKOUT_FAILED_REASON_TEXT = {
    "timeout": "Wait queue timeout elapsed without a connection becoming available",
    "connectionError": "An error occurred while trying to establish a new connection",
    "poolClosed": "Connection pool was closed",
}

_POOL_OPTION_KEYS = ("maxIdleTimeMS", "minPoolSize", "maxPoolSize", "maxConnecting",
                     "waitQueueTimeoutMS", "waitQueueSize", "waitQueueMultiple")

#: The CMAP name of the shared message class.
StructuredMessage = LogMessage


class ConnectionLogger:
    """Emits the CMAP log messages for one pool (bound to its address)."""

    __slots__ = ("_logger", "_host", "_port")

    def __init__(self, address: Address, logger: logging.Logger = CONNECTION_LOGGER) -> None:
        self._logger = logger
        self._host, self._port = split_address(address)

    def enabled(self) -> bool:
        return self._logger.isEnabledFor(_DEBUG)

    def _emit(self, message: str, **fields: Any) -> None:
        self._logger.debug(log_message(message, serverHost=self._host, serverPort=self._port, **fields))

    def pool_created(self, options: Mapping[str, Any]) -> None:
        self._emit("Connection pool created",
                   **{key: options[key] for key in _POOL_OPTION_KEYS if key in options})

    def pool_ready(self) -> None:
        self._emit("Connection pool ready")

    def pool_cleared(self, service_id: Optional[ObjectId] = None) -> None:
        self._emit("Connection pool cleared", serviceId=service_id_text(service_id))

    def pool_closed(self) -> None:
        self._emit("Connection pool closed")

    def connection_created(self, connection_id: int) -> None:
        self._emit("Connection created", driverConnectionId=connection_id)

    def connection_ready(self, connection_id: int, duration: float) -> None:
        self._emit("Connection ready", driverConnectionId=connection_id, durationMS=duration_ms(duration))

    def connection_closed(self, connection_id: int, reason: str, error: Optional[BaseException] = None) -> None:
        self._emit("Connection closed", driverConnectionId=connection_id,
                   reason=CLOSED_REASON_TEXT.get(reason, reason),
                   error=None if error is None else error_text(error))

    def checkout_started(self) -> None:
        self._emit("Connection checkout started")

    def checkout_failed(self, reason: str, duration: float, error: Optional[BaseException] = None,
                        details: Optional[Mapping[str, Any]] = None) -> None:
        """``details``: for a wait-queue timeout, greenmongo's pool-exhaustion fields (beyond the spec's):
        maxPoolSize, inUse, inUseByCursors, inUseByTransactions, inUseByOtherOperations, available,
        pending, waitQueueLength, longestWaitMS."""
        self._emit("Connection checkout failed",
                   reason=CHECKOUT_FAILED_REASON_TEXT.get(reason, reason),
                   error=None if error is None else error_text(error),
                   durationMS=duration_ms(duration), **(details or {}))

    def checked_out(self, connection_id: int, duration: float) -> None:
        self._emit("Connection checked out", driverConnectionId=connection_id, durationMS=duration_ms(duration))

    def checked_in(self, connection_id: int) -> None:
        self._emit("Connection checked in", driverConnectionId=connection_id)


def _render(data: Mapping[str, Any]) -> str:
    """The spec's unstructured sentence for ``data``; missing optional segments are left out."""
    message = data.get("message", "")
    where = server_where(data)
    conn_id = data.get("driverConnectionId")
    if message == "Connection pool created":
        options = ", ".join(f"{key}={data[key]}" for key in _POOL_OPTION_KEYS if key in data)
        return f"Connection pool created for {where}" + (f" using options {options}" if options else "")
    if message == "Connection pool ready":
        return f"Connection pool ready for {where}"
    if message == "Connection pool cleared":
        text = f"Connection pool for {where} cleared"
        return text + (f" for serviceId {data['serviceId']}" if "serviceId" in data else "")
    if message == "Connection pool closed":
        return f"Connection pool closed for {where}"
    if message == "Connection created":
        return f"Connection created: address={where}, driver-generated ID={conn_id}"
    if message == "Connection ready":
        return (f"Connection ready: address={where}, driver-generated ID={conn_id}, "
                f"established in={data.get('durationMS', 0):.3f} ms")
    if message == "Connection closed":
        text = f"Connection closed: address={where}, driver-generated ID={conn_id}. Reason: {data.get('reason')}"
        return text + (f". Error: {data['error']}" if "error" in data else "")
    if message == "Connection checkout started":
        return f"Checkout started for connection to {where}"
    if message == "Connection checkout failed":
        text = f"Checkout failed for connection to {where}. Reason: {data.get('reason')}"
        if "error" in data:
            text += f". Error: {data['error']}"
        text += f". Duration: {data.get('durationMS', 0):.3f} ms"
        if "inUse" in data:  # greenmongo's pool-exhaustion fields (a wait-queue timeout)
            text += (f". In use: {data['inUse']} of maxPoolSize {data.get('maxPoolSize')} (cursors: "
                     f"{data.get('inUseByCursors')}, transactions: {data.get('inUseByTransactions')}, other: "
                     f"{data.get('inUseByOtherOperations')}), available: {data.get('available')}, pending: "
                     f"{data.get('pending')}, wait queue length: {data.get('waitQueueLength')}, longest wait: "
                     f"{data.get('longestWaitMS', 0):.3f} ms")
        return text
    if message == "Connection checked out":
        return (f"Connection checked out: address={where}, driver-generated ID={conn_id}, "
                f"duration={data.get('durationMS', 0):.3f} ms")
    if message == "Connection checked in":
        return f"Connection checked in: address={where}, driver-generated ID={conn_id}"
    return repr(dict(data))


register_renderer(_render, "Connection pool created", "Connection pool ready", "Connection pool cleared",
                  "Connection pool closed", "Connection created", "Connection ready", "Connection closed",
                  "Connection checkout started", "Connection checkout failed", "Connection checked out",
                  "Connection checked in")
