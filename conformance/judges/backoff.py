"""Time where the spec abstracts it: a follower's fetch back-off, judged at each fetcher
iteration (R7, R8).

The spec lets a follower's fetcher act whenever it has something to do; Kafka 2.6.3's
`AbstractFetcherThread` backs a partition off for `replica.fetch.backoff.ms` after an error
(`handlePartitionsWithErrors`, `delayPartitions`: a partition already delayed keeps its
deadline), and a partition is ready again once its `DelayedItem` is due (deadline <= now).
This check reads a fetcher's partition states just before and after one `DoWork` step or one
answer it takes (the implementation's own bookkeeping: which partitions wait, until when, and
the request in flight) and holds them to those rules on the simulated clock:

- a request sent gets its deadline: exactly replica.socket.timeout.ms from now, the time-out
  of the NetworkClient that `sendAndReceive` waits on (`deadline_violations`);
- a request fails once its deadline has passed (more than replica.socket.timeout.ms after it
  was sent: Kafka's `InFlightRequests` expires a request whose time since the send exceeds its
  time-out), or earlier only if its connection broke: the source broker's process died since
  it was sent, or was dead when it was sent (Kafka's NetworkClient sees the close, or the
  connect is refused, and `sendAndReceive` or `awaitReady` throws; a host that lost power
  sends neither), and no answer to it is on its way (what the leader sent before it died still
  arrives) (`connection_broke`);
- a request that failed backs every partition it concerned off for exactly
  replica.fetch.backoff.ms from now, unless it was already delayed, and no other (R8);
- a partition whose back-off has not ended is in no request the step sends;
- an iteration with no request in flight and a partition ready (Fetching or Truncating, due,
  no reset pending) does something: sends a request or moves a partition's state; so does one
  of a fetcher that said it had work (`has_work()`, which the simulator and the fuzzer ask
  before they run an iteration: "do_work() would do something now");
- an answer with an error for a partition it concerns backs that partition off for exactly
  replica.fetch.backoff.ms from now (`answer_violations`): a FETCH answer
  (`processFetchRequest`), an OffsetsForLeaderEpoch answer (`truncateToEpochEndOffsets`), and
  the LIST_OFFSETS answer of an out-of-range reset, which also ends the reset
  (`handleOutOfRangeError`, R9);
- after every step, a running fetcher whose source broker is down, and whose request in
  flight has no answer on its way, has work: its next iteration fails the request
  (`unseen_disconnection_violations`; a disconnect is seen at once, not at the request's
  deadline), unless no close can reach it: a network partition cuts it off from the source,
  or the source lost power (an `UncleanShutdown`: its host sends nothing, and the request
  times out, as a connect to it does);
- after every step, a running fetcher whose request in flight is past its deadline has work:
  its next iteration fails the request (`timed_out_violations`);
- after every step, a running fetcher with nothing in flight and a partition ready has work,
  and the wake-up it gives the simulator is the first instant its request fails or a back-off
  ends (`wakeup_violations`): the fuzzer's tick to the next deadline lands there, where a `<`
  and a `<=` of the fetcher's timers differ.

Reported as `FetchBackoffOnTime`, like an invariant.
"""

from __future__ import annotations

from collections.abc import Iterator, Set
from dataclasses import dataclass

from kreplica.impl.cluster import Cluster
from kreplica.impl.fetch_state import (
    FETCHING,
    EpochData,
    InFlight,
    OffsetReset,
    PartitionFetchState,
)
from kreplica.impl.fetcher import AbstractFetcherThread
from kreplica.impl.messages import (
    Errors,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    Message,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    TopicPartition,
)
from kreplica.impl.steps import Crash, HaltOnLogDirFailure, Restart, Tick, UncleanShutdown

FetcherAnswer = FetchResponse | OffsetsForLeaderEpochResponse | ListOffsetsResponse
"""The answers a follower's fetcher takes: to its FETCH, OffsetsForLeaderEpoch or the
LIST_OFFSETS of an out-of-range reset."""

NAME = "FetchBackoffOnTime"
"""The name a back-off at the wrong time is reported under."""


