"""A fuzz campaign as a swarm on Spark (`kreplica fuzz --master URL --seeds N`): N seeded
campaigns, each stage of each one Spark task, gathered on the driver.

Contract: the tasks of seed S run exactly the campaign `kreplica fuzz --seed S` runs with the
same options: one task per stage of it (`stages.plan`; a campaign of `--variant` or `--bug`
has one stage), each the stage's `campaign.run_fuzz` (its runs, its shrinking and minimising
of its first failure), which depends on its seed and stage alone (`reproducible`), so it does
the same on any executor. A task returns its `FuzzResult` and, with a corpus, the lines its
`CorpusWriter` wrote (to a file of the executor's own, read back as bytes). The driver takes
each seed's stages in order up to the first that failed, as `kreplica fuzz --seed S` stops
there (the later stages' tasks ran too, and are set aside, `SwarmResult.set_aside`), and
appends their corpora in seed order, so the corpus of a swarm is byte for byte the corpora of
`kreplica fuzz --seed S --corpus C` run one after the other for each seed; it sums the
counters (`SwarmResult.stats`); and it reports the failure of the lowest seed that failed
(`SwarmResult.failure`, that seed's first failing stage): whichever executor finishes first,
the same command reports, and saves, the same failure, which `kreplica fuzz --seed S` finds
again. Every task runs to its own end (its first failure, its examples, or its time limit);
none is cancelled when another fails, which a byte-identical corpus needs.

What a task needs reaches the executors as every kreplica job ships it: kreplica as a zip
(`spark.ship`), and Hypothesis (with its compiled module) and sortedcontainers as an archive of
what the driver has installed (`spark.ship_installed`), which a task puts on `sys.path` before
it loads this module (`spark.call_shipped`), so a worker needs only Java and a Python of the
driver's minor version (tests/test_fuzz_swarm.py, on a standalone cluster whose Python has
neither).

Rules: the driver's side (the context, shipping, Ctrl-C, the one-line failure) is
`kreplica.conformance.spark`'s, as for `kreplica conform` and `kreplica check --master`; this
module renders nothing (`cli/fuzz.py` does). Tests: tests/test_fuzz_swarm.py.
"""

from __future__ import annotations

import functools
import pickle
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kreplica.conformance.errors import CheckerError, KreplicaError
from kreplica.conformance.fuzz.campaign import FuzzResult, run_fuzz
from kreplica.conformance.fuzz.corpus_writer import CorpusWriter
from kreplica.conformance.fuzz.runs import RunStats, merged_stats
from kreplica.conformance.fuzz.setup import FuzzSetup
from kreplica.conformance.fuzz.stages import Stage, single
from kreplica.conformance.spark import (
    JOB_GROUP,
    Progress,
    call_shipped,
    cancel_job,
    on_interrupt,
    ship,
    ship_installed,
    spark_context,
    spark_failure,
    watch_tasks,
)

SHIPPED_MODULES = ("hypothesis", "_hypothesis_globals", "sortedcontainers")
"""What a task imports beyond kreplica and the standard library: Hypothesis (its package, and
the top-level module it keeps its globals in) and its one dependency."""

DEFAULT_SEEDS = 8
"""Seeds (tasks) of a swarm when --seeds is not given."""


@dataclass(frozen=True)
class Swarm:
    """A swarm: the campaign every seed runs, the seeds, and where (a Spark master)."""

    setup: FuzzSetup
    seeds: tuple[int, ...]
    examples: int
    max_steps: int
    master: str
    shrink: bool = True
    time_limit: float | None = None
    """Seconds each seed's campaign may search without a failure (`run_fuzz`'s)."""
    conf: Mapping[str, str] = field(default_factory=dict)
    """Spark properties (`--conf KEY=VALUE`), e.g. spark.pyspark.python on a cluster."""
    stages: tuple[Stage, ...] = ()
    """The stages of each seed's campaign (`stages.plan`, sharing `examples` and
    `time_limit`), a task each; empty: the one stage of `setup`, with all of them."""

    @property
    def plan(self) -> tuple[Stage, ...]:
        """The stages each seed runs."""
        return self.stages or single(self.setup, self.examples, self.time_limit)


