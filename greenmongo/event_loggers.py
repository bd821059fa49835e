"""PyMongo's ``pymongo.event_loggers``: ready-made listeners that write every event to ``logging``.

``monitoring.register(CommandLogger())`` or ``MongoClient(event_listeners=[CommandLogger()])``. The
messages are PyMongo's, word for word, sent through the ``logging`` module's root logger at INFO
(WARNING for a removed server, a failed heartbeat, and a topology without a readable or writable
server), so log processing written against PyMongo keeps matching. For the structured log messages
of the Logging spec, configure the ``greenmongo.*`` loggers instead.
"""

from __future__ import annotations

import logging

from greenmongo import monitoring


class CommandLogger(monitoring.CommandListener):
    """Logs command started, succeeded and failed events."""

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        logging.info(f"Command {event.command_name} with request id {event.request_id} started on server "
                     f"{event.connection_id}")

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        logging.info(f"Command {event.command_name} with request id {event.request_id} on server "
                     f"{event.connection_id} succeeded in {event.duration_micros} microseconds")

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        logging.info(f"Command {event.command_name} with request id {event.request_id} on server "
                     f"{event.connection_id} failed in {event.duration_micros} microseconds")


class ServerLogger(monitoring.ServerListener):
    """Logs servers joining and leaving the topology and changes of server type."""

    def opened(self, event: monitoring.ServerOpeningEvent) -> None:
        logging.info(f"Server {event.server_address} added to topology {event.topology_id}")

    def description_changed(self, event: monitoring.ServerDescriptionChangedEvent) -> None:
        previous, new = event.previous_description, event.new_description
        if new.server_type != previous.server_type:
            logging.info(f"Server {event.server_address} changed type from {previous.server_type_name} to "
                         f"{new.server_type_name}")

    def closed(self, event: monitoring.ServerClosedEvent) -> None:
        logging.warning(f"Server {event.server_address} removed from topology {event.topology_id}")


class HeartbeatLogger(monitoring.ServerHeartbeatListener):
    """Logs every server check (heartbeat)."""

    def started(self, event: monitoring.ServerHeartbeatStartedEvent) -> None:
        logging.info(f"Heartbeat sent to server {event.connection_id}")

    def succeeded(self, event: monitoring.ServerHeartbeatSucceededEvent) -> None:
        logging.info(f"Heartbeat to server {event.connection_id} succeeded with reply {event.reply.document}")

    def failed(self, event: monitoring.ServerHeartbeatFailedEvent) -> None:
        logging.warning(f"Heartbeat to server {event.connection_id} failed with error {event.reply}")


class TopologyLogger(monitoring.TopologyListener):
    """Logs the topology opening and closing, its updates, and when no server can be read from or
    written to."""

    def opened(self, event: monitoring.TopologyOpenedEvent) -> None:
        logging.info(f"Topology with id {event.topology_id} opened")

    def description_changed(self, event: monitoring.TopologyDescriptionChangedEvent) -> None:
        logging.info(f"Topology description updated for topology id {event.topology_id}")
        previous, new = event.previous_description, event.new_description
        if new.topology_type != previous.topology_type:
            logging.info(f"Topology {event.topology_id} changed type from {previous.topology_type_name} to "
                         f"{new.topology_type_name}")
        if not new.has_writable_server():
            logging.warning("No writable servers available.")
        if not new.has_readable_server():
            logging.warning("No readable servers available.")

    def closed(self, event: monitoring.TopologyClosedEvent) -> None:
        logging.info(f"Topology with id {event.topology_id} closed")


class ConnectionPoolLogger(monitoring.ConnectionPoolListener):
    """Logs every connection pool (CMAP) event."""

    def pool_created(self, event: monitoring.PoolCreatedEvent) -> None:
        logging.info(f"[pool {event.address}] pool created")

    def pool_ready(self, event: monitoring.PoolReadyEvent) -> None:
        logging.info(f"[pool {event.address}] pool ready")

    def pool_cleared(self, event: monitoring.PoolClearedEvent) -> None:
        logging.info(f"[pool {event.address}] pool cleared")

    def pool_closed(self, event: monitoring.PoolClosedEvent) -> None:
        logging.info(f"[pool {event.address}] pool closed")

    def connection_created(self, event: monitoring.ConnectionCreatedEvent) -> None:
        logging.info(f"[pool {event.address}][conn #{event.connection_id}] connection created")

    def connection_ready(self, event: monitoring.ConnectionReadyEvent) -> None:
        logging.info(f"[pool {event.address}][conn #{event.connection_id}] connection setup succeeded")

    def connection_closed(self, event: monitoring.ConnectionClosedEvent) -> None:
        logging.info(f'[pool {event.address}][conn #{event.connection_id}] connection closed, reason: '
                     f'"{event.reason}"')

    def connection_check_out_started(self, event: monitoring.ConnectionCheckOutStartedEvent) -> None:
        logging.info(f"[pool {event.address}] connection check out started")

    def connection_check_out_failed(self, event: monitoring.ConnectionCheckOutFailedEvent) -> None:
        logging.info(f"[pool {event.address}] connection check out failed, reason: {event.reason}")

    def connection_checked_out(self, event: monitoring.ConnectionCheckedOutEvent) -> None:
        logging.info(f"[pool {event.address}][conn #{event.connection_id}] connection checked out of pool")

    def connection_checked_in(self, event: monitoring.ConnectionCheckedInEvent) -> None:
        logging.info(f"[pool {event.address}][conn #{event.connection_id}] connection checked into pool")


__all__ = ["CommandLogger", "ConnectionPoolLogger", "HeartbeatLogger", "ServerLogger", "TopologyLogger"]
