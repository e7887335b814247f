"""Planned leader changes: half the fuzz runs move leadership two or three times, so followers
cache several epochs (R6's truncation across epochs) and elections follow each other (S4); the
summary counts leader changes and truncations across epochs."""

from __future__ import annotations

from kreplica.conformance.bridge.checked_steps import SpecRecorder
from kreplica.conformance.bridge.schedule import TP
from kreplica.conformance.fuzz.campaign import churn_line, machine_for, run_fuzz
from kreplica.conformance.fuzz.choices import CHOICES, wrote_in_office
from kreplica.conformance.fuzz.machine import LEADER_CHANGES, RunStats
from kreplica.conformance.fuzz.setup import FuzzSetup
from kreplica.impl.steps import Deliver, DoWork, Elect, Produce


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
    assert CHOICES["change_leader"](recorder.cluster, recorder.state) == [
        Elect(TP, 1),
        Elect(TP, 3),
    ]
    assert not wrote_in_office(recorder.state)


def test_a_run_counts_its_leader_changes_and_multi_epoch_requests() -> None:
    """The run's leader moved twice; broker 2, which wrote under epochs 0 and 1, then follows
    and asks where to truncate: the campaign's counters say so."""
    stats = RunStats()
    machine = machine_for(FuzzSetup(), stats, 0, 50)()
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
    stats = run_fuzz(FuzzSetup(), examples=60, max_steps=40, shrink=False).stats
    runs = sum(stats.leader_changes.values())
    moved = sum(n for changes, n in stats.leader_changes.items() if changes >= 1)
    assert moved >= runs // 4, stats.leader_changes