@dataclass(frozen=True)
class FetcherView:
    """A follower's fetcher towards one leader, as it stands at one moment."""

    now_ms: int
    running: bool
    in_flight: InFlight | None
    states: dict[TopicPartition, PartitionFetchState]
    pending_resets: frozenset[TopicPartition]
    connection_broke: bool = False
    """The request in flight may fail before its deadline (`connection_broke`; False once the
    deadline has passed)."""
    has_work: bool = False
    """The fetcher said it had work (`has_work()`: do_work() would do something now)."""


def fetcher_view(
    cluster: Cluster, broker: int, source: int, judge_connection: bool = False
) -> FetcherView | None:
    """The fetcher of `broker` towards `source` now (None: the broker runs no such fetcher);
    with `judge_connection`, whether its request in flight may fail early (read back through
    the cluster's history: only for a view before an iteration)."""
    if not cluster.is_alive(broker):
        return None
    fetcher = cluster.brokers[broker].replica_manager.replica_fetcher_manager.fetcher_for(source)
    if fetcher is None:
        return None
    flight, now = fetcher.in_flight, cluster.clock.now_ms
    return FetcherView(
        now,
        fetcher.is_running,
        flight,
        dict(fetcher.partition_states.items()),
        frozenset(fetcher.pending_resets),
        judge_connection
        and flight is not None
        and now <= flight.deadline_ms
        and connection_broke(cluster, broker, source, flight),
        fetcher.has_work(),
    )


def answer_on_its_way(cluster: Cluster, broker: int, source: int, correlation_id: int) -> bool:
    """True if an answer from `source` to the request `correlation_id` of `broker`'s current
    incarnation is on the network (sent, not yet delivered or lost)."""
    incarnation = cluster.incarnation(broker)
    return any(
        isinstance(e.payload, FetcherAnswer)
        and e.payload.correlation_id == correlation_id
        and e.dst_incarnation == incarnation
        for e in cluster.network.queues.get((source, broker), ())
    )


def connection_broke(cluster: Cluster, broker: int, source: int, flight: InFlight) -> bool:
    """True if the request in flight from `broker` to `source` may fail before its deadline
    (R8): no answer to it is on its way, and the connection it was sent on has closed
    (`closed_since` the send, deadline - replica.socket.timeout.ms)."""
    if answer_on_its_way(cluster, broker, source, flight.correlation_id):
        return False
    sent_ms = flight.deadline_ms - cluster.config.replica_socket_timeout_ms
    return closed_since(cluster, source, sent_ms)


LIFE_STEPS = (Crash, UncleanShutdown, HaltOnLogDirFailure, Restart)
"""The steps that end or start a broker's life."""


def closed_since(cluster: Cluster, source: int, since_ms: int) -> bool:
    """True if a connection to broker `source` opened at `since_ms` may have closed by now, or
    been refused then: a process of `source` died at or after that time, or `source` was down
    from such a death then (a Crash, a HaltOnLogDirFailure: the host closes the process's
    connections and refuses new ones). A host that lost power (an UncleanShutdown) closes and
    refuses nothing: a request to it times out. Read from the cluster's history, where the
    clock moves by Tick steps only. Lenient: a death in the very millisecond of `since_ms`
    counts as after it, and so does the death of a later incarnation than the one the
    connection reached (after a power loss and a restart)."""
    time_ms = cluster.clock.now_ms
    for step in reversed(cluster.history):
        if isinstance(step, Tick):
            time_ms -= step.ms
        elif isinstance(step, LIFE_STEPS) and step.broker == source:
            process_death = isinstance(step, Crash | HaltOnLogDirFailure)
            if time_ms < since_ms or process_death:
                return process_death
    return False


def lost_power(cluster: Cluster, broker: int) -> bool:
    """True if `broker`, down, went down by an UncleanShutdown (a power loss) rather than a
    Crash or a HaltOnLogDirFailure (a process that dies, whose host closes its connections):
    its first such step since its last Restart in the cluster's history (a later one found
    it down already)."""
    death = None
    for step in reversed(cluster.history):
        if isinstance(step, LIFE_STEPS) and step.broker == broker:
            if isinstance(step, Restart):
                break
            death = step
    return isinstance(death, UncleanShutdown)


