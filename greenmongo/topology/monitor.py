"""One monitor greenlet per server: the streaming and polling hello protocols (Server Monitoring spec).

The greenlet loops: check, hand the outcome to the topology, then either
check again at once (a streaming reply, or the one retry after a network
error on a known server) or wait for heartbeatFrequencyMS - woken early by
``request_check()``, but never sooner than 500 ms after the previous check.

A check is one of:

* a new connection's handshake (its hello reply and duration are the outcome);
* the next reply of an open exhaust stream (``moreToCome``);
* an awaitable hello (``topologyVersion`` + ``maxAwaitTimeMS``, exhaustAllowed)
  when streaming is on and the server reported a topologyVersion;
* a plain hello (polling).

Streaming replies take their RTT from a separate :class:`RttMonitor`.
Heartbeat events and log messages go through the topology's ordered publisher,
so they keep their place among the SDAM events and a slow listener never
delays a check.
Every wait uses unreferenced timers and the monitoring socket's watchers are
unreferenced, so monitors never keep ``gevent.get_hub().join()`` waiting.
The greenlet holds the topology only by weak reference.
"""

from __future__ import annotations

import os
import weakref
from dataclasses import dataclass
from time import monotonic
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence, Tuple

import gevent

from greenmongo.errors import AutoReconnect, ConfigurationError
from greenmongo.hub.publisher import OrderedPublisher
from greenmongo.hub.waiting import Interrupted, call_with_deadline, detach_from_hub
from greenmongo.hub.worker import BackgroundWorker
from greenmongo.logs.topology import TopologyLogger
from greenmongo.monitoring.topology import (
    ServerHeartbeatFailedEvent,
    ServerHeartbeatListener,
    ServerHeartbeatStartedEvent,
    ServerHeartbeatSucceededEvent,
    publish,
)
from greenmongo.sdam.address import Address, format_address
from greenmongo.sdam.errors import CheckFailureDecision, check_again_immediately, decide_check_failure
from greenmongo.sdam.rtt import RoundTripTimes
from greenmongo.sdam.server_description import ServerDescription, check_hello
from greenmongo.sdam.settings import MIN_HEARTBEAT_FREQUENCY
from greenmongo.topology.rtt_monitor import RttMonitor
from greenmongo.wire.command_errors import check_command_reply

if TYPE_CHECKING:
    from greenmongo.net.connection import Connection

STREAM, POLL, AUTO = "stream", "poll", "auto"
MONITORING_MODES = (STREAM, POLL, AUTO)


def running_in_faas(environ: Optional[Mapping[str, str]] = None) -> bool:
    """The handshake spec's FaaS detection (the same rules that fill ``client.env.name``)."""
    from greenmongo.net.metadata import faas_name

    return faas_name(os.environ if environ is None else environ) is not None


def streaming_enabled(mode: str, environ: Optional[Mapping[str, str]] = None) -> bool:
    """serverMonitoringMode: stream -> True, poll -> False, auto -> not in a FaaS."""
    if mode == STREAM:
        return True
    if mode == POLL:
        return False
    if mode == AUTO:
        return not running_in_faas(environ)
    raise ConfigurationError(f"serverMonitoringMode must be one of {', '.join(MONITORING_MODES)}, not {mode!r}")


@dataclass(frozen=True)
class MonitorSettings:
    """What a monitor needs; ``connect(address)`` opens an unauthenticated, handshaken connection."""

    heartbeat_frequency: float
    connect_timeout: Optional[float]
    streaming: bool
    connect: Callable[[Address], "Connection"]

    @property
    def await_timeout(self) -> Optional[float]:
        """connectTimeoutMS + heartbeatFrequencyMS for awaited replies (unlimited when connectTimeoutMS is)."""
        if not self.connect_timeout:
            return None
        return self.connect_timeout + self.heartbeat_frequency

    @property
    def check_timeout(self) -> Optional[float]:
        """Monitoring sockets use connectTimeoutMS as their socket timeout."""
        return self.connect_timeout or None


class _CheckCancelled(Interrupted):
    """Thrown into the monitor greenlet: an application error cancelled the check in progress."""


