"""`kreplica conform`'s engine: check many traces against the spec, in batches, on Spark or a
local process pool, writing one result row per trace.

Both runners share the unit of work: traces checked by TLC (`tracecheck.check_texts`), which
returns exactly one row per trace whatever goes wrong. For local files the driver lays the input
out first (`runs.scan`: where each trace's text lies, and its kind), and cuts it into runs of
one kind each (`runs.runs`), so that each TLC process checks one kind across batches; a worker
reads its run's texts itself, so the driver never holds a trace. When every run is checked,
the first rejected traces of each batch get their false conjunct (`--why`), in a second round
of tasks, and the rows are written in the input's order: the process pool writes them itself;
on Spark the tasks return them to the driver, which writes them as Parquet parts, so no trace
passes through Spark's JVM and nothing is shuffled. Other URIs (`hdfs://`, `s3a://`) are read
by Spark (`wholeTextFiles`), a task's batches checked with their `--why` as they come.

What a Spark executor imports of this module needs only the standard library and the shipped
zip of kreplica (no pyarrow, no click): pyarrow and `results` are imported by the functions that
run on the driver, so a cluster's workers need only Java and a plain Python of the same version.
In local mode, where the workers run the driver's own Python (`spark.workers_run_this_python`),
nothing is shipped: they import the installed kreplica and take the spec, the jar and the
reader's classes where the driver has them (shipping them cost each run about 0.2 s).

The Spark side every job of kreplica shares (the context, the shipped zip, the one-line reason
of a failed job, Ctrl-C, progress) is `kreplica.conformance.spark`; what stays here is the
checker's: the tasks, the Parquet parts, and killing the TLC processes a cancelled task left
(`_kill_checkers`, which `suite_spark` reuses).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import threading
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from kreplica.conformance.errors import CheckerError
from kreplica.conformance.spark import (
    DRIVER_ENV,
    JOB_GROUP,
    cancel_job,
    on_interrupt,
    package_zip,
    ship,
    spark_context,
    spark_failure,
    watch_tasks,
    workers_run_this_python,
)
from kreplica.conformance.tla.itf import printable
from kreplica.conformance.tla.tlc import settled_jar
from kreplica.conformance.validate import tlcdata
from kreplica.conformance.validate.runs import (
    Place,
    Sight,
    pool_batches,
    read_places,
    runs,
    scan,
    share_batches,
    sight,
    wants_conjunct,
    why_wanted,
)
from kreplica.conformance.validate.sources import (
    Item,
    balanced_batch_size,
    batches,
    local_files,
    plan,
    recorded_variant,
    split_file,
    variant_note,
)
from kreplica.conformance.validate.tracecheck import (
    ERROR,
    SPEC_MODULE,
    SPEC_MODULES,
    CheckSettings,
    SpecParams,
    TraceResult,
    check_texts,
    variant_for,
)
from kreplica.conformance.validate.why import explain_rejections

Progress = Callable[[int, int | None], None]
"""Called with (tasks done, tasks in all when known): a task is a run, or a batch's `--why`."""

Numbered = list[tuple[int, dict[str, Any]]]
"""Rows with the numbers of their traces (`runs.Place.number`)."""


def check_items(items: list[Item], settings: CheckSettings) -> list[dict[str, Any]]:
    """Check one batch: one result row (a dict) per item, in order; the first rejected ones
    say which conjunct of the logged action is false (`why`)."""
    results = check_texts(items, settings)
    explain_rejections(items, results, settings)
    return [r.row() for r in results]