def unseen_disconnection_violations(
    cluster: Cluster, brokers: Set[int] | None = None
) -> list[tuple[str, str]]:
    """Running fetchers that have not seen their connection break (R8): the source broker is
    down (a process that died, not a host that lost power: `lost_power`) and not cut off from
    the fetcher's broker by a network partition, the request in flight has no answer on its
    way, and yet the fetcher has no work (it would wait for the request's deadline instead of
    failing it at its next iteration). The fetchers of `brokers` only, if given."""
    if brokers is not None and not brokers:
        return []  # no fetcher to judge (a client's step, a message to the controller)
    down = [b for b in cluster.broker_ids if not cluster.is_alive(b)]
    if not down:
        return []
    found = []
    for broker in cluster.broker_ids:
        if broker in down or (brokers is not None and broker not in brokers):
            continue
        manager = cluster.brokers[broker].replica_manager.replica_fetcher_manager
        for source in down:
            fetcher = manager.fetcher_for(source)
            flight = fetcher.in_flight if fetcher is not None else None
            if (
                fetcher is None
                or flight is None
                or not fetcher.is_running
                or (source, broker) in cluster.network.blocked
                or answer_on_its_way(cluster, broker, source, flight.correlation_id)
                or fetcher.has_work()
                or lost_power(cluster, source)
            ):
                continue
            found.append(
                (
                    NAME,
                    f"broker {broker}'s request {flight.correlation_id} to broker {source}, "
                    f"down, waits for its deadline {flight.deadline_ms} at "
                    f"{cluster.clock.now_ms} ms: its connection broke with no answer on its way",
                )
            )
    return found


def _running_fetchers(
    cluster: Cluster, brokers: Set[int] | None = None
) -> Iterator[tuple[int, int, AbstractFetcherThread]]:
    """(broker, source, fetcher) of every running fetcher of a running broker (of `brokers`
    only, if given), in order."""
    for broker in cluster.broker_ids:
        if (brokers is not None and broker not in brokers) or not cluster.is_alive(broker):
            continue
        manager = cluster.brokers[broker].replica_manager.replica_fetcher_manager
        for source, fetcher in sorted(manager.fetchers.items()):
            if fetcher.is_running:
                yield broker, source, fetcher


def timed_out_violations(
    cluster: Cluster, brokers: Set[int] | None = None
) -> list[tuple[str, str]]:
    """Running fetchers (of `brokers` only, if given) whose request in flight is past its
    deadline and yet have no work (R8): the NetworkClient expires the request at its next
    poll, so the fetcher's next iteration fails it and backs its partitions off; a fetcher
    without work would wait on."""
    now, found = cluster.clock.now_ms, []
    for broker, source, fetcher in _running_fetchers(cluster, brokers):
        flight = fetcher.in_flight
        if flight is None or now <= flight.deadline_ms or fetcher.has_work():
            continue
        found.append(
            (
                NAME,
                f"broker {broker}'s request {flight.correlation_id} to broker {source} "
                f"is past its deadline {flight.deadline_ms} at {now} ms, and its fetcher "
                "has no work",
            )
        )
    return found


def wakeup_violations(cluster: Cluster, brokers: Set[int] | None = None) -> list[tuple[str, str]]:
    """Running fetchers (of `brokers` only, if given) that disagree with Kafka's clock about
    when they have work (R8): one with nothing in flight and a partition ready (its back-off
    due, no reset pending) has work now (`has_work()`); and the wake-up it gives the simulator
    (`next_wakeup_ms()`, where the fuzzer's tick to the next deadline lands) is the first
    instant its request fails (past its deadline, or now if its connection broke) or, with
    nothing in flight, a back-off ends."""
    now, found = cluster.clock.now_ms, []
    for broker, source, fetcher in _running_fetchers(cluster, brokers):
        flight, states = fetcher.in_flight, dict(fetcher.partition_states.items())
        ready = flight is None and any(
            tp not in fetcher.pending_resets and not _delayed(state, now)
            for tp, state in states.items()
        )
        idle = ready and not fetcher.has_work()
        expected, got = _first_wakeup(flight, states, now), fetcher.next_wakeup_ms()
        if not idle and got == expected:
            continue
        where = f"broker {broker}'s fetcher from broker {source}"
        if idle:
            found.append((NAME, f"{where} has a partition ready at {now} ms, and no work"))
        if got != expected:
            found.append((NAME, f"{where} wakes at {got} ms by its own account at {now} ms, "
                                f"expected {expected}"))  # fmt: skip
    return found


