"""`kreplica check --master URL`: model configs of the toy spec checked on Spark, on a standalone
cluster whose executors run a plain Python (no kreplica: it reaches them as the shipped zip, the
spec and tla2tools.jar as shipped files); bad options and an unreachable master in one line;
Ctrl-C in local mode exits 130 and leaves no TLC running."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_helpers import one_error_line
from click.testing import CliRunner, Result
from test_spark_cluster import (  # the standalone master and worker on loopback
    PLAIN_PYTHON,
    _group_alive,
    _plain_python_version,
    _stop_driver,
    cluster,
)

from kreplica.conformance.cli.main import main
from kreplica.conformance.tla.itf import read_trace
from kreplica.conformance.tla.tlc import find_java

__all__ = ["cluster"]  # a fixture, imported for its name


def check(*args: str) -> Result:
    """Run `kreplica check ARGS` in-process."""
    return CliRunner().invoke(main, ["check", *args])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.tlc
@pytest.mark.skipif(
    _plain_python_version() != "{}.{}".format(*sys.version_info[:2]),
    reason=f"{PLAIN_PYTHON} is missing or not this Python's version",
)
def test_a_standalone_cluster_checks_configs_and_writes_the_same_report(
    cluster: str, spec_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)  # spark_context sets it: undone after
    out, report = tmp_path / "ce", tmp_path / "report.md"
    from pyspark import SparkContext

    try:
        result = check(
            "--spec-dir", str(spec_dir), "--config", "CounterOk", "--config", "CounterBug",
            "--master", cluster, "--conf", f"spark.pyspark.python={PLAIN_PYTHON}",
            "--conf", "spark.executor.memory=512m", "--java", find_java(),
            "--out", str(out), "--report", str(report),
        )  # fmt: skip
    finally:
        _stop_driver(SparkContext)
    assert result.exit_code == 0, result.output
    assert "2 configs, 2 as expected" in result.stdout and result.stderr == ""
    assert [p.name for p in out.iterdir()] == ["CounterBug.itf.json"]
    trace = read_trace(out / "CounterBug.itf.json")
    assert [s.action for s in trace.states] == ["Init", "Inc", "Inc"]
    lines = report.read_text().splitlines()
    assert lines[2].startswith("| CounterOk | ") and "| ok | 97 | 48 |" in lines[2]
    assert lines[3].startswith("| CounterBug | ") and "violation Small" in lines[3]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--master", "local[1]", "--checker", "apalache"], "--master runs TLC only"),
        (["--master", "local[1]", "--jobs", "2"], "--jobs does nothing with --master"),
        (["--conf", "spark.cores.max=1"], "give --master too"),
        (["--master", "local[1]", "--conf", "nokey"], "'nokey' is not KEY=VALUE"),
    ],
)
def test_bad_spark_options_are_one_line(spec_dir: Path, args: list[str], message: str) -> None:
    result = check("--spec-dir", str(spec_dir), "--config", "CounterOk", *args)
    assert result.exit_code == 2
    assert message in one_error_line(result)


def test_an_unreachable_master_is_one_line(spec_dir: Path, tmp_path: Path) -> None:
    master = f"spark://127.0.0.1:{_free_port()}"
    result = check("--spec-dir", str(spec_dir), "--config", "CounterOk", "--master", master,
                   "--out", str(tmp_path / "ce"))  # fmt: skip
    assert result.exit_code == 2
    assert f"the Spark master {master} is unreachable" in one_error_line(result)


def _tlc_processes(driver: int) -> list[int]:
    """TLC processes started for the Spark driver `driver` (their environment names it)."""
    mark = f"KREPLICA_CONFORM_DRIVER={driver}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if b"tlc2.TLC" in (entry / "cmdline").read_bytes() and mark in (
                entry / "environ"
            ).read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.tlc
def test_ctrl_c_on_local_spark_exits_130_and_leaves_no_tlc(spec_dir: Path, tmp_path: Path) -> None:
    """Slow has a billion states: its TLC is running when Ctrl-C comes."""
    kreplica = Path(sys.executable).parent / "kreplica"
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    process = subprocess.Popen(
        [str(kreplica), "check", "--spec-dir", str(spec_dir), "--config", "Slow",
         "--master", "local[1]", "--out", str(tmp_path / "ce")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while not _tlc_processes(process.pid):
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "TLC did not start"
            time.sleep(0.3)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode == 130, stderr
    # Spark's JVM prints its own start-up lines first (as under `kreplica conform`): kreplica's
    # is the one line after them, and no traceback
    lines = stderr.strip().splitlines()
    assert [line for line in lines if line.startswith("kreplica")] == lines[-1:], stderr
    assert lines[-1] == "kreplica: error: interrupted" and "Traceback" not in stderr, stderr
    assert not _group_alive(process.pid), "a process of the run (Spark's JVM, TLC) was left"
    assert _tlc_processes(process.pid) == [], "a TLC process was left running"