@dataclass(frozen=True)
class SeedJob:
    """What every task runs: a stage of the campaign of `kreplica fuzz`, less its seed."""

    stages: tuple[Stage, ...]
    max_steps: int
    shrink: bool
    corpus: bool


@dataclass(frozen=True)
class SeedCampaign:
    """What one task sends back: its seed's and stage's result, and its corpus (compressed
    lines)."""

    result: FuzzResult
    corpus: bytes = b""
    traces: int = 0
    """Lines in `corpus`."""
    cpu_seconds: float = 0.0
    """CPU seconds the task's process spent on the campaign."""


@dataclass(frozen=True)
class SwarmResult:
    """What a swarm found: each seed's result (in seed order), the totals, the times."""

    swarm: Swarm
    results: tuple[FuzzResult, ...]
    """Each seed's stages in order, up to its first failing one; the seeds in order."""
    stats: RunStats
    """The counters of `results` summed (`merged_stats`)."""
    seconds: float
    """Wall seconds of the Spark job: from submitting the tasks until the last came back."""
    startup: float
    """Wall seconds before it: starting (or reusing) the SparkContext, shipping kreplica."""
    task_seconds: float
    """The tasks' campaigns' own wall seconds, summed (those set aside too)."""
    task_cpu_seconds: float = 0.0
    """The CPU seconds the tasks spent on their campaigns, summed: on a machine of its own,
    about `task_seconds`; on a shared one, what the swarm got of its cores."""
    traces: int = 0
    """Traces appended to the corpus."""
    set_aside: int = 0
    """Tasks run but not counted: stages after their seed's first failing stage, which
    `kreplica fuzz --seed S` does not run."""

    @property
    def failed(self) -> list[FuzzResult]:
        """The results of the seeds that found a failure, in seed order."""
        return [r for r in self.results if r.failure is not None]

    @property
    def failure(self) -> FuzzResult | None:
        """The reported failure: that of the lowest seed that failed (None if none did)."""
        failed = self.failed
        return failed[0] if failed else None

    @property
    def steps_per_second(self) -> float:
        """State-machine steps of every seed per wall second of the job."""
        return self.stats.steps / self.seconds if self.seconds > 0 else 0.0


def seeds_from(first: int, count: int) -> tuple[int, ...]:
    """The seeds of a swarm of `count` campaigns from `first` on."""
    return tuple(range(first, first + count))


def run_swarm(
    swarm: Swarm, corpus: CorpusWriter | None = None, progress: Progress | None = None
) -> SwarmResult:
    """Run every seed's campaign of `swarm` as a Spark task; the results in seed order, each
    seed's corpus appended to `corpus` (if given) in seed order. `progress` is called with
    (seeds done, seeds) while the job runs. CheckerError in one line if Spark fails (a master
    it cannot reach or parse, a lost task, a task's own error); CorpusError if the corpus
    cannot be written; KeyboardInterrupt on Ctrl-C, the job cancelled."""
    if not swarm.seeds:
        raise KreplicaError("a swarm needs one seed at least")
    plan = swarm.plan
    job = SeedJob(plan, swarm.max_steps, swarm.shrink, corpus is not None)
    tasks = [(seed, index) for seed in swarm.seeds for index in range(len(plan))]
    started = time.perf_counter()
    try:
        sc = spark_context(swarm.master, swarm.conf)
        ship(sc)
        archive = ship_installed(sc, SHIPPED_MODULES)
    except KreplicaError:
        raise
    except Exception as err:  # Spark's own errors are long Java traces: one line instead
        raise CheckerError(f"Spark failed: {spark_failure(err)}") from None
    startup = time.perf_counter() - started
    interrupted = threading.Event()
    restore = on_interrupt(lambda: cancel_job(sc, interrupted))
    try:
        task = functools.partial(call_shipped, archive, TASK, pickle.dumps(job))
        campaigns = _run_job(sc, tasks, task, interrupted, progress)
    finally:
        restore()
    seconds = time.perf_counter() - started - startup
    kept = taken(campaigns, len(plan))
    traces = 0
    for campaign in kept:  # in seed order, each seed's stages in order
        if corpus is not None and campaign.traces:
            corpus.append_lines(zlib.decompress(campaign.corpus), campaign.traces)
            traces += campaign.traces
    results = tuple(c.result for c in kept)
    return SwarmResult(
        swarm,
        results,
        merged_stats([r.stats for r in results]),
        seconds,
        startup,
        sum(c.result.seconds for c in campaigns),
        sum(c.cpu_seconds for c in campaigns),
        traces,
        len(campaigns) - len(kept),
    )


