"""Partition: R1 epoch validation, R5 becoming leader, R10 follower state, R11-R13 ISR and HW."""

from __future__ import annotations

import pytest
from impl_helpers import TP, FakeIsrChannel, make_partition, state

from kreplica.impl.errors import (
    FencedLeaderEpochError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetNotAvailableError,
    UnknownLeaderEpochError,
)
from kreplica.impl.log import FetchIsolation
from kreplica.impl.messages import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    UNDEFINED_EPOCH,
    Errors,
    IsolationLevel,
    LogEntry,
)
from kreplica.impl.partition import check_current_leader_epoch
from kreplica.impl.replica import Replica
from kreplica.impl.variants import Variant

# ------------------------------------------------------------------------------------- R1


def test_r1_epoch_check_absent_equal_older_newer() -> None:
    assert check_current_leader_epoch(None, 5) is Errors.NONE
    assert check_current_leader_epoch(5, 5) is Errors.NONE
    assert check_current_leader_epoch(4, 5) is Errors.FENCED_LEADER_EPOCH
    assert check_current_leader_epoch(6, 5) is Errors.UNKNOWN_LEADER_EPOCH


def test_r1_epoch_check_comes_before_the_leadership_check() -> None:
    h = make_partition(local=2)
    h.partition.make_follower(state(leader=1, epoch=5))
    with pytest.raises(FencedLeaderEpochError):
        h.partition.get_local_log(4, require_leader=True)
    with pytest.raises(UnknownLeaderEpochError):
        h.partition.get_local_log(6, require_leader=True)
    with pytest.raises(NotLeaderOrFollowerError):
        h.partition.get_local_log(5, require_leader=True)
    assert h.partition.get_local_log(5, require_leader=False) is h.log


def test_r1_last_offset_for_leader_epoch_carries_the_epoch_errors() -> None:
    h = make_partition(local=1)
    h.partition.make_leader(state(leader=1, epoch=3))
    fenced = h.partition.last_offset_for_leader_epoch(2, 3, fetch_only_from_leader=True)
    assert fenced.error is Errors.FENCED_LEADER_EPOCH and fenced.end_offset == -1
    unknown = h.partition.last_offset_for_leader_epoch(4, 3, fetch_only_from_leader=True)
    assert unknown.error is Errors.UNKNOWN_LEADER_EPOCH
    ok = h.partition.last_offset_for_leader_epoch(3, 3, fetch_only_from_leader=True)
    assert (ok.error, ok.leader_epoch, ok.end_offset) == (Errors.NONE, 3, 0)


# ------------------------------------------------------------------------------------- R5


def test_r5_make_leader_caches_epoch_at_leo_before_any_append() -> None:
    h = make_partition(local=1)
    h.log.append_as_follower((LogEntry(0, 1, 10), LogEntry(1, 1, 11)))
    assert h.partition.make_leader(state(leader=1, epoch=4)) is True
    assert h.partition.leader_epoch_start_offset == 2
    assert [tuple(e) for e in h.log.leader_epoch_cache.entries] == [(1, 0), (4, 2)]
    h.partition.append_records_to_leader((12, 13), required_acks=1)
    assert h.log.entries[2:] == [LogEntry(2, 4, 12), LogEntry(3, 4, 13)]


def test_r5_make_leader_same_leader_new_epoch_is_not_a_new_leader() -> None:
    h = make_partition(local=1)
    assert h.partition.make_leader(state(leader=1, epoch=1)) is True
    h.partition.append_records_to_leader((5,), required_acks=1)
    assert h.partition.make_leader(state(leader=1, epoch=2)) is False
    assert h.partition.leader_epoch_start_offset == 1
    assert [tuple(e) for e in h.log.leader_epoch_cache.entries] == [(1, 0), (2, 1)]


def test_make_follower_returns_false_only_for_same_leader_and_epoch() -> None:
    h = make_partition(local=2)
    assert h.partition.make_follower(state(leader=1, epoch=1)) is True
    assert h.partition.make_follower(state(leader=1, epoch=1)) is False
    assert h.partition.make_follower(state(leader=1, epoch=3)) is True  # KAFKA-7164 fix
    assert h.partition.make_follower(state(leader=3, epoch=4)) is True


def test_make_follower_seeded_bug_skips_same_leader_new_epoch() -> None:
    h = make_partition(local=2, variant=Variant(bugs=frozenset({"skip-same-leader-truncation"})))
    assert h.partition.make_follower(state(leader=1, epoch=1)) is True
    assert h.partition.make_follower(state(leader=1, epoch=3)) is False
    assert h.partition.leader_epoch == 3


# ------------------------------------------------------------------------------------ R10


