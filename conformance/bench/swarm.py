"""Benchmark `kreplica fuzz --master`: the same swarm of seeded campaigns on several Spark
masters, side by side, in one process.

    kreplica bench swarm --seeds 8 --examples 150

runs the correct protocol's campaigns of seeds 0 to 7 on local[1], then on local[2] (or on each
--master given, a standalone cluster's included), and returns, for each master, the swarm's
result (runs, steps, the job's wall seconds, Spark's start-up apart) with the load average
before and after. Steps per second are over the job's wall time, so the JVM's start-up, paid
once per run, does not hide the scaling; it is reported beside. Every master must do the same
work (a seed's campaign depends on its seed alone): `same_work` says whether it did, and a
failure of the correct protocol is `BenchmarkFailed`. `cli.bench_swarm` renders the rows.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kreplica.conformance.errors import BenchmarkFailed
from kreplica.conformance.fuzz.setup import FuzzSetup
from kreplica.conformance.fuzz.swarm import Swarm, SwarmResult, run_swarm, seeds_from

MASTERS = ("local[1]", "local[2]")
"""The masters measured by default: one core, then two."""


@dataclass(frozen=True)
class SwarmRow:
    """One master's run of the swarm, and the 1-minute load average around it."""

    master: str
    result: SwarmResult
    load_before: float
    load_after: float


def measure(
    seeds: int,
    examples: int,
    steps: int,
    first_seed: int = 0,
    masters: Sequence[str] = MASTERS,
    conf: Mapping[str, str] | None = None,
) -> list[SwarmRow]:
    """Run the correct protocol's swarm (every fault on, `FuzzSetup()`) on each master in turn;
    a row each. BenchmarkFailed if a seed finds a failure; CheckerError if Spark fails."""
    rows = []
    for master in masters:
        swarm = Swarm(
            FuzzSetup(),
            seeds_from(first_seed, seeds),
            examples,
            steps,
            master,
            shrink=False,
            conf=dict(conf or {}),
        )
        before = os.getloadavg()[0]
        result = run_swarm(swarm)
        rows.append(SwarmRow(master, result, before, os.getloadavg()[0]))
        failed = result.failure
        if failed is not None and failed.failure is not None:
            raise BenchmarkFailed(
                f"the correct protocol failed on {master}, seed {failed.seed}: "
                f"{failed.failure.invariant}: {failed.failure.reason}"
            )
    return rows


def same_work(rows: Sequence[SwarmRow]) -> bool:
    """Whether every master ran the same runs and steps (the seeds' campaigns are the same)."""
    return len({(r.result.stats.runs, r.result.stats.steps) for r in rows}) <= 1


def ratio(rows: Sequence[SwarmRow]) -> float:
    """Steps per second of the last master over the first's (0 if the first took none)."""
    first, last = rows[0].result.steps_per_second, rows[-1].result.steps_per_second
    return last / first if first > 0 else 0.0
