"""`kreplica replay` of a saved schedule tells the truth (issue 43): it calls a replay "the same
as recorded" only when it shows the recorded failure itself, an exception with the same type
and message, not merely a failure of the same name; and a schedule that no longer applies (the
simulator refuses one of its steps) is exit 4, not a failure blamed on the implementation."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from kreplica.conformance.cli.main import main
from kreplica.conformance.cli.replay import EXIT_CANNOT_REPLAY
from kreplica.conformance.errors import EXIT_OK, EXIT_UNEXPECTED
from kreplica.conformance.fuzz.setup import FuzzSetup
from kreplica.conformance.judges.checked_steps import IMPLEMENTATION_ERROR, Violation
from kreplica.conformance.replay.schedule import (
    TP,
    Schedule,
    read_schedule,
    replay_schedule,
    same_failure,
    write_schedule,
)
from kreplica.impl.cluster import SimulationError
from kreplica.impl.log import LogAppendInfo
from kreplica.impl.partition import Partition
from kreplica.impl.steps import Deliver, Produce, Restart

REGRESSIONS = Path(__file__).parent.parent / "traces" / "regressions"
EARLY_ACK = REGRESSIONS / "bug-early-ack-r3-fcedpi4-s2.schedule.json"
"""A saved failure of two steps: a PRODUCE, then its delivery to broker 1."""

A_PRODUCE = (Produce(TP, (1,), -1, 1), Deliver(-1, 1, 0))
"""A producer's record delivered to broker 1, which leads: the leader appends it."""

RAISED = "ValueError: disk on fire"
"""What the broken implementation of these tests raises when it appends (`broken_append`)."""


def replay_file(path: Path) -> Result:
    """Run `kreplica replay PATH` in-process (so that a monkeypatched implementation runs)."""
    return CliRunner().invoke(main, ["replay", str(path)])


def saved(tmp_path: Path, schedule: Schedule, violation: Violation | None) -> Path:
    """`schedule`, recording `violation`, written as a schedule file."""
    path = tmp_path / "run.schedule.json"
    write_schedule(path, replace(schedule, violation=violation))
    return path


@pytest.fixture
def broken_append(monkeypatch: pytest.MonkeyPatch) -> None:
    """An implementation whose leader raises ValueError('disk on fire') when it appends to
    partition t-0 (the brokers' local partitions, filled as the cluster is set up, work)."""
    works = Partition.append_records_to_leader

    def append(self: Partition, record_ids: tuple[int, ...], required_acks: int) -> LogAppendInfo:
        if self.tp == TP:
            raise ValueError("disk on fire")
        return works(self, record_ids, required_acks)

    monkeypatch.setattr(Partition, "append_records_to_leader", append)


@pytest.mark.parametrize(
    ("recorded", "code"),
    [
        ((IMPLEMENTATION_ERROR, RAISED), EXIT_OK),
        ((IMPLEMENTATION_ERROR, "KeyError: 'disk on fire'"), EXIT_UNEXPECTED),  # another type
        ((IMPLEMENTATION_ERROR, "ValueError: disk full"), EXIT_UNEXPECTED),  # another message
        (None, EXIT_UNEXPECTED),  # a run that recorded no failure now fails
    ],
    ids=["same-type-and-message", "other-type", "other-message", "none-recorded"],
)
def test_a_recorded_exception_reproduces_only_with_its_type_and_message(
    broken_append: None, tmp_path: Path, recorded: Violation | None, code: int
) -> None:
    """The implementation raises `ValueError: disk on fire` at the schedule's second step.
    Replayed, a schedule that recorded exactly that is "the same as recorded" (0); one that
    recorded an ImplementationError of another type or message shows another failure (1),
    and says what it recorded."""
    path = saved(tmp_path, FuzzSetup().schedule(A_PRODUCE), recorded)
    result = replay_file(path)
    assert result.exit_code == code, result.output
    assert f"2 of 2 impl steps replayed\nviolation {IMPLEMENTATION_ERROR}: {RAISED}\n" in (
        result.stdout
    )
    if code == EXIT_OK:
        assert result.stdout.endswith("the same as recorded\n")
    else:
        shown = f"{recorded[0]}: {recorded[1]}" if recorded else "no violation"
        assert result.stdout.endswith(f"recorded: {shown}\n")


