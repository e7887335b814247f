"""Every `python -m` entry point, and each fixture recorder, meets bad input with one clear line
on stderr and exit 2, never a traceback (issue 11): each is run as a real process, as a user
runs it, with a bad path or a bad value, and must refuse it at once, before any benchmark,
corpus or TLC work. All of them report through one function, `errors.run_command`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 60
"""Seconds a case may take at most; each takes about one (a Python start-up)."""


@dataclass(frozen=True)
class BadInput:
    """One entry point run with one bad input: its command line (`{tmp}` is a fresh temporary
    directory), the program name its error line starts with, and what the line must name."""

    id: str
    argv: tuple[str, ...]
    names: str

    def command(self, tmp: Path) -> list[str]:
        """The process's argv."""
        return [sys.executable, *(word.format(tmp=tmp) for word in self.argv)]

    @property
    def label(self) -> str:
        """The test id: the entry point and its bad arguments."""
        return f"{self.id} {' '.join(self.argv[2 if self.argv[0] == '-m' else 1 :])}"

    @property
    def prog(self) -> str:
        """`python -m MODULE` or `python SCRIPT`, as the error line calls the program."""
        return "python " + " ".join(self.argv[:2] if self.argv[0] == "-m" else self.argv[:1])


def module(name: str, *args: str, names: str) -> BadInput:
    """`python -m kreplica.conformance.NAME ARGS`."""
    return BadInput(name.replace(".", "-"), ("-m", f"kreplica.conformance.{name}", *args), names)


def script(path: str, *args: str, names: str) -> BadInput:
    """`python tests/fixtures/...PATH ARGS`."""
    name = path.removesuffix(".py").replace("/", "-")
    return BadInput(name, (f"tests/fixtures/{path}", *args), names)


CASES = [
    module("fuzz.random_walk", "--out", "{tmp}/missing/dir/x.jsonl", names="{tmp}/missing/dir"),
    module("fuzz.random_walk", "--out", "/proc/x.jsonl", names="/proc/x.jsonl"),
    module("fuzz.random_walk", "--out", "{tmp}", names="{tmp}"),
    module("fuzz.random_walk", "--out", "/dev/full", names="/dev/full"),
    module("bench.conform", "--corpus", "{tmp}/nope.jsonl", names="{tmp}/nope.jsonl"),
    module("bench.tlc", "--corpus", "{tmp}/nope.jsonl", names="{tmp}/nope.jsonl"),
    module("bench.tlc", "--corpus", "{tmp}", names="{tmp}"),
    module("bench.hidden", "--traces", "0", names="--traces"),
    module("bench.fuzz", "--only", "NoSuchTarget", names="NoSuchTarget"),
    module("bench.fuzz", "--seeds", "-1", names="--seeds"),
    module("bench.impl", "--rounds", "-1", names="--rounds"),
    module("bench.impl", "--brokers", "2", names="--brokers"),
    module("bench.checkpoints", "--examples", "0", names="--examples"),
    script("tlc/record.py", "NoSuchConfig", names="NoSuchConfig"),
    script("tlc/kafka/record.py", "NoSuchConfig", names="NoSuchConfig"),
]
"""At least one bad input per entry point."""


def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """Run a process in the checkout, as a user would, with a time limit."""
    return subprocess.run(
        argv, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT, check=False
    )


@pytest.mark.parametrize("case", CASES, ids=[c.label for c in CASES])
def test_a_bad_path_gets_one_error_line_and_exit_2(case: BadInput, tmp_path: Path) -> None:
    before = sorted(tmp_path.rglob("*"))
    done = run(case.command(tmp_path))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "Traceback" not in done.stdout
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].strip(), done.stderr
    assert lines[0].startswith(f"{case.prog}: error: "), lines[0]
    assert case.names.format(tmp=tmp_path) in lines[0]
    assert sorted(tmp_path.rglob("*")) == before  # refused before writing anything


def test_a_usage_error_points_to_the_programs_own_help() -> None:
    """A usage error says which --help to read: the `python -m` line, not `kreplica`."""
    done = run([sys.executable, "-m", "kreplica.conformance.bench.impl", "--colour"])
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "python -m kreplica.conformance.bench.impl: error: No such option '--colour'. "
        "(see 'python -m kreplica.conformance.bench.impl --help')"
    )


def test_the_fixture_recorders_check_every_config_before_tlc_runs() -> None:
    """The unknown config comes second: TLC would have run on the first, and rewritten its
    fixture, had the names not all been checked first."""
    fixture = ROOT / "tests/fixtures/tlc/output/CounterOk.out"
    stamp = fixture.stat().st_mtime_ns
    done = run([sys.executable, "tests/fixtures/tlc/record.py", "CounterOk", "NoSuchConfig"])
    assert done.returncode == 2 and done.stdout == ""
    assert fixture.stat().st_mtime_ns == stamp


def test_a_good_random_walk_still_writes_its_corpus(tmp_path: Path) -> None:
    out = tmp_path / "ok.jsonl"
    done = run(
        [sys.executable, "-m", "kreplica.conformance.fuzz.random_walk",
         "--traces", "2", "--steps", "5", "--out", str(out)]
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2
    assert [json.loads(line)["#meta"]["id"] for line in lines] == ["walk-0-0", "walk-0-1"]
