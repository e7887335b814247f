"""One fault schedule on a real Apache Kafka 2.6.3 cluster, ending in an `Outcome`.

`run_schedule` starts ZooKeeper and three brokers (cluster.py), creates the topic (one partition,
replicas [1, 2, 3], so broker 1 is the preferred and first leader; min.insync.replicas and
unclean.leader.election.enable from the schedule), waits for broker 1 to lead a full ISR, performs
each step for real, reads the outcome, and tears everything down, whatever happens.

How each op is performed: produce through kafka-python (workload.py); crash = SIGKILL and reap;
restart = start the JVM again once ZooKeeper has expired its old registration; power-loss = SIGKILL,
then the broker's log directory (on the power-loss filesystem) drops what it had not fsynced and
is remounted (nemesis.PowerDisks; docs/power-loss.md); shutdown = SIGTERM
(Kafka's controlled shutdown); pause/resume = SIGSTOP/SIGCONT; partition/heal = iptables rules
(nemesis.py); elect = an ElectLeaders admin request (preferred or unclean) to the controller;
wait = poll the partition's state in ZooKeeper. A step the cluster cannot take as asked (restart
a running broker, an election the controller refuses, a wait that times out) is noted, not fatal.

The outcome: the acknowledged values per acks; what the final leader serves up to its HW (a
consumer's read), hence the acknowledged values lost; each replica's log, HW, LEO and epoch from
its files (observe.py); and the leader, leader epoch and ISR the controller wrote in ZooKeeper.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kreplica.conformance.kafka.cluster import (
    HW_CHECKPOINT_INTERVAL_MS,
    PARTITION,
    REPLICA_FETCH_BACKOFF_MS,
    REPLICA_FETCH_WAIT_MAX_MS,
    REPLICA_SOCKET_TIMEOUT_MS,
    TOPIC,
    Cluster,
    ClusterSettings,
    Layout,
    NodeFailed,
    PartitionState,
    Progress,
    StartTimeout,
)
from kreplica.conformance.kafka.events import HARNESS_EVENTS_FILE, HarnessLog
from kreplica.conformance.kafka.install import Installation, find_iptables
from kreplica.conformance.kafka.nemesis import Network, PowerDisks
from kreplica.conformance.kafka.observe import diverged, replica_states
from kreplica.conformance.kafka.outcome import Outcome, ReplicaState
from kreplica.conformance.kafka.schedule import ZK, Schedule, Step
from kreplica.conformance.kafka.workload import (
    DELIVERY_TIMEOUT_MS,
    REQUEST_TIMEOUT_MS,
    RETRY_BACKOFF_MS,
    FinalRead,
    Workload,
    read_committed_values,
)

DEFAULT_WAIT_S = 30.0
"""A wait step's time limit when the schedule gives none."""

FINAL_SETTLE_S = 15.0
"""At the end, how long the harness waits for every running, unpaused broker to be in the ISR."""

CHECKPOINT_S = 0.5
"""Pause before the final reads, so live brokers' HW checkpoints (every 200 ms) catch up."""

HARNESS_TIMING: dict[str, int | bool] = {
    "session_timeout_ms": 6000,
    "replica_lag_time_max_ms": 4000,
    "request_timeout_ms": REQUEST_TIMEOUT_MS,
    "delivery_timeout_ms": DELIVERY_TIMEOUT_MS,
    "retry_backoff_ms": RETRY_BACKOFF_MS,
    "retries": True,
    "wait_timeout_ms": int(DEFAULT_WAIT_S * 1000),
    "final_settle_ms": int(FINAL_SETTLE_S * 1000),
    "replica_fetch_wait_max_ms": REPLICA_FETCH_WAIT_MAX_MS,
    "replica_fetch_backoff_ms": REPLICA_FETCH_BACKOFF_MS,
    "replica_socket_timeout_ms": REPLICA_SOCKET_TIMEOUT_MS,
    "replica_high_watermark_checkpoint_interval_ms": HW_CHECKPOINT_INTERVAL_MS,
}
"""The real harness's timeouts, named as timing.Timing names them (`Timing(**HARNESS_TIMING)`
models this harness): ZooKeeper session, replica lag, the producer's request and delivery time
limits and retry back-off, a wait step's default limit, the final settling, the fetchers', the
HW checkpoint's period."""


@dataclass(frozen=True)
class StepResult:
    """One performed step: what it was, how long it took, what happened."""

    index: int
    step: str
    seconds: float
    result: str


