"""A fault schedule on kreplica's simulator: the model's prediction of what real Kafka 2.6.3 does.

`simulate(schedule)` runs a schedule (`schedule.py`) on `kreplica.impl`'s simulator, translating
every real-world step into simulator steps on a simulated clock that moves as real time would,
and returns the run's `Outcome` (`outcome.py`), the same record the real cluster's run ends with.
`predict(path)` does the same for a schedule file (`kreplica kafka predict` prints it, with
the set of outcomes the model allows). The producer is `producer.py`'s.

The world being modelled (the real harness: ZooKeeper and brokers 1, 2, 3 on loopback):

* The controller runs on a broker and fails over as Kafka 2.6's does (`seat.py`); "zk" in a
  partition's groups is ZooKeeper, and a broker cut from it cannot renew its session. The client
  (the harness's producer) reaches every broker that runs and is not paused; partitions cut
  brokers and ZooKeeper only.
* ZooKeeper sessions: a broker that is killed, paused or cut from "zk" stops heart-beating; its
  session expires `Timing.session_timeout_ms` later, and only then does the controller act
  (`DetectFailure`; sessions that expire together are one event). The process of a paused or
  cut-off broker keeps its state and, once it can talk again, opens a new session
  (`Register`), upon which the controller sends it the current leader and ISR. Until then it
  serves as it believes: an isolated leader still accepts acks=1 writes, and its acks=-1 writes
  wait for followers that no longer fetch from it until they time out. A broker cut from
  ZooKeeper cannot write an ISR change, so its ISR task does not run.
* Real time: every step acts at once, then a nemesis step (crash, restart, shutdown, pause,
  resume, partition, heal, elect) takes `Timing.nemesis_ms` while the cluster runs; a produce or a
  wait takes as long as it takes. While time passes, messages are delivered, fetchers run, delayed
  operations expire on time, every broker's ISR task runs every replica.lag.time.max.ms / 2
  (R12) and sessions expire. A follower learns a new HW up to replica.fetch.wait.max.ms after an
  ack, so a crash right after a produce can find a follower whose HW lags, as on a real cluster.
* The producer (`producer.py`: one record per request, R14) sends to the leader it believes in
  and retries until delivery.timeout.ms; only an answer without error, received in time, counts
  as acknowledged. Values are its sequence numbers 0, 1, 2, ... in send order.
* What a real run leaves to chance (message latency, the ISR task's phase, session expiry in
  ZooKeeper's ticks, the first controller, failover time, the harness's own latency, the order
  of concurrent work) the simulator asks of a `jitter.Fixed` (the single prediction) or a
  `jitter.Jitter(seed)` (one of many; `predict.py` collects their outcomes).

Why one module over 600 lines: `KafkaSim` is one class, one schedule's run, whose every op moves
the same clock, network and ZooKeeper sessions through the same few rules (`advance_until`,
`sync_links`, the session timers); what stands apart already lives beside it (`seat`,
`producer`, `timing`, `jitter`, `outcome`).

May import: `kreplica.impl`, `kreplica.conformance.errors` and this room (the `kafka` room rule,
tests/test_layout.py). Pinned by tests/test_kafka_simulate.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from kreplica.conformance.kafka.jitter import Fixed
from kreplica.conformance.kafka.outcome import Outcome, ReplicaState
from kreplica.conformance.kafka.producer import Producer
from kreplica.conformance.kafka.schedule import BROKERS, ZK, Schedule, Step, load_schedule
from kreplica.conformance.kafka.seat import ControllerSeat
from kreplica.conformance.kafka.timing import Timing
from kreplica.impl.client import CLIENT_ID
from kreplica.impl.cluster import START_TIME_MS
from kreplica.impl.config import BrokerConfig
from kreplica.impl.controller import CONTROLLER_ID
from kreplica.impl.scenario import Scenario
from kreplica.impl.steps import (
    CheckpointHighWatermarks,
    Crash,
    Deliver,
    DoWork,
    Elect,
    Flush,
    Heal,
    Isolate,
    Restart,
    ShrinkIsr,
    Tick,
    UncleanShutdown,
)
from kreplica.impl.steps import Step as ImplStep
from kreplica.impl.variants import Variant

PREFERRED_LEADER = BROKERS[0]
"""The topic's preferred replica (the first of the assignment), the first leader."""

