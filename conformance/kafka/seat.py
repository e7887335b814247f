"""Where Kafka 2.6's controller runs: on a broker, elected through ZooKeeper, failing over.

Theory of operation. The simulator's controller (`kreplica.impl.controller`, node 0) decides
as Kafka's does; this module says *when* it may decide and *whom* it can tell, as it does in
the real cluster of `simulate.py`'s schedules:

* The controller is the broker that created ZooKeeper's /controller node first (any of the
  three: `Jitter.first_controller`). It acts only while that broker runs, is not paused and
  holds its ZooKeeper session; its LeaderAndIsr requests leave from that broker, so a partition
  between it and a broker holds them back.
* Sessions that expire while it cannot act wait for it (Kafka's controller event queue); those
  that expire together (one ZooKeeper watch) are one onBrokerFailure: one election for all
  (R22, `DetectFailure(leader, together=...)`).
* When the controller's own broker loses its session (killed, paused, cut from ZooKeeper) or
  stops, the controller resigns. After `Jitter.failover_ms` a broker that holds a session takes
  over (`Jitter.pick`; the first to connect, if none can), reads ZooKeeper and finds the brokers
  whose sessions ended: it takes their replicas offline and then elects (two leader epochs
  where the leader died, `DetectFailure(leader, failover=True)`; one per other broker it drops
  from the ISR). A broker that reconnected before then is simply live to it.

Not modelled: a broker that restarted while no controller ran is, to the simulator, restarted
once a controller is back (the new controller would find it live and not bounce it); a zombie
controller's own requests (the resigned controller's state is the new one's).

May import: `kreplica.impl`, this room (the `kafka` room rule, tests/test_layout.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kreplica.impl.controller import CONTROLLER_ID
from kreplica.impl.steps import DetectFailure, Drop, Register

if TYPE_CHECKING:
    from kreplica.conformance.kafka.simulate import KafkaSim


@dataclass
class ControllerSeat:
    """The controller's broker, its pending failover, and the ZooKeeper news it has not read."""

    host: int | None
    """The broker the controller runs on (None: between a resignation and a failover)."""
    failover_at: int | None = None
    """When the next controller is ready (simulated ms), while host is None."""
    expired: set[int] = field(default_factory=set)
    """Brokers whose sessions ZooKeeper expired and no controller has handled yet."""
    registering: set[int] = field(default_factory=set)
    """Brokers that opened a new session while no controller could act."""
    failovers: int = 0

    def active(self, sim: KafkaSim) -> bool:
        """A controller runs, is not paused and holds its ZooKeeper session: it can decide."""
        return self.host is not None and sim.zk_connected(self.host)

    def reaches(self, sim: KafkaSim, broker: int) -> bool:
        """The controller's requests can reach `broker` (from its broker, or as ZooKeeper
        would while there is none)."""
        if self.host is None:
            return sim.reachable(broker, CONTROLLER_ID)
        if self.host in sim.world.paused:
            return False
        return self.host == broker or sim.reachable(self.host, broker)

    def resign(self, sim: KafkaSim) -> None:
        """The controller's broker lost its session or stopped: a failover follows."""
        if self.host is None:
            return
        sim.note(f"controller on broker {self.host} resigns")
        self.host = None
        self.failover_at = sim.now + sim.jitter.failover_ms()

    def sessions_expired(self, sim: KafkaSim, brokers: list[int]) -> None:
        """ZooKeeper expired these sessions at once (one watch for the controller)."""
        self.expired.update(brokers)
        if self.host in brokers:
            self.resign(sim)

    def shut_down(self, sim: KafkaSim, broker: int) -> None:
        """A controlled shutdown: an acting controller moves the broker's leadership and drops
        it from the ISR at once, and handles its session's end with it. A leader no other ISR
        member can replace keeps leading: a controller on another broker takes it offline when
        its session ends (at once), a controller on the broker itself leaves that to its
        successor. (Asked only of an active controller.)"""
        stays = sim.scenario.leader() == broker and not sim.electable_without({broker})
        if self.host == broker and stays:
            self.sessions_expired(sim, [broker])  # resigns; the next controller finds it gone
            return
        self._detect(sim, DetectFailure(broker))
        if self.host == broker:
            self.resign(sim)

    def restarted_unseen(self, sim: KafkaSim, broker: int) -> bool:
        """Whether a broker restarting now registers before any controller has read that its
        old session ended: then the next controller, reading ZooKeeper afresh, finds it simply
        live (no bounce, no leader epoch), as a failover does."""
        return self.host is None and broker in self.expired

    def registered(self, sim: KafkaSim, broker: int) -> None:
        """A running broker opened a new session: the controller sends it the partition's
        state now, or once there is a controller."""
        self.registering.add(broker)
        self.work(sim)

    def work(self, sim: KafkaSim) -> None:
        """Whatever the controller can do now: fail over, then handle expiries, then
        registrations."""
        if self.host is None:
            self._maybe_fail_over(sim)
            return
        if not self.active(sim):
            return
        self._handle_expired(sim)
        self._handle_registrations(sim)

    def next_event_ms(self, sim: KafkaSim) -> int | None:
        """When a pending failover completes (None: none pending, or not in the future)."""
        if self.failover_at is not None and self.failover_at > sim.now:
            return self.failover_at
        return None

    # ------------------------------------------------------------------------ failover

    def _maybe_fail_over(self, sim: KafkaSim) -> None:
        """Once the failover time has come and some broker holds a session, it takes over."""
        if self.failover_at is None or sim.now < self.failover_at:
            return
        candidates = [b for b in sim.brokers if sim.holds_session(b)]
        if not candidates:
            return  # the first broker to connect takes over
        self.host = sim.jitter.pick(candidates)
        self.failover_at = None
        self.failovers += 1
        sim.note(f"controller fails over to broker {self.host}")
        dead = sorted((self.expired - self.registering) & sim.cluster.controller.live_brokers)
        self.expired.clear()
        leader = sim.scenario.leader()
        for b in sim.jitter.order([b for b in dead if b != leader]):
            self._detect(sim, DetectFailure(b))
        if leader in dead:
            self._detect(sim, DetectFailure(leader, failover=sim.electable_without({leader})))
        sim.sync_links()  # the controller's requests now leave from another broker
        self._handle_registrations(sim)

    # --------------------------------------------------------------------- its events

    def _handle_expired(self, sim: KafkaSim) -> None:
        """onBrokerFailure for every expired session not yet handled: one event."""
        due = sorted(self.expired & self._live(sim))
        self.expired.clear()
        if not due:
            return
        leader = sim.scenario.leader()
        others = tuple(b for b in due if b != leader)
        if leader in due and others and sim.electable_without(set(due)):
            self._detect(sim, DetectFailure(leader, together=others))
            return
        for b in sim.jitter.order(due):
            self._detect(sim, DetectFailure(b))

    def _handle_registrations(self, sim: KafkaSim) -> None:
        """onBrokerStartup for every broker that opened a session the controller has not
        seen (a broker it still thinks live needs nothing)."""
        waiting = sorted(self.registering)
        self.registering.clear()
        for b in waiting:
            if b not in self._live(sim) and sim.running(b):
                sim.cluster.apply(Register(b))

    def _detect(self, sim: KafkaSim, step: DetectFailure) -> None:
        """Apply a failure detection and drop what the controller still had queued for the
        dead brokers (Kafka removes their channels)."""
        sim.cluster.apply(step)
        for b in (step.broker, *step.together):
            while sim.cluster.network.peek((CONTROLLER_ID, b)) is not None:
                sim.cluster.apply(Drop(CONTROLLER_ID, b))

    @staticmethod
    def _live(sim: KafkaSim) -> set[int]:
        """The brokers the controller (ZooKeeper's registrations, as it read them) has live."""
        return set(sim.cluster.controller.live_brokers)