def test_same_failure_compares_an_exceptions_type_and_message_and_an_invariants_name() -> None:
    """The rule behind the verdict: an invariant is the same failure by its name (its reason
    names the state it broke in), an exception only by its type and message."""
    hw = ("HighWatermarkWithinLog", "broker 2: HW 3 above LEO 2")
    assert same_failure(hw, (hw[0], "broker 3: HW 1 above LEO 0"))
    assert not same_failure(hw, ("LogMatching", hw[1]))
    assert same_failure((IMPLEMENTATION_ERROR, RAISED), (IMPLEMENTATION_ERROR, RAISED))
    assert not same_failure((IMPLEMENTATION_ERROR, RAISED), (IMPLEMENTATION_ERROR, "KeyError: 1"))
    assert same_failure(None, None) and not same_failure(None, hw) and not same_failure(hw, None)


def test_a_schedule_that_no_longer_applies_is_exit_4_not_the_implementations_fault(
    tmp_path: Path,
) -> None:
    """A saved early-ack failure without its PRODUCE: its delivery finds nothing on the link.
    That is the schedule's fault (it no longer applies), so the replay says it cannot be
    replayed, names the step and exits 4, instead of reporting an ImplementationError and
    exiting 1."""
    schedule = read_schedule(EARLY_ACK)
    assert isinstance(schedule.steps[0], Produce) and isinstance(schedule.steps[1], Deliver)
    path = saved(tmp_path, replace(schedule, steps=schedule.steps[1:]), schedule.violation)
    result = replay_file(path)
    assert result.exit_code == EXIT_CANNOT_REPLAY, result.output
    assert result.stdout == (
        f"{path}: cannot be replayed: step 1 of 1: nothing to deliver at "
        "Deliver(src=-1, dst=1, index=0)\n"
    )
    assert "Traceback" not in result.output and IMPLEMENTATION_ERROR not in result.output


def test_a_refused_step_is_no_implementation_error_even_when_recorded_as_one(
    tmp_path: Path,
) -> None:
    """A Restart of a running broker, recorded as the ImplementationError the simulator's
    refusal once became: the simulator refuses the step, which proves nothing about the
    implementation, so the replay cannot be "the same as recorded": exit 4."""
    refusal = (IMPLEMENTATION_ERROR, "SimulationError: broker 1 is running; crash it first")
    path = saved(tmp_path, FuzzSetup().schedule([Restart(1)]), refusal)
    result = replay_file(path)
    assert result.exit_code == EXIT_CANNOT_REPLAY, result.output
    assert "cannot be replayed: step 1 of 1: broker 1 is running; crash it first" in result.stdout


def test_the_engine_raises_a_refused_step_with_its_place_in_the_schedule() -> None:
    """`schedule.replay` raises SimulationError for a step the simulator refuses, naming the
    step's place, so that no caller mistakes it for the implementation's exception."""
    steps = (*A_PRODUCE, Deliver(1, 2, 5))
    with pytest.raises(SimulationError, match=r"^step 3 of 3: nothing to deliver at Deliver"):
        replay_schedule(FuzzSetup().schedule(steps))


def test_the_help_says_what_the_same_and_exit_4_mean_for_a_schedule() -> None:
    """--help keeps the rules above true: 0 only for the recorded failure itself (an
    exception's type and message), 4 for a schedule that no longer applies."""
    text = " ".join(CliRunner().invoke(main, ["replay", "--help"]).output.split())
    assert "an exception: its type and message" in text
    assert "a schedule that no longer applies" in text
