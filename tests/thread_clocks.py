"""Clocks of what kept a thread from running that was not its own code: its run-queue delay (Linux
``schedstat``) and the hypervisor's steal time (``/proc/stat``). The hub watchdog (tests/plugins/hub_watchdog.py)
and the DNS hub meters (tests/test_dns_hub_blocking.py) discount both from what they measure."""

from __future__ import annotations

import os
from typing import Optional


class ThreadClocks:
    """Cumulative seconds the hub's thread spent queued for a CPU (Linux ``schedstat``), and the
    hypervisor's steal time per CPU (``/proc/stat``). Zero where Linux does not provide them.

    Opened in the hub's thread (``/proc/thread-self`` names the thread that opens it); read from
    the monitor thread.
    """

    def __init__(self) -> None:
        self._schedstat = self._open("/proc/thread-self/schedstat")
        self._stat = self._open("/proc/stat")
        self._tick = 1.0 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01

    @staticmethod
    def _open(path: str) -> Optional[int]:
        try:
            return os.open(path, os.O_RDONLY)
        except OSError:
            return None

    def sched(self) -> tuple[float, float]:
        """(seconds on a CPU, seconds queued for one): a thread that neither ran nor queued slept."""
        if self._schedstat is None:
            return 0.0, 0.0
        fields = os.pread(self._schedstat, 128, 0).split()
        return int(fields[0]) / 1e9, int(fields[1]) / 1e9

    def steal(self) -> tuple[float, ...]:
        if self._stat is None:
            return ()
        steal = []
        for line in os.pread(self._stat, 65536, 0).split(b"\n"):
            if line.startswith(b"cpu") and line[3:4].isdigit():
                fields = line.split()
                steal.append(int(fields[8]) * self._tick if len(fields) > 8 else 0.0)
        return tuple(steal)

    def close(self) -> None:
        for fd in (self._schedstat, self._stat):
            if fd is not None:
                os.close(fd)
        self._schedstat = self._stat = None


def steal_between(first: tuple[float, ...], last: tuple[float, ...]) -> float:
    """The most any one CPU lost to the hypervisor (the hub's thread ran on one of them)."""
    return max((b - a for a, b in zip(first, last)), default=0.0)
