"""A suite of model configs checked on Spark: `kreplica check --master URL`.

Each config is one Spark task, which runs one TLC with `workers` workers (Spark reserves that
many cores for it: `spark.task.cpus`, unless `--conf` sets it), so the executors' cores decide
how many configs run at once. Configs whose header says `cores: all` are put first. The driver
ships what a task needs: the spec directory's `.tla` and `.cfg` files and tla2tools.jar
(`addFile`), and kreplica as a zip (`spark.ship`); a worker needs only Java 17 and a
plain Python of the driver's minor version. Each task returns its `TlcResult`; the driver makes
the same `CheckRow`s as `tla.suite.run_all`, so the report and the counterexamples are the same.

Reuses kreplica's Spark machinery (`kreplica.conformance.spark`): the context, the shipped
zip, the one-line error of a failed task, Ctrl-C (the job group is cancelled, and in local mode
the driver's TLC processes are killed, `conform._kill_checkers`; on a cluster each TLC dies
with the Python worker Spark kills, `tlc.spawn`'s death signal).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kreplica.conformance.errors import CheckerError
from kreplica.conformance.spark import (
    JOB_GROUP,
    cancel_job,
    on_interrupt,
    ship,
    spark_context,
    spark_failure,
)
from kreplica.conformance.tla.specs import ModelConfig
from kreplica.conformance.tla.suite import CheckRow
from kreplica.conformance.tla.tlc import TlcOptions, find_java, find_tla2tools, run_tlc
from kreplica.conformance.tla.tlc_output import TlcResult
from kreplica.conformance.validate.conform import _kill_checkers


@dataclass(frozen=True)
class SuiteRun:
    """What `run_suite` checks, and where."""

    configs: Sequence[ModelConfig]
    spec_dir: Path
    master: str
    workers: int = 1
    time_limit: float | None = None
    java: str | None = None
    jar: Path | None = None
    conf: Mapping[str, str] = field(default_factory=dict)
    """Spark properties (`--conf KEY=VALUE`), e.g. spark.pyspark.python on a cluster."""


@dataclass(frozen=True)
class _Task:
    """One config as a task sees it: names only, resolved against the shipped files."""

    index: int
    cfg: str
    module: str
    check_deadlock: bool


@dataclass(frozen=True)
class _Tools:
    """How every task runs TLC: the Java command, the jar's name among the shipped files."""

    java: str
    jar: str
    workers: int
    time_limit: float | None


def ship_spec(spec_dir: Path) -> list[Path]:
    """The spec directory's files a config may need (every module it extends, every config):
    Spark puts them side by side in each executor's SparkFiles directory."""
    files = sorted(p for p in spec_dir.iterdir() if p.suffix in (".tla", ".cfg") and p.is_file())
    if not files:
        raise CheckerError(f"{spec_dir}: no .tla or .cfg file to ship to the executors")
    return files


def run_suite(
    run: SuiteRun, command: Callable[[ModelConfig], str], on_finish: Callable[[CheckRow], None]
) -> list[CheckRow]:
    """Check every config of `run` on Spark; the rows in the configs' order. `on_finish` is
    called for each row once all are in. CheckerError in one line if Spark fails (an unreachable
    master, a lost task); KeyboardInterrupt on Ctrl-C, with no TLC left running."""
    local = run.master.startswith("local")
    java = find_java(run.java) if local else (run.java or "java")  # a worker's own PATH
    jar = find_tla2tools(run.jar)
    files = [*ship_spec(run.spec_dir), jar]
    conf = {"spark.task.cpus": str(run.workers), **run.conf}
    sc = spark_context(run.master, conf)
    tools = _Tools(java, jar.name, run.workers, run.time_limit)
    order = sorted(range(len(run.configs)), key=lambda n: not run.configs[n].alone)
    tasks = [_task(n, run.configs[n]) for n in order]
    interrupted = threading.Event()
    restore = on_interrupt(lambda: cancel_job(sc, interrupted))
    try:
        results = _run_job(sc, run.master, files, tasks, tools, interrupted)
    finally:
        restore()
    rows = [CheckRow(c, results[n], command(c)) for n, c in enumerate(run.configs)]
    for row in rows:
        on_finish(row)
    return rows


def _task(index: int, config: ModelConfig) -> _Task:
    return _Task(index, config.path.name, config.module, config.check_deadlock)


def _run_job(
    sc: Any,
    master: str,
    files: list[Path],
    tasks: list[_Task],
    tools: _Tools,
    interrupted: threading.Event,
) -> dict[int, TlcResult]:
    """Ship the spec, run one task per config, and return each config's result by index."""
    for path in files:
        sc.addFile(str(path))
    ship(sc)
    try:
        if interrupted.is_set():
            raise KeyboardInterrupt
        sc.setJobGroup(JOB_GROUP, "check model configs", interruptOnCancel=True)
        rdd = sc.parallelize(tasks, len(tasks))
        found: list[tuple[int, TlcResult]] = rdd.mapPartitions(
            lambda part: _check(part, tools)
        ).collect()
    except Exception as err:  # not a KeyboardInterrupt, which is no Exception: it goes on up
        if interrupted.is_set():
            _kill_checkers(master)
            raise KeyboardInterrupt from None
        raise CheckerError(f"a Spark task failed: {spark_failure(err)}") from err
    if interrupted.is_set():
        _kill_checkers(master)
        raise KeyboardInterrupt
    return dict(found)


def _check(tasks: Iterator[_Task], tools: _Tools) -> Iterator[tuple[int, TlcResult]]:
    """A Spark task: check its configs with the files Spark shipped to this executor."""
    from pyspark import SparkFiles

    root = Path(SparkFiles.getRootDirectory())
    for task in tasks:
        options = TlcOptions(
            java=tools.java,
            jar=root / tools.jar,
            workers=tools.workers,
            check_deadlock=task.check_deadlock,
            time_limit=tools.time_limit,
        )
        yield task.index, run_tlc(root / f"{task.module}.tla", root / task.cfg, options)
