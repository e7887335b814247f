"""The `kreplica` command line: the click group. Each subcommand lives in its own module of this
room; `errors.run_command` turns every error into one stderr line and an exit code."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

import click

from kreplica.conformance.errors import PROG, run_command

COMMANDS: dict[str, str] = {
    "bench": "kreplica.conformance.cli.bench:bench_group",
    "check": "kreplica.conformance.cli.check:check",
    "conform": "kreplica.conformance.cli.conform:conform_command",
    "coverage": "kreplica.conformance.cli.coverage:coverage_command",
    "demo": "kreplica.conformance.cli.demo:demo_command",
    "explain": "kreplica.conformance.cli.explain:explain_command",
    "fuzz": "kreplica.conformance.cli.fuzz:fuzz",
    "kafka": "kreplica.conformance.cli.main:kafka_commands",  # a function that makes it
    "mutate": "kreplica.conformance.cli.mutate:mutate_command",
    "replay": "kreplica.conformance.cli.replay:replay_command",
    "walk": "kreplica.conformance.cli.walk:walk_command",
}
"""Each subcommand and where it lives (`module:attribute`). A module is imported only when its
command runs (or `--help` lists them all): `kreplica conform` need not import matplotlib,
Hypothesis and the benchmarks, about 0.8 s of every start."""


def kafka_commands() -> click.Group:
    """`kreplica kafka` with the subcommands that live in rooms of their own."""
    from kreplica.conformance.cli.kafka import kafka_group
    from kreplica.conformance.cli.kafka_compare import compare_command, predict_command
    from kreplica.conformance.cli.kafka_trace import convert_command, trace_command

    for command in (compare_command, predict_command, trace_command, convert_command):
        kafka_group.add_command(command)
    return kafka_group


def load_command(name: str) -> click.Command:
    """Import the command `name` of `COMMANDS` (or call the function there that makes it)."""
    module, _, attribute = COMMANDS[name].partition(":")
    found = getattr(importlib.import_module(module), attribute)
    command = found if isinstance(found, click.Command) else found()
    if not isinstance(command, click.Command) or command.name != name:
        raise TypeError(f"{COMMANDS[name]} is not the command {name!r}")
    return command


class KreplicaGroup(click.Group):
    """A click group that turns every user mistake into one stderr line and an exit code."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """Run the command line; exit with the command's exit code (`errors.run_command`)."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        run_command(self, prog_name or PROG, args, complete_var=complete_var, **extra)

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every subcommand's name, without importing it."""
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The subcommand `cmd_name`, imported now (None for a name that is no command)."""
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            self.add_command(load_command(cmd_name))
        return self.commands.get(cmd_name)


EXAMPLES = """\b
Examples:
  kreplica check                               model-check the ci suite of the spec
  kreplica replay traces/golden/S1_HwTruncation.itf.json
                                               drive the implementation through a trace
  kreplica fuzz --bug early-ack --no-unclean   find a seeded bug, shrink it, save it
  kreplica conform out/corpus.jsonl            check recorded traces against the spec
  kreplica kafka run schedules/acks-all-leader-crash.json
                                               run a fault schedule on a real Kafka cluster
  kreplica coverage out/corpus.jsonl           how much of the spec's state graph a corpus reached
  kreplica explain traces/golden/S1_HwTruncation.itf.json
                                               draw a trace: one lane per replica
  kreplica mutate                              how many small edits of impl/ fuzz + conform catch
  kreplica walk --traces 1000 --out out/corpus.jsonl
                                               a random-walk corpus, fast
  kreplica bench impl                          a benchmark: simulated messages per second

Each command's --help lists its options, examples and exit codes.
"""


@click.group(
    name=PROG,
    cls=KreplicaGroup,
    epilog=EXAMPLES,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(package_name="kreplica", prog_name=PROG, message="%(prog)s %(version)s")
def main() -> None:
    """kreplica: a model-checked reference implementation of Kafka partition replication."""
