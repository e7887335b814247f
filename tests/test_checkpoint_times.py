"""HwCheckpointOnTime: the highwatermark-checkpoint task writes on Kafka's schedule (R13)."""

from __future__ import annotations

import pytest
from recorder_helpers import TP, replicated

from kreplica.conformance.bridge.recorder import SpecRecorder
from kreplica.conformance.judges.checked_steps import Judge, apply_checked
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
