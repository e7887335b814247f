"""Log: leader/follower appends, reads, truncation, HW, log start and the recovery point."""

from __future__ import annotations

import pytest

from kreplica.impl.errors import (
    CorruptRecordError,
    InvalidRecordError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    OffsetsOutOfOrderError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from kreplica.impl.log import FetchIsolation, Log
from kreplica.impl.messages import LogEntry, TopicPartition

TP = TopicPartition("t", 0)


def E(offset: int, epoch: int, rid: int) -> LogEntry:
    return LogEntry(offset, epoch, rid)


def leader_log(*batches: tuple[int, tuple[int, ...]]) -> Log:
    log = Log(TP)
    for epoch, ids in batches:
        log.append_as_leader(ids, epoch)
    return log


def test_append_as_leader_assigns_offsets_and_stamps_epoch() -> None:
    log = Log(TP)
    info = log.append_as_leader((10, 11), leader_epoch=3)
    assert (info.first_offset, info.last_offset, info.num_messages) == (0, 1, 2)
    info = log.append_as_leader((12,), leader_epoch=4)
    assert info.first_offset == 2
    assert log.entries == [E(0, 3, 10), E(1, 3, 11), E(2, 4, 12)]
    assert log.log_end_offset == 3
    assert [tuple(e) for e in log.leader_epoch_cache.entries] == [(3, 0), (4, 2)]


def test_append_as_leader_rejects_empty_and_too_large_batches() -> None:
    log = Log(TP, max_message_bytes=2)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader((), 0)
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader((1, 2, 3), 0)
    assert log.entries == [] and log.log_end_offset == 0


def test_append_as_follower_keeps_offsets_and_epochs() -> None:
    log = Log(TP)
    log.append_as_follower((E(0, 1, 7), E(1, 2, 8)))
    assert log.entries == [E(0, 1, 7), E(1, 2, 8)]
    assert [tuple(e) for e in log.leader_epoch_cache.entries] == [(1, 0), (2, 1)]


def test_append_as_follower_rejects_non_monotonic_batches() -> None:
    log = Log(TP)
    with pytest.raises(OffsetsOutOfOrderError):
        log.append_as_follower((E(0, 1, 7), E(0, 1, 8)))
    assert log.entries == []


def test_append_as_follower_rejects_offsets_below_leo_and_records_without_epoch() -> None:
    log = Log(TP)
    log.append_as_follower((E(0, 1, 7),))
    with pytest.raises(UnexpectedAppendOffsetError):
        log.append_as_follower((E(0, 1, 7),))
    with pytest.raises(CorruptRecordError):
        log.append_as_follower((E(1, -1, 9),))
    assert log.entries == [E(0, 1, 7)]


def test_append_as_follower_accepts_a_first_offset_above_the_leo() -> None:
    """Kafka 2.6.3's Log.append checks a follower batch's first offset only against the LEO
    from below (UnexpectedAppendOffsetException); a batch above it is appended and the LEO
    moves past the gap (compaction leaves gaps in a leader's log). Reads, lookups,
    truncation and deletion skip the gap."""
    log = Log(TP)
    log.append_as_follower((E(0, 1, 7), E(1, 1, 8)))
    info = log.append_as_follower((E(4, 1, 9), E(6, 2, 10)))
    assert (info.first_offset, info.last_offset) == (4, 6)
    assert log.log_end_offset == 7
    assert log.record_ids() == [7, 8, 9, 10]
    assert [e.offset for e in log.entries] == [0, 1, 4, 6] and log.entries[-1] == E(6, 2, 10)
    assert log.leader_epoch_cache.end_offset_for(1) == (1, 6)
    log.update_high_watermark(7)
    assert log.read(2, 1_000, FetchIsolation.LOG_END, False) == (E(4, 1, 9), E(6, 2, 10))
    assert log.read(5, 1, FetchIsolation.LOG_END, False) == (E(6, 2, 10),)
    assert log.append_as_leader((11,), 2).first_offset == 7
    log.maybe_increment_log_start_offset(3)
    assert log.record_ids() == [9, 10, 11] and log.log_start_offset == 3
    assert log.truncate_to(5)
    assert (log.record_ids(), log.log_end_offset) == ([9], 5)


def test_read_respects_isolation_bound_and_max_bytes() -> None:
    log = leader_log((0, (1, 2, 3, 4)))
    log.update_high_watermark(2)
    assert log.read(0, 100, FetchIsolation.LOG_END, False) == tuple(log.entries)
    assert log.read(0, 100, FetchIsolation.HIGH_WATERMARK, False) == tuple(log.entries[:2])
    assert log.read(0, 100, FetchIsolation.TXN_COMMITTED, False) == tuple(log.entries[:2])
    assert log.read(1, 2, FetchIsolation.LOG_END, False) == tuple(log.entries[1:3])
    # at or above the bound (but <= LEO): empty, no error
    assert log.read(2, 100, FetchIsolation.HIGH_WATERMARK, False) == ()
    assert log.read(4, 100, FetchIsolation.LOG_END, False) == ()


def test_read_min_one_message_ignores_a_zero_byte_limit() -> None:
    log = leader_log((0, (1, 2)))
    assert log.read(0, 0, FetchIsolation.LOG_END, False) == ()
    assert log.read(0, 0, FetchIsolation.LOG_END, True) == (log.entries[0],)


def test_read_outside_the_log_is_out_of_range() -> None:
    log = leader_log((0, (1, 2)))
    with pytest.raises(OffsetOutOfRangeError):
        log.read(3, 100, FetchIsolation.LOG_END, False)
    log.update_high_watermark(2)
    log.maybe_increment_log_start_offset(1)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100, FetchIsolation.LOG_END, False)


