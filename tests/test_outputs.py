"""Output paths are checked before any long work (conformance/cli/outputs.py): a run that cannot
write its results says so at once, in one line naming the path, and creates nothing."""

from __future__ import annotations

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
