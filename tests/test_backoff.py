"""A follower's fetch back-off judged at each fetcher iteration (conformance/judges/backoff.py),
on a real cluster."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kreplica.conformance.bridge.projection import CLIENT, CONTROLLER
from kreplica.conformance.bridge.recorder import SpecRecorder
from kreplica.conformance.fuzz.setup import FuzzSetup
from kreplica.conformance.judges.backoff import (
    NAME,
    FetcherView,
    answer_violations,
    backoff_violations,
    deadline_violations,
    fetcher_view,
    wakeup_violations,
)
from kreplica.conformance.judges.checked_steps import Judge, apply_checked
from kreplica.conformance.replay.schedule import TP as FUZZ_TP
from kreplica.impl.cluster import START_TIME_MS as T0
from kreplica.impl.cluster import Cluster
from kreplica.impl.config import BrokerConfig
from kreplica.impl.fetch_state import FETCHING, InFlight, OffsetReset, PartitionFetchState
from kreplica.impl.fetcher import AbstractFetcherThread
from kreplica.impl.messages import (
    Errors,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    IsolationLevel,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    TopicPartition,
)
from kreplica.impl.steps import (
    Crash,
    Deliver,
    DoWork,
    Drop,
    Elect,
    Heal,
    Isolate,
    Produce,
    Restart,
    ShrinkIsr,
    Step,
    Tick,
    UncleanShutdown,
)

TP = TopicPartition("t", 0)
TP_FUZZ = FUZZ_TP
CONFIG = BrokerConfig(replica_fetch_wait_max_ms=0)
BACKOFF = CONFIG.replica_fetch_backoff_ms
TIMEOUT = CONFIG.replica_socket_timeout_ms


def recorder() -> Judge:
    """Two brokers, broker 1 leading, follower 2 fetching from it."""
    return Judge(SpecRecorder(Cluster((1, 2), {"t": 1}, config=CONFIG), TP, {}))


def checked(judged: Judge, *steps: Step) -> None:
    for step in steps:
        assert apply_checked(judged, step) is None, step


def lost_fetch(judged: Judge) -> None:
    """Follower 2's fetch is lost, and its request times out at the next iteration."""
    checked(judged, DoWork(2, 1), Drop(2, 1, 0), Tick(TIMEOUT + 1))


def test_a_lost_fetch_backs_off_then_fetches_again() -> None:
    """The request times out: the partition waits replica.fetch.backoff.ms, and is fetched
    again as soon as it is due; every iteration is judged."""
    judged = recorder()
    lost_fetch(judged)
    checked(judged, DoWork(2, 1))  # the time-out: backs off
    view = fetcher_view(judged.recorder.cluster, 2, 1)
    assert view is not None and view.states[TP].delay_until_ms == view.now_ms + BACKOFF
    checked(judged, DoWork(2, 1))  # still delayed: nothing to do, rightly
    assert judged.recorder.sent == []
    checked(judged, Tick(BACKOFF), DoWork(2, 1))  # due at exactly the deadline
    assert [type(e.payload).__name__ for e in judged.recorder.sent] == ["FetchRequest"]
    checked(judged, Deliver(2, 1, 0))


def test_no_back_off_after_a_timeout_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    judged = recorder()
    lost_fetch(judged)
    monkeypatch.setattr(AbstractFetcherThread, "_handle_request_failure", lambda self, f: None)
    found = apply_checked(judged, DoWork(2, 1))
    assert found is not None and found[0] == NAME
    assert f"expected {judged.recorder.cluster.clock.now_ms + BACKOFF}" in found[1]


def test_an_idle_iteration_with_a_ready_partition_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    judged = recorder()
    checked(judged, DoWork(2, 1), Deliver(2, 1, 0), Deliver(1, 2, 0))  # truncated, fetching
    monkeypatch.setattr(AbstractFetcherThread, "maybe_fetch", lambda self: [])
    found = apply_checked(judged, DoWork(2, 1))
    assert found is not None and found[0] == NAME and "did nothing" in found[1]