def taken(campaigns: Sequence[SeedCampaign], stages: int) -> list[SeedCampaign]:
    """The tasks' campaigns (seed by seed, each seed's `stages` in order) that
    `kreplica fuzz --seed S` runs: each seed's stages up to the first that failed."""
    kept: list[SeedCampaign] = []
    for first in range(0, len(campaigns), stages):
        for campaign in campaigns[first : first + stages]:
            kept.append(campaign)
            if campaign.result.failure is not None:
                break
    return kept


def _run_job(
    sc: Any,
    tasks: Sequence[tuple[int, int]],
    task: Callable[[Iterator[tuple[int, int]]], Iterator[SeedCampaign]],
    interrupted: threading.Event,
    progress: Progress | None,
) -> list[SeedCampaign]:
    """One task per (seed, stage), in that order (Spark starts the partitions in order); the
    tasks' campaigns in that order. KeyboardInterrupt if a Ctrl-C came (`interrupted`)."""
    watcher = watch_tasks(sc, len(tasks), progress) if progress is not None else None
    try:
        if interrupted.is_set():  # a Ctrl-C while the job was being set up: do not start it
            raise KeyboardInterrupt
        sc.setJobGroup(JOB_GROUP, "fuzz campaigns", interruptOnCancel=True)
        rdd = sc.parallelize(list(tasks), len(tasks))
        found: list[SeedCampaign] = rdd.mapPartitions(task).collect()
    except Exception as err:  # not a KeyboardInterrupt, which is no Exception: it goes on up
        if interrupted.is_set():
            raise KeyboardInterrupt from None
        raise CheckerError(f"a Spark task failed: {spark_failure(err)}") from err
    finally:
        if watcher is not None:
            watcher.set()
    if interrupted.is_set():
        raise KeyboardInterrupt
    if progress is not None:
        progress(len(tasks), len(tasks))
    return found


TASK = "kreplica.conformance.fuzz.swarm:campaigns"
"""What a task runs (`spark.call_shipped`, which first puts the shipped Hypothesis on the
executor's `sys.path`: this module imports it)."""


def campaigns(tasks: Iterator[tuple[int, int]], job: SeedJob) -> Iterator[SeedCampaign]:
    """A Spark task: the campaign of each of its (seed, stage) pairs (one, as the driver
    splits them)."""
    for seed, stage in tasks:
        yield run_seed(seed, job, stage)


def run_seed(seed: int, job: SeedJob, stage: int = 0) -> SeedCampaign:
    """Stage `stage` of the campaign of `kreplica fuzz --seed SEED` with the job's options, and
    its corpus (as a `CorpusWriter` wrote it to a file of this executor's, compressed; none
    for a stage that keeps none): the unit of a swarm, run by a task (or in process, by
    tests)."""
    plan = job.stages[stage]
    with tempfile.TemporaryDirectory(prefix="kreplica-swarm-") as directory:
        path = Path(directory) / "corpus.jsonl"
        writer = CorpusWriter(path) if job.corpus and plan.corpus else None
        cpu = time.process_time()
        try:
            result = run_fuzz(
                plan.setup,
                plan.examples,
                job.max_steps,
                seed,
                None,
                job.shrink,
                writer,
                plan.time_limit,
            )
        finally:
            if writer is not None:
                writer.close()
        cpu = time.process_time() - cpu
        data = zlib.compress(path.read_bytes(), 1) if writer is not None else b""
    result = replace(result, stats=replace(result.stats, on_run=None))
    return SeedCampaign(result, data, writer.written if writer is not None else 0, cpu)