def test_r10_fetch_at_leader_leo_is_caught_up_now() -> None:
    replica = Replica(2)
    replica.update_fetch_state(5, 0, 1_000, leader_end_offset=5)
    assert replica.last_caught_up_time_ms == 1_000
    assert (replica.log_end_offset, replica.log_start_offset) == (5, 0)


def test_r10_fetch_reaching_previous_leader_leo_is_caught_up_at_previous_fetch() -> None:
    replica = Replica(2)
    replica.update_fetch_state(3, 0, 1_000, leader_end_offset=4)  # behind: 3 < 4
    assert replica.last_caught_up_time_ms == 0
    replica.update_fetch_state(4, 0, 1_500, leader_end_offset=6)  # 4 >= previous leader LEO 4
    assert replica.last_caught_up_time_ms == 1_000
    replica.update_fetch_state(5, 0, 2_000, leader_end_offset=8)  # 5 < previous leader LEO 6
    assert replica.last_caught_up_time_ms == 1_000


def test_r10_make_leader_resets_follower_state() -> None:
    h = make_partition(local=1)
    h.log.append_as_follower((LogEntry(0, 0, 1),))
    h.partition.make_leader(state(leader=1, epoch=1, isr=(1, 2), replicas=(1, 2, 3)))
    in_isr, out_of_isr = h.partition.remote_replicas[2], h.partition.remote_replicas[3]
    assert in_isr.last_caught_up_time_ms == 1_000
    assert out_of_isr.last_caught_up_time_ms == 0
    # a new leader forgets remote LEOs (Kafka 2.6.3 then also resets the previous fetch)
    assert in_isr.log_end_offset == -1 and in_isr.log_start_offset == -1
    # same leader, new epoch: the previous fetch is (LESO, now) and LEOs are kept
    h.partition.update_follower_fetch_state(2, 1, 0, 1_010, 1)
    h.clock.advance(50)
    h.partition.make_leader(state(leader=1, epoch=2, isr=(1, 2), replicas=(1, 2, 3)))
    assert in_isr.log_end_offset == 1
    assert (in_isr.last_fetch_leader_log_end_offset, in_isr.last_fetch_time_ms) == (1, 1_050)


# ------------------------------------------------------------------------------------ R11


def leader_with_records(n: int, isr: tuple[int, ...] = (1,), epoch: int = 1):  # type: ignore[no-untyped-def]
    h = make_partition(local=1)
    h.partition.make_leader(state(leader=1, epoch=epoch, isr=isr, replicas=(1, 2, 3)))
    if n:
        h.partition.append_records_to_leader(tuple(range(100, 100 + n)), required_acks=1)
    return h


def test_r11_follower_at_hw_and_leso_joins_isr() -> None:
    h = leader_with_records(2)
    assert h.log.high_watermark == 2  # ISR {1}
    h.partition.update_follower_fetch_state(2, 2, 0, h.clock.now_ms, 2)
    assert h.partition.in_sync_replica_ids == {1, 2}
    assert h.isr_channel.requests[-1].new_isr == (1, 2)
    assert h.partition.zk_version == 1


def test_r11_follower_below_hw_stays_out() -> None:
    h = leader_with_records(2)
    h.partition.update_follower_fetch_state(2, 1, 0, h.clock.now_ms, 2)
    assert h.partition.in_sync_replica_ids == {1}
    assert h.isr_channel.requests == []


def test_r11_follower_below_leader_epoch_start_offset_stays_out() -> None:
    # the leader has 3 records from an older epoch and a stale HW of 1 (S6 / KAFKA-7128)
    h = make_partition(local=1)
    h.log.append_as_follower((LogEntry(0, 0, 1), LogEntry(1, 0, 2), LogEntry(2, 0, 3)))
    h.log.update_high_watermark(1)
    # ISR member 3 has not fetched yet, so the HW stays at 1
    h.partition.make_leader(state(leader=1, epoch=1, isr=(1, 3), replicas=(1, 2, 3)))
    assert h.partition.leader_epoch_start_offset == 3 and h.log.high_watermark == 1
    h.partition.update_follower_fetch_state(2, 1, 0, h.clock.now_ms, 3)  # LEO 1 >= HW 1
    assert h.partition.in_sync_replica_ids == {1, 3}


def test_r11_seeded_bug_no_leso_guard_admits_follower_below_leso() -> None:
    h = make_partition(local=1, variant=Variant(bugs=frozenset({"no-leso-guard"})))
    h.log.append_as_follower((LogEntry(0, 0, 1), LogEntry(1, 0, 2), LogEntry(2, 0, 3)))
    h.log.update_high_watermark(1)
    h.partition.make_leader(state(leader=1, epoch=1, isr=(1, 3), replicas=(1, 2, 3)))
    h.partition.update_follower_fetch_state(2, 1, 0, h.clock.now_ms, 3)
    assert h.partition.in_sync_replica_ids == {1, 2, 3}