def check_run(run: list[Place], settings: CheckSettings) -> Numbered:
    """Check one run (`runs.runs`), reading its texts: a row per trace, with its number; no
    `--why` yet (the batches decide it, `explain_places`). A trace that repeats an earlier one
    of the run in all the checker reads (`runs.sight`: a fuzz corpus repeats runs) is not read
    by TLC again: it gets that one's row, with its own id and variant note, unless that row is
    an error's (which may name its trace), and then it is checked itself."""
    texts = read_places(run)
    first: dict[tuple[Sight, str | None], int] = {}
    same: dict[int, int] = {}
    for i, text in enumerate(texts):
        key = _repeat_key(text, settings.params)
        if key is not None and key in first:
            same[i] = first[key]
        elif key is not None:
            first[key] = i
    rows = _checked(run, texts, [i for i in range(len(run)) if i not in same], settings)
    rows |= _checked(run, texts, [i for i, j in same.items() if rows[j]["verdict"] == ERROR],
                     settings)  # fmt: skip
    for i, j in same.items():
        if i not in rows:
            note = variant_note(texts[i], variant_for(texts[i], settings.params).label())
            rows[i] = {**rows[j], "trace_id": printable(run[i].trace_id), "note": note}
    return [(p.number, rows[i]) for i, p in enumerate(run)]


def _repeat_key(text: str, params: SpecParams) -> tuple[Sight, str | None] | None:
    """What a repeat shares with the trace it repeats: all the checker reads (`runs.sight`)
    and, with --as-recorded, the variant its #meta records, which it is checked under (a
    variant's trace may repeat the correct protocol's step for step, and be judged otherwise)."""
    seen = sight(text)
    if seen is None:
        return None
    return seen, recorded_variant(text) if params.as_recorded else None


def _checked(run: list[Place], texts: list[str], chosen: list[int], settings: CheckSettings
             ) -> dict[int, dict[str, Any]]:  # fmt: skip
    """The rows of the traces `chosen` (indexes into `run`), checked together."""
    items = [(run[i].trace_id, texts[i]) for i in chosen]
    return {i: r.row() for i, r in zip(chosen, check_texts(items, settings), strict=True)}


def explain_places(places: list[Place], rows: list[dict[str, Any]], settings: CheckSettings
                   ) -> Numbered:  # fmt: skip
    """The rows of `places` (each wanting its false conjunct: `runs.why_wanted`) with the
    conjunct found (`why.explain_rejections`), with their numbers."""
    items = list(zip([p.trace_id for p in places], read_places(places), strict=True))
    results = [TraceResult(**row) for row in rows]
    explain_rejections(items, results, replace(settings, why=len(results)))
    return [(p.number, r.row()) for p, r in zip(places, results, strict=True)]


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
    """Check every trace of `run.files` in a process pool: its runs, then the `--why` of each
    batch; write the rows to `out` in the input's order. Returns the number of rows written.
    On Ctrl-C (or any failure) the workers and their TLC processes are killed at once, not
    left to finish the runs in flight."""
    from kreplica.conformance.validate.results import JSON, PARQUET, RowWriter

    for older in (out / PARQUET, out / JSON):
        _remove(older)
    settings = run.settings
    places = scan(run.files, settings.params.min_insync_replicas)
    rows: dict[int, dict[str, Any]] = {}
    pool = ProcessPoolExecutor(max_workers=run.workers, initializer=_ignore_interrupts)
    try:
        todo = runs(places, run.batch_size, run.workers)
        _gather(rows, [pool.submit(check_run, r, settings) for r in todo], progress)
        size = balanced_batch_size(run.files, run.batch_size, run.workers)
        laid_out = pool_batches(places, size)
        wanted = why_wanted(laid_out, lambda n: wants_conjunct(rows[n]), settings.why)
        asked = [pool.submit(explain_places, w, [rows[p.number] for p in w], settings)
                 for w in wanted]  # fmt: skip
        _gather(rows, asked, progress)
    except BaseException:
        _stop_pool(pool)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    writer = RowWriter(out, metadata=run.metadata)
    try:
        for part in batches(places, writer.chunk):
            writer.write(rows[p.number] for p in part)
    finally:
        writer.close()
    return writer.written