NODES = (CONTROLLER_ID, *BROKERS)
"""The nodes a partition separates: ZooKeeper (the controller's node id), and the brokers."""

SHUTDOWN_KILL_MS = 30_000
"""How long the real harness waits for a SIGTERM'd broker to exit before it kills it."""

ELECT_WAIT_MS = 25_000
"""How long an elect step asks again while no controller answers: real.ELECT_RETRY_S, and the
last attempt's own time-out (measured: 20 to 30 s)."""


@dataclass
class _World:
    """What the simulator does not hold: the faults in force and the producer's view."""

    paused: set[int] = field(default_factory=set)
    crashed: set[int] = field(default_factory=set)
    groups: tuple[frozenset[int], ...] = ()
    """The partition in force, as groups of node ids (empty: none)."""
    expiries: dict[int, int] = field(default_factory=dict)
    """Broker -> simulated time at which its ZooKeeper session expires (pending only)."""
    believed_leader: int | None = PREFERRED_LEADER
    """The leader in the producer's metadata."""
    next_value: int = 0
    values: dict[int, int] = field(default_factory=dict)
    """Simulator record id -> the producer's value (every attempt of a value)."""
    acked: dict[int, list[int]] = field(default_factory=dict)
    """acks -> values acknowledged, in order."""
    notes: list[str] = field(default_factory=list)