def test_r11_failed_isr_write_leaves_isr_unchanged() -> None:
    h = make_partition(local=1, isr_channel=FakeIsrChannel(error=Errors.INVALID_UPDATE_VERSION))
    h.partition.make_leader(state(leader=1, epoch=1, isr=(1,), replicas=(1, 2)))
    h.partition.update_follower_fetch_state(2, 0, 0, h.clock.now_ms, 0)
    assert len(h.isr_channel.requests) == 1
    assert h.partition.in_sync_replica_ids == {1}
    assert h.partition.zk_version == 0


# ------------------------------------------------------------------------------------ R12


def test_r12_lagging_isr_follower_is_removed_after_lag() -> None:
    h = leader_with_records(0, isr=(1, 2, 3))
    h.partition.update_follower_fetch_state(2, 0, 0, h.clock.now_ms, 0)
    h.partition.update_follower_fetch_state(3, 0, 0, h.clock.now_ms, 0)
    h.partition.append_records_to_leader((1, 2), required_acks=1)
    h.partition.update_follower_fetch_state(2, 2, 0, h.clock.now_ms, 2)  # 2 caught up
    h.clock.advance(100)
    h.partition.maybe_shrink_isr()
    assert h.partition.in_sync_replica_ids == {1, 2, 3}  # not more than lag yet
    h.clock.advance(1)
    h.partition.maybe_shrink_isr()
    assert h.partition.in_sync_replica_ids == {1, 2}


def test_r12_follower_at_leader_leo_is_never_out_of_sync() -> None:
    h = leader_with_records(0, isr=(1, 2))
    h.partition.update_follower_fetch_state(2, 0, 0, h.clock.now_ms, 0)
    h.clock.advance(10_000)
    h.partition.maybe_shrink_isr()
    assert h.partition.in_sync_replica_ids == {1, 2}


def test_r12_shrink_recomputes_hw_and_completes_delayed_operations() -> None:
    h = leader_with_records(0, isr=(1, 2))
    h.partition.append_records_to_leader((1, 2), required_acks=-1)
    assert h.log.high_watermark == 0  # follower 2 has LEO -1 (unknown)
    h.clock.advance(101)
    h.partition.maybe_shrink_isr()
    assert h.partition.in_sync_replica_ids == {1}
    assert h.log.high_watermark == 2
    assert h.delayed.calls[-1] == ("all", TP)


def test_r12_failed_isr_write_leaves_isr_and_hw_unchanged() -> None:
    h = make_partition(local=1, isr_channel=FakeIsrChannel(error=Errors.FENCED_LEADER_EPOCH))
    h.partition.make_leader(state(leader=1, epoch=1, isr=(1, 2), replicas=(1, 2)))
    h.partition.append_records_to_leader((1,), required_acks=1)
    h.clock.advance(101)
    h.partition.maybe_shrink_isr()
    assert h.partition.in_sync_replica_ids == {1, 2}
    assert h.log.high_watermark == 0


# ------------------------------------------------------------------------------------ R13


def test_r13_hw_is_min_leo_of_isr_and_caught_up_replicas() -> None:
    h = leader_with_records(0, isr=(1, 2))
    h.partition.append_records_to_leader((1, 2, 3), required_acks=1)
    h.partition.update_follower_fetch_state(2, 2, 0, h.clock.now_ms, 3)
    assert h.log.high_watermark == 2
    # replica 3 is outside the ISR but caught up within lag (lastCaughtUp = 0 is too old)
    h.partition.update_follower_fetch_state(3, 1, 0, h.clock.now_ms, 3)
    assert h.log.high_watermark == 2
    h.partition.update_follower_fetch_state(2, 3, 0, h.clock.now_ms, 3)
    assert h.log.high_watermark == 3


def test_r13_caught_up_non_isr_replica_holds_back_the_hw() -> None:
    h = leader_with_records(0, isr=(1,))
    h.partition.update_follower_fetch_state(2, 0, 0, h.clock.now_ms, 0)  # caught up now
    h.isr_channel.error = Errors.FENCED_LEADER_EPOCH  # keep 2 out of the ISR
    h.partition.in_sync_replica_ids = frozenset({1})
    h.partition.append_records_to_leader((1, 2), required_acks=1)
    assert h.log.high_watermark == 0  # 2 caught up within lag, LEO 0
    h.clock.advance(101)
    h.partition.append_records_to_leader((3,), required_acks=1)
    assert h.log.high_watermark == 3


def test_r13_hw_never_moves_backwards() -> None:
    h = leader_with_records(0, isr=(1, 2))
    h.partition.append_records_to_leader((1, 2), required_acks=1)
    h.partition.update_follower_fetch_state(2, 2, 0, h.clock.now_ms, 2)
    assert h.log.high_watermark == 2
    h.partition.update_follower_fetch_state(2, 1, 0, h.clock.now_ms, 2)
    assert h.log.high_watermark == 2