def test_truncate_to_drops_tail_lowers_hw_and_recovery_point() -> None:
    log = leader_log((0, (1, 2)), (1, (3, 4)))
    log.update_high_watermark(4)
    log.flush()
    assert log.truncate_to(1) is True
    assert log.entries == [E(0, 0, 1)]
    assert (log.log_end_offset, log.high_watermark, log.recovery_point) == (1, 1, 1)
    assert [tuple(e) for e in log.leader_epoch_cache.entries] == [(0, 0)]
    assert log.truncate_to(5) is False


def leader_of_an_empty_epoch() -> Log:
    """Records in epoch 0, then epoch 2 began at the LEO (R5) with nothing written in it."""
    log = leader_log((0, (1, 2)))
    log.maybe_assign_epoch_start_offset(2, log.log_end_offset)
    assert [tuple(e) for e in log.leader_epoch_cache.entries] == [(0, 0), (2, 2)]
    return log


@pytest.mark.parametrize("target", [2, 5])
def test_r4_truncation_at_or_past_the_leo_truncates_the_epoch_cache_at_the_leo(
    target: int,
) -> None:
    """Kafka 2.6.3 (KAFKA-10706's fix): no record goes and False comes back, but every epoch
    that starts at or past the LEO leaves the cache, under the log's lock."""
    log = leader_of_an_empty_epoch()
    assert log.truncate_to(target) is False
    assert log.entries == [E(0, 0, 1), E(1, 0, 2)]
    assert [tuple(e) for e in log.leader_epoch_cache.entries] == [(0, 0)]


def test_r4_kafka_10706_truncation_at_the_leo_leaves_the_epoch_cache() -> None:
    """The seeded bug kafka-10706 (Kafka 2.6.0): the empty epoch stays at the cache's end."""
    log = leader_of_an_empty_epoch()
    assert log.truncate_to(2, truncate_cache_at_leo=False) is False
    assert [tuple(e) for e in log.leader_epoch_cache.entries] == [(0, 0), (2, 2)]


def test_truncate_below_deleted_records_keeps_the_segment() -> None:
    """Kafka's truncateTo starts a new segment only below the first segment's base offset:
    below a log start that DeleteRecords moved, the log start follows the target down and
    the recovery point is lowered as in any truncation (found by conformance, 2026-11-26)."""
    log = leader_log((0, (1, 2, 3)))
    log.update_high_watermark(3)
    log.maybe_increment_log_start_offset(3)
    assert log.truncate_to(2) is True
    assert (log.base_offset, log.log_start_offset, log.log_end_offset) == (0, 2, 2)
    assert (log.high_watermark, log.recovery_point) == (2, 0)
    log.truncate_fully_and_start_at(5)
    log.append_as_follower((E(5, 0, 9),))
    assert log.truncate_to(3) is True  # below the new segment's base: a new one at 3
    assert (log.base_offset, log.log_start_offset, log.recovery_point) == (3, 3, 3)


