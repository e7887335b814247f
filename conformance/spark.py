"""What every Spark job of kreplica shares: the context, the shipping of kreplica (and of what
else a task imports) to the executors, the one-line reason of a failed job, Ctrl-C, progress;
and, run as a program, local mode's Python daemon (`daemon`).

Used by `validate.conform` (`kreplica conform`), `validate.suite_spark` (`kreplica check
--master`), `coverage.spark` and `fuzz.swarm` (`kreplica fuzz --master`): one machinery, so that
a cluster's workers need the same things for each, Java 17 and a plain Python of the driver's
minor version, and nothing installed (tests/test_spark_cluster.py, whose workers' Python lacks
kreplica, pyarrow, click and Hypothesis).

Rules: this module knows Spark and the standard library only, not what a task does (no TLC, no
Hypothesis); PySpark is imported inside the functions, so the module loads without it. It may
import `errors` alone (`kreplica.conformance.ROOMS`).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import importlib
import importlib.util
import os
import pickle
import re
import shutil
import signal
import socket
import sys
import tempfile
import threading
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from kreplica.conformance.errors import CheckerError

Progress = Callable[[int, int | None], None]
"""Called with (tasks done, tasks in all when known)."""

LOCAL_JVM_OPTIONS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
"""Spark's JVM in local mode only schedules tasks and writes small rows: with the quick
compiler and the serial collector it starts about 5 s sooner on a busy 2-core machine."""

DRIVER_ENV = "KREPLICA_CONFORM_DRIVER"
"""Set to the driver's pid in local mode: Spark's JVM, its Python workers and what they start
(TLC processes) inherit it, so the driver can find processes that a cancelled task left behind
(`validate.conform`'s clean-up after Ctrl-C)."""


def spark_context(
    master: str, extra: Mapping[str, str] | None = None, class_archives: Path | None = None
) -> Any:
    """The SparkContext for `master` (an existing one is reused), with the properties `extra`
    set last (they win). No SparkSession: nothing here uses Spark SQL, and starting it cost
    about 3 s more (measured). On a cluster the executors run the Python that
    `spark.pyspark.python` (or the driver's PYSPARK_PYTHON) names, else the worker's `python3`:
    not the driver's virtualenv, which the worker's machine does not have. In local mode the
    JVM maps its classes from a class-data-sharing archive in `class_archives`, if given
    (`archive_options`). CheckerError in one line for an unreachable standalone master; Spark's
    own errors (a master URL it cannot parse) are raised as they come (`spark_failure` says
    them in one line)."""
    check_master(master)
    local = master.startswith("local")
    python = (extra or {}).get("spark.pyspark.python")
    if python:  # PySpark's driver reads only the variable when it is not started by spark-submit
        os.environ["PYSPARK_PYTHON"] = python
    if local:
        os.environ[DRIVER_ENV] = str(os.getpid())  # marks the processes of its workers
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
        + ([("spark.driver.extraJavaOptions", _local_options(class_archives))] if local else [])
        + [("spark.python.daemon.module", daemon_module(local))]
        + list((extra or {}).items())
    )
    active = getattr(SparkContext, "_active_spark_context", None)
    if active is not None and active.master != master:  # getOrCreate would hand it back
        active.stop()
    sc = SparkContext.getOrCreate(conf)
    sc.setLogLevel("ERROR")
    return sc


DAEMON = "kreplica.conformance.spark"
"""Local mode's Python daemon, which forks the workers: this module run as a program
(`daemon`)."""

SPARK_DAEMON = "pyspark.daemon"
"""PySpark's own daemon, for every other master: named, not left out, because a context
started later in the same JVM inherits the first one's properties (a standalone cluster's
workers, whose Python lacks kreplica, would be told to run `DAEMON`)."""

SPARK_PYTHON_LIBS = re.compile(r"pyspark\.zip|py4j-[\w.]+-src\.zip|spark-core_[\w.-]+\.jar")
"""The file names of what Spark puts first on its Python workers' path: PySpark and py4j as
source zips (and Spark's core jar)."""


def workers_run_this_python(master: str, extra: Mapping[str, str] | None = None) -> bool:
    """Whether the Python workers of a context for `master` with the properties `extra` run
    this very Python on this machine: local mode, and `spark.pyspark.python` (else
    PYSPARK_PYTHON, which `spark_context` sets to this Python where neither says) names it.
    Such workers import the installed kreplica and read the driver's files: nothing needs
    shipping to them (`ship`, addFile)."""
    python = (extra or {}).get("spark.pyspark.python") or os.environ.get("PYSPARK_PYTHON")
    same = os.path.realpath(python or sys.executable) == os.path.realpath(sys.executable)
    return master.startswith("local") and same


