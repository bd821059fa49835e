"""Round trip time bookkeeping for one server: the moving average and the recent minimum.

Server Selection: the average is an exponentially weighted moving average with
alpha 0.2, seeded by the first sample. Server Monitoring: the minimum is over
(at most) the last 10 samples and is reported as 0 until there are 2 (CSOT
uses it). The monitor greenlets own one instance per server and reset it when
a check fails.
"""

from __future__ import annotations

from collections import deque
from typing import Deque, Optional

RTT_ALPHA = 0.2
MIN_RTT_WINDOW = 10
MIN_RTT_SAMPLES = 2


def moving_average(previous: Optional[float], sample: float) -> float:
    """The next average: the sample itself when there is none yet."""
    if previous is None:
        return sample
    return RTT_ALPHA * sample + (1 - RTT_ALPHA) * previous


class RoundTripTimes:
    """Average and recent-minimum RTT, in seconds; pure arithmetic, no clock."""

    __slots__ = ("_average", "_recent")

    def __init__(self) -> None:
        self._average: Optional[float] = None
        self._recent: Deque[float] = deque(maxlen=MIN_RTT_WINDOW)

    def add_sample(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"a round trip time cannot be negative: {seconds!r}")
        self._average = moving_average(self._average, seconds)
        self._recent.append(seconds)

    @property
    def average(self) -> Optional[float]:
        """None until the first sample (a server that was never reached has no RTT)."""
        return self._average

    @property
    def minimum(self) -> float:
        """The smallest of the last 10 samples; 0 until there are at least 2."""
        if len(self._recent) < MIN_RTT_SAMPLES:
            return 0.0
        return min(self._recent)

    def reset(self) -> None:
        """Forget everything: the server became unavailable."""
        self._average = None
        self._recent.clear()

    def __repr__(self) -> str:
        return f"RoundTripTimes(average={self._average!r}, minimum={self.minimum!r})"
