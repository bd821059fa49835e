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

from greenmongo.hub.waiting import call_with_deadline, detach_from_hub
from greenmongo.hub.worker import BackgroundWorker
from greenmongo.sdam.address import Address, format_address
from greenmongo.sdam.rtt import RoundTripTimes


class RttMonitor(BackgroundWorker):
    """Measures one server's round trip time every ``heartbeat_frequency`` seconds."""

    stop_reason = "RTT monitor stopped"

    def __init__(self, address: Address, rtt: RoundTripTimes, *, heartbeat_frequency: float,
                 io_timeout: Optional[float], connect: Callable[[], Any]) -> None:
        """``connect()`` opens a handshaken, unauthenticated connection (its duration is the first sample)."""
        super().__init__()
        self.address = address
        self.rtt = rtt
        self._heartbeat_frequency = heartbeat_frequency
        self._io_timeout = io_timeout
        self._connect = connect
        self._conn: Any = None
        self.samples_taken = 0

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close("RTT monitor stopped")

    release = cleanup = _close  # stop() outside a ping closes the connection at once; the greenlet at its end

    def run(self) -> None:
        while not self._stopped:
            try:
                self.rtt.add_sample(self._ping())
                self.samples_taken += 1
            except Exception:
                # The monitor owns resetting the average; just reconnect next time.
                self._close()
            if self._stopped:
                return
            self.sleep(self._heartbeat_frequency)

    def _ping(self) -> float:
        started = monotonic()
        with self.interruptible():
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
