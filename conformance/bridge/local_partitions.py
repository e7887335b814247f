"""The fuzzer's cluster: partition t-0 on every broker, which the spec models, and beside it
one partition per broker that lives on that broker alone, which it does not.

A consumer's FETCH may name two partitions; Kafka reads them in the request's order and the
records of the first count against the response's byte limit (fetch.max.bytes) of the next
(ReplicaManager.readFromLocalLog). With t-0 alone no FETCH ever had two partitions, so that
sharing went untested. Each broker b therefore also leads `local-(b-1)`, a partition of
replication factor 1 holding `LOCAL_RECORDS` records from the start: a consumer's FETCH to b
may read it before or after t-0 (`ConsumerFetch.other`). No follower fetches it, so the
replication the spec judges is t-0's alone; `client_answers` judges a local partition's part
of an answer by that broker's own log (`local_read`).
"""

from __future__ import annotations

from dataclasses import dataclass

from kreplica.impl.client import CLIENT_ID
from kreplica.impl.cluster import Cluster
from kreplica.impl.config import BrokerConfig
from kreplica.impl.messages import Errors, TopicPartition
from kreplica.impl.steps import Deliver, Flush, Produce
from kreplica.impl.variants import Variant

SPEC_TP = TopicPartition("t", 0)
"""The partition the spec models, on replicas 1..n."""

LOCAL_TOPIC = "local"
"""The topic of the partitions that live on one broker each."""

LOCAL_RECORDS = 3
"""Records in each local partition from the start, in the fuzzer's cluster."""

LOCAL_RECORD_BASE = 1_000_000
"""Record ids of the local partitions start above this, apart from t-0's (1, 2, ...)."""


def local_partition(broker: int) -> TopicPartition:
    """The partition that lives on `broker` alone."""
    return TopicPartition(LOCAL_TOPIC, broker - 1)


def is_local(tp: TopicPartition) -> bool:
    """True for a partition that lives on one broker alone."""
    return tp.topic == LOCAL_TOPIC


def spec_cluster(
    replicas: int, variant: Variant, config: BrokerConfig, local_records: int = 0
) -> Cluster:
    """A fresh cluster: t-0 on brokers 1..replicas, and, with `local_records` > 0, each
    broker's local partition holding that many records, written by acks=1 produces and
    flushed before the run starts (so the client's and the controller's requests so far
    are answered, and the cluster is as quiet as one with t-0 alone)."""
    brokers = tuple(range(1, replicas + 1))
    assignment = {SPEC_TP: brokers}
    if local_records > 0:
        assignment |= {local_partition(b): (b,) for b in brokers}
    cluster = Cluster(brokers, variant=variant, config=config, assignment=assignment)
    if local_records > 0:
        _fill(cluster, local_records)
    return cluster


def _fill(cluster: Cluster, records: int) -> None:
    """Write `records` records into each broker's local partition and flush them."""
    for b in cluster.broker_ids:
        base = LOCAL_RECORD_BASE + 1_000 * b
        ids = tuple(range(base + 1, base + records + 1))
        for record in ids:  # one record per batch: message.max.bytes may allow no more
            cluster.apply(Produce(local_partition(b), (record,), 1, b))
            cluster.apply(Deliver(CLIENT_ID, b))
            cluster.apply(Deliver(b, CLIENT_ID))
        cluster.apply(Flush(b))
    cluster.record_id = 0  # t-0's records are numbered from 1, as the spec's
    cluster.history.clear()


@dataclass(frozen=True)
class PartitionRead:
    """What a consumer's read of one partition at a broker gives: the error, and on
    success the HW, the log start offset and the records (offset, epoch, record id) readable
    from the fetch offset, below the HW."""

    error: Errors
    high_watermark: int = -1
    log_start: int = -1
    readable: tuple[tuple[int, int, int], ...] = ()


def local_read(cluster: Cluster, broker: int, tp: TopicPartition, offset: int) -> PartitionRead:
    """The read of local partition `tp` at `broker` as Kafka 2.6.3's readFromLocalLog makes it
    for a consumer, from the broker's state: KAFKA_STORAGE_ERROR on a failed log dir,
    NOT_LEADER_OR_FOLLOWER while it does not lead, OFFSET_OUT_OF_RANGE outside [log start,
    LEO]."""
    partition = cluster.partition(broker, tp)
    log = None if partition is None else partition.log
    if log is not None and log.offline:
        return PartitionRead(Errors.KAFKA_STORAGE_ERROR)
    if partition is None or log is None or not partition.is_leader:
        return PartitionRead(Errors.NOT_LEADER_OR_FOLLOWER)
    if not log.log_start_offset <= offset <= log.log_end_offset:
        return PartitionRead(Errors.OFFSET_OUT_OF_RANGE)
    hw = log.high_watermark
    readable = tuple(
        (e.offset, e.epoch, e.record_id) for e in log.entries if offset <= e.offset < hw
    )
    return PartitionRead(Errors.NONE, hw, log.log_start_offset, readable)
