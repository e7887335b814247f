"""`kreplica conform` on a real Spark standalone cluster: a master and one worker started from the
venv's pyspark on loopback, whose executors run a plain Python (/usr/bin/python3: no kreplica, no
pyarrow, no click). kreplica reaches them only as the zip the driver ships (addPyFile).

Both JVMs are started in sessions of their own and stopped by process group in a fixture."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyspark
import pytest

from kreplica.conformance.errors import CheckerError
from kreplica.conformance.fuzz.random_walk import FETCH_MAX_RECORDS
from kreplica.conformance.spark import check_master, spark_failure
from kreplica.conformance.tla.specs import default_spec_dir
from kreplica.conformance.tla.tlc import TlcOptions, find_java, find_tla2tools
from kreplica.conformance.validate.conform import SparkRun, run_spark, ship_files
from kreplica.conformance.validate.results import PARQUET, iter_rows
from kreplica.conformance.validate.tracecheck import CheckSettings, SpecParams

PLAIN_PYTHON = Path("/usr/bin/python3")
JAVA_HOME = Path("/usr/lib/jvm/java-17-openjdk-amd64")
SPARK_HOME = Path(pyspark.__file__).parent


def _plain_python_version() -> str | None:
    if not PLAIN_PYTHON.exists():
        return None
    out = subprocess.run(
        [str(PLAIN_PYTHON), "-S", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return out.stdout.strip() or None


pytestmark = pytest.mark.skipif(
    _plain_python_version() != "{}.{}".format(*sys.version_info[:2]),
    reason=f"{PLAIN_PYTHON} is missing or not Python {sys.version_info[0]}.{sys.version_info[1]}",
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Stop a JVM and everything in its session (its process group), by its pid."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        try:
            process.wait(timeout=10)
            break
        except subprocess.TimeoutExpired:
            continue
    process.wait()


def _group_alive(pgid: int, wait: float = 10.0) -> bool:
    """Whether a process of group `pgid` is still alive after `wait` seconds (zombies aside)."""
    deadline = time.monotonic() + wait
    while True:
        alive = False
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[-1].split()
            except OSError:
                continue
            if len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
                alive = True
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(stat.parent.name), signal.SIGKILL)
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


def _stop_driver(spark_context: Any) -> None:
    """Stop the cluster's SparkContext and the driver's own JVM (py4j's gateway), by its pid;
    a later test then starts a fresh one."""
    active = spark_context._active_spark_context
    if active is not None:
        active.stop()
    gateway = spark_context._gateway
    if gateway is not None:
        process = getattr(gateway, "proc", None)
        with contextlib.suppress(Exception):
            gateway.shutdown()
        if process is not None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            process.wait(timeout=10)
        spark_context._gateway = None
        spark_context._jvm = None


@contextlib.contextmanager
def standalone_cluster(root: Path, workers: int = 1) -> Iterator[str]:
    """A standalone master and `workers` 1-core workers on loopback, whose executors run
    PLAIN_PYTHON; yields the master's URL. Every JVM is stopped by process group at the end."""
    if not (JAVA_HOME / "bin" / "java").exists():
        pytest.skip("no Java 17 at " + str(JAVA_HOME))
    root.mkdir(parents=True, exist_ok=True)
    port, ui = _free_port(), _free_port()
    env = {
        **os.environ,
        "JAVA_HOME": str(JAVA_HOME),
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_WORK_DIR": str(root / "work"),
        "SPARK_LOG_DIR": str(root / "logs"),
        "PYSPARK_PYTHON": str(PLAIN_PYTHON),
        "PYTHONPATH": "",
    }
    env.pop("VIRTUAL_ENV", None)
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    url = f"spark://127.0.0.1:{port}"
    started: list[subprocess.Popen[bytes]] = []
    master_log = root / "master.log"
    try:
        with master_log.open("wb") as log:
            started.append(subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                 "--port", str(port), "--webui-port", str(ui)],
                env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            ))  # fmt: skip
        for n in range(workers):
            with (root / f"worker-{n}.log").open("wb") as log:
                started.append(subprocess.Popen(
                    [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host",
                     "127.0.0.1", "--cores", "1", "--memory", "1g", "--webui-port",
                     str(_free_port()), "--work-dir", str(root / "work")],
                    env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                ))  # fmt: skip
        deadline = time.monotonic() + 40
        while master_log.read_bytes().count(b"Registering worker") < workers:
            if time.monotonic() > deadline or any(p.poll() is not None for p in started):
                raise AssertionError("a worker did not register:\n" + master_log.read_text())
            time.sleep(0.2)
        yield url
    finally:
        for process in reversed(started):
            _stop(process)
        assert not any(_group_alive(p.pid) for p in started), "a Spark JVM was left running"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A standalone master and a 1-core worker on loopback; yields the master's URL."""
    with standalone_cluster(tmp_path_factory.mktemp("spark-cluster")) as url:
        yield url


