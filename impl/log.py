"""Log: one replica's record log, its HW, log start offset, recovery point and epoch cache."""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from enum import Enum
from operator import itemgetter

from kreplica.impl.epoch_cache import LeaderEpochFileCache
from kreplica.impl.errors import (
    CorruptRecordError,
    InvalidRecordError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    OffsetsOutOfOrderError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from kreplica.impl.messages import RECORD_SIZE_BYTES, LogEntry, TopicPartition


class FetchIsolation(Enum):
    """How far a read may go: LEO (followers), HW (read_uncommitted), LSO (read_committed)."""

    LOG_END = "log_end"
    HIGH_WATERMARK = "high_watermark"
    TXN_COMMITTED = "txn_committed"


# Kafka's case objects FetchLogEnd / FetchHighWatermark / FetchTxnCommitted, as module constants
# for the hot paths (an Enum class attribute lookup goes through EnumType's __getattr__ hook).
FETCH_LOG_END = FetchIsolation.LOG_END
FETCH_HIGH_WATERMARK = FetchIsolation.HIGH_WATERMARK
FETCH_TXN_COMMITTED = FetchIsolation.TXN_COMMITTED
_OFFSET = itemgetter(0)
"""A LogEntry's offset (its first field): the key `Log._index` bisects on."""


@dataclass(slots=True)
class LogAppendInfo:
    """What an append wrote: first/last offset, record count, bytes and the log start offset."""

    first_offset: int
    last_offset: int
    num_messages: int
    valid_bytes: int
    log_start_offset: int


@dataclass(frozen=True, slots=True)
class OffsetAndEpoch:
    """An end offset and the epoch it belongs to (Log.endOffsetForEpoch)."""

    offset: int
    leader_epoch: int


class Log:
    """The LogEntry records from log_start_offset to the LEO, in offset order. Offsets are
    contiguous unless a follower appended a batch above its LEO, which Kafka accepts
    (compaction leaves such gaps in a leader's log); no leader here has one."""

    def __init__(
        self,
        tp: TopicPartition,
        max_message_bytes: int = 1_000_012,
        flush_interval_messages: int | None = None,
    ) -> None:
        self.tp = tp
        self.entries: list[LogEntry] = []
        self.log_start_offset = 0
        self.next_offset = 0
        """The LEO (Kafka's nextOffsetMetadata): the offset the next record gets."""
        self.base_offset = 0
        """Where the log's one segment begins: 0, or where it last restarted (R9). Below the
        log start offset once records are deleted (DeleteRecords keeps the segment)."""
        self.high_watermark = 0
        self.recovery_point = 0
        self.max_message_bytes = max_message_bytes
        self.flush_interval_messages = flush_interval_messages
        self.offline = False
        self.leader_epoch_cache = LeaderEpochFileCache(self._leo)

    # ------------------------------------------------------------------------------ offsets

    def _leo(self) -> int:
        return self.next_offset

    @property
    def log_end_offset(self) -> int:
        """LEO: the offset the next record will get."""
        return self.next_offset

    def _index(self, offset: int) -> int:
        """The index in `entries` of the first record at or above `offset`."""
        return bisect_left(self.entries, offset, key=_OFFSET)

    @property
    def last_stable_offset(self) -> int:
        """LSO: with no transactions in the model the LSO equals the HW."""
        return self.high_watermark

    def latest_epoch(self) -> int | None:
        """The largest epoch in the epoch cache (Log.latestEpoch)."""
        return self.leader_epoch_cache.latest_epoch()

    def end_offset_for_epoch(self, leader_epoch: int) -> OffsetAndEpoch | None:
        """R3 through the epoch cache; an UNDEF offset becomes None (Log.endOffsetForEpoch)."""
        epoch, offset = self.leader_epoch_cache.end_offset_for(leader_epoch)
        if offset < 0:
            return None
        return OffsetAndEpoch(offset, epoch)

    def maybe_assign_epoch_start_offset(self, leader_epoch: int, start_offset: int) -> None:
        """Record `leader_epoch` starting at `start_offset` in the epoch cache (R2, R5)."""
        self.leader_epoch_cache.assign(leader_epoch, start_offset)

    def _check_online(self) -> None:
        if self.offline:
            raise KafkaStorageError(f"log dir of {self.tp} is offline")

    # ------------------------------------------------------------------------------ appends

    def append_as_leader(self, record_ids: tuple[int, ...], leader_epoch: int) -> LogAppendInfo:
        """Assign the next offsets, stamp `leader_epoch` and append (Log.appendAsLeader)."""
        self._check_online()
        if not record_ids:
            raise InvalidRecordError("a produce request must carry at least one record")
        size = len(record_ids) * RECORD_SIZE_BYTES
        if size > self.max_message_bytes:
            raise RecordTooLargeError(
                f"batch of {size} bytes exceeds message.max.bytes {self.max_message_bytes}"
            )
        first = self.next_offset
        self.entries.extend(
            [LogEntry(first + i, leader_epoch, rid) for i, rid in enumerate(record_ids)]
        )
        self.next_offset = first + len(record_ids)
        self.leader_epoch_cache.assign(leader_epoch, first)
        self._maybe_flush()
        return LogAppendInfo(
            first, first + len(record_ids) - 1, len(record_ids), size, self.log_start_offset
        )

    def append_as_follower(self, records: tuple[LogEntry, ...]) -> LogAppendInfo:
        """Append the leader's records keeping their offsets and epochs (Log.appendAsFollower)."""
        self._check_online()
        leo = self.next_offset
        if not records:
            return LogAppendInfo(-1, leo - 1, 0, 0, self.log_start_offset)
        cache = self.leader_epoch_cache
        latest = cache.entries[-1].epoch if cache.entries else None
        epoch_starts: list[tuple[int, int]] = []
        prev = -1
        for offset, epoch, _ in records:
            if offset <= prev:
                raise OffsetsOutOfOrderError(f"out of order offsets in append to {self.tp}")
            if epoch != latest:
                if epoch < 0:
                    raise CorruptRecordError(f"record without a leader epoch in {self.tp}")
                epoch_starts.append((epoch, offset))
                latest = epoch
            prev = offset
        first = records[0].offset
        if first < leo:
            raise UnexpectedAppendOffsetError(
                f"first offset {first} is below the log end offset {leo} of {self.tp}",
                first,
                prev,
            )
        for epoch, offset in epoch_starts:
            cache.assign(epoch, offset)
        self.entries.extend(records)  # a first offset above the LEO leaves a gap, as in Kafka
        self.next_offset = prev + 1
        self._maybe_flush()
        return LogAppendInfo(
            first, prev, len(records), len(records) * RECORD_SIZE_BYTES, self.log_start_offset
        )

    def _maybe_flush(self) -> None:
        interval = self.flush_interval_messages
        if interval is not None and self.log_end_offset - self.recovery_point >= interval:
            self.flush()

    # -------------------------------------------------------------------------------- reads

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        isolation: FetchIsolation,
        min_one_message: bool,
    ) -> tuple[LogEntry, ...]:
        """Records from start_offset up to the isolation bound and max_bytes (Log.read, R15)."""
        if self.offline:
            raise KafkaStorageError(f"log dir of {self.tp} is offline")
        log_start = self.log_start_offset
        leo = self.next_offset
        if start_offset > leo or start_offset < log_start:
            raise OffsetOutOfRangeError(
                f"offset {start_offset} of {self.tp} is outside [{log_start}, {leo}]"
            )
        if isolation is FETCH_LOG_END:
            bound = leo
        else:
            # HIGH_WATERMARK, or TXN_COMMITTED (the LSO equals the HW without transactions)
            bound = self.high_watermark if self.high_watermark < leo else leo
        if start_offset >= bound:
            return ()
        base, end = self._index(start_offset), self._index(bound)
        count = end - base
        max_count = max_bytes // RECORD_SIZE_BYTES
        if count > max_count:
            count = max_count if max_count > 0 else (1 if min_one_message else 0)
        return tuple(self.entries[base : base + count])

    # -------------------------------------------------------------------- high watermark

    def update_high_watermark(self, hw: int, clamp: bool = True) -> int:
        """Set the HW, clamped to [log start, LEO] unless clamp=False (hw-not-clamped bug)."""
        if clamp:
            hw = max(self.log_start_offset, min(hw, self.log_end_offset))
        self.high_watermark = hw
        return hw

    def maybe_increment_high_watermark(self, new_high_watermark: int) -> int | None:
        """Raise the HW to new_high_watermark (<= LEO); return the old HW if it moved (R13)."""
        if new_high_watermark > self.next_offset:
            raise ValueError(
                f"HW {new_high_watermark} exceeds the log end offset {self.log_end_offset}"
            )
        old = self.high_watermark
        if old < new_high_watermark:
            self.high_watermark = new_high_watermark
            return old
        return None

    # --------------------------------------------------------------------------- truncation

    def truncate_to(self, target_offset: int, truncate_cache_at_leo: bool = True) -> bool:
        """Drop every record at or above target_offset and the epoch cache's entries from
        there (Log.truncateTo; below the segment's base offset it starts a new segment there;
        R4, R6, R9); True if records went.

        A target at or past the LEO drops no record and returns False, but the epoch cache is
        still truncated from the end at the LEO, as Kafka 2.6.3 does (the KAFKA-10706 fix,
        apache/kafka#9633): an epoch this replica began as leader without writing in it goes.
        `truncate_cache_at_leo=False` is Kafka 2.6.0, which left the cache as it was (the
        seeded bug `kafka-10706`): a follower that keeps such an epoch can ask for its end
        forever and never finish truncating."""
        self._check_online()
        if target_offset < 0:
            raise ValueError(f"cannot truncate {self.tp} to a negative offset {target_offset}")
        if target_offset >= self.log_end_offset:
            if truncate_cache_at_leo:
                self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
            return False
        if target_offset < self.base_offset:  # below the segment: start a new one there
            self.truncate_fully_and_start_at(target_offset)
            return True
        del self.entries[self._index(target_offset) :]
        self.next_offset = target_offset
        self.log_start_offset = min(self.log_start_offset, target_offset)
        self._update_log_end_offset(target_offset)
        self.leader_epoch_cache.truncate_from_end(target_offset)
        return True

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete every record and restart the log (and HW) at new_offset; clears the cache."""
        self._check_online()
        self.entries.clear()
        self.log_start_offset = self.base_offset = self.next_offset = new_offset
        self._update_log_end_offset(new_offset)
        self.leader_epoch_cache.clear()
        if self.high_watermark < new_offset:
            self.high_watermark = new_offset
        self.recovery_point = new_offset

    def _update_log_end_offset(self, offset: int) -> None:
        if self.high_watermark >= offset:
            self.high_watermark = offset
        if self.recovery_point > offset:
            self.recovery_point = offset

    def maybe_increment_log_start_offset(self, new_log_start_offset: int) -> None:
        """Delete records below new_log_start_offset (<= HW) and trim the epoch cache (R4)."""
        self._check_online()
        if new_log_start_offset > self.high_watermark:
            raise OffsetOutOfRangeError(
                f"log start offset {new_log_start_offset} of {self.tp} is above the HW "
                f"{self.high_watermark}"
            )
        if new_log_start_offset > self.log_start_offset:
            del self.entries[: self._index(new_log_start_offset)]
            self.log_start_offset = new_log_start_offset
            self.leader_epoch_cache.truncate_from_start(new_log_start_offset)

    # ------------------------------------------------------------------------ durability

    def flush(self, offset: int | None = None) -> None:
        """Make every record below `offset` (default LEO) durable: move the recovery point."""
        target = self.log_end_offset if offset is None else min(offset, self.log_end_offset)
        if target > self.recovery_point:
            self.recovery_point = target

    def recover(self, lose_unflushed: bool) -> None:
        """Reload after a restart; unclean shutdown loses every record above the recovery point
        (LogManager.recover_all says whether the log dir is still offline)."""
        if lose_unflushed and self.recovery_point < self.log_end_offset:
            del self.entries[self._index(self.recovery_point) :]
            last = self.entries[-1].offset + 1 if self.entries else self.log_start_offset
            self.next_offset = max(last, self.log_start_offset)
        leo = self.log_end_offset
        self.leader_epoch_cache.truncate_from_end(leo)
        self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        self.high_watermark = max(self.log_start_offset, min(self.high_watermark, leo))
        self.recovery_point = min(self.recovery_point, leo)

    # ------------------------------------------------------------------------- inspection

    def record_ids(self) -> list[int]:
        """The record ids in offset order."""
        return [entry.record_id for entry in self.entries]
