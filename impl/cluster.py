"""Cluster: the deterministic simulator (clock, network, brokers, controller, client, faults).

A schedule is a list of steps (kreplica.impl.steps); `apply(step)` performs one and the same
schedule always produces the same run. `enabled_steps()` lists what may happen next so a fuzzer
can choose; `run_until_quiescent()` and `settle()` are a fair default scheduler.

Node ids: brokers are the given ids (>= 1), the controller is CONTROLLER_ID (0), the client is
CLIENT_ID (-1).

The clock starts at START_TIME_MS, not 0: Kafka keeps "never" as time 0 (lastCaughtUpTimeMs of a
replica that never caught up) and relies on wall-clock time being far from 0.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence

from kreplica.impl.broker import Broker, Outgoing
from kreplica.impl.client import CLIENT_ID, AckedProduce, Client
from kreplica.impl.clock import SimClock
from kreplica.impl.config import BrokerConfig
from kreplica.impl.controller import CONTROLLER_ID, Controller
from kreplica.impl.errors import KafkaError
from kreplica.impl.log import Log
from kreplica.impl.log_manager import LogManager
from kreplica.impl.messages import (
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    Message,
    OffsetsForLeaderEpochResponse,
    ProducePartitionData,
    ProduceRequest,
    TopicPartition,
)
from kreplica.impl.network import Envelope, Network
from kreplica.impl.partition import Partition
from kreplica.impl.steps import (
    CheckpointHighWatermarks,
    ConsumerFetch,
    ConsumerListOffsets,
    Crash,
    DeleteRecords,
    Deliver,
    DetectFailure,
    DoWork,
    Drop,
    Duplicate,
    Elect,
    FailLogDir,
    Flush,
    HaltOnLogDirFailure,
    Heal,
    Isolate,
    Produce,
    Register,
    Restart,
    ShrinkIsr,
    Step,
    Tick,
    UncleanShutdown,
)
from kreplica.impl.variants import NOT_IMPLEMENTED, Variant

START_TIME_MS = 1_000_000
"""Simulated time at cluster creation (so that time 0, Kafka's "never", lies in the past)."""


FETCHER_ANSWERS = (FetchResponse, OffsetsForLeaderEpochResponse, ListOffsetsResponse)
"""The answers a leader sends a follower's fetcher."""


class SimulationError(RuntimeError):
    """A step that cannot be applied in the current state (e.g. delivering from an empty link)."""


class Cluster:
    """Brokers, controller and client on a simulated clock and network; one step at a time."""

    def __init__(
        self,
        broker_ids: Sequence[int] = (1, 2, 3),
        topics: Mapping[str, int] | None = None,
        replication_factor: int | None = None,
        variant: Variant | None = None,
        config: BrokerConfig | None = None,
        assignment: Mapping[TopicPartition, Sequence[int]] | None = None,
        bootstrap: bool = True,
    ) -> None:
        if not broker_ids or min(broker_ids) < 1:
            raise ValueError("broker ids must be >= 1 (0 is the controller, -1 the client)")
        self.variant = variant or Variant()
        if self.variant.elr in NOT_IMPLEMENTED["elr"]:
            raise NotImplementedError("elr=on (KIP-966) is not implemented by kreplica.impl")
        self.config = config or BrokerConfig()
        self.broker_ids = tuple(sorted(broker_ids))
        if self.config.replica_lag_time_max_ms >= START_TIME_MS:
            raise ValueError(f"replica_lag_time_max_ms must be below {START_TIME_MS}")
        self.clock = SimClock(START_TIME_MS)
        self.network = Network()
        self.client = Client()
        self.controller = Controller(self.variant, self.broker_ids)
        self.log_managers = {b: LogManager(self.config) for b in self.broker_ids}
        self.incarnations = dict.fromkeys(self.broker_ids, 1)
        self.history: list[Step] = []
        self._powered_off: set[int] = set()
        """Brokers down since an UncleanShutdown: their host lost power and sends no close."""
        self._deliver_steps: dict[tuple[int, int], Deliver] = {}
        self._work_steps: dict[tuple[int, int], DoWork] = {}
        self.record_id = 0
        self.assignment: dict[TopicPartition, tuple[int, ...]] = {}
        if assignment is not None:
            for tp, replicas in assignment.items():
                self.assignment[tp] = tuple(replicas)
        else:
            rf = replication_factor or min(3, len(self.broker_ids))
            n = len(self.broker_ids)
            for topic, count in sorted((topics or {"t": 1}).items()):
                for p in range(count):
                    replicas = tuple(self.broker_ids[(p + i) % n] for i in range(rf))
                    self.assignment[TopicPartition(topic, p)] = replicas
        self.partitions = sorted(self.assignment)
        self.brokers: dict[int, Broker] = {b: self._new_broker(b) for b in self.broker_ids}
        for tp in self.partitions:
            self._send_all(CONTROLLER_ID, self.controller.create_partition(tp, self.assignment[tp]))
        if bootstrap:
            # deliver the initial LeaderAndIsr requests and their answers; fetchers stay idle
            while self.network.deliverable_links():
                for link in self.network.deliverable_links():
                    self.apply(Deliver(*link))
            self.history.clear()

    # --------------------------------------------------------------------------- plumbing

    def _new_broker(self, broker_id: int) -> Broker:
        return Broker(
            broker_id,
            self.incarnations[broker_id],
            self.clock,
            self.config,
            self.variant,
            self.log_managers[broker_id],
            self.controller,
            CONTROLLER_ID,
            self.partitions,
        )

    def incarnation(self, node: int) -> int:
        """The current incarnation of a node (brokers count restarts; others are 0)."""
        return self.incarnations.get(node, 0)

    def _send_all(self, src: int, outgoing: list[Outgoing]) -> list[Envelope]:
        if not outgoing:
            return []
        sent = []
        incarnations = self.incarnations
        src_incarnation = incarnations.get(src, 0)
        now = self.clock.now_ms
        send = self.network.send
        brokers = self.brokers
        for dst, payload, dst_incarnation in outgoing:
            if dst_incarnation is None:
                dst_incarnation = incarnations.get(dst, 0)
            sent.append(send(src, src_incarnation, dst, dst_incarnation, payload, now))
            if src > 0 and dst > 0 and not brokers[dst].alive:
                self._break_connections(dst)  # a broker's connect to a dead one is refused
        return sent

    def next_record_id(self) -> int:
        """A fresh record id (record ids make lost or overwritten records visible)."""
        self.record_id += 1
        return self.record_id

    # ------------------------------------------------------------------------ inspection

    def broker(self, broker_id: int) -> Broker:
        """The current incarnation of a broker (dead ones stay readable until restarted)."""
        return self.brokers[broker_id]

    def is_alive(self, broker_id: int) -> bool:
        """True if the broker process is running."""
        return self.brokers[broker_id].alive

    def partition(self, broker_id: int, tp: TopicPartition) -> Partition | None:
        """The broker's in-memory Partition of tp, if it hosts one."""
        return self.brokers[broker_id].replica_manager.partition(tp)

    def log(self, broker_id: int, tp: TopicPartition) -> Log | None:
        """The broker's log of tp (readable for dead brokers too: it is the disk state)."""
        return self.log_managers[broker_id].get_log(tp)

    def leader(self, tp: TopicPartition) -> int | None:
        """The controller's leader of tp, or None if offline."""
        return self.controller.leader_of(tp)

    @property
    def acked(self) -> list[AckedProduce]:
        """Every produce acknowledged to the client (acks=-1 and acks=1), in order."""
        return self.client.acked

    def in_flight(self) -> list[Envelope]:
        """Messages in the network, in send order."""
        return self.network.in_flight()

    # -------------------------------------------------------------------------- stepping

    def run(self, schedule: Iterable[Step]) -> None:
        """Apply every step of a schedule in order."""
        for step in schedule:
            self.apply(step)

    def apply(self, step: Step) -> list[Envelope]:
        """Perform one step; return the messages it put on the network."""
        self.history.append(step)
        if isinstance(step, Deliver):
            return self._deliver(step)
        if isinstance(step, Drop):
            if self.network.drop((step.src, step.dst), step.index) is None:
                raise SimulationError(f"nothing to drop at {step}")
            self._break_connections(step.src)  # no longer on its way from a dead leader
            return []
        if isinstance(step, Duplicate):
            if self.network.duplicate((step.src, step.dst), step.index) is None:
                raise SimulationError(f"nothing to duplicate at {step}")
            return []
        if isinstance(step, DoWork):
            return self._send_all(step.broker, self.brokers[step.broker].do_work(step.source))
        if isinstance(step, Tick):
            self.clock.advance(step.ms)
            sent = []
            for b in self.broker_ids:
                sent += self._send_all(b, self.brokers[b].tick())
            return sent
        if isinstance(step, ShrinkIsr):
            return self._send_all(step.broker, self.brokers[step.broker].maybe_shrink_isr())
        if isinstance(step, Produce):
            return self._produce(step)
        if isinstance(step, ConsumerFetch):
            return self._consumer_fetch(step)
        if isinstance(step, ConsumerListOffsets):
            return self._consumer_list_offsets(step)
        if isinstance(step, Crash | UncleanShutdown):
            self._crash(step.broker, unclean=isinstance(step, UncleanShutdown))
            return []
        if isinstance(step, Restart):
            return self._restart(step.broker)
        if isinstance(step, DetectFailure):
            if step.failover:
                return self._send_all(CONTROLLER_ID, self.controller.on_failover(step.broker))
            out = self.controller.on_broker_failure(step.broker, step.together)
            return self._send_all(CONTROLLER_ID, out)
        if isinstance(step, Register):
            return self._send_all(CONTROLLER_ID, self.controller.on_broker_startup(step.broker))
        if isinstance(step, Elect):
            _, out = self.controller.elect_leader(step.tp, step.broker)
            return self._send_all(CONTROLLER_ID, out)
        if isinstance(step, Flush):
            self.log_managers[step.broker].flush_all()
            return []
        if isinstance(step, CheckpointHighWatermarks):
            self.brokers[step.broker].checkpoint_high_watermarks()
            return []
        if isinstance(step, Isolate):
            self.network.block(step.a, step.b)
            return []
        if isinstance(step, Heal):
            self.network.unblock(step.a, step.b)
            self._break_connections(step.a)
            self._break_connections(step.b)
            return []
        if isinstance(step, FailLogDir):
            if self.is_alive(step.broker):
                self.brokers[step.broker].fail_log_dir()
            return []
        if isinstance(step, HaltOnLogDirFailure):
            if self.is_alive(step.broker) and self.brokers[step.broker].has_offline_log_dir():
                self._crash(step.broker, unclean=False)
            return []
        if isinstance(step, DeleteRecords):
            leader = self.leader(step.tp)
            if leader is not None:
                partition = self.partition(leader, step.tp)
                log = partition.leader_log_if_local() if partition is not None else None
                if log is not None and self.is_alive(leader):
                    # e.g. KAFKA_STORAGE_ERROR: the request fails and nothing changes
                    with contextlib.suppress(KafkaError):
                        log.maybe_increment_log_start_offset(min(step.offset, log.high_watermark))
            return []
        raise SimulationError(f"unknown step {step!r}")

    def _deliver(self, step: Deliver) -> list[Envelope]:
        envelope = self.network.take((step.src, step.dst), step.index)
        if envelope is None:
            raise SimulationError(f"nothing to deliver at {step}")
        return self.deliver(envelope)

    def deliver(self, envelope: Envelope) -> list[Envelope]:
        """Hand an envelope taken off the network to its destination node."""
        _, src, dst, src_incarnation, dst_incarnation, payload, _ = envelope
        if dst == CLIENT_ID:
            self.client.receive(src, payload, self.clock.now_ms)
            return []
        if dst == CONTROLLER_ID:
            out = self.controller.receive(src, src_incarnation, payload)
            return self._send_all(CONTROLLER_ID, out)
        broker = self.brokers[dst]
        if not broker.alive or dst_incarnation != broker.incarnation:
            self.network.delivered -= 1
            self.network.dropped += 1
            return []
        return self._send_all(dst, broker.receive(src, src_incarnation, payload))

    def send_request(self, broker: int, request: Message) -> Envelope:
        """The client sends an arbitrary request (correlation id already set) to a broker."""
        self.client.sent(broker, request, self.clock.now_ms)
        return self._send_all(CLIENT_ID, [Outgoing(broker, request)])[0]

    def _target(self, tp: TopicPartition, broker: int | None) -> int:
        if broker is not None:
            return broker
        leader = self.leader(tp)
        if leader is not None:
            return leader
        return self.assignment[tp][0] if tp in self.assignment else self.broker_ids[0]

    def _produce(self, step: Produce) -> list[Envelope]:
        if step.record_ids:
            self.record_id = max(self.record_id, *step.record_ids)  # ids stay unique
        request = ProduceRequest(
            self.client.next_correlation_id(),
            step.acks,
            step.timeout_ms,
            (ProducePartitionData(step.tp, step.record_ids),),
        )
        return [self.send_request(self._target(step.tp, step.broker), request)]

    def _consumer_fetch(self, step: ConsumerFetch) -> list[Envelope]:
        parts: tuple[FetchPartitionData, ...] = (
            FetchPartitionData(step.tp, step.offset, -1, step.max_bytes, None),
        )
        if step.other is not None:
            other = FetchPartitionData(step.other, step.other_offset, -1, step.max_bytes, None)
            parts = (other, *parts) if step.other_first else (*parts, other)
        request = FetchRequest(
            self.client.next_correlation_id(),
            -1,
            step.max_wait_ms,
            step.min_bytes,
            step.max_bytes if step.response_max_bytes is None else step.response_max_bytes,
            step.isolation_level,
            parts,
        )
        return [self.send_request(self._target(step.tp, step.broker), request)]

    def _consumer_list_offsets(self, step: ConsumerListOffsets) -> list[Envelope]:
        request = ListOffsetsRequest(
            self.client.next_correlation_id(),
            -1,
            step.isolation_level,
            (ListOffsetsPartition(step.tp, None, step.timestamp),),
        )
        return [self.send_request(self._target(step.tp, step.broker), request)]

    def _crash(self, broker_id: int, unclean: bool) -> None:
        broker = self.brokers[broker_id]
        broker.shutdown()
        self.network.drop_to(broker_id)
        if unclean:
            self._powered_off.add(broker_id)
            self.log_managers[broker_id].recover_all(unclean=True)
        self._break_connections(broker_id)

    def _break_connections(self, dead: int) -> None:
        """If broker `dead` is not running, every running broker's fetcher towards it sees its
        connection broken at once, but across a network partition (R8): the answers already on
        their way still arrive, and any other request fails at the fetcher's next iteration.
        Kafka's NetworkClient gets the close that the dead process's host sends, or a refused
        connect; across a partition, or from a host that lost power (`_powered_off`), it hears
        nothing, and the request times out."""
        brokers = self.brokers
        if dead not in brokers or brokers[dead].alive or dead in self._powered_off:
            return
        queues, blocked = self.network.queues, self.network.blocked
        for b in self.broker_ids:
            broker = brokers[b]
            if b == dead or not broker.alive or (dead, b) in blocked:
                continue
            incarnation = broker.incarnation
            on_the_way = {
                e.payload.correlation_id
                for e in queues.get((dead, b), ())
                if isinstance(e.payload, FETCHER_ANSWERS) and e.dst_incarnation == incarnation
            }
            broker.replica_manager.replica_fetcher_manager.process_disconnection(dead, on_the_way)

    def _restart(self, broker_id: int) -> list[Envelope]:
        if self.brokers[broker_id].alive:
            raise SimulationError(f"broker {broker_id} is running; crash it first")
        self.incarnations[broker_id] += 1
        self._powered_off.discard(broker_id)
        self.log_managers[broker_id].recover_all(unclean=False)
        self.log_managers[broker_id].load_high_watermarks()
        self.brokers[broker_id] = self._new_broker(broker_id)
        return self._send_all(CONTROLLER_ID, self.controller.on_broker_startup(broker_id))

    # ------------------------------------------------------------------------- choices

    def enabled_steps(self, reorder: bool = True, faults: bool = True) -> list[Step]:
        """Every step applicable now, in a fixed order: network, fetchers, client, faults."""
        # Deliver/Drop/Duplicate at index > 0 only with reorder; faults=False leaves out drops,
        # duplicates, crashes, restarts, failure detection, elections and flushes.
        steps: list[Step] = []
        network = self.network
        for link in network.deliverable_links():
            depth = len(network.queues[link]) if reorder else 1
            for index in range(depth):
                steps.append(Deliver(link[0], link[1], index))
        if faults:
            for link in network.links():
                for index in range(len(network.queues[link]) if reorder else 1):
                    steps.append(Drop(link[0], link[1], index))
                    steps.append(Duplicate(link[0], link[1], index))
        for b in self.broker_ids:
            for source in self.brokers[b].workable_fetchers():
                steps.append(DoWork(b, source))
        acks = int(self.variant.acks)
        for tp in self.partitions:
            steps.append(Produce(tp, (self.record_id + 1,), acks))
        steps.append(Tick(self.config.replica_fetch_wait_max_ms))
        for b in self.broker_ids:
            if self.is_alive(b) and self.brokers[b].replica_manager.leader_partitions():
                steps.append(ShrinkIsr(b))
            if self.is_alive(b) and self.brokers[b].replica_manager.hw_checkpoint_started:
                steps.append(CheckpointHighWatermarks(b))
        if faults:
            for b in self.broker_ids:
                if self.is_alive(b):
                    steps += [Crash(b), UncleanShutdown(b), Flush(b)]
                    if self.brokers[b].has_offline_log_dir():
                        steps.append(HaltOnLogDirFailure(b))
                    else:
                        steps += [FailLogDir(b, tp) for tp in self.partitions]
                    if b not in self.controller.live_brokers:
                        steps.append(Register(b))
                else:
                    steps.append(Restart(b))
                if b in self.controller.live_brokers:
                    steps.append(DetectFailure(b))
            steps += self.failover_detections()
            for tp in self.partitions:
                for b in self.assignment[tp]:
                    steps.append(Elect(tp, b))
        return steps

    def failover_detections(self) -> list[Step]:
        """A dead leader's session end as a new controller's failover handles it, or together
        with the other dead brokers' (R22): where the controller can elect without them."""
        live = self.controller.live_brokers
        dead = [b for b in self.broker_ids if not self.is_alive(b) and b in live]
        found: list[Step] = []
        for tp in sorted(self.partitions):
            leader = self.controller.leader_of(tp)
            if leader not in dead:
                continue
            others = tuple(b for b in dead if b != leader)
            if self.controller.can_elect_without(tp, {leader}):
                found.append(DetectFailure(leader, failover=True))
            if others and self.controller.can_elect_without(tp, set(dead)):
                found.append(DetectFailure(leader, together=others))
        return found

    def next_record(self, tp: TopicPartition, acks: int | None = None) -> Produce:
        """A Produce step with a fresh record id (consumes the id)."""
        return Produce(
            tp, (self.next_record_id(),), int(self.variant.acks) if acks is None else acks
        )

    # ----------------------------------------------------------------------- scheduling

    def quiescent(self) -> bool:
        """True if no message can be delivered and no fetcher has anything to do now."""
        if self.network.deliverable_links():
            return False
        return not any(self.brokers[b].workable_fetchers() for b in self.broker_ids)

    def run_until_quiescent(self, max_steps: int = 100_000) -> int:
        """Fair default scheduler: deliver each link's head, run each workable fetcher; repeat."""
        steps = 0
        network = self.network
        blocked = network.blocked
        brokers = self.brokers
        broker_ids = self.broker_ids
        history = self.history
        deliver = self.deliver
        send_all = self._send_all
        deliver_steps = self._deliver_steps
        work_steps = self._work_steps
        while steps < max_steps:
            progressed = False
            for link, queue in network._lanes:  # links added during the pass wait for the next
                if not queue or (blocked and link in blocked):
                    continue
                envelope = queue.popleft()
                network.delivered += 1
                step = deliver_steps.get(link)
                if step is None:
                    step = deliver_steps[link] = Deliver(link[0], link[1])
                history.append(step)
                deliver(envelope)
                steps += 1
                progressed = True
            for b in broker_ids:
                broker = brokers[b]
                for source in broker.workable_fetchers():
                    work = work_steps.get((b, source))
                    if work is None:
                        work = work_steps[(b, source)] = DoWork(b, source)
                    history.append(work)
                    send_all(b, broker.do_work(source))
                    steps += 1
                    progressed = True
            if not progressed:
                break
        return steps

    def settle(self, max_rounds: int = 10) -> None:
        """Run until quiescent, then let parked follower fetches expire so HWs propagate."""
        for _ in range(max_rounds):
            self.run_until_quiescent()
            self.apply(Tick(self.config.replica_fetch_wait_max_ms))
            self.run_until_quiescent()
            if self.quiescent() and not self._followers_behind():
                return

    def _followers_behind(self) -> bool:
        for tp in self.partitions:
            leader = self.leader(tp)
            if leader is None or not self.is_alive(leader):
                continue
            leader_log = self.log(leader, tp)
            if leader_log is None:
                continue
            for b in self.assignment[tp]:
                log = self.log(b, tp)
                if (
                    b != leader
                    and self.is_alive(b)
                    and log is not None
                    and (log.log_end_offset, log.high_watermark)
                    != (leader_log.log_end_offset, leader_log.high_watermark)
                ):
                    return True
        return False
