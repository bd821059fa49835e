"""PyMongo's import path ``pymongo.read_preferences``: the names live in ``greenmongo.options.read_preferences``."""

from typing import Optional

from greenmongo.options.read_preferences import *  # noqa: F401,F403
from greenmongo.sdam.rtt import moving_average


class MovingAverage:
    """An exponentially weighted moving average of round-trip times (the Server Selection spec's,
    alpha 0.2), with PyMongo's interface."""

    def __init__(self) -> None:
        self.average: Optional[float] = None

    def add_sample(self, sample: float) -> None:
        if sample < 0:
            raise ValueError(f"duration cannot be negative {sample}")
        self.average = moving_average(self.average, sample)

    def get(self) -> Optional[float]:
        """The average so far, or None before the first sample."""
        return self.average

    def reset(self) -> None:
        self.average = None
