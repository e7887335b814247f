"""Shared builders for the kreplica.impl tests (a Partition with fake collaborators, etc.)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kreplica.impl.client import CLIENT_ID
from kreplica.impl.clock import SimClock
from kreplica.impl.cluster import Cluster
from kreplica.impl.config import BrokerConfig
from kreplica.impl.log import Log
from kreplica.impl.messages import (
    CONSUMER_REPLICA_ID,
    AlterPartitionItem,
    AlterPartitionItemResponse,
    Errors,
    FetchPartitionData,
    FetchRequest,
    IsolationLevel,
    LeaderAndIsrPartitionState,
    Message,
    ProducePartitionData,
    ProduceRequest,
    TopicPartition,
)
from kreplica.impl.partition import Partition
from kreplica.impl.variants import Variant

TP = TopicPartition("t", 0)


@dataclass
class FakeIsrChannel:
    """Answers ISR changes at once (accept or refuse) or never (pending, alter-partition)."""

    error: Errors = Errors.NONE
    pending: bool = False
    requests: list[AlterPartitionItem] = field(default_factory=list)

    def send_alter_partition(self, item: AlterPartitionItem) -> AlterPartitionItemResponse | None:
        self.requests.append(item)
        if self.pending:
            return None
        if self.error is not Errors.NONE:
            return AlterPartitionItemResponse(item.tp, self.error, 1, item.leader_epoch, (), 0)
        return AlterPartitionItemResponse(
            item.tp, Errors.NONE, 1, item.leader_epoch, item.new_isr, item.partition_epoch + 1
        )


@dataclass
class FakeDelayedOperations:
    """Records which purgatory checks a Partition asked for."""

    calls: list[tuple[str, TopicPartition]] = field(default_factory=list)

    def check_and_complete_all(self, tp: TopicPartition) -> None:
        self.calls.append(("all", tp))

    def check_and_complete_fetch(self, tp: TopicPartition) -> None:
        self.calls.append(("fetch", tp))


@dataclass
class PartitionHarness:
    """A standalone Partition with its clock, log and fakes."""

    partition: Partition
    clock: SimClock
    log: Log
    isr_channel: FakeIsrChannel
    delayed: FakeDelayedOperations


def make_partition(
    local: int = 1,
    variant: Variant | None = None,
    config: BrokerConfig | None = None,
    isr_channel: FakeIsrChannel | None = None,
) -> PartitionHarness:
    clock = SimClock(1_000)
    log = Log(TP)
    channel = isr_channel or FakeIsrChannel()
    delayed = FakeDelayedOperations()
    partition = Partition(
        TP,
        local,
        clock,
        config or BrokerConfig(replica_lag_time_max_ms=100),
        variant or Variant(),
        lambda tp: log,
        channel,
        delayed,
    )
    return PartitionHarness(partition, clock, log, channel, delayed)


def state(
    leader: int,
    epoch: int,
    isr: tuple[int, ...] = (1, 2, 3),
    replicas: tuple[int, ...] = (1, 2, 3),
    zk_version: int = 0,
) -> LeaderAndIsrPartitionState:
    return LeaderAndIsrPartitionState(TP, 1, leader, epoch, isr, zk_version, replicas)


def rpc(cluster: Cluster, broker: int, request: Message, src: int = CLIENT_ID) -> list[Message]:
    """Hand a request straight to a broker (as KafkaApis) and return the messages it sends."""
    incarnation = cluster.incarnation(src)
    return [out.payload for out in cluster.broker(broker).receive(src, incarnation, request)]


def snapshot(cluster: Cluster) -> tuple[object, ...]:
    """Everything a rejected request must leave unchanged."""
    rows: list[object] = []
    for b in cluster.broker_ids:
        rm = cluster.broker(b).replica_manager
        for tp in sorted(rm.all_partitions):
            p = rm.all_partitions[tp]
            log = p.log
            rows.append(
                (
                    b,
                    tp,
                    p.leader_replica_id,
                    p.leader_epoch,
                    tuple(sorted(p.in_sync_replica_ids)),
                    p.zk_version,
                    None
                    if log is None
                    else (
                        tuple(log.entries),
                        log.high_watermark,
                        log.log_start_offset,
                        log.recovery_point,
                        tuple(log.leader_epoch_cache.entries),
                    ),
                    tuple(
                        (r.broker_id, r.log_end_offset, r.last_caught_up_time_ms)
                        for r in p.remote_replicas.values()
                    ),
                )
            )
        rows.append(
            (
                b,
                sum(len(ops) for ops in rm.delayed_produce_purgatory.watchers.values()),
                sum(len(ops) for ops in rm.delayed_fetch_purgatory.watchers.values()),
            )
        )
    return tuple(rows)


def fetch_request(
    tp: TopicPartition,
    offset: int,
    replica_id: int = CONSUMER_REPLICA_ID,
    epoch: int | None = None,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 1_000,
    partition_max_bytes: int = 1_000,
    isolation: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
    client_metadata: bool = False,
    correlation_id: int = 77,
) -> FetchRequest:
    return FetchRequest(
        correlation_id,
        replica_id,
        max_wait_ms,
        min_bytes,
        max_bytes,
        isolation,
        (FetchPartitionData(tp, offset, 0, partition_max_bytes, epoch),),
        client_metadata,
    )


def produce_request(
    tp: TopicPartition, record_ids: tuple[int, ...], acks: int = -1, timeout_ms: int = 1_000
) -> ProduceRequest:
    return ProduceRequest(11, acks, timeout_ms, (ProducePartitionData(tp, record_ids),))
