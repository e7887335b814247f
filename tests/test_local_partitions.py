"""The fuzzer's cluster with a local partition per broker (conformance/bridge/local_partitions.py),
and a consumer's FETCH of two partitions, judged by client_answers on a real cluster."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from kreplica.conformance.bridge.local_partitions import (
    LOCAL_RECORDS,
    SPEC_TP,
    local_partition,
    spec_cluster,
)
from kreplica.conformance.bridge.projection import CLIENT
from kreplica.conformance.bridge.recorder import SpecRecorder
from kreplica.conformance.bridge.step_codec import step_from_json, step_to_json
from kreplica.conformance.errors import TraceError
from kreplica.conformance.fuzz.setup import CONFIG, FuzzSetup
from kreplica.conformance.judges.checked_steps import Judge, apply_checked
from kreplica.conformance.judges.client_answers import judge
from kreplica.conformance.replay.schedule import (
    Schedule,
    dumps_schedule,
    replay_schedule,
    schedule_from_json,
)
from kreplica.impl.messages import RECORD_SIZE_BYTES, FetchResponse, LogEntry
from kreplica.impl.steps import (
    ConsumerFetch,
    Crash,
    Deliver,
    DetectFailure,
    DoWork,
    Produce,
    Restart,
)
from kreplica.impl.variants import Variant

R = RECORD_SIZE_BYTES


def recorder() -> Judge:
    """The fuzzer's cluster of three brokers, recorded for t-0."""
    return Judge(SpecRecorder(spec_cluster(3, Variant(), CONFIG, LOCAL_RECORDS), SPEC_TP, {}))


def drain(judged: Judge, rounds: int = 6) -> None:
    """Deliver every message and run every fetcher, `rounds` times, every step checked."""
    c = judged.recorder.cluster
    for _ in range(rounds):
        for link in c.network.deliverable_links():
            assert apply_checked(judged, Deliver(*link)) is None
        for b in c.broker_ids:
            for source in c.brokers[b].workable_fetchers():
                assert apply_checked(judged, DoWork(b, source)) is None


def fetch(judged: Judge, step: ConsumerFetch) -> FetchResponse:
    """Send `step` to broker 1 and deliver it, checked; the answer."""
    for s in (step, Deliver(CLIENT, 1, 0)):
        assert apply_checked(judged, s) is None, s
    answer = judged.recorder.cluster.network.queue((1, CLIENT))[-1].payload
    assert isinstance(answer, FetchResponse)
    assert apply_checked(judged, Deliver(1, CLIENT, 0)) is None
    return answer


def counts(answer: FetchResponse) -> dict[str, int]:
    """Records per partition of an answer."""
    return {str(p.tp): len(p.records) for p in answer.partitions}


def test_each_broker_leads_its_local_partition_with_records_and_t0_starts_empty() -> None:
    """Three flushed records per local partition, under its HW; nothing in flight; t-0 as a
    cluster without local partitions has it."""
    c = spec_cluster(3, Variant(), CONFIG, LOCAL_RECORDS)
    for b in c.broker_ids:
        log = c.log(b, local_partition(b))
        assert log is not None and c.leader(local_partition(b)) == b
        assert (log.log_end_offset, log.high_watermark, log.recovery_point) == (3, 3, 3)
        assert c.assignment[local_partition(b)] == (b,)
    assert c.next_record(SPEC_TP).record_ids == (1,)  # t-0's records from 1, as the spec's
    assert not c.network.deliverable_links() and not c.client.pending and not c.history
    assert spec_cluster(3, Variant(), CONFIG).partitions == [SPEC_TP]


@pytest.mark.parametrize(
    ("other_first", "other_offset", "limit", "expected"),
    [
        (True, 0, 2 * R, {"local-0": 2, "t-0": 0}),  # the local partition takes the limit
        (True, 0, 3 * R, {"local-0": 2, "t-0": 1}),  # 2 per partition, 1 record left for t-0
        (True, 0, R, {"local-0": 1, "t-0": 0}),  # nothing left: no first-message exemption
        (True, 3, R, {"local-0": 0, "t-0": 1}),  # nothing read first: the exemption stays
        (False, 0, 3 * R, {"t-0": 2, "local-0": 1}),
        (False, 1, R, {"t-0": 1, "local-0": 0}),
    ],
)
def test_two_partitions_share_the_response_limit_in_the_request_order(
    other_first: bool, other_offset: int, limit: int, expected: dict[str, int]
) -> None:
    """t-0 holds 3 committed records; every answer is judged right as it is sent."""
    judged = recorder()
    for record in (1, 2, 3):
        assert apply_checked(judged, Produce(SPEC_TP, (record,), 1, broker=1)) is None
        assert apply_checked(judged, Deliver(CLIENT, 1, 0)) is None
        drain(judged)
    drain(judged)
    assert judged.recorder.state["hw"][0] == 3
    step = ConsumerFetch(SPEC_TP, 0, 1, max_bytes=2 * R)
    step = replace(step, other=local_partition(1), other_offset=other_offset)
    step = replace(step, other_first=other_first)
    answer = fetch(judged, replace(step, response_max_bytes=limit))
    assert counts(answer) == expected
    order = [str(p.tp) for p in answer.partitions]
    assert order == (["local-0", "t-0"] if other_first else ["t-0", "local-0"])


