"""ReplicaManager through KafkaApis (Broker.receive): R14 produce, R15 fetch, R16 DelayedFetch."""

from __future__ import annotations

from impl_helpers import fetch_request, produce_request, rpc

from kreplica.impl.cluster import Cluster
from kreplica.impl.config import BrokerConfig
from kreplica.impl.messages import (
    Errors,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    IsolationLevel,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    Message,
    ProducePartitionData,
    ProduceRequest,
    ProduceResponse,
    TopicPartition,
)
from kreplica.impl.steps import Tick
from kreplica.impl.variants import Variant

TP = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def cluster(**config: int) -> Cluster:
    return Cluster((1, 2, 3), config=BrokerConfig(replica_lag_time_max_ms=100, **config))


def produce_responses(messages: list[Message]) -> list[ProduceResponse]:
    return [m for m in messages if isinstance(m, ProduceResponse)]


def fetch_responses(messages: list[Message]) -> list[FetchResponse]:
    return [m for m in messages if isinstance(m, FetchResponse)]


def follower_fetch(c: Cluster, follower: int, offset: int, epoch: int = 0) -> list[Message]:
    return rpc(c, 1, fetch_request(TP, offset, replica_id=follower, epoch=epoch), src=follower)


def leader_log(c: Cluster):  # type: ignore[no-untyped-def]
    log = c.log(1, TP)
    assert log is not None
    return log


# ------------------------------------------------------------------------------------ R14


def test_r14_invalid_acks_rejects_every_partition_and_appends_nothing() -> None:
    c = Cluster((1, 2, 3), topics={"t": 2}, replication_factor=3)
    request = ProduceRequest(
        5, 2, 1_000, (ProducePartitionData(TP, (1,)), ProducePartitionData(TP1, (2,)))
    )
    [response] = produce_responses(rpc(c, 1, request))
    assert [(p.tp, p.error, p.base_offset) for p in response.partitions] == [
        (TP, Errors.INVALID_REQUIRED_ACKS, -1),
        (TP1, Errors.INVALID_REQUIRED_ACKS, -1),
    ]
    assert leader_log(c).entries == []


def test_r14_acks_all_below_min_isr_is_not_enough_replicas() -> None:
    c = cluster(min_insync_replicas=4)
    [response] = produce_responses(rpc(c, 1, produce_request(TP, (1,), acks=-1)))
    assert response.partitions[0].error is Errors.NOT_ENOUGH_REPLICAS
    assert leader_log(c).entries == []
    [response] = produce_responses(rpc(c, 1, produce_request(TP, (1,), acks=1)))
    assert response.partitions[0].error is Errors.NONE  # acks=1 is not checked


def test_r14_acks_one_answers_at_once_and_acks_zero_never() -> None:
    c = cluster()
    [response] = produce_responses(rpc(c, 1, produce_request(TP, (1, 2), acks=1)))
    assert (response.partitions[0].error, response.partitions[0].base_offset) == (Errors.NONE, 0)
    assert rpc(c, 1, produce_request(TP, (3,), acks=0)) == []
    assert leader_log(c).record_ids() == [1, 2, 3]


def test_r14_acks_all_waits_until_the_hw_covers_the_records() -> None:
    c = cluster()
    assert rpc(c, 1, produce_request(TP, (1, 2), acks=-1)) == []
    rm = c.broker(1).replica_manager
    assert len(rm.delayed_produce_purgatory.pending()) == 1
    assert produce_responses(follower_fetch(c, 2, 2)) == []
    out = follower_fetch(c, 3, 2)  # the last ISR follower reaches offset 2: HW = 2
    [response] = produce_responses(out)
    assert (response.partitions[0].error, response.partitions[0].base_offset) == (Errors.NONE, 0)
    assert leader_log(c).high_watermark == 2


def test_r14_not_enough_replicas_after_append_when_isr_shrinks() -> None:
    c = cluster(min_insync_replicas=2)
    assert rpc(c, 1, produce_request(TP, (1,), acks=-1, timeout_ms=10_000)) == []
    c.clock.advance(101)
    out = c.broker(1).maybe_shrink_isr()  # followers 2 and 3 never fetched: ISR {1}, HW 1
    [response] = produce_responses([o.payload for o in out])
    assert response.partitions[0].error is Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert leader_log(c).record_ids() == [1]


def test_r14_delayed_produce_answers_not_leader_when_leadership_moves() -> None:
    c = cluster()
    assert rpc(c, 1, produce_request(TP, (1,), acks=-1)) == []
    state = LeaderAndIsrPartitionState(TP, 1, 2, 1, (1, 2, 3), 1, (1, 2, 3))
    out = rpc(c, 1, LeaderAndIsrRequest(9, 0, 1, (state,), (2,)), src=0)
    [response] = produce_responses(out)
    assert response.partitions[0].error is Errors.NOT_LEADER_OR_FOLLOWER


