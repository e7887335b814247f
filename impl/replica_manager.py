"""ReplicaManager: the partitions of one broker, the produce/fetch paths and LeaderAndIsr.

Why one module over 600 lines: it mirrors Kafka 2.6.3's ReplicaManager.scala method by
method (docs/impl.md maps them), so that a reader holds the two side by side; split, that
comparison would run across files.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kreplica.impl.clock import SimClock
from kreplica.impl.config import BrokerConfig
from kreplica.impl.delayed_ops import (
    DelayedFetch,
    DelayedProduce,
    FetchMetadata,
    ProducePartitionStatus,
)
from kreplica.impl.errors import (
    KafkaError,
    KafkaStorageError,
    NotLeaderOrFollowerError,
    UnknownTopicOrPartitionError,
)
from kreplica.impl.fetch_state import InitialFetchState
from kreplica.impl.log import (
    FETCH_HIGH_WATERMARK,
    FETCH_LOG_END,
    FETCH_TXN_COMMITTED,
    FetchIsolation,
    Log,
)
from kreplica.impl.log_manager import LogManager
from kreplica.impl.messages import (
    INTERNAL_TOPICS,
    NO_ERROR,
    RECORD_SIZE_BYTES,
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEndOffset,
    Errors,
    FetchPartitionData,
    FetchPartitionResponse,
    IsolationLevel,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    ListOffsetsPartition,
    ListOffsetsPartitionResponse,
    LogEntry,
    OffsetForLeaderPartition,
    ProducePartitionResponse,
    TopicPartition,
)
from kreplica.impl.partition import IsrChannel, Partition
from kreplica.impl.purgatory import DelayedOperationPurgatory
from kreplica.impl.replica_fetcher import ReplicaFetcherManager
from kreplica.impl.variants import Variant

ProduceCallback = Callable[[dict[TopicPartition, ProducePartitionResponse]], None]
FetchCallback = Callable[[tuple[FetchPartitionResponse, ...]], None]

UNKNOWN_APPEND_INFO_ERRORS = frozenset(
    {
        Errors.UNKNOWN_TOPIC_OR_PARTITION,
        Errors.NOT_LEADER_OR_FOLLOWER,
        Errors.MESSAGE_TOO_LARGE,
        Errors.RECORD_LIST_TOO_LARGE,
        Errors.CORRUPT_MESSAGE,
        Errors.KAFKA_STORAGE_ERROR,
    }
)
"""The append errors Kafka answers without a log start offset (appendToLocalLog's first
case: LogAppendInfo.UnknownLogAppendInfo); any other failed append carries the leader's."""


@dataclass(slots=True)
class LogReadResult:
    """The outcome of reading one partition for a fetch (LogReadResult)."""

    tp: TopicPartition
    error: Errors
    records: tuple[LogEntry, ...]
    fetch_offset: int
    high_watermark: int
    last_stable_offset: int
    leader_log_start_offset: int
    leader_log_end_offset: int
    follower_log_start_offset: int
    fetch_time_ms: int

    def to_response(self) -> FetchPartitionResponse:
        """The FETCH answer for this partition."""
        return FetchPartitionResponse(
            self.tp,
            self.error,
            self.high_watermark,
            self.last_stable_offset,
            self.leader_log_start_offset,
            self.records,
        )


@dataclass(slots=True)
class LogAppendResult:
    """The outcome of appending to one partition as leader."""

    first_offset: int
    last_offset: int
    log_start_offset: int
    error: Errors


