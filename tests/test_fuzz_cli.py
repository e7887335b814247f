"""`kreplica fuzz` end to end: exit codes, saved files, and every bad input."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from cli_helpers import fuzz, one_error_line

from kreplica.conformance.replay.schedule import read_schedule, replay_schedule
from kreplica.conformance.tla.itf import read_trace


def test_a_clean_campaign_exits_0_and_writes_nothing(tmp_path: Path) -> None:
    """The default campaign, of stages (tests/test_fuzz_stages.py), and the correct protocol's
    alone."""
    out = tmp_path / "out"
    result = fuzz("--examples", "20", "--steps", "30", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "no invariant failed in the stages that check them" in result.stdout
    assert "stages sharing 20 runs, seed 0; 3 replicas" in result.stdout
    result = fuzz("--stages", "correct", "--examples", "20", "--steps", "30", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "no invariant failed" in result.stdout
    assert "variant default, 3 replicas" in result.stdout and "seed 0" in result.stdout
    assert not out.exists()


def test_a_violation_exits_1_and_saves_the_shrunk_run(tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["--variant", "acks=1", "--examples", "300", "--steps", "40", "--seed", "1"]
    result = fuzz(*args, "--out", str(out))
    assert result.exit_code == 1, result.output
    assert "violation AckedRecordsNeverLost" in result.stdout
    trace_path = out / "acks-1-r3-s1.itf.json"
    schedule_path = out / "acks-1-r3-s1.schedule.json"
    assert sorted(out.iterdir()) == sorted([trace_path, schedule_path])
    assert f"trace: {trace_path}" in result.stdout and f"schedule: {schedule_path}" in result.stdout
    schedule = read_schedule(schedule_path)
    assert replay_schedule(schedule).violation == schedule.violation
    assert read_trace(trace_path).meta["seed"] == 1


def test_zero_examples_run_nothing_and_write_nothing(tmp_path: Path) -> None:
    result = fuzz("--examples", "0", "--out", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    assert "runs 0, steps 0" in result.stdout
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--variant", "colour=blue"], "bad --variant 'colour=blue'; expected NAME=VALUE"),
        (["--variant", "truncation"], "bad --variant 'truncation'; expected NAME=VALUE"),
        (["--variant", "truncation=zk"], "unknown value 'zk' for truncation; choose one of"),
        (["--bug", "off-by-one"], "unknown bug 'off-by-one'; choose from early-ack"),
        (["--variant", "elr=on"], "elr=on (KIP-966) is not implemented"),
        (["--examples", "-1"], "Invalid value for '--examples'"),
        (["--examples", "many"], "Invalid value for '--examples'"),
        (["--steps", "0"], "Invalid value for '--steps'"),
        (["--seed", "-3"], "Invalid value for '--seed'"),
        (["--replicas", "1"], "Invalid value for '--replicas'"),
        (["--replicas", "9"], "Invalid value for '--replicas'"),
        (["--max-faults", "x"], "Invalid value for '--max-faults'"),
        (["--colour"], "No such option '--colour'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = fuzz(*args, "--out", str(out))
    assert result.exit_code == 2, result.output
    line = one_error_line(result)
    assert line.startswith("kreplica: error: ") and message in line, line
    assert result.stdout == "" and not out.exists()


def test_an_out_that_is_a_file_is_bad_input(tmp_path: Path) -> None:
    taken = tmp_path / "taken"
    taken.write_text("")
    result = fuzz("--examples", "1", "--out", str(taken))
    assert result.exit_code == 2
    assert "Invalid value for '--out'" in one_error_line(result)


def test_an_unwritable_out_is_one_line_before_the_campaign(tmp_path: Path) -> None:
    """The campaign does not start: stdout stays empty (no summary of runs that never were)."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    args = ["--variant", "acks=1", "--examples", "300", "--steps", "40", "--seed", "1"]
    result = fuzz(*args, "--out", str(blocker / "sub"))
    assert result.exit_code == 2
    assert one_error_line(result) == (
        f"kreplica: error: cannot write failures to {blocker / 'sub'}: {blocker} is not a directory"
    )
    assert result.stdout == ""


def test_a_failure_that_cannot_be_saved_is_still_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A disk that fills up during the campaign: the violation found is printed, then the one
    line saying why it was not saved, and exit 2."""

    def no_space(*_: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "out"))

    monkeypatch.setattr("kreplica.conformance.cli.fuzz.save_failure", no_space)
    result = fuzz("--bug", "early-ack", "--no-unclean", "--out", str(tmp_path / "out"))
    assert result.exit_code == 2
    assert "violation ClientAnswersMatchLeader" in result.stdout
    assert one_error_line(result).endswith(": No space left on device")
