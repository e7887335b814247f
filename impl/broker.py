"""Broker: one broker incarnation (KafkaServer + KafkaApis) as a sans-IO state machine.

`receive(envelope)` handles a request or response and returns the messages to send;
`do_work(source)` runs one iteration of the fetcher towards `source`; `tick()` expires delayed
operations on the simulated clock. Responses produced later (a DelayedProduce completing when
another broker's fetch moves the HW) are returned by whichever call triggered them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple, Protocol

from kreplica.impl.clock import SimClock
from kreplica.impl.config import BrokerConfig
from kreplica.impl.errors import IllegalStateError
from kreplica.impl.log_manager import LogManager
from kreplica.impl.messages import (
    NO_ERROR,
    AlterPartitionItem,
    AlterPartitionItemResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    Errors,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    LeaderAndIsrRequest,
    ListOffsetsRequest,
    ListOffsetsResponse,
    Message,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    TopicPartition,
)
from kreplica.impl.replica_manager import ReplicaManager
from kreplica.impl.variants import Variant


class Outgoing(NamedTuple):
    """A message a node wants sent; dst_incarnation pins a response to the requester's life."""

    dst: int
    payload: Message
    dst_incarnation: int | None = None


_FETCHER_RESPONSES = (FetchResponse, OffsetsForLeaderEpochResponse, ListOffsetsResponse)


class ControllerLink(Protocol):
    """The synchronous ISR write of isr=sync (a ZooKeeper conditional update in 2.6.3)."""

    def handle_alter_partition(self, request: AlterPartitionRequest) -> AlterPartitionResponse:
        """Apply an ISR change or refuse it (stale leader epoch / version)."""
        ...


