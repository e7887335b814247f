"""Benchmark of the implementation: simulated protocol messages processed per second.

A 3-broker cluster with 10 partitions (replication factor 3) under steady produce (acks=-1,
one record per partition per round) and follower fetching, driven by the simulator's fair
scheduler on one core. Every request and every response delivered by the simulated network
counts as one message. This module may read the wall clock; kreplica.impl never does.
`best_run` is the engine of `kreplica bench impl [--rounds N] [--repeat K]`.
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass

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
    """Run the rounds on `cluster`; what its network delivered, and the seconds it took."""
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


def best_run(
    rounds: int, repeat: int, brokers: int = 3, partitions: int = 10, gc_mode: str = "tuned"
) -> BenchResult:
    """The run of the highest rate (messages per CPU second) among `repeat` runs of `run_once`."""
    results = [run_once(rounds, brokers, partitions, gc_mode) for _ in range(repeat)]
    return max(results, key=lambda r: r.rate)