def test_a_wrong_share_of_the_limit_is_named() -> None:
    """A t-0 record after the local partition used the whole limit, or a local record
    missing, is a wrong answer."""
    judged = recorder()
    assert apply_checked(judged, Produce(SPEC_TP, (1,), 1, broker=1)) is None
    assert apply_checked(judged, Deliver(CLIENT, 1, 0)) is None
    drain(judged)
    step = ConsumerFetch(SPEC_TP, 0, 1, other=local_partition(1), other_first=True)
    step = replace(step, response_max_bytes=2 * R)
    answer = fetch(judged, step)
    assert counts(answer) == {"local-0": 2, "t-0": 0}
    before = set(judged.recorder.cluster.client.pending)
    judged.recorder.cluster.apply(step)
    [corr] = set(judged.recorder.cluster.client.pending) - before
    sent = judged.recorder.cluster.client.pending[corr].request
    local, t0 = answer.partitions
    extra = replace(t0, records=(LogEntry(0, 0, 1),))
    reason = judge(
        sent,
        replace(answer, partitions=(local, extra)),
        1,
        SPEC_TP,
        judged.recorder.state,
        judged.recorder.cluster,
    )
    assert reason is not None and "0 bytes left" in reason and "expected []" in reason
    short = replace(local, records=local.records[:1])
    reason = judge(
        sent,
        replace(answer, partitions=(short, t0)),
        1,
        SPEC_TP,
        judged.recorder.state,
        judged.recorder.cluster,
    )
    assert reason is not None and "FETCH of local-0 at 0" in reason
    assert judge(sent, answer, 1, SPEC_TP, judged.recorder.state, judged.recorder.cluster) is None


def test_a_leader_and_isr_of_a_local_partition_alone_is_no_spec_action() -> None:
    """Broker 3 restarts: the controller sends it the state of both its partitions, its
    local one offline (leader -1, R23), then elects the local one in a request of its own,
    which the recorder leaves hidden."""
    judged = recorder()
    for step in (Crash(3), DetectFailure(3)):
        assert apply_checked(judged, step) is None
    drain(judged)
    assert apply_checked(judged, Restart(3)) is None
    queue = judged.recorder.cluster.network.queue((0, 3))
    assert [[s.tp for s in e.payload.partition_states] for e in queue] == [
        [local_partition(3), SPEC_TP],
        [local_partition(3)],
    ]
    events = judged.recorder.apply(Deliver(0, 3, 0))
    assert [e.action for e in events] == ["BecomeLeaderOrFollower"]
    assert judged.recorder.apply(Deliver(0, 3, 0)) == []
    assert judged.recorder.cluster.leader(local_partition(3)) == 3


def test_schedules_and_steps_keep_the_local_partitions() -> None:
    step = ConsumerFetch(SPEC_TP, 1, 2, other=local_partition(2), other_offset=2, other_first=True)
    step = replace(step, response_max_bytes=R)
    assert step_from_json(step_to_json(step)) == step
    schedule = FuzzSetup(Variant()).schedule([Produce(SPEC_TP, (1,), 1, broker=1)])
    assert schedule.local_records == LOCAL_RECORDS
    again = schedule_from_json(json.loads(dumps_schedule(schedule)))
    assert again.local_records == LOCAL_RECORDS
    assert replay_schedule(again).violation is None
    old = schedule.to_json()
    del old["local_records"]  # a schedule saved before the local partitions
    assert schedule_from_json(old).local_records == 0
    assert Schedule(Variant(), 3, ()).cluster().partitions == [SPEC_TP]
    with pytest.raises(TraceError, match="local_records"):
        schedule_from_json({**old, "local_records": -1})
