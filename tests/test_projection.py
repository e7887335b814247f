"""The projection of implementation state onto the spec's variables, and the recorder."""

from __future__ import annotations

from pathlib import Path

import pytest
from recorder_helpers import replicated

from kreplica.conformance.bridge.projection import NOT_HOSTED, Projector
from kreplica.conformance.bridge.recorder import Recorder
from kreplica.conformance.judges.invariants import violations
from kreplica.conformance.tla.tlavalue import Record
from kreplica.conformance.tla.tlc_output import parse_tlc_output
from kreplica.conformance.tla.vocabulary import VARIABLES
from kreplica.impl.cluster import Cluster
from kreplica.impl.config import BrokerConfig
from kreplica.impl.messages import TopicPartition
from kreplica.impl.steps import (
    CheckpointHighWatermarks,
    Crash,
    Deliver,
    DetectFailure,
    DoWork,
    Duplicate,
    Restart,
    Tick,
)
from kreplica.impl.variants import Variant

TP = TopicPartition("t", 0)
FIXTURE = Path(__file__).parent / "fixtures" / "tlc" / "kafka" / "Acks1Loss.out"


def cluster(n: int = 2, variant: Variant | None = None) -> Cluster:
    """A cluster whose follower fetches are answered at once, as the spec answers them."""
    config = BrokerConfig(replica_fetch_wait_max_ms=0)
    return Cluster(tuple(range(1, n + 1)), {"t": 1}, variant=variant or Variant(), config=config)


def test_initial_state_is_the_specs_init() -> None:
    """A new 2-broker cluster projects onto exactly the Init state TLC printed for the spec."""
    trace = parse_tlc_output(FIXTURE.read_text(), exit_code=12).to_itf({})
    assert trace is not None
    init = trace.states[0].values
    assert Projector(cluster(), TP).project() == {k: init[k] for k in VARIABLES}


def test_replicas_must_be_numbered_from_one() -> None:
    c = Cluster((2, 3), {"t": 1})
    with pytest.raises(ValueError, match=r"1\.\.n"):
        Projector(c, TP)


def test_a_replication_round_is_recorded_in_the_specs_words() -> None:
    c = cluster()
    rec = Recorder(c, TP, {})
    rec.apply(c.next_record(TP))  # the client sends: the spec does not see it
    rec.apply(Deliver(-1, 1))
    rec.apply(DoWork(2, 1))  # one fetcher iteration: truncate to the HW, then fetch
    rec.apply(Deliver(2, 1))
    rec.apply(Deliver(1, 2))
    assert [(e.action, e.args) for e in rec.events] == [
        ("Init", {}),
        ("Produce", {"replica": 1, "record": 1, "acks": -1}),
        ("FollowerTruncateToHighWatermark", {"replica": 2, "leader": 1}),
        ("LeaderHandleFetch", {"replica": 1, "follower": 2, "offset": 0}),
        ("FollowerHandleFetchResponse", {"replica": 2, "leader": 1}),
    ]
    last = rec.state
    assert last["log"] == (({"epoch": 0, "record": 1},), ({"epoch": 0, "record": 1},))
    assert last["nextRecord"] == 2
    # acks=-1: record 1 waits in the leader's purgatory until the HW passes offset 0.
    assert last["pending"] == frozenset({Record({"record": 1, "replica": 1, "offset": 0})})
    assert last["acked"] == frozenset()


def test_an_acks_0_produce_is_logged_with_its_acks_and_never_waits() -> None:
    """acks is per request: an acks=0 record in an acks=-1 run is neither pending nor acked."""
    c = cluster()
    rec = Recorder(c, TP, {})
    rec.apply(c.next_record(TP, acks=0))
    [event] = rec.apply(Deliver(-1, 1))
    assert (event.action, event.args) == ("Produce", {"replica": 1, "record": 1, "acks": 0})
    assert rec.state["log"][0] == ({"epoch": 0, "record": 1},)
    assert rec.state["pending"] == frozenset() and rec.state["acked"] == frozenset()


def test_copies_of_a_message_are_one_until_the_last_is_received() -> None:
    """A duplicated fetch request is one element of msgs, there until both copies arrive."""
    c = cluster()
    rec = Recorder(c, TP, {})
    rec.apply(DoWork(2, 1))
    request = rec.state["msgs"]
    rec.apply(Duplicate(2, 1))
    assert rec.state["msgs"] == request
    [first] = rec.apply(Deliver(2, 1))
    assert first.action == "LeaderHandleFetch" and request <= first.state["msgs"]
    [second] = rec.apply(Deliver(2, 1))
    assert second.action == "LeaderHandleFetch" and not request & second.state["msgs"]