def test_a_request_sent_with_a_deadline_other_than_the_time_out_is_named() -> None:
    """A fetcher whose requests time out at once (a deadline in the past, as if it had waited
    replica.socket.timeout.ms already) is named at the iteration that sends one, before it
    can give up on it early; so is one that would wait longer."""
    for timeout in (-TIMEOUT, TIMEOUT + 1):
        judged = recorder()
        fetcher = judged.recorder.cluster.brokers[
            2
        ].replica_manager.replica_fetcher_manager.fetcher_for(1)
        assert fetcher is not None
        fetcher.request_timeout_ms = timeout
        found = apply_checked(judged, DoWork(2, 1))
        now = judged.recorder.cluster.clock.now_ms
        assert found is not None and found[0] == NAME
        assert f"times out at {now + timeout}, expected {now + TIMEOUT}" in found[1]


def test_a_request_sent_on_an_answer_gets_its_deadline_too() -> None:
    """The LIST_OFFSETS of a reset goes out as the FETCH answer arrives (views made by hand):
    a new request in flight is judged by its deadline, the one awaited before is not."""
    before, _ = in_flight_fetch()
    assert before.in_flight is not None
    sent = replace(before.in_flight, correlation_id=before.in_flight.correlation_id + 1)
    for deadline, found in ((before.now_ms + TIMEOUT, False), (before.now_ms - 1, True)):
        after = replace(before, in_flight=replace(sent, deadline_ms=deadline))
        assert bool(deadline_violations(before, after, TIMEOUT)) is found
    early = replace(before.in_flight, deadline_ms=before.now_ms - 1)
    still = replace(before, in_flight=early)
    assert deadline_violations(still, still, TIMEOUT) == []  # judged when it was sent


def test_a_fetch_of_a_delayed_partition_is_named() -> None:
    """A request naming a partition whose back-off has not ended (views made by hand)."""
    judged = recorder()
    lost_fetch(judged)
    checked(judged, DoWork(2, 1))
    view = fetcher_view(judged.recorder.cluster, 2, 1)
    assert view is not None
    checked(judged, Tick(BACKOFF), DoWork(2, 1))
    request = judged.recorder.sent[0].payload
    assert backoff_violations(view, view, [request], BACKOFF) != []  # before the deadline
    due = replace(view, now_ms=view.now_ms + BACKOFF)
    assert backoff_violations(due, due, [request], BACKOFF) == []


def in_flight_fetch() -> tuple[FetcherView, FetchResponse]:
    """Follower 2 with a FETCH in flight, and a NOT_LEADER_OR_FOLLOWER answer to it."""
    judged = recorder()
    checked(judged, DoWork(2, 1), Deliver(2, 1, 0), Deliver(1, 2, 0), DoWork(2, 1))
    view = fetcher_view(judged.recorder.cluster, 2, 1)
    assert view is not None and view.in_flight is not None
    refused = FetchPartitionResponse(TP, Errors.NOT_LEADER_OR_FOLLOWER, -1, -1, -1, ())
    return view, FetchResponse(view.in_flight.correlation_id, Errors.NONE, (refused,))


def test_an_error_answer_backs_the_partition_off() -> None:
    """processFetchRequest: a partition that comes back with an error waits
    replica.fetch.backoff.ms; one that does not (or waits another time) is named."""
    before, answer = in_flight_fetch()
    state = before.states[TP]
    due = replace(state, delay_until_ms=before.now_ms + BACKOFF)
    backed_off = replace(before, in_flight=None, states={TP: due})
    assert answer_violations(before, backed_off, answer, BACKOFF) == []
    for wrong in (None, before.now_ms, before.now_ms + BACKOFF + 1):
        after = replace(before, in_flight=None, states={TP: replace(state, delay_until_ms=wrong)})
        [(name, reason)] = answer_violations(before, after, answer, BACKOFF)
        assert name == NAME and f"NOT_LEADER_OR_FOLLOWER) delayed until {wrong}" in reason
    ok = replace(answer, partitions=(replace(answer.partitions[0], error=Errors.NONE),))
    assert answer_violations(before, before, ok, BACKOFF) == []  # no error: no back-off


