"""The simulated clock (Kafka's `Time`): time is an input, advanced only by the simulator."""

from __future__ import annotations


class SimClock:
    """A monotonic millisecond clock that moves only when `advance` is called (MockTime)."""

    __slots__ = ("now_ms",)

    def __init__(self, now_ms: int = 0) -> None:
        self.now_ms = now_ms

    def milliseconds(self) -> int:
        """The current simulated time in ms (Time.milliseconds)."""
        return self.now_ms

    def advance(self, ms: int) -> int:
        """Move time forward by `ms` (>= 0) and return the new time."""
        if ms < 0:
            raise ValueError(f"time cannot go backwards ({ms} ms)")
        self.now_ms += ms
        return self.now_ms
