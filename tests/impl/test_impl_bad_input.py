"""Bad input: each is answered with Kafka's error code, changes no state and never raises."""

from __future__ import annotations

from impl_helpers import fetch_request, produce_request, rpc, snapshot

from kreplica.impl.cluster import Cluster
from kreplica.impl.config import BrokerConfig
from kreplica.impl.controller import CONTROLLER_ID
from kreplica.impl.messages import (
    LATEST_TIMESTAMP,
    Errors,
    FetchResponse,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    Message,
    OffsetForLeaderPartition,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    ProduceResponse,
    TopicPartition,
)
from kreplica.impl.steps import Elect

TP = TopicPartition("t", 0)
UNKNOWN = TopicPartition("nope", 0)


def cluster() -> Cluster:
    c = Cluster((1, 2, 3), config=BrokerConfig(max_message_bytes=5))
    rpc(c, 1, produce_request(TP, (1, 2), acks=1))
    c.settle()
    return c


def rejected(c: Cluster, broker: int, request: Message, src: int = -1) -> list[Message]:
    """Send a bad request; assert nothing changed; return the answers."""
    before = snapshot(c)
    answers = rpc(c, broker, request, src=src)
    assert snapshot(c) == before
    return answers


def produce_error(answers: list[Message]) -> Errors:
    [response] = [m for m in answers if isinstance(m, ProduceResponse)]
    return response.partitions[0].error


def fetch_error(answers: list[Message]) -> Errors:
    [response] = [m for m in answers if isinstance(m, FetchResponse)]
    return response.partitions[0].error


def test_invalid_acks_is_invalid_required_acks() -> None:
    c = cluster()
    for acks in (2, -2, 7):
        error = produce_error(rejected(c, 1, produce_request(TP, (9,), acks=acks)))
        assert error is Errors.INVALID_REQUIRED_ACKS


def test_produce_to_unknown_partition() -> None:
    c = cluster()
    assert produce_error(rejected(c, 1, produce_request(UNKNOWN, (9,)))) is (
        Errors.UNKNOWN_TOPIC_OR_PARTITION
    )


def test_produce_to_a_known_partition_not_hosted_or_not_led_here() -> None:
    c = Cluster((1, 2, 3, 4), replication_factor=3)
    assert produce_error(rejected(c, 4, produce_request(TP, (9,)))) is (
        Errors.NOT_LEADER_OR_FOLLOWER
    )
    assert produce_error(rejected(c, 2, produce_request(TP, (9,)))) is (
        Errors.NOT_LEADER_OR_FOLLOWER
    )


def test_produce_to_an_internal_topic() -> None:
    c = cluster()
    request = produce_request(TopicPartition("__consumer_offsets", 0), (9,))
    assert produce_error(rejected(c, 1, request)) is Errors.INVALID_TOPIC_EXCEPTION


def test_record_batch_too_large_and_empty_batch() -> None:
    c = cluster()
    assert produce_error(rejected(c, 1, produce_request(TP, tuple(range(6))))) is (
        Errors.MESSAGE_TOO_LARGE
    )
    assert produce_error(rejected(c, 1, produce_request(TP, ()))) is Errors.INVALID_RECORD


def test_fetch_beyond_the_log_is_out_of_range() -> None:
    c = cluster()
    for offset in (3, 100, -1):
        request = fetch_request(TP, offset, replica_id=2, epoch=0)
        assert fetch_error(rejected(c, 1, request, src=2)) is Errors.OFFSET_OUT_OF_RANGE


def test_fetch_with_stale_or_future_leader_epoch() -> None:
    c = cluster()
    c.apply(Elect(TP, 1))  # epoch 1 everywhere
    c.run_until_quiescent()
    stale = fetch_request(TP, 0, replica_id=2, epoch=0)
    assert fetch_error(rejected(c, 1, stale, src=2)) is Errors.FENCED_LEADER_EPOCH
    future = fetch_request(TP, 0, replica_id=2, epoch=5)
    assert fetch_error(rejected(c, 1, future, src=2)) is Errors.UNKNOWN_LEADER_EPOCH