def test_a_fetcher_that_ignores_an_error_answer_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a real cluster, checked as the fuzzer checks: the follower's FETCH is answered
    NOT_LEADER_OR_FOLLOWER (by hand, as a deposed leader would), and its fetcher does not
    back off."""
    judged = recorder()
    checked(judged, DoWork(2, 1), Deliver(2, 1, 0), Deliver(1, 2, 0), DoWork(2, 1))
    view = fetcher_view(judged.recorder.cluster, 2, 1)
    assert view is not None and view.in_flight is not None
    monkeypatch.setattr(AbstractFetcherThread, "handle_partitions_with_errors", lambda s, p: None)
    request = judged.recorder.cluster.network.queues[(2, 1)].popleft()  # answered by hand: an error
    refused = FetchPartitionResponse(TP, Errors.NOT_LEADER_OR_FOLLOWER, -1, -1, -1, ())
    answer = FetchResponse(request.payload.correlation_id, Errors.NONE, (refused,))
    c = judged.recorder.cluster
    c.network.send(1, c.incarnation(1), 2, c.incarnation(2), answer, c.clock.now_ms)
    found = apply_checked(judged, Deliver(1, 2, 0))
    assert found is not None and found[0] == NAME and "NOT_LEADER_OR_FOLLOWER" in found[1]


def test_an_answer_to_an_earlier_incarnation_is_not_judged() -> None:
    """Follower 3 fetches, crashes and restarts, and fetches again with the same correlation id:
    the answer to its first incarnation is dropped on arrival, so no back-off is owed for it
    (found by the fuzzer, seed 0, once its tick could land on a deadline)."""
    judged = Judge(SpecRecorder(FuzzSetup().schedule().cluster(), TP_FUZZ, {}))
    checked(judged, Tick(30_001), ShrinkIsr(1), Crash(1), Restart(1), DoWork(3, 1), Crash(3))
    checked(judged, Deliver(3, 1, 0), Restart(3), Deliver(0, 3, 0), DoWork(3, 1))
    stale = judged.recorder.cluster.network.peek((1, 3), 0)
    assert stale is not None and stale.dst_incarnation != judged.recorder.cluster.incarnation(3)
    checked(judged, Deliver(1, 3, 0))


def test_a_timed_out_reset_of_an_untracked_partition_owes_no_back_off() -> None:
    """A LIST_OFFSETS of a reset times out after its partition left the fetcher: nothing is
    left to back off, and the judge says so rather than failing on the missing state."""
    reset = OffsetReset(TP, 0, 0)
    request = ListOffsetsRequest(7, 2, IsolationLevel.READ_UNCOMMITTED, ())
    flight = InFlight(7, 1_000, request, reset=reset)
    before = FetcherView(1_001, True, flight, {}, frozenset({TP}))  # its deadline has passed
    after = FetcherView(1_001, True, None, {}, frozenset({TP}))
    assert backoff_violations(before, after, [], BACKOFF) == []
    at_the_deadline = replace(before, now_ms=1_000)  # Kafka expires it only after the deadline
    assert backoff_violations(at_the_deadline, after, [], BACKOFF) != []


def epoch_answer_in_flight() -> Judge:
    """Follower 2 holds a record of epoch 0; leader 1 is re-elected (epoch 1) and follower 2
    hears of it first, so its OffsetsForLeaderEpoch (current epoch 1) reaches a leader still
    in epoch 0: the answer on its way back is UNKNOWN_LEADER_EPOCH."""
    judged = recorder()
    checked(judged, Produce(TP, (1,), acks=1), Deliver(CLIENT, 1, 0))
    checked(judged, DoWork(2, 1), Deliver(2, 1, 0), Deliver(1, 2, 0))  # replicated
    checked(judged, Elect(TP, 1), Deliver(CONTROLLER, 2, 0), DoWork(2, 1), Deliver(2, 1, 0))
    answer = judged.recorder.cluster.network.peek((1, 2), 0)
    assert answer is not None and answer.payload.partitions[0].error is Errors.UNKNOWN_LEADER_EPOCH
    return judged


def test_an_epoch_answer_with_an_error_backs_the_partition_off() -> None:
    """truncateToEpochEndOffsets: a partition answered with an error (not a fenced epoch)
    waits replica.fetch.backoff.ms, still Truncating."""
    judged = epoch_answer_in_flight()
    checked(judged, Deliver(1, 2, 0))
    view = fetcher_view(judged.recorder.cluster, 2, 1)
    assert view is not None and view.states[TP].delay_until_ms == view.now_ms + BACKOFF


def test_a_fetcher_that_ignores_an_epoch_answer_error_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    judged = epoch_answer_in_flight()
    monkeypatch.setattr(AbstractFetcherThread, "handle_partitions_with_errors", lambda s, p: None)
    found = apply_checked(judged, Deliver(1, 2, 0))
    assert found is not None and found[0] == NAME
    assert "an OffsetsForLeaderEpoch answer" in found[1] and "UNKNOWN_LEADER_EPOCH" in found[1]


def reset_in_flight(request_epoch: int = 0) -> tuple[FetcherView, ListOffsetsResponse]:
    """Follower 2's out-of-range reset (epoch 0) awaits its LIST_OFFSETS answer (views made
    by hand), and the answer: NOT_LEADER_OR_FOLLOWER."""
    reset = OffsetReset(TP, 0, request_epoch)
    request = ListOffsetsRequest(7, 2, IsolationLevel.READ_UNCOMMITTED, ())
    state = PartitionFetchState(5, 0, 0, None, FETCHING)
    before = FetcherView(
        1_000, True, InFlight(7, 31_000, request, reset=reset), {TP: state}, frozenset({TP})
    )
    refused = ListOffsetsPartitionResponse(TP, Errors.NOT_LEADER_OR_FOLLOWER, -1, -1)
    return before, ListOffsetsResponse(7, (refused,))


def test_an_error_answer_to_a_reset_ends_it_and_backs_off() -> None:
    """handleOutOfRangeError: the reset ends and its partition waits; a reset that goes on,
    or a partition that does not wait, is named."""
    before, answer = reset_in_flight()
    state = before.states[TP]
    waits = {TP: replace(state, delay_until_ms=1_000 + BACKOFF)}
    assert (
        answer_violations(
            before,
            replace(before, in_flight=None, states=waits, pending_resets=frozenset()),
            answer,
            BACKOFF,
        )
        == []
    )
    goes_on = replace(before, in_flight=None, states=waits)
    [(name, reason)] = answer_violations(before, goes_on, answer, BACKOFF)
    assert name == NAME and "still resetting" in reason
    no_wait = replace(before, in_flight=None, pending_resets=frozenset())
    [(name, reason)] = answer_violations(before, no_wait, answer, BACKOFF)
    assert "NOT_LEADER_OR_FOLLOWER) delayed until None" in reason
    ok = replace(answer, partitions=(replace(answer.partitions[0], error=Errors.NONE),))
    assert answer_violations(before, before, ok, BACKOFF) == []  # no error: judged by the spec


def test_a_fenced_reset_of_the_current_epoch_fails_without_back_off() -> None:
    """onPartitionFenced: a fenced answer to a reset whose FETCH went in the epoch tracked
    now fails the partition (it leaves the fetcher); sent in another epoch, it backs off."""
    before, answer = reset_in_flight(request_epoch=0)
    fenced = replace(
        answer, partitions=(replace(answer.partitions[0], error=Errors.FENCED_LEADER_EPOCH),)
    )
    failed = replace(before, in_flight=None, states={}, pending_resets=frozenset())
    assert answer_violations(before, failed, fenced, BACKOFF) == []
    older, _ = reset_in_flight(request_epoch=-1)
    assert answer_violations(older, failed, fenced, BACKOFF) != []


def test_a_timed_out_reset_of_an_earlier_epoch_backs_nothing_off() -> None:
    """A reset's LIST_OFFSETS times out after a LeaderAndIsr moved its partition to a new
    epoch: the request no longer concerns the partition, whose back-off must not change."""
    before, _ = reset_in_flight()
    moved = replace(before.states[TP], current_leader_epoch=1, state=FETCHING)
    stale = replace(before, now_ms=31_001, states={TP: moved})  # past its deadline
    unchanged = replace(stale, in_flight=None, pending_resets=frozenset())
    assert backoff_violations(stale, unchanged, [], BACKOFF) == []
    delayed = replace(unchanged, states={TP: replace(moved, delay_until_ms=31_001 + BACKOFF)})
    [(name, reason)] = backoff_violations(stale, delayed, [], BACKOFF)
    assert name == NAME and "timed out" in reason and "expected None" in reason


# ------------------------------------------------------------------- a broken connection


def leader_dies(judged: Judge) -> None:
    """Follower 2's FETCH goes out at t=0; leader 1 dies at t=100 before answering it."""
    checked(judged, DoWork(2, 1), Tick(100), Crash(1))