def test_r14_timeout_answers_request_timed_out_and_keeps_the_records() -> None:
    c = cluster()
    assert rpc(c, 1, produce_request(TP, (1,), acks=-1, timeout_ms=300)) == []
    c.clock.advance(299)
    assert c.broker(1).tick() == []
    c.clock.advance(1)
    [response] = produce_responses([o.payload for o in c.broker(1).tick()])
    assert response.partitions[0].error is Errors.REQUEST_TIMED_OUT
    assert leader_log(c).record_ids() == [1]


def test_r14_one_failing_partition_does_not_block_the_others() -> None:
    c = Cluster((1, 2, 3), topics={"t": 2}, replication_factor=3)
    request = ProduceRequest(
        5,
        -1,
        1_000,
        (ProducePartitionData(TP, (1,)), ProducePartitionData(TopicPartition("nope", 0), (2,))),
    )
    assert rpc(c, 1, request) == []  # t-0 appended: a DelayedProduce waits for it
    follower_fetch(c, 2, 1)
    [response] = produce_responses(follower_fetch(c, 3, 1))
    assert [(p.tp.topic, p.error) for p in response.partitions] == [
        ("t", Errors.NONE),
        ("nope", Errors.UNKNOWN_TOPIC_OR_PARTITION),
    ]


def test_seeded_bug_early_ack_answers_acks_all_before_the_hw() -> None:
    c = Cluster((1, 2, 3), variant=Variant(bugs=frozenset({"early-ack"})))
    [response] = produce_responses(rpc(c, 1, produce_request(TP, (1,), acks=-1)))
    assert response.partitions[0].error is Errors.NONE
    assert leader_log(c).high_watermark == 0


# ------------------------------------------------------------------------------------ R15


def test_r15_isolation_bounds_follower_leo_consumer_hw_and_lso() -> None:
    c = cluster()
    rpc(c, 1, produce_request(TP, (1, 2, 3), acks=1))
    follower_fetch(c, 2, 1)
    follower_fetch(c, 3, 1)
    assert leader_log(c).high_watermark == 1
    [follower] = fetch_responses(follower_fetch(c, 2, 1))
    assert [e.record_id for e in follower.partitions[0].records] == [2, 3]
    [consumer] = fetch_responses(rpc(c, 1, fetch_request(TP, 0)))
    assert [e.record_id for e in consumer.partitions[0].records] == [1]
    committed = fetch_request(TP, 0, isolation=IsolationLevel.READ_COMMITTED)
    [consumer] = fetch_responses(rpc(c, 1, committed))
    assert [e.record_id for e in consumer.partitions[0].records] == [1]
    assert consumer.partitions[0].last_stable_offset == leader_log(c).high_watermark


def test_r15_offset_outside_the_log_is_out_of_range() -> None:
    c = cluster()
    rpc(c, 1, produce_request(TP, (1,), acks=1))
    [response] = fetch_responses(follower_fetch(c, 2, 2))
    assert response.partitions[0].error is Errors.OFFSET_OUT_OF_RANGE
    assert response.partitions[0].high_watermark == -1


def test_r15_offset_at_the_isolation_bound_is_empty_without_error() -> None:
    c = cluster()
    rpc(c, 1, produce_request(TP, (1,), acks=1))
    [response] = fetch_responses(rpc(c, 1, fetch_request(TP, 0)))  # HW is 0
    assert response.partitions[0].error is Errors.NONE
    assert response.partitions[0].records == ()


def test_r15_min_bytes_parks_the_fetch_until_enough_data() -> None:
    c = cluster()
    rpc(c, 1, produce_request(TP, (1,), acks=1))
    parked = fetch_request(TP, 0, replica_id=2, epoch=0, max_wait_ms=500, min_bytes=3)
    assert rpc(c, 1, parked, src=2) == []
    assert len(c.broker(1).replica_manager.delayed_fetch_purgatory.pending()) == 1
    assert fetch_responses(rpc(c, 1, produce_request(TP, (2,), acks=1))) == []
    out = rpc(c, 1, produce_request(TP, (3,), acks=1))
    [response] = fetch_responses(out)
    assert [e.record_id for e in response.partitions[0].records] == [1, 2, 3]