class _IsrChannel:
    """Routes a Partition's ISR change: straight to the controller (sync) or as a message."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def send_alter_partition(self, item: AlterPartitionItem) -> AlterPartitionItemResponse | None:
        """isr=sync: write to the controller now; alter-partition: send it and answer later."""
        broker = self.broker
        request = AlterPartitionRequest(broker.next_correlation_id(), broker.broker_id, (item,))
        if broker.variant.isr == "sync":
            response = broker.controller_link.handle_alter_partition(request)
            return response.partitions[0]
        broker.outbox.append(Outgoing(broker.controller_id, request))
        return None


class Broker:
    """One incarnation of a broker: ReplicaManager, fetchers, purgatories, request handling."""

    def __init__(
        self,
        broker_id: int,
        incarnation: int,
        clock: SimClock,
        config: BrokerConfig,
        variant: Variant,
        log_manager: LogManager,
        controller_link: ControllerLink,
        controller_id: int,
        known_partitions: Iterable[TopicPartition],
    ) -> None:
        self.broker_id = broker_id
        self.incarnation = incarnation
        self.clock = clock
        self.config = config
        self.variant = variant
        self.log_manager = log_manager
        self.controller_link = controller_link
        self.controller_id = controller_id
        self.alive = True
        self.outbox: list[Outgoing] = []
        self._correlation_id = 0
        self.replica_manager = ReplicaManager(
            broker_id,
            clock,
            config,
            variant,
            log_manager,
            _IsrChannel(self),
            known_partitions,
            self.next_correlation_id,
        )

    def next_correlation_id(self) -> int:
        """A fresh correlation id for a request this broker sends."""
        self._correlation_id += 1
        return self._correlation_id

    def _drain(self) -> list[Outgoing]:
        out = self.outbox
        self.outbox = []
        return out

    # ------------------------------------------------------------------------- requests

    def receive(self, src: int, src_incarnation: int, message: Message) -> list[Outgoing]:
        """Handle one delivered message; return what to send (never raises on bad input)."""
        if not self.alive:
            return []
        if isinstance(message, FetchRequest):
            self.handle_fetch_request(src, src_incarnation, message)
        elif isinstance(message, ProduceRequest):
            self.handle_produce_request(src, src_incarnation, message)
        elif isinstance(message, _FETCHER_RESPONSES):
            self.handle_fetcher_response(src, message)
        elif isinstance(message, OffsetsForLeaderEpochRequest):
            answers = self.replica_manager.last_offset_for_leader_epoch(message.partitions)
            self.outbox.append(
                Outgoing(
                    src,
                    OffsetsForLeaderEpochResponse(message.correlation_id, answers),
                    src_incarnation,
                )
            )
        elif isinstance(message, ListOffsetsRequest):
            list_answers = self.replica_manager.list_offsets(
                message.replica_id, message.isolation_level, message.partitions
            )
            self.outbox.append(
                Outgoing(
                    src, ListOffsetsResponse(message.correlation_id, list_answers), src_incarnation
                )
            )
        elif isinstance(message, LeaderAndIsrRequest):
            response = self.replica_manager.become_leader_or_follower(message)
            self.outbox.append(Outgoing(src, response, src_incarnation))
        elif isinstance(message, AlterPartitionResponse):
            self.handle_alter_partition_response(message)
        return self._drain()

    def handle_produce_request(
        self, src: int, src_incarnation: int, request: ProduceRequest
    ) -> None:
        """KafkaApis.handleProduceRequest: a partition without records is refused at once
        (INVALID_RECORD, ProduceRequest.validateRecords); no internal topics for clients;
        acks=0 is silent."""
        entries: dict[TopicPartition, tuple[int, ...]] = {}
        invalid: dict[TopicPartition, ProducePartitionResponse] = {}
        for data in request.partitions:
            if data.record_ids:
                entries[data.tp] = data.record_ids
            else:
                invalid[data.tp] = ProducePartitionResponse(data.tp, Errors.INVALID_RECORD, -1, -1)

        def send_response(status: dict[TopicPartition, ProducePartitionResponse]) -> None:
            if request.acks == 0:
                return
            answered = {**status, **invalid}
            partitions = tuple([answered[d.tp] for d in request.partitions if d.tp in answered])
            self.outbox.append(
                Outgoing(src, ProduceResponse(request.correlation_id, partitions), src_incarnation)
            )

        if not entries:
            send_response({})
            return
        self.replica_manager.append_records(
            request.timeout_ms, request.acks, False, entries, send_response
        )

    def handle_fetch_request(self, src: int, src_incarnation: int, request: FetchRequest) -> None:
        """KafkaApis.handleFetchRequest: delegate to ReplicaManager.fetch_messages (R15)."""

        def send_response(partitions: tuple[FetchPartitionResponse, ...]) -> None:
            self.outbox.append(
                Outgoing(
                    src,
                    FetchResponse(request.correlation_id, NO_ERROR, partitions),
                    src_incarnation,
                )
            )

        self.replica_manager.fetch_messages(
            request.max_wait_ms,
            request.replica_id,
            request.min_bytes,
            request.max_bytes,
            request.partitions,
            request.isolation_level,
            request.has_client_metadata,
            send_response,
        )

    def handle_fetcher_response(
        self, src: int, message: FetchResponse | OffsetsForLeaderEpochResponse | ListOffsetsResponse
    ) -> None:
        """Hand an answer to the fetcher towards src, and send the request it makes at once (an
        out-of-range reset's LIST_OFFSETS); a fetcher that throws dies (as in Kafka)."""
        fetcher = self.replica_manager.replica_fetcher_manager.fetcher_for(src)
        if fetcher is None or not fetcher.is_running:
            return
        try:
            for request in fetcher.handle_response(message):
                self.outbox.append(Outgoing(src, request))
        except IllegalStateError:
            fetcher.is_running = False
            fetcher.in_flight = None

    def handle_alter_partition_response(self, response: AlterPartitionResponse) -> None:
        """Apply the controller's answers to ISR changes sent in alter-partition mode."""
        for item in response.partitions:
            partition = self.replica_manager.non_offline_partition(item.tp)
            if partition is None:
                continue
            if partition.handle_alter_partition_response(item):
                log = partition.leader_log_if_local()
                if log is not None and partition.maybe_increment_leader_hw(log):
                    self.replica_manager.check_and_complete_all(item.tp)

    # ------------------------------------------------------------------------ scheduling

    def workable_fetchers(self) -> list[int]:
        """Source brokers whose fetcher would do something on do_work() now."""
        if not self.alive:
            return []
        workable = []
        for source, fetcher in sorted(
            self.replica_manager.replica_fetcher_manager.fetchers.items()
        ):
            if fetcher.has_work():
                workable.append(source)
        return workable

    def do_work(self, source: int) -> list[Outgoing]:
        """Run one iteration of the fetcher towards source; return its request, if any."""
        if not self.alive:
            return []
        fetcher = self.replica_manager.replica_fetcher_manager.fetcher_for(source)
        if fetcher is None:
            return []
        for request in fetcher.do_work():
            self.outbox.append(Outgoing(source, request))
        return self._drain()

    def tick(self) -> list[Outgoing]:
        """Expire delayed produce/fetch operations at the current simulated time (R17), and run
        the highwatermark-checkpoint task if it is due (R13)."""
        if not self.alive:
            return []
        self.replica_manager.tick()
        self.replica_manager.maybe_checkpoint_high_watermarks()
        return self._drain()

    def checkpoint_high_watermarks(self) -> None:
        """Run the highwatermark-checkpoint task now, if it has started (R13)."""
        if self.alive and self.replica_manager.hw_checkpoint_started:
            self.replica_manager.checkpoint_high_watermarks()

    def maybe_shrink_isr(self) -> list[Outgoing]:
        """Run the isr-expiration task once (R12)."""
        if not self.alive:
            return []
        self.replica_manager.maybe_shrink_isr()
        return self._drain()

    def next_timer_ms(self) -> int | None:
        """The earliest simulated time at which tick() or a fetcher has something to do."""
        candidates: list[int] = []
        rm = self.replica_manager
        for purgatory_next in (
            rm.delayed_produce_purgatory.next_expiry_ms(),
            rm.delayed_fetch_purgatory.next_expiry_ms(),
        ):
            if purgatory_next is not None:
                candidates.append(purgatory_next)
        for fetcher in rm.replica_fetcher_manager.fetchers.values():
            wake = fetcher.next_wakeup_ms()
            if wake is not None:
                candidates.append(wake)
        return min(candidates) if candidates else None

    def fail_log_dir(self) -> None:
        """The broker's log dir fails (an IOException, LogDirFailureChannel.maybeAddOfflineLogDir;
        its only one, `log.dirs`): every log on it refuses I/O, and every request for its
        partitions is answered KAFKA_STORAGE_ERROR (their Partitions count as offline), until
        the broker halts (`has_offline_log_dir`) and restarts."""
        for log in self.log_manager.logs.values():
            log.offline = True

    def has_offline_log_dir(self) -> bool:
        """True once the log dir failed: LogManager.handleLogDirFailure halts the broker then,
        no live log dir being left (Exit.halt)."""
        return any(log.offline for log in self.log_manager.logs.values())

    def shutdown(self) -> None:
        """The process dies: nothing in memory survives; the logs stay with the LogManager."""
        self.alive = False
        self.outbox = []