def _settings() -> CheckSettings:
    tlc = TlcOptions(java=find_java(), jar=find_tla2tools(), time_limit=300)
    return CheckSettings(SpecParams(fetch_max_records=FETCH_MAX_RECORDS), default_spec_dir(), tlc)


def test_a_cluster_whose_python_lacks_kreplica_checks_a_corpus(
    cluster: str, tmp_path: Path
) -> None:
    corpus = tmp_path / "corpus.jsonl"
    subprocess.run(
        [sys.executable, "-m", "kreplica", "walk", "--traces", "6", "--steps", "20",
         "--seed", "0", "--out", str(corpus)],
        check=True, capture_output=True,
    )  # fmt: skip
    settings = _settings()
    out = tmp_path / "out"
    run = SparkRun([str(corpus)], settings, 3, cluster, ship_files(settings),
                   metadata={"test": "cluster"},
                   conf={"spark.pyspark.python": str(PLAIN_PYTHON),
                         "spark.executor.memory": "512m", "spark.cores.max": "1"})  # fmt: skip
    from pyspark import SparkContext

    try:
        written = run_spark(run, out, lambda done, total: None)

        def python(_: int) -> tuple[str, bool]:  # on an executor: its Python; has it pyarrow?
            import importlib.util
            import sys

            return sys.executable, importlib.util.find_spec("pyarrow") is not None

        executors = SparkContext.getOrCreate().parallelize([0], 1).map(python).collect()
        assert executors == [(str(PLAIN_PYTHON), False)], executors  # no pyarrow there
    finally:
        _stop_driver(SparkContext)
    rows = list(iter_rows(out / PARQUET))
    assert written == len(rows) == 6
    assert sorted(r["trace_id"] for r in rows) == [f"{corpus}:{n}" for n in range(1, 7)]
    assert all(r["verdict"] == "conforms" for r in rows), rows
    assert (out / "results.json").read_text().count("\n") == 6


def test_an_unreachable_master_fails_in_one_line() -> None:
    with pytest.raises(CheckerError, match=r"unreachable .*127\.0\.0\.1:\d+"):
        check_master(f"spark://127.0.0.1:{_free_port()}", timeout=2)


def test_a_failed_task_is_reported_by_its_root_cause() -> None:
    text = (
        "An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 0.0"
        " failed 4 times, most recent failure: Lost task 0.3 (TID 3) (127.0.0.1 executor 0):"
        " org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
        '  File "/usr/lib/python3.11/pickle.py", line 1, in loads\n'
        "ModuleNotFoundError: No module named 'kreplica'\n"
        "\n\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(X.scala:1)\n"
    )
    assert spark_failure(Exception(text)) == "ModuleNotFoundError: No module named 'kreplica'"
    assert spark_failure(Exception("Job aborted due to stage failure: lost\nmore")) == "lost"