class KafkaSim:
    """A schedule's run on the simulator: one method per schedule op (see the module docstring)."""

    brokers = BROKERS

    def __init__(
        self,
        schedule: Schedule,
        variant: Variant | None = None,
        timing: Timing | None = None,
        jitter: Fixed | None = None,
    ) -> None:
        self.schedule = schedule
        self.timing = timing or Timing()
        self.jitter = jitter or Fixed()
        base = variant or Variant()
        self.scenario = Scenario(
            brokers=len(BROKERS),
            variant=replace(base, election="unclean" if schedule.unclean else "clean"),
            config=BrokerConfig(
                replica_lag_time_max_ms=self.timing.replica_lag_time_max_ms,
                min_insync_replicas=schedule.min_insync_replicas,
                replica_fetch_wait_max_ms=self.timing.replica_fetch_wait_max_ms,
                replica_fetch_backoff_ms=self.timing.replica_fetch_backoff_ms,
                replica_socket_timeout_ms=self.timing.replica_socket_timeout_ms,
                replica_high_watermark_checkpoint_interval_ms=(
                    self.timing.replica_high_watermark_checkpoint_interval_ms
                ),
            ),
        )
        self.cluster = self.scenario.cluster
        self.world = _World(acked={schedule.acks: []})
        period = self.timing.replica_lag_time_max_ms // 2
        self._isr_task_due = {
            b: self.now + period - self.jitter.isr_task_phase_ms(period) for b in BROKERS
        }
        self.seat = ControllerSeat(self.jitter.first_controller(BROKERS))
        self.producer = Producer(self)
        self._arrivals: dict[int, tuple[object, int]] = {}
        """id(message) -> (the message, when it arrives): the jitter's latency."""
        self._first_send = {b: self.now + self.jitter.startup_lag_ms() for b in BROKERS}
        """When each broker's first request may leave (the followers' start-up lag)."""
        self._reconnect_at: dict[int, int] = {}
        """Broker -> when its ZooKeeper client opens a new session (its old one expired)."""
        self._ops: dict[str, Callable[[Step], None]] = {
            "produce": self.produce,
            "crash": self.crash,
            "crash-controller": self.crash_controller,
            "power-loss": self.power_loss,
            "restart": self.restart,
            "shutdown": self.shutdown,
            "pause": self.pause,
            "resume": self.resume,
            "partition": self.partition,
            "heal": self.heal,
            "elect": self.elect,
            "wait": self.wait,
        }

    # ------------------------------------------------------------------------- queries

    @property
    def now(self) -> int:
        """The simulated time in ms."""
        return self.cluster.clock.now_ms

    def isr(self) -> tuple[int, ...]:
        """The controller's (ZooKeeper's) ISR of the partition."""
        return self.scenario.isr()

    def running(self, broker: int) -> bool:
        """The broker's process runs and is not paused: it works and answers."""
        return self.cluster.is_alive(broker) and broker not in self.world.paused

    def zk_connected(self, broker: int) -> bool:
        """The broker runs, is not paused and can reach ZooKeeper."""
        return self.running(broker) and self.reachable(broker, CONTROLLER_ID)

    def holds_session(self, broker: int) -> bool:
        """The broker runs, reaches ZooKeeper and has a session there (not one that expired
        and is not yet opened again): it may become the controller."""
        if not self.zk_connected(broker) or broker in self._reconnect_at:
            return False
        if broker in self.seat.registering:
            return True
        return broker in self.cluster.controller.live_brokers and broker not in self.seat.expired

    def electable_without(self, gone: set[int]) -> bool:
        """The controller's offline election finds a leader with `gone` dead (R22)."""
        return self.cluster.controller.can_elect_without(self.scenario.tp, gone)

    def reachable(self, a: int, b: int) -> bool:
        """No partition group separates nodes a and b."""
        groups = self.world.groups
        return not groups or any(a in g and b in g for g in groups)

    # ----------------------------------------------------------------------- the run

    def run(self) -> Outcome:
        """Every step in order, then the final settling; the Outcome of the run."""
        for step in self.schedule.steps:
            self._ops[step.op](step)
            if step.op not in ("produce", "wait"):
                self.advance(self.jitter.nemesis_ms(step.op, self.timing.nemesis_ms))
        self.settle_at_end()
        return self.outcome()

    def note(self, text: str) -> None:
        """Record a modelling remark for the Outcome (e.g. a step that could not act)."""
        self.world.notes.append(f"t+{(self.now - START_TIME_MS) / 1000:.1f}s: {text}")

    # ------------------------------------------------------------------------- time

    def run_network(self) -> None:
        """Deliver every deliverable message and run every workable fetcher of a running broker."""
        cluster = self.cluster
        while True:
            progressed = False
            for src, dst in self.jitter.order(cluster.network.deliverable_links()):
                if self._arrived(src, dst):
                    cluster.apply(Deliver(src, dst))
                    progressed = True
            for b in self.jitter.order(BROKERS):
                if b in self.world.paused:
                    continue
                for source in cluster.brokers[b].workable_fetchers():
                    cluster.apply(DoWork(b, source))
                    progressed = True
            if not progressed and not self._answers_through_cut():
                return

    def _answers_through_cut(self) -> bool:
        """Deliver the answers a cut holds back; True if one was delivered. The real harness's
        rules drop what one node sends to another's listening port (nemesis.py), so an answer
        to a request that arrived before the cut (a parked fetch, completed by a later append)
        still arrives; the requests after it do not."""
        network = self.cluster.network
        delivered = False
        for src, dst in sorted(network.blocked):
            if src in self.world.paused or dst in self.world.paused:
                continue
            head = network.peek((src, dst))
            answer = head is not None and type(head.payload).__name__.endswith("Response")
            if not answer or not self._arrived(src, dst):
                continue
            network.blocked.discard((src, dst))
            try:
                self.cluster.apply(Deliver(src, dst))
            finally:
                network.blocked.add((src, dst))
            delivered = True
        return delivered

    def _arrived(self, src: int, dst: int) -> bool:
        """The message at the head of the link has taken its latency (none, unjittered)."""
        head = self.cluster.network.peek((src, dst))
        seen = self._arrivals.get(id(head))
        if seen is None or seen[0] is not head:
            at = max(self.now + self.jitter.latency_ms(), self._first_send.get(src, 0))
            seen = (head, at)
            self._arrivals[id(head)] = seen
        if seen[1] > self.now:
            return False
        del self._arrivals[id(head)]
        return True

    def _next_arrival_ms(self) -> list[int]:
        """When the messages now at the heads of their links arrive (the others forgotten)."""
        heads = {id(self.cluster.network.peek(link)) for link in self.cluster.network.links()}
        self._arrivals = {k: v for k, v in self._arrivals.items() if k in heads}
        return [at for _, at in self._arrivals.values() if at > self.now]

    def advance_until(self, done: Callable[[], bool], until_ms: int) -> bool:
        """Let real time pass until done() holds (True) or the clock reaches until_ms (False)."""
        while True:
            self.run_network()
            if done():
                return True
            if self.now >= until_ms:
                return False
            self.cluster.apply(Tick(max(1, self._next_event_ms(until_ms) - self.now)))
            self._fire_timers()

    def advance(self, ms: int) -> None:
        """Let ms of real time pass."""
        self.advance_until(lambda: False, self.now + ms)

    def _next_event_ms(self, until_ms: int) -> int:
        """The earliest time something happens: a broker timer, a session expiry, the ISR task."""
        times = [
            until_ms,
            *self._isr_task_due.values(),
            *self.world.expiries.values(),
            *self._next_arrival_ms(),
            *(at for at in self._reconnect_at.values() if at > self.now),
        ]
        failover = self.seat.next_event_ms(self)
        if failover is not None:
            times.append(failover)
        for b in BROKERS:
            if self.running(b):
                wake = self.cluster.brokers[b].next_timer_ms()
                if wake is not None:
                    times.append(wake)
        return min(times)

    def _fire_timers(self) -> None:
        """Run each broker's ISR task when it is due (R12), expire due ZooKeeper sessions (at
        once: one watch), and let the controller do what it can."""
        # At the same instant the ISR task goes first: ZooKeeper expires sessions in ticks, at or
        # after the nominal timeout, so a leader's shrink due then has usually been written.
        for b in BROKERS:
            if self.now >= self._isr_task_due[b]:
                self._isr_task_due[b] = self.now + self.timing.replica_lag_time_max_ms // 2
                if self.zk_connected(b):
                    self.cluster.apply(ShrinkIsr(b))
        due = sorted(b for b, at in self.world.expiries.items() if at <= self.now)
        for b in due:
            del self.world.expiries[b]
        if due:
            self.seat.sessions_expired(self, due)
        self._fire_reconnects()
        self.seat.work(self)

    def _lose_session(self, broker: int) -> None:
        """The broker stopped heart-beating now: its session expires one timeout later (at
        ZooKeeper's next tick, as the jitter says)."""
        if (
            broker in self.cluster.controller.live_brokers
            and broker not in self.world.expiries
            and broker not in self.seat.expired
        ):
            timeout = self.timing.session_timeout_ms
            self.world.expiries[broker] = self.jitter.expiry_ms(self.now, timeout)
        self._reconnect_at.pop(broker, None)

    def _reconnect(self, broker: int) -> None:
        """A running broker reaches ZooKeeper again: keep its session, or open a new one once
        its ZooKeeper client retries (as the jitter says)."""
        self.world.expiries.pop(broker, None)
        if broker in self.cluster.controller.live_brokers and broker not in self.seat.expired:
            return
        at = self._reconnect_at.setdefault(broker, self.now + self.jitter.reconnect_ms())
        if at <= self.now:
            del self._reconnect_at[broker]
            self.seat.registered(self, broker)

    def _fire_reconnects(self) -> None:
        """Open the new sessions whose ZooKeeper clients retried by now (if still connected)."""
        for b, at in sorted(self._reconnect_at.items()):
            if at <= self.now:
                del self._reconnect_at[b]
                if self.zk_connected(b):
                    self.seat.registered(self, b)

    def _await_session_end(self, broker: int) -> None:
        """Wait until the broker's old session has expired (a pending expiry only)."""
        at = self.world.expiries.get(broker)
        if at is not None:
            self.advance_until(lambda: broker not in self.world.expiries, at)

    # -------------------------------------------------------------------------- links

    def _wanted_blocks(self) -> set[tuple[int, int]]:
        """The node pairs that cannot talk: across partition groups, and around paused brokers."""
        nodes = (*NODES, CLIENT_ID)
        return {(a, b) for a in nodes for b in nodes if a < b and self._link_blocked(a, b)}

    def _link_blocked(self, a: int, b: int) -> bool:
        """Nodes a and b cannot talk: one is paused, or a partition separates them (for the
        controller: separates its broker from the other; the client is never cut off)."""
        if a in self.world.paused or b in self.world.paused:
            return True
        if CLIENT_ID in (a, b):
            return False
        if CONTROLLER_ID in (a, b):
            return not self.seat.reaches(self, b if a == CONTROLLER_ID else a)
        return not self.reachable(a, b)

    def sync_links(self) -> None:
        """Isolate and heal links so the network matches the partition and pauses in force."""
        wanted = self._wanted_blocks()
        current = {(min(a, b), max(a, b)) for a, b in self.cluster.network.blocked}
        for a, b in sorted(current - wanted):
            self.cluster.apply(Heal(a, b))
        for a, b in sorted(wanted - current):
            self.cluster.apply(Isolate(a, b))
        self._sync_sessions()
        self.seat.work(self)

    def _sync_sessions(self) -> None:
        """Start session expiry for brokers cut from ZooKeeper; reconnect the others."""
        for b in BROKERS:
            if not self.cluster.is_alive(b):
                continue
            if self.zk_connected(b):
                self._reconnect(b)
            else:
                self._lose_session(b)

    # ---------------------------------------------------------------------------- ops

    def crash(self, step: Step) -> None:
        """kill -9: the process dies (its page cache survives); its session expires later."""
        self._stop(step, "crash", Crash)

    def crash_controller(self, step: Step) -> None:
        """kill -9 of the broker the controller runs on (noted: which), as `crash`."""
        host = self.seat.host
        if host is None or not self.cluster.is_alive(host):
            self.note("crash-controller: no running controller")
            return
        self.note(f"crash-controller: the controller ran on broker {host}")
        self.crash(Step("crash", broker=host))

    def power_loss(self, step: Step) -> None:
        """The host loses power: UncleanShutdown (every log keeps only what was flushed, i.e. up
        to its recovery point, as the real harness's filesystem keeps only what was fsynced);
        otherwise a crash."""
        self._stop(step, "power-loss", UncleanShutdown)

    def _stop(self, step: Step, op: str, stop: Callable[[int], ImplStep]) -> None:
        """Stop a running broker with `stop` (its session expires later); a broker not running
        is noted and left alone (so is the real one)."""
        broker = _broker(step)
        if not self.cluster.is_alive(broker):
            self.note(f"{op} {broker}: already down")
            return
        self.cluster.apply(stop(broker))
        self.world.crashed.add(broker)
        self.world.paused.discard(broker)
        self._lose_session(broker)
        self.sync_links()

    def restart(self, step: Step) -> None:
        """Start a stopped broker; it registers once its old session is gone and it reaches ZK."""
        # Kafka 2.6.3 refuses to register while the old session's ephemeral node exists, so the
        # start-up waits for the expiry; a broker cut from ZooKeeper cannot start either.
        broker = _broker(step)
        if self.cluster.is_alive(broker):
            self.note(f"restart {broker}: it is running")
            return
        self._await_session_end(broker)
        if not self.reachable(broker, CONTROLLER_ID):
            self.note(f"restart {broker}: cut from zk, so it cannot start; not restarted")
            return
        self.advance(self.jitter.boot_ms())
        if self.seat.restarted_unseen(self, broker):
            # The next controller will read ZooKeeper afresh and find it live: its start-up
            # is no bounce. (The spec's Restart always bounces: a gap docs/real-kafka.md names.)
            self.cluster.controller.live_brokers.discard(broker)
        self.cluster.apply(Restart(broker))
        self._first_send[broker] = self.now + self.jitter.startup_lag_ms()  # a fresh JVM
        self._reconnect_at.pop(broker, None)
        self.seat.expired.discard(broker)  # the start-up handles the old session's end too
        self.world.crashed.discard(broker)
        self.sync_links()

    def _await_controller(self, ms: int) -> bool:
        """Let time pass until a controller can act (True), for ms at most (False)."""
        if self.seat.active(self):
            return True
        return self.advance_until(lambda: self.seat.active(self), self.now + ms)

    def shutdown(self, step: Step) -> None:
        """Controlled shutdown: leadership moves to the first live ISR replica, then it stops."""
        # Composed of CheckpointHighWatermarks + Flush + Crash (KafkaServer.shutdown: the
        # ReplicaManager writes every HW, then the LogManager flushes every log) + an immediate
        # DetectFailure: the controller's failure handling elects the first live ISR replica in
        # assignment order and drops the broker from the ISR with one epoch bump, as
        # ControlledShutdownLeaderElection does; the broker closes its ZooKeeper session
        # itself, so there is no session timeout. The harness waits for the process to exit
        # (Jitter.shutdown_ms). With no controller to answer its request, the broker runs on
        # until the harness kills it (seen in random-1-6: the controller's broker was paused).
        broker = _broker(step)
        if not self.cluster.is_alive(broker):
            self.note(f"shutdown {broker}: already down")
            return
        if not self.zk_connected(broker):
            self.note(f"shutdown {broker}: paused or cut from zk, so it dies as if killed")
            self.crash(step)
            return
        if not self.seat.active(self):
            self.note(f"shutdown {broker}: no controller answers; killed {SHUTDOWN_KILL_MS} ms on")
            self.advance(SHUTDOWN_KILL_MS)
            self._stop(step, "shutdown", Crash)
            return
        self.cluster.apply(CheckpointHighWatermarks(broker))
        self.cluster.apply(Flush(broker))
        self.world.expiries.pop(broker, None)
        self.seat.shut_down(self, broker)  # asked while it runs, as Kafka's broker asks
        self.cluster.apply(Crash(broker))
        self.world.crashed.add(broker)
        self.world.paused.discard(broker)
        self.sync_links()
        self.advance(self.jitter.shutdown_ms())

    def pause(self, step: Step) -> None:
        """SIGSTOP: no work, no answers; messages to it wait; its ZooKeeper session lapses."""
        # A pause longer than the session timeout ends in the controller's failure handling;
        # a shorter one goes unnoticed by the controller. Its fetchers and ISR task stand still;
        # its delayed operations expire on time, and their answers wait until it resumes.
        broker = _broker(step)
        if not self.running(broker):
            self.note(f"pause {broker}: not running")
            return
        self.world.paused.add(broker)
        self.sync_links()

    def resume(self, step: Step) -> None:
        """SIGCONT: the broker catches up on waiting messages and renews or reopens its session."""
        broker = _broker(step)
        if broker not in self.world.paused:
            self.note(f"resume {broker}: not paused")
            return
        self.world.paused.discard(broker)
        self.sync_links()

    def partition(self, step: Step) -> None:
        """Nodes in different groups cannot talk (replacing any partition in force)."""
        assert step.groups is not None
        groups = [frozenset(_node(n) for n in g) for g in step.groups]
        rest = frozenset(n for n in NODES if not any(n in g for g in groups))
        if CONTROLLER_ID in rest:
            groups.append(rest)  # ZooKeeper named in no group: with every unnamed broker
        else:
            groups = [g | rest if CONTROLLER_ID in g else g for g in groups]
        self.world.groups = tuple(groups)
        self.sync_links()

    def heal(self, step: Step) -> None:
        """Every partition ends."""
        del step
        self.world.groups = ()
        self.sync_links()

    def elect(self, step: Step) -> None:
        """kafka-leader-elections: preferred (broker 1, if live and in the ISR) or unclean."""
        if not self.elect_step_controller():
            return
        if step.kind == "preferred":
            self._elect_preferred()
        else:
            self._elect_unclean()

    def elect_step_controller(self) -> bool:
        """The admin request finds a controller, asking again for ELECT_WAIT_MS (as the real
        harness does); False (noted) if none answered."""
        if self._await_controller(ELECT_WAIT_MS):
            return True
        self.note("elect: no controller answered")
        return False

    def _elect_preferred(self) -> None:
        """Elect broker 1 cleanly unless it leads already (ELECTION_NOT_NEEDED) or cannot."""
        if self.scenario.leader() == PREFERRED_LEADER:
            return
        if PREFERRED_LEADER not in self.cluster.controller.live_brokers or (
            PREFERRED_LEADER not in self.isr()
        ):
            self.note("elect preferred: broker 1 is not a live ISR member (not available)")
            return
        self.cluster.apply(Elect(self.scenario.tp, PREFERRED_LEADER))

    def _elect_unclean(self) -> None:
        """Elect a leader for a leaderless partition as Kafka's offline election does with
        unclean election allowed: the first live ISR member, else the first live replica."""
        # Kafka's admin API answers ELECTION_NOT_NEEDED for a partition that has a leader.
        if not self.schedule.unclean:
            self.note("elect unclean: the schedule does not allow unclean election")
            return
        if self.scenario.leader() is not None:
            return
        # It runs the offline election, which still prefers a live ISR member.
        live = [b for b in BROKERS if b in self.cluster.controller.live_brokers]
        if not live:
            self.note("elect unclean: no live replica")
            return
        in_sync = [b for b in live if b in self.isr()]
        self.cluster.apply(Elect(self.scenario.tp, (in_sync or live)[0]))

    def wait(self, step: Step) -> None:
        """Wait until the condition holds in ZooKeeper (the controller), or the timeout passes."""
        # isr-shrunk: fewer than all three in the ISR; isr-full: all three; leader: any leader.
        conditions: dict[str, Callable[[], bool]] = {
            "isr-shrunk": lambda: len(self.isr()) < len(BROKERS),
            "isr-full": lambda: len(self.isr()) == len(BROKERS),
            "leader": lambda: self.scenario.leader() is not None,
        }
        timeout = (
            self.timing.wait_timeout_ms if step.timeout_s is None else int(step.timeout_s * 1000)
        )
        assert step.until is not None
        if not self.advance_until(conditions[step.until], self.now + timeout):
            self.note(f"wait {step.until}: timed out")

    # ------------------------------------------------------------------------- produce

    def produce(self, step: Step) -> None:
        """Produce `count` fresh values one request each, each until acked or given up (R14)."""
        self.producer.produce(step)

    # -------------------------------------------------------------------------- the end

    def settle_at_end(self) -> None:
        """Like the real harness's end: wait until followers caught up and the ISR is full."""
        self.advance_until(self._caught_up, self.now + self.timing.final_settle_ms)

    def _caught_up(self) -> bool:
        """Every running replica matches the leader's LEO and HW, and the ISR is full."""
        leader = self.scenario.leader()
        if leader is None or len(self.isr()) < len(BROKERS):
            return False
        target = (self.scenario.leo(leader), self.scenario.hw(leader))
        return all(
            (self.scenario.leo(b), self.scenario.hw(b)) == target
            for b in BROKERS
            if self.running(b)
        )

    def replica_state(self, broker: int) -> ReplicaState:
        """One replica's log (as values), HW, LEO and newest cached epoch (its disk if down)."""
        epochs = self.scenario.epochs(broker)
        return ReplicaState(
            broker,
            self.log_values(broker),
            self.scenario.hw(broker),
            self.scenario.leo(broker),
            epochs[-1][0] if epochs else -1,
        )

    def log_values(self, broker: int, below: int | None = None) -> tuple[int, ...]:
        """The values in the broker's log in offset order (only offsets < below, if given)."""
        return tuple(
            self.world.values.get(record, -1)
            for offset, _, record in self.scenario.log(broker)
            if below is None or offset < below
        )

    def diverged(self) -> bool:
        """Two replicas hold different values at the same offset."""
        seen: dict[int, int] = {}
        for b in BROKERS:
            for offset, _, record in self.scenario.log(b):
                if seen.setdefault(offset, self.world.values.get(record, -1)) != (
                    self.world.values.get(record, -1)
                ):
                    return True
        return False

    def outcome(self) -> Outcome:
        """The run's Outcome: acked and lost values per acks, divergence, the partition's state."""
        leader = self.scenario.leader()
        hw = self.scenario.hw(leader) if leader is not None else -1
        kept = set(self.log_values(leader, hw)) if leader is not None else set()
        acked = {acks: tuple(values) for acks, values in sorted(self.world.acked.items())}
        return Outcome(
            acked=acked,
            lost={
                acks: tuple(v for v in values if v not in kept) for acks, values in acked.items()
            },
            diverged=self.diverged(),
            leader=leader,
            leader_epoch=self.scenario.leader_epoch(),
            isr=tuple(sorted(self.isr())),
            high_watermark=hw,
            replicas=tuple(self.replica_state(b) for b in BROKERS),
            notes=tuple(self.world.notes),
        )


def _broker(step: Step) -> int:
    """The broker a step names."""
    assert step.broker is not None
    return step.broker


def _node(name: int | str) -> int:
    """A partition group's member as a simulator node id ("zk" is the controller)."""
    return CONTROLLER_ID if name == ZK else int(name)


def simulate(
    schedule: Schedule, variant: Variant | None = None, timing: Timing | None = None
) -> Outcome:
    """The model's predicted Outcome of a schedule (deterministic: the same schedule, the same)."""
    return KafkaSim(schedule, variant, timing).run()


def predict(path: Path, timing: Timing | None = None) -> Outcome:
    """The predicted Outcome of a schedule file (ScheduleError if it is not a valid schedule)."""
    return simulate(load_schedule(Path(path)), timing=timing)
