"""A corpus's Coverage computed on Spark: each task maps its share of the traces to covered node
and edge ids, and the driver merges the tasks' Coverage (a union).

Contract: `map_on_spark(files, index, master)` returns what `mapping.map_items` returns for the
same traces in process. The graph's index is broadcast once; the traces are read by the tasks
themselves (`validate.sources.plan` and `read_share`), so no trace text passes through the
driver or Spark's JVM; the kreplica package reaches the executors as the zip every kreplica
job ships (`kreplica.conformance.spark.ship`). Rules: PySpark is imported inside the function,
so the module loads without it; the SparkContext is stopped before returning.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from kreplica.conformance.spark import ship, spark_context
from kreplica.conformance.validate.sources import Share, plan, read_share

from .mapping import Coverage, GraphIndex, map_items

TRACES_PER_TASK = 500
"""Traces per Spark task (a share)."""


def _map_shares(shares: Iterator[Share], index: Any) -> Iterator[Coverage]:
    """One merged Coverage for the shares of a partition (runs on an executor)."""
    total = Coverage()
    for share in shares:
        total = total.merge(map_items(read_share(share), index.value))
    yield total


def map_on_spark(files: Sequence[Path], index: GraphIndex, master: str = "local[*]") -> Coverage:
    """The Coverage of every trace in `files`, mapped by Spark tasks and merged on the driver."""
    sc = spark_context(master)
    try:
        ship(sc)
        shares = plan(files, TRACES_PER_TASK, sc.defaultParallelism)
        shared = sc.broadcast(index)
        rdd = sc.parallelize(shares, len(shares))
        parts = rdd.mapPartitions(lambda it: _map_shares(it, shared)).collect()
        total = Coverage()
        for part in parts:
            total = total.merge(part)
        return total
    finally:
        sc.stop()
