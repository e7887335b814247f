"""DelayedProduce and DelayedFetch: the operations parked in the purgatories (R14, R16)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kreplica.impl.log import FETCH_HIGH_WATERMARK, FETCH_LOG_END, FetchIsolation
from kreplica.impl.messages import (
    NO_ERROR,
    RECORD_SIZE_BYTES,
    Errors,
    FetchPartitionData,
    FetchPartitionResponse,
    ProducePartitionResponse,
    TopicPartition,
)
from kreplica.impl.partition import Partition
from kreplica.impl.purgatory import DelayedOperation

if TYPE_CHECKING:
    from kreplica.impl.replica_manager import ReplicaManager


@dataclass(slots=True)
class ProducePartitionStatus:
    """A partition of a DelayedProduce: the offset the HW must reach and the answer so far."""

    required_offset: int
    response: ProducePartitionResponse
    acks_pending: bool = False
    error: Errors = Errors.NONE


class DelayedProduce(DelayedOperation):
    """An acks=-1 produce waiting until the HW covers every appended partition (R14)."""

    __slots__ = ("produce_status", "replica_manager", "response_callback")

    def __init__(
        self,
        delay_ms: int,
        produce_status: dict[TopicPartition, ProducePartitionStatus],
        replica_manager: ReplicaManager,
        response_callback: Callable[[dict[TopicPartition, ProducePartitionResponse]], None],
    ) -> None:
        super().__init__(delay_ms)
        self.produce_status = produce_status
        self.replica_manager = replica_manager
        self.response_callback = response_callback
        for status in produce_status.values():
            if status.response.error is NO_ERROR:
                # REQUEST_TIMED_OUT stands until enough replicas acknowledge
                status.acks_pending = True
                status.error = Errors.REQUEST_TIMED_OUT
            else:
                status.acks_pending = False
                status.error = status.response.error

    def try_complete(self) -> bool:
        """Done when each partition has HW >= required offset or an error (R14)."""
        pending = False
        get_partition = self.replica_manager.get_partition_or_error
        for tp, status in self.produce_status.items():
            if not status.acks_pending:
                continue
            partition = get_partition(tp)
            if isinstance(partition, Partition):
                has_enough, error = partition.check_enough_replicas_reach_offset(
                    status.required_offset
                )
            else:
                has_enough, error = False, partition
            if error is not NO_ERROR or has_enough:
                status.acks_pending = False
                status.error = error
            else:
                pending = True
        if pending:
            return False
        return self.force_complete()

    def on_complete(self) -> None:
        """Answer with each partition's status (REQUEST_TIMED_OUT where still pending)."""
        answers = {}
        for tp, status in self.produce_status.items():
            response = status.response
            if response.error is not status.error:
                response = ProducePartitionResponse(
                    tp, status.error, response.base_offset, response.log_start_offset
                )
            answers[tp] = response
        self.response_callback(answers)


@dataclass(slots=True)
class FetchMetadata:
    """The parameters of a parked fetch (FetchMetadata)."""

    min_bytes: int
    max_bytes: int
    fetch_only_from_leader: bool
    fetch_isolation: FetchIsolation
    is_from_follower: bool
    replica_id: int
    partitions: tuple[FetchPartitionData, ...]
    segments: dict[TopicPartition, int]
    """The base offset of the segment each fetch offset was read on, where the read found the
    log (FetchPartitionStatus.startOffsetMetadata.segmentBaseOffset)."""


class DelayedFetch(DelayedOperation):
    """A fetch waiting for fetch.min.bytes or a reason to answer early (R16)."""

    __slots__ = ("fetch_metadata", "replica_manager", "response_callback")

    def __init__(
        self,
        delay_ms: int,
        fetch_metadata: FetchMetadata,
        replica_manager: ReplicaManager,
        response_callback: Callable[[tuple[FetchPartitionResponse, ...]], None],
    ) -> None:
        super().__init__(delay_ms)
        self.fetch_metadata = fetch_metadata
        self.replica_manager = replica_manager
        self.response_callback = response_callback

    def try_complete(self) -> bool:
        """R16: complete on a lost leadership/replica, a fenced epoch, a fetch offset and an
        end offset on different segments, or min bytes (DelayedFetch.tryComplete)."""
        meta = self.fetch_metadata
        accumulated = 0
        isolation = meta.fetch_isolation
        only_leader = meta.fetch_only_from_leader
        to_log_end = isolation is FETCH_LOG_END
        to_high_watermark = isolation is FETCH_HIGH_WATERMARK
        partitions = self.replica_manager.all_partitions
        for fetch_info in meta.partitions:
            partition = partitions.get(fetch_info.tp)
            log = partition.log if partition is not None else None
            epoch = fetch_info.current_leader_epoch
            if (
                partition is None  # unknown partition / replica gone
                or log is None
                or log.offline  # offline log dir
                or (epoch is not None and epoch != partition.leader_epoch)  # fenced (R1)
                or (only_leader and partition.leader_replica_id != partition.local_broker_id)
            ):
                return self.force_complete()
            if to_log_end:
                end_offset = log.log_end_offset
            elif to_high_watermark:
                end_offset = log.high_watermark
            else:
                end_offset = log.last_stable_offset
            fetch_offset = fetch_info.fetch_offset
            if end_offset == fetch_offset:
                continue
            segment = meta.segments.get(fetch_info.tp, log.base_offset)
            if segment != log.base_offset:
                # the fetch offset and the end offset lie on different segments: the log
                # restarted below or above it (a truncated leader, a fetch fallen behind)
                return self.force_complete()
            if fetch_offset < end_offset:
                available = (end_offset - fetch_offset) * RECORD_SIZE_BYTES
                accumulated += min(available, fetch_info.max_bytes)
            # above the end offset on the same segment (a consumer ahead of a lagging HW, a
            # leader truncated within the segment): it waits, as Kafka 2.6.3's does
        if accumulated >= meta.min_bytes:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        """Re-read the log and answer with whatever is there now."""
        meta = self.fetch_metadata
        results = self.replica_manager.read_from_local_log(
            replica_id=meta.replica_id,
            fetch_only_from_leader=meta.fetch_only_from_leader,
            fetch_isolation=meta.fetch_isolation,
            fetch_max_bytes=meta.max_bytes,
            hard_max_bytes_limit=False,
            fetch_infos=meta.partitions,
        )
        self.response_callback(self.replica_manager.fetch_response_partitions(results))
