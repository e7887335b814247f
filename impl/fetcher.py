"""AbstractFetcherThread as a sans-IO state machine (R6-R9); `replica_fetcher` builds on it.

A fetcher thread is an object whose `do_work()` runs one iteration (maybe_truncate, then
maybe_fetch) and RETURNS the request it wants sent to its source broker; `handle_response()`
takes the answer. Kafka's thread blocks on each request, so a fetcher has at most one request in
flight; a request without an answer after replica.socket.timeout.ms fails as a whole, and so does
one whose connection breaks first (`process_disconnection`: its source broker died, or was dead
when it was sent) with no answer on its way, at the next iteration.
Kafka's out-of-range reset (two blocking LIST_OFFSETS calls inside processFetchRequest) becomes a
per-partition pending reset: `handle_response()` returns its next LIST_OFFSETS request at once,
as Kafka's thread makes the call at once, and the reset ends with the last answer.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from kreplica.impl.clock import SimClock
from kreplica.impl.errors import (
    CorruptRecordError,
    IllegalStateError,
    InvalidRecordError,
)
from kreplica.impl.log import LogAppendInfo, OffsetAndEpoch
from kreplica.impl.messages import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    NO_ERROR,
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEndOffset,
    Errors,
    FetchPartitionData,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    Message,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    TopicPartition,
)

if TYPE_CHECKING:
    pass

from kreplica.impl.fetch_state import (
    FETCHING,
    TRUNCATING,
    EpochData,
    InFlight,
    InitialFetchState,
    OffsetReset,
    OffsetTruncationState,
    PartitionFetchState,
    PartitionStates,
)


class AbstractFetcherThread(ABC):
    """The truncate-then-fetch loop of one follower towards one leader (R6, R7, R8, R9)."""

    def __init__(
        self,
        name: str,
        source_broker: int,
        clock: SimClock,
        fetch_backoff_ms: int,
        request_timeout_ms: int,
        failed_partitions: set[TopicPartition],
    ) -> None:
        self.name = name
        self.source_broker = source_broker
        self.clock = clock
        self.fetch_backoff_ms = fetch_backoff_ms
        self.request_timeout_ms = request_timeout_ms
        self.failed_partitions = failed_partitions
        self.partition_states = PartitionStates()
        self.pending_resets: dict[TopicPartition, OffsetReset] = {}
        self.in_flight: InFlight | None = None
        self.is_running = True

    # ------------------------------------------------------------ hooks (ReplicaFetcherThread)

    is_offset_for_leader_epoch_supported = True

    @abstractmethod
    def latest_epoch(self, tp: TopicPartition) -> int | None:
        """The latest epoch in the local epoch cache."""

    @abstractmethod
    def log_end_offset(self, tp: TopicPartition) -> int:
        """The local LEO."""

    @abstractmethod
    def end_offset_for_epoch(self, tp: TopicPartition, epoch: int) -> OffsetAndEpoch | None:
        """The local R3 answer for epoch (None for UNDEF)."""

    @abstractmethod
    def truncate(self, tp: TopicPartition, state: OffsetTruncationState) -> None:
        """Truncate the local log to state.offset."""

    @abstractmethod
    def truncate_fully_and_start_at(self, tp: TopicPartition, offset: int) -> None:
        """Empty the local log and restart it at offset."""

    @abstractmethod
    def process_partition_data(
        self, tp: TopicPartition, fetch_offset: int, data: FetchPartitionResponse
    ) -> LogAppendInfo | None:
        """Append fetched records and adopt the leader's HW and log start (R8)."""

    @abstractmethod
    def build_fetch(
        self, ready: list[tuple[TopicPartition, PartitionFetchState]]
    ) -> tuple[FetchRequest | None, dict[TopicPartition, FetchPartitionData], set[TopicPartition]]:
        """A FETCH for the ready partitions, the per-partition data sent and the failed ones."""

    @abstractmethod
    def build_offsets_for_leader_epoch(
        self, partitions: dict[TopicPartition, EpochData]
    ) -> OffsetsForLeaderEpochRequest:
        """An OFFSETS_FOR_LEADER_EPOCH request for the truncating partitions."""

    @abstractmethod
    def build_list_offsets(self, reset: OffsetReset) -> ListOffsetsRequest:
        """A LIST_OFFSETS request for one partition being reset."""

    # ---------------------------------------------------------------------------- do_work

    def has_work(self) -> bool:
        """True if do_work() would do something now (send, fail a request or truncate)."""
        if not self.is_running:
            return False
        now = self.clock.now_ms
        in_flight = self.in_flight
        if in_flight is not None:
            return in_flight.failed(now)
        pending = self.pending_resets
        for tp, state in self.partition_states._map.items():
            if tp in pending or (state.delay_until_ms is not None and state.delay_until_ms > now):
                continue
            return True
        return False

    def next_wakeup_ms(self) -> int | None:
        """The earliest time at which has_work() may become true by itself (now for a request
        whose connection broke: it fails at once)."""
        if not self.is_running:
            return None
        if self.in_flight is not None:
            if self.in_flight.disconnected:
                return self.clock.now_ms
            return self.in_flight.deadline_ms + 1  # the first instant it has failed
        delays = [
            s.delay_until_ms
            for s in self.partition_states._map.values()
            if s.delay_until_ms is not None and s.delay_until_ms > self.clock.now_ms
        ]
        return min(delays) if delays else None

    def do_work(self) -> list[Message]:
        """One iteration: fail the request in flight (timed out or disconnected), or else
        reset, truncate, fetch (R7, R8)."""
        if not self.is_running:
            return []
        in_flight = self.in_flight
        if in_flight is not None:
            if not in_flight.failed(self.clock.now_ms):
                return []
            self.in_flight = None
            self._handle_request_failure(in_flight)
            return []
        out = self.maybe_truncate()
        if out:
            return out
        return self.maybe_fetch()

    def handle_response(self, response: Message) -> list[Message]:
        """Take the answer to the in-flight request (stale or duplicate answers are ignored);
        return the LIST_OFFSETS request of an out-of-range reset it starts or goes on with (R9)."""
        in_flight = self.in_flight
        if in_flight is None or getattr(response, "correlation_id", None) != (
            in_flight.correlation_id
        ):
            return []
        self.in_flight = None
        if isinstance(response, FetchResponse) and in_flight.session is not None:
            self.process_fetch_response(in_flight.session, response)
        elif isinstance(response, OffsetsForLeaderEpochResponse) and in_flight.epochs is not None:
            self.truncate_to_epoch_end_offsets(in_flight.epochs, response)
        elif isinstance(response, ListOffsetsResponse) and in_flight.reset is not None:
            self._handle_list_offsets_response(in_flight.reset, response)
        else:
            raise IllegalStateError(f"unexpected response {type(response).__name__}")
        return self._maybe_reset_offsets()

    def _send(
        self,
        request: FetchRequest | OffsetsForLeaderEpochRequest | ListOffsetsRequest,
        epochs: dict[TopicPartition, EpochData] | None = None,
        session: dict[TopicPartition, FetchPartitionData] | None = None,
        reset: OffsetReset | None = None,
    ) -> list[Message]:
        self.in_flight = InFlight(
            request.correlation_id,
            self.clock.now_ms + self.request_timeout_ms,
            request,
            epochs,
            session,
            reset,
        )
        return [request]

    def process_disconnection(self, answers_on_the_way: Collection[int]) -> None:
        """NetworkClient.processDisconnection (R8): the connection to the source broker broke;
        unless its answer (a correlation id in `answers_on_the_way`) was sent before, the
        request in flight fails at the next iteration, as sendAndReceive throws on it."""
        in_flight = self.in_flight
        if in_flight is not None and in_flight.correlation_id not in answers_on_the_way:
            in_flight.disconnected = True

    def _handle_request_failure(self, in_flight: InFlight) -> None:
        """A request without an answer (timed out or disconnected, processFetchRequest's catch
        of Throwable): every partition it concerned backs off (R8)."""
        if in_flight.session is not None:
            self.handle_partitions_with_errors(self.partition_states.partitions())
        elif in_flight.epochs is not None:
            failed = []
            for tp, data in in_flight.epochs.items():
                state = self.partition_states.state_value(tp)
                if state is not None and state.current_leader_epoch == data.current_leader_epoch:
                    failed.append(tp)
            self.handle_partitions_with_errors(failed)
        elif in_flight.reset is not None:
            reset = in_flight.reset
            if self.pending_resets.get(reset.tp) is reset:
                del self.pending_resets[reset.tp]
                self.handle_partitions_with_errors([reset.tp])

    # ------------------------------------------------------------------------- truncation

    def fetch_truncating_partitions(
        self,
    ) -> tuple[dict[TopicPartition, EpochData], list[TopicPartition]]:
        """Split Truncating, non-delayed partitions into those with a latest epoch and the rest."""
        now = self.clock.now_ms
        with_epochs: dict[TopicPartition, EpochData] = {}
        without_epochs: list[TopicPartition] = []
        pending = self.pending_resets
        for tp, state in self.partition_states._map.items():
            if (
                state.state is not TRUNCATING
                or (state.delay_until_ms is not None and state.delay_until_ms > now)
                or tp in pending
            ):
                continue
            epoch = self.latest_epoch(tp)
            if epoch is not None and self.is_offset_for_leader_epoch_supported:
                with_epochs[tp] = EpochData(state.current_leader_epoch, epoch)
            else:
                without_epochs.append(tp)
        return with_epochs, without_epochs

    def maybe_truncate(self) -> list[Message]:
        """Truncate epoch-less partitions to their HW; send one OLE request for the others (R7)."""
        with_epochs, without_epochs = self.fetch_truncating_partitions()
        if without_epochs:
            self.truncate_to_high_watermark(without_epochs)
        if with_epochs:
            return self._send(self.build_offsets_for_leader_epoch(with_epochs), epochs=with_epochs)
        return []

    def truncate_to_high_watermark(self, partitions: Iterable[TopicPartition]) -> None:
        """Truncate each partition to its fetch offset (initially its HW); complete (R6a, R7)."""
        fetch_offsets: dict[TopicPartition, OffsetTruncationState] = {}
        for tp in partitions:
            state = self.partition_states.state_value(tp)
            if state is None:
                continue
            truncation_state = OffsetTruncationState(state.fetch_offset, True)
            if self._do_truncate(tp, truncation_state):
                fetch_offsets[tp] = truncation_state
        self._update_fetch_offset_and_maybe_mark_truncation_complete(fetch_offsets)

    def truncate_to_epoch_end_offsets(
        self,
        requested: dict[TopicPartition, EpochData],
        response: OffsetsForLeaderEpochResponse,
    ) -> None:
        """Apply the leader's OLE answers still relevant to this fetcher (R6, R7)."""
        epoch_end_offsets: dict[TopicPartition, EpochEndOffset] = {}
        for item in response.partitions:
            data = requested.get(item.tp)
            if data is None:
                raise IllegalStateError(
                    f"leader replied with partition {item.tp} not requested in "
                    "OffsetsForLeaderEpoch request"
                )
            state = self.partition_states.state_value(item.tp)
            if state is not None and data.current_leader_epoch == state.current_leader_epoch:
                epoch_end_offsets[item.tp] = item
        fetch_offsets: dict[TopicPartition, OffsetTruncationState] = {}
        with_error: list[TopicPartition] = []
        for tp, item in epoch_end_offsets.items():
            if item.error is Errors.NONE:
                truncation_state = self.get_offset_truncation_state(tp, item)
                if self._do_truncate(tp, truncation_state):
                    fetch_offsets[tp] = truncation_state
            elif item.error is Errors.FENCED_LEADER_EPOCH:
                if self.on_partition_fenced(tp, requested[tp].current_leader_epoch):
                    with_error.append(tp)
            else:
                with_error.append(tp)
        self.handle_partitions_with_errors(with_error)
        self._update_fetch_offset_and_maybe_mark_truncation_complete(fetch_offsets)

    def get_offset_truncation_state(
        self, tp: TopicPartition, leader_epoch_offset: EpochEndOffset
    ) -> OffsetTruncationState:
        """R6 (a)-(e): where to truncate given the leader's (epoch, end offset)."""
        if leader_epoch_offset.end_offset == UNDEFINED_EPOCH_OFFSET:  # (a)
            state = self.partition_states.state_value(tp)
            assert state is not None
            return OffsetTruncationState(state.fetch_offset, True)
        replica_end_offset = self.log_end_offset(tp)
        if leader_epoch_offset.leader_epoch == UNDEFINED_EPOCH:  # (b)
            return OffsetTruncationState(
                min(leader_epoch_offset.end_offset, replica_end_offset), True
            )
        follower = self.end_offset_for_epoch(tp, leader_epoch_offset.leader_epoch)
        if follower is None:  # (c)
            return OffsetTruncationState(
                min(leader_epoch_offset.end_offset, replica_end_offset), True
            )
        if follower.leader_epoch != leader_epoch_offset.leader_epoch:  # (d)
            return OffsetTruncationState(min(follower.offset, replica_end_offset), False)
        offset = min(follower.offset, leader_epoch_offset.end_offset, replica_end_offset)  # (e)
        return OffsetTruncationState(offset, True)

    def _do_truncate(self, tp: TopicPartition, truncation_state: OffsetTruncationState) -> bool:
        """Truncate tp; any error fails tp alone, and the thread goes on (doTruncate)."""
        try:
            self.truncate(tp, truncation_state)
            return True
        except Exception:
            self.mark_partition_failed(tp)
            return False

    def _update_fetch_offset_and_maybe_mark_truncation_complete(
        self, fetch_offsets: dict[TopicPartition, OffsetTruncationState]
    ) -> None:
        for tp, truncation_state in fetch_offsets.items():
            state = self.partition_states.state_value(tp)
            if state is None:
                continue
            new_state = FETCHING if truncation_state.truncation_completed else TRUNCATING
            self.partition_states.update(
                tp,
                PartitionFetchState(
                    truncation_state.offset,
                    state.lag,
                    state.current_leader_epoch,
                    state.delay_until_ms,
                    new_state,
                ),
            )

    # ------------------------------------------------------------------------------ fetch

    def maybe_fetch(self) -> list[Message]:
        """Send one FETCH for the ready partitions; nothing if none is ready (R8)."""
        now = self.clock.now_ms
        pending = self.pending_resets
        ready = [
            (tp, state)
            for tp, state in self.partition_states._map.items()
            if state.state is FETCHING
            and (state.delay_until_ms is None or state.delay_until_ms <= now)
            and tp not in pending
        ]
        if not ready:
            return []
        request, session, with_error = self.build_fetch(ready)
        if with_error:
            # in round-robin order: a set of TopicPartitions iterates in PYTHONHASHSEED order
            self.handle_partitions_with_errors([tp for tp, _ in ready if tp in with_error])
        if request is None:
            return []
        return self._send(request, session=session)

    def process_fetch_response(
        self, session: dict[TopicPartition, FetchPartitionData], response: FetchResponse
    ) -> None:
        """Handle every partition of a FETCH answer with the error matrix of R8."""
        with_error: list[TopicPartition] = []
        if response.error is not NO_ERROR:
            self.handle_partitions_with_errors(self.partition_states.partitions())
            return
        now = self.clock.now_ms
        states = self.partition_states
        state_map = states._map
        pending = self.pending_resets
        for data in response.partitions:
            tp = data.tp
            current = state_map.get(tp)
            if current is None:
                continue
            sent = session.get(tp)
            if (
                sent is None
                or sent.fetch_offset != current.fetch_offset
                or current.state is not FETCHING
                or (current.delay_until_ms is not None and current.delay_until_ms > now)
                or tp in pending
            ):
                continue
            request_epoch = sent.current_leader_epoch
            error = data.error
            if error is NO_ERROR:
                try:
                    info = self.process_partition_data(tp, current.fetch_offset, data)
                except (CorruptRecordError, InvalidRecordError):
                    with_error.append(tp)
                    continue
                except Exception:  # KafkaStorageException or any other Throwable: this tp only
                    self.mark_partition_failed(tp)
                    continue
                if info is not None and info.valid_bytes > 0 and tp in state_map:
                    next_offset = info.last_offset + 1
                    lag = max(0, data.high_watermark - next_offset)
                    states.update_and_move_to_end(
                        tp,
                        PartitionFetchState(
                            next_offset, lag, current.current_leader_epoch, None, FETCHING
                        ),
                    )
            elif error is Errors.OFFSET_OUT_OF_RANGE:
                self.handle_out_of_range_error(tp, current, request_epoch)
            elif error is Errors.FENCED_LEADER_EPOCH:
                if self.on_partition_fenced(tp, request_epoch):
                    with_error.append(tp)
            else:
                # UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER and anything else: back off
                with_error.append(tp)
        if with_error:
            self.handle_partitions_with_errors(with_error)

    # ------------------------------------------------------------------- out of range (R9)

    def handle_out_of_range_error(
        self, tp: TopicPartition, state: PartitionFetchState, request_epoch: int | None
    ) -> None:
        """Start the R9 reset: ask the leader for its LEO (then maybe its log start)."""
        self.pending_resets[tp] = OffsetReset(tp, state.current_leader_epoch, request_epoch)

    def _maybe_reset_offsets(self) -> list[Message]:
        for tp, reset in list(self.pending_resets.items()):
            state = self.partition_states.state_value(tp)
            if state is None or state.current_leader_epoch != reset.leader_epoch:
                del self.pending_resets[tp]
                continue
            return self._send(self.build_list_offsets(reset), reset=reset)
        return []

    def _handle_list_offsets_response(
        self, reset: OffsetReset, response: ListOffsetsResponse
    ) -> None:
        tp = reset.tp
        state = self.partition_states.state_value(tp)
        if (
            state is None
            or state.current_leader_epoch != reset.leader_epoch
            or self.pending_resets.get(tp) is not reset
        ):
            return
        item = next((p for p in response.partitions if p.tp == tp), None)
        if item is None or item.error is not Errors.NONE:
            del self.pending_resets[tp]
            if item is not None and item.error is Errors.FENCED_LEADER_EPOCH:
                if self.on_partition_fenced(tp, reset.request_epoch):
                    self.handle_partitions_with_errors([tp])
            else:
                self.handle_partitions_with_errors([tp])
            return
        try:
            replica_end_offset = self.log_end_offset(tp)
            if reset.phase == LATEST_TIMESTAMP:
                leader_end_offset = item.offset
                if leader_end_offset >= replica_end_offset:
                    reset.phase = EARLIEST_TIMESTAMP
                    reset.leader_end_offset = leader_end_offset
                    return
                self.truncate(tp, OffsetTruncationState(leader_end_offset, True))
                new_state = PartitionFetchState(
                    leader_end_offset, 0, state.current_leader_epoch, None, FETCHING
                )
            else:
                leader_start_offset = item.offset
                offset_to_fetch = max(leader_start_offset, replica_end_offset)
                if leader_start_offset > replica_end_offset:
                    self.truncate_fully_and_start_at(tp, leader_start_offset)
                new_state = PartitionFetchState(
                    offset_to_fetch,
                    max(0, reset.leader_end_offset - offset_to_fetch),
                    state.current_leader_epoch,
                    None,
                    FETCHING,
                )
        except Exception:  # handleOutOfRangeError: any Throwable backs tp off
            del self.pending_resets[tp]
            self.handle_partitions_with_errors([tp])
            return
        del self.pending_resets[tp]
        self.partition_states.update_and_move_to_end(tp, new_state)

    # ----------------------------------------------------------------------- bookkeeping

    def on_partition_fenced(self, tp: TopicPartition, request_epoch: int | None) -> bool:
        """FENCED: mark failed if our epoch is the one sent (await LeaderAndIsr), else retry."""
        state = self.partition_states.state_value(tp)
        if state is None:
            return False
        if request_epoch is not None and request_epoch == state.current_leader_epoch:
            self.mark_partition_failed(tp)
            return False
        return True

    def handle_partitions_with_errors(self, partitions: Iterable[TopicPartition]) -> None:
        """Back off every listed partition for fetch_backoff_ms."""
        self.delay_partitions(partitions, self.fetch_backoff_ms)

    def delay_partitions(self, partitions: Iterable[TopicPartition], delay_ms: int) -> None:
        """Delay partitions that are not already delayed; they move to the end of the order."""
        now = self.clock.now_ms
        for tp in partitions:
            state = self.partition_states.state_value(tp)
            if state is not None and not state.is_delayed(now):
                self.partition_states.update_and_move_to_end(
                    tp, replace(state, delay_until_ms=now + delay_ms)
                )

    def mark_partition_failed(self, tp: TopicPartition) -> None:
        """Stop fetching tp and remember it as failed until it is added again."""
        self.failed_partitions.add(tp)
        self.remove_partitions([tp])

    def add_partitions(self, initial_fetch_states: dict[TopicPartition, InitialFetchState]) -> None:
        """R7: Truncating at the initial offset, unless already tracked with the same epoch."""
        for tp in initial_fetch_states:
            self.failed_partitions.discard(tp)
        for tp, initial in initial_fetch_states.items():
            current = self.partition_states.state_value(tp)
            if current is not None and current.current_leader_epoch == initial.leader_epoch:
                updated = current
            else:
                self.pending_resets.pop(tp, None)
                updated = PartitionFetchState(
                    initial.offset, None, initial.leader_epoch, None, TRUNCATING
                )
            self.partition_states.update_and_move_to_end(tp, updated)

    def remove_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop tracking partitions."""
        for tp in partitions:
            self.partition_states.remove(tp)
            self.pending_resets.pop(tp, None)

    def fetch_state(self, tp: TopicPartition) -> PartitionFetchState | None:
        """The fetch state of tp, if tracked."""
        return self.partition_states.state_value(tp)

    def partition_count(self) -> int:
        """How many partitions this fetcher tracks."""
        return len(self.partition_states)
