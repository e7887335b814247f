"""ZooKeeper and three Kafka 2.6.3 brokers as real JVM processes on loopback, always torn down.

Each node has its own loopback address, port, directory, config and log file under a run
directory: ZooKeeper on 127.0.0.4, broker N on 127.0.0.N, ports `port_base` (ZooKeeper) and
`port_base + N`. Run as root, each node's JVM runs under a uid of its own (`uid_base + N`,
ZooKeeper `uid_base`): every loopback connection leaves from 127.0.0.1, whoever opens it, so the
nemesis (nemesis.py) tells the brokers' traffic apart by its owner in iptables, not by address.

Contract: `Cluster` is a context manager. Whatever happens inside it (an error, Ctrl-C, SIGTERM
turned into KeyboardInterrupt by `errors.run_command`), leaving it kills every JVM it started
(each in a process group of its own: SIGCONT, then SIGKILL to the group) and waits for them, so
no JVM is left and no port stays bound. If the harness itself dies (kill -9), the kernel kills
the JVMs: each is started with PR_SET_PDEATHSIG = SIGKILL (`tla.tlc.death_signal`, which also
kills a JVM whose harness died between the fork and that request); its iptables chain and its
mounts are the reaper's (reaper.py). As root, entering also removes the port base's iptables
chain if a run killed together with its reaper left it (once a reaper still at work on it is
done): its cuts would keep the new brokers from ZooKeeper.

Errors: `PortInUse` (exit 5) before anything starts, also when another live run's reaper guards
the port base's chain; `StartTimeout` (exit 3) when a node is not ready in time; `NodeFailed`
(exit 6) when a JVM exits on its own, with the last line of its log.

Why one module over 600 lines: where each node lives and what it is given (`Layout`, the
properties files) and the processes started there are one contract, the one above, which the
rest of the room reads through `Layout` and `Cluster`; what stands apart already lives beside it
(`install`, `nemesis`, `reaper`, `workload`).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from kreplica.conformance.errors import EXIT_TIMEOUT, KreplicaError
from kreplica.conformance.kafka.install import Installation
from kreplica.conformance.kafka.reaper import ChainBusy, chain_name, clear_stale_chain
from kreplica.conformance.kafka.schedule import BROKERS, ZK
from kreplica.conformance.tla.tlc import death_signal, interrupts_deferred

Node = int | str
"""A broker id (1, 2, 3) or "zk"."""

NODES: tuple[Node, ...] = (ZK, *BROKERS)
TOPIC = "kreplica"
PARTITION = 0
ZK_HOST = "127.0.0.4"
DEFAULT_PORT_BASE = 19090
DEFAULT_UID_BASE = 61000
EXIT_PORT_IN_USE = 5
EXIT_NODE_FAILED = 6
REPLICA_FETCH_WAIT_MAX_MS = 100
REPLICA_FETCH_BACKOFF_MS = 200
REPLICA_SOCKET_TIMEOUT_MS = 3000
"""The follower fetchers' settings every broker gets (real.HARNESS_TIMING repeats them)."""
HW_CHECKPOINT_INTERVAL_MS = 200
"""replica.high.watermark.checkpoint.interval.ms of every broker (real.HARNESS_TIMING too)."""
Progress = Callable[[str], None]
"""Told a short line as each node becomes ready ("zookeeper ready", "broker 2 ready", ...)."""

CLIENT_LOGGERS = ("kazoo", "kafka")
"""The client libraries' loggers; their lines would otherwise reach stderr (logging's last
resort prints warnings of a logger with no handler)."""

LOG_FORMAT = "[%(asctime)s] %(levelname)s %(name)s %(message)s"


class PortInUse(KreplicaError):
    """A port the cluster needs is already bound by another process."""

    exit_code = EXIT_PORT_IN_USE


class StartTimeout(KreplicaError):
    """A node (or the topic's first leader) was not ready within its timeout."""

    exit_code = EXIT_TIMEOUT


class NodeFailed(KreplicaError):
    """A JVM exited on its own, or the cluster refused an admin request."""

    exit_code = EXIT_NODE_FAILED


