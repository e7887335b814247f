"""LeaderEpochFileCache: the (leader epoch -> start offset) map of one replica (R2, R3, R4)."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from kreplica.impl.messages import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET


class EpochEntry(NamedTuple):
    """One cache entry: the first offset written in `epoch`."""

    epoch: int
    start_offset: int


class LeaderEpochFileCache:
    """Epoch entries with strictly increasing epochs and start offsets; persisted on change."""

    __slots__ = ("_log_end_offset", "entries")

    def __init__(self, log_end_offset: Callable[[], int]) -> None:
        self._log_end_offset = log_end_offset
        self.entries: list[EpochEntry] = []

    # ---------------------------------------------------------------------------- queries

    def latest_epoch(self) -> int | None:
        """The largest cached epoch, if any (LeaderEpochFileCache.latestEpoch)."""
        return self.entries[-1].epoch if self.entries else None

    def end_offset_for(self, requested_epoch: int) -> tuple[int, int]:
        """(epoch, end offset) for a requested epoch, cases (a)-(f) of R3 (KIP-279 semantics)."""
        entries = self.entries
        if requested_epoch == UNDEFINED_EPOCH or not entries:  # (a), (b)
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if entries[-1].epoch == requested_epoch:  # (c)
            return requested_epoch, self._log_end_offset()
        higher: EpochEntry | None = None
        floor: EpochEntry | None = None
        for entry in entries:
            if entry.epoch > requested_epoch:
                higher = entry
                break
            floor = entry
        if higher is None:  # (d)
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if floor is None:  # (e)
            return requested_epoch, higher.start_offset
        return floor.epoch, higher.start_offset  # (f)

    def end_offset_for_kip101(self, requested_epoch: int) -> tuple[int, int]:
        """KIP-101 (Kafka 1.0) answer: (UNDEFINED_EPOCH, start of the next higher epoch or LEO)."""
        entries = self.entries
        if requested_epoch == UNDEFINED_EPOCH or not entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if entries[-1].epoch == requested_epoch:
            return UNDEFINED_EPOCH, self._log_end_offset()
        if requested_epoch < entries[0].epoch:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        for entry in entries:
            if entry.epoch > requested_epoch:
                return UNDEFINED_EPOCH, entry.start_offset
        return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET

    # -------------------------------------------------------------------------- mutations

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that `epoch` starts at `start_offset`, dropping non-monotonic entries (R2);
        only a negative epoch is refused, as Kafka 2.6.3's validateAndMaybeWarn refuses it."""
        if epoch < 0:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        entries = self.entries
        if entries:
            last = entries[-1]
            if last.epoch == epoch and start_offset >= last.start_offset:
                return
            while entries and (
                entries[-1].epoch >= epoch or entries[-1].start_offset >= start_offset
            ):
                entries.pop()
        entries.append(EpochEntry(epoch, start_offset))

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop every entry starting at or after `end_offset` (R4, truncateFromEnd)."""
        entries = self.entries
        if end_offset >= 0 and entries and entries[-1].start_offset >= end_offset:
            while entries and entries[-1].start_offset >= end_offset:
                entries.pop()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries before `start_offset`; the last one at or below it moves to it (R4)."""
        removed: EpochEntry | None = None
        entries = self.entries
        while entries and entries[0].start_offset <= start_offset:
            removed = entries.pop(0)
        if removed is not None:
            entries.insert(0, EpochEntry(removed.epoch, start_offset))

    def clear(self) -> None:
        """Delete every entry (clearAndFlush)."""
        self.entries.clear()