def daemon_module(local: bool) -> str:
    """The Python daemon for a context: `DAEMON` in local mode where the workers run this
    Python (PYSPARK_PYTHON, as `spark_context` sets it) and its installed PySpark has its
    daemon as a file, else `SPARK_DAEMON`."""
    if not local or not workers_run_this_python("local"):
        return SPARK_DAEMON
    found = importlib.util.find_spec("pyspark.daemon")
    installed = found is not None and found.origin is not None and Path(found.origin).is_file()
    return DAEMON if installed else SPARK_DAEMON


def daemon() -> None:
    """PySpark's daemon, with PySpark and py4j imported from the installed packages, compiled
    once, rather than from the source zips Spark puts first on the path, which every run
    compiled again: about 0.45 s off each local run's first job (a trivial job's tasks
    reached their Python 0.78 s after it was submitted, now 0.35 s). The zips stay on the
    path, last; the workers it forks import what they need after the fork, as PySpark's
    daemon has them do."""
    libs = [p for p in sys.path if SPARK_PYTHON_LIBS.fullmatch(os.path.basename(p))]
    sys.path[:] = [p for p in sys.path if p not in libs] + libs
    from pyspark import daemon as pyspark_daemon

    pyspark_daemon.manager()


def _local_options(class_archives: Path | None) -> str:
    """The local JVM's options: LOCAL_JVM_OPTIONS, and the class archive's."""
    return " ".join([LOCAL_JVM_OPTIONS, *archive_options(class_archives)])


_QUIET_CDS = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")
"""An archive that does not fit this JVM or classpath is ignored without a word."""


def archive_options(directory: Path | None) -> list[str]:
    """JVM options for Spark's local JVM: map the classes it loads from a class-data-sharing
    archive in `directory` (about 1 s sooner to start and through its first job on a busy
    2-core machine), or, while there is none, write one when the JVM exits, as a draft named
    after this process, which a later run puts in place once no JVM is writing it (`_adopt`).
    The archive is named after the JVM and Spark it fits. Nothing without a directory, or
    where the directory cannot be made or named in one word."""
    if directory is None or any(c.isspace() for c in str(directory)):
        return []
    archive = directory / f"spark-{_archive_key()}.jsa"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        _adopt(archive)
    except OSError:
        return []
    if archive.is_file():
        return [f"-XX:SharedArchiveFile={archive}", *_QUIET_CDS]
    draft = archive.with_name(f"{archive.name}.{os.getpid()}.draft")
    return [f"-XX:ArchiveClassesAtExit={draft}", *_QUIET_CDS]


def _archive_key() -> str:
    """What an archive of Spark's local JVM must fit: the Java that spark-submit runs
    (JAVA_HOME's, else the one on PATH) and the PySpark whose jars it loads."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home, "bin", "java")) if home else (shutil.which("java") or "java")
    import pyspark

    parts = [os.path.realpath(java), str(Path(str(pyspark.__file__)).parent), pyspark.__version__]
    with contextlib.suppress(OSError):
        stat = os.stat(os.path.realpath(java))
        parts += [str(stat.st_size), str(stat.st_mtime_ns)]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def _adopt(archive: Path) -> None:
    """Put a finished draft of `archive` in place (a draft is finished when no process names
    it on its command line: the JVM that wrote it has exited), and delete the other finished
    ones."""
    drafts = sorted(archive.parent.glob(f"{archive.name}.*.draft"))
    if not drafts:
        return
    busy = _command_lines()
    for draft in drafts:
        if any(str(draft).encode() in line for line in busy):
            continue
        if archive.is_file():
            draft.unlink(missing_ok=True)
        else:
            os.replace(draft, archive)


def _command_lines() -> list[bytes]:
    """Every process's command line (none where /proc is missing)."""
    lines = []
    for entry in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            lines.append((entry / "cmdline").read_bytes())
    return lines


MASTER_URL = re.compile(r"local(\[(\d+|\*)(,\d+)?\])?|local-cluster\[.+\]|spark://.+|yarn|k8s://.+")
"""The master URLs Spark takes (its SparkSubmit refuses any other, after the JVM has started
and with a Java stack trace on stderr)."""


def check_master(master: str, timeout: float = 5.0) -> None:
    """Fail at once, in one line, for a master URL Spark would refuse, or if a standalone master
    (`spark://host:port[,host:port]`) takes no connection: Spark itself retries for a minute and
    then reports only that every master was unresponsive."""
    if not MASTER_URL.fullmatch(master):
        raise CheckerError(
            f"{master!r} is not a Spark master URL (local, local[N], local[*], "
            "spark://HOST:PORT, yarn, k8s://...)"
        )
    if not master.startswith("spark://"):
        return  # local, yarn, k8s://: the cluster manager's client reports its own errors
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


# ---------------------------------------------------------------- shipping to the executors

SHIPPED_PACKAGES = ("kreplica", "click")
"""What the zip for the executors holds: kreplica, and the one third-party package its executor
side imports (click, through `errors`; pure Python). A task that imports more ships it too
(`ship_installed`): the fuzzer's tasks ship Hypothesis."""