@dataclass(frozen=True)
class Layout:
    """Where each node lives: address, port, directory, uid."""

    run_dir: Path
    port_base: int = DEFAULT_PORT_BASE
    uid_base: int | None = DEFAULT_UID_BASE
    """None: every JVM runs as the harness's own user (no partitions then)."""

    def host(self, node: Node) -> str:
        """The node's loopback address."""
        return ZK_HOST if node == ZK else f"127.0.0.{node}"

    def port(self, node: Node) -> int:
        """The node's listening port."""
        return self.port_base if node == ZK else self.port_base + int(node)

    def directory(self, node: Node) -> Path:
        """The node's own directory: config, data, log files."""
        return self.run_dir / ("zookeeper" if node == ZK else f"broker-{node}")

    def data_dir(self, node: Node) -> Path:
        """ZooKeeper's dataDir or the broker's log.dirs."""
        return self.directory(node) / "data"

    def log_file(self, node: Node) -> Path:
        """The node's log4j log."""
        return self.directory(node) / "server.log"

    def uid(self, node: Node) -> int | None:
        """The uid the node's JVM runs as (None: the harness's own)."""
        if self.uid_base is None:
            return None
        return self.uid_base + (0 if node == ZK else int(node))

    def bootstrap(self) -> list[str]:
        """host:port of every broker."""
        return [f"{self.host(b)}:{self.port(b)}" for b in BROKERS]

    def zk_connect(self) -> str:
        """ZooKeeper's host:port."""
        return f"{ZK_HOST}:{self.port(ZK)}"


@dataclass(frozen=True)
class ClusterSettings:
    """The topic's and brokers' settings a schedule chooses, and the harness's time limits."""

    min_insync_replicas: int = 2
    unclean: bool = False
    start_timeout_s: float = 60.0
    heap_mb: int = 256
    zk_session_timeout_ms: int = 6000
    replica_lag_time_max_ms: int = 4000
    agent: Path | None = None
    """kreplica's Java agent (build/kafka/agent/kreplica-agent.jar): when set, each broker's JVM
    records its replication steps into events.jsonl in its directory (ZooKeeper's runs without)."""
    debug_loggers: bool = False
    """Kafka's replication loggers at DEBUG (state.change.logger at TRACE) in each broker's
    server.log: kafka.cluster.Partition, kafka.server.ReplicaFetcherThread, ReplicaManager."""


@dataclass(frozen=True)
class PartitionState:
    """The partition's state as the controller wrote it in ZooKeeper."""

    leader: int
    """-1: no leader."""
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int


def broker_properties(layout: Layout, broker: int, settings: ClusterSettings) -> dict[str, str]:
    """server.properties for one broker: short timeouts, no rebalancing, small footprints."""
    listener = f"PLAINTEXT://{layout.host(broker)}:{layout.port(broker)}"
    return {
        "broker.id": str(broker),
        "listeners": listener,
        "advertised.listeners": listener,
        "log.dirs": str(layout.data_dir(broker)),
        "zookeeper.connect": layout.zk_connect(),
        "zookeeper.session.timeout.ms": str(settings.zk_session_timeout_ms),
        "zookeeper.connection.timeout.ms": "10000",
        "inter.broker.protocol.version": "2.6",
        "log.message.format.version": "2.6",
        "min.insync.replicas": str(settings.min_insync_replicas),
        "unclean.leader.election.enable": str(settings.unclean).lower(),
        "auto.leader.rebalance.enable": "false",
        "auto.create.topics.enable": "false",
        "replica.lag.time.max.ms": str(settings.replica_lag_time_max_ms),
        "replica.fetch.wait.max.ms": str(REPLICA_FETCH_WAIT_MAX_MS),
        "replica.fetch.backoff.ms": str(REPLICA_FETCH_BACKOFF_MS),
        "replica.socket.timeout.ms": str(REPLICA_SOCKET_TIMEOUT_MS),
        "controller.socket.timeout.ms": "3000",
        "replica.high.watermark.checkpoint.interval.ms": str(HW_CHECKPOINT_INTERVAL_MS),
        "log.flush.offset.checkpoint.interval.ms": "1000",
        "controlled.shutdown.enable": "true",
        "controlled.shutdown.max.retries": "2",
        "controlled.shutdown.retry.backoff.ms": "500",
        "log.cleaner.enable": "false",
        "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.replication.factor": "1",
        "num.network.threads": "2",
        "num.io.threads": "2",
        "background.threads": "2",
        "num.recovery.threads.per.data.dir": "1",
        "num.replica.fetchers": "1",
    }