def _first_wakeup(
    flight: InFlight | None, states: dict[TopicPartition, PartitionFetchState], now_ms: int
) -> int | None:
    """The first instant a fetcher gets work by itself: its request fails (at once if its
    connection broke, else 1 ms past its deadline), or else its first back-off ends."""
    if flight is not None:
        return now_ms if flight.disconnected else flight.deadline_ms + 1
    ends = [s.delay_until_ms for s in states.values() if s.delay_until_ms is not None]
    return min((end for end in ends if end > now_ms), default=None)


def deadline_violations(
    before: FetcherView | None, after: FetcherView | None, timeout_ms: int
) -> list[tuple[str, str]]:
    """A request the step sent (in flight after it, not before) must fail no earlier than
    `timeout_ms` (replica.socket.timeout.ms) from now unless its connection breaks (R8): its
    deadline is exactly now + `timeout_ms`. The other checks read the deadline to judge when a
    request may fail, so a wrong one would let a fetcher give up early, or never."""
    if after is None or after.in_flight is None:
        return []
    flight, awaited = after.in_flight, before.in_flight if before is not None else None
    if awaited is not None and awaited.correlation_id == flight.correlation_id:
        return []
    expected = after.now_ms + timeout_ms
    if flight.deadline_ms == expected:
        return []
    return [
        (
            NAME,
            f"request {flight.correlation_id} sent at {after.now_ms} ms times out at "
            f"{flight.deadline_ms}, expected {expected} (replica.socket.timeout.ms)",
        )
    ]


def _delayed(state: PartitionFetchState, now_ms: int) -> bool:
    """Kafka's DelayedItem: still delayed while its deadline is in the future."""
    return state.delay_until_ms is not None and state.delay_until_ms > now_ms


def _partitions_of(request: Message) -> set[TopicPartition]:
    if isinstance(request, FetchRequest | OffsetsForLeaderEpochRequest | ListOffsetsRequest):
        return {p.tp for p in request.partitions}
    return set()


def backoff_violations(
    before: FetcherView | None,
    after: FetcherView | None,
    sent: list[Message],
    backoff_ms: int,
) -> list[tuple[str, str]]:
    """Judge one fetcher iteration (`sent`: the requests it sent) by the back-off rules."""
    if before is None or after is None or not before.running:
        return []
    now = before.now_ms
    flight = before.in_flight
    if flight is not None:
        if now <= flight.deadline_ms:
            waits = after.in_flight is not None and (
                after.in_flight.correlation_id == flight.correlation_id
            )
            if waits:
                return []
            if not before.connection_broke:
                return [
                    (
                        NAME,
                        f"a request failed at {now} ms, not past its deadline "
                        f"{flight.deadline_ms}, with its connection whole",
                    )
                ]
        return _request_failure(before, after, backoff_ms)
    asked = set().union(*(_partitions_of(m) for m in sent)) if sent else set()
    early = sorted(
        str(tp) for tp in asked if tp in before.states and _delayed(before.states[tp], now)
    )
    if early:
        return [(NAME, f"{', '.join(early)} fetched at {now} ms, before its back-off ended")]
    ready = [
        tp
        for tp, state in before.states.items()
        if not _delayed(state, now) and tp not in before.pending_resets
    ]
    idle = not sent and after.states == before.states and after.in_flight is None
    if ready and idle:
        names = ", ".join(sorted(map(str, ready)))
        return [(NAME, f"{names} ready at {now} ms, but the fetcher iteration did nothing")]
    if before.has_work and idle and after.pending_resets == before.pending_resets:
        return [(NAME, f"the fetcher said it had work at {now} ms, but its iteration did nothing")]
    return []


