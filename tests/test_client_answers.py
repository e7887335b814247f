"""The oracle of the client's answers (conformance/judges/client_answers.py), on a real cluster.

A correct cluster's answers all pass, step by step; each wrong answer below is one that an
edit of impl/ could produce, and the oracle names it.
"""

from __future__ import annotations

from dataclasses import replace

from kreplica.conformance.bridge.projection import CLIENT
from kreplica.conformance.bridge.recorder import SpecRecorder
from kreplica.conformance.judges.checked_steps import Judge, apply_checked
from kreplica.conformance.judges.client_answers import NAME, held_request_violations, judge
from kreplica.impl.cluster import Cluster
from kreplica.impl.config import BrokerConfig
from kreplica.impl.messages import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    Errors,
    FetchPartitionResponse,
    FetchResponse,
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    LogEntry,
    Message,
    ProducePartitionResponse,
    ProduceResponse,
    TopicPartition,
)
from kreplica.impl.steps import (
    ConsumerFetch,
    ConsumerListOffsets,
    Deliver,
    DoWork,
    Produce,
    Step,
    Tick,
)
from kreplica.impl.variants import Variant

TP = TopicPartition("t", 0)
INTERNAL = TopicPartition("__consumer_offsets", 0)


def recorder(variant: Variant | None = None) -> Judge:
    """Two brokers, broker 1 leading, follower fetches answered at once (as the fuzzer's)."""
    config = BrokerConfig(replica_fetch_wait_max_ms=0)
    c = Cluster((1, 2), {"t": 1}, variant=variant or Variant(), config=config)
    return Judge(SpecRecorder(c, TP, {}))


def send(judged: Judge, step: Step, broker: int) -> list[Message]:
    """A client request delivered at once, every step checked; the answers it got."""
    for s in (step, Deliver(CLIENT, broker, 0)):
        assert apply_checked(judged, s) is None
    return [e.payload for e in judged.recorder.cluster.network.queue((broker, CLIENT))]


def replicate(judged: Judge) -> None:
    """One fetch round of follower 2 (the leader's HW then passes what it had)."""
    for s in (DoWork(2, 1), Deliver(2, 1, 0), Deliver(1, 2, 0), DoWork(2, 1), Deliver(2, 1, 0)):
        assert apply_checked(judged, s) is None, s
    assert apply_checked(judged, Deliver(1, 2, 0)) is None


def test_a_correct_cluster_answers_every_client_request_rightly() -> None:
    """Produce (acks=-1 and 1, refused three ways), fetch and list offsets: every answer, as
    it is sent, agrees with the leader's state."""
    judged = recorder()
    send(judged, Produce(TP, (1,), -1, broker=1), 1)
    replicate(judged)
    send(judged, Produce(TP, (2,), 1, broker=1), 1)
    send(judged, Produce(TP, (3,), -1, broker=2), 2)  # NOT_LEADER_OR_FOLLOWER
    send(judged, Produce(TP, (3,), 2, broker=1), 1)  # INVALID_REQUIRED_ACKS
    send(judged, Produce(INTERNAL, (3,), -1, broker=1), 1)  # INVALID_TOPIC_EXCEPTION
    send(judged, ConsumerFetch(TP, 0, broker=1), 1)
    send(judged, ConsumerFetch(TP, 0, broker=2), 2)
    send(judged, ConsumerFetch(TP, 7, broker=1), 1)  # OFFSET_OUT_OF_RANGE
    for timestamp in (LATEST_TIMESTAMP, EARLIEST_TIMESTAMP):
        send(judged, ConsumerListOffsets(TP, timestamp, broker=1), 1)
        send(judged, ConsumerListOffsets(TP, timestamp, broker=2), 2)
    assert apply_checked(judged, Tick(30_001)) is None  # no acks=-1 produce is left to expire
    answers = [e.payload for e in judged.recorder.cluster.network.queue((1, CLIENT))]
    errors = [p.error for a in answers for p in getattr(a, "partitions", ())]
    assert errors == [
        Errors.NONE,  # acks=-1, once replicated
        Errors.NONE,  # acks=1
        Errors.INVALID_REQUIRED_ACKS,
        Errors.INVALID_TOPIC_EXCEPTION,
        Errors.NONE,  # fetch
        Errors.OFFSET_OUT_OF_RANGE,
        Errors.NONE,  # LATEST: the HW
        Errors.NONE,  # EARLIEST: the log start
    ]
    follower = [
        p.error
        for a in judged.recorder.cluster.network.queue((2, CLIENT))
        for p in a.payload.partitions
    ]
    assert set(follower) == {Errors.NOT_LEADER_OR_FOLLOWER}


