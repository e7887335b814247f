"""Controller: leader election, LeaderAndIsr propagation and the ISR store (ZooKeeper in 2.6.3).

The controller is a separate, never-failing node. Its `partitions` map is the source of truth
for leader, leader epoch, ISR and zk_version (the partition epoch). Elections follow Kafka 2.6.3:
offline partitions elect the first live ISR member in assignment order, or with
election=unclean the first live replica; a dead replica leaves the ISR with a leader-epoch bump;
an admin's unclean election acts only where the leader is not live (`elect_leader`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kreplica.impl.broker import Outgoing
from kreplica.impl.messages import (
    NO_LEADER,
    AlterPartitionItemResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    Errors,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    Message,
    TopicPartition,
)
from kreplica.impl.variants import Variant

CONTROLLER_ID = 0
"""Node id of the controller in the simulated network (brokers use ids >= 1)."""


@dataclass(slots=True)
class PartitionRegistration:
    """What the controller (ZooKeeper) stores for a partition."""

    replicas: tuple[int, ...]
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int


class Controller:
    """Elects leaders (clean, or unclean when enabled), sends LeaderAndIsr, stores ISR changes."""

    def __init__(self, variant: Variant, broker_ids: Iterable[int], node_id: int = CONTROLLER_ID):
        self.variant = variant
        self.node_id = node_id
        self.controller_epoch = 1
        self.live_brokers: set[int] = set(broker_ids)
        self.partitions: dict[TopicPartition, PartitionRegistration] = {}
        self.outbox: list[Outgoing] = []
        self.leader_and_isr_responses: list[LeaderAndIsrResponse] = []
        self._correlation_id = 0

    # --------------------------------------------------------------------------- helpers

    def _next_correlation_id(self) -> int:
        self._correlation_id += 1
        return self._correlation_id

    def _drain(self) -> list[Outgoing]:
        out = self.outbox
        self.outbox = []
        return out

    def _state(self, tp: TopicPartition, is_new: bool = False) -> LeaderAndIsrPartitionState:
        reg = self.partitions[tp]
        return LeaderAndIsrPartitionState(
            tp,
            self.controller_epoch,
            reg.leader,
            reg.leader_epoch,
            reg.isr,
            reg.zk_version,
            reg.replicas,
            is_new,
        )

    def _send_leader_and_isr(self, by_broker: dict[int, list[LeaderAndIsrPartitionState]]) -> None:
        """Batch LeaderAndIsr per live broker (ControllerBrokerRequestBatch)."""
        live_leaders = tuple(
            sorted({s.leader for states in by_broker.values() for s in states} & self.live_brokers)
        )
        for broker in sorted(by_broker):
            if broker not in self.live_brokers or not by_broker[broker]:
                continue
            request = LeaderAndIsrRequest(
                self._next_correlation_id(),
                self.node_id,
                self.controller_epoch,
                tuple(by_broker[broker]),
                live_leaders,
            )
            self.outbox.append(Outgoing(broker, request))

    def _propagate(self, tps: Iterable[TopicPartition], exclude: int | None = None) -> None:
        by_broker: dict[int, list[LeaderAndIsrPartitionState]] = {}
        for tp in sorted(tps):
            state = self._state(tp)
            for replica in self.partitions[tp].replicas:
                if replica != exclude and replica in self.live_brokers:
                    by_broker.setdefault(replica, []).append(state)
        self._send_leader_and_isr(by_broker)

    def _update(self, tp: TopicPartition, leader: int, isr: Iterable[int]) -> None:
        """newLeaderAndIsr: a new leader/ISR with leader epoch + 1 and zk_version + 1."""
        reg = self.partitions[tp]
        reg.leader = leader
        reg.isr = tuple(sorted(set(isr)))
        reg.leader_epoch += 1
        reg.zk_version += 1

    # ------------------------------------------------------------------------- queries

    def leader_of(self, tp: TopicPartition) -> int | None:
        """The current leader of tp, or None if the partition is offline."""
        reg = self.partitions.get(tp)
        if reg is None or reg.leader == NO_LEADER:
            return None
        return reg.leader

    # ----------------------------------------------------------------------- lifecycle

    def create_partition(self, tp: TopicPartition, replicas: tuple[int, ...]) -> list[Outgoing]:
        """New partition: leader = first replica, epoch 0, ISR = all replicas; LeaderAndIsr."""
        self.partitions[tp] = PartitionRegistration(
            tuple(replicas), replicas[0], 0, tuple(sorted(replicas)), 0
        )
        by_broker: dict[int, list[LeaderAndIsrPartitionState]] = {}
        state = self._state(tp, is_new=True)
        for replica in replicas:
            by_broker.setdefault(replica, []).append(state)
        self._send_leader_and_isr(by_broker)
        return self._drain()

    def can_elect_without(self, tp: TopicPartition, gone: set[int]) -> bool:
        """The offline election would find tp a leader with `gone` out of the live set."""
        reg = self.partitions[tp]
        live = self.live_brokers - gone
        if any(r in live for r in reg.isr):
            return True
        return self.variant.election == "unclean" and any(r in live for r in reg.replicas)

    def offline_partition_leader_election(self, tp: TopicPartition) -> bool:
        """Elect the first live ISR replica (unclean: first live replica); True if elected."""
        reg = self.partitions[tp]
        live = [r for r in reg.replicas if r in self.live_brokers]
        leader = next((r for r in live if r in reg.isr), None)
        if leader is not None:
            self._update(tp, leader, [r for r in reg.isr if r in self.live_brokers])
            return True
        if self.variant.election == "unclean" and live:
            self._update(tp, live[0], [live[0]])
            return True
        return False

    def on_broker_failure(self, broker_id: int, together: Iterable[int] = ()) -> list[Outgoing]:
        """The broker's ZK session expired: re-elect its partitions and drop it from ISRs.
        Brokers `together` with it (one ZooKeeper watch, R22) leave the live set first, so
        the one election skips them all and finds them out of the new ISR already; each
        dead replica left in an ISR is then dropped, one epoch each."""
        if broker_id not in self.live_brokers:
            return []
        others = sorted(set(together) & self.live_brokers - {broker_id})
        self.live_brokers.discard(broker_id)
        self.live_brokers.difference_update(others)
        changed = self._elect_for_dead_leader(broker_id)
        for dead in (broker_id, *others):
            changed |= self._remove_from_isr(dead)
        self._propagate(changed, exclude=broker_id)
        return self._drain()

    def on_failover(self, broker_id: int) -> list[Outgoing]:
        """A new controller (controller epoch + 1) finds broker_id gone: its replicas go
        offline first, out of the ISR and the leader NoLeader where it led, in a new leader
        epoch; then the offline partitions elect, in another (R22)."""
        if broker_id not in self.live_brokers:
            return []
        self.controller_epoch += 1
        self.live_brokers.discard(broker_id)
        changed = self._remove_from_isr(broker_id)
        for tp in sorted(self.partitions):
            offline = self.partitions[tp].leader == NO_LEADER
            if offline and self.offline_partition_leader_election(tp):
                changed.add(tp)
        self._propagate(changed, exclude=broker_id)
        return self._drain()

    def _elect_for_dead_leader(self, broker_id: int) -> set[TopicPartition]:
        """Elect a new leader for each partition broker_id led; the partitions elected."""
        changed: set[TopicPartition] = set()
        for tp in sorted(self.partitions):
            reg = self.partitions[tp]
            if reg.leader == broker_id and self.offline_partition_leader_election(tp):
                changed.add(tp)
        return changed

    def _remove_from_isr(self, broker_id: int) -> set[TopicPartition]:
        """OfflineReplica: drop a dead broker from each ISR it is in (the last member stays;
        a partition it led loses its leader), one epoch each; the partitions changed."""
        changed: set[TopicPartition] = set()
        for tp in sorted(self.partitions):
            reg = self.partitions[tp]
            if broker_id not in reg.replicas or broker_id not in reg.isr:
                continue
            new_leader = NO_LEADER if reg.leader == broker_id else reg.leader
            new_isr = reg.isr if len(reg.isr) == 1 else [r for r in reg.isr if r != broker_id]
            self._update(tp, new_leader, new_isr)
            changed.add(tp)
        return changed

    def on_broker_startup(self, broker_id: int) -> list[Outgoing]:
        """A broker registered: send it the state of every partition it hosts, an offline one's
        too (leader NoLeader), then elect the offline partitions (R23). Kafka 2.6.3's
        onBrokerStartup moves each replica on the broker to OnlineReplica, which sends it its
        partition's leadership whatever the leader; the broker then hosts even an offline
        partition, whose HW stays in its checkpoint file (makeFollowers, KAFKA-1647)."""
        # A bounce (the controller still saw the old session): handle the failure first, and
        # send what that failure changed (its LeaderAndIsr requests) before the start-up's.
        bounced = self.on_broker_failure(broker_id) if broker_id in self.live_brokers else []
        self.live_brokers.add(broker_id)
        hosted = [tp for tp in sorted(self.partitions) if broker_id in self.partitions[tp].replicas]
        self._send_leader_and_isr({broker_id: [self._state(tp) for tp in hosted]})
        offline = [tp for tp in hosted if self.partitions[tp].leader == NO_LEADER]
        elected = [tp for tp in offline if self.offline_partition_leader_election(tp)]
        self._propagate(elected)
        return bounced + self._drain()

    def elect_leader(self, tp: TopicPartition, candidate: int) -> tuple[Errors, list[Outgoing]]:
        """An admin election (ElectLeaders): make `candidate` the leader in a new epoch, or
        refuse with Kafka 2.6.3's error and change nothing. Clean: a live ISR member, the ISR
        kept (a preferred-replica election). Unclean (election=unclean only): Kafka 2.6.3's
        ElectLeaders(UNCLEAN) acts only on a partition whose leader is NoLeader or not a live
        broker (else ELECTION_NOT_NEEDED), and runs the offline election, which still prefers
        a live ISR member; so a candidate outside the ISR is elected only when no ISR member is
        live and it is the first live replica in assignment order, alone in the ISR (else
        ELIGIBLE_LEADERS_NOT_AVAILABLE). The spec's ControllerElectLeader has the same guard.
        (Kafka lets an admin ask for an unclean election whatever the topic's
        unclean.leader.election.enable; the model's election=clean has no unclean election
        at all, by failure detection or by an admin.)"""
        reg = self.partitions.get(tp)
        if reg is None:
            return Errors.UNKNOWN_TOPIC_OR_PARTITION, []
        if candidate not in reg.replicas or candidate not in self.live_brokers:
            return Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE, []
        if candidate in reg.isr:
            self._update(tp, candidate, reg.isr)
        elif self.variant.election != "unclean":
            return Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE, []
        elif reg.leader in self.live_brokers:  # NO_LEADER is no broker
            return Errors.ELECTION_NOT_NEEDED, []
        else:
            live = [r for r in reg.replicas if r in self.live_brokers]
            if any(r in reg.isr for r in live) or live[0] != candidate:
                return Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE, []
            self._update(tp, candidate, [candidate])
        self._propagate([tp])
        return Errors.NONE, self._drain()

    # ------------------------------------------------------------------------ messages

    def handle_alter_partition(self, request: AlterPartitionRequest) -> AlterPartitionResponse:
        """Conditional ISR write: refused on a stale leader epoch or zk_version (R11, R12)."""
        answers = []
        for item in request.partitions:
            reg = self.partitions.get(item.tp)
            if reg is None:
                answers.append(
                    AlterPartitionItemResponse(
                        item.tp, Errors.UNKNOWN_TOPIC_OR_PARTITION, NO_LEADER, -1, (), -1
                    )
                )
                continue
            if request.broker_id not in self.live_brokers:
                error = Errors.STALE_BROKER_EPOCH
            elif item.leader_epoch != reg.leader_epoch:
                error = Errors.FENCED_LEADER_EPOCH
            elif reg.leader != request.broker_id:
                error = Errors.NOT_LEADER_OR_FOLLOWER
            elif item.partition_epoch != reg.zk_version:
                error = Errors.INVALID_UPDATE_VERSION
            elif request.broker_id not in item.new_isr or not set(item.new_isr) <= set(
                reg.replicas
            ):
                error = Errors.INVALID_REQUEST
            else:
                error = Errors.NONE
                reg.isr = tuple(sorted(set(item.new_isr)))
                reg.zk_version += 1
            answers.append(
                AlterPartitionItemResponse(
                    item.tp, error, reg.leader, reg.leader_epoch, reg.isr, reg.zk_version
                )
            )
        return AlterPartitionResponse(request.correlation_id, Errors.NONE, tuple(answers))

    def receive(self, src: int, src_incarnation: int, message: Message) -> list[Outgoing]:
        """Handle ALTER_PARTITION (alter-partition mode) and LEADER_AND_ISR answers."""
        if isinstance(message, AlterPartitionRequest):
            response = self.handle_alter_partition(message)
            self.outbox.append(Outgoing(src, response, src_incarnation))
        elif isinstance(message, LeaderAndIsrResponse):
            self.leader_and_isr_responses.append(message)
        return self._drain()
