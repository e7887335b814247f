"""`kreplica conform`'s engine: check many traces against the spec, in batches, on Spark or a
local process pool, writing one result row per trace.

Both runners share the unit of work: a batch of `(trace id, JSON text)` pairs checked by one
TLC process (`tracecheck.check_texts`), which returns exactly one row per pair whatever goes
wrong. The driver never holds the corpus: the process pool streams files and keeps a few
batches in flight; on Spark the driver plans shares of about a batch each (runs of files, byte
ranges of corpora: `sources.plan`), and each task reads its own share, checks it and writes its
rows, which the driver writes as one Parquet part file per task, so no trace passes through
Spark's JVM and nothing is shuffled. The driver reads the results back from Parquet in record
batches.

What a Spark executor imports of this module needs only the standard library and the shipped
zip of kreplica (no pyarrow, no click): pyarrow and `results` are imported by the functions that
run on the driver, so a cluster's workers need only Java and a plain Python of the same version.

Why one module just over 600 lines: the two runners are one engine over the same unit of work
(`check_items`), the same rule (one row per trace) and the same helpers (killing a checker's
processes, clearing an output), and `suite_spark` and `coverage.spark` reuse its Spark side
(the context, the shipped zip) as it is.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from kreplica.conformance.errors import CheckerError
from kreplica.conformance.validate import tlcdata
from kreplica.conformance.validate.sources import (
    Item,
    balanced_batch_size,
    batches,
    iter_local,
    local_files,
    newlines,
    number_lines,
    plan,
    read_share,
    split_file,
)
from kreplica.conformance.validate.tracecheck import (
    SPEC_MODULE,
    SPEC_MODULES,
    CheckSettings,
    check_texts,
)
from kreplica.conformance.validate.why import explain_rejections

Progress = Callable[[int, int | None], None]
"""Called with (batches done, batches in all when known)."""


def check_items(items: list[Item], settings: CheckSettings) -> list[dict[str, Any]]:
    """Check one batch: one result row (a dict) per item, in order; the first rejected ones
    say which conjunct of the logged action is false (`why`)."""
    results = check_texts(items, settings)
    explain_rejections(items, results, settings)
    return [r.row() for r in results]


# ---------------------------------------------------------------- the process pool


@dataclass(frozen=True)
class PoolRun:
    """A local run: which files, how many traces per TLC process, how many processes."""

    files: Sequence[Path]
    settings: CheckSettings
    batch_size: int
    workers: int
    metadata: Mapping[str, str] = field(default_factory=dict)
    """Written into the Parquet schema (the run's record: `results.RUN_METADATA`)."""


def run_pool(run: PoolRun, out: Path, progress: Progress) -> int:
    """Check every trace of `run.files` in a process pool; write rows to `out` as they come.
    Returns the number of rows written. On Ctrl-C (or any failure) the workers and their TLC
    processes are killed at once, not left to finish the batches in flight."""
    from kreplica.conformance.validate.results import JSON, PARQUET, RowWriter

    for older in (out / PARQUET, out / JSON):
        _remove(older)
    writer = RowWriter(out, metadata=run.metadata)
    done = 0
    pool = ProcessPoolExecutor(max_workers=run.workers, initializer=_ignore_interrupts)
    try:
        pending: set[Future[list[dict[str, Any]]]] = set()
        size = balanced_batch_size(run.files, run.batch_size, run.workers)
        for batch in batches(iter_local(run.files), size):
            if len(pending) >= 2 * run.workers:  # bounded: the driver streams the corpus
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                done += _collect(finished, writer)
                progress(done, None)
            pending.add(pool.submit(check_items, batch, run.settings))
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            done += _collect(finished, writer)
            progress(done, None)
    except BaseException:
        _stop_pool(pool)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        writer.close()
    return writer.written


def _ignore_interrupts() -> None:
    """A worker's initializer: Ctrl-C at a terminal reaches every process of the group, but
    only the driver acts on it (it stops the workers), so no worker prints a traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _stop_pool(pool: ProcessPoolExecutor) -> None:
    """Kill every worker and what it started (its TLC process, which runs in a session of its
    own): each worker is frozen first, so it starts nothing more. `shutdown` then cancels what
    is queued and reaps them."""
    processes = getattr(pool, "_processes", None) or {}  # the executor's own table of workers
    workers = [pid for pid in processes if isinstance(pid, int)]
    for pid in workers:
        _signal(pid, signal.SIGSTOP)
    children = _children()
    for pid in workers:
        for child in _descendants(pid, children):
            _signal(child, signal.SIGKILL)
        _signal(pid, signal.SIGKILL)


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def _children() -> dict[int, list[int]]:
    """Every process's children, by parent pid, from /proc (empty where there is none)."""
    children: dict[int, list[int]] = {}
    proc = Path("/proc")
    for entry in proc.iterdir() if proc.is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text(encoding="ascii", errors="replace")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()  # after the command name, which may hold spaces
        if len(fields) > 1 and fields[1].isdigit():
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    return children


def _descendants(pid: int, children: Mapping[int, list[int]]) -> list[int]:
    """The processes below `pid`, parents before their children."""
    found, todo = [], list(children.get(pid, ()))
    while todo:
        child = todo.pop(0)
        found.append(child)
        todo.extend(children.get(child, ()))
    return found


def _collect(finished: Iterable[Future[list[dict[str, Any]]]], writer: Any) -> int:
    """Write the rows of finished batches; return how many batches finished."""
    count = 0
    for future in finished:
        writer.write(future.result())
        count += 1
    return count


# ---------------------------------------------------------------- Spark


@dataclass(frozen=True)
class SparkRun:
    """A Spark run: input paths (any Hadoop path), spec files and jar to ship, batch size."""

    paths: Sequence[str]
    settings: CheckSettings
    batch_size: int
    master: str
    ship: Sequence[Path]
    fail_first_attempts: bool = False
    """Fault injection for tests: every task's first attempt fails, so Spark retries it."""
    metadata: Mapping[str, str] = field(default_factory=dict)
    """Written into the Parquet schema of every part (`results.RUN_METADATA`)."""
    conf: Mapping[str, str] = field(default_factory=dict)
    """Spark properties passed through (`--conf KEY=VALUE`), e.g. spark.pyspark.python."""


LOCAL_JVM_OPTIONS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
"""Spark's JVM in local mode only schedules tasks and writes small rows: with the quick
compiler and the serial collector it starts about 5 s sooner on a busy 2-core machine."""


def spark_context(master: str, extra: Mapping[str, str] | None = None) -> Any:
    """The SparkContext for `master` (an existing one is reused), with the properties `extra`
    set last (they win). No SparkSession: nothing here uses Spark SQL, and starting it cost
    about 3 s more (measured). On a cluster the executors run the Python that
    `spark.pyspark.python` (or the driver's PYSPARK_PYTHON) names, else the worker's `python3`:
    not the driver's virtualenv, which the worker's machine does not have."""
    local = master.startswith("local")
    if not local:
        check_master(master)
    python = (extra or {}).get("spark.pyspark.python")
    if python:  # PySpark's driver reads only the variable when it is not started by spark-submit
        os.environ["PYSPARK_PYTHON"] = python
    if local:
        os.environ[DRIVER_ENV] = str(os.getpid())  # marks the TLC processes of its workers
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the workers import kreplica
    from pyspark import SparkConf, SparkContext

    conf = SparkConf().setMaster(master).setAppName("kreplica conform")
    conf.setAll(
        [
            ("spark.ui.enabled", "false"),
            ("spark.ui.showConsoleProgress", "false"),
            ("spark.driver.bindAddress", "127.0.0.1" if local else "0.0.0.0"),
            ("spark.hadoop.mapreduce.input.fileinputformat.input.dir.recursive", "true"),
            ("spark.python.worker.reuse", "true"),
        ]
        + ([("spark.driver.extraJavaOptions", LOCAL_JVM_OPTIONS)] if local else [])
        + list((extra or {}).items())
    )
    active = getattr(SparkContext, "_active_spark_context", None)
    if active is not None and active.master != master:  # getOrCreate would hand it back
        active.stop()
    sc = SparkContext.getOrCreate(conf)
    sc.setLogLevel("ERROR")
    return sc


def check_master(master: str, timeout: float = 5.0) -> None:
    """Fail at once, in one line, if a standalone master (`spark://host:port[,host:port]`) takes
    no connection: Spark itself retries for a minute and then reports only that every master was
    unresponsive."""
    if not master.startswith("spark://"):
        return  # yarn, k8s://, mesos://: the cluster manager's client reports its own errors
    reasons = []
    for address in master.removeprefix("spark://").split(","):
        host, _, port = address.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout):
                return
        except (OSError, ValueError) as err:
            reasons.append(f"{address}: {err.strerror or err}" if isinstance(err, OSError)
                           else f"{address}: bad port")  # fmt: skip
    raise CheckerError(f"the Spark master {master} is unreachable ({'; '.join(reasons)})")