def test_refused_produces_are_no_spec_action() -> None:
    """A produce refused before the spec's Produce could take it leaves no event; the retry
    of the same record at the leader is the spec's Produce."""
    judged = recorder()
    send(judged, Produce(TP, (1,), -1, broker=2), 2)
    send(judged, Produce(TP, (1,), 2, broker=1), 1)
    send(judged, Produce(INTERNAL, (1,), -1, broker=1), 1)
    assert [e.action for e in judged.recorder.events] == ["Init"]
    send(judged, Produce(TP, (1,), -1, broker=1), 1)
    assert [e.action for e in judged.recorder.events] == ["Init", "Produce"]
    assert judged.recorder.state["nextRecord"] == 2


def wrong(judged: Judge, request_step: Step, broker: int, answer: Message) -> str | None:
    """The oracle's reason for `answer` to the request `request_step` sends, in the state now."""
    before = set(judged.recorder.cluster.client.pending)
    judged.recorder.cluster.apply(request_step)
    [corr] = set(judged.recorder.cluster.client.pending) - before
    request = judged.recorder.cluster.client.pending[corr].request
    return judge(request, answer, broker, TP, judged.recorder.state, judged.recorder.cluster)


def test_wrong_produce_answers_are_named() -> None:
    judged = recorder()
    send(judged, Produce(TP, (1,), -1, broker=1), 1)  # appended at 0, HW still 0
    early = ProduceResponse(0, (ProducePartitionResponse(TP, Errors.NONE, 0, 0),))
    reason = wrong(judged, Produce(TP, (1,), -1, broker=1), 1, early)
    assert reason is not None and "only expiry answers" in reason
    shifted = ProduceResponse(
        0, (ProducePartitionResponse(TP, Errors.INVALID_REQUIRED_ACKS, 0, -1),)
    )
    reason = wrong(judged, Produce(TP, (2,), 5, broker=1), 1, shifted)
    assert reason is not None and "(0, -1), expected (-1, -1)" in reason
    follower = ProduceResponse(
        0, (ProducePartitionResponse(TP, Errors.NOT_LEADER_OR_FOLLOWER, -1, -1),)
    )
    reason = wrong(judged, Produce(TP, (2,), 1, broker=1), 1, follower)
    assert reason is not None and "expected NONE" in reason  # a leader appends acks=1
    assert wrong(judged, Produce(TP, (2,), 1, broker=2), 2, follower) is None


def test_wrong_fetch_and_list_offsets_answers_are_named() -> None:
    judged = recorder()
    send(judged, Produce(TP, (1,), 1, broker=1), 1)  # leader LEO 1, HW 0
    above_hw = FetchResponse(
        0, Errors.NONE, (FetchPartitionResponse(TP, Errors.NONE, 0, 0, 0, (LogEntry(0, 0, 1),)),)
    )
    reason = wrong(judged, ConsumerFetch(TP, 0, broker=1), 1, above_hw)
    assert reason is not None and "expected []" in reason
    right = replace(above_hw, partitions=(replace(above_hw.partitions[0], records=()),))
    assert wrong(judged, ConsumerFetch(TP, 0, broker=1), 1, right) is None
    refused = FetchPartitionResponse(TP, Errors.NOT_LEADER_OR_FOLLOWER, -1, -1, -1, ())
    answer = FetchResponse(0, Errors.NONE, (refused,))
    assert wrong(judged, ConsumerFetch(TP, 0, broker=2), 2, answer) is None
    answer = FetchResponse(0, Errors.NONE, (replace(refused, last_stable_offset=-2),))
    reason = wrong(judged, ConsumerFetch(TP, 0, broker=2), 2, answer)
    assert reason is not None and "(-1, -2, -1), expected (-1, -1, -1)" in reason
    leo = ListOffsetsResponse(0, (ListOffsetsPartitionResponse(TP, Errors.NONE, 1, 0),))
    reason = wrong(judged, ConsumerListOffsets(TP, LATEST_TIMESTAMP, broker=1), 1, leo)
    assert reason is not None and "expected NONE (0, 0)" in reason
    not_leader = ListOffsetsResponse(0, (ListOffsetsPartitionResponse(TP, Errors.NONE, 0, 0),))
    reason = wrong(judged, ConsumerListOffsets(TP, EARLIEST_TIMESTAMP, broker=2), 2, not_leader)
    assert reason is not None and "NOT_LEADER_OR_FOLLOWER" in reason


