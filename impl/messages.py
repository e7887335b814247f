"""Every request, response and error code exchanged in kreplica, as immutable values.

One module holds the whole wire vocabulary (DESIGN.md, "sans-IO"): FETCH, PRODUCE,
OFFSETS_FOR_LEADER_EPOCH, LIST_OFFSETS, LEADER_AND_ISR and ALTER_PARTITION requests and
responses, and `Errors`, Kafka's error codes with Kafka's numeric values. Field names follow the
Kafka 2.6.3 request schemas in snake_case; a record batch is modelled as a tuple of `LogEntry`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

UNDEFINED_EPOCH = -1
"""EpochEndOffset.UNDEFINED_EPOCH: no leader epoch."""
UNDEFINED_EPOCH_OFFSET = -1
"""EpochEndOffset.UNDEFINED_EPOCH_OFFSET: no end offset."""
UNKNOWN_OFFSET = -1
"""Log.UnknownOffset: an offset the leader has not learnt yet (e.g. a remote LEO)."""
NO_LEADER = -1
"""LeaderAndIsr.NoLeader."""
CONSUMER_REPLICA_ID = -1
"""FetchRequest.CONSUMER_REPLICA_ID: the replica id a consumer puts in FETCH / LIST_OFFSETS."""
LATEST_TIMESTAMP = -1
"""ListOffsetRequest.LATEST_TIMESTAMP."""
EARLIEST_TIMESTAMP = -2
"""ListOffsetRequest.EARLIEST_TIMESTAMP."""
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
"""Topic.isInternal: topics a client may not produce to."""
RECORD_SIZE_BYTES = 1
"""Every record counts as this many bytes for max.bytes / fetch.min.bytes / message.max.bytes."""


class Errors(IntEnum):
    """Kafka error codes (org.apache.kafka.common.protocol.Errors), numeric values as in Kafka."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    NETWORK_EXCEPTION = 13
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    UNSUPPORTED_VERSION = 35
    INVALID_REQUEST = 42
    KAFKA_STORAGE_ERROR = 56
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    INVALID_RECORD = 87
    INVALID_UPDATE_VERSION = 95


NO_ERROR = Errors.NONE
"""Errors.NONE for the hot paths: reading an Enum class attribute goes through EnumType's
__getattr__ hook, several times slower than reading a module constant."""


class IsolationLevel(IntEnum):
    """org.apache.kafka.common.IsolationLevel, as carried by FETCH and LIST_OFFSETS."""

    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1


class TopicPartition(NamedTuple):
    """A topic partition; ordered and hashable like a tuple (topic, partition)."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class LogEntry(NamedTuple):
    """One record in a log: (offset, leader epoch stamped by the leader, record id)."""

    offset: int
    epoch: int
    record_id: int


# ----------------------------------------------------------------------------------------- PRODUCE


@dataclass(frozen=True, slots=True)
class ProducePartitionData:
    """The records a producer sends to one partition (one record batch of record ids)."""

    tp: TopicPartition
    record_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ProduceRequest:
    """PRODUCE: append record batches; `acks` is -1, 0 or 1 (anything else is rejected)."""

    correlation_id: int
    acks: int
    timeout_ms: int
    partitions: tuple[ProducePartitionData, ...]


@dataclass(frozen=True, slots=True)
class ProducePartitionResponse:
    """PRODUCE answer for one partition: error, base offset (-1 on error), log start offset."""

    tp: TopicPartition
    error: Errors
    base_offset: int
    log_start_offset: int


@dataclass(frozen=True, slots=True)
class ProduceResponse:
    """PRODUCE response: one entry per partition of the request."""

    correlation_id: int
    partitions: tuple[ProducePartitionResponse, ...]


# ------------------------------------------------------------------------------------------- FETCH


@dataclass(frozen=True, slots=True)
class FetchPartitionData:
    """FETCH request data for one partition (FetchRequest.PartitionData)."""

    tp: TopicPartition
    fetch_offset: int
    log_start_offset: int
    max_bytes: int
    current_leader_epoch: int | None


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """FETCH: replica_id >= 0 for a follower, CONSUMER_REPLICA_ID for a consumer."""

    correlation_id: int
    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: IsolationLevel
    partitions: tuple[FetchPartitionData, ...]
    has_client_metadata: bool = False


@dataclass(frozen=True, slots=True)
class FetchPartitionResponse:
    """FETCH answer for one partition; HW / LSO / log start are as read before this fetch."""

    tp: TopicPartition
    error: Errors
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: tuple[LogEntry, ...]


@dataclass(frozen=True, slots=True)
class FetchResponse:
    """FETCH response; a top-level error means the whole request failed."""

    correlation_id: int
    error: Errors
    partitions: tuple[FetchPartitionResponse, ...]


# ------------------------------------------------------------------------ OFFSETS_FOR_LEADER_EPOCH


@dataclass(frozen=True, slots=True)
class OffsetForLeaderPartition:
    """OFFSETS_FOR_LEADER_EPOCH request data for one partition."""

    tp: TopicPartition
    current_leader_epoch: int | None
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class OffsetsForLeaderEpochRequest:
    """OFFSETS_FOR_LEADER_EPOCH: ask the leader for the end offset of an epoch."""

    correlation_id: int
    replica_id: int
    partitions: tuple[OffsetForLeaderPartition, ...]


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """OFFSETS_FOR_LEADER_EPOCH answer for one partition: (leader_epoch, end_offset) or error."""

    tp: TopicPartition
    error: Errors
    leader_epoch: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class OffsetsForLeaderEpochResponse:
    """OFFSETS_FOR_LEADER_EPOCH response."""

    correlation_id: int
    partitions: tuple[EpochEndOffset, ...]


# ------------------------------------------------------------------------------------- LIST_OFFSETS


@dataclass(frozen=True, slots=True)
class ListOffsetsPartition:
    """LIST_OFFSETS request data: timestamp is LATEST_TIMESTAMP or EARLIEST_TIMESTAMP."""

    tp: TopicPartition
    current_leader_epoch: int | None
    timestamp: int


@dataclass(frozen=True, slots=True)
class ListOffsetsRequest:
    """LIST_OFFSETS: replica_id >= 0 for a follower (no isolation), else a consumer."""

    correlation_id: int
    replica_id: int
    isolation_level: IsolationLevel
    partitions: tuple[ListOffsetsPartition, ...]


@dataclass(frozen=True, slots=True)
class ListOffsetsPartitionResponse:
    """LIST_OFFSETS answer for one partition: offset and the leader epoch, or an error."""

    tp: TopicPartition
    error: Errors
    offset: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class ListOffsetsResponse:
    """LIST_OFFSETS response."""

    correlation_id: int
    partitions: tuple[ListOffsetsPartitionResponse, ...]


# ------------------------------------------------------------------------------ LEADER_AND_ISR


@dataclass(frozen=True, slots=True)
class LeaderAndIsrPartitionState:
    """The controller's decision for one partition (LeaderAndIsrPartitionState)."""

    tp: TopicPartition
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]
    is_new: bool = False


