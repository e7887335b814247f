"""HwCheckpointOnTime: the highwatermark-checkpoint task writes on Kafka's schedule (R13)."""

from __future__ import annotations

from pathlib import Path

import pytest
from recorder_helpers import TP, replicated

from kreplica.conformance.bridge.projection import NO_LEADER
from kreplica.conformance.bridge.recorder import SpecRecorder
from kreplica.conformance.judges.checked_steps import Judge, apply_checked
from kreplica.conformance.replay.schedule import read_schedule
from kreplica.impl.replica_manager import ReplicaManager
from kreplica.impl.steps import CheckpointHighWatermarks, Crash, Restart, Tick


def test_the_schedule_is_kept_across_ticks_and_restarts() -> None:
    _, rec = replicated(2, SpecRecorder)  # started at the bootstrap: due at once
    judge = Judge(rec)
    assert apply_checked(judge, Tick(1_000)) is None
    assert rec.state["hwCheckpoint"] == (2, 2)
    for _ in range(4):  # 4 s more: the next run is due at 5 s
        assert apply_checked(judge, Tick(999)) is None
    assert apply_checked(judge, Crash(2)) is None
    assert apply_checked(judge, Restart(2)) is None  # no LeaderAndIsr yet: no task on broker 2
    for _ in range(6):
        if apply_checked(judge, Tick(1_000)) is not None:
            pytest.fail("a correct schedule was flagged")
    assert apply_checked(judge, CheckpointHighWatermarks(1)) is None  # at once, off schedule


def test_a_due_run_that_writes_nothing_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    _, rec = replicated(1, SpecRecorder)
    judge = Judge(rec)
    monkeypatch.setattr(ReplicaManager, "maybe_checkpoint_high_watermarks", lambda self: False)
    found = apply_checked(judge, Tick(1))
    assert found is not None and found[0] == "HwCheckpointOnTime"
    assert "broker 1's checkpoint holds HW 0, expected 1" in found[1]


def test_a_write_between_runs_is_named() -> None:
    c, rec = replicated(1, SpecRecorder)
    judge = Judge(rec)
    assert apply_checked(judge, Tick(1)) is None  # the first run: HW 1 written
    c.log_managers[1].hw_checkpoint[TP] = 0  # as if a write happened off the schedule
    found = apply_checked(judge, Tick(1_000))  # the next run is due at 5 s
    assert found is not None and found[0] == "HwCheckpointOnTime"
    assert "broker 1's checkpoint holds HW 0, expected 1" in found[1]


OFFLINE_RESTART = (
    Path(__file__).parent / "fixtures" / "schedules"
    / "restart-while-offline-keeps-hw-checkpoint.schedule.json"
)  # fmt: skip


def test_a_broker_restarted_while_its_partition_is_offline_keeps_its_hw_checkpointed() -> None:
    """Broker 1 restarts while t-0 is offline and it cannot win the election; the controller
    still sends it t-0's state (leader -1, R23), so it hosts t-0 with its checkpointed HW, and
    the checkpoint task, started by its local partition's LeaderAndIsr, writes HW 1 again (it
    wrote a file without t-0 before: HwCheckpointOnTime)."""
    schedule = read_schedule(OFFLINE_RESTART)
    judge = Judge(SpecRecorder(schedule.cluster(), TP, {}))
    for step in schedule.steps:
        assert apply_checked(judge, step) is None, step
    state = judge.recorder.state
    assert state["ctrlLeader"] == NO_LEADER and state["alive"] == frozenset({1, 3})
    assert state["leaderEpoch"][0] == -1  # NoEpoch: it hosts t-0 (-2 would be NOT_HOSTED)
    assert isinstance(schedule.steps[-1], Tick)  # the task ran: its file holds t-0's HW
    assert state["hwCheckpoint"][0] == state["hw"][0] == 1
