"""Command monitoring (Command Logging and Monitoring spec): the events and log messages of one command.

Built by the executor only when a command listener is registered or the ``greenmongo.command``
logger is enabled at DEBUG, so an unobserved command pays nothing for it.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Optional, Sequence

from greenmongo.errors import OperationFailure
from greenmongo.logs import messages
from greenmongo.monitoring.command import CommandFailedEvent, CommandStartedEvent, CommandSucceededEvent, publish
from greenmongo.operations.base import reply_ok
from greenmongo.wire.header import next_request_id

COMMAND_LOGGER = logging.getLogger("greenmongo.command")


class CommandMonitor:
    """Command monitoring events and log messages for one command (only built when someone listens)."""

    def __init__(self, client_id: Any, conn: Any, command: Any, listeners: Sequence[Any],
                 logging_on: bool) -> None:
        self.conn = conn
        self.command = command
        self.listeners = listeners
        self.logging_on = logging_on
        self.request_id = next_request_id()
        self.operation_id = self.request_id
        self.client_id = client_id
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
            self._log(messages.command_started(
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
            self._log(messages.command_failed(
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
            self._log(messages.command_succeeded(
                reply, command.name, command.dbname, self.request_id, duration, address=self.conn.address,
                operation_id=self.operation_id, driver_connection_id=self.conn.id,
                speculative_hello=self.speculative_hello, **self._common()))

    def _log(self, message: Any) -> None:
        message["clientId"] = self.client_id  # which client logged it, for applications with several
        COMMAND_LOGGER.debug(message)


def _server_connection_id(conn: Any) -> Optional[int]:
    hello = getattr(conn, "hello", None) or {}
    value = hello.get("connectionId")
    return int(value) if value is not None else None