def test_r15_response_max_bytes_and_min_one_message() -> None:
    c = Cluster((1, 2, 3), topics={"t": 2}, replication_factor=3)
    rpc(c, 1, produce_request(TP, (1, 2, 3), acks=1))
    rpc(c, 1, ProduceRequest(6, 1, 1_000, (ProducePartitionData(TP1, (4, 5)),)))
    request = FetchRequest(
        1,
        2,
        0,
        1,
        2,  # response max bytes: two records in total
        IsolationLevel.READ_UNCOMMITTED,
        (
            FetchPartitionData(TP, 0, 0, 1_000, 0),
            FetchPartitionData(TP1, 0, 0, 1_000, 0),
        ),
    )
    [response] = fetch_responses(rpc(c, 1, request, src=2))
    assert [len(p.records) for p in response.partitions] == [2, 0]
    tiny = fetch_request(TP, 0, replica_id=2, epoch=0, max_bytes=0, partition_max_bytes=0)
    [response] = fetch_responses(rpc(c, 1, tiny, src=2))
    assert len(response.partitions[0].records) == 1  # the first record despite max bytes 0


def test_r15_followers_and_old_consumers_must_hit_the_leader() -> None:
    c = cluster()
    rpc(c, 1, produce_request(TP, (1,), acks=1))
    c.settle()
    [response] = fetch_responses(rpc(c, 2, fetch_request(TP, 0, replica_id=3, epoch=0), src=3))
    assert response.partitions[0].error is Errors.NOT_LEADER_OR_FOLLOWER
    [response] = fetch_responses(rpc(c, 2, fetch_request(TP, 0)))
    assert response.partitions[0].error is Errors.NOT_LEADER_OR_FOLLOWER
    [response] = fetch_responses(rpc(c, 2, fetch_request(TP, 0, client_metadata=True)))
    assert response.partitions[0].error is Errors.NONE
    assert [e.record_id for e in response.partitions[0].records] == [1]


def test_r15_follower_state_is_recorded_only_for_error_free_reads() -> None:
    c = cluster()
    rpc(c, 1, produce_request(TP, (1,), acks=1))
    replica = c.partition(1, TP).remote_replicas[2]  # type: ignore[union-attr]
    follower_fetch(c, 2, 5)  # out of range
    assert replica.log_end_offset == -1
    follower_fetch(c, 2, 1)
    assert replica.log_end_offset == 1


def test_r15_a_broker_that_is_not_a_replica_gets_empty_data() -> None:
    c = Cluster((1, 2, 3, 4), replication_factor=3)
    rpc(c, 1, produce_request(TP, (1,), acks=1))
    [response] = fetch_responses(rpc(c, 1, fetch_request(TP, 0, replica_id=4, epoch=0), src=4))
    assert response.partitions[0].error is Errors.NONE
    assert response.partitions[0].records == ()


def test_r15_hw_in_response_is_the_value_before_this_fetch() -> None:
    c = cluster()
    rpc(c, 1, produce_request(TP, (1, 2), acks=1))
    follower_fetch(c, 2, 2)
    [response] = fetch_responses(follower_fetch(c, 3, 2))  # this fetch moves the HW to 2
    assert response.partitions[0].high_watermark == 0
    assert leader_log(c).high_watermark == 2


# ------------------------------------------------------------------------------------ R16


def test_r16_delayed_fetch_completes_when_leadership_is_lost() -> None:
    c = cluster()
    parked = fetch_request(TP, 0, replica_id=2, epoch=None, max_wait_ms=500)  # no epoch: no R1
    assert rpc(c, 1, parked, src=2) == []
    state = LeaderAndIsrPartitionState(TP, 1, 3, 1, (1, 2, 3), 1, (1, 2, 3))
    out = rpc(c, 1, LeaderAndIsrRequest(9, 0, 1, (state,), (3,)), src=0)
    [response] = fetch_responses(out)
    assert response.partitions[0].error is Errors.NOT_LEADER_OR_FOLLOWER


def test_r16_delayed_fetch_completes_when_its_epoch_is_fenced() -> None:
    c = cluster()
    parked = fetch_request(TP, 0, replica_id=2, epoch=0, max_wait_ms=500)
    assert rpc(c, 1, parked, src=2) == []
    state = LeaderAndIsrPartitionState(TP, 1, 1, 1, (1, 2, 3), 1, (1, 2, 3))
    out = rpc(c, 1, LeaderAndIsrRequest(9, 0, 1, (state,), (1,)), src=0)
    assert fetch_responses(out) == []  # becoming leader again completes nothing by itself
    rm = c.broker(1).replica_manager
    assert rm.delayed_fetch_purgatory.check_and_complete(TP) == 1
    [response] = fetch_responses([o.payload for o in c.broker(1)._drain()])
    assert response.partitions[0].error is Errors.FENCED_LEADER_EPOCH