def test_an_early_ack_is_caught_when_it_is_sent() -> None:
    """The seeded bug early-ack answers acks=-1 at once: the step that sends it fails."""
    judged = recorder(Variant(bugs=frozenset({"early-ack"})))
    assert apply_checked(judged, Produce(TP, (1,), -1, broker=1)) is None
    found = apply_checked(judged, Deliver(CLIENT, 1, 0))
    assert found is not None and found[0] == NAME


def waiting(judged: Judge) -> list[tuple[str, str]]:
    """The consumer FETCHes the oracle finds held too long, in the state now."""
    return held_request_violations(
        judged.recorder.cluster,
        judged.recorder.state,
        judged.arrivals.arrivals,
        judged.arrivals.answered,
    )


def test_a_delayed_fetch_waits_for_min_bytes_or_its_max_wait() -> None:
    """Kafka's consumer defaults (wait up to 500 ms for one byte): a FETCH at the HW waits in
    the purgatory until the HW moves (answered in that step, with the record) or until its
    wait is over (answered empty by the tick that passes it); every step checks."""
    judged = recorder()
    parked = send(judged, ConsumerFetch(TP, 0, broker=1, max_wait_ms=500), 1)
    assert parked == [] and len(judged.arrivals.arrivals) == 1 and not judged.arrivals.answered
    assert apply_checked(judged, Produce(TP, (1,), 1, broker=1)) is None
    assert apply_checked(judged, Deliver(CLIENT, 1, 0)) is None  # LEO 1, HW still 0: waits
    assert len(judged.recorder.cluster.network.queue((1, CLIENT))) == 1  # only the produce's answer
    replicate(judged)  # the HW passes the record: the FETCH completes at once
    [_, fetched] = [e.payload for e in judged.recorder.cluster.network.queue((1, CLIENT))]
    assert isinstance(fetched, FetchResponse)
    assert [e.record_id for e in fetched.partitions[0].records] == [1]
    send(judged, ConsumerFetch(TP, 1, broker=1, max_wait_ms=500, min_bytes=2), 1)
    assert apply_checked(judged, Tick(1_000)) is None  # expired: answered empty
    last = judged.recorder.cluster.network.queue((1, CLIENT))[-1].payload
    assert isinstance(last, FetchResponse) and last.partitions[0].records == ()
    assert waiting(judged) == []


def test_a_fetch_ahead_of_the_hw_waits_and_an_empty_answer_at_once_is_named() -> None:
    """A consumer FETCH above the leader's HW (the record is appended, not yet replicated)
    waits in the purgatory, every step checked, until the HW passes it (Kafka 2.6.3's
    DelayedFetch: same segment, case D); an empty answer at once is too early."""
    judged = recorder()
    assert apply_checked(judged, Produce(TP, (1,), 1, broker=1)) is None
    assert apply_checked(judged, Deliver(CLIENT, 1, 0)) is None  # LEO 1, HW 0
    assert apply_checked(judged, Produce(TP, (2,), 1, broker=1)) is None
    assert apply_checked(judged, Deliver(CLIENT, 1, 0)) is None  # LEO 2, HW 0
    answers = send(judged, ConsumerFetch(TP, 1, broker=1, max_wait_ms=500), 1)
    assert not [a for a in answers if isinstance(a, FetchResponse)]
    corr = max(judged.arrivals.arrivals)
    request = judged.arrivals.arrivals[corr].request
    empty = FetchResponse(
        corr, Errors.NONE, (FetchPartitionResponse(TP, Errors.NONE, 0, 0, 0, ()),)
    )
    reason = judge(
        request, empty, 1, TP, judged.recorder.state, judged.recorder.cluster, waited_ms=0
    )
    assert reason is not None and "before its max_wait_ms (500)" in reason
    assert waiting(judged) == []
    replicate(judged)  # the HW passes offset 1: the FETCH completes with record 2
    answers = [e.payload for e in judged.recorder.cluster.network.queue((1, CLIENT))]
    fetched = [a for a in answers if isinstance(a, FetchResponse)]
    assert [[e.record_id for e in f.partitions[0].records] for f in fetched] == [[2]]


