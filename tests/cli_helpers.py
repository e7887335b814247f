"""Helpers the CLI tests share: running `kreplica` in-process and reading its one error line."""

from __future__ import annotations

from click.testing import CliRunner, Result

from kreplica.conformance.cli.main import main


def fuzz(*args: str) -> Result:
    """Run `kreplica fuzz ARGS` in-process."""
    return CliRunner().invoke(main, ["fuzz", *args])


def one_error_line(result: Result) -> str:
    """The single stderr line of a failed command (no traceback)."""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output
    return lines[0]