def test_a_request_whose_leader_died_fails_at_once_and_backs_off() -> None:
    """Kafka's network client sees the close: the iteration at t=100 fails the FETCH and
    delays the partition until t=1100; the FETCH then sent to the dead leader is refused and
    fails at once too (t=1100, delayed until t=2100); every step is judged."""
    judged = recorder()
    leader_dies(judged)
    before = fetcher_view(judged.recorder.cluster, 2, 1, judge_connection=True)
    assert before is not None and before.connection_broke
    checked(judged, DoWork(2, 1))
    view = fetcher_view(judged.recorder.cluster, 2, 1)
    assert view is not None and view.in_flight is None
    assert view.states[TP].delay_until_ms == T0 + 1_100
    checked(judged, Tick(BACKOFF), DoWork(2, 1))
    assert [type(e.payload).__name__ for e in judged.recorder.sent] == ["FetchRequest"]
    checked(judged, DoWork(2, 1))
    view = fetcher_view(judged.recorder.cluster, 2, 1)
    assert view is not None and view.states[TP].delay_until_ms == T0 + 2_100


def test_a_wrong_back_off_after_a_disconnect_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """The partition must wait exactly replica.fetch.backoff.ms from the failure."""
    judged = recorder()
    leader_dies(judged)
    monkeypatch.setattr(
        AbstractFetcherThread,
        "handle_partitions_with_errors",
        lambda self, p: self.delay_partitions(p, BACKOFF + 1),
    )
    found = apply_checked(judged, DoWork(2, 1))
    assert found is not None and found[0] == NAME
    assert "lost its connection at" in found[1]
    assert f"delayed until {T0 + 1_101}, expected {T0 + 1_100}" in found[1]


