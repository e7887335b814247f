"""Benchmark of the real-cluster harness: start-up time, schedules per hour, the harness's overhead.

Runs one schedule (default: the leader is killed with -9 and restarted between produces, no
partition, so it needs no root) `--runs` times on a fresh real Kafka 2.6.3 cluster each time, and
reports per run: start-up (first JVM to broker 1 leading a full ISR), the steps, the final
observation (settling, the read, DumpLogSegments), the teardown, the total; the harness's own CPU
(this Python process) and the JVMs' CPU (every child, reaped). Schedules per hour is 3600 over
the median total.

    .venv/bin/python -m kreplica.conformance.bench.kafka [--runs N] [--schedule PATH]
"""

from __future__ import annotations

import os
import resource
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from kreplica.conformance.errors import run_command
from kreplica.conformance.kafka.cluster import DEFAULT_UID_BASE, Layout, fresh_run_dir
from kreplica.conformance.kafka.install import CHECKOUT, find_installation
from kreplica.conformance.kafka.real import RealRun, run_schedule
from kreplica.conformance.kafka.schedule import Schedule, load_schedule, parse_schedule

REFERENCE = parse_schedule(
    {
        "name": "bench-leader-restart",
        "acks": -1,
        "steps": [
            {"op": "produce", "count": 5},
            {"op": "crash", "broker": 1},
            {"op": "produce", "count": 5},
            {"op": "restart", "broker": 1},
            {"op": "wait", "until": "isr-full"},
            {"op": "produce", "count": 5},
        ],
    }
)
"""The default schedule: a leader killed and restarted between produces (acks=-1)."""


@dataclass(frozen=True)
class Measured:
    """One run's timings and CPU."""

    run: RealRun
    harness_cpu: float
    jvm_cpu: float

    @property
    def steps_seconds(self) -> float:
        """Wall seconds the schedule's steps took."""
        return sum(s.seconds for s in self.run.steps)


def measure_once(schedule: Schedule, run_dir: Path, port_base: int) -> Measured:
    """Run the schedule once on a fresh cluster; time it and count CPU."""
    install = find_installation()
    uid_base = DEFAULT_UID_BASE if os.geteuid() == 0 else None
    layout = Layout(fresh_run_dir(run_dir), port_base, uid_base)
    cpu = time.process_time()
    children = _children_cpu()
    run = run_schedule(schedule, install, layout)
    return Measured(run, time.process_time() - cpu, _children_cpu() - children)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def report(results: list[Measured]) -> Table:
    """One row per run, then the medians."""
    table = Table(title="kreplica kafka: the real-cluster harness")
    for name in ("run", "start s", "steps s", "observe s", "teardown s", "total s",
                 "harness CPU s", "JVM CPU s"):  # fmt: skip
        table.add_column(name, justify="right")
    for i, m in enumerate(results, 1):
        table.add_row(str(i), *_cells(m))
    if len(results) > 1:
        table.add_row("median", *(_median(results, col) for col in range(7)))
    return table


def _cells(m: Measured) -> list[str]:
    r = m.run
    values = (r.start_seconds, m.steps_seconds, r.observe_seconds, r.teardown_seconds,
              r.total_seconds, m.harness_cpu, m.jvm_cpu)  # fmt: skip
    return [f"{v:.1f}" for v in values]


def _median(results: list[Measured], col: int) -> str:
    return f"{statistics.median(float(_cells(m)[col]) for m in results):.1f}"


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--runs", type=click.IntRange(min=1), default=3, show_default=True)
@click.option(
    "--schedule",
    "schedule_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="A schedule file (default: a leader killed with -9 and restarted, acks=-1).",
)
@click.option("--port-base", type=click.IntRange(1024, 65000), default=19390, show_default=True)
def main(runs: int, schedule_path: Path | None, port_base: int) -> None:
    """Real-cluster start-up time, schedules per hour, and the harness's own overhead."""
    schedule = load_schedule(schedule_path) if schedule_path else REFERENCE
    run_dir = CHECKOUT / "build" / "kafka-runs" / "bench"
    results = [measure_once(schedule, run_dir, port_base) for _ in range(runs)]
    out = Console(highlight=False, markup=False)
    out.print(report(results))
    total = statistics.median(m.run.total_seconds for m in results)
    start = statistics.median(m.run.start_seconds for m in results)
    harness = statistics.median(m.harness_cpu for m in results)
    out.print(
        f"schedule {schedule.name} ({len(schedule.steps)} steps), {runs} runs: "
        f"start-up {start:.1f}s, {3600 / total:.0f} schedules/hour, "
        f"harness CPU {harness:.1f}s per run ({100 * harness / total:.0f}% of one core)",
        soft_wrap=True,
    )


if __name__ == "__main__":
    run_command(main, "python -m kreplica.conformance.bench.kafka")