def test_fetch_unknown_partition() -> None:
    c = cluster()
    request = fetch_request(UNKNOWN, 0, replica_id=2, epoch=0)
    assert fetch_error(rejected(c, 1, request, src=2)) is Errors.UNKNOWN_TOPIC_OR_PARTITION


def test_offsets_for_leader_epoch_bad_inputs() -> None:
    c = cluster()

    def ole(tp: TopicPartition, current: int | None, broker: int = 1) -> Errors:
        request = OffsetsForLeaderEpochRequest(3, 2, (OffsetForLeaderPartition(tp, current, 0),))
        [response] = rejected(c, broker, request, src=2)
        assert isinstance(response, OffsetsForLeaderEpochResponse)
        return response.partitions[0].error

    assert ole(UNKNOWN, 0) is Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert ole(TP, 4) is Errors.UNKNOWN_LEADER_EPOCH
    assert ole(TP, 0, broker=2) is Errors.NOT_LEADER_OR_FOLLOWER
    c.apply(Elect(TP, 1))
    c.run_until_quiescent()
    assert ole(TP, 0) is Errors.FENCED_LEADER_EPOCH


def test_list_offsets_bad_inputs() -> None:
    c = cluster()

    def list_offsets(tp: TopicPartition, current: int | None, broker: int = 1) -> Errors:
        request = ListOffsetsRequest(
            4,
            2,
            0,
            (ListOffsetsPartition(tp, current, LATEST_TIMESTAMP),),  # type: ignore[arg-type]
        )
        [response] = rejected(c, broker, request, src=2)
        assert isinstance(response, ListOffsetsResponse)
        return response.partitions[0].error

    assert list_offsets(UNKNOWN, None) is Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert list_offsets(TP, 3) is Errors.UNKNOWN_LEADER_EPOCH
    assert list_offsets(TP, None, broker=3) is Errors.NOT_LEADER_OR_FOLLOWER


def test_leader_and_isr_with_stale_controller_or_leader_epoch() -> None:
    c = cluster()
    c.broker(1).replica_manager.controller_epoch = 2
    state = LeaderAndIsrPartitionState(TP, 1, 2, 5, (1, 2, 3), 5, (1, 2, 3))
    [response] = rejected(c, 1, LeaderAndIsrRequest(1, 0, 1, (state,), (2,)), src=CONTROLLER_ID)
    assert isinstance(response, LeaderAndIsrResponse)
    assert response.error is Errors.STALE_CONTROLLER_EPOCH
    c.broker(1).replica_manager.controller_epoch = 1
    same_epoch = LeaderAndIsrPartitionState(TP, 1, 2, 0, (1, 2, 3), 0, (1, 2, 3))
    [response] = rejected(
        c, 1, LeaderAndIsrRequest(2, 0, 1, (same_epoch,), (2,)), src=CONTROLLER_ID
    )
    assert isinstance(response, LeaderAndIsrResponse)
    assert response.partition_errors == ((TP, Errors.STALE_CONTROLLER_EPOCH),)


def test_leader_and_isr_for_a_broker_outside_the_replicas() -> None:
    c = cluster()
    state = LeaderAndIsrPartitionState(TP, 1, 2, 5, (2, 3), 5, (2, 3))
    [response] = rpc(c, 1, LeaderAndIsrRequest(1, 0, 1, (state,), (2,)), src=CONTROLLER_ID)
    assert isinstance(response, LeaderAndIsrResponse)
    assert response.partition_errors == ((TP, Errors.UNKNOWN_TOPIC_OR_PARTITION),)
    assert c.partition(1, TP).leader_epoch == 0  # type: ignore[union-attr]


def test_storage_error_is_reported_not_raised() -> None:
    c = cluster()
    log = c.log(1, TP)
    assert log is not None
    log.offline = True
    assert produce_error(rejected(c, 1, produce_request(TP, (9,)))) is Errors.KAFKA_STORAGE_ERROR
    request = fetch_request(TP, 0, replica_id=2, epoch=0)
    assert fetch_error(rejected(c, 1, request, src=2)) is Errors.KAFKA_STORAGE_ERROR
