"""The fetcher threads: R6 truncation, R7 bookkeeping, R8 the fetch error matrix, R9 resets."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kreplica.impl.cluster import Cluster
from kreplica.impl.config import BrokerConfig
from kreplica.impl.errors import IllegalStateError
from kreplica.impl.fetch_state import FETCHING, TRUNCATING, InitialFetchState
from kreplica.impl.log import Log
from kreplica.impl.messages import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEndOffset,
    Errors,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    LogEntry,
    Message,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    TopicPartition,
)
from kreplica.impl.replica_fetcher import ReplicaFetcherThread
from kreplica.impl.variants import Variant

TP = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)
BACKOFF = 1_000


class Harness:
    """Broker 2 follows broker 1 for every partition; responses are written by hand."""

    def __init__(self, partitions: int = 1, variant: Variant | None = None) -> None:
        self.cluster = Cluster(
            (1, 2),
            topics={"t": partitions},
            replication_factor=2,
            variant=variant,
            assignment={TopicPartition("t", p): (1, 2) for p in range(partitions)},
        )
        fetcher = self.cluster.broker(2).replica_manager.replica_fetcher_manager.fetcher_for(1)
        assert fetcher is not None
        self.fetcher: ReplicaFetcherThread = fetcher
        self.answered: list[Message] = []
        """What the fetcher sent at once on the last fetch answer (an R9 reset's request)."""

    def log(self, tp: TopicPartition = TP) -> Log:
        log = self.cluster.log(2, tp)
        assert log is not None
        return log

    def state(self, tp: TopicPartition = TP):  # type: ignore[no-untyped-def]
        return self.fetcher.fetch_state(tp)

    def work(self) -> Message | None:
        out = self.fetcher.do_work()
        return out[0] if out else None

    def follower_log(self, *entries: tuple[int, int, int], hw: int = 0) -> None:
        self.log().append_as_follower(tuple(LogEntry(*e) for e in entries))
        self.log().update_high_watermark(hw)
        # the fetcher starts Truncating at the HW (as make_followers does)
        self.fetcher.partition_states.remove(TP)
        self.fetcher.add_partitions({TP: InitialFetchState(1, 0, hw)})

    def ole(self, *answers: EpochEndOffset) -> None:
        request = self.work()
        assert isinstance(request, OffsetsForLeaderEpochRequest)
        self.fetcher.handle_response(OffsetsForLeaderEpochResponse(request.correlation_id, answers))

    def fetch_response(self, *partitions: FetchPartitionResponse, error: Errors = Errors.NONE):  # type: ignore[no-untyped-def]
        request = self.work()
        assert isinstance(request, FetchRequest), request
        self.answered = self.fetcher.handle_response(
            FetchResponse(request.correlation_id, error, partitions)
        )
        return request

    def start_fetching(self) -> None:
        """Empty follower: the first do_work truncates to the HW without asking the leader."""
        request = self.work()
        assert isinstance(request, FetchRequest)
        self.fetcher.in_flight = None  # forget it; tests send their own


def data(
    tp: TopicPartition = TP,
    error: Errors = Errors.NONE,
    hw: int = 0,
    log_start: int = 0,
    records: tuple[LogEntry, ...] = (),
) -> FetchPartitionResponse:
    return FetchPartitionResponse(tp, error, hw, hw, log_start, records)


def eeo(
    epoch: int, offset: int, error: Errors = Errors.NONE, tp: TopicPartition = TP
) -> EpochEndOffset:
    return EpochEndOffset(tp, error, epoch, offset)


# ------------------------------------------------------------------------------------- R6


def test_r6_case_a_undefined_offset_truncates_to_hw() -> None:
    h = Harness()
    h.follower_log((0, 0, 1), (1, 0, 2), (2, 1, 3), hw=1)
    h.ole(eeo(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET))
    assert h.log().record_ids() == [1]
    assert (h.state().state, h.state().fetch_offset) == (FETCHING, 1)


def test_r6_case_b_old_protocol_answer_truncates_to_min_of_offset_and_leo() -> None:
    h = Harness()
    h.follower_log((0, 0, 1), (1, 0, 2), (2, 1, 3), hw=0)
    h.ole(eeo(UNDEFINED_EPOCH, 2))
    assert h.log().record_ids() == [1, 2]
    assert (h.state().state, h.state().fetch_offset) == (FETCHING, 2)


def test_r6_case_c_epoch_unknown_to_follower_truncates_to_leader_offset() -> None:
    h = Harness()
    h.follower_log((0, 0, 1), (1, 0, 2), (2, 0, 3), hw=0)
    h.ole(eeo(2, 2))  # the follower's cache ends at epoch 0: its answer for 2 is UNDEF
    assert h.log().record_ids() == [1, 2]
    assert (h.state().state, h.state().fetch_offset) == (FETCHING, 2)


def test_r6_case_d_different_epoch_truncates_and_asks_again() -> None:
    h = Harness()
    h.follower_log((0, 1, 1), (1, 2, 2), (2, 4, 3), (3, 4, 4), hw=0)
    h.ole(eeo(3, 3))  # follower: largest epoch <= 3 is 2, ending at 2
    assert h.log().record_ids() == [1, 2]
    assert (h.state().state, h.state().fetch_offset) == (TRUNCATING, 2)
    request = h.work()
    assert isinstance(request, OffsetsForLeaderEpochRequest)
    assert request.partitions[0].leader_epoch == 2  # the follower's new latest epoch


def test_r6_case_e_same_epoch_truncates_to_min_and_completes() -> None:
    h = Harness()
    h.follower_log((0, 1, 1), (1, 1, 2), (2, 2, 3), (3, 2, 4), hw=0)
    h.ole(eeo(1, 3))  # follower's epoch 1 ends at 2: min(3, 2, 4) = 2
    assert h.log().record_ids() == [1, 2]
    assert (h.state().state, h.state().fetch_offset) == (FETCHING, 2)


def test_r6_truncation_at_or_above_leo_is_a_noop() -> None:
    h = Harness()
    h.follower_log((0, 1, 1), (1, 1, 2), hw=0)
    h.ole(eeo(1, 5))
    assert h.log().record_ids() == [1, 2]
    assert (h.state().state, h.state().fetch_offset) == (FETCHING, 2)


# ------------------------------------------------------------------------------------- R7


def test_r7_add_partitions_starts_truncating_and_keeps_same_epoch_state() -> None:
    h = Harness(partitions=2)
    h.start_fetching()
    fetcher = h.fetcher
    assert fetcher.partition_states.partitions() == [TP, TP1]
    fetcher.failed_partitions.add(TP)
    fetcher.add_partitions({TP: InitialFetchState(1, 0, 5)})  # same epoch: untouched
    assert (h.state().state, h.state().fetch_offset) == (FETCHING, 0)
    assert TP not in fetcher.failed_partitions
    assert fetcher.partition_states.partitions() == [TP1, TP]  # moved to the end
    fetcher.add_partitions({TP: InitialFetchState(1, 1, 5)})  # new epoch: truncate again
    assert (h.state().state, h.state().fetch_offset, h.state().current_leader_epoch) == (
        TRUNCATING,
        5,
        1,
    )


def test_r7_partitions_without_an_epoch_truncate_to_hw_without_asking() -> None:
    h = Harness()
    h.follower_log((0, 0, 1), (1, 0, 2), hw=1)
    h.log().leader_epoch_cache.clear()  # e.g. records from before leader epochs existed
    request = h.work()
    assert isinstance(request, FetchRequest)  # no OLE; truncated and fetching at once
    assert h.log().record_ids() == [1]
    assert request.partitions[0].fetch_offset == 1


def test_r7_hw_truncation_variant_never_sends_offsets_for_leader_epoch() -> None:
    h = Harness(variant=Variant(truncation="hw"))
    h.follower_log((0, 0, 1), (1, 0, 2), hw=1)
    assert isinstance(h.work(), FetchRequest)
    assert h.log().record_ids() == [1]


def test_r7_answer_dropped_if_epoch_changed_while_in_flight() -> None:
    h = Harness()
    h.follower_log((0, 0, 1), (1, 0, 2), hw=0)
    request = h.work()
    assert isinstance(request, OffsetsForLeaderEpochRequest)
    h.fetcher.add_partitions({TP: InitialFetchState(1, 1, 0)})  # LeaderAndIsr, new epoch
    h.fetcher.handle_response(OffsetsForLeaderEpochResponse(request.correlation_id, (eeo(0, 0),)))
    assert h.log().record_ids() == [1, 2]
    assert h.state().state is TRUNCATING


def test_r7_answer_for_unrequested_partition_kills_the_fetcher() -> None:
    h = Harness()
    h.follower_log((0, 0, 1), hw=0)
    request = h.work()
    assert isinstance(request, OffsetsForLeaderEpochRequest)
    bogus = OffsetsForLeaderEpochResponse(request.correlation_id, (eeo(0, 0, tp=TP1),))
    with pytest.raises(IllegalStateError):
        h.fetcher.handle_response(bogus)
    # through the broker the exception stops the thread, as in Kafka
    h2 = Harness()
    h2.follower_log((0, 0, 1), hw=0)
    request = h2.work()
    assert isinstance(request, OffsetsForLeaderEpochRequest)
    h2.cluster.broker(2).receive(
        1, 1, OffsetsForLeaderEpochResponse(request.correlation_id, (eeo(0, 0, tp=TP1),))
    )
    assert h2.fetcher.is_running is False
    assert h2.fetcher.do_work() == []


def test_r7_fenced_answer_with_our_epoch_marks_the_partition_failed() -> None:
    h = Harness()
    h.follower_log((0, 0, 1), hw=0)
    h.ole(eeo(-1, -1, error=Errors.FENCED_LEADER_EPOCH))
    assert h.state() is None
    assert TP in h.fetcher.failed_partitions


def test_r7_other_errors_back_off_then_retry() -> None:
    h = Harness()
    h.follower_log((0, 0, 1), hw=0)
    h.ole(eeo(-1, -1, error=Errors.NOT_LEADER_OR_FOLLOWER))
    assert h.state().is_delayed(h.cluster.clock.now_ms)
    assert h.work() is None
    h.cluster.clock.advance(BACKOFF)
    assert isinstance(h.work(), OffsetsForLeaderEpochRequest)


def test_r7_stale_or_duplicate_answers_are_ignored() -> None:
    h = Harness()
    h.follower_log((0, 0, 1), (1, 0, 2), hw=0)
    request = h.work()
    assert isinstance(request, OffsetsForLeaderEpochRequest)
    h.fetcher.handle_response(OffsetsForLeaderEpochResponse(request.correlation_id + 99, ()))
    assert h.fetcher.in_flight is not None
    answer = OffsetsForLeaderEpochResponse(request.correlation_id, (eeo(0, 1),))
    h.fetcher.handle_response(answer)
    h.fetcher.handle_response(answer)  # duplicate: nothing in flight any more
    assert h.log().record_ids() == [1]


# ------------------------------------------------------------------------------------- R8


def test_r8_fetch_appends_advances_offset_and_adopts_leader_hw_and_log_start() -> None:
    h = Harness()
    h.start_fetching()
    records = (LogEntry(0, 0, 1), LogEntry(1, 0, 2))
    h.fetch_response(data(hw=5, records=records))
    assert h.log().record_ids() == [1, 2]
    assert h.log().high_watermark == 2  # min(leader HW 5, own LEO 2)
    assert (h.state().state, h.state().fetch_offset) == (FETCHING, 2)
    h.log().update_high_watermark(2)
    h.fetch_response(data(hw=2, log_start=1))
    assert h.log().log_start_offset == 1


def test_r8_seeded_bug_hw_not_clamped_lets_follower_hw_exceed_leo() -> None:
    h = Harness(variant=Variant(bugs=frozenset({"hw-not-clamped"})))
    h.start_fetching()
    h.fetch_response(data(hw=5, records=(LogEntry(0, 0, 1),)))
    assert h.log().high_watermark == 5 > h.log().log_end_offset


def test_r8_only_ready_partitions_are_fetched_round_robin() -> None:
    h = Harness(partitions=2)
    request = h.work()
    assert isinstance(request, FetchRequest)
    assert [p.tp for p in request.partitions] == [TP, TP1]
    h.fetcher.handle_response(
        FetchResponse(
            request.correlation_id, Errors.NONE, (data(TP, records=(LogEntry(0, 0, 1),)), data(TP1))
        )
    )
    # TP got data and moved to the end of the round-robin order
    request = h.work()
    assert isinstance(request, FetchRequest)
    assert [p.tp for p in request.partitions] == [TP1, TP]
    h.fetcher.handle_response(
        FetchResponse(
            request.correlation_id,
            Errors.NONE,
            (data(TP1, error=Errors.NOT_LEADER_OR_FOLLOWER), data(TP)),
        )
    )
    request = h.work()
    assert isinstance(request, FetchRequest)
    assert [p.tp for p in request.partitions] == [TP]  # TP1 is delayed


def test_r8_response_ignored_if_fetch_offset_changed() -> None:
    h = Harness()
    h.start_fetching()
    request = h.work()
    assert isinstance(request, FetchRequest)
    state = h.fetcher.fetch_state(TP)
    assert state is not None
    # the partition went back to Truncating at 0 while the FETCH was out (a new LeaderAndIsr)
    h.fetcher.partition_states.update(TP, replace(state, fetch_offset=0, state=TRUNCATING))
    h.fetcher.handle_response(
        FetchResponse(request.correlation_id, Errors.NONE, (data(records=(LogEntry(0, 0, 1),)),))
    )
    assert h.log().record_ids() == []


@pytest.mark.parametrize(
    "error",
    [
        Errors.UNKNOWN_LEADER_EPOCH,
        Errors.NOT_LEADER_OR_FOLLOWER,
        Errors.UNKNOWN_TOPIC_OR_PARTITION,
        Errors.KAFKA_STORAGE_ERROR,
    ],
)
def test_r8_retriable_errors_delay_the_partition(error: Errors) -> None:
    h = Harness()
    h.start_fetching()
    h.fetch_response(data(error=error))
    state = h.state()
    assert state is not None and state.state is FETCHING
    assert state.delay_until_ms == h.cluster.clock.now_ms + BACKOFF


def test_r8_fenced_with_our_epoch_marks_failed() -> None:
    h = Harness()
    h.start_fetching()
    h.fetch_response(data(error=Errors.FENCED_LEADER_EPOCH))
    assert h.state() is None and TP in h.fetcher.failed_partitions


def test_r8_corrupt_records_delay_but_do_not_fail() -> None:
    h = Harness()
    h.start_fetching()
    h.fetch_response(data(records=(LogEntry(0, -1, 1),)))  # no leader epoch: corrupt
    state = h.state()
    assert state is not None and state.is_delayed(h.cluster.clock.now_ms)
    assert TP not in h.fetcher.failed_partitions


def test_r8_storage_error_while_appending_marks_failed() -> None:
    h = Harness()
    h.start_fetching()
    request = h.work()
    assert isinstance(request, FetchRequest)
    h.log().offline = True  # the log dir fails while the fetch is in flight
    h.fetcher.handle_response(
        FetchResponse(request.correlation_id, Errors.NONE, (data(records=(LogEntry(0, 0, 1),)),))
    )
    assert h.state() is None and TP in h.fetcher.failed_partitions


def test_r8_storage_error_while_building_the_fetch_delays() -> None:
    h = Harness()
    h.start_fetching()
    h.log().offline = True
    assert h.work() is None
    assert h.state().is_delayed(h.cluster.clock.now_ms)


def test_r8_whole_request_failure_delays_every_partition() -> None:
    h = Harness(partitions=2)
    h.fetch_response(error=Errors.UNKNOWN_SERVER_ERROR)
    now = h.cluster.clock.now_ms
    assert h.state(TP).is_delayed(now) and h.state(TP1).is_delayed(now)


def test_r8_request_timeout_delays_every_partition() -> None:
    h = Harness(partitions=2)
    assert isinstance(h.work(), FetchRequest)
    assert h.work() is None  # one request in flight at a time
    h.cluster.clock.advance(BrokerConfig().replica_socket_timeout_ms)
    assert not h.fetcher.has_work()  # at its deadline: Kafka expires it only after
    h.cluster.clock.advance(1)
    assert h.fetcher.has_work()
    assert h.work() is None  # the timeout is handled
    now = h.cluster.clock.now_ms
    assert h.state(TP).is_delayed(now) and h.state(TP1).is_delayed(now)


# ------------------------------------------------------------------------------------- R9


def out_of_range(h: Harness) -> ListOffsetsRequest:
    """OFFSET_OUT_OF_RANGE: the fetcher asks for the leader's LEO at once, as Kafka's thread
    calls fetchLatestOffsetFromLeader inside processFetchRequest (R9)."""
    h.fetch_response(data(error=Errors.OFFSET_OUT_OF_RANGE))
    [request] = h.answered
    assert isinstance(request, ListOffsetsRequest)
    assert h.work() is None  # it is the request in flight
    return request


def list_offsets_answer(
    h: Harness, request: ListOffsetsRequest, offset: int, error: Errors = Errors.NONE
) -> list[Message]:
    """The leader's answer; the fetcher's next request of the reset, if any."""
    return h.fetcher.handle_response(
        ListOffsetsResponse(
            request.correlation_id, (ListOffsetsPartitionResponse(TP, error, offset, 0),)
        )
    )


def test_r9_leader_leo_below_follower_leo_truncates_to_it() -> None:
    h = Harness()
    h.follower_log((0, 0, 1), (1, 0, 2), (2, 0, 3), hw=3)
    h.ole(eeo(0, 3))
    request = out_of_range(h)
    assert request.partitions[0].timestamp == LATEST_TIMESTAMP
    assert list_offsets_answer(h, request, 1) == []  # the reset is over
    assert h.log().record_ids() == [1]
    assert (h.state().state, h.state().fetch_offset) == (FETCHING, 1)


def test_r9_leader_log_start_above_follower_leo_restarts_the_log() -> None:
    h = Harness()
    h.start_fetching()
    request = out_of_range(h)
    [request] = list_offsets_answer(h, request, 10)  # leader LEO 10 >= follower LEO 0
    assert isinstance(request, ListOffsetsRequest)
    assert request.partitions[0].timestamp == EARLIEST_TIMESTAMP
    list_offsets_answer(h, request, 4)
    assert (h.log().log_start_offset, h.log().log_end_offset) == (4, 4)
    assert (h.state().state, h.state().fetch_offset) == (FETCHING, 4)


def test_r9_leader_log_start_below_follower_leo_fetches_from_leo() -> None:
    h = Harness()
    h.follower_log((0, 0, 1), (1, 0, 2), hw=2)
    h.ole(eeo(0, 2))
    request = out_of_range(h)
    [request] = list_offsets_answer(h, request, 5)
    assert isinstance(request, ListOffsetsRequest)
    list_offsets_answer(h, request, 0)
    assert h.log().record_ids() == [1, 2]
    assert h.state().fetch_offset == 2


def test_r9_fenced_reset_marks_failed_other_errors_delay() -> None:
    h = Harness()
    h.start_fetching()
    request = out_of_range(h)
    list_offsets_answer(h, request, -1, Errors.FENCED_LEADER_EPOCH)
    assert h.state() is None and TP in h.fetcher.failed_partitions
    h2 = Harness()
    h2.start_fetching()
    request = out_of_range(h2)
    list_offsets_answer(h2, request, -1, Errors.UNKNOWN_LEADER_EPOCH)
    assert h2.state().is_delayed(h2.cluster.clock.now_ms)
    assert h2.fetcher.pending_resets == {}


# ---------------------------------------------------- any error fails one partition (#15)


def disk_full(*args: object, **kwargs: object) -> None:
    """A storage error of another type than KafkaStorageError, injected into one log."""
    raise OSError(28, "No space left on device")


def test_any_error_appending_fails_that_partition_and_the_thread_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kafka 2.6.3's AbstractFetcherThread.processFetchRequest catches any Throwable while it
    appends one partition's records: it marks that partition failed and goes on with the rest
    of the answer."""
    h = Harness(partitions=2)
    request = h.work()
    assert isinstance(request, FetchRequest)
    assert {p.tp for p in request.partitions} == {TP, TP1}
    monkeypatch.setattr(h.log(TP), "append_as_follower", disk_full)
    record = (LogEntry(0, 0, 1),)
    h.fetcher.handle_response(
        FetchResponse(
            request.correlation_id,
            Errors.NONE,
            (data(TP, hw=1, records=record), data(TP1, hw=1, records=record)),
        )
    )
    assert h.state(TP) is None and TP in h.fetcher.failed_partitions
    assert h.log(TP1).record_ids() == [1]
    assert (h.state(TP1).state, h.state(TP1).fetch_offset) == (FETCHING, 1)
    assert TP1 not in h.fetcher.failed_partitions
    follow_up = h.work()
    assert isinstance(follow_up, FetchRequest)
    assert [p.tp for p in follow_up.partitions] == [TP1]


def test_any_error_truncating_fails_that_partition(monkeypatch: pytest.MonkeyPatch) -> None:
    """doTruncate catches any Throwable: the partition is marked failed, nothing is raised."""
    h = Harness()
    h.follower_log((0, 0, 1), (1, 0, 2), hw=1)
    monkeypatch.setattr(h.log(), "truncate_to", disk_full)
    h.ole(eeo(0, 1))
    assert h.state() is None and TP in h.fetcher.failed_partitions
    assert h.log().record_ids() == [1, 2]


def test_any_error_in_a_reset_backs_the_partition_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """handleOutOfRangeError catches any Throwable of the reset: the reset ends and the
    partition backs off for replica.fetch.backoff.ms, to try again."""
    h = Harness()
    h.start_fetching()
    request = out_of_range(h)
    [request] = list_offsets_answer(h, request, 10)
    monkeypatch.setattr(h.log(), "truncate_fully_and_start_at", disk_full)
    assert list_offsets_answer(h, request, 4) == []
    state = h.state()
    assert state is not None and state.state is FETCHING
    assert state.delay_until_ms == h.cluster.clock.now_ms + BACKOFF
    assert h.fetcher.pending_resets == {} and TP not in h.fetcher.failed_partitions
