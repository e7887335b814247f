"""Partition: one broker's replica of a partition, leader or follower (kafka.cluster.Partition)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from kreplica.impl.clock import SimClock
from kreplica.impl.config import BrokerConfig
from kreplica.impl.errors import (
    FencedLeaderEpochError,
    KafkaError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetNotAvailableError,
    UnexpectedAppendOffsetError,
    UnknownLeaderEpochError,
)
from kreplica.impl.log import FetchIsolation, Log, LogAppendInfo
from kreplica.impl.messages import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    NO_ERROR,
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    UNKNOWN_OFFSET,
    AlterPartitionItem,
    AlterPartitionItemResponse,
    EpochEndOffset,
    Errors,
    IsolationLevel,
    LeaderAndIsrPartitionState,
    LogEntry,
    TopicPartition,
)
from kreplica.impl.replica import Replica
from kreplica.impl.variants import Variant


class IsrChannel(Protocol):
    """Where a leader sends ISR changes: answered at once (isr=sync) or later (alter-partition)."""

    def send_alter_partition(self, item: AlterPartitionItem) -> AlterPartitionItemResponse | None:
        """Propose an ISR; return the controller's answer, or None if it will come later."""
        ...


class DelayedOperations(Protocol):
    """The purgatories of the partition's broker (Partition.DelayedOperations)."""

    def check_and_complete_all(self, tp: TopicPartition) -> None:
        """Retry delayed produce and fetch operations watching tp."""
        ...

    def check_and_complete_fetch(self, tp: TopicPartition) -> None:
        """Retry delayed fetch operations watching tp."""
        ...


@dataclass(slots=True)
class LogReadInfo:
    """Records read plus the HW / log start / LEO / LSO observed BEFORE the read (R15)."""

    records: tuple[LogEntry, ...]
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    last_stable_offset: int


def check_current_leader_epoch(requested: int | None, local: int) -> Errors:
    """R1: absent or equal passes; older -> FENCED_LEADER_EPOCH; newer -> UNKNOWN_LEADER_EPOCH."""
    if requested is None or requested == local:
        return Errors.NONE
    if requested < local:
        return Errors.FENCED_LEADER_EPOCH
    return Errors.UNKNOWN_LEADER_EPOCH