def test_no_back_off_after_a_disconnect_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    judged = recorder()
    leader_dies(judged)
    monkeypatch.setattr(AbstractFetcherThread, "_handle_request_failure", lambda self, f: None)
    found = apply_checked(judged, DoWork(2, 1))
    assert found is not None and found[0] == NAME
    assert f"delayed until None, expected {T0 + 1_100}" in found[1]


def test_a_disconnect_the_fetcher_does_not_see_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fetcher left waiting for its request's deadline (t=30000) after the leader died is
    named at the crash itself."""
    judged = recorder()
    checked(judged, DoWork(2, 1), Tick(100))
    monkeypatch.setattr(AbstractFetcherThread, "process_disconnection", lambda self, a: None)
    found = apply_checked(judged, Crash(1))
    assert found is not None and found[0] == NAME
    assert f"to broker 1, down, waits for its deadline {T0 + TIMEOUT}" in found[1]


def test_a_request_that_fails_early_with_its_connection_whole_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Leader 1 runs: its follower's FETCH may fail only at its deadline."""
    judged = recorder()
    checked(judged, DoWork(2, 1), Tick(100))
    monkeypatch.setattr(InFlight, "failed", lambda self, now_ms: True)
    found = apply_checked(judged, DoWork(2, 1))
    assert found is not None and found[0] == NAME
    assert f"not past its deadline {T0 + TIMEOUT}, with its connection whole" in found[1]