def _gather(rows: dict[int, dict[str, Any]], futures: list[Future[Numbered]], progress: Progress
            ) -> None:  # fmt: skip
    """Put the numbered rows of `futures` into `rows` as they finish, saying how many have."""
    for done, future in enumerate(as_completed(futures), 1):
        rows.update(future.result())
        progress(done, len(futures))


def _ignore_interrupts() -> None:
    """A worker's initializer: Ctrl-C at a terminal reaches every process of the group, but
    only the driver acts on it (it stops the workers), so no worker prints a traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _stop_pool(pool: ProcessPoolExecutor) -> None:
    """Kill every worker and what it started (its TLC process, which runs in a session of its
    own): each worker is frozen first, so it starts nothing more. `shutdown` then cancels what
    is queued and reaps them."""
    processes = getattr(pool, "_processes", None) or {}  # the executor's own table of workers
    _freeze_and_kill([pid for pid in processes if isinstance(pid, int)])


def _freeze_and_kill(workers: Sequence[int]) -> None:
    """Freeze every worker (so it starts nothing more), then kill what each started and it."""
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
    class_archives: Path | None = None
    """Where Spark's local JVM keeps its class-data-sharing archive (`spark.archive_options`);
    None: none."""


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
    shipped: bool = True
    """The spec, jar and reader classes were shipped (addFile) and are taken from Spark's
    files; False where the workers run the driver's Python on its machine
    (`spark.workers_run_this_python`) and take them where the driver has them."""


def _check_share(index: int, traces: Iterator[Item], job: TaskJob) -> Iterator[tuple[int, bytes]]:
    """A Spark task over traces Spark read (other URIs): check them in batches, with the spec
    and jar Spark shipped to it, and return their rows (packed, `pack_rows`) to the driver,
    which writes them as Parquet part `index`. Only the standard library runs here, and no file
    is written to `--out`: on a cluster that is the driver's disk, not the executor's."""
    settings = _task_settings(job)
    rows: list[dict[str, Any]] = []
    for batch in batches(traces, job.batch_size, slack=job.batch_size // SLACK):
        rows.extend(check_items(batch, settings))
    yield index, pack_rows(rows)


def _check_runs(part: Iterator[list[Place]], job: TaskJob) -> Iterator[bytes]:
    """A Spark task over a run of local traces (`check_run`): their rows, numbered and packed."""
    settings = _task_settings(job)
    for run in part:
        yield pack_rows([{"n": n, "row": row} for n, row in check_run(run, settings)])


def _explain_batches(
    part: Iterator[tuple[list[Place], list[dict[str, Any]]]], job: TaskJob
) -> Iterator[bytes]:
    """A Spark task over the rows of a batch that want their false conjunct
    (`explain_places`): the rows with it, numbered and packed."""
    settings = _task_settings(job)
    for places, rows in part:
        found = explain_places(places, rows, settings)
        yield pack_rows([{"n": n, "row": row} for n, row in found])


def _task_settings(job: TaskJob) -> CheckSettings:
    """The settings of a task, with the files Spark shipped, if it shipped them; the injected
    failure of a first attempt (tests) happens here."""
    from pyspark import TaskContext

    context = TaskContext.get()
    attempt = context.attemptNumber() if context is not None else 0
    if job.fail_first_attempt and attempt == 0:
        raise RuntimeError("injected failure of a task's first attempt (test)")
    return _shipped(job.settings) if job.shipped else job.settings


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


def _shipped(settings: CheckSettings) -> CheckSettings:
    """`settings` with the spec, jar and reader classes Spark shipped to this executor (the jar
    at a settled path, `settled_jar`, where its class archive is kept)."""
    from pyspark import SparkFiles

    tlc, shipped = settings.tlc, Path(SparkFiles.get(f"{SPEC_MODULE}.tla")).parent
    jar = settled_jar(Path(SparkFiles.get(tlc.jar.name)), tlc.class_archives) if tlc.jar else None
    return replace(
        settings,
        spec_dir=shipped,
        tlc=replace(tlc, jar=jar),
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

    shipping = not workers_run_this_python(run.master, run.conf)
    with ThreadPoolExecutor(max_workers=1) as early:  # while Spark's JVM starts
        laid_out = early.submit(scan, local, run.settings.params.min_insync_replicas)
        if shipping:
            early.submit(package_zip)  # made once, then `ship` sends it
        sc = spark_context(run.master, run.conf, run.class_archives)
    # PySpark's own SIGINT handler is in place from here on, and it cancels jobs on the py4j
    # connection the main thread is using: ours replaces it before the next py4j call
    interrupted = threading.Event()
    restore = on_interrupt(lambda: cancel_job(sc, interrupted))
    try:
        if shipping:
            for path in run.ship:
                sc.addFile(str(path))
            ship(sc)
        job = TaskJob(run.settings, run.batch_size, run.fail_first_attempts, shipping)
        parts = _fresh(out.resolve() / PARQUET)
        places = laid_out.result()
        written = _check_local(sc, run, job, places, local, parts, progress, interrupted)
        written += _check_remote(sc, run, job, remote, parts, progress, interrupted)
    finally:
        restore()
    _write_json(out)
    return written


PART_ROWS = 10_000
"""Rows per Parquet part of local traces (the driver writes them in the input's order)."""


def _check_local(
    sc: Any,
    run: SparkRun,
    job: TaskJob,
    places: list[Place],
    local: list[Path],
    parts: Path,
    progress: Progress,
    interrupted: threading.Event,
) -> int:
    """Check the local traces (`places`, of the files `local`) as runs, a task each, then the
    `--why` of each batch, a task per batch that wants any; write their rows as Parquet parts,
    in the input's order. The driver holds each row as compact JSON meanwhile (a few hundred
    bytes)."""
    if not places:
        return 0
    todo = runs(places, run.batch_size, sc.defaultParallelism)
    rows: list[str] = [""] * len(places)
    checked = sc.parallelize(todo, max(1, len(todo))).mapPartitions(lambda p: _check_runs(p, job))
    _unpack_into(rows, _collect(sc, checked, len(todo), run.master, progress, interrupted))
    shares = plan(local, run.batch_size, sc.defaultParallelism)
    laid_out = share_batches(shares, places, run.batch_size, run.batch_size // SLACK)
    wanted = why_wanted(laid_out, lambda n: _wants(rows[n]), run.settings.why)
    if wanted:
        asked = [(w, [json.loads(rows[p.number]) for p in w]) for w in wanted]
        explained = sc.parallelize(asked, len(asked))
        found = explained.mapPartitions(lambda p: _explain_batches(p, job))
        _unpack_into(rows, _collect(sc, found, len(asked), run.master, progress, interrupted))
    for index, part in enumerate(batches(rows, PART_ROWS)):
        _write_part(parts, index, [json.loads(row) for row in part], run.metadata)
    return len(rows)


def _wants(row: str) -> bool:
    """Whether a row (compact JSON) wants its false conjunct: only a rejection's is read."""
    return '"verdict":"violates"' in row and wants_conjunct(json.loads(row))


def _unpack_into(rows: list[str], packed: list[bytes]) -> None:
    """Put the numbered rows of each task (`pack_rows`) into `rows`, as compact JSON."""
    for n, blob in enumerate(packed):
        packed[n] = b""  # one task's rows unpacked at a time
        for entry in unpack_rows(blob):
            rows[entry["n"]] = json.dumps(entry["row"], separators=(",", ":"))


def _check_remote(
    sc: Any,
    run: SparkRun,
    job: TaskJob,
    remote: list[str],
    parts: Path,
    progress: Progress,
    interrupted: threading.Event,
) -> int:
    """Check the traces of other URIs, which Spark reads (`wholeTextFiles`, a file per
    record), in batches with their `--why`; each task's rows a Parquet part, after the local
    ones."""
    if not remote:
        return 0
    explicit = frozenset(remote)
    files = sc.wholeTextFiles(",".join(remote), minPartitions=sc.defaultParallelism)
    traces = files.filter(lambda kv: _wanted(kv[0], explicit)).flatMap(lambda kv: split_file(*kv))
    checked = traces.mapPartitionsWithIndex(lambda i, p: _check_share(i, p, job))
    tasks = traces.getNumPartitions()
    first = len(list(parts.glob("part-*.parquet")))
    written = _collect(sc, checked, tasks, run.master, progress, interrupted)
    rows = 0
    for n, (index, packed) in enumerate(written):  # the successful attempt of each task
        part = unpack_rows(packed)
        written[n] = None  # one task's rows unpacked at a time
        _write_part(parts, first + index, part, run.metadata)
        rows += len(part)
    return rows


def _collect(
    sc: Any, tasks: Any, count: int, master: str, progress: Progress, interrupted: threading.Event
) -> list[Any]:
    """Run a job (`count` tasks) and return what its tasks yielded; KeyboardInterrupt if a
    Ctrl-C came (`interrupted`), before the job or while it ran."""
    watcher = watch_tasks(sc, count, progress)
    try:
        if interrupted.is_set():  # a Ctrl-C while the job was being set up: do not start it
            raise KeyboardInterrupt
        sc.setJobGroup(JOB_GROUP, "check traces", interruptOnCancel=True)
        found: list[Any] = tasks.collect()
    except Exception as err:  # not a KeyboardInterrupt, which is no Exception: it goes on up
        if interrupted.is_set():  # the job failed because it was cancelled: say so
            _kill_checkers(master)
            raise KeyboardInterrupt from None
        raise CheckerError(f"a task failed: {spark_failure(err)}") from err
    finally:
        watcher.set()
    if interrupted.is_set():
        raise KeyboardInterrupt
    return found


def _kill_checkers(master: str) -> None:
    """In local mode, after a cancelled job: freeze this driver's PySpark workers (the daemon
    first, which forks them), so none starts a TLC process more, then kill what they started
    and them, as `_stop_pool` does; last, any TLC process of this driver left without its
    worker. Only processes whose environment names this driver are touched; Spark's JVM is
    left to stop itself."""
    if not master.startswith("local") or not Path("/proc").is_dir():
        return
    _freeze_and_kill(_marked_processes(b"pyspark"))
    for pid in _marked_processes(b"tlc2.TLC"):
        _signal(pid, signal.SIGKILL)


def _marked_processes(word: bytes) -> list[int]:
    """The processes, this one aside, whose command line holds `word` and whose environment
    names this driver (`DRIVER_ENV`), parents (lower pids) first as far as pids tell."""
    mark = f"{DRIVER_ENV}={os.getpid()}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if word in (entry / "cmdline").read_bytes() and mark in (
                (entry / "environ").read_bytes().split(b"\0")
            ):
                found.append(int(entry.name))
        except OSError:
            continue
    return sorted(found)


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


def _local_path(path: str) -> str | None:
    """A local path or file: URI as an absolute path (executors may run elsewhere, and ids read
    better); None for other URIs (hdfs://, s3a://), which Spark reads."""
    if path.startswith("file:"):
        return unquote(urlparse(path).path)
    return None if "://" in path else str(Path(path).resolve())


def ship_files(settings: CheckSettings) -> list[Path]:
    """What each executor needs: the spec modules, tla2tools.jar, the trace reader's classes
    (TraceData itself is written on the executor, per batch)."""
    spec_dir, tlc = settings.spec_dir, settings.tlc
    files = [spec_dir / f"{name}.tla" for name in SPEC_MODULES]
    files += [tlc.jar] if tlc.jar else []
    return files + (tlcdata.class_files(settings.reader) if settings.reader else [])