@dataclass(frozen=True)
class RealRun:
    """A schedule's run on the real cluster: its outcome and the log of its steps."""

    schedule: str
    outcome: Outcome
    steps: tuple[StepResult, ...]
    start_seconds: float
    """From the first JVM started to broker 1 leading a full ISR."""
    total_seconds: float
    run_dir: Path
    observe_seconds: float = 0.0
    """Settling, the final read, DumpLogSegments and the checkpoints."""
    teardown_seconds: float = 0.0
    """Killing and reaping the JVMs, removing the iptables chain."""

    def to_json(self) -> dict[str, Any]:
        """Plain JSON: the outcome, the steps and the timings."""
        return {
            "schedule": self.schedule,
            "world": "kafka",
            "outcome": self.outcome.to_json(),
            "steps": [vars(s) for s in self.steps],
            "start_seconds": round(self.start_seconds, 3),
            "total_seconds": round(self.total_seconds, 3),
            "observe_seconds": round(self.observe_seconds, 3),
            "teardown_seconds": round(self.teardown_seconds, 3),
            "run_dir": str(self.run_dir),
        }


def needs_network(schedule: Schedule) -> bool:
    """Whether the schedule partitions the network (and so needs iptables and root)."""
    return any(s.op in ("partition", "heal") for s in schedule.steps)


def needs_power_disks(schedule: Schedule) -> bool:
    """Whether the schedule loses power (and so puts the log directories on FUSE)."""
    return any(s.op == "power-loss" for s in schedule.steps)


def settings_for(
    schedule: Schedule,
    start_timeout_s: float,
    agent: Path | None = None,
    debug_loggers: bool = False,
) -> ClusterSettings:
    """The cluster settings the schedule chooses (min ISR, unclean election); `agent` (the
    kreplica agent's jar) and `debug_loggers` as ClusterSettings takes them."""
    return ClusterSettings(
        min_insync_replicas=schedule.min_insync_replicas,
        unclean=schedule.unclean,
        start_timeout_s=start_timeout_s,
        zk_session_timeout_ms=int(HARNESS_TIMING["session_timeout_ms"]),
        replica_lag_time_max_ms=int(HARNESS_TIMING["replica_lag_time_max_ms"]),
        agent=agent,
        debug_loggers=debug_loggers,
    )


def run_schedule(
    schedule: Schedule,
    install: Installation,
    layout: Layout,
    start_timeout_s: float = 90.0,
    progress: Progress | None = None,
    on_step: Callable[[StepResult], None] | None = None,
    agent: Path | None = None,
    debug_loggers: bool = False,
) -> RealRun:
    """Run the schedule on a fresh real cluster; every JVM and iptables rule is gone after.

    `agent`: the kreplica agent's jar, recording each broker's steps into its events.jsonl;
    `debug_loggers`: the replication loggers at DEBUG in each broker's server.log."""
    began = time.monotonic()
    iptables = find_iptables() if needs_network(schedule) else None
    settings = settings_for(schedule, start_timeout_s, agent=agent, debug_loggers=debug_loggers)
    with ExitStack() as stack:  # on the way out: clients closed, rules removed, JVMs killed,
        # then the log directories unmounted (entered first, so left last)
        disks = stack.enter_context(PowerDisks(layout)) if needs_power_disks(schedule) else None
        cluster = stack.enter_context(Cluster(install, layout, settings, progress))
        cluster.start()
        create_topic(cluster, schedule)
        if progress is not None:
            progress("topic created, broker 1 leads a full ISR")
        started = time.monotonic() - began
        network = stack.enter_context(Network(layout, iptables)) if iptables else None
        workload = Workload(layout)
        stack.callback(workload.close)
        harness = HarnessLog(layout.run_dir / HARNESS_EVENTS_FILE)
        runner = _Runner(cluster, workload, network, schedule, on_step, harness, disks)
        runner.run_steps()
        observing = time.monotonic()
        outcome = runner.observe(install)
        observed = time.monotonic() - observing
        tearing = time.monotonic()
    ended = time.monotonic()
    return RealRun(
        schedule.name,
        outcome,
        tuple(runner.results),
        started,
        ended - began,
        layout.run_dir,
        observe_seconds=observed,
        teardown_seconds=ended - tearing,
    )