def test_an_early_or_late_delayed_fetch_answer_is_named() -> None:
    """An empty answer before the wait is over, a FETCH still held after its wait, and one
    held though its bytes are there: each is named."""
    judged = recorder()
    send(judged, ConsumerFetch(TP, 0, broker=1, max_wait_ms=500), 1)
    [corr] = judged.arrivals.arrivals
    request = judged.arrivals.arrivals[corr].request
    empty = FetchResponse(
        corr, Errors.NONE, (FetchPartitionResponse(TP, Errors.NONE, 0, 0, 0, ()),)
    )
    reason = judge(
        request, empty, 1, TP, judged.recorder.state, judged.recorder.cluster, waited_ms=0
    )
    assert reason is not None and "before its max_wait_ms (500)" in reason
    assert (
        judge(request, empty, 1, TP, judged.recorder.state, judged.recorder.cluster, waited_ms=500)
        is None
    )
    assert waiting(judged) == []
    rich = dict(
        judged.recorder.state, hw=(1, 0)
    )  # as if the HW had passed a record the FETCH still waits for
    [(name, reason)] = held_request_violations(
        judged.recorder.cluster, rich, judged.arrivals.arrivals, judged.arrivals.answered
    )
    assert name == NAME and "it could complete (HW 1" in reason
    judged.recorder.cluster.clock.advance(500)  # the clock passes the deadline, no broker ticks
    [(name, reason)] = waiting(judged)
    assert name == NAME and "max_wait_ms (500) is over" in reason


def test_odd_batches_are_refused_without_offsets() -> None:
    """A batch without records is INVALID_RECORD at any broker (KafkaApis checks it first); a
    batch over message.max.bytes is MESSAGE_TOO_LARGE at the leader; both answer base offset
    and log start offset -1 (appendToLocalLog's UnknownLogAppendInfo), and neither is a spec
    action: the record retried alone is."""
    config = BrokerConfig(replica_fetch_wait_max_ms=0, max_message_bytes=1)
    judged = Judge(SpecRecorder(Cluster((1, 2), {"t": 1}, config=config), TP, {}))
    send(judged, Produce(TP, (), -1, broker=2), 2)
    send(judged, Produce(TP, (), -1, broker=1), 1)
    send(judged, Produce(TP, (1, 1), -1, broker=1), 1)
    assert [e.action for e in judged.recorder.events] == ["Init"]
    send(judged, Produce(TP, (1,), -1, broker=1), 1)
    assert [e.action for e in judged.recorder.events] == ["Init", "Produce"]
    answers = [
        (p.error, p.base_offset, p.log_start_offset)
        for b in (2, 1)
        for a in judged.recorder.cluster.network.queue((b, CLIENT))
        for p in a.payload.partitions
    ]
    assert answers == [
        (Errors.INVALID_RECORD, -1, -1),
        (Errors.INVALID_RECORD, -1, -1),
        (Errors.MESSAGE_TOO_LARGE, -1, -1),
    ]
    with_start = ProduceResponse(
        0, (ProducePartitionResponse(TP, Errors.MESSAGE_TOO_LARGE, -1, 0),)
    )
    reason = wrong(judged, Produce(TP, (2, 2), -1, broker=1), 1, with_start)
    assert reason is not None and "expected (-1, -1)" in reason


def test_a_produce_timed_out_before_its_timeout_is_named() -> None:
    """DelayedProduce expires when its timeout_ms has passed (R17): REQUEST_TIMED_OUT after
    less is too early, whatever the state; after the whole timeout it is right."""
    judged = recorder()
    send(judged, Produce(TP, (1,), -1, broker=1), 1)  # appended at 0, waiting for the follower
    before = set(judged.recorder.cluster.client.pending)
    judged.recorder.cluster.apply(Produce(TP, (1,), -1, broker=1))
    [corr] = set(judged.recorder.cluster.client.pending) - before
    request = judged.recorder.cluster.client.pending[corr].request
    timed_out = ProduceResponse(0, (ProducePartitionResponse(TP, Errors.REQUEST_TIMED_OUT, 0, 0),))
    early = judge(request, timed_out, 1, TP, judged.recorder.state, judged.recorder.cluster, 1_000)
    assert early is not None and "before its timeout_ms" in early
    assert (
        judge(
            request,
            timed_out,
            1,
            TP,
            judged.recorder.state,
            judged.recorder.cluster,
            request.timeout_ms,
        )
        is None
    )