def test_a_request_whose_answer_is_on_its_way_must_wait_for_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The answer leader 1 sent before it died still arrives: a fetcher that gives up on the
    request at the crash is named when it fails it; a right one takes the answer."""
    judged = recorder()
    checked(judged, DoWork(2, 1), Deliver(2, 1), Tick(100), Crash(1))
    view = fetcher_view(judged.recorder.cluster, 2, 1, judge_connection=True)
    assert view is not None and view.in_flight is not None and not view.connection_broke
    checked(judged, Deliver(1, 2))  # taken
    judged = recorder()
    checked(judged, DoWork(2, 1), Deliver(2, 1), Tick(100))

    def ignore_answers(self: AbstractFetcherThread, answers: object) -> None:
        if self.in_flight is not None:
            self.in_flight.disconnected = True

    monkeypatch.setattr(AbstractFetcherThread, "process_disconnection", ignore_answers)
    checked(judged, Crash(1))
    found = apply_checked(judged, DoWork(2, 1))
    assert found is not None and "with its connection whole" in found[1]


def test_a_leader_restarted_since_the_request_was_sent_broke_its_connection() -> None:
    """Leader 1 dies at t=100 and is back at t=200 before its follower's next iteration:
    the request sent at t=0 went to the dead incarnation, so it may fail at t=200; the FETCH
    sent at t=1200 goes to the new one, and may not fail early."""
    judged = recorder()
    leader_dies(judged)
    checked(judged, Tick(100), Restart(1))
    view = fetcher_view(judged.recorder.cluster, 2, 1, judge_connection=True)
    assert view is not None and view.connection_broke
    checked(judged, DoWork(2, 1), Tick(BACKOFF), DoWork(2, 1))
    view = fetcher_view(judged.recorder.cluster, 2, 1, judge_connection=True)
    assert view is not None and view.in_flight is not None and not view.connection_broke
    assert view.in_flight.deadline_ms == T0 + 1_200 + TIMEOUT


def test_across_a_network_partition_a_death_may_go_unseen() -> None:
    """Follower 2 is cut off from leader 1 when it dies: it need not see the close (its
    FETCH times out); once healed, it must."""
    judged = recorder()
    checked(judged, DoWork(2, 1), Isolate(1, 2), Tick(100), Crash(1))
    assert judged.recorder.cluster.brokers[2].workable_fetchers() == []
    checked(judged, Heal(1, 2))
    assert judged.recorder.cluster.brokers[2].workable_fetchers() == [1]
    checked(judged, DoWork(2, 1))


def test_a_failure_before_the_deadline_is_judged_by_the_connection() -> None:
    """Views made by hand: a FETCH sent at 1000 fails at 1500, before its deadline; with its
    connection broken, the partition must wait until 2500; with it whole, it must not fail."""
    state = PartitionFetchState(0, 0, 0, None, FETCHING)
    request = FetchRequest(7, 2, 0, 1, 10_485_760, IsolationLevel.READ_UNCOMMITTED, ())
    flight = InFlight(7, 1_000 + TIMEOUT, request, session={})
    broken = FetcherView(1_500, True, flight, {TP: state}, frozenset(), connection_broke=True)
    waits = {TP: replace(state, delay_until_ms=2_500)}
    assert (
        backoff_violations(broken, replace(broken, in_flight=None, states=waits), [], BACKOFF) == []
    )
    assert backoff_violations(broken, broken, [], BACKOFF) == []  # still waiting: not judged
    [(name, reason)] = backoff_violations(broken, replace(broken, in_flight=None), [], BACKOFF)
    assert name == NAME and "lost its connection at 1500 ms" in reason
    whole = replace(broken, connection_broke=False)
    [(name, reason)] = backoff_violations(
        whole, replace(whole, in_flight=None, states=waits), [], BACKOFF
    )
    assert name == NAME and "with its connection whole" in reason


def test_a_power_loss_is_not_seen_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Leader 1 loses power at t=100: its host sends no close, so follower 2's FETCH rightly
    waits for its deadline; a fetcher that fails it at once is named."""
    judged = recorder()
    checked(judged, DoWork(2, 1), Tick(100), UncleanShutdown(1))
    assert judged.recorder.cluster.brokers[2].workable_fetchers() == []
    view = fetcher_view(judged.recorder.cluster, 2, 1, judge_connection=True)
    assert view is not None and view.in_flight is not None and not view.connection_broke
    monkeypatch.setattr(InFlight, "failed", lambda self, now_ms: True)
    found = apply_checked(judged, DoWork(2, 1))
    assert found is not None and "with its connection whole" in found[1]


