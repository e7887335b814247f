"""Planned leader changes: half the fuzz runs move leadership two or three times, so followers
cache several epochs (R6's truncation across epochs) and elections follow each other (S4); the
summary counts leader changes and truncations across epochs."""

from __future__ import annotations

from kreplica.conformance.bridge.recorder import SpecRecorder
from kreplica.conformance.fuzz.campaign import churn_line, machine_for, run_fuzz
from kreplica.conformance.fuzz.choices import CHOICES, took_office, wrote_in_office
from kreplica.conformance.fuzz.plan import LEADER_CHANGES, Budget
from kreplica.conformance.fuzz.runs import RunStats
from kreplica.conformance.fuzz.setup import FuzzSetup
from kreplica.conformance.replay.schedule import TP
from kreplica.impl.steps import Crash, Deliver, DetectFailure, DoWork, Elect, Produce


def test_a_patient_change_waits_until_the_leader_wrote_in_its_epoch() -> None:
    """A planned change may move leadership to any other live ISR replica; a patient one (not
    hasty) waits until the leader has taken office and written in its epoch, so it never
    deposes a leader with an epoch it wrote nothing in (KAFKA-10706's start)."""
    recorder = SpecRecorder(FuzzSetup().schedule().cluster(), TP, {})
    offered = CHOICES["change_leader"](recorder.cluster, recorder.state)
    assert offered == [Elect(TP, 2), Elect(TP, 3)]
    assert not wrote_in_office(recorder.state)
    for step in (Produce(TP, (1,), -1, 1), Deliver(-1, 1, 0)):
        recorder.apply(step)
    assert wrote_in_office(recorder.state)
    recorder.apply(Elect(TP, 2))  # the controller moved it; broker 2 has not taken office
    assert not took_office(recorder.state) and not wrote_in_office(recorder.state)
    recorder.apply(Deliver(0, 2, 0))
    assert took_office(recorder.state) and not wrote_in_office(recorder.state)


def test_a_change_returns_leadership_to_the_preferred_replica() -> None:
    """Away from the preferred replica (the first of the assignment, broker 1) a change may go
    to any other live ISR replica; back from it, only to the preferred one, as Kafka's
    preferred-replica election does, unless it is out of the ISR."""
    recorder = SpecRecorder(FuzzSetup().schedule().cluster(), TP, {})
    recorder.apply(Elect(TP, 3))
    assert CHOICES["change_leader"](recorder.cluster, recorder.state) == [Elect(TP, 1)]
    recorder.apply(Crash(1))
    recorder.apply(DetectFailure(1))  # broker 1 leaves the controller's ISR
    assert CHOICES["change_leader"](recorder.cluster, recorder.state) == [Elect(TP, 2)]


def test_the_controller_never_reorders_its_requests() -> None:
    """Kafka's controller sends a broker one request at a time (ControllerChannelManager), so
    the fuzzer delivers its LeaderAndIsr requests in order; other links may reorder."""
    recorder = SpecRecorder(FuzzSetup().schedule().cluster(), TP, {})
    recorder.apply(Elect(TP, 2))
    recorder.apply(Elect(TP, 3))  # two LeaderAndIsr requests queued for each broker
    assert len(recorder.cluster.network.queue((0, 1))) == 2
    assert CHOICES["reorder"](recorder.cluster, recorder.state) == []


def test_a_hasty_change_cuts_the_controller_off_from_the_preferred_leader() -> None:
    """A hasty change away from the preferred replica is the controller losing touch with it:
    a network partition keeps the controller's requests from the old leader, which goes on
    leading in its old epoch (the zombie leader of KIP-320) until the partition heals."""
    machine = machine_for(FuzzSetup(), RunStats(), 0, 50)()
    machine.start()
    machine.hasty = True
    machine.leader_changes = Budget(2)
    machine.change_leader(pick=0)
    assert (0, 1) in machine.cluster.network.blocked
    assert machine.recorder.state["ctrlLeader"] == 2
    assert machine.recorder.state["leader"][0] == 1  # broker 1 has not heard of it
    machine.teardown()  # the settle phase heals the partition
    assert not machine.cluster.network.blocked
    for setup in (FuzzSetup(network=False), FuzzSetup(only_faults=frozenset({"elect"}))):
        machine = machine_for(setup, RunStats(), 0, 50)()  # no partitions allowed: none
        machine.start()
        machine.hasty, machine.leader_changes = True, Budget(2)
        machine.change_leader(pick=0)
        assert machine.recorder.state["ctrlLeader"] == 2 and not machine.cluster.network.blocked


def test_a_hasty_change_waits_only_until_the_leader_took_office() -> None:
    """A hasty change may depose a leader that wrote nothing in its epoch, but not one that
    has not heard of it (its epoch cache would lack the epoch)."""
    machine = machine_for(FuzzSetup(), RunStats(), 0, 50)()
    machine.start()
    machine.hasty = True
    machine.leader_changes = Budget(2)
    machine._apply(Elect(TP, 2))
    assert machine.choices("change_leader") == []
    machine._apply(Deliver(0, 2, 0))
    assert machine.choices("change_leader") == [Elect(TP, 1)]


def test_a_run_counts_its_leader_changes_and_multi_epoch_requests() -> None:
    """The run's leader moved twice; broker 2, which wrote under epochs 0 and 1, then follows
    and asks where to truncate: the campaign's counters say so."""
    stats = RunStats()
    machine = machine_for(FuzzSetup(), stats, 0, 50)()
    machine.start()
    for step in (
        Produce(TP, (1,), -1, 1),
        Deliver(-1, 1, 0),
        DoWork(2, 1),  # broker 2 replicates record 1 (epoch 0)
        Deliver(2, 1, 0),
        Deliver(1, 2, 0),
        Elect(TP, 2),
        Deliver(0, 2, 0),
        Produce(TP, (2,), -1, 2),
        Deliver(-1, 2, 0),
        Elect(TP, 1),
    ):
        machine._apply(step)
    machine.teardown()
    assert stats.leader_changes == {2: 1}
    assert stats.multi_epoch_truncations >= 1
    assert churn_line(stats).startswith("leader changes: 1 of 1 runs moved the leader, 1 twice")


def test_half_the_runs_plan_leader_changes_and_the_campaign_makes_them() -> None:
    """Half the plans have two or three changes; a small default campaign moves the leader in
    a quarter of its runs at least (half of them plan changes)."""
    assert sorted(LEADER_CHANGES) == [0, 0, 2, 3]
    stats = run_fuzz(FuzzSetup(), examples=120, max_steps=40, shrink=False).stats
    runs = sum(stats.leader_changes.values())
    moved = sum(n for changes, n in stats.leader_changes.items() if changes >= 1)
    assert moved >= runs // 4, stats.leader_changes