def parked_fetch_responses(c: Cluster) -> list[FetchResponse]:
    """The FETCH answers broker 1 has sent since the last call."""
    return fetch_responses([o.payload for o in c.broker(1)._drain()])


def fetch_parked_at_the_leo() -> Cluster:
    """Leader 1 with records at offsets 0 and 1, and follower 2's FETCH at 2 parked."""
    c = cluster()
    rpc(c, 1, produce_request(TP, (1, 2), acks=1))
    parked = fetch_request(TP, 2, replica_id=2, epoch=0, max_wait_ms=500)
    assert rpc(c, 1, parked, src=2) == []
    return c


def test_r16_delayed_fetch_completes_when_its_offset_leaves_the_segment() -> None:
    """DelayedFetch.tryComplete's case C: the fetch offset and the end offset lie on
    different segments (here the leader's log restarted at offset 5, R9): it completes at
    once, and the re-read finds its offset out of range."""
    c = fetch_parked_at_the_leo()
    leader_log(c).truncate_fully_and_start_at(5)
    rm = c.broker(1).replica_manager
    assert rm.delayed_fetch_purgatory.check_and_complete(TP) == 1
    [response] = parked_fetch_responses(c)
    assert response.partitions[0].error is Errors.OFFSET_OUT_OF_RANGE


def test_r16_a_truncation_within_the_segment_lets_the_fetch_wait() -> None:
    """Kafka 2.6.3 forces a delayed fetch only when its offset is on another segment; a leader
    that truncates below the fetch offset within the same segment leaves it waiting until
    max_wait_ms, when the re-read finds the offset out of range."""
    c = fetch_parked_at_the_leo()
    leader_log(c).truncate_to(1)
    rm = c.broker(1).replica_manager
    assert rm.delayed_fetch_purgatory.check_and_complete(TP) == 0
    c.apply(Tick(500))
    [response] = [e.payload for e in c.in_flight() if isinstance(e.payload, FetchResponse)]
    assert response.partitions[0].error is Errors.OFFSET_OUT_OF_RANGE


def test_r16_a_consumer_ahead_of_the_hw_waits_for_it() -> None:
    """A consumer FETCH above the leader's HW (after a failover, say) is not answered at once
    with nothing: it waits in the purgatory until the HW passes its offset and the bytes
    reach min_bytes (DelayedFetch.tryComplete: same segment, case D)."""
    c = cluster()
    rpc(c, 1, produce_request(TP, (1, 2, 3), acks=1))
    follower_fetch(c, 2, 1)
    follower_fetch(c, 3, 1)
    assert leader_log(c).high_watermark == 1
    ahead = fetch_request(TP, 2, max_wait_ms=500, correlation_id=5)
    assert fetch_responses(rpc(c, 1, ahead)) == []
    assert len(c.broker(1).replica_manager.delayed_fetch_purgatory.pending()) == 1

    def answers_to_the_consumer(out: list[Message]) -> list[FetchResponse]:
        return [r for r in fetch_responses(out) if r.correlation_id == ahead.correlation_id]

    assert answers_to_the_consumer(follower_fetch(c, 2, 3)) == []  # HW 1: broker 3 is behind
    [response] = answers_to_the_consumer(follower_fetch(c, 3, 3))  # HW 3, past its offset
    assert [e.record_id for e in response.partitions[0].records] == [3]


def test_r16_bytes_are_capped_by_partition_max_bytes() -> None:
    c = cluster()
    parked = fetch_request(
        TP, 0, replica_id=2, epoch=0, max_wait_ms=500, min_bytes=3, partition_max_bytes=2
    )
    assert rpc(c, 1, parked, src=2) == []
    assert fetch_responses(rpc(c, 1, produce_request(TP, (1, 2, 3, 4), acks=1))) == []
    assert len(c.broker(1).replica_manager.delayed_fetch_purgatory.pending()) == 1


def test_r16_expired_fetch_answers_with_what_is_there() -> None:
    c = cluster()
    parked = fetch_request(TP, 0, replica_id=2, epoch=0, max_wait_ms=500, min_bytes=5)
    assert rpc(c, 1, parked, src=2) == []
    rpc(c, 1, produce_request(TP, (1,), acks=1))
    c.apply(Tick(500))
    envelopes = [e for e in c.in_flight() if isinstance(e.payload, FetchResponse)]
    assert len(envelopes) == 1
    response = envelopes[0].payload
    assert isinstance(response, FetchResponse)
    assert [e.record_id for e in response.partitions[0].records] == [1]
