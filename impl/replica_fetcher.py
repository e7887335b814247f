"""ReplicaFetcherThread and ReplicaFetcherManager: a follower broker's fetchers (R6-R9).

`ReplicaFetcherThread` is `fetcher.AbstractFetcherThread` over the local ReplicaManager, as
Kafka 2.6.3's ReplicaFetcherThread.scala is: it builds FETCH, OFFSETS_FOR_LEADER_EPOCH and
LIST_OFFSETS requests, appends fetched records as a follower and truncates the local log.
`ReplicaFetcherManager` (ReplicaFetcherManager.scala and AbstractFetcherManager.scala) keeps one
fetcher per source broker (num.replica.fetchers=1) and the set of failed partitions.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import TYPE_CHECKING

from kreplica.impl.clock import SimClock
from kreplica.impl.config import BrokerConfig
from kreplica.impl.errors import (
    IllegalStateError,
    NotLeaderOrFollowerError,
)
from kreplica.impl.log import LogAppendInfo, OffsetAndEpoch
from kreplica.impl.messages import (
    FetchPartitionData,
    FetchPartitionResponse,
    FetchRequest,
    IsolationLevel,
    ListOffsetsPartition,
    ListOffsetsRequest,
    OffsetForLeaderPartition,
    OffsetsForLeaderEpochRequest,
    TopicPartition,
)
from kreplica.impl.variants import Variant

if TYPE_CHECKING:
    from kreplica.impl.partition import Partition
    from kreplica.impl.replica_manager import ReplicaManager

from kreplica.impl.fetch_state import (
    EpochData,
    InitialFetchState,
    OffsetReset,
    OffsetTruncationState,
    PartitionFetchState,
)
from kreplica.impl.fetcher import AbstractFetcherThread


class ReplicaFetcherThread(AbstractFetcherThread):
    """A follower broker's fetcher towards one leader broker, over the local ReplicaManager."""

    def __init__(
        self,
        broker_id: int,
        source_broker: int,
        replica_manager: ReplicaManager,
        config: BrokerConfig,
        variant: Variant,
        clock: SimClock,
        failed_partitions: set[TopicPartition],
        next_correlation_id: Callable[[], int],
    ) -> None:
        super().__init__(
            f"ReplicaFetcherThread-0-{source_broker}",
            source_broker,
            clock,
            config.replica_fetch_backoff_ms,
            config.replica_socket_timeout_ms,
            failed_partitions,
        )
        self.broker_id = broker_id
        self.replica_manager = replica_manager
        self.config = config
        self.next_correlation_id = next_correlation_id
        # truncation=hw: pre-KIP-101, no OffsetsForLeaderEpoch, truncate to the HW (R6a);
        # kip101 differs on the leader's side only (Partition.last_offset_for_leader_epoch);
        # fetch-diverging (2.7 truncate-on-fetch) runs as kip279: same truncation points.
        self.is_offset_for_leader_epoch_supported = variant.truncation != "hw"
        self.send_leader_epoch = variant.fencing == "kip320"
        self.clamp_follower_hw = not variant.has_bug("hw-not-clamped")
        self._last_sent: dict[TopicPartition, FetchPartitionData] = {}
        """The PartitionData last sent per partition: an unchanged partition reuses the value."""

    def latest_epoch(self, tp: TopicPartition) -> int | None:
        """The latest epoch of the local log's epoch cache."""
        return self.replica_manager.local_log_or_exception(tp).latest_epoch()

    def log_end_offset(self, tp: TopicPartition) -> int:
        """The local LEO."""
        return self.replica_manager.local_log_or_exception(tp).log_end_offset

    def end_offset_for_epoch(self, tp: TopicPartition, epoch: int) -> OffsetAndEpoch | None:
        """The local R3 answer (Log.endOffsetForEpoch)."""
        log = self.replica_manager.local_log_or_exception(tp)
        return log.end_offset_for_epoch(epoch)

    def _hosted(self, tp: TopicPartition) -> Partition:
        """The Partition of tp (its log may sit on a failed dir: the log's own I/O then raises
        KafkaStorageError, as Kafka's does); NotLeaderOrFollowerError if none is hosted."""
        partition = self.replica_manager.partition(tp)
        if partition is None:
            raise NotLeaderOrFollowerError(f"no partition {tp}")
        return partition

    def truncate(self, tp: TopicPartition, state: OffsetTruncationState) -> None:
        """Truncate the local replica to state.offset (R6)."""
        self._hosted(tp).truncate_to(state.offset)

    def truncate_fully_and_start_at(self, tp: TopicPartition, offset: int) -> None:
        """Empty the local replica and restart it at offset (R9)."""
        self._hosted(tp).truncate_fully_and_start_at(offset)

    def process_partition_data(
        self, tp: TopicPartition, fetch_offset: int, data: FetchPartitionResponse
    ) -> LogAppendInfo:
        """Append (an empty batch too, as Kafka does: on a failed log dir the append raises
        KafkaStorageError), then HW := min(leader HW, LEO), log start := max(...) (R8)."""
        partition = self._hosted(tp)
        log = partition.local_log_or_exception()
        leo = log.log_end_offset
        if fetch_offset != leo:
            raise IllegalStateError(f"offset mismatch for {tp}: fetched {fetch_offset}, LEO {leo}")
        info = partition.append_records_to_follower(data.records)
        log.update_high_watermark(data.high_watermark, clamp=self.clamp_follower_hw)
        if data.log_start_offset > log.log_start_offset:
            log.maybe_increment_log_start_offset(data.log_start_offset)
        return info

    def build_fetch(
        self, ready: list[tuple[TopicPartition, PartitionFetchState]]
    ) -> tuple[FetchRequest | None, dict[TopicPartition, FetchPartitionData], set[TopicPartition]]:
        """FETCH with (offset, log start, replica.fetch.max.bytes, current epoch) per partition."""
        with_error: set[TopicPartition] = set()
        session: dict[TopicPartition, FetchPartitionData] = {}
        fetch_size = self.config.replica_fetch_max_bytes
        send_epoch = self.send_leader_epoch
        partitions = self.replica_manager.all_partitions
        last_sent = self._last_sent
        for tp, state in ready:
            partition = partitions.get(tp)
            log = partition.log if partition is not None else None
            if log is None or log.offline:
                with_error.add(tp)
                continue
            fetch_offset = state.fetch_offset
            log_start_offset = log.log_start_offset
            epoch = state.current_leader_epoch if send_epoch else None
            data = last_sent.get(tp)
            if (
                data is None
                or data.fetch_offset != fetch_offset
                or data.log_start_offset != log_start_offset
                or data.current_leader_epoch != epoch
            ):
                data = FetchPartitionData(tp, fetch_offset, log_start_offset, fetch_size, epoch)
                last_sent[tp] = data
            session[tp] = data
        if not session:
            return None, session, with_error
        request = FetchRequest(
            self.next_correlation_id(),
            self.broker_id,
            self.config.replica_fetch_wait_max_ms,
            self.config.replica_fetch_min_bytes,
            self.config.replica_fetch_response_max_bytes,
            IsolationLevel.READ_UNCOMMITTED,
            tuple(session.values()),
        )
        return request, session, with_error

    def build_offsets_for_leader_epoch(
        self, partitions: dict[TopicPartition, EpochData]
    ) -> OffsetsForLeaderEpochRequest:
        """OFFSETS_FOR_LEADER_EPOCH for the follower's latest epochs (with its current epoch)."""
        send_epoch = self.send_leader_epoch
        return OffsetsForLeaderEpochRequest(
            self.next_correlation_id(),
            self.broker_id,
            tuple(
                OffsetForLeaderPartition(
                    tp, data.current_leader_epoch if send_epoch else None, data.leader_epoch
                )
                for tp, data in partitions.items()
            ),
        )

    def build_list_offsets(self, reset: OffsetReset) -> ListOffsetsRequest:
        """LIST_OFFSETS (LATEST or EARLIEST) for a partition being reset (R9)."""
        epoch = reset.leader_epoch if self.send_leader_epoch else None
        return ListOffsetsRequest(
            self.next_correlation_id(),
            self.broker_id,
            IsolationLevel.READ_UNCOMMITTED,
            (ListOffsetsPartition(reset.tp, epoch, reset.phase),),
        )


