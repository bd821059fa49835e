"""The RTT greenlet of a streaming monitor: a hello every heartbeatFrequencyMS on its own connection.

Server Monitoring: with the streaming protocol the awaited replies say
nothing about latency, so a second, dedicated connection measures it. Its
samples feed the monitor's :class:`~greenmongo.sdam.rtt.RoundTripTimes`; its
errors never touch the topology (the connection has no pool generation to
order them by) and it publishes no events. It waits on an unreferenced timer
and its socket is detached from the hub, so it never keeps the hub alive.
"""

from __future__ import annotations

from time import monotonic
from typing import Any, Callable, Optional

import gevent
from gevent.event import Event

from greenmongo.hub.waiting import Interruptible, call_with_deadline, detach_from_hub, wait_for
from greenmongo.sdam.address import Address, format_address
from greenmongo.sdam.rtt import RoundTripTimes


class _Stopped(BaseException):
    """Thrown into the RTT greenlet to abandon a ping when the monitor stops."""


class RttMonitor:
    """Measures one server's round trip time every ``heartbeat_frequency`` seconds."""

    def __init__(self, address: Address, rtt: RoundTripTimes, *, heartbeat_frequency: float,
                 io_timeout: Optional[float], connect: Callable[[], Any]) -> None:
        """``connect()`` opens a handshaken, unauthenticated connection (its duration is the first sample)."""
        self.address = address
        self.rtt = rtt
        self._heartbeat_frequency = heartbeat_frequency
        self._io_timeout = io_timeout
        self._connect = connect
        self._conn: Any = None
        self._stopped = False
        self._wake = Event()
        self._io = Interruptible()
        self.samples_taken = 0

    @property
    def greenlet(self) -> Optional[gevent.Greenlet]:
        return self._io.greenlet

    def start(self) -> None:
        if self._io.greenlet is None and not self._stopped:
            self._io.greenlet = gevent.spawn(self._run)

    def stop(self) -> None:
        """Stop promptly: wake the wait, abandon a ping in progress, close the connection."""
        self._stopped = True
        self._wake.set()
        if not self._io.interrupt(_Stopped):
            self._close()

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close("RTT monitor stopped")

    def _run(self) -> None:
        try:
            while not self._stopped:
                try:
                    self.rtt.add_sample(self._ping())
                    self.samples_taken += 1
                except Exception:
                    # The monitor owns resetting the average; just reconnect next time.
                    self._close()
                if self._stopped:
                    return
                wait_for(self._wake, self._heartbeat_frequency)
                self._wake.clear()
        except (_Stopped, gevent.GreenletExit):
            pass
        finally:
            self._close()

    def _ping(self) -> float:
        started = monotonic()
        self._io.active = True
        try:
            if self._conn is None or self._conn.closed:
                self._conn = None
                conn = self._connect()
                self._conn = conn
                detach_from_hub(conn)
                return monotonic() - started
            conn = self._conn
            name = "hello" if conn.hello_ok else "isMaster"
            command: dict = {name: 1}
            if name != "hello":
                command["helloOk"] = True
            call_with_deadline(self._io_timeout, f"{format_address(self.address)} (RTT hello)",
                               conn.command, "admin", command, timeout=None)
            return monotonic() - started
        finally:
            self._io.active = False