class ReplicaManager:
    """All partitions of one broker: append_records (R14), fetch_messages (R15), LeaderAndIsr."""

    def __init__(
        self,
        broker_id: int,
        clock: SimClock,
        config: BrokerConfig,
        variant: Variant,
        log_manager: LogManager,
        isr_channel: IsrChannel,
        known_partitions: Iterable[TopicPartition],
        next_correlation_id: Callable[[], int],
    ) -> None:
        self.broker_id = broker_id
        self.clock = clock
        self.config = config
        self.variant = variant
        self.log_manager = log_manager
        self.isr_channel = isr_channel
        self.known_partitions = frozenset(known_partitions)
        self.all_partitions: dict[TopicPartition, Partition] = {}
        self.controller_epoch = 0
        self.delayed_produce_purgatory: DelayedOperationPurgatory[DelayedProduce] = (
            DelayedOperationPurgatory("Produce", clock)
        )
        self.delayed_fetch_purgatory: DelayedOperationPurgatory[DelayedFetch] = (
            DelayedOperationPurgatory("Fetch", clock)
        )
        self.replica_fetcher_manager = ReplicaFetcherManager(
            broker_id, self, config, variant, clock, next_correlation_id
        )
        self._early_ack = variant.has_bug("early-ack")
        self._last_empty_answers: dict[TopicPartition, FetchPartitionResponse] = {}
        """The last FETCH answer without records per partition, reused while it stays equal."""
        self.hw_checkpoint_started = False
        """True once the highwatermark-checkpoint task has started (the first LeaderAndIsr)."""
        self.hw_checkpoint_next_ms: int | None = None
        """When the task runs next on the simulated clock (None: not started, or never)."""

    # -------------------------------------------------------------------------- lookups

    def partition(self, tp: TopicPartition) -> Partition | None:
        """The hosted Partition object of tp (online or offline), if any."""
        return self.all_partitions.get(tp)

    def get_partition_or_error(self, tp: TopicPartition) -> Partition | Errors:
        """The online Partition, or KAFKA_STORAGE_ERROR / NOT_LEADER_OR_FOLLOWER / UNKNOWN_..."""
        partition = self.all_partitions.get(tp)
        if partition is not None:
            log = partition.log
            if log is not None and log.offline:
                return Errors.KAFKA_STORAGE_ERROR
            return partition
        if tp in self.known_partitions:
            return Errors.NOT_LEADER_OR_FOLLOWER
        return Errors.UNKNOWN_TOPIC_OR_PARTITION

    def get_partition_or_exception(self, tp: TopicPartition) -> Partition:
        """Like get_partition_or_error but raising the matching KafkaError."""
        partition = self.all_partitions.get(tp)
        if partition is not None and (partition.log is None or not partition.log.offline):
            return partition
        result = self.get_partition_or_error(tp)
        if result is Errors.KAFKA_STORAGE_ERROR:
            raise KafkaStorageError(f"partition {tp} is offline on broker {self.broker_id}")
        if result is Errors.NOT_LEADER_OR_FOLLOWER:
            raise NotLeaderOrFollowerError(f"broker {self.broker_id} does not host {tp}")
        raise UnknownTopicOrPartitionError(f"unknown partition {tp}")

    def non_offline_partition(self, tp: TopicPartition) -> Partition | None:
        """The Partition of tp unless absent or offline."""
        result = self.get_partition_or_error(tp)
        return result if isinstance(result, Partition) else None

    def local_log_or_exception(self, tp: TopicPartition) -> Log:
        """The local log of tp, on a failed log dir too (the fetcher reads its epoch cache and
        LEO there, as the spec's does); NotLeaderOrFollowerError if there is none."""
        partition = self.all_partitions.get(tp)
        if partition is None or partition.log is None:
            raise NotLeaderOrFollowerError(f"no local log of {tp} on broker {self.broker_id}")
        return partition.log

    def leader_partitions(self) -> list[Partition]:
        """Partitions this broker leads, in partition order."""
        return [p for tp, p in sorted(self.all_partitions.items()) if p.is_leader]

    # ----------------------------------------------------- DelayedOperations (Partition)

    def check_and_complete_all(self, tp: TopicPartition) -> None:
        """Retry delayed produce and fetch operations watching tp (after a HW change)."""
        self.delayed_produce_purgatory.check_and_complete(tp)
        self.delayed_fetch_purgatory.check_and_complete(tp)

    def check_and_complete_fetch(self, tp: TopicPartition) -> None:
        """Retry delayed fetch operations watching tp (after a LEO change)."""
        self.delayed_fetch_purgatory.check_and_complete(tp)

    def complete_delayed_fetch_or_produce_requests(self, tp: TopicPartition) -> None:
        """Retry both purgatories for tp (after a leadership change)."""
        self.delayed_produce_purgatory.check_and_complete(tp)
        self.delayed_fetch_purgatory.check_and_complete(tp)

    def tick(self) -> None:
        """Expire delayed operations whose timeout has passed on the simulated clock (R17)."""
        self.delayed_produce_purgatory.advance_clock()
        self.delayed_fetch_purgatory.advance_clock()

    # ----------------------------------------------------------- high watermark checkpoint

    def start_high_watermark_checkpoint_thread(self) -> None:
        """Start the highwatermark-checkpoint task after the first LeaderAndIsr, once every
        partition it names exists: due at once, then every checkpoint interval (R13)."""
        if not self.hw_checkpoint_started:
            self.hw_checkpoint_started = True
            if self.config.replica_high_watermark_checkpoint_interval_ms is not None:
                self.hw_checkpoint_next_ms = self.clock.now_ms

    def maybe_checkpoint_high_watermarks(self) -> bool:
        """Run the checkpoint task if the simulated clock has reached its time; the periods it
        missed run as one, since they would write the same HWs (R13)."""
        due = self.hw_checkpoint_next_ms
        now = self.clock.now_ms
        if due is None or now < due:
            return False
        self.checkpoint_high_watermarks()
        interval = self.config.replica_high_watermark_checkpoint_interval_ms
        assert interval is not None  # else the task has no time to run at
        self.hw_checkpoint_next_ms = due + ((now - due) // interval + 1) * interval
        return True

    def checkpoint_high_watermarks(self) -> None:
        """Write the HW of every partition with an online local log to the log dir's
        replication-offset-checkpoint file; none such, no write (R13)."""
        high_watermarks = {
            tp: p.log.high_watermark
            for tp, p in sorted(self.all_partitions.items())
            if p.log is not None and not p.log.offline
        }
        if high_watermarks:
            self.log_manager.write_hw_checkpoint(high_watermarks)

    # ---------------------------------------------------------------------------- produce

    def append_records(
        self,
        timeout_ms: int,
        required_acks: int,
        internal_topics_allowed: bool,
        entries_per_partition: dict[TopicPartition, tuple[int, ...]],
        response_callback: ProduceCallback,
    ) -> None:
        """R14: validate acks, append as leader, answer at once or park a DelayedProduce."""
        if required_acks not in (-1, 0, 1):
            response_callback(
                {
                    tp: ProducePartitionResponse(tp, Errors.INVALID_REQUIRED_ACKS, -1, -1)
                    for tp in entries_per_partition
                }
            )
            return
        results = self.append_to_local_log(
            internal_topics_allowed, entries_per_partition, required_acks
        )
        produce_status = {
            tp: ProducePartitionStatus(
                result.last_offset + 1,
                ProducePartitionResponse(
                    tp, result.error, result.first_offset, result.log_start_offset
                ),
            )
            for tp, result in results.items()
        }
        if self._delayed_produce_request_required(required_acks, entries_per_partition, results):
            operation = DelayedProduce(timeout_ms, produce_status, self, response_callback)
            self.delayed_produce_purgatory.try_complete_else_watch(
                operation, list(entries_per_partition)
            )
        else:
            response_callback({tp: status.response for tp, status in produce_status.items()})

    def _delayed_produce_request_required(
        self,
        required_acks: int,
        entries: dict[TopicPartition, tuple[int, ...]],
        results: dict[TopicPartition, LogAppendResult],
    ) -> bool:
        if required_acks != -1 or not entries or self._early_ack:
            return False
        failed = sum(1 for r in results.values() if r.error is not NO_ERROR)
        return failed < len(entries)

    def append_to_local_log(
        self,
        internal_topics_allowed: bool,
        entries_per_partition: dict[TopicPartition, tuple[int, ...]],
        required_acks: int,
    ) -> dict[TopicPartition, LogAppendResult]:
        """Append each partition's records as leader; a failure becomes that partition's error."""
        results: dict[TopicPartition, LogAppendResult] = {}
        for tp, record_ids in entries_per_partition.items():
            if tp.topic in INTERNAL_TOPICS and not internal_topics_allowed:
                results[tp] = LogAppendResult(-1, -1, -1, Errors.INVALID_TOPIC_EXCEPTION)
                continue
            try:
                partition = self.get_partition_or_exception(tp)
                info = partition.append_records_to_leader(record_ids, required_acks)
                results[tp] = LogAppendResult(
                    info.first_offset, info.last_offset, info.log_start_offset, NO_ERROR
                )
            except KafkaError as exc:
                log_start = self._failed_append_log_start(tp, exc.error)
                results[tp] = LogAppendResult(-1, -1, log_start, exc.error)
        return results

    def _failed_append_log_start(self, tp: TopicPartition, error: Errors) -> int:
        """The log start offset a failed append answers (R14): -1 for the errors Kafka answers
        with UnknownLogAppendInfo, else the leader's log start (-1 without a leader log)."""
        if error in UNKNOWN_APPEND_INFO_ERRORS:
            return -1
        partition = self.all_partitions.get(tp)
        leader_log = partition.leader_log_if_local() if partition is not None else None
        return leader_log.log_start_offset if leader_log is not None else -1

    # ------------------------------------------------------------------------------ fetch

    def fetch_messages(
        self,
        timeout_ms: int,
        replica_id: int,
        fetch_min_bytes: int,
        fetch_max_bytes: int,
        fetch_infos: tuple[FetchPartitionData, ...],
        isolation_level: IsolationLevel,
        has_client_metadata: bool,
        response_callback: FetchCallback,
    ) -> None:
        """R15: read up to the isolation bound, record follower state, answer or park a fetch."""
        is_from_follower = replica_id >= 0
        if is_from_follower:
            fetch_isolation = FETCH_LOG_END
        elif isolation_level is IsolationLevel.READ_COMMITTED:
            fetch_isolation = FETCH_TXN_COMMITTED
        else:
            fetch_isolation = FETCH_HIGH_WATERMARK
        fetch_only_from_leader = is_from_follower or not has_client_metadata
        results = self.read_from_local_log(
            replica_id, fetch_only_from_leader, fetch_isolation, fetch_max_bytes, False, fetch_infos
        )
        if is_from_follower:
            results = self.update_follower_fetch_state(replica_id, results)
        bytes_readable = 0
        error_reading = False
        for result in results:
            if result.error is not NO_ERROR:
                error_reading = True
            bytes_readable += len(result.records) * RECORD_SIZE_BYTES
        if timeout_ms <= 0 or not fetch_infos or bytes_readable >= fetch_min_bytes or error_reading:
            response_callback(self.fetch_response_partitions(results))
            return
        metadata = FetchMetadata(
            fetch_min_bytes,
            fetch_max_bytes,
            fetch_only_from_leader,
            fetch_isolation,
            is_from_follower,
            replica_id,
            fetch_infos,
            self._segments(fetch_infos),
        )
        operation = DelayedFetch(timeout_ms, metadata, self, response_callback)
        self.delayed_fetch_purgatory.try_complete_else_watch(
            operation, [info.tp for info in fetch_infos]
        )

    def _segments(self, fetch_infos: tuple[FetchPartitionData, ...]) -> dict[TopicPartition, int]:
        """The base offset of the segment each fetch offset was read on (one segment per log:
        its base offset), for the partitions whose log is here."""
        segments = {}
        for info in fetch_infos:
            partition = self.all_partitions.get(info.tp)
            if partition is not None and partition.log is not None:
                segments[info.tp] = partition.log.base_offset
        return segments

    def fetch_response_partitions(
        self, results: list[LogReadResult]
    ) -> tuple[FetchPartitionResponse, ...]:
        """The FETCH answer of each read; an empty one equal to the last reuses that value."""
        answers = []
        last_empty = self._last_empty_answers
        for result in results:
            if result.records:
                answers.append(result.to_response())
                continue
            answer = last_empty.get(result.tp)
            if (
                answer is None
                or answer.error is not result.error
                or answer.high_watermark != result.high_watermark
                or answer.last_stable_offset != result.last_stable_offset
                or answer.log_start_offset != result.leader_log_start_offset
            ):
                answer = last_empty[result.tp] = result.to_response()
            answers.append(answer)
        return tuple(answers)

    def read_from_local_log(
        self,
        replica_id: int,
        fetch_only_from_leader: bool,
        fetch_isolation: FetchIsolation,
        fetch_max_bytes: int,
        hard_max_bytes_limit: bool,
        fetch_infos: tuple[FetchPartitionData, ...],
    ) -> list[LogReadResult]:
        """Read each partition in order within the response byte limit (readFromLocalLog)."""
        limit_bytes = fetch_max_bytes
        min_one_message = not hard_max_bytes_limit
        now = self.clock.now_ms
        results: list[LogReadResult] = []
        partitions = self.all_partitions
        for info in fetch_infos:
            tp = info.tp
            try:
                partition = partitions.get(tp)
                if partition is None or (partition.log is not None and partition.log.offline):
                    partition = self.get_partition_or_exception(tp)  # raises the right error
                read = partition.read_records(
                    info.fetch_offset,
                    info.current_leader_epoch,
                    info.max_bytes if info.max_bytes < limit_bytes else limit_bytes,
                    fetch_isolation,
                    fetch_only_from_leader,
                    min_one_message,
                )
            except KafkaError as exc:
                results.append(
                    LogReadResult(tp, exc.error, (), info.fetch_offset, -1, -1, -1, -1, -1, -1)
                )
                continue
            records = read.records
            results.append(
                LogReadResult(
                    tp,
                    NO_ERROR,
                    records,
                    info.fetch_offset,
                    read.high_watermark,
                    read.last_stable_offset,
                    read.log_start_offset,
                    read.log_end_offset,
                    info.log_start_offset,
                    now,
                )
            )
            if records:
                min_one_message = False
                limit_bytes = max(0, limit_bytes - len(records) * RECORD_SIZE_BYTES)
        return results

    def update_follower_fetch_state(
        self, follower_id: int, results: list[LogReadResult]
    ) -> list[LogReadResult]:
        """R10/R15: record the follower's fetch offset as its LEO for error-free reads only."""
        partitions = self.all_partitions
        for result in results:
            if result.error is not NO_ERROR:
                continue
            partition = partitions.get(result.tp)
            if partition is None or (partition.log is not None and partition.log.offline):
                continue
            if not partition.update_follower_fetch_state(
                follower_id,
                result.fetch_offset,
                result.follower_log_start_offset,
                result.fetch_time_ms,
                result.leader_log_end_offset,
            ):
                result.records = ()
        return results

    # -------------------------------------------------------- OffsetsForLeaderEpoch / ListOffsets

    def last_offset_for_leader_epoch(
        self, partitions: tuple[OffsetForLeaderPartition, ...]
    ) -> tuple[EpochEndOffset, ...]:
        """OffsetsForLeaderEpoch: R1 then R3 on the leader, per partition."""
        answers = []
        for item in partitions:
            partition = self.get_partition_or_error(item.tp)
            if isinstance(partition, Partition):
                answers.append(
                    partition.last_offset_for_leader_epoch(
                        item.current_leader_epoch, item.leader_epoch, fetch_only_from_leader=True
                    )
                )
            else:
                answers.append(
                    EpochEndOffset(item.tp, partition, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
                )
        return tuple(answers)

    def list_offsets(
        self,
        replica_id: int,
        isolation_level: IsolationLevel,
        partitions: tuple[ListOffsetsPartition, ...],
    ) -> tuple[ListOffsetsPartitionResponse, ...]:
        """ListOffsets: LATEST / EARLIEST from the leader (clients get HW-bounded answers)."""
        isolation = isolation_level if replica_id < 0 else None
        answers = []
        for item in partitions:
            try:
                partition = self.get_partition_or_exception(item.tp)
                offset, epoch = partition.fetch_offset_for_timestamp(
                    item.timestamp, isolation, item.current_leader_epoch, True
                )
                answers.append(ListOffsetsPartitionResponse(item.tp, Errors.NONE, offset, epoch))
            except KafkaError as exc:
                answers.append(ListOffsetsPartitionResponse(item.tp, exc.error, -1, -1))
        return tuple(answers)

    # ------------------------------------------------------------------------ LeaderAndIsr

    def become_leader_or_follower(self, request: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
        """Apply the controller's decisions; stale epochs are refused per partition."""
        if request.controller_epoch < self.controller_epoch:
            return LeaderAndIsrResponse(
                request.correlation_id,
                Errors.STALE_CONTROLLER_EPOCH,
                tuple((s.tp, Errors.STALE_CONTROLLER_EPOCH) for s in request.partition_states),
            )
        self.controller_epoch = request.controller_epoch
        response_map: dict[TopicPartition, Errors] = {}
        accepted: list[tuple[Partition, LeaderAndIsrPartitionState]] = []
        for state in request.partition_states:
            tp = state.tp
            partition = self.all_partitions.get(tp)
            if partition is None:
                log = self.log_manager.get_log(tp)
                if log is not None and log.offline:
                    response_map[tp] = Errors.KAFKA_STORAGE_ERROR
                    continue
                partition = Partition(
                    tp,
                    self.broker_id,
                    self.clock,
                    self.config,
                    self.variant,
                    self.log_manager.get_or_create_log,
                    self.isr_channel,
                    self,
                )
                self.all_partitions[tp] = partition
            elif partition.log is not None and partition.log.offline:
                response_map[tp] = Errors.KAFKA_STORAGE_ERROR
                continue
            if state.leader_epoch > partition.leader_epoch:
                if self.broker_id in state.replicas:
                    accepted.append((partition, state))
                else:
                    response_map[tp] = Errors.UNKNOWN_TOPIC_OR_PARTITION
            else:
                response_map[tp] = Errors.STALE_CONTROLLER_EPOCH
        to_lead = [(p, s) for p, s in accepted if s.leader == self.broker_id]
        to_follow = [(p, s) for p, s in accepted if s.leader != self.broker_id]
        if to_lead:
            self.make_leaders(to_lead, response_map)
        if to_follow:
            self.make_followers(to_follow, set(request.live_leaders), response_map)
        self.replica_fetcher_manager.shutdown_idle_fetcher_threads()
        self.start_high_watermark_checkpoint_thread()
        return LeaderAndIsrResponse(
            request.correlation_id,
            Errors.NONE,
            tuple((s.tp, response_map.get(s.tp, Errors.NONE)) for s in request.partition_states),
        )

    def make_leaders(
        self,
        states: list[tuple[Partition, LeaderAndIsrPartitionState]],
        response_map: dict[TopicPartition, Errors],
    ) -> None:
        """Stop fetching these partitions and make this broker their leader (R5)."""
        self.replica_fetcher_manager.remove_fetcher_for_partitions(p.tp for p, _ in states)
        for partition, state in states:
            response_map[partition.tp] = Errors.NONE
            try:
                partition.make_leader(state)
            except KafkaStorageError:
                response_map[partition.tp] = Errors.KAFKA_STORAGE_ERROR

    def make_followers(
        self,
        states: list[tuple[Partition, LeaderAndIsrPartitionState]],
        live_leaders: set[int],
        response_map: dict[TopicPartition, Errors],
    ) -> None:
        """Follow the new leaders: reset fetchers (truncation starts there) for changed ones."""
        to_make_follower: list[Partition] = []
        for partition, state in states:
            response_map[partition.tp] = Errors.NONE
            try:
                if state.leader in live_leaders:
                    if partition.make_follower(state):
                        to_make_follower.append(partition)
                else:
                    partition.create_log_if_not_exists()
            except KafkaStorageError:
                response_map[partition.tp] = Errors.KAFKA_STORAGE_ERROR
        self.replica_fetcher_manager.remove_fetcher_for_partitions(p.tp for p in to_make_follower)
        for partition in to_make_follower:
            self.complete_delayed_fetch_or_produce_requests(partition.tp)
        initial: dict[TopicPartition, InitialFetchState] = {}
        for partition in to_make_follower:
            leader = partition.leader_replica_id
            assert leader is not None and partition.log is not None
            initial[partition.tp] = InitialFetchState(
                leader, partition.leader_epoch, partition.log.high_watermark
            )
        self.replica_fetcher_manager.add_fetcher_for_partitions(initial)

    # --------------------------------------------------------------------- ISR expiration

    def maybe_shrink_isr(self) -> None:
        """Run maybe_shrink_isr on every online partition (the isr-expiration task, R12)."""
        for tp in sorted(self.all_partitions):
            partition = self.non_offline_partition(tp)
            if partition is not None:
                partition.maybe_shrink_isr()
