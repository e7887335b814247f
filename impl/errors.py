"""Exceptions used inside one broker; request handlers turn each into its Kafka error code.

They never escape a request handler (DESIGN.md, "Errors and bad input"): ReplicaManager and
the fetcher threads catch them and answer with `error` or back off, as Kafka does.
"""

from __future__ import annotations

from kreplica.impl.messages import Errors


class KafkaError(Exception):
    """Base of the broker-internal exceptions; `error` is the code a response carries."""

    error: Errors = Errors.UNKNOWN_SERVER_ERROR


class OffsetOutOfRangeError(KafkaError):
    """A fetch offset above the LEO or below the log start offset (R15)."""

    error = Errors.OFFSET_OUT_OF_RANGE


class NotLeaderOrFollowerError(KafkaError):
    """This broker is not the leader (or has no local replica) for the partition (R1)."""

    error = Errors.NOT_LEADER_OR_FOLLOWER


class UnknownTopicOrPartitionError(KafkaError):
    """This broker does not know the partition at all."""

    error = Errors.UNKNOWN_TOPIC_OR_PARTITION


class FencedLeaderEpochError(KafkaError):
    """The request's current leader epoch is older than the replica's (R1)."""

    error = Errors.FENCED_LEADER_EPOCH


class UnknownLeaderEpochError(KafkaError):
    """The request's current leader epoch is newer than the replica's (R1)."""

    error = Errors.UNKNOWN_LEADER_EPOCH


class KafkaStorageError(KafkaError):
    """The partition's log directory is offline."""

    error = Errors.KAFKA_STORAGE_ERROR


class RecordTooLargeError(KafkaError):
    """A record batch larger than message.max.bytes."""

    error = Errors.MESSAGE_TOO_LARGE


class InvalidRecordError(KafkaError):
    """An empty or malformed record batch."""

    error = Errors.INVALID_RECORD


class CorruptRecordError(KafkaError):
    """A fetched batch that cannot be appended as it stands (gap or negative epoch)."""

    error = Errors.CORRUPT_MESSAGE


class NotEnoughReplicasError(KafkaError):
    """acks=-1 and the ISR is smaller than min.insync.replicas (R14)."""

    error = Errors.NOT_ENOUGH_REPLICAS


class OffsetNotAvailableError(KafkaError):
    """ListOffsets by a client while the leader's HW is below its epoch start offset (S13)."""

    error = Errors.OFFSET_NOT_AVAILABLE


class UnexpectedAppendOffsetError(KafkaError):
    """A follower append whose first offset is below the log end offset; it carries the
    append's first and last offsets, as Kafka's UnexpectedAppendOffsetException does."""

    def __init__(self, message: str, first_offset: int, last_offset: int) -> None:
        super().__init__(message)
        self.first_offset = first_offset
        self.last_offset = last_offset


class OffsetsOutOfOrderError(KafkaError):
    """A follower append whose offsets are not strictly increasing."""


class IllegalStateError(KafkaError):
    """A protocol state that Kafka treats as a bug (IllegalStateException)."""