class Monitor(BackgroundWorker):
    """Monitors one server for one topology. ``start()`` spawns the greenlet; ``stop()`` ends it."""

    stop_reason = "monitor stopped"

    def __init__(self, address: Address, topology: Any, settings: MonitorSettings,
                 listeners: Sequence[Any] = (), logger: Optional[TopologyLogger] = None,
                 publisher: Optional[OrderedPublisher] = None) -> None:
        """``publisher`` is the topology's (events stay in order with its SDAM events)."""
        super().__init__()
        self.address = address
        self._topology_ref = weakref.ref(topology)
        self._settings = settings
        self._listeners = tuple(listener for listener in listeners
                                if isinstance(listener, ServerHeartbeatListener))
        self._logger = logger
        self._publish = (publisher or OrderedPublisher()).publish
        self.rtt = RoundTripTimes()
        self._rtt_monitor: Optional[RttMonitor] = None
        self._conn: Optional["Connection"] = None
        self._description = ServerDescription(address)
        self.checks = 0

    def __repr__(self) -> str:
        mode = "stream" if self._settings.streaming else "poll"
        return f"<Monitor {format_address(self.address)} {mode}{' stopped' if self._stopped else ''}>"

    # -- control (any greenlet) ----------------------------------------------------

    @property
    def greenlets(self) -> Tuple[gevent.Greenlet, ...]:
        """The monitor's greenlet and, once streaming, its RTT greenlet."""
        rtt = self._rtt_monitor.greenlets if self._rtt_monitor is not None else ()
        return super().greenlets + rtt

    @property
    def rtt_monitor(self) -> Optional[RttMonitor]:
        return self._rtt_monitor

    def request_check(self) -> None:
        """Check soon (after the 500 ms minimum). A request made during a check is kept, not dropped:
        that check may be the one an application error is about to cancel."""
        self.wake()

    def cancel_check(self) -> None:
        """Abandon the check in progress and its connection (an application network error said enough)."""
        if not self.interrupt(lambda: _CheckCancelled("check cancelled")):
            self._close_connection("check cancelled")

    def stop(self) -> None:
        """End the greenlets promptly (interrupting any check); non-blocking and idempotent."""
        super().stop()
        if self._rtt_monitor is not None:
            self._rtt_monitor.stop()

    def release(self) -> None:
        self._close_connection("monitor stopped")

    # -- the greenlet ----------------------------------------------------------------

    def run(self) -> None:
        while not self._stopped:
            previous = self._description
            try:
                description, failure = self._check(previous)
            except _CheckCancelled:
                # The topology marked the server Unknown and cancelled us: wait, then reconnect.
                self._description = ServerDescription(self.address)
                self._wait()
                continue
            self._description = description
            self.checks += 1
            topology = self._topology_ref()
            if topology is None:
                return
            topology._apply_check(self, description, failure)
            topology = None
            if self._stopped:
                return
            if failure is not None:
                if failure.retry_immediately:
                    continue
            else:
                streaming_server = description.topology_version is not None
                if self._settings.streaming and streaming_server and self._rtt_monitor is None:
                    self._start_rtt_monitor()
                conn = self._conn
                if check_again_immediately(description, streaming_enabled=self._settings.streaming,
                                           connection_streaming=conn is not None and conn.more_to_come):
                    continue
            self._wait()

    def cleanup(self) -> None:
        self._close_connection("monitor stopped")
        if self._rtt_monitor is not None:
            self._rtt_monitor.stop()

    def _wait(self) -> None:
        """Sleep up to heartbeatFrequencyMS (woken by request_check), at least the 500 ms minimum."""
        started = monotonic()
        self.sleep(self._settings.heartbeat_frequency)
        remaining = MIN_HEARTBEAT_FREQUENCY - (monotonic() - started)
        if remaining > 0 and not self._stopped:
            self.sleep(remaining, wakeable=False)

    def _start_rtt_monitor(self) -> None:
        settings = self._settings
        self._rtt_monitor = RttMonitor(self.address, self.rtt, heartbeat_frequency=settings.heartbeat_frequency,
                                       io_timeout=settings.check_timeout,
                                       connect=lambda: settings.connect(self.address))
        self._rtt_monitor.start()

    def _close_connection(self, reason: str) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close(reason)

    # -- one check ---------------------------------------------------------------------

    def _check(self, previous: ServerDescription) -> Tuple[ServerDescription, Optional[CheckFailureDecision]]:
        """One hello; returns the new description and, for a failure, what to do about it."""
        conn = self._conn
        settings = self._settings
        where = format_address(self.address)
        awaited = False
        if conn is not None and conn.closed:
            conn = self._conn = None
        if conn is not None and (conn.more_to_come or (settings.streaming and previous.topology_version)):
            awaited = True
        self._heartbeat_started(awaited, conn)
        started = monotonic()
        try:
            with self.interruptible():
                if conn is None:
                    conn = settings.connect(self.address)
                    self._conn = conn
                    detach_from_hub(conn)
                    self.rtt.add_sample(monotonic() - started)
                    reply = conn.hello
                elif conn.more_to_come:
                    reply = call_with_deadline(settings.await_timeout, f"{where} (awaited hello)",
                                               self._next_streamed_reply, conn)
                elif awaited:
                    reply = call_with_deadline(settings.await_timeout, f"{where} (awaited hello)", conn.command,
                                               "admin", self._hello_command(conn, previous.topology_version),
                                               exhaust_allowed=True, timeout=None)
                else:
                    reply = call_with_deadline(settings.check_timeout, f"{where} (hello)", conn.command, "admin",
                                               self._hello_command(conn, None), timeout=None)
                    self.rtt.add_sample(monotonic() - started)
                check_hello(reply or {})  # a malformed hello fails the check: Unknown, with the ProtocolError
        except Interrupted as exc:  # cancelled, or the monitor stopped
            self._after_failure(awaited, monotonic() - started, AutoReconnect(f"{where}: {exc}"), conn)
            raise
        except Exception as exc:
            self._after_failure(awaited, monotonic() - started, exc, conn)
            decision = decide_check_failure(previous, exc)
            # The failure's traceback keeps this frame, and the decision holds the failure: dropping these
            # locals leaves no cycle, and no chain of each failed check's previous description, its error
            # and that error's frames, as long as the outage.
            del previous, conn
            try:
                return decision.unknown, decision
            finally:
                del decision
        duration = monotonic() - started
        description = ServerDescription(self.address, reply, round_trip_time=self.rtt.average,
                                        min_round_trip_time=self.rtt.minimum)
        self._heartbeat_succeeded(awaited, duration, reply, conn)
        return description, None

    def _after_failure(self, awaited: bool, duration: float, error: BaseException,
                       conn: Optional["Connection"]) -> None:
        self._close_connection(f"check failed: {error}")
        self.rtt.reset()
        self._heartbeat_failed(awaited, duration, error, conn)

    def _hello_command(self, conn: "Connection", topology_version: Optional[Mapping[str, Any]]) -> dict:
        if conn.hello_ok:
            command: dict = {"hello": 1}
        else:
            command = {"isMaster": 1, "helloOk": True}
        if topology_version is not None:
            command["topologyVersion"] = topology_version
            command["maxAwaitTimeMS"] = int(self._settings.heartbeat_frequency * 1000)
        return command

    @staticmethod
    def _next_streamed_reply(conn: "Connection") -> dict:
        # Any responseTo is accepted, as other drivers do: some servers number streamed replies
        # after the original request rather than after the previous reply.
        document = conn.receive_message(None, timeout=None).document()
        check_command_reply(document, max_wire_version=conn.max_wire_version)
        return document

    # -- heartbeat events and logs -------------------------------------------------------------

    @staticmethod
    def _ids(conn: Optional["Connection"]) -> Tuple[Optional[int], Optional[int]]:
        if conn is None:
            return None, None
        hello = getattr(conn, "hello", None) or {}
        server_id = hello.get("connectionId")
        return getattr(conn, "id", None), int(server_id) if server_id is not None else None

    def _heartbeat_started(self, awaited: bool, conn: Optional["Connection"]) -> None:
        if self._listeners:
            self._publish(publish, self._listeners, ServerHeartbeatStartedEvent(self.address, awaited))
        if self._logger is not None and self._logger.enabled():
            self._publish(self._logger.heartbeat_started, self.address, awaited, *self._ids(conn))

    def _heartbeat_succeeded(self, awaited: bool, duration: float, reply: Any,
                             conn: Optional["Connection"]) -> None:
        if self._listeners:
            self._publish(publish, self._listeners, ServerHeartbeatSucceededEvent(duration, reply, self.address,
                                                                                  awaited))
        if self._logger is not None and self._logger.enabled():
            self._publish(self._logger.heartbeat_succeeded, self.address, awaited, duration, reply,
                          *self._ids(conn))

    def _heartbeat_failed(self, awaited: bool, duration: float, error: BaseException,
                          conn: Optional["Connection"]) -> None:
        if self._listeners:
            event = ServerHeartbeatFailedEvent(duration, error, self.address, awaited)  # type: ignore[arg-type]
            self._publish(publish, self._listeners, event)
        if self._logger is not None and self._logger.enabled():
            self._publish(self._logger.heartbeat_failed, self.address, awaited, duration, error, *self._ids(conn))
