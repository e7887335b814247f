"""Output paths are checked before any long work (conformance/cli/outputs.py): a run that cannot
write its results says so at once, in one line naming the path, and creates nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import one_error_line
from click.testing import CliRunner

from kreplica.conformance.cli.main import main
from kreplica.conformance.cli.outputs import check_output_dir, check_output_file
from kreplica.conformance.errors import KreplicaError

GOLDEN = Path(__file__).resolve().parent.parent / "traces" / "golden" / "Acks1Loss.itf.json"


def test_a_directory_that_can_be_created_passes_and_is_not_created(tmp_path: Path) -> None:
    check_output_dir(tmp_path / "a" / "b", "results to")
    check_output_file(tmp_path / "a" / "report.md", "the report")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda t: (t / "f").write_text("") or t / "f" / "sub", "{t}/f is not a directory"),
        (lambda t: (t / "f").write_text("") or t / "f", "not a directory"),
    ],
    ids=["below-a-file", "is-a-file"],
)
def test_an_output_directory_that_cannot_be_made_is_refused(
    tmp_path: Path, make: object, reason: str
) -> None:
    path = make(tmp_path)  # type: ignore[operator]
    with pytest.raises(KreplicaError, match=f"cannot write results to {path}: "):
        check_output_dir(path, "results to")
    with pytest.raises(KreplicaError) as err:
        check_output_dir(path, "results to")
    assert str(err.value).endswith(reason.format(t=tmp_path))


def test_a_directory_the_kernel_refuses_is_refused_even_for_root() -> None:
    with pytest.raises(KreplicaError, match="cannot write results to /proc/x: /proc is not"):
        check_output_dir(Path("/proc/x"), "results to")


def test_a_report_path_that_is_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(KreplicaError, match="it is a directory"):
        check_output_file(tmp_path, "the report")


def test_conform_into_an_unwritable_out_fails_at_once(tmp_path: Path) -> None:
    """`conform --out /proc/x`: one line and exit 2 before any TLC run (no results table)."""
    result = CliRunner().invoke(
        main, ["conform", str(GOLDEN), "--no-spark", "--out", "/proc/kreplica-out"]
    )
    assert result.exit_code == 2
    assert one_error_line(result).startswith("kreplica: error: cannot write results to /proc/")
    assert result.stdout == ""


def test_off_a_terminal_a_long_line_is_not_wrapped() -> None:
    """CI and pipes read whole lines: rich's 80 columns would split this 138-character line."""
    replay = Path(sys.executable).parent / "kreplica"
    args = [str(replay), "replay", str(GOLDEN.parent / "S1_HwTruncation.itf.json")]
    done = subprocess.run(
        [*args, "--variant", "truncation=kip279"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1, done.stderr
    line = done.stdout.splitlines()[0]
    assert line.startswith("differs at step 11 (FollowerTruncateToHighWatermark ")
    assert "the implementation did FollowerSendOffsetsForLeaderEpoch" in line
    assert len(line) > 100


def test_a_long_check_off_a_terminal_prints_progress_lines(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`check` in CI is never silent for minutes: a plain progress line per config at most every
    PLAIN_STATUS_SECONDS (here 0, so every report TLC makes is printed)."""
    monkeypatch.setattr("kreplica.conformance.cli.check.PLAIN_STATUS_SECONDS", 0.0)
    spec = Path(__file__).resolve().parent / "fixtures" / "tlc" / "spec"
    args = ["--spec-dir", str(spec), "--config", "CounterOk", "--out", str(tmp_path)]
    result = CliRunner().invoke(main, ["check", *args])
    assert result.exit_code == 0, result.output
    progress = [line for line in result.stderr.splitlines() if line.startswith("kreplica check: ")]
    assert progress and all(line.startswith("kreplica check: CounterOk: ") for line in progress)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--conf", "nope"], "Invalid value for '--conf': 'nope' is not KEY=VALUE"),
        (["--conf", "a=b", "--no-spark"], "--conf sets Spark properties; it does nothing"),
    ],
    ids=["not-key-value", "without-spark"],
)
def test_a_bad_spark_conf_is_one_line_before_spark_starts(args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["conform", str(GOLDEN), *args])
    assert result.exit_code == 2
    assert message in one_error_line(result)
