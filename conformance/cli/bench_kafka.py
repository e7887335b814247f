"""`kreplica bench kafka` and `kreplica bench kafka-agent`: the benchmarks that start real
Kafka clusters (ZooKeeper and three broker JVMs), apart from the simulator's.

Each parses its options, calls its engine (`kreplica.conformance.bench.kafka`, `.kafka_agent`)
and renders the figures as docs/real-kafka.md quotes them. `cli.bench` adds both to the
`kreplica bench` group.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from kreplica.conformance.bench import kafka as kafka_bench
from kreplica.conformance.bench import kafka_agent as agent_bench
from kreplica.conformance.cli.console import markdown_table
from kreplica.conformance.errors import KreplicaError, file_error
from kreplica.conformance.kafka.schedule import load_schedule

# -- kafka -----------------------------------------------------------------------------------


KAFKA_EXIT_CODES = """\b
Exit codes:
  0  the figures are printed
  2  bad input: a bad option or number, {bad_input}
  3  a node (ZooKeeper, a broker, the topic's first leader) was not ready in time
  4  the environment lacks something: {environment}
  5  a port the cluster needs is in use (see --port-base)
  6  a JVM exited on its own, or the cluster refused an admin request
  130  interrupted (Ctrl-C, SIGTERM): every JVM is stopped first
"""
"""The exit codes of a benchmark that starts real clusters (`kafka.cluster`, `kafka.install`)."""


KAFKA_EPILOG = """\b
Examples:
  kreplica bench kafka --runs 3
  kreplica bench kafka --runs 1 --schedule schedules/acks-all-leader-crash.json

Runs one schedule (default: the leader killed with -9 and restarted between
produces, acks=-1, no partition, so no root needed) --runs times, each on a
fresh real Kafka 2.6.3 cluster (ZooKeeper and three broker JVMs) in
build/kafka-runs/bench: per run the start-up, the steps, the final
observation, the teardown and the total; the harness's own CPU and the JVMs'.
Schedules per hour is 3600 over the median total.

""" + KAFKA_EXIT_CODES.format(
    bad_input="a missing or malformed\n     --schedule",
    environment="Java 11, the Kafka jars, root for\n"
    "     a --schedule with partitions ('make kafka' installs them)",
)


@click.command(
    name="kafka",
    epilog=KAFKA_EPILOG,
    short_help="The real-cluster harness: start-up, schedules/hour.",
)
@click.option(
    "--runs",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="Runs, each on a fresh cluster.",
)
@click.option(
    "--schedule",
    "schedule_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="A schedule file (default: a leader killed with -9 and restarted, acks=-1).",
)
@click.option(
    "--port-base",
    type=click.IntRange(1024, 65000),
    default=19390,
    show_default=True,
    help="ZooKeeper's port; broker N listens on PORT_BASE+N.",
)
def kafka_command(runs: int, schedule_path: Path | None, port_base: int) -> None:
    """Real-cluster start-up time, schedules per hour, and the harness's own overhead."""
    schedule = load_schedule(schedule_path) if schedule_path else kafka_bench.REFERENCE
    results = kafka_bench.measure(schedule, runs, port_base)
    table = Table(title="kreplica kafka: the real-cluster harness")
    for name in kafka_bench.COLUMNS:
        table.add_column(name, justify="right")
    for row in kafka_bench.rows(results):
        table.add_row(*row)
    out = Console(highlight=False, markup=False)
    out.print(table)
    s = kafka_bench.summary(results)
    out.print(
        f"schedule {schedule.name} ({len(schedule.steps)} steps), {runs} runs: "
        f"start-up {s.start_seconds:.1f}s, {s.per_hour:.0f} schedules/hour, "
        f"harness CPU {s.harness_cpu:.1f}s per run ({100 * s.harness_share:.0f}% of one core)",
        soft_wrap=True,
    )


# -- kafka-agent -----------------------------------------------------------------------------

AGENT_EPILOG = """\b
Examples:
  kreplica bench kafka-agent --runs 3 --markdown
  kreplica bench kafka-agent --runs 3 --records 200 --prefill 2000 --no-pipelined --markdown
  kreplica bench kafka-agent --runs 1 --json out/agent.json

Starts the harness's real Kafka 2.6.3 cluster without kreplica's Java agent,
then with it, alternately, --runs pairs; on each, after --warmup and --prefill
records (not timed), it times --records acks=-1 produces one in flight and,
unless --no-pipelined, pipelined (5 in flight): records/s, p50 and p99 latency,
the brokers' CPU and the agent's event lines and bytes per record; then the
medians of each side and the ratio with/without.

""" + KAFKA_EXIT_CODES.format(
    bad_input="a missing --agent jar, a --json\n"
    "     in no directory, an agent that wrote no events.jsonl",
    environment="Java 11, the Kafka jars\n     ('make kafka' installs them)",
)


def agent_table(results: list[agent_bench.Measured]) -> Table:
    """The report as a rich table."""
    table = Table(title="kreplica's agent on real Kafka 2.6.3: acks=-1 produces of small records")
    for name in agent_bench.COLUMNS:
        table.add_column(name, justify="left" if name in ("agent", "phase") else "right")
    for row in agent_bench.rows(results):
        table.add_row(*row)
    return table


def agent_markdown(results: list[agent_bench.Measured]) -> str:
    """The report as a GitHub markdown table."""
    return markdown_table(agent_bench.COLUMNS, agent_bench.rows(results))


@click.command(
    name="kafka-agent", epilog=AGENT_EPILOG, short_help="What the Java agent costs a real broker."
)
@click.option(
    "--runs",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="Pairs of clusters: without the agent, then with it.",
)
@click.option(
    "--records",
    type=click.IntRange(min=1),
    default=500,
    show_default=True,
    help="Records timed per phase.",
)
@click.option(
    "--warmup",
    type=click.IntRange(min=0),
    default=100,
    show_default=True,
    help="Records sent one at a time first, not timed.",
)
@click.option(
    "--prefill",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Records then sent all at once, not timed: the log the phases start from.",
)
@click.option(
    "--pipelined/--no-pipelined",
    default=True,
    show_default=True,
    help="Also time 5 requests in flight, every send issued at once.",
)
@click.option(
    "--agent",
    "agent_jar",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=agent_bench.AGENT_JAR,
    show_default=True,
    help="The agent's jar (make kafka builds it).",
)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=agent_bench.WORKDIR,
    show_default=True,
    help="Run directories: WORKDIR/without and WORKDIR/with, emptied at each start.",
)
@click.option(
    "--port-base",
    type=click.IntRange(1024, 65000),
    default=19690,
    show_default=True,
    help="ZooKeeper's port; broker N listens on PORT_BASE+N.",
)
@click.option("--markdown", is_flag=True, help="Print a markdown table instead of a rich one.")
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write every figure as JSON here.",
)
def kafka_agent_command(
    runs: int,
    records: int,
    warmup: int,
    prefill: int,
    pipelined: bool,
    agent_jar: Path,
    workdir: Path,
    port_base: int,
    markdown: bool,
    json_path: Path | None,
) -> None:
    """What kreplica's Java agent costs a real broker: produce throughput and latency, CPU and
    event bytes per record, without the agent and with it, alternately."""
    if json_path is not None and not json_path.parent.is_dir():
        raise KreplicaError(f"--json {json_path}: no directory {json_path.parent}")
    counts = agent_bench.Counts(warmup, prefill, records, pipelined)
    load_before = os.getloadavg()
    results = agent_bench.measure(runs, counts, agent_jar, workdir, port_base)
    load_after = os.getloadavg()
    out = Console(highlight=False, markup=False, width=None if sys.stdout.isatty() else 120)
    out.print(agent_markdown(results) if markdown else agent_table(results), soft_wrap=markdown)
    out.print(
        f"{runs} pairs; per cluster {warmup} warm-up records, {prefill} prefilled, "
        f"{records} timed per phase; load average before {_load(load_before)}, "
        f"after {_load(load_after)}; {os.cpu_count()} CPUs",
        soft_wrap=True,
    )
    if json_path is not None:
        settings = {
            "counts": asdict(counts),
            "agent_jar": str(agent_jar),
            "port_base": port_base,
            "load_average": {"before": load_before, "after": load_after},
            "cpus": os.cpu_count(),
        }
        text = json.dumps(agent_bench.to_json(results, settings), indent=2) + "\n"
        try:
            json_path.write_text(text, encoding="utf-8")
        except OSError as err:
            raise file_error("write", json_path, err) from None


def _load(load: tuple[float, float, float]) -> str:
    """Load averages as the summary line prints them."""
    return " ".join(f"{x:.2f}" for x in load)