def zookeeper_properties(layout: Layout) -> dict[str, str]:
    """zoo.cfg for a standalone ZooKeeper with a short tick (sessions of 1 to 20 s)."""
    return {
        "dataDir": str(layout.data_dir(ZK)),
        "clientPort": str(layout.port(ZK)),
        "clientPortAddress": ZK_HOST,
        "tickTime": "500",
        "minSessionTimeout": "1000",
        "maxSessionTimeout": "20000",
        "maxClientCnxns": "0",
        "admin.enableServer": "false",
        "4lw.commands.whitelist": "ruok,srvr",
    }


DEBUG_LOGGERS: dict[str, str] = {
    "kafka.cluster.Partition": "DEBUG",
    "state.change.logger": "TRACE",
    "kafka.server.ReplicaFetcherThread": "DEBUG",
    "kafka.server.ReplicaManager": "DEBUG",
}
"""The brokers' replication loggers and levels `ClusterSettings.debug_loggers` turns on."""


def log4j_properties(log_file: Path, debug_loggers: bool = False) -> dict[str, str]:
    """log4j 1 settings: everything at INFO into the node's server.log; with `debug_loggers`,
    the DEBUG_LOGGERS at their levels into the same file."""
    props = {
        "log4j.rootLogger": "INFO, file",
        "log4j.appender.file": "org.apache.log4j.FileAppender",
        "log4j.appender.file.File": str(log_file),
        "log4j.appender.file.layout": "org.apache.log4j.PatternLayout",
        "log4j.appender.file.layout.ConversionPattern": "[%d] %p %m (%c)%n",
    }
    if debug_loggers:
        props.update({f"log4j.logger.{name}": level for name, level in DEBUG_LOGGERS.items()})
    return props


def write_properties(path: Path, values: dict[str, str]) -> None:
    """Write a Java properties file (values are plain: paths, numbers, names)."""
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()), encoding="utf-8")


def check_ports_free(layout: Layout) -> None:
    """PortInUse naming the first node whose address:port another process holds."""
    for node in NODES:
        host, port = layout.host(node), layout.port(node)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the JVMs bind
            try:
                probe.bind((host, port))
            except OSError as err:
                raise PortInUse(
                    f"port {host}:{port} ({_name(node)}) is in use ({err.strerror}); "
                    "stop what holds it or choose another --port-base"
                ) from None


def clear_stale_rules(layout: Layout) -> None:
    """As root with iptables and uids of the nodes' own: no chain of the port base is left
    (PortInUse if another live run's reaper guards it)."""
    iptables = shutil.which("iptables")
    if layout.uid_base is None or os.geteuid() != 0 or iptables is None:
        return
    try:
        clear_stale_chain(iptables, chain_name(layout.port_base))
    except ChainBusy as err:
        raise PortInUse(str(err)) from None


def check_reachable(run_dir: Path) -> None:
    """KreplicaError unless other uids can reach the run directory (its ancestors searchable)."""
    for folder in (run_dir, *run_dir.parents):
        if folder.exists() and not folder.stat().st_mode & 0o001:
            raise KreplicaError(
                f"{folder} is not searchable by other users, and the brokers run under uids "
                "of their own: choose a --workdir elsewhere (chmod o+x)"
            )


RUN_MARKER = ".kreplica-kafka-run"
"""The file that marks a directory as a run directory, which the next run may empty."""


def fresh_run_dir(run_dir: Path) -> Path:
    """Make `run_dir` an empty run directory; refuse a non-empty one that is not a run's."""
    if run_dir.exists():
        if not run_dir.is_dir():
            raise KreplicaError(f"--workdir {run_dir} is not a directory")
        if any(run_dir.iterdir()) and not (run_dir / RUN_MARKER).exists():
            raise KreplicaError(
                f"--workdir {run_dir} is not empty and holds no earlier run: choose another"
            )
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    (run_dir / RUN_MARKER).touch()
    os.chmod(run_dir, 0o755)
    return run_dir