class Partition:
    """One partition on one broker, leader or follower: epoch, ISR and HW (R1, R5, R10-R14)."""

    def __init__(
        self,
        tp: TopicPartition,
        local_broker_id: int,
        clock: SimClock,
        config: BrokerConfig,
        variant: Variant,
        get_or_create_log: Callable[[TopicPartition], Log],
        isr_channel: IsrChannel,
        delayed_operations: DelayedOperations,
    ) -> None:
        self.tp = tp
        self.local_broker_id = local_broker_id
        self.clock = clock
        self.config = config
        self.variant = variant
        self._get_or_create_log = get_or_create_log
        self.isr_channel = isr_channel
        self.delayed_operations = delayed_operations
        self.log: Log | None = None
        self.leader_replica_id: int | None = None
        self.leader_epoch = -1
        self.leader_epoch_start_offset: int | None = None
        self.zk_version = 0
        self.controller_epoch = 0
        self.assignment: tuple[int, ...] = ()
        self.in_sync_replica_ids: frozenset[int] = frozenset()
        self.pending_isr: frozenset[int] | None = None
        self.remote_replicas: dict[int, Replica] = {}
        self._bug_hw_from_non_isr = variant.has_bug("hw-from-non-isr")
        self._bug_no_leso_guard = variant.has_bug("no-leso-guard")
        self._bug_skip_same_leader = variant.has_bug("skip-same-leader-truncation")
        self._bug_kafka_10706 = variant.has_bug("kafka-10706")

    # ------------------------------------------------------------------------- accessors

    @property
    def is_leader(self) -> bool:
        """True if this broker is the partition's leader."""
        return self.leader_replica_id == self.local_broker_id

    def leader_log_if_local(self) -> Log | None:
        """The local log if this broker is the leader, else None."""
        return self.log if self.leader_replica_id == self.local_broker_id else None

    def local_log_or_exception(self) -> Log:
        """The local log; NotLeaderOrFollowerError if there is none."""
        if self.log is None:
            raise NotLeaderOrFollowerError(f"no local log for {self.tp}")
        return self.log

    @property
    def maximal_isr(self) -> frozenset[int]:
        """ISR plus a proposed-but-uncommitted ISR (alter-partition mode); else the ISR."""
        pending = self.pending_isr
        if pending is None:
            return self.in_sync_replica_ids
        return self.in_sync_replica_ids | pending

    def create_log_if_not_exists(self) -> Log:
        """Attach the broker's (persistent) log for this partition, creating it if needed."""
        if self.log is None:
            self.log = self._get_or_create_log(self.tp)
        return self.log

    # ----------------------------------------------------------------------- epoch checks

    def get_local_log(self, current_leader_epoch: int | None, require_leader: bool) -> Log:
        """R1: the epoch check first, then leadership/local log; raises the matching error."""
        log = self.log
        if (
            (current_leader_epoch is None or current_leader_epoch == self.leader_epoch)
            and (not require_leader or self.leader_replica_id == self.local_broker_id)
            and log is not None
        ):
            return log
        error = check_current_leader_epoch(current_leader_epoch, self.leader_epoch)
        if error is Errors.FENCED_LEADER_EPOCH:
            raise FencedLeaderEpochError(
                f"epoch {current_leader_epoch} is older than {self.leader_epoch} on {self.tp}"
            )
        if error is Errors.UNKNOWN_LEADER_EPOCH:
            raise UnknownLeaderEpochError(
                f"epoch {current_leader_epoch} is newer than {self.leader_epoch} on {self.tp}"
            )
        if require_leader and not self.is_leader:
            raise NotLeaderOrFollowerError(f"broker {self.local_broker_id} leads not {self.tp}")
        raise NotLeaderOrFollowerError(f"no local log for {self.tp}")

    # ------------------------------------------------------------------ leadership changes

    def make_leader(self, state: LeaderAndIsrPartitionState) -> bool:
        """Lead in state.leader_epoch: cache (E, LEO), reset followers (R5, R10, R13)."""
        # Returns True if this broker was not the leader before.
        self.controller_epoch = state.controller_epoch
        self.update_assignment_and_isr(state.replicas, frozenset(state.isr))
        leader_log = self.create_log_if_not_exists()
        leader_epoch_start_offset = leader_log.log_end_offset
        self.leader_epoch = state.leader_epoch
        self.leader_epoch_start_offset = leader_epoch_start_offset
        self.zk_version = state.zk_version
        leader_log.maybe_assign_epoch_start_offset(state.leader_epoch, leader_epoch_start_offset)
        is_new_leader = not self.is_leader
        now = self.clock.now_ms
        for replica in self.remote_replicas.values():
            caught_up = now if replica.broker_id in self.in_sync_replica_ids else 0
            replica.reset_last_caught_up_time(leader_epoch_start_offset, now, caught_up)
        if is_new_leader:
            self.leader_replica_id = self.local_broker_id
            for replica in self.remote_replicas.values():
                replica.update_fetch_state(UNKNOWN_OFFSET, UNKNOWN_OFFSET, 0, UNKNOWN_OFFSET)
        if self.maybe_increment_leader_hw(leader_log):
            self.delayed_operations.check_and_complete_all(self.tp)
        return is_new_leader

    def make_follower(self, state: LeaderAndIsrPartitionState) -> bool:
        """Follow state.leader in its epoch; False (no truncation) iff leader and epoch stay."""
        # With the seeded bug skip-same-leader-truncation the become-follower steps are skipped
        # whenever the leader is unchanged, even if the epoch moved (KAFKA-7164).
        old_leader_epoch = self.leader_epoch
        self.controller_epoch = state.controller_epoch
        self.update_assignment_and_isr(state.replicas, frozenset())
        self.create_log_if_not_exists()
        self.leader_epoch = state.leader_epoch
        self.leader_epoch_start_offset = None
        self.zk_version = state.zk_version
        same_leader = self.leader_replica_id == state.leader
        if same_leader and (self._bug_skip_same_leader or self.leader_epoch == old_leader_epoch):
            return False
        self.leader_replica_id = state.leader
        return True

    def update_assignment_and_isr(self, assignment: tuple[int, ...], isr: frozenset[int]) -> None:
        """Store the replica assignment and ISR; keep Replica objects of retained followers."""
        remotes = [r for r in assignment if r != self.local_broker_id]
        replicas = self.remote_replicas
        self.remote_replicas = {r: replicas.get(r) or Replica(r) for r in remotes}
        self.assignment = tuple(assignment)
        self.in_sync_replica_ids = isr
        self.pending_isr = None

    # ------------------------------------------------------------------ follower tracking

    def update_follower_fetch_state(
        self,
        follower_id: int,
        follower_fetch_offset: int,
        follower_start_offset: int,
        follower_fetch_time_ms: int,
        leader_end_offset: int,
    ) -> bool:
        """Record a follower fetch (R10), maybe expand the ISR (R11), raise the HW (R13)."""
        # Returns False if follower_id is not an assigned replica.
        replica = self.remote_replicas.get(follower_id)
        if replica is None:
            return False
        prev_follower_end_offset = replica.log_end_offset
        replica.update_fetch_state(
            follower_fetch_offset, follower_start_offset, follower_fetch_time_ms, leader_end_offset
        )
        if follower_id not in self.in_sync_replica_ids:
            self.maybe_expand_isr(replica)
        if prev_follower_end_offset != replica.log_end_offset:
            leader_log = self.log if self.leader_replica_id == self.local_broker_id else None
            if leader_log is not None and self.maybe_increment_leader_hw(
                leader_log, follower_fetch_time_ms
            ):
                self.delayed_operations.check_and_complete_all(self.tp)
        return True

    def is_follower_in_sync(self, replica: Replica, high_watermark: int) -> bool:
        """R11: LEO >= leader HW and LEO >= leaderEpochStartOffset (guard off: no-leso-guard)."""
        leo = replica.log_end_offset
        if leo < high_watermark:
            return False
        leso = self.leader_epoch_start_offset
        if leso is None:
            return False
        return self._bug_no_leso_guard or leo >= leso

    def maybe_expand_isr(self, replica: Replica) -> None:
        """R11: add a caught-up follower; the new ISR is persisted first, unchanged on failure."""
        leader_log = self.leader_log_if_local()
        if leader_log is None or self.pending_isr is not None:
            return
        if replica.broker_id in self.in_sync_replica_ids:
            return
        if self.is_follower_in_sync(replica, leader_log.high_watermark):
            self._alter_isr(self.in_sync_replica_ids | {replica.broker_id})

    def get_out_of_sync_replicas(self, max_lag_ms: int) -> frozenset[int]:
        """R12: ISR followers whose LEO != leader LEO and not caught up for more than max_lag_ms."""
        log = self.log
        if log is None:
            return frozenset()
        leader_end_offset = log.log_end_offset
        now = self.clock.now_ms
        out: set[int] = set()
        for replica_id in self.in_sync_replica_ids:
            if replica_id == self.local_broker_id:
                continue
            replica = self.remote_replicas.get(replica_id)
            if replica is None:
                continue
            if (
                replica.log_end_offset != leader_end_offset
                and now - replica.last_caught_up_time_ms > max_lag_ms
            ):
                out.add(replica_id)
        return frozenset(out)

    def maybe_shrink_isr(self) -> None:
        """R12: drop out-of-sync followers (persisted first), then recompute the HW (R13)."""
        leader_log = self.leader_log_if_local()
        if leader_log is None or self.pending_isr is not None:
            return
        out_of_sync = self.get_out_of_sync_replicas(self.config.replica_lag_time_max_ms)
        if not out_of_sync:
            return
        new_isr = self.in_sync_replica_ids - out_of_sync
        if self._alter_isr(new_isr) and self.maybe_increment_leader_hw(leader_log):
            self.delayed_operations.check_and_complete_all(self.tp)

    def _alter_isr(self, new_isr: frozenset[int]) -> bool:
        """Persist new_isr through the ISR channel; True if it is now the committed ISR."""
        item = AlterPartitionItem(
            self.tp, self.leader_epoch, tuple(sorted(new_isr)), self.zk_version
        )
        response = self.isr_channel.send_alter_partition(item)
        if response is None:
            self.pending_isr = new_isr
            return False
        return self.handle_alter_partition_response(response)

    def handle_alter_partition_response(self, response: AlterPartitionItemResponse) -> bool:
        """Apply the controller's answer to an ISR change; True if the ISR was updated."""
        self.pending_isr = None
        if response.error is not Errors.NONE:
            return False
        if response.leader_epoch != self.leader_epoch or not self.is_leader:
            return False
        if response.partition_epoch <= self.zk_version:
            return False
        self.in_sync_replica_ids = frozenset(response.isr)
        self.zk_version = response.partition_epoch
        return True

    # ---------------------------------------------------------------------- high watermark

    def maybe_increment_leader_hw(self, leader_log: Log, cur_time_ms: int | None = None) -> bool:
        """R13: HW := min LEO over leader and ISR/caught-up followers; only moves forward."""
        now = self.clock.now_ms if cur_time_ms is None else cur_time_ms
        new_hw = leader_log.log_end_offset
        lag = self.config.replica_lag_time_max_ms
        isr = self.in_sync_replica_ids if self.pending_isr is None else self.maximal_isr
        bug = self._bug_hw_from_non_isr
        for replica in self.remote_replicas.values():
            leo = replica.log_end_offset
            if leo < new_hw and (
                now - replica.last_caught_up_time_ms <= lag
                or (not bug and replica.broker_id in isr)
            ):
                new_hw = leo
        if new_hw <= leader_log.high_watermark:
            return False
        return leader_log.maybe_increment_high_watermark(new_hw) is not None

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, Errors]:
        """R14: (done, error) for a DelayedProduce waiting for HW >= required_offset."""
        leader_log = self.leader_log_if_local()
        if leader_log is None:
            return False, Errors.NOT_LEADER_OR_FOLLOWER
        if leader_log.high_watermark >= required_offset:
            if self.config.min_insync_replicas <= len(self.in_sync_replica_ids):
                return True, NO_ERROR
            return True, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return False, NO_ERROR

    # ----------------------------------------------------------------------------- appends

    def append_records_to_leader(
        self, record_ids: tuple[int, ...], required_acks: int
    ) -> LogAppendInfo:
        """Append as leader stamping the leader epoch; acks=-1 needs |ISR| >= min.isr (R14)."""
        leader_log = self.leader_log_if_local()
        if leader_log is None:
            raise NotLeaderOrFollowerError(
                f"leader not local for {self.tp} on broker {self.local_broker_id}"
            )
        min_isr = self.config.min_insync_replicas
        if required_acks == -1 and len(self.in_sync_replica_ids) < min_isr:
            raise NotEnoughReplicasError(
                f"ISR {sorted(self.in_sync_replica_ids)} of {self.tp} is below min.isr {min_isr}"
            )
        info = leader_log.append_as_leader(record_ids, self.leader_epoch)
        if self.maybe_increment_leader_hw(leader_log):
            self.delayed_operations.check_and_complete_all(self.tp)
        else:
            self.delayed_operations.check_and_complete_fetch(self.tp)
        return info

    def append_records_to_follower(self, records: tuple[LogEntry, ...]) -> LogAppendInfo:
        """Append fetched records; an empty log may restart at the batch's first offset."""
        log = self.local_log_or_exception()
        try:
            return log.append_as_follower(records)
        except UnexpectedAppendOffsetError as e:
            leo = log.log_end_offset
            if leo == log.log_start_offset and e.first_offset < leo <= e.last_offset:
                log.truncate_fully_and_start_at(e.first_offset)
                return log.append_as_follower(records)
            raise

    # ------------------------------------------------------------------------------- reads

    def read_records(
        self,
        fetch_offset: int,
        current_leader_epoch: int | None,
        max_bytes: int,
        fetch_isolation: FetchIsolation,
        fetch_only_from_leader: bool,
        min_one_message: bool,
    ) -> LogReadInfo:
        """R1 then Log.read; the offsets returned are those seen before the read (R15)."""
        log = self.log
        if (
            log is None
            or (current_leader_epoch is not None and current_leader_epoch != self.leader_epoch)
            or (fetch_only_from_leader and self.leader_replica_id != self.local_broker_id)
        ):
            log = self.get_local_log(current_leader_epoch, fetch_only_from_leader)
        hw = log.high_watermark
        log_start = log.log_start_offset
        leo = log.log_end_offset
        records = log.read(fetch_offset, max_bytes, fetch_isolation, min_one_message)
        return LogReadInfo(records, hw, log_start, leo, hw)

    def fetch_offset_for_timestamp(
        self,
        timestamp: int,
        isolation_level: IsolationLevel | None,
        current_leader_epoch: int | None,
        fetch_only_from_leader: bool,
    ) -> tuple[int, int]:
        """ListOffsets: (offset, epoch) for LATEST / EARLIEST after R1; clients are HW-bounded."""
        # LATEST is the LEO for a replica (isolation None), the HW / LSO for a client; a client
        # gets OFFSET_NOT_AVAILABLE while the leader's HW is below its epoch start offset (S13).
        log = self.get_local_log(current_leader_epoch, fetch_only_from_leader)
        if timestamp == EARLIEST_TIMESTAMP:
            return log.log_start_offset, self.leader_epoch
        if timestamp != LATEST_TIMESTAMP:
            raise KafkaError(f"unsupported timestamp {timestamp}")
        if isolation_level is None:
            return log.log_end_offset, self.leader_epoch
        leso = self.leader_epoch_start_offset
        if leso is not None and leso > log.high_watermark:
            raise OffsetNotAvailableError(
                f"HW {log.high_watermark} of {self.tp} is below the epoch start offset {leso}"
            )
        if isolation_level is IsolationLevel.READ_COMMITTED:
            return log.last_stable_offset, self.leader_epoch
        return log.high_watermark, self.leader_epoch

    def last_offset_for_leader_epoch(
        self, current_leader_epoch: int | None, leader_epoch: int, fetch_only_from_leader: bool
    ) -> EpochEndOffset:
        """OffsetsForLeaderEpoch answer: R1 checks, then R3 (or the KIP-101 answer)."""
        try:
            log = self.get_local_log(current_leader_epoch, fetch_only_from_leader)
        except KafkaError as exc:
            return EpochEndOffset(self.tp, exc.error, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        if self.variant.truncation == "kip101":
            epoch, offset = log.leader_epoch_cache.end_offset_for_kip101(leader_epoch)
            return EpochEndOffset(self.tp, Errors.NONE, epoch, offset)
        found = log.end_offset_for_epoch(leader_epoch)
        if found is None:
            return EpochEndOffset(self.tp, Errors.NONE, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        return EpochEndOffset(self.tp, Errors.NONE, found.leader_epoch, found.offset)

    # --------------------------------------------------------------------------- truncation

    def truncate_to(self, offset: int) -> None:
        """Truncate the local log to offset (Partition.truncateTo, R6); at or past the LEO only
        the epoch cache is truncated, at the LEO (Kafka 2.6.3, R4), unless the seeded bug
        `kafka-10706` leaves it as Kafka 2.6.0 did."""
        self.local_log_or_exception().truncate_to(
            offset, truncate_cache_at_leo=not self._bug_kafka_10706
        )

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Empty the local log and restart it at new_offset."""
        self.local_log_or_exception().truncate_fully_and_start_at(new_offset)

    def __repr__(self) -> str:
        log = self.log
        return (
            f"Partition({self.tp}, broker={self.local_broker_id}, leader={self.leader_replica_id}, "
            f"epoch={self.leader_epoch}, isr={sorted(self.in_sync_replica_ids)}, "
            f"leo={log.log_end_offset if log else None}, hw={log.high_watermark if log else None})"
        )