def test_a_power_loss_stays_one_when_the_dead_broker_is_crashed_again() -> None:
    """A Crash of a broker already down (a hand-written schedule) changes nothing: the host
    that lost power still sends no close, and the judge asks for no early failure."""
    judged = recorder()
    checked(judged, DoWork(2, 1), Tick(100), UncleanShutdown(1), Crash(1))
    assert judged.recorder.cluster.brokers[2].workable_fetchers() == []


def test_a_fetcher_that_says_it_has_work_does_something() -> None:
    """Views made by hand: has_work() promises that do_work() would do something now; a
    fetcher whose only partition is still backed off, and which says it has work anyway, runs
    an iteration that does nothing: named. Without the promise, waiting is right."""
    waiting = PartitionFetchState(0, 0, 0, 2_000, FETCHING)  # backed off until t=2000
    lying = FetcherView(1_000, True, None, {TP: waiting}, frozenset(), has_work=True)
    [(name, reason)] = backoff_violations(lying, lying, [], BACKOFF)
    assert name == NAME and "said it had work at 1000 ms" in reason
    honest = replace(lying, has_work=False)
    assert backoff_violations(honest, honest, [], BACKOFF) == []


def test_a_wake_up_off_kafkas_clock_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fetcher's wake-up is 1 ms past its request's deadline, then the end of its back-off;
    one that says otherwise, or that has no work when its back-off is due, is named."""
    judged = recorder()
    checked(judged, DoWork(2, 1), Drop(2, 1, 0))
    fetcher = judged.recorder.cluster.brokers[
        2
    ].replica_manager.replica_fetcher_manager.fetcher_for(1)
    assert fetcher is not None and fetcher.in_flight is not None
    assert fetcher.next_wakeup_ms() == fetcher.in_flight.deadline_ms + 1
    checked(judged, Tick(TIMEOUT + 1), DoWork(2, 1))  # failed: backs off
    assert wakeup_violations(judged.recorder.cluster) == []
    assert fetcher.next_wakeup_ms() == judged.recorder.cluster.clock.now_ms + BACKOFF
    early = judged.recorder.cluster.clock.now_ms + BACKOFF - 1
    with monkeypatch.context() as m:
        m.setattr(AbstractFetcherThread, "next_wakeup_ms", lambda self: early)
        [(name, reason)] = wakeup_violations(judged.recorder.cluster)
        assert name == NAME and f"wakes at {early} ms" in reason
    checked(judged, Tick(BACKOFF))  # due at exactly the end of the back-off
    monkeypatch.setattr(AbstractFetcherThread, "has_work", lambda self: False)
    found = apply_checked(judged, Tick(0))
    assert found is not None and found[0] == NAME and "a partition ready" in found[1]
