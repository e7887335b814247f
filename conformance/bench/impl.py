"""Benchmark of the implementation: simulated protocol messages processed per second.

A 3-broker cluster with 10 partitions (replication factor 3) under steady produce (acks=-1,
one record per partition per round) and follower fetching, driven by the simulator's fair
scheduler on one core. Every request and every response delivered by the simulated network
counts as one message. This module may read the wall clock; kreplica.impl never does.

    .venv/bin/python -m kreplica.conformance.bench.impl [--rounds N] [--repeat K]
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass

import click

from kreplica.conformance.errors import run_command
from kreplica.impl.cluster import Cluster
from kreplica.impl.steps import Produce, Tick


@dataclass(frozen=True)
class BenchResult:
    """One run: messages delivered, CPU and wall seconds taken, records acknowledged."""

    messages: int
    cpu_seconds: float
    wall_seconds: float
    acked: int

    @property
    def rate(self) -> float:
        """Messages per CPU second of this process (one core, immune to other load)."""
        return self.messages / self.cpu_seconds if self.cpu_seconds > 0 else 0.0

    @property
    def wall_rate(self) -> float:
        """Messages per wall-clock second."""
        return self.messages / self.wall_seconds if self.wall_seconds > 0 else 0.0


GC_TUNED_THRESHOLD = (50_000, 50, 100)
"""gen-0/1/2 thresholds of --gc tuned: the simulator allocates many short-lived messages."""


def run_once(
    rounds: int, brokers: int = 3, partitions: int = 10, gc_mode: str = "tuned"
) -> BenchResult:
    """Produce `rounds` records to every partition and replicate them; time the whole run."""
    cluster = Cluster(tuple(range(1, brokers + 1)), {"bench": partitions}, replication_factor=3)
    saved = gc.get_threshold()
    gc.collect()
    if gc_mode == "tuned":
        gc.freeze()
        gc.set_threshold(*GC_TUNED_THRESHOLD)
    try:
        return _measure(cluster, rounds)
    finally:
        gc.set_threshold(*saved)
        gc.unfreeze()


def _measure(cluster: Cluster, rounds: int) -> BenchResult:
    tps = cluster.partitions
    network = cluster.network
    start_delivered = network.delivered
    start_cpu = time.process_time()
    start = time.perf_counter()
    for _ in range(rounds):
        for tp in tps:
            cluster.apply(Produce(tp, (cluster.next_record_id(),), -1))
        cluster.run_until_quiescent()
        cluster.apply(Tick(1))
    cluster.run_until_quiescent()
    wall = time.perf_counter() - start
    cpu = time.process_time() - start_cpu
    return BenchResult(network.delivered - start_delivered, cpu, wall, len(cluster.acked))


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--rounds", type=click.IntRange(min=1), default=2_000, help="produce rounds (default 2000)"
)
@click.option(
    "--repeat",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="runs; the best is reported",
)
@click.option("--brokers", type=click.IntRange(min=3), default=3, show_default=True)
@click.option("--partitions", type=click.IntRange(min=1), default=10, show_default=True)
@click.option(
    "--gc",
    "gc_mode",
    type=click.Choice(("tuned", "default")),
    default="tuned",
    help="tuned (default): gc.freeze() after set-up and gen-0 threshold 50000; "
    "default: Python's own GC settings",
)
def main(rounds: int, repeat: int, brokers: int, partitions: int, gc_mode: str) -> None:
    """Simulated protocol messages per second (3 brokers, 10 partitions)."""
    results = [run_once(rounds, brokers, partitions, gc_mode) for _ in range(repeat)]
    best = max(results, key=lambda r: r.rate)
    print(
        f"brokers={brokers} partitions={partitions} rounds={rounds} gc={gc_mode} "
        f"messages={best.messages} acked={best.acked} cpu_seconds={best.cpu_seconds:.3f} "
        f"wall_seconds={best.wall_seconds:.3f} (wall rate {best.wall_rate:,.0f}/s)"
    )
    print(f"messages/s: {best.rate:,.0f}")


if __name__ == "__main__":
    run_command(main, "python -m kreplica.conformance.bench.impl")