NO_BACKOFF = frozenset({Errors.NONE, Errors.OFFSET_OUT_OF_RANGE, Errors.FENCED_LEADER_EPOCH})
"""Partition errors of a FETCH answer that do not back the partition off: a success, the
out-of-range reset (R9), and a fenced epoch (the partition fails or waits for a LeaderAndIsr,
`onPartitionFenced`); every other error does (`handlePartitionsWithErrors`)."""


def answer_violations(
    before: FetcherView | None,
    after: FetcherView | None,
    answer: FetcherAnswer,
    backoff_ms: int,
) -> list[tuple[str, str]]:
    """Judge a fetcher's handling of the answer to its request in flight (R8, R9): a FETCH,
    OffsetsForLeaderEpoch or LIST_OFFSETS answer with errors backs off the partitions it
    still concerns."""
    if before is None or after is None or before.in_flight is None:
        return []
    flight = before.in_flight
    if flight.correlation_id != answer.correlation_id:
        return []
    if isinstance(answer, FetchResponse) and flight.session is not None:
        return _fetch_answer(before, after, flight.session, answer, backoff_ms)
    if isinstance(answer, OffsetsForLeaderEpochResponse) and flight.epochs is not None:
        return _epoch_answer(before, after, flight.epochs, answer, backoff_ms)
    if isinstance(answer, ListOffsetsResponse) and flight.reset is not None:
        return _reset_answer(before, after, flight.reset, answer, backoff_ms)
    return []


def _fetch_answer(
    before: FetcherView,
    after: FetcherView,
    session: dict[TopicPartition, FetchPartitionData],
    answer: FetchResponse,
    backoff_ms: int,
) -> list[tuple[str, str]]:
    """processFetchRequest: each partition the answer still concerns (tracked, Fetching at
    the offset asked, not delayed, no reset pending) that comes back with an error that backs
    off (`NO_BACKOFF`), or every one of them for an error of the whole answer, is delayed
    for exactly replica.fetch.backoff.ms from now."""
    now = before.now_ms
    errors = {p.tp: p.error for p in answer.partitions}
    wrong = []
    for tp, state in sorted(before.states.items(), key=lambda item: str(item[0])):
        asked = session.get(tp)
        error = answer.error if answer.error is not Errors.NONE else errors.get(tp, Errors.NONE)
        if (
            asked is None
            or error in NO_BACKOFF
            or asked.fetch_offset != state.fetch_offset
            or state.state is not FETCHING
            or _delayed(state, now)
            or tp in before.pending_resets
        ):
            continue
        then = after.states.get(tp)
        if then is not None and then.delay_until_ms != now + backoff_ms:
            wrong.append(f"{tp} ({error.name}) delayed until {then.delay_until_ms}")
    return _named("a FETCH answer", now, wrong, now + backoff_ms)


def _epoch_answer(
    before: FetcherView,
    after: FetcherView,
    epochs: dict[TopicPartition, EpochData],
    answer: OffsetsForLeaderEpochResponse,
    backoff_ms: int,
) -> list[tuple[str, str]]:
    """truncateToEpochEndOffsets: each partition of the answer still tracked with the leader
    epoch it was asked in, that comes back with an error other than a fenced epoch (the
    partition fails, `onPartitionFenced`, which the spec judges), backs off."""
    now = before.now_ms
    wrong = []
    for item in sorted(answer.partitions, key=lambda p: str(p.tp)):
        asked, state = epochs.get(item.tp), before.states.get(item.tp)
        if (
            asked is None
            or state is None
            or asked.current_leader_epoch != state.current_leader_epoch
            or item.error in (Errors.NONE, Errors.FENCED_LEADER_EPOCH)
        ):
            continue
        then = after.states.get(item.tp)
        if then is None or then.delay_until_ms != _backed_off(state, now, backoff_ms):
            until = None if then is None else then.delay_until_ms
            wrong.append(f"{item.tp} ({item.error.name}) delayed until {until}")
    return _named("an OffsetsForLeaderEpoch answer", now, wrong, now + backoff_ms)


