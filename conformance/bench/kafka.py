"""Benchmark of the real-cluster harness: start-up time, schedules per hour, the harness's overhead.

Runs one schedule (default: the leader is killed with -9 and restarted between produces, no
partition, so it needs no root) `--runs` times on a fresh real Kafka 2.6.3 cluster each time, and
reports per run: start-up (first JVM to broker 1 leading a full ISR), the steps, the final
observation (settling, the read, DumpLogSegments), the teardown, the total; the harness's own CPU
(this Python process) and the JVMs' CPU (every child, reaped). Schedules per hour is 3600 over
the median total. `measure` and `rows` are the engine of

    kreplica bench kafka [--runs N] [--schedule PATH]
"""

from __future__ import annotations

import os
import resource
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from kreplica.conformance.kafka.cluster import DEFAULT_UID_BASE, Layout, fresh_run_dir
from kreplica.conformance.kafka.install import CHECKOUT, find_installation
from kreplica.conformance.kafka.real import RealRun, run_schedule
from kreplica.conformance.kafka.schedule import Schedule, parse_schedule

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

RUN_DIR = CHECKOUT / "build" / "kafka-runs" / "bench"
"""The run directory, emptied at each run's start."""

COLUMNS = ("run", "start s", "steps s", "observe s", "teardown s", "total s", "harness CPU s",
           "JVM CPU s")  # fmt: skip
"""The columns of `rows`."""


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
    """CPU seconds of this process's children reaped so far (the JVMs)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(schedule: Schedule, runs: int, port_base: int) -> list[Measured]:
    """Run the schedule `runs` times, each on a fresh cluster in `RUN_DIR`."""
    return [measure_once(schedule, RUN_DIR, port_base) for _ in range(runs)]


@dataclass(frozen=True)
class Summary:
    """The medians over the runs."""

    start_seconds: float
    total_seconds: float
    harness_cpu: float

    @property
    def per_hour(self) -> float:
        """Schedules per hour: 3600 over the median total."""
        return 3600 / self.total_seconds

    @property
    def harness_share(self) -> float:
        """The harness's CPU as a share of one core over a run."""
        return self.harness_cpu / self.total_seconds


def summary(results: list[Measured]) -> Summary:
    """The medians of the start-up, the total and the harness's CPU."""
    return Summary(
        statistics.median(m.run.start_seconds for m in results),
        statistics.median(m.run.total_seconds for m in results),
        statistics.median(m.harness_cpu for m in results),
    )


def rows(results: list[Measured]) -> list[list[str]]:
    """One row per run (`COLUMNS`), then, for more than one run, the medians."""
    out = [[str(i), *_cells(m)] for i, m in enumerate(results, 1)]
    if len(results) > 1:
        out.append(["median", *(_median(results, col) for col in range(7))])
    return out


def _cells(m: Measured) -> list[str]:
    """One run's figures, as the table prints them."""
    r = m.run
    values = (r.start_seconds, m.steps_seconds, r.observe_seconds, r.teardown_seconds,
              r.total_seconds, m.harness_cpu, m.jvm_cpu)  # fmt: skip
    return [f"{v:.1f}" for v in values]


def _median(results: list[Measured], col: int) -> str:
    """The median of one column over the runs (of the printed figures, as the table has them)."""
    return f"{statistics.median(float(_cells(m)[col]) for m in results):.1f}"