def test_r13_seeded_bug_hw_from_non_isr_ignores_lagging_isr_member() -> None:
    h = make_partition(local=1, variant=Variant(bugs=frozenset({"hw-from-non-isr"})))
    h.partition.make_leader(state(leader=1, epoch=1, isr=(1, 2, 3), replicas=(1, 2, 3)))
    h.partition.append_records_to_leader((1, 2), required_acks=1)
    h.clock.advance(101)  # 3 never fetched: not caught up, yet still in the ISR
    h.partition.update_follower_fetch_state(2, 2, 0, h.clock.now_ms, 2)
    assert h.partition.in_sync_replica_ids == {1, 2, 3}
    assert h.log.high_watermark == 2  # the correct rule would wait for replica 3


def test_r13_alter_partition_mode_uses_the_maximal_isr() -> None:
    h = make_partition(local=1, isr_channel=FakeIsrChannel(pending=True))
    h.partition.make_leader(state(leader=1, epoch=1, isr=(1, 2), replicas=(1, 2)))
    h.partition.append_records_to_leader((1, 2), required_acks=1)
    h.clock.advance(101)
    h.partition.maybe_shrink_isr()  # proposes ISR {1}, not yet committed
    assert h.partition.pending_isr == {1}
    assert h.partition.in_sync_replica_ids == {1, 2}
    h.partition.maybe_increment_leader_hw(h.log)
    assert h.log.high_watermark == 0  # 2 still counts until the change commits


# ------------------------------------------------------------------------------------ R14


def test_r14_acks_all_needs_min_isr_before_appending() -> None:
    h = make_partition(local=1)
    h.partition.config = type(h.partition.config)(min_insync_replicas=2)
    h.partition.make_leader(state(leader=1, epoch=1, isr=(1,), replicas=(1, 2)))
    with pytest.raises(NotEnoughReplicasError):
        h.partition.append_records_to_leader((1,), required_acks=-1)
    assert h.log.entries == []
    h.partition.append_records_to_leader((1,), required_acks=1)  # acks=1 is not checked
    assert h.log.record_ids() == [1]


def test_r14_check_enough_replicas_reach_offset() -> None:
    h = leader_with_records(0, isr=(1, 2))
    h.partition.append_records_to_leader((1,), required_acks=-1)
    assert h.partition.check_enough_replicas_reach_offset(1) == (False, Errors.NONE)
    h.partition.update_follower_fetch_state(2, 1, 0, h.clock.now_ms, 1)
    assert h.partition.check_enough_replicas_reach_offset(1) == (True, Errors.NONE)
    h.partition.config = type(h.partition.config)(min_insync_replicas=3)
    assert h.partition.check_enough_replicas_reach_offset(1) == (
        True,
        Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    )
    h.partition.make_follower(state(leader=2, epoch=2))
    assert h.partition.check_enough_replicas_reach_offset(1) == (
        False,
        Errors.NOT_LEADER_OR_FOLLOWER,
    )


# -------------------------------------------------------------------------- reads / ListOffsets


def test_read_records_reports_offsets_seen_before_the_read() -> None:
    h = leader_with_records(3, isr=(1,))
    info = h.partition.read_records(1, 1, 10, FetchIsolation.LOG_END, True, False)
    assert [e.offset for e in info.records] == [1, 2]
    assert (info.high_watermark, info.log_end_offset, info.log_start_offset) == (3, 3, 0)


def test_list_offsets_latest_earliest_and_stale_hw_guard() -> None:
    h = make_partition(local=1)
    h.log.append_as_follower((LogEntry(0, 0, 1), LogEntry(1, 0, 2)))
    h.partition.make_leader(state(leader=1, epoch=1, isr=(1, 2), replicas=(1, 2)))
    assert h.partition.fetch_offset_for_timestamp(LATEST_TIMESTAMP, None, 1, True) == (2, 1)
    assert h.partition.fetch_offset_for_timestamp(EARLIEST_TIMESTAMP, None, 1, True) == (0, 1)
    with pytest.raises(OffsetNotAvailableError):  # a client, while HW 0 < LESO 2 (S13)
        h.partition.fetch_offset_for_timestamp(
            LATEST_TIMESTAMP, IsolationLevel.READ_UNCOMMITTED, 1, True
        )


def test_kip101_variant_answers_without_an_epoch() -> None:
    h = make_partition(local=1, variant=Variant(truncation="kip101"))
    h.log.append_as_follower((LogEntry(0, 1, 1), LogEntry(1, 1, 2)))
    h.partition.make_leader(state(leader=1, epoch=3, isr=(1,), replicas=(1, 2)))
    answer = h.partition.last_offset_for_leader_epoch(3, 2, True)
    assert (answer.leader_epoch, answer.end_offset) == (UNDEFINED_EPOCH, 2)