def create_topic(cluster: Cluster, schedule: Schedule) -> PartitionState:
    """Create the topic through the admin API, and wait for broker 1 to lead a full ISR."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    configs = {
        "min.insync.replicas": str(schedule.min_insync_replicas),
        "unclean.leader.election.enable": str(schedule.unclean).lower(),
    }
    topic = {TOPIC: {"assignments": {PARTITION: [1, 2, 3]}, "configs": configs}}
    try:
        admin = KafkaAdminClient(
            bootstrap_servers=cluster.layout.bootstrap(), request_timeout_ms=15000
        )
        try:
            admin.create_topics(topic)
        finally:
            admin.close()
    except KafkaError as err:
        raise NodeFailed(f"the cluster did not create the topic: {type(err).__name__}") from None
    return cluster.wait_state(
        lambda s: s.leader == 1 and len(s.isr) == 3,
        cluster.settings.start_timeout_s,
        "broker 1 leading the new topic with a full ISR",
    )


WAITS: dict[str, Callable[[PartitionState], bool]] = {
    "isr-shrunk": lambda s: len(s.isr) < 3,
    "isr-full": lambda s: len(s.isr) == 3,
    "leader": lambda s: s.leader >= 0,
}


@dataclass
class _Runner:
    """Performs a schedule's steps on a started cluster and reads the outcome."""

    cluster: Cluster
    workload: Workload
    network: Network | None
    schedule: Schedule
    on_step: Callable[[StepResult], None] | None
    harness: HarnessLog | None = None
    """Where each fault is recorded with its CLOCK_MONOTONIC stamp (for `kafka trace`)."""
    disks: PowerDisks | None = None
    """The brokers' log directories on the power-loss filesystem (schedules with power-loss)."""
    results: list[StepResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def run_steps(self) -> None:
        """Perform every step in order, recording what each did."""
        for index, step in enumerate(self.schedule.steps):
            began = time.monotonic()
            result = self.perform(step)
            done = StepResult(index, str(step), time.monotonic() - began, result)
            self.results.append(done)
            if self.on_step is not None:
                self.on_step(done)

    def perform(self, step: Step) -> str:
        """Perform one step; return what happened, in a few words."""
        handler = getattr(self, f"_{step.op.replace('-', '_')}")
        result: str = handler(step)
        return result

    def _mark(self, op: str, broker: int | None = None) -> None:
        """Record that a fault took effect now (after a kill has been reaped, before a
        restart's JVM starts), in the clock every broker's events are stamped with."""
        if self.harness is not None:
            self.harness.note(op, broker)

    def _note(self, index_step: Step, text: str) -> str:
        self.notes.append(f"{index_step}: {text}")
        return text

    def _produce(self, step: Step) -> str:
        acks = step.acks if step.acks is not None else self.schedule.acks
        ok, failed = self.workload.produce(step.count or 0, acks)
        return f"{ok} acknowledged, {failed} not"

    def _broker(self, step: Step) -> int:
        assert step.broker is not None  # the schedule's parser requires it for these ops
        return step.broker

    def _crash(self, step: Step) -> str:
        broker = self._broker(step)
        if not self.cluster.alive(broker):
            return self._note(step, "not running: nothing to kill")
        self.cluster.crash(broker)
        self._mark("crash", broker)
        return "killed (SIGKILL)"

    def _crash_controller(self, step: Step) -> str:
        broker = self.cluster.controller_broker()
        if broker is None or not self.cluster.alive(broker):
            return self._note(step, "no running controller: nothing to kill")
        self.cluster.crash(broker)
        self._mark("crash", broker)
        self.notes.append(f"{step}: the controller ran on broker {broker}")
        return f"killed broker {broker}, the controller's (SIGKILL)"

    def _power_loss(self, step: Step) -> str:
        broker = self._broker(step)
        if not self.cluster.alive(broker):  # as the simulator: its host went down with it
            return self._note(step, "not running: no power to lose")
        assert self.disks is not None  # run_schedule mounts them for a schedule with power-loss
        self.cluster.crash(broker)
        lost = self.disks.power_loss(broker)
        self._mark("power-loss", broker)
        return (
            f"killed (SIGKILL); {lost.files} files lost unsynced writes "
            f"({lost.bytes // 1024} KiB of pages); remounted"
        )

    def _shutdown(self, step: Step) -> str:
        broker = self._broker(step)
        if not self.cluster.alive(broker):
            return self._note(step, "not running: nothing to shut down")
        self.cluster.shutdown(broker)
        self._mark("shutdown", broker)
        return f"stopped (SIGTERM, exit {self.cluster.processes[broker].returncode})"

    def _restart(self, step: Step) -> str:
        broker = self._broker(step)
        if self.cluster.alive(broker):
            return self._note(step, "already running: not restarted")
        self._mark("restart", broker)
        self.cluster.restart(broker)
        return "started and registered"

    def _pause(self, step: Step) -> str:
        broker = self._broker(step)
        if not self.cluster.alive(broker):
            return self._note(step, "not running: nothing to pause")
        self.cluster.pause(broker)
        self._mark("pause", broker)
        return "paused (SIGSTOP)"

    def _resume(self, step: Step) -> str:
        broker = self._broker(step)
        if broker not in self.cluster.paused:
            return self._note(step, "not paused: nothing to resume")
        self._mark("resume", broker)
        self.cluster.resume(broker)
        return "resumed (SIGCONT)"

    def _partition(self, step: Step) -> str:
        assert self.network is not None and step.groups is not None
        links = self.network.partition(step.groups)
        self._mark("partition")
        return f"{len(links)} one-way links dropped"

    def _heal(self, step: Step) -> str:
        assert self.network is not None
        self.network.heal()
        self._mark("heal")
        return "every rule removed"

    def _elect(self, step: Step) -> str:
        kind = step.kind or "preferred"
        self._mark("elect")
        error = elect_leader(self.cluster.layout, kind)
        if error:
            return self._note(step, f"refused: {error}")
        state = self.cluster.partition_state()
        return f"done: leader {state.leader}, epoch {state.leader_epoch}" if state else "done"

    def _wait(self, step: Step) -> str:
        until = step.until or "leader"
        timeout = step.timeout_s or DEFAULT_WAIT_S
        try:
            state = self.cluster.wait_state(WAITS[until], timeout, until)
        except StartTimeout:
            return self._note(step, f"not within {timeout:g}s ({self.cluster.partition_state()})")
        return f"leader {state.leader}, epoch {state.leader_epoch}, isr {list(state.isr)}"

    def observe(self, install: Installation) -> Outcome:
        """The outcome once settled: acknowledged, served, on disk, in ZooKeeper."""
        state = self.settle()
        time.sleep(CHECKPOINT_S)
        read = read_committed_values(self.cluster.layout) if _leads(state) else None
        replicas = replica_states(install, self.cluster.layout)
        return build_outcome(self.workload.log.acked, state, read, replicas, self.notes)

    def settle(self) -> PartitionState | None:
        """Wait (up to FINAL_SETTLE_S) until every running, unpaused broker is in the ISR."""
        up = {b for b in self.cluster.processes if b != ZK and self.cluster.alive(b)}
        up -= self.cluster.paused
        try:
            return self.cluster.wait_state(lambda s: up <= set(s.isr), FINAL_SETTLE_S, "settle")
        except StartTimeout:
            state = self.cluster.partition_state()
            self.notes.append(f"at the end, running brokers {sorted(up)} not all in the ISR")
            return state


def _leads(state: PartitionState | None) -> bool:
    return state is not None and state.leader >= 0


def build_outcome(
    acked: dict[int, list[int]],
    state: PartitionState | None,
    read: FinalRead | None,
    replicas: tuple[ReplicaState, ...],
    notes: list[str],
) -> Outcome:
    """The outcome from what was acknowledged, read and observed (one rule, both worlds' terms).

    The committed values are what a consumer read from the leader up to its HW; if no leader
    answered, the leader's log on disk up to its checkpointed HW; with no leader, nothing."""
    leader = state.leader if state is not None and state.leader >= 0 else None
    notes = list(notes)
    if read is not None:
        committed, hw = set(read.values), read.high_watermark
    elif leader is not None:
        mine = next(r for r in replicas if r.broker == leader)
        committed, hw = set(mine.records[: mine.high_watermark]), mine.high_watermark
        notes.append(f"leader {leader} did not answer the final read: its files were used")
    else:
        committed, hw = set(), -1
        notes.append("no leader at the end: nothing is readable")
    return Outcome(
        acked={a: tuple(v) for a, v in sorted(acked.items())},
        lost={a: tuple(x for x in v if x not in committed) for a, v in sorted(acked.items())},
        diverged=diverged(replicas),
        leader=leader,
        leader_epoch=state.leader_epoch if state is not None else -1,
        isr=tuple(sorted(state.isr)) if state is not None else (),
        high_watermark=hw,
        replicas=replicas,
        notes=tuple(notes),
    )


ELECT_RETRY_S = 20.0
"""How long an elect step retries while no controller answers (a killed controller's successor
is chosen only once ZooKeeper expires its session)."""

_NO_CONTROLLER_YET = (
    "KafkaConnectionError",
    "NotControllerError",
    "NoBrokersAvailable",
    "KafkaTimeoutError",
    "RequestTimedOutError",
    "NodeNotReadyError",
)
"""Errors that mean "no controller to ask yet": the elect step asks again."""


def elect_leader(layout: Layout, kind: str) -> str | None:
    """Ask the controller for a preferred or unclean election; the refusal's name, or None.

    Asks again while no controller answers, for ELECT_RETRY_S at most; a refusal (no eligible
    leader, the preferred leader unavailable) is returned at once."""
    deadline = time.monotonic() + ELECT_RETRY_S
    while True:
        error = _elect_once(layout, kind)
        if error not in _NO_CONTROLLER_YET or time.monotonic() > deadline:
            return error
        time.sleep(0.5)


def _elect_once(layout: Layout, kind: str) -> str | None:
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    election_type = 0 if kind == "preferred" else 1
    try:
        admin = KafkaAdminClient(bootstrap_servers=layout.bootstrap(), request_timeout_ms=5000)
    except KafkaError as err:
        return type(err).__name__
    try:
        admin.elect_leaders(election_type, {TOPIC: [PARTITION]}, timeout_ms=5000)
    except KafkaError as err:
        return type(err).__name__
    finally:
        admin.close()
    return None
