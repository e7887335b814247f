"""DelayedOperation and DelayedOperationPurgatory, with expiry on the simulated clock (R17)."""

from __future__ import annotations

import heapq
from abc import ABC, abstractmethod
from collections.abc import Hashable, Sequence
from typing import Generic, TypeVar

from kreplica.impl.clock import SimClock


class DelayedOperation(ABC):
    """An operation that completes once (try_complete succeeds, forced, or expired) (R17)."""

    __slots__ = ("_timer_owner", "_timer_seq", "completed", "delay_ms", "expired")

    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = delay_ms
        self.completed = False
        self.expired = False
        self._timer_seq: int | None = None
        self._timer_owner: DelayedOperationPurgatory[DelayedOperation] | None = None

    def cancel(self) -> None:
        """Remove this operation from its purgatory's expiry timer (TimerTask.cancel)."""
        owner = self._timer_owner
        if owner is not None:
            owner._cancel_timer(self)

    def force_complete(self) -> bool:
        """Complete now: cancel the timer, run on_complete; True (completed by this call). One
        thread: only an operation nobody completed is ever tried or expired (no race to lose)."""
        assert not self.completed, "a completed operation is never tried or expired again"
        self.completed = True
        self.cancel()
        self.on_complete()
        return True

    @abstractmethod
    def try_complete(self) -> bool:
        """Check the completion criteria and call force_complete if met; True if completed."""

    @abstractmethod
    def on_complete(self) -> None:
        """Send the response; runs exactly once."""

    def on_expiration(self) -> None:  # noqa: B027  (a hook; the default does nothing)
        """Hook run after an expired operation has been completed."""

    def run(self) -> None:
        """Timer expiry: force_complete then on_expiration (DelayedOperation.run, Kafka order)."""
        self.force_complete()
        self.expired = True
        self.on_expiration()


T = TypeVar("T", bound=DelayedOperation)


class DelayedOperationPurgatory(Generic[T]):
    """Watch lists per key plus an expiry timer driven by the simulated clock (R17)."""

    def __init__(self, name: str, clock: SimClock) -> None:
        self.name = name
        self.clock = clock
        self.watchers: dict[Hashable, list[T]] = {}
        # heap of (deadline, seq); the operation lives in _in_timer until it expires or is
        # cancelled, so a completed operation is freed at once (Kafka removes it from its bucket)
        self._timer: list[tuple[int, int]] = []
        self._in_timer: dict[int, T] = {}
        self._seq = 0

    # ------------------------------------------------------------------------ public API

    def try_complete_else_watch(self, operation: T, watch_keys: Sequence[Hashable]) -> bool:
        """Try once; else watch on every key and arm the expiry timer (R17). Kafka tries again
        after watching, for a completion racing from another thread; here no thread runs
        between the two, so the second try could not succeed and is left out."""
        assert watch_keys, "the watch key list can't be empty"
        if operation.try_complete():
            return True
        for key in watch_keys:
            self.watchers.setdefault(key, []).append(operation)
        self._add_to_timer(operation)
        return False

    def check_and_complete(self, key: Hashable) -> int:
        """Retry the operations watched on key; purge finished ones; return how many I completed."""
        ops = self.watchers.get(key)
        if ops is None:
            return 0
        completed = 0
        lingering = False
        for op in tuple(ops):
            if op.completed:
                lingering = True
            elif op.try_complete():
                completed += 1
        if completed or lingering:
            current = self.watchers.get(key)
            if current is not None:
                keep = [op for op in current if not op.completed]
                if keep:
                    self.watchers[key] = keep
                else:
                    del self.watchers[key]
        return completed

    def advance_clock(self) -> int:
        """Expire every operation whose deadline has passed, in deadline order; return the count."""
        now = self.clock.now_ms
        expired = 0
        timer = self._timer
        while timer and timer[0][0] <= now:
            _, seq = heapq.heappop(timer)
            op = self._in_timer.get(seq)
            if op is None:
                continue
            op.run()
            expired += 1
        return expired

    def next_expiry_ms(self) -> int | None:
        """The earliest deadline of a pending operation, if any."""
        timer = self._timer
        while timer and timer[0][1] not in self._in_timer:
            heapq.heappop(timer)
        return timer[0][0] if timer else None

    def pending(self) -> list[T]:
        """The operations in the timer, oldest first."""
        return [self._in_timer[seq] for seq in sorted(self._in_timer)]

    # ---------------------------------------------------------------------------- timer

    def _add_to_timer(self, op: T) -> None:
        self._seq += 1
        seq = self._seq
        op._timer_seq = seq
        op._timer_owner = self  # type: ignore[assignment]
        self._in_timer[seq] = op
        heapq.heappush(self._timer, (self.clock.now_ms + op.delay_ms, seq))

    def _cancel_timer(self, op: DelayedOperation) -> None:
        seq = op._timer_seq
        if seq is not None:
            self._in_timer.pop(seq, None)
            op._timer_seq = None
            op._timer_owner = None
