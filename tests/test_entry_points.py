"""Every `kreplica` subcommand that replaced a `python -m` program (`kreplica walk` and each
`kreplica bench NAME`), and each fixture recorder, meets bad input with one clear line on stderr
and exit 2, never a traceback (issue 11): each is run as a real process, as a user runs it, with
a bad path or a bad value, and must refuse it at once, before any benchmark, corpus or TLC work.
All of them report through one function, `errors.run_command`; each `--help` prints, with its
examples and exit codes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from kreplica.conformance.cli.bench import bench_group
from kreplica.conformance.cli.main import COMMANDS, main

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 60
"""Seconds a case may take at most; each takes about two (a Python start-up, the CLI's imports)."""


@dataclass(frozen=True)
class BadInput:
    """One entry point run with one bad input: its command line (`{tmp}` is a fresh temporary
    directory), the program name its error line starts with, and what the line must name."""

    id: str
    argv: tuple[str, ...]
    names: str
    prog: str
    """The program name the error line starts with."""

    def command(self, tmp: Path) -> list[str]:
        """The process's argv."""
        return [sys.executable, *(word.format(tmp=tmp) for word in self.argv)]

    @property
    def label(self) -> str:
        """The test id: the entry point and its bad arguments."""
        return f"{self.id} {' '.join(self.argv[2 if self.argv[0] == '-m' else 1 :])}"


def kreplica(*args: str, names: str) -> BadInput:
    """`kreplica ARGS`, run as `python -m kreplica ARGS` (the same program, no PATH needed)."""
    return BadInput("kreplica", ("-m", "kreplica", *args), names, "kreplica")


def script(path: str, *args: str, names: str) -> BadInput:
    """`python tests/fixtures/...PATH ARGS`."""
    name = path.removesuffix(".py").replace("/", "-")
    argv = (f"tests/fixtures/{path}", *args)
    return BadInput(name, argv, names, f"python tests/fixtures/{path}")


CASES = [
    kreplica("walk", "--out", "{tmp}/missing/dir/x.jsonl", names="{tmp}/missing/dir"),
    kreplica("walk", "--out", "/proc/x.jsonl", names="/proc/x.jsonl"),
    kreplica("walk", "--out", "{tmp}", names="{tmp}"),
    kreplica("walk", "--out", "/dev/full", names="/dev/full"),
    kreplica("walk", "--bug", "no-such-bug", "--out", "{tmp}/x.jsonl", names="no-such-bug"),
    kreplica("bench", "conform", "--corpus", "{tmp}/nope.jsonl", names="{tmp}/nope.jsonl"),
    kreplica("bench", "conform", "--mode", "spark cluster", names="--master"),
    kreplica("bench", "tlc", "--corpus", "{tmp}/nope.jsonl", names="{tmp}/nope.jsonl"),
    kreplica("bench", "tlc", "--corpus", "{tmp}", names="{tmp}"),
    kreplica("bench", "hidden", "--traces", "0", names="--traces"),
    kreplica("bench", "fuzz", "--only", "NoSuchTarget", names="NoSuchTarget"),
    kreplica("bench", "fuzz", "--seeds", "-1", names="--seeds"),
    kreplica("bench", "impl", "--rounds", "-1", names="--rounds"),
    kreplica("bench", "impl", "--brokers", "2", names="--brokers"),
    kreplica("bench", "checkpoints", "--examples", "0", names="--examples"),
    kreplica("bench", "search", "--seconds", "0", names="--seconds"),
    kreplica("bench", "search", "--examples", "0", names="--examples"),
    kreplica("bench", "kafka", "--schedule", "{tmp}/nope.json", names="{tmp}/nope.json"),
    kreplica("bench", "kafka", "--runs", "0", names="--runs"),
    kreplica("bench", "kafka-agent", "--agent", "{tmp}/nope.jar", names="{tmp}/nope.jar"),
    kreplica("bench", "kafka-agent", "--records", "0", names="--records"),
    script("tlc/record.py", "NoSuchConfig", names="NoSuchConfig"),
    script("tlc/kafka/record.py", "NoSuchConfig", names="NoSuchConfig"),
]
"""At least one bad input per entry point; none starts a JVM or records a trace."""


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


def test_a_usage_error_points_to_the_subcommands_own_help() -> None:
    """A usage error says which --help to read: the benchmark's, not the group's."""
    done = run([sys.executable, "-m", "kreplica", "bench", "impl", "--colour"])
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "kreplica: error: No such option '--colour'. (see 'kreplica bench impl --help')"
    )


BENCHMARKS = ("impl", "fuzz", "conform", "tlc", "hidden", "checkpoints", "search", "kafka",
              "kafka-agent", "swarm")  # fmt: skip
"""Every `kreplica bench` subcommand: one per module of kreplica.conformance.bench."""


def test_every_subcommand_loads_under_its_name() -> None:
    """The group lists its subcommands without importing them, and each loads as the command
    of that name (`kreplica kafka` with its four subcommands from other rooms)."""
    context = click.Context(main)
    assert main.list_commands(context) == sorted(COMMANDS)
    for name in COMMANDS:
        command = main.get_command(context, name)
        assert command is not None and command.name == name
    kafka = main.get_command(context, "kafka")
    assert isinstance(kafka, click.Group)
    assert {"compare", "predict", "trace", "convert", "run"} <= set(kafka.commands)
    assert main.get_command(context, "no-such-command") is None


@pytest.mark.parametrize("words", [["--version"], ["conform", "--help"], ["check", "--help"]])
def test_a_command_does_not_import_what_only_others_need(words: list[str]) -> None:
    """`kreplica conform` and `kreplica check` start without matplotlib, Hypothesis, PySpark
    or the benchmarks (importing every subcommand took about 1 s of each start)."""
    code = (
        "import sys; from kreplica.conformance.cli.main import main\n"
        f"try:\n    main({words!r})\nexcept SystemExit:\n    pass\n"
        "heavy = ['matplotlib', 'hypothesis', 'pyspark', 'kreplica.conformance.bench']\n"
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]"


def test_every_benchmark_module_has_its_subcommand() -> None:
    modules = {p.stem.replace("_", "-") for p in (ROOT / "conformance/bench").glob("[!_]*.py")}
    assert set(bench_group.commands) == modules == set(BENCHMARKS)


@pytest.mark.parametrize("words", [("walk",), ("bench",), *(("bench", b) for b in BENCHMARKS)],
                         ids=" ".join)  # fmt: skip
def test_each_help_prints_its_examples_and_exit_codes(words: tuple[str, ...]) -> None:
    result = CliRunner().invoke(main, [*words, "--help"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"Usage: kreplica {' '.join(words)} [OPTIONS]")
    assert f"kreplica {' '.join(words)} " in result.output.split("Examples:")[1]
    command: click.Command | None = main
    for word in words:
        assert isinstance(command, click.Group)
        command = command.get_command(click.Context(command), word)
    assert command is not None
    if not isinstance(command, click.Group):
        assert "Exit codes:" in result.output and "  0  " in result.output
        assert "  2  bad input" in result.output


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
        [sys.executable, "-m", "kreplica", "walk", "--traces", "2", "--steps", "5",
         "--out", str(out)]
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2
    assert [json.loads(line)["#meta"]["id"] for line in lines] == ["walk-0-0", "walk-0-1"]