def _scratch(prefix: str) -> Path:
    """A new temporary directory, removed when this process exits (Spark has served its files
    to the executors by then; each run left a zip in the temporary directory before)."""
    directory = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    return directory


@functools.cache
def package_zip() -> Path:
    """The packages of `SHIPPED_PACKAGES` as a zip for Spark's executors (addPyFile): no shared
    filesystem, nothing installed on the workers. Walks src/kreplica through its links to impl/
    and conformance/. Made once per process: Spark refuses a second file of the same name with
    other contents in one context, and a source edited since would be one."""
    target = _scratch("kreplica-pyfiles-") / "kreplica.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for package in SHIPPED_PACKAGES:
            root = Path(str(importlib.import_module(package).__file__)).parent
            for directory, _, names in sorted(os.walk(root, followlinks=True)):
                for name in sorted(n for n in names if n.endswith((".py", "py.typed"))):
                    source = Path(directory, name)
                    archive.write(source, Path(package, source.relative_to(root)).as_posix())
    return target


@functools.cache
def installed_zip(modules: tuple[str, ...]) -> Path:
    """The installed top-level modules and packages `modules`, as installed (compiled extensions
    included, `__pycache__` left out), in one zip for `SparkContext.addArchive`, which unpacks
    it on every executor. Not a zip on `sys.path` (addPyFile): Python cannot import an
    extension module from one, and Hypothesis has one (`hypothesis._native`), built for this
    Python's minor version and platform, which a worker's Python must share (it must already
    share the minor version). Made once per process, as `package_zip`; its name tells the
    modules apart."""
    digest = hashlib.sha256("\0".join(modules).encode()).hexdigest()[:12]
    target = _scratch("kreplica-shipped-") / f"shipped-{digest}.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in modules:
            spec = importlib.util.find_spec(name)
            if spec is None or spec.origin is None:
                raise CheckerError(f"cannot ship {name} to the Spark executors: not installed")
            origin = Path(spec.origin)
            if not spec.submodule_search_locations:  # a module: its one file
                archive.write(origin, origin.name)
                continue
            for directory, folders, names in sorted(os.walk(origin.parent)):
                folders[:] = sorted(f for f in folders if f != "__pycache__")
                for file in sorted(names):
                    source = Path(directory, file)
                    archive.write(source, source.relative_to(origin.parent.parent).as_posix())
    return target


def ship(sc: Any) -> None:
    """Send the executors kreplica (and click) as the zip `package_zip` makes (addPyFile):
    PySpark's worker puts it on `sys.path` before it loads a task."""
    sc.addPyFile(str(package_zip()))


def ship_installed(sc: Any, modules: Sequence[str]) -> str:
    """Send the executors the installed modules or packages `modules` as one archive
    (`installed_zip`, addArchive), which each executor unpacks; its name, for `call_shipped`,
    which puts it on `sys.path` (PySpark's worker does not)."""
    archive = installed_zip(tuple(modules))
    sc.addArchive(str(archive))
    return archive.name


def call_shipped(archive: str, target: str, payload: bytes, part: Iterator[Any]) -> Iterator[Any]:
    """On an executor: put the archive `ship_installed` returned (unpacked) first on `sys.path`,
    then hand the task's partition to `target` (`module:function`) with the unpickled `payload`.
    The target's module, and whatever `payload` holds, may import the shipped modules: neither
    is loaded before they can be found. The driver maps partitions with
    `functools.partial(call_shipped, archive, target, pickle.dumps(payload))`."""
    from pyspark import SparkFiles

    unpacked = SparkFiles.get(archive)
    if unpacked not in sys.path:
        sys.path.insert(0, unpacked)
    module, _, name = target.partition(":")
    function = getattr(importlib.import_module(module), name)
    yield from function(part, pickle.loads(payload))


# ---------------------------------------------------------------- a job: Ctrl-C, progress

JOB_GROUP = "kreplica-conform"
"""The job group of every kreplica job, which Ctrl-C cancels (`cancel_job`)."""


def on_interrupt(first: Callable[[], None]) -> Callable[[], None]:
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


def cancel_job(sc: Any, interrupted: threading.Event) -> None:
    """Cancel the run's Spark job (`JOB_GROUP`) from a thread of its own (its own py4j
    connection), quietly: the blocked `collect` then fails, and the runner, seeing
    `interrupted` set, raises KeyboardInterrupt."""
    interrupted.set()

    def cancel() -> None:
        with contextlib.suppress(Exception):
            sc.setLogLevel("OFF")  # cancelled tasks are not errors to print
            sc.cancelJobGroup(JOB_GROUP)

    threading.Thread(target=cancel, daemon=True).start()


def watch_tasks(sc: Any, tasks: int, progress: Progress) -> threading.Event:
    """Poll Spark's status tracker in a thread, reporting the finished tasks of the stage of
    `tasks` tasks in `JOB_GROUP`; set the returned event to stop."""
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


if __name__ == "__main__":  # local mode's Python daemon (`DAEMON`)
    daemon()