def test_truncate_fully_and_start_at_restarts_log_and_hw() -> None:
    log = leader_log((0, (1, 2)))
    log.truncate_fully_and_start_at(7)
    assert log.entries == [] and log.log_start_offset == 7 and log.log_end_offset == 7
    assert log.high_watermark == 7 and log.leader_epoch_cache.entries == []


def test_high_watermark_updates() -> None:
    log = leader_log((0, (1, 2, 3)))
    assert log.maybe_increment_high_watermark(2) == 0
    assert log.maybe_increment_high_watermark(1) is None
    assert log.high_watermark == 2
    with pytest.raises(ValueError):
        log.maybe_increment_high_watermark(4)
    assert log.update_high_watermark(10) == 3
    assert log.update_high_watermark(10, clamp=False) == 10


def test_log_start_offset_moves_only_up_to_hw_and_trims_epoch_cache() -> None:
    log = leader_log((0, (1, 2)), (2, (3, 4)))
    log.update_high_watermark(3)
    with pytest.raises(OffsetOutOfRangeError):
        log.maybe_increment_log_start_offset(4)
    log.maybe_increment_log_start_offset(3)
    assert log.log_start_offset == 3 and log.entries == [E(3, 2, 4)]
    assert [tuple(e) for e in log.leader_epoch_cache.entries] == [(2, 3)]


def test_unclean_recovery_loses_exactly_the_unflushed_tail() -> None:
    log = leader_log((0, (1, 2)))
    log.flush()
    log.append_as_leader((3, 4), 1)
    log.update_high_watermark(4)
    assert log.recovery_point == 2
    log.recover(lose_unflushed=True)
    assert log.record_ids() == [1, 2]
    assert log.high_watermark == 2
    assert [tuple(e) for e in log.leader_epoch_cache.entries] == [(0, 0)]


def test_clean_recovery_keeps_everything_but_drops_empty_epoch_entries() -> None:
    log = leader_log((0, (1, 2)))
    log.maybe_assign_epoch_start_offset(3, 2)  # a leader epoch with no record yet
    log.recover(lose_unflushed=False)
    assert log.record_ids() == [1, 2]
    assert [tuple(e) for e in log.leader_epoch_cache.entries] == [(0, 0)]


def test_flush_interval_messages_flushes_automatically() -> None:
    log = Log(TP, flush_interval_messages=2)
    log.append_as_leader((1,), 0)
    assert log.recovery_point == 0
    log.append_as_leader((2,), 0)
    assert log.recovery_point == 2


def test_offline_log_raises_storage_errors() -> None:
    log = leader_log((0, (1,)))
    log.offline = True
    with pytest.raises(KafkaStorageError):
        log.append_as_leader((2,), 0)
    with pytest.raises(KafkaStorageError):
        log.read(0, 10, FetchIsolation.LOG_END, False)
    with pytest.raises(KafkaStorageError):
        log.truncate_to(0)


def test_unexpected_append_offset_carries_the_first_and_last_offsets() -> None:
    """Kafka 2.6.3's Log.append throws UnexpectedAppendOffsetException(message, firstOffset,
    lastOffset) for a follower batch that starts below the LEO; Partition's recovery of an
    empty log reads both offsets from it."""
    log = Log(TP)
    log.append_as_follower((E(0, 1, 7), E(1, 1, 8)))
    with pytest.raises(UnexpectedAppendOffsetError) as raised:
        log.append_as_follower((E(1, 1, 8), E(2, 1, 9), E(3, 1, 10)))
    assert (raised.value.first_offset, raised.value.last_offset) == (1, 3)
    assert log.entries == [E(0, 1, 7), E(1, 1, 8)]