@dataclass(frozen=True, slots=True)
class LeaderAndIsrRequest:
    """LEADER_AND_ISR from the controller; live_leaders lists the leaders that are alive."""

    correlation_id: int
    controller_id: int
    controller_epoch: int
    partition_states: tuple[LeaderAndIsrPartitionState, ...]
    live_leaders: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class LeaderAndIsrResponse:
    """LEADER_AND_ISR response: a top-level error and one error per partition."""

    correlation_id: int
    error: Errors
    partition_errors: tuple[tuple[TopicPartition, Errors], ...]


# ----------------------------------------------------------------------------- ALTER_PARTITION


@dataclass(frozen=True, slots=True)
class AlterPartitionItem:
    """A leader's proposed ISR for one partition, fenced by leader epoch and partition epoch."""

    tp: TopicPartition
    leader_epoch: int
    new_isr: tuple[int, ...]
    partition_epoch: int


@dataclass(frozen=True, slots=True)
class AlterPartitionRequest:
    """ALTER_PARTITION (ZK conditional ISR write in 2.6.3; AlterIsr/AlterPartition later)."""

    correlation_id: int
    broker_id: int
    partitions: tuple[AlterPartitionItem, ...]


@dataclass(frozen=True, slots=True)
class AlterPartitionItemResponse:
    """ALTER_PARTITION answer for one partition: the controller's state after the request."""

    tp: TopicPartition
    error: Errors
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int


@dataclass(frozen=True, slots=True)
class AlterPartitionResponse:
    """ALTER_PARTITION response."""

    correlation_id: int
    error: Errors
    partitions: tuple[AlterPartitionItemResponse, ...]


Request = (
    ProduceRequest
    | FetchRequest
    | OffsetsForLeaderEpochRequest
    | ListOffsetsRequest
    | LeaderAndIsrRequest
    | AlterPartitionRequest
)
Response = (
    ProduceResponse
    | FetchResponse
    | OffsetsForLeaderEpochResponse
    | ListOffsetsResponse
    | LeaderAndIsrResponse
    | AlterPartitionResponse
)
Message = Request | Response

API_KEYS: dict[type, str] = {
    ProduceRequest: "PRODUCE",
    ProduceResponse: "PRODUCE",
    FetchRequest: "FETCH",
    FetchResponse: "FETCH",
    OffsetsForLeaderEpochRequest: "OFFSETS_FOR_LEADER_EPOCH",
    OffsetsForLeaderEpochResponse: "OFFSETS_FOR_LEADER_EPOCH",
    ListOffsetsRequest: "LIST_OFFSETS",
    ListOffsetsResponse: "LIST_OFFSETS",
    LeaderAndIsrRequest: "LEADER_AND_ISR",
    LeaderAndIsrResponse: "LEADER_AND_ISR",
    AlterPartitionRequest: "ALTER_PARTITION",
    AlterPartitionResponse: "ALTER_PARTITION",
}
"""Kafka API name of every message type."""


def api_name(message: Message) -> str:
    """The Kafka API name of a request or response, e.g. 'FETCH'."""
    return API_KEYS[type(message)]


def is_request(message: Message) -> bool:
    """True for requests, False for responses."""
    return isinstance(
        message,
        ProduceRequest
        | FetchRequest
        | OffsetsForLeaderEpochRequest
        | ListOffsetsRequest
        | LeaderAndIsrRequest
        | AlterPartitionRequest,
    )
