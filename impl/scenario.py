"""Scenario: a readable script API over Cluster ("produce 3, crash 1, elect 2, ...").

Every method applies ordinary steps (kreplica.impl.steps) to the cluster, so a scenario's run is
recorded in `cluster.history` and can be replayed as a schedule.
"""

from __future__ import annotations

from collections.abc import Sequence

from kreplica.impl.cluster import Cluster
from kreplica.impl.config import BrokerConfig
from kreplica.impl.controller import CONTROLLER_ID
from kreplica.impl.messages import Errors, TopicPartition
from kreplica.impl.steps import (
    CheckpointHighWatermarks,
    Crash,
    Deliver,
    DetectFailure,
    DoWork,
    Drop,
    Elect,
    Flush,
    Heal,
    Isolate,
    Produce,
    Restart,
    ShrinkIsr,
    Tick,
    UncleanShutdown,
)
from kreplica.impl.variants import Variant


class Scenario:
    """A cluster plus one-line verbs; the default partition is `tp` (topic 't', partition 0)."""

    def __init__(
        self,
        brokers: int | Sequence[int] = 3,
        partitions: int = 1,
        variant: Variant | None = None,
        config: BrokerConfig | None = None,
        replication_factor: int | None = None,
        topic: str = "t",
    ) -> None:
        broker_ids = list(range(1, brokers + 1)) if isinstance(brokers, int) else list(brokers)
        self.cluster = Cluster(
            broker_ids,
            {topic: partitions},
            replication_factor=replication_factor,
            variant=variant,
            config=config,
        )
        self.tp = TopicPartition(topic, 0)

    # ----------------------------------------------------------------------------- state

    def _tp(self, tp: TopicPartition | None) -> TopicPartition:
        return self.tp if tp is None else tp

    def leader(self, tp: TopicPartition | None = None) -> int | None:
        """The controller's leader of the partition."""
        return self.cluster.leader(self._tp(tp))

    def leader_epoch(self, tp: TopicPartition | None = None) -> int:
        """The controller's leader epoch of the partition."""
        return self.cluster.controller.partitions[self._tp(tp)].leader_epoch

    def isr(self, tp: TopicPartition | None = None) -> tuple[int, ...]:
        """The controller's ISR of the partition."""
        return self.cluster.controller.partitions[self._tp(tp)].isr

    def log(self, broker: int, tp: TopicPartition | None = None) -> list[tuple[int, int, int]]:
        """The broker's log as (offset, epoch, record id) triples."""
        log = self.cluster.log(broker, self._tp(tp))
        return [] if log is None else [tuple(e) for e in log.entries]  # type: ignore[misc]

    def records(self, broker: int, tp: TopicPartition | None = None) -> list[int]:
        """The record ids in the broker's log, in offset order."""
        log = self.cluster.log(broker, self._tp(tp))
        return [] if log is None else log.record_ids()

    def hw(self, broker: int, tp: TopicPartition | None = None) -> int:
        """The broker's high watermark of the partition."""
        log = self.cluster.log(broker, self._tp(tp))
        return -1 if log is None else log.high_watermark

    def leo(self, broker: int, tp: TopicPartition | None = None) -> int:
        """The broker's log end offset of the partition."""
        log = self.cluster.log(broker, self._tp(tp))
        return -1 if log is None else log.log_end_offset

    def epochs(self, broker: int, tp: TopicPartition | None = None) -> list[tuple[int, int]]:
        """The broker's epoch cache as (epoch, start offset) pairs."""
        log = self.cluster.log(broker, self._tp(tp))
        return [] if log is None else [tuple(e) for e in log.leader_epoch_cache.entries]  # type: ignore[misc]

    def acked_records(self, tp: TopicPartition | None = None, acks: int | None = None) -> list[int]:
        """Record ids the client saw acknowledged (optionally only those with this acks)."""
        tp = self._tp(tp)
        return [
            rid
            for ack in self.cluster.acked
            if ack.tp == tp and (acks is None or ack.acks == acks)
            for rid in ack.record_ids
        ]

    def lost_acked(self, tp: TopicPartition | None = None, acks: int | None = -1) -> list[int]:
        """Acked record ids (acks=-1 by default, None: any) missing from the current leader."""
        # With no leader every acknowledged record counts as missing.
        tp = self._tp(tp)
        leader = self.leader(tp)
        present = set(self.records(leader, tp)) if leader is not None else set()
        return [rid for rid in self.acked_records(tp, acks) if rid not in present]

    def diverged(self, tp: TopicPartition | None = None) -> bool:
        """True if two replicas hold different records at the same offset."""
        tp = self._tp(tp)
        seen: dict[int, int] = {}
        for broker in self.cluster.assignment[tp]:
            for offset, _, rid in self.log(broker, tp):
                if seen.setdefault(offset, rid) != rid:
                    return True
        return False

    # --------------------------------------------------------------------------- client

    def send_produce(
        self,
        n: int = 1,
        acks: int | None = None,
        tp: TopicPartition | None = None,
        broker: int | None = None,
    ) -> list[int]:
        """Send one PRODUCE of n fresh records (not delivered yet); return their record ids."""
        acks = int(self.cluster.variant.acks) if acks is None else acks
        ids = tuple(self.cluster.next_record_id() for _ in range(n))
        self.cluster.apply(Produce(self._tp(tp), ids, acks, broker))
        return list(ids)

    def produce(
        self,
        n: int = 1,
        acks: int | None = None,
        tp: TopicPartition | None = None,
        broker: int | None = None,
        settle: bool = True,
    ) -> list[int]:
        """Produce n records one request each; settle the cluster afterwards (default)."""
        ids: list[int] = []
        for _ in range(n):
            ids += self.send_produce(1, acks, tp, broker)
            self.cluster.run_until_quiescent()
        if settle:
            self.settle()
        return ids

    # ------------------------------------------------------------------------- network

    def run(self) -> int:
        """Deliver and fetch until nothing more can happen without time passing."""
        return self.cluster.run_until_quiescent()

    def settle(self) -> None:
        """Run until quiescent and let parked fetches expire so followers learn the HW."""
        self.cluster.settle()

    def tick(self, ms: int) -> None:
        """Advance the simulated clock (expiring delayed operations)."""
        self.cluster.apply(Tick(ms))

    def deliver(self, src: int, dst: int, count: int | None = 1) -> int:
        """Deliver the first `count` messages (None: all) queued from src to dst."""
        delivered = 0
        while count is None or delivered < count:
            if self.cluster.network.peek((src, dst)) is None:
                break
            self.cluster.apply(Deliver(src, dst))
            delivered += 1
        return delivered

    def drop(self, src: int, dst: int, count: int | None = None) -> int:
        """Lose the first `count` messages (None: all) queued from src to dst."""
        dropped = 0
        while count is None or dropped < count:
            if self.cluster.network.peek((src, dst)) is None:
                break
            self.cluster.apply(Drop(src, dst))
            dropped += 1
        return dropped

    def deliver_controller(self, broker: int | None = None) -> int:
        """Deliver every LeaderAndIsr queued from the controller (to one broker, or to all)."""
        total = 0
        targets = self.cluster.broker_ids if broker is None else (broker,)
        for b in targets:
            total += self.deliver(CONTROLLER_ID, b, None)
        return total

    def do_work(self, follower: int, leader: int | None = None) -> bool:
        """One fetcher iteration of follower towards leader; True if it sent a request."""
        leader = self.leader() if leader is None else leader
        if leader is None:
            return False
        return bool(self.cluster.apply(DoWork(follower, leader)))

    def fetch(self, follower: int, leader: int | None = None, respond: bool = True) -> bool:
        """One fetch round trip (do_work, request, answer); True if an answer came back."""
        # False if nothing was sent or the fetch is parked in the leader's purgatory.
        leader = self.leader() if leader is None else leader
        if leader is None or not self.do_work(follower, leader):
            return False
        self.deliver(follower, leader)
        if not respond:
            return False
        return self.deliver(leader, follower) > 0

    def isolate(self, a: int, b: int) -> None:
        """Network partition between nodes a and b."""
        self.cluster.apply(Isolate(a, b))

    def heal(self, a: int, b: int) -> None:
        """End the partition between a and b."""
        self.cluster.apply(Heal(a, b))

    # --------------------------------------------------------------------------- faults

    def crash(self, broker: int, detect: bool = True) -> None:
        """Kill the broker process; with detect the controller reacts at once (new leaders)."""
        self.cluster.apply(Crash(broker))
        if detect:
            self.detect_failure(broker)

    def unclean_shutdown(self, broker: int, detect: bool = True) -> None:
        """Power loss on broker: records above each recovery point are lost."""
        self.cluster.apply(UncleanShutdown(broker))
        if detect:
            self.detect_failure(broker)

    def detect_failure(self, broker: int) -> None:
        """The controller notices the broker is gone and re-elects / shrinks ISRs."""
        self.cluster.apply(DetectFailure(broker))

    def restart(self, broker: int, deliver: bool = True) -> None:
        """Start a dead broker again; by default deliver the controller's LeaderAndIsr to it."""
        self.cluster.apply(Restart(broker))
        if deliver:
            self.deliver_controller()

    def elect(self, broker: int, tp: TopicPartition | None = None, deliver: bool = True) -> Errors:
        """Make broker the leader (new epoch); by default deliver the LeaderAndIsr requests."""
        tp = self._tp(tp)
        before = self.leader_epoch(tp)
        self.cluster.apply(Elect(tp, broker))
        if deliver:
            self.deliver_controller()
        if self.leader_epoch(tp) == before:
            return Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE
        return Errors.NONE

    def flush(self, *brokers: int) -> None:
        """Flush the logs of the given brokers (all if none given)."""
        for b in brokers or self.cluster.broker_ids:
            self.cluster.apply(Flush(b))

    def checkpoint_high_watermarks(self, *brokers: int) -> None:
        """Run the highwatermark-checkpoint task now on the given brokers (all if none given)."""
        for b in brokers or self.cluster.broker_ids:
            self.cluster.apply(CheckpointHighWatermarks(b))

    def shrink_isr(self, broker: int | None = None) -> None:
        """Run the isr-expiration task on broker (default: the leader)."""
        target = self.leader() if broker is None else broker
        if target is not None:
            self.cluster.apply(ShrinkIsr(target))