def _name(node: Node) -> str:
    return "zookeeper" if node == ZK else f"broker {node}"


@dataclass
class Cluster:
    """ZooKeeper and three brokers, started, faulted and always stopped by the harness."""

    install: Installation
    layout: Layout
    settings: ClusterSettings = field(default_factory=ClusterSettings)
    progress: Progress | None = None
    processes: dict[Node, subprocess.Popen[bytes]] = field(default_factory=dict)
    paused: set[Node] = field(default_factory=set)
    _zk: Any = None
    _log: logging.Handler | None = None

    def __enter__(self) -> Cluster:
        """Check the ports, remove a killed run's iptables chain, write every node's config;
        nothing is started yet. The clients' log lines (kazoo, kafka-python) go to harness.log
        in the run directory, not stderr."""
        check_ports_free(self.layout)
        clear_stale_rules(self.layout)
        self._prepare()
        self._log = logging.FileHandler(self.layout.run_dir / "harness.log", encoding="utf-8")
        self._log.setFormatter(logging.Formatter(LOG_FORMAT))
        for name in CLIENT_LOGGERS:
            logging.getLogger(name).addHandler(self._log)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Kill every JVM this cluster started and wait for it (nothing is left running)."""
        self.stop_all()
        if self._log is not None:
            for name in CLIENT_LOGGERS:
                logging.getLogger(name).removeHandler(self._log)
            self._log.close()

    # -- set-up ---------------------------------------------------------------------------

    def _prepare(self) -> None:
        if self.layout.uid_base is not None:
            check_reachable(self.layout.run_dir)
        for node in NODES:
            folder = self.layout.directory(node)
            self.layout.data_dir(node).mkdir(parents=True, exist_ok=True)
            (folder / "tmp").mkdir(exist_ok=True)
            debug = self.settings.debug_loggers and node != ZK
            log4j = log4j_properties(self.layout.log_file(node), debug_loggers=debug)
            write_properties(folder / "log4j.properties", log4j)
            if node == ZK:
                write_properties(folder / "zoo.cfg", zookeeper_properties(self.layout))
            else:
                props = broker_properties(self.layout, int(node), self.settings)
                write_properties(folder / "server.properties", props)
            self._chown(folder)

    def _chown(self, folder: Path) -> None:
        uid = self.layout.uid(_node_of(folder, self.layout))
        if uid is None:
            return
        for path in (folder, *folder.rglob("*")):
            os.chown(path, uid, uid)

    def command(self, node: Node) -> list[str]:
        """The JVM command line that starts a node."""
        folder = self.layout.directory(node)
        heap = 128 if node == ZK else self.settings.heap_mb
        jvm = [
            str(self.install.java),
            f"-Xmx{heap}m",
            "-Xms32m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-XX:-UsePerfData",
            "-Djava.awt.headless=true",
            f"-Djava.io.tmpdir={folder / 'tmp'}",
            f"-Dlog4j.configuration=file:{folder / 'log4j.properties'}",
            f"-Dkafka.logs.dir={folder}",
            *self.agent_options(node),
            "-cp",
            self.install.classpath,
        ]
        if node == ZK:
            main = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
            return [*jvm, main, str(folder / "zoo.cfg")]
        return [*jvm, "kafka.Kafka", str(folder / "server.properties")]

    def agent_options(self, node: Node) -> list[str]:
        """The -javaagent option of a broker's JVM when the settings name the agent's jar: its
        events go to events.jsonl in the broker's directory (appended to across restarts)."""
        if self.settings.agent is None or node == ZK:
            return []
        events = self.layout.directory(node) / "events.jsonl"
        return [f"-javaagent:{self.settings.agent.resolve()}=events={events},broker={node}"]

    def _spawn(self, node: Node) -> None:
        folder = self.layout.directory(node)
        uid = self.layout.uid(node)
        with (folder / "stdout.log").open("ab") as out, interrupts_deferred():
            self.processes[node] = subprocess.Popen(
                self.command(node),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=folder,
                start_new_session=True,
                user=uid,
                group=uid,
                extra_groups=[] if uid is not None else None,
                preexec_fn=death_signal(),  # after the uid switch, which would clear it
                env=_jvm_env(self.install),
            )
        self.paused.discard(node)

    # -- start and readiness --------------------------------------------------------------

    def start(self) -> None:
        """Start ZooKeeper, then the three brokers; return when all are registered."""
        deadline = time.monotonic() + self.settings.start_timeout_s
        self._spawn(ZK)
        self._wait(ZK, deadline, lambda: _zk_ok(self.layout))
        self._tell("zookeeper ready")
        self._connect_zk(deadline)
        for broker in BROKERS:
            self._spawn(broker)
        for broker in BROKERS:
            self.wait_registered(broker, deadline)
            self._tell(f"broker {broker} ready")

    def wait_registered(self, broker: int, deadline: float) -> None:
        """Wait until the broker is registered in ZooKeeper and its port answers."""
        self._wait(
            broker,
            deadline,
            lambda: self.zk_exists(f"/brokers/ids/{broker}") and _port_open(self.layout, broker),
        )

    def _wait(self, node: Node, deadline: float, ready: Callable[[], bool]) -> None:
        while not ready():
            self._check_alive(node)
            if time.monotonic() > deadline:
                raise StartTimeout(
                    f"{_name(node)} was not ready within {self.settings.start_timeout_s:g}s "
                    f"(see {self.layout.log_file(node)})"
                )
            time.sleep(0.1)

    def _check_alive(self, node: Node) -> None:
        process = self.processes.get(node)
        if process is not None and process.poll() is not None:
            raise NodeFailed(
                f"{_name(node)} exited with code {process.returncode}: "
                f"{last_log_line(self.layout, node)}"
            )

    def _tell(self, line: str) -> None:
        if self.progress is not None:
            self.progress(line)

    # -- ZooKeeper reads ------------------------------------------------------------------

    def _connect_zk(self, deadline: float) -> None:
        from kazoo.client import KazooClient

        self._zk = KazooClient(hosts=self.layout.zk_connect(), timeout=10.0)
        self._zk.start(timeout=max(1.0, deadline - time.monotonic()))

    def zk_exists(self, path: str) -> bool:
        """Whether a znode exists (False if ZooKeeper cannot be asked)."""
        try:
            return self._zk is not None and self._zk.exists(path) is not None
        except Exception:  # kazoo raises its own errors for a lost connection
            return False

    def controller_broker(self) -> int | None:
        """The broker ZooKeeper's /controller names (None: no controller now)."""
        try:
            data, _ = self._zk.get("/controller")
            return int(json.loads(data.decode("utf-8"))["brokerid"])
        except Exception:  # kazoo's errors for a missing node or a lost connection
            return None

    def partition_state(self) -> PartitionState | None:
        """The partition's leader, epoch and ISR from ZooKeeper (None before the topic exists)."""
        path = f"/brokers/topics/{TOPIC}/partitions/{PARTITION}/state"
        try:
            data, _ = self._zk.get(path)
        except Exception:
            return None
        raw = json.loads(data.decode("utf-8"))
        return PartitionState(
            leader=int(raw["leader"]),
            leader_epoch=int(raw["leader_epoch"]),
            isr=tuple(int(b) for b in raw["isr"]),
            controller_epoch=int(raw["controller_epoch"]),
        )

    def wait_state(
        self, ok: Callable[[PartitionState], bool], timeout_s: float, what: str
    ) -> PartitionState:
        """Poll ZooKeeper until the partition's state satisfies `ok`; StartTimeout if never."""
        deadline = time.monotonic() + timeout_s
        while True:
            state = self.partition_state()
            if state is not None and ok(state):
                return state
            if time.monotonic() > deadline:
                raise StartTimeout(f"{what} did not happen within {timeout_s:g}s (state: {state})")
            time.sleep(0.1)

    # -- faults on processes --------------------------------------------------------------

    def alive(self, node: Node) -> bool:
        """Whether the node's JVM is running (paused counts as running)."""
        process = self.processes.get(node)
        return process is not None and process.poll() is None

    def signal(self, node: Node, sig: signal.Signals) -> None:
        """Send a signal to the node's process group."""
        process = self.processes[node]
        with suppress(ProcessLookupError):
            os.killpg(process.pid, sig)

    def crash(self, broker: int) -> None:
        """kill -9 the broker and reap it (the page cache keeps what it wrote)."""
        self.signal(broker, signal.SIGKILL)
        self.processes[broker].wait()
        self.paused.discard(broker)

    def shutdown(self, broker: int, timeout_s: float = 30.0) -> None:
        """SIGTERM: Kafka's controlled shutdown moves leadership away first; SIGKILL if stuck."""
        if broker in self.paused:
            self.resume(broker)
        self.signal(broker, signal.SIGTERM)
        try:
            self.processes[broker].wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.crash(broker)

    def pause(self, broker: int) -> None:
        """SIGSTOP: the JVM freezes as in a long GC pause; its sockets stay open."""
        self.signal(broker, signal.SIGSTOP)
        self.paused.add(broker)

    def resume(self, broker: int) -> None:
        """SIGCONT."""
        self.signal(broker, signal.SIGCONT)
        self.paused.discard(broker)

    def restart(self, broker: int) -> None:
        """Start a stopped broker again, once its old ZooKeeper registration has expired."""
        deadline = time.monotonic() + self.settings.start_timeout_s
        while self.zk_exists(f"/brokers/ids/{broker}"):
            if time.monotonic() > deadline:
                raise StartTimeout(f"broker {broker}'s old registration did not expire")
            time.sleep(0.1)
        self._spawn(broker)
        self.wait_registered(broker, deadline)

    # -- teardown -------------------------------------------------------------------------

    def stop_all(self) -> None:
        """Kill every node's process group and reap it, then let the ZooKeeper client go.

        The JVMs go first: nothing after that may keep one alive, however the client ends."""
        for node, process in self.processes.items():
            if process.poll() is None:
                self.signal(node, signal.SIGCONT)
                self.signal(node, signal.SIGKILL)
        for process in self.processes.values():
            with suppress(subprocess.TimeoutExpired):
                process.wait(timeout=30)
        self.paused.clear()
        if self._zk is not None:
            _close_quietly(self._zk)
            self._zk = None

    def pids(self) -> Iterator[int]:
        """The pids of the running JVMs."""
        return (p.pid for p in self.processes.values() if p.poll() is None)