def _reset_answer(
    before: FetcherView,
    after: FetcherView,
    reset: OffsetReset,
    answer: ListOffsetsResponse,
    backoff_ms: int,
) -> list[tuple[str, str]]:
    """handleOutOfRangeError (R9): a reset still pending for the leader epoch its partition
    is tracked with, answered with an error (or not at all for its partition), ends, and
    its partition backs off, unless the error is a fenced epoch and the reset's FETCH was
    sent in the epoch tracked now (the partition fails, `onPartitionFenced`)."""
    now = before.now_ms
    state = before.states.get(reset.tp)
    if (
        state is None
        or state.current_leader_epoch != reset.leader_epoch
        or reset.tp not in before.pending_resets
    ):
        return []
    item = next((p for p in answer.partitions if p.tp == reset.tp), None)
    error = Errors.UNKNOWN_TOPIC_OR_PARTITION if item is None else item.error
    if error is Errors.NONE:
        return []
    wrong = []
    if reset.tp in after.pending_resets:
        wrong.append(f"{reset.tp} ({error.name}) still resetting")
    fails = error is Errors.FENCED_LEADER_EPOCH and reset.request_epoch == reset.leader_epoch
    then = after.states.get(reset.tp)
    if not fails and (then is None or then.delay_until_ms != _backed_off(state, now, backoff_ms)):
        until = None if then is None else then.delay_until_ms
        wrong.append(f"{reset.tp} ({error.name}) delayed until {until}")
    return _named("a LIST_OFFSETS answer of an out-of-range reset", now, wrong, now + backoff_ms)


def _backed_off(state: PartitionFetchState, now_ms: int, backoff_ms: int) -> int | None:
    """Where delayPartitions leaves a partition: an earlier back-off keeps its deadline."""
    return state.delay_until_ms if _delayed(state, now_ms) else now_ms + backoff_ms


def _named(what: str, now_ms: int, wrong: list[str], expected: int) -> list[tuple[str, str]]:
    if not wrong:
        return []
    return [(NAME, f"{what} at {now_ms} ms: {'; '.join(wrong)}, expected {expected}")]


def _request_failure(
    before: FetcherView, after: FetcherView, backoff_ms: int
) -> list[tuple[str, str]]:
    """A request that failed (timed out, or its connection broke): the tracked partitions it
    concerned back off from now (R8), except those already delayed; those whose leader epoch
    moved since it was sent (an OffsetsForLeaderEpoch, a reset's LIST_OFFSETS) are not
    concerned, and no partition it does not concern changes its back-off."""
    assert before.in_flight is not None
    flight, now = before.in_flight, before.now_ms
    if flight.session is not None:
        concerned = set(before.states)
    elif flight.epochs is not None:
        concerned = {
            tp
            for tp, data in flight.epochs.items()
            if tp in before.states
            and before.states[tp].current_leader_epoch == data.current_leader_epoch
        }
    elif (
        flight.reset is not None
        and flight.reset.tp in before.pending_resets
        and flight.reset.tp in before.states
        and before.states[flight.reset.tp].current_leader_epoch == flight.reset.leader_epoch
    ):
        concerned = {flight.reset.tp}  # an untracked partition has nothing to back off
    else:
        concerned = set()
    wrong = []
    for tp, state in sorted(before.states.items(), key=lambda item: str(item[0])):
        then = after.states.get(tp)
        kept = state.delay_until_ms
        expected = _backed_off(state, now, backoff_ms) if tp in concerned else kept
        if then is not None and then.delay_until_ms != expected:
            wrong.append(f"{tp} delayed until {then.delay_until_ms}, expected {expected}")
    if wrong:
        what = "timed out" if now > flight.deadline_ms else "lost its connection"
        return [(NAME, f"a request {what} at {now} ms: " + "; ".join(wrong))]
    return []