def _wanted(name: str, explicit: frozenset[str]) -> bool:
    """A file Spark found: named on the command line, or a trace file in a named directory."""
    return name in explicit or name.endswith((".itf.json", ".jsonl", ".ndjson"))


SLACK = 10
"""A share holds about a batch (its traces are estimated from the bytes): up to a tenth more
joins the last batch rather than costing a TLC process of a few traces (measured: about 2 s)."""


@dataclass(frozen=True)
class TaskJob:
    """What every Spark task needs: the settings, the batch size, a fault to inject."""

    settings: CheckSettings
    batch_size: int
    fail_first_attempt: bool


def _check_share(index: int, traces: Iterator[Item], job: TaskJob) -> Iterator[tuple[int, bytes]]:
    """A Spark task: check its traces in batches, with the spec and jar Spark shipped to it,
    and return their rows (packed, `pack_rows`) to the driver, which writes them as Parquet part
    `index`. Only the standard library runs here, and no file is written to `--out`: on a
    cluster that is the driver's disk, not the executor's."""
    from pyspark import TaskContext

    context = TaskContext.get()
    attempt = context.attemptNumber() if context is not None else 0
    if job.fail_first_attempt and attempt == 0:
        raise RuntimeError("injected failure of a task's first attempt (test)")
    settings = _shipped(job.settings)
    rows: list[dict[str, Any]] = []
    for batch in batches(traces, job.batch_size, slack=job.batch_size // SLACK):
        rows.extend(check_items(batch, settings))
    yield index, pack_rows(rows)


def pack_rows(rows: list[dict[str, Any]]) -> bytes:
    """A task's rows as compressed compact JSON: the driver holds every task's rows until the
    job ends, as a few bytes per row rather than as Python dicts (docs/conformance.md)."""
    text = json.dumps(rows, separators=(",", ":"), allow_nan=True)  # ASCII: \u escapes
    return zlib.compress(text.encode("ascii"), 1)


def unpack_rows(packed: bytes) -> list[dict[str, Any]]:
    """The rows `pack_rows` packed."""
    rows: list[dict[str, Any]] = json.loads(zlib.decompress(packed))
    return rows


def _write_part(parts: Path, index: int, rows: list[dict[str, Any]], metadata: Mapping[str, str]
                ) -> None:  # fmt: skip
    """One task's rows as Parquet part `index` (on the driver), through a hidden temporary file
    and a rename."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from kreplica.conformance.validate.results import schema_with

    schema = schema_with(metadata)
    temp = parts / f".part-{index:05d}-{os.getpid()}.tmp"  # hidden from readers
    with pq.ParquetWriter(temp, schema) as writer:
        writer.write_table(pa.Table.from_pylist(rows, schema=schema))
    os.replace(temp, parts / f"part-{index:05d}.parquet")


def spark_failure(err: BaseException) -> str:
    """The root cause of a failed Spark job, in one line: the last Python exception of an
    executor's traceback (`ModuleNotFoundError: No module named 'x'`) if the error holds one,
    else Spark's own reason (`Job aborted due to stage failure: ...`), else the first line."""
    text = str(err)
    found: list[str] = re.findall(r"^\s*((?:[\w.]+\.)?\w*(?:Error|Exception)\b.*)$", text, re.M)
    python = [line for line in found if not line.startswith(("py4j", "org.apache", "java."))]
    if python:
        return python[-1].strip()
    reason = re.search(r"Job aborted due to stage failure: ([^\n]*)", text)
    lines = text.strip().splitlines()
    return (reason.group(1) if reason else lines[0] if lines else type(err).__name__)[:500]


def _shipped(settings: CheckSettings) -> CheckSettings:
    """`settings` with the spec, jar and reader classes Spark shipped to this executor."""
    from pyspark import SparkFiles

    jar, shipped = settings.tlc.jar, Path(SparkFiles.get(f"{SPEC_MODULE}.tla")).parent
    return replace(
        settings,
        spec_dir=shipped,
        tlc=replace(settings.tlc, jar=Path(SparkFiles.get(jar.name)) if jar else None),
        reader=shipped if settings.reader else None,  # its classes were shipped beside the spec
    )


def spark_inputs(paths: Sequence[str]) -> tuple[list[Path], list[str]]:
    """The local trace files under `paths` (TraceError for a missing one: before Spark starts,
    so bad paths fail fast), and the other URIs, which Spark reads."""
    found = [(p, _local_path(p)) for p in paths]
    named = [path for _, path in found if path is not None]
    return (local_files(named) if named else []), [uri for uri, path in found if path is None]


def run_spark(run: SparkRun, out: Path, progress: Progress) -> int:
    """Check every trace under `run.paths` on Spark; write Parquet and JSON to `out`. Returns
    the number of rows written (by the successful attempt of each task)."""
    local, remote = spark_inputs(run.paths)
    from kreplica.conformance.validate.results import PARQUET

    sc = spark_context(run.master, run.conf)
    # PySpark's own SIGINT handler is in place from here on, and it cancels jobs on the py4j
    # connection the main thread is using: ours replaces it before the next py4j call
    interrupted = threading.Event()
    restore = _on_interrupt(lambda: _cancel(sc, interrupted))
    try:
        written = _run_job(sc, run, local, remote, progress, interrupted)
    finally:
        restore()
    parts = _fresh(out.resolve() / PARQUET)
    rows = 0
    for n, (index, packed) in enumerate(written):  # the successful attempt of each task
        part = unpack_rows(packed)
        written[n] = None  # one task's rows unpacked at a time
        _write_part(parts, index, part, run.metadata)
        rows += len(part)
    _write_json(out)
    return rows


JOB_GROUP = "kreplica-conform"


def _run_job(
    sc: Any,
    run: SparkRun,
    local: list[Path],
    remote: list[str],
    progress: Progress,
    interrupted: threading.Event,
) -> list[Any]:
    """Ship the checker, run the job, and return each task's packed rows; KeyboardInterrupt if
    a Ctrl-C came (`interrupted`), before the job or while it ran."""
    for path in run.ship:
        sc.addFile(str(path))
    sc.addPyFile(str(package_zip()))
    job = TaskJob(run.settings, run.batch_size, run.fail_first_attempts)
    traces = _traces(sc, local, remote, run.batch_size)
    watcher = _watch(sc, traces.getNumPartitions(), progress)
    try:
        if interrupted.is_set():  # a Ctrl-C while the job was being set up: do not start it
            raise KeyboardInterrupt
        sc.setJobGroup(JOB_GROUP, "check traces", interruptOnCancel=True)
        written: list[Any] = traces.mapPartitionsWithIndex(
            lambda i, p: _check_share(i, p, job)
        ).collect()
    except Exception as err:  # not a KeyboardInterrupt, which is no Exception: it goes on up
        if interrupted.is_set():  # the job failed because it was cancelled: say so
            _kill_checkers(run.master)
            raise KeyboardInterrupt from None
        raise CheckerError(f"a task failed: {spark_failure(err)}") from err
    finally:
        watcher.set()
    if interrupted.is_set():
        raise KeyboardInterrupt
    return written


def _on_interrupt(first: Callable[[], None]) -> Callable[[], None]:
    """Until the returned function is called, a first Ctrl-C (SIGINT, SIGTERM, SIGHUP) calls
    `first` and a second raises KeyboardInterrupt (main thread only; elsewhere nothing).

    PySpark's own handler cancels the jobs from inside the signal handler, on the py4j
    connection the blocked `collect` is using, and py4j then prints pages of tracebacks."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    calls: list[int] = []

    def handler(signum: int, frame: object) -> None:
        calls.append(signum)
        if len(calls) > 1:
            raise KeyboardInterrupt
        first()

    kinds = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    saved = {kind: signal.signal(kind, handler) for kind in kinds}

    def restore() -> None:
        for kind, previous in saved.items():
            signal.signal(kind, previous)

    return restore


def _cancel(sc: Any, interrupted: threading.Event) -> None:
    """Cancel the run's Spark job from a thread of its own (its own py4j connection), quietly:
    the blocked `collect` then fails, and `run_spark` raises KeyboardInterrupt."""
    interrupted.set()

    def cancel() -> None:
        with contextlib.suppress(Exception):
            sc.setLogLevel("OFF")  # cancelled tasks are not errors to print
            sc.cancelJobGroup(JOB_GROUP)

    threading.Thread(target=cancel, daemon=True).start()


DRIVER_ENV = "KREPLICA_CONFORM_DRIVER"
"""Set to the driver's pid in local mode: Spark's JVM, its Python workers and their TLC
processes inherit it, so the driver can find TLC processes that a cancelled task left behind
(Spark kills the worker, and TLC, in a session of its own, would run its batch to the end)."""


def _kill_checkers(master: str, rounds: int = 4, pause: float = 0.5) -> None:
    """In local mode, after a cancelled job: kill this driver's TLC processes, a few times over
    (a worker being stopped may still start one). Only processes whose environment names this
    driver are touched."""
    if not master.startswith("local") or not Path("/proc").is_dir():
        return
    mark = f"{DRIVER_ENV}={os.getpid()}".encode()
    for _ in range(rounds):
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                command = (entry / "cmdline").read_bytes()
                if b"tlc2.TLC" in command and mark in (entry / "environ").read_bytes().split(b"\0"):
                    _signal(int(entry.name), signal.SIGKILL)
            except OSError:
                continue
        time.sleep(pause)


def _fresh(directory: Path) -> Path:
    """An empty directory at `directory` (an older run's results there are removed)."""
    _remove(directory)
    directory.mkdir(parents=True)
    return directory


def _remove(path: Path) -> None:
    """Remove an older run's results: Spark's are directories of parts, the pool's files."""
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def _write_json(out: Path) -> None:
    """results.json from the Parquet, a row a line, read back one record batch at a time."""
    from kreplica.conformance.validate.results import JSON, PARQUET, iter_rows

    target = out / JSON
    _remove(target)
    with target.open("w", encoding="utf-8") as handle:
        for row in iter_rows(out / PARQUET):
            handle.write(json.dumps(row, separators=(",", ":")) + "\n")


def _traces(sc: Any, local: list[Path], remote: list[str], batch_size: int) -> Any:
    """Every input trace as an RDD of (id, text), a partition per share of about a batch, with
    no shuffle: tasks read local files themselves; other URIs come through Spark's reader."""
    parts = []
    if local:
        shares = plan(local, batch_size, sc.defaultParallelism)
        shares = number_lines(shares, lambda segments: _count_newlines(sc, segments))
        parts.append(sc.parallelize(shares, len(shares)).flatMap(read_share))
    if remote:
        explicit = frozenset(remote)
        files = sc.wholeTextFiles(",".join(remote), minPartitions=sc.defaultParallelism)
        parts.append(
            files.filter(lambda kv: _wanted(kv[0], explicit)).flatMap(lambda kv: split_file(*kv))
        )
    return parts[0] if len(parts) == 1 else sc.union(parts)


def _count_newlines(sc: Any, segments: list[tuple[str, int, int]]) -> list[int]:
    """Newlines in each (path, start, end) byte range, counted by the executors in one job."""
    ranges = sc.parallelize(segments, min(len(segments), sc.defaultParallelism))
    return list(ranges.map(lambda segment: newlines(*segment)).collect())


def _local_path(path: str) -> str | None:
    """A local path or file: URI as an absolute path (executors may run elsewhere, and ids read
    better); None for other URIs (hdfs://, s3a://), which Spark reads."""
    if path.startswith("file:"):
        return unquote(urlparse(path).path)
    return None if "://" in path else str(Path(path).resolve())


def _watch(sc: Any, tasks: int, progress: Progress) -> threading.Event:
    """Poll Spark's status tracker in a thread, reporting finished tasks (= batches)."""
    stop = threading.Event()
    tracker = sc.statusTracker()

    def poll() -> None:
        while not stop.wait(0.5):
            done = 0
            for job in tracker.getJobIdsForGroup(JOB_GROUP):
                info = tracker.getJobInfo(job)
                for stage in info.stageIds if info else ():
                    stage_info = tracker.getStageInfo(stage)
                    if stage_info and stage_info.numTasks == tasks:
                        done = max(done, stage_info.numCompletedTasks)
            progress(done, tasks)

    threading.Thread(target=poll, daemon=True).start()
    return stop


SHIPPED_PACKAGES = ("kreplica", "click")
"""What the zip for the executors holds: kreplica, and the one third-party package its executor
side imports (click, through `errors`; pure Python). Everything else there is the standard
library, so a worker needs only Java and a plain Python of the driver's minor version."""


@functools.cache
def package_zip() -> Path:
    """The packages of `SHIPPED_PACKAGES` as a zip for Spark's executors (addPyFile): no shared
    filesystem, nothing installed on the workers. Walks src/kreplica through its links to impl/
    and conformance/. Made once per process: Spark refuses a second file of the same name with
    other contents in one context, and a source edited since would be one."""
    import importlib

    target = Path(tempfile.mkdtemp(prefix="kreplica-pyfiles-")) / "kreplica.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for package in SHIPPED_PACKAGES:
            root = Path(str(importlib.import_module(package).__file__)).parent
            for directory, _, names in sorted(os.walk(root, followlinks=True)):
                for name in sorted(n for n in names if n.endswith((".py", "py.typed"))):
                    source = Path(directory, name)
                    archive.write(source, Path(package, source.relative_to(root)).as_posix())
    return target


def ship_files(settings: CheckSettings) -> list[Path]:
    """What each executor needs: the spec modules, tla2tools.jar, the trace reader's classes
    (TraceData itself is written on the executor, per batch)."""
    spec_dir, tlc = settings.spec_dir, settings.tlc
    files = [spec_dir / f"{name}.tla" for name in SPEC_MODULES]
    files += [tlc.jar] if tlc.jar else []
    return files + (tlcdata.class_files(settings.reader) if settings.reader else [])
