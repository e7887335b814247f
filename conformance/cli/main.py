"""The `kreplica` command line: the click group. Each subcommand lives in its own module of this
room; `errors.run_command` turns every error into one stderr line and an exit code."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from kreplica.conformance.cli.bench import bench_group
from kreplica.conformance.cli.check import check
from kreplica.conformance.cli.conform import conform_command
from kreplica.conformance.cli.coverage import coverage_command
from kreplica.conformance.cli.demo import demo_command
from kreplica.conformance.cli.explain import explain_command
from kreplica.conformance.cli.fuzz import fuzz
from kreplica.conformance.cli.kafka import kafka_group
from kreplica.conformance.cli.kafka_compare import compare_command, predict_command
from kreplica.conformance.cli.kafka_trace import convert_command, trace_command
from kreplica.conformance.cli.mutate import mutate_command
from kreplica.conformance.cli.replay import replay_command
from kreplica.conformance.cli.walk import walk_command
from kreplica.conformance.errors import PROG, run_command


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


main.add_command(check)
main.add_command(replay_command)
main.add_command(fuzz)
main.add_command(conform_command)
main.add_command(coverage_command)
main.add_command(explain_command)
main.add_command(demo_command)
main.add_command(mutate_command)
main.add_command(walk_command)
main.add_command(bench_group)
kafka_group.add_command(compare_command)
kafka_group.add_command(predict_command)
kafka_group.add_command(trace_command)
kafka_group.add_command(convert_command)
main.add_command(kafka_group)