class ReplicaFetcherManager:
    """One ReplicaFetcherThread per source broker (num.replica.fetchers=1) and the failed set."""

    def __init__(
        self,
        broker_id: int,
        replica_manager: ReplicaManager,
        config: BrokerConfig,
        variant: Variant,
        clock: SimClock,
        next_correlation_id: Callable[[], int],
    ) -> None:
        self.broker_id = broker_id
        self.replica_manager = replica_manager
        self.config = config
        self.variant = variant
        self.clock = clock
        self.next_correlation_id = next_correlation_id
        self.fetchers: dict[int, ReplicaFetcherThread] = {}
        self.failed_partitions: set[TopicPartition] = set()

    def add_fetcher_for_partitions(self, states: dict[TopicPartition, InitialFetchState]) -> None:
        """Hand each partition to the fetcher of its leader, creating the fetcher if needed."""
        by_leader: dict[int, dict[TopicPartition, InitialFetchState]] = {}
        for tp in sorted(states):
            by_leader.setdefault(states[tp].leader, {})[tp] = states[tp]
        for leader in sorted(by_leader):
            fetcher = self.fetchers.get(leader)
            if fetcher is None:
                fetcher = ReplicaFetcherThread(
                    self.broker_id,
                    leader,
                    self.replica_manager,
                    self.config,
                    self.variant,
                    self.clock,
                    self.failed_partitions,
                    self.next_correlation_id,
                )
                self.fetchers[leader] = fetcher
            fetcher.add_partitions(by_leader[leader])

    def remove_fetcher_for_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop fetching the partitions in every fetcher; forget them as failed."""
        tps = list(partitions)
        for leader in sorted(self.fetchers):
            self.fetchers[leader].remove_partitions(tps)
        for tp in tps:
            self.failed_partitions.discard(tp)

    def shutdown_idle_fetcher_threads(self) -> None:
        """Drop fetchers that track no partition (an in-flight answer to them is then ignored)."""
        for leader in sorted(self.fetchers):
            if self.fetchers[leader].partition_count() == 0:
                del self.fetchers[leader]

    def fetcher_for(self, source_broker: int) -> ReplicaFetcherThread | None:
        """The fetcher towards source_broker, if any."""
        return self.fetchers.get(source_broker)

    def process_disconnection(
        self, source_broker: int, answers_on_the_way: Collection[int]
    ) -> None:
        """The connection to source_broker broke: its fetcher, if any, fails its request unless
        the answer is on its way (NetworkClient.processDisconnection, R8)."""
        fetcher = self.fetchers.get(source_broker)
        if fetcher is not None:
            fetcher.process_disconnection(answers_on_the_way)