def test_crash_and_detection_are_recorded() -> None:
    c = cluster(3)
    rec = Recorder(c, TP, {})
    rec.apply(Crash(2))
    rec.apply(DetectFailure(2))
    actions = [e.action for e in rec.events]
    assert actions == ["Init", "Crash", "ControllerDetectFailure"]
    assert rec.state["crashes"] == 1
    assert rec.state["ctrlIsr"] == frozenset({1, 3}) and rec.state["ctrlEpoch"] == 1


def test_invariants_hold_on_a_healthy_run_and_catch_a_lost_ack() -> None:
    c = cluster(2, Variant(acks="1"))
    rec = Recorder(c, TP, {})
    rec.apply(c.next_record(TP, acks=1))
    rec.apply(Deliver(-1, 1))
    assert violations(rec.state) == []
    rec.apply(Crash(1))
    rec.apply(DetectFailure(1))  # replica 2 is elected without record 1
    rec.apply(Deliver(0, 2))
    assert [name for name, _ in violations(rec.state)] == ["AckedRecordsNeverLost"]


def test_a_broker_hosts_no_partition_until_a_leader_and_isr_even_one_without_a_leader() -> None:
    """leaderEpoch is NOT_HOSTED (-2) while a broker is stopped and after it restarts; a
    LeaderAndIsr naming no leader makes it host the Partition, with Kafka's leader epoch -1."""
    c = cluster(2)
    rec = Recorder(c, TP, {})
    rec.apply(Crash(1))
    assert rec.state["leaderEpoch"] == (NOT_HOSTED, 0) == (-2, 0)
    rec.apply(Restart(1))  # a bounce: 2 leads epoch 1; its LeaderAndIsr to 1 stays queued
    rec.apply(Crash(2))
    rec.apply(DetectFailure(2))  # offline in epoch 2: 2 was the last ISR member
    assert rec.state["leaderEpoch"] == (NOT_HOSTED, NOT_HOSTED)
    [event] = rec.apply(Deliver(0, 1, index=len(c.network.queue((0, 1))) - 1))
    assert (event.action, event.args) == (
        "BecomeLeaderOrFollower", {"replica": 1, "epoch": 2, "leader": -1}
    )  # fmt: skip
    assert event.state["leaderEpoch"] == (-1, NOT_HOSTED)
    assert event.state["leader"] == (-1, -1)


def test_a_followers_isr_is_projected_as_it_holds_it() -> None:
    """The spec's isr of a follower is {} (Kafka's makeFollower empties it); the projection
    shows what the follower holds, so a follower that kept its ISR would not conform."""
    c = cluster()
    assert Projector(c, TP).project()["isr"] == (frozenset({1, 2}), frozenset())
    follower = c.partition(2, TP)
    assert follower is not None
    follower.in_sync_replica_ids = frozenset({1, 2})  # as if make_follower had kept it
    assert Projector(c, TP).project()["isr"][1] == frozenset({1, 2})


def test_the_clock_and_the_step_record_hw_checkpoints_one_broker_at_a_time() -> None:
    """A Tick that reaches the checkpoint task's time is one CheckpointHighWatermarks per
    broker whose file changed, each state changing only that broker's hwCheckpoint; the step
    runs the task at once, and is nothing when the file already holds the HW."""
    c, rec = replicated(2)
    assert rec.state["hwCheckpoint"] == (0, 0)  # nothing written since the first run
    events = rec.apply(Tick(5_000))
    assert [(e.action, e.args) for e in events] == [
        ("CheckpointHighWatermarks", {"replica": 1}),
        ("CheckpointHighWatermarks", {"replica": 2}),
    ]
    assert [e.state["hwCheckpoint"] for e in events] == [(2, 0), (2, 2)]
    assert rec.apply(CheckpointHighWatermarks(1)) == []  # it holds HW 2 already
    rec.apply(c.next_record(TP))
    rec.apply(Deliver(-1, 1))
    for _ in range(2):  # the follower fetches the record, then the leader's HW moves to 3
        for step in (DoWork(2, 1), Deliver(2, 1), Deliver(1, 2)):
            rec.apply(step)
    assert rec.state["hw"][0] == 3
    [event] = rec.apply(CheckpointHighWatermarks(1))
    assert event.action == "CheckpointHighWatermarks" and event.state["hwCheckpoint"] == (3, 2)
    rec.apply(Crash(1))
    assert rec.state["hw"][0] == 3
    [restart] = rec.apply(Restart(1))
    assert restart.state["hw"][0] == 3