def _close_quietly(client: Any, timeout_s: float = 5.0) -> None:
    """Stop a kazoo client from a helper thread, waiting at most `timeout_s`: a client that an
    interrupt caught half-way through connecting can block in stop() for good."""

    def close() -> None:
        with suppress(Exception):
            client.stop()
            client.close()

    closer = threading.Thread(target=close, name="kazoo-close", daemon=True)
    closer.start()
    closer.join(timeout_s)


def _node_of(folder: Path, layout: Layout) -> Node:
    for node in NODES:
        if layout.directory(node) == folder:
            return node
    raise ValueError(folder)


def _jvm_env(install: Installation) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAVA_TOOL", "_JAVA", "JDK_"))}
    env["JAVA_HOME"] = str(install.java.parent.parent)
    env.pop("CLASSPATH", None)
    return env


def _zk_ok(layout: Layout) -> bool:
    """ZooKeeper answers 'ruok' with 'imok'."""
    try:
        with socket.create_connection((ZK_HOST, layout.port(ZK)), timeout=1.0) as conn:
            conn.sendall(b"ruok")
            return conn.recv(16) == b"imok"
    except OSError:
        return False


def _port_open(layout: Layout, node: Node) -> bool:
    try:
        with socket.create_connection((layout.host(node), layout.port(node)), timeout=1.0):
            return True
    except OSError:
        return False


def last_log_line(layout: Layout, node: Node) -> str:
    """The last ERROR/FATAL line of the node's logs, else the last line (for one-line errors)."""
    lines: list[str] = []
    for name in ("server.log", "stdout.log"):
        path = layout.directory(node) / name
        with suppress(OSError):
            lines += path.read_text(encoding="utf-8", errors="replace").splitlines()
    serious = [ln for ln in lines if " ERROR " in ln or " FATAL " in ln or "Exception" in ln]
    chosen = (serious or lines or ["(no log)"])[-1]
    return chosen.strip()[:300]
