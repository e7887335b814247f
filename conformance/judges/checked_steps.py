"""What the fuzzer checks, and when: the spec's invariants after every spec action of a run,
Kafka's timing rules where the spec abstracts time (`lag_times`, `backoff`, `idle_fetchers`,
`checkpoint_times`), and every answer to the client as it is sent, and in time
(`client_answers`).

Theory of operation. A `Judge` watches one recorded run. A step passes through it in three
phases, one way: `Judge.before` notes what the step will be judged against (the fetcher it
works, the client request it delivers, the checkpoint task it starts); the recorder applies
the step and emits the spec actions it performed (`bridge.recorder`); `Judge.after` keeps
the judges' books from those events and returns the first violation. The recorder keeps
no judge's state. `apply_checked` is the three phases for one step: the fuzzer and the replay
of a saved schedule both use it, so a saved failure replays exactly as it was found.
`checked_violations` is the one rule that says which invariants count in a state (durability
is not promised after a power loss).
"""

from __future__ import annotations

from collections.abc import Set
from typing import NamedTuple

from kreplica.conformance.bridge.projection import (
    CLIENT,
    CONTROLLER,
    NOT_HOSTED,
    State,
    log_start_of,
)
from kreplica.conformance.bridge.recorder import BROKER_STEPS, Event, Recorder
from kreplica.conformance.judges.arrivals import Arrival, Arrivals
from kreplica.conformance.judges.backoff import (
    FetcherAnswer,
    FetcherView,
    answer_violations,
    backoff_violations,
    deadline_violations,
    fetcher_view,
    timed_out_violations,
    unseen_disconnection_violations,
    wakeup_violations,
)
from kreplica.conformance.judges.checkpoint_times import CheckpointTimes
from kreplica.conformance.judges.client_answers import (
    client_answer_violations,
    held_request_violations,
)
from kreplica.conformance.judges.idle_fetchers import idle_fetcher_violations
from kreplica.conformance.judges.invariants import joins_caught_up, violations
from kreplica.conformance.judges.lag_times import (
    HW_RECOMPUTES,
    LagTimes,
    hw_violations,
    proposal_violations,
    read_ok,
    shrink_violations,
)
from kreplica.impl.cluster import Cluster, SimulationError
from kreplica.impl.messages import (
    AlterPartitionRequest,
    FetchResponse,
    ListOffsetsResponse,
    OffsetsForLeaderEpochResponse,
    TopicPartition,
)
from kreplica.impl.steps import (
    CheckpointHighWatermarks,
    DeleteRecords,
    Deliver,
    DetectFailure,
    DoWork,
    Flush,
    HaltOnLogDirFailure,
    ShrinkIsr,
    Step,
)
from kreplica.impl.variants import Variant

Violation = tuple[str, str]
"""(invariant name, reason)."""

POWER_LOSS_INVARIANTS = frozenset(
    {
        "HighWatermarkWithinLog",
        "LogMatching",
        "FollowersMatchLeader",
        "EpochCacheOrdered",
        "EpochCacheMatchesLog",
        "LeaderEpochsOnlyGrow",
        "IsrJoinsCaughtUp",
    }
)
"""The properties the spec proves under power loss (spec/Kip279UncleanShutdown.cfg)."""

OFFSETS = "ConsecutiveOffsets"
"""The name a failure gets when a log's records do not sit at consecutive offsets from its log
start offset to its LEO (`offset_violations`)."""

TAKES_EFFECT = "StepTakesEffect"
"""The name a failure gets when a step that is one spec action, taken where the spec enables
that action, changed nothing (`effect_violations`)."""

IMPLEMENTATION_ERROR = "ImplementationError"
"""The name a failure gets when a step raised an exception instead of breaking an invariant."""


def checked_violations(
    state: State, before: State | None, variant: Variant | None = None
) -> list[Violation]:
    """The violations that count in `state` (reached from `before`, in a run of `variant`:
    an invariant the variant breaks by design is not judged, `invariants.BROKEN_BY_DESIGN`).
    THE rule:

    Kafka 2.6.3 acknowledges a write without an fsync, so a power loss (an unclean shutdown) may
    legitimately lose acknowledged and committed records (KIP-966 addresses it). So once a run
    has had an unclean shutdown, only the properties the spec proves under power loss count
    (`POWER_LOSS_INVARIANTS`): AckedRecordsNeverLost, CommittedRecordsOnIsr and ConsistentReads
    are no longer checked. Before that, and in runs with process crashes only (the log
    survives), every invariant counts: such a state is one of the spec's crash-only model,
    where all of them are proved.
    """
    found = violations(state, before, variant)
    if state["uncleanShutdowns"] == 0:
        return found
    return [(name, reason) for name, reason in found if name in POWER_LOSS_INVARIANTS]


class Before(NamedTuple):
    """What the judges note of the cluster before a step runs, to judge the step after it.
    (A NamedTuple: made once per step, it is built faster than a frozen dataclass.)"""

    state: State
    """The spec state before the step."""
    fetcher: FetcherView | None
    """The fetcher the step works or answers, as it stands before the step (`backoff`)."""
    answer: FetcherAnswer | None
    """The answer the step delivers to that fetcher, if it delivers one."""
    isr_in_flight: bool
    """Under isr=alter-partition, a ShrinkIsr's leader awaits the controller's answer."""
    checkpoint_task: int | None
    """The broker whose checkpoint task the step starts (`checkpoint_times.starts`)."""
    arrival: Arrival | None
    """The client request the step delivers (`arrivals`)."""


class Judge:
    """The judges of one recorded run, and the bookkeeping they keep of it.

    The recorder records; the judges watch. Each step passes through three phases, one way:
    `before` notes what the step will be judged against; the recorder applies and records it
    (`Recorder.apply`); then `observe` keeps the judges' books from the events it emitted
    (Kafka's caught-up times, the client's requests and answers), and `after` returns what the
    step broke. `apply_checked` runs the three."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        cluster = recorder.cluster
        self.lag_times = LagTimes(cluster.broker_ids, cluster.config.replica_lag_time_max_ms)
        """Kafka's caught-up times of the followers, as the recorded actions imply them."""
        self.lag_times.start(recorder.state, cluster.clock.now_ms)
        self.checkpoint_times = CheckpointTimes(cluster, recorder.state)
        """The HW checkpoint task's schedule, as the steps imply it."""
        self.arrivals = Arrivals()
        """The client's requests and their answers."""
        self.brokers_judged = False
        """The brokers and the clock have been judged after a step (`after`)."""

    def before(self, step: Step) -> Before:
        """What `step` will be judged against, noted before it runs."""
        r = self.recorder
        fetcher, answer = _fetcher_before(r.cluster, step)
        return Before(
            state=r.state,
            fetcher=fetcher,
            answer=answer,
            isr_in_flight=_isr_change_in_flight(r, step),
            checkpoint_task=self.checkpoint_times.starts(step),
            arrival=self.arrivals.before(r.cluster, r.tp, r.state, step),
        )

    def observe(self, seen: Before, events: list[Event]) -> None:
        """Keep the books from what the recorder emitted for the step: the followers'
        caught-up times after each action, the client's requests and answers."""
        r = self.recorder
        now, previous = r.cluster.clock.now_ms, seen.state
        for event in events:
            self.lag_times.observe(event.action, event.args, previous, event.state, now, r.sent)
            previous = event.state
        self.arrivals.after(seen.arrival, r.sent)

    def after(
        self, step: Step, seen: Before, events: list[Event], invariants: bool
    ) -> Violation | None:
        """The first violation the step shows, in this order: the spec's invariants after
        each action it performed (with no idle fetcher after a LeaderAndIsr, and the HW a
        leader computes), a step that did not take effect (`effect_violations`), every log's
        offsets, an ISR change proposed under isr=alter-partition, Kafka's timing rules
        (`backoff`, `lag_times`, `checkpoint_times`), the client's answers and requests."""
        r, before = self.recorder, seen.state
        # the logs and fetchers of brokers the step could not change (`touch`) stand as they
        # were judged after the step before (the first step judges every broker)
        scope = r.touched if self.brokers_judged else None
        self.brokers_judged = True
        found = (
            _event_violations(self, events, before, invariants)
            or effect_violations(step, before, [e.action for e in events])
            or offset_violations(r.cluster, r.tp, scope)
            or _proposal_violations(r, before)
            or _timing_violations(self, step, seen, scope)
            or self.checkpoint_times.violations(step, seen.checkpoint_task, before, r.state)
            or client_violations(r, self.arrivals)
        )
        return found[0] if found else None


def apply_checked(
    judge: Judge,
    step: Step,
    invariants: bool = True,
    rules: bool | None = None,
    raise_refused: bool = False,
) -> Violation | None:
    """Apply one step through the judge's recorder; the first violation it shows, if any
    (`Judge.after`). With `invariants` False the spec's invariants are not checked, and with
    `rules` False too (its default is `invariants`) only exceptions count.

    An exception from the simulator is a finding too: it is reported as IMPLEMENTATION_ERROR,
    `"Type: message"`. With `raise_refused`, a SimulationError is raised instead: the
    simulator refused a step that is not enabled (nothing to deliver at that index, a Restart
    of a running broker), which is the caller's error, not the implementation's (a saved
    schedule that no longer applies). The fuzzer takes only enabled steps, so it reports a
    refusal like any exception.
    """
    seen = judge.before(step)
    try:
        events = judge.recorder.apply(step)
    except Exception as err:
        if raise_refused and isinstance(err, SimulationError):
            raise
        return IMPLEMENTATION_ERROR, f"{type(err).__name__}: {err}"
    judge.observe(seen, events)
    if not invariants and not rules:  # rules None: as invariants
        return None
    return judge.after(step, seen, events, invariants)


EFFECT_STEPS = (Flush, CheckpointHighWatermarks, HaltOnLogDirFailure, DetectFailure, DeleteRecords)
"""The steps `effect_violations` judges (each is one spec action)."""


def _enabled(step: Step, s: State) -> bool:
    """The spec enables the one action of `step` in state `s` (its guard, but for the
    model's bounds: MaxCrashes, MaxEpoch and the like bound TLC's search, not Kafka). A log
    dir failure is left out: the projection sees a failed log dir only where a log exists."""
    if not isinstance(step, EFFECT_STEPS):
        return False
    r = getattr(step, "broker", 0)
    up = r in s["alive"] and r not in s["logDirOffline"]
    if isinstance(step, Flush):
        return up and s["recoveryPoint"][r - 1] < len(s["log"][r - 1])
    if isinstance(step, CheckpointHighWatermarks):
        hosted = s["leaderEpoch"][r - 1] != NOT_HOSTED
        return up and hosted and s["hwCheckpoint"][r - 1] != s["hw"][r - 1]
    if isinstance(step, HaltOnLogDirFailure):
        return r in s["alive"] and r in s["logDirOffline"]
    if isinstance(step, DetectFailure):
        return r in s["ctrlLive"] and r not in s["alive"]
    # DeleteRecords, on the controller's leader, which the step asks
    lead = s["ctrlLeader"]
    return (
        lead in s["alive"]
        and lead not in s["logDirOffline"]
        and s["leader"][lead - 1] == lead
        and log_start_of(s, lead) < step.offset <= s["hw"][lead - 1]
    )


def effect_violations(step: Step, before: State, actions: list[str]) -> list[Violation]:
    """A step that is one spec action (a flush, an HW checkpoint, a halt after a log dir
    failure, the controller's failure detection, a deletion of records above the log start),
    taken in a state where the spec enables that action, is recorded as that action. The
    recorder names such a step only when the state moved (a flush of a flushed log is no
    action, `recorder.NO_OPS`; a deletion that failed is none either), so without this check a
    step that silently did nothing where it had work to do would leave no trace."""
    if not _enabled(step, before):
        return []
    name = "DeleteRecords" if isinstance(step, DeleteRecords) else BROKER_STEPS[type(step)]
    if name in actions:
        return []
    return [(TAKES_EFFECT, f"{step!r} changed nothing, where the spec's {name} must")]


def offset_violations(
    cluster: Cluster, tp: TopicPartition, brokers: Set[int] | None = None
) -> list[Violation]:
    """Every log's records sit at consecutive offsets from its log start offset up to its LEO
    (the logs of `brokers` only, if given). The spec's log is a sequence indexed by offset,
    and the projection reads a Log's entries in order; an offset skipped or repeated (no
    compaction here, which is what leaves gaps in Kafka) or a LEO that is not the offset after
    the last record would be invisible to it."""
    found = []
    for b in cluster.broker_ids if brokers is None else sorted(brokers):
        log = cluster.log(b, tp)
        if log is None:
            continue
        offsets = [e.offset for e in log.entries]
        expected = list(range(log.log_start_offset, log.log_start_offset + len(offsets)))
        if offsets != expected or log.log_end_offset != log.log_start_offset + len(offsets):
            found.append(
                (
                    OFFSETS,
                    f"broker {b}: records at offsets {offsets}, log start "
                    f"{log.log_start_offset}, LEO {log.log_end_offset}",
                )
            )
    return found


def _hw_violations(judge: Judge, event: Event, before: State) -> list[Violation]:
    """The HW a leader computes where Kafka recomputes it (`lag_times.HW_RECOMPUTES`, judged
    by `lag_times.hw_violations`; under isr=alter-partition with the ISR it has proposed,
    which no spec variable holds): a follower's FETCH it answered that moved the follower's
    LEO, an append, an ISR shrink, a LeaderAndIsr that makes it lead in a new epoch."""
    recorder = judge.recorder
    cause = HW_RECOMPUTES.get(event.action)
    if cause is None or not _recomputes_hw(recorder, event, before):
        return []
    leader = int(event.args["replica"])
    partition = recorder.cluster.partition(leader, recorder.tp)
    proposed = partition.pending_isr if partition is not None else None
    now = recorder.cluster.clock.now_ms
    return hw_violations(
        judge.lag_times, leader, before, event.state, now, proposed or frozenset(), cause
    )


def _recomputes_hw(recorder: Recorder, event: Event, before: State) -> bool:
    """The action `event` made its replica, a leader, call maybeIncrementLeaderHW: a fetch
    answered without an error that moved the follower's LEO (updateFollowerFetchState), an
    append (the log grew), an ISR shrink, or makeLeader (a new epoch it leads)."""
    after, r = event.state, int(event.args["replica"])
    i = r - 1
    leads = bool(after["leader"][i] == r)
    if event.action == "LeaderHandleFetch":
        follower = int(event.args["follower"])
        moved = bool(before["remoteLeo"][i] != after["remoteLeo"][i])
        return moved and read_ok(recorder.sent, r, follower)
    if event.action == "Produce":
        return leads and len(after["log"][i]) > len(before["log"][i])
    if event.action == "BecomeLeaderOrFollower":
        return leads and bool(after["leaderEpoch"][i] != before["leaderEpoch"][i])
    return leads  # LeaderShrinkIsr


def _proposal_violations(recorder: Recorder, before: State) -> list[Violation]:
    """Under isr=alter-partition, R11 for an ISR expansion the step proposed: the leader
    decides it (Kafka 2.7's maybeExpandIsr, then an AlterPartition request), so the followers
    it adds are judged by IsrJoinsCaughtUp now, not when the controller's answer lands."""
    if not any(isinstance(e.payload, AlterPartitionRequest) for e in recorder.sent):
        return []  # no proposal sent (most steps; every step under isr=sync)
    state = recorder.state
    for leader in recorder.cluster.broker_ids:
        proposed = _proposed_isr(recorder, leader)
        if proposed is None:
            continue
        joining = proposed - state["isr"][leader - 1]
        if reason := joins_caught_up(before, state, leader, joining):
            return [("IsrJoinsCaughtUp", reason)]
    return []


def _isr_change_in_flight(recorder: Recorder, step: Step) -> bool:
    """Under isr=alter-partition, whether the leader a ShrinkIsr step runs has an ISR change
    awaiting the controller's answer (its Partition's pending ISR) before the step."""
    if not isinstance(step, ShrinkIsr) or recorder.cluster.variant.isr != "alter-partition":
        return False
    partition = recorder.cluster.partition(step.broker, recorder.tp)
    return partition is not None and partition.pending_isr is not None


def _proposed_isr(recorder: Recorder, leader: int) -> frozenset[int] | None:
    """The ISR `leader` proposed to the controller in the last step's AlterPartition
    request, if it sent one."""
    for envelope in recorder.sent:
        payload = envelope.payload
        if envelope.src == leader and isinstance(payload, AlterPartitionRequest):
            for item in payload.partitions:
                if item.tp == recorder.tp:
                    return frozenset(item.new_isr)
    return None


def _fetcher_before(
    cluster: Cluster, step: Step
) -> tuple[FetcherView | None, FetcherAnswer | None]:
    """The fetcher a step works or answers, as it stands before the step, and the answer
    (FETCH, OffsetsForLeaderEpoch, LIST_OFFSETS) the step delivers to it, if it delivers
    one (an answer addressed to an earlier incarnation of the broker is dropped on arrival:
    it reaches no fetcher)."""
    if isinstance(step, DoWork):
        return fetcher_view(cluster, step.broker, step.source, judge_connection=True), None
    if isinstance(step, Deliver) and step.dst not in (CLIENT, CONTROLLER):
        envelope = cluster.network.peek((step.src, step.dst), step.index)
        if (
            envelope is not None
            and isinstance(
                envelope.payload,
                FetchResponse | OffsetsForLeaderEpochResponse | ListOffsetsResponse,
            )
            and envelope.dst_incarnation == cluster.incarnation(step.dst)
        ):
            return fetcher_view(cluster, step.dst, step.src), envelope.payload
    return None, None


def _event_violations(
    judge: Judge, events: list[Event], before: State, invariants: bool = True
) -> list[Violation]:
    """The invariants after each spec action the step performed (`checked_violations`), no
    idle fetcher after a LeaderAndIsr, and the HW a leader computes (`_hw_violations`)."""
    cluster = judge.recorder.cluster
    for event in events:
        variant = cluster.variant
        found = checked_violations(event.state, before, variant) if invariants else []
        if event.action == "LeaderHandleAlterPartitionResponse":  # judged when proposed
            found = [v for v in found if v[0] != "IsrJoinsCaughtUp"]
        if event.action == "BecomeLeaderOrFollower":
            found += idle_fetcher_violations(cluster, int(event.args["replica"]))
        found += _hw_violations(judge, event, before)
        if found:
            return found
        before = event.state
    return []


def _timing_violations(
    judge: Judge, step: Step, seen: Before, brokers: Set[int] | None = None
) -> list[Violation]:
    """Kafka's timing rules on the simulated clock: the deadline of a request a fetcher
    sends, a fetcher iteration's or an answer's back-off, a broken connection seen at once, a
    request past its deadline failed at the next iteration (`backoff`; of the fetchers of
    `brokers` only, if given), an ISR shrink's lag time (`lag_times`)."""
    recorder, fetcher = judge.recorder, seen.fetcher
    cluster, backoff = recorder.cluster, recorder.cluster.config.replica_fetch_backoff_ms
    timeout = cluster.config.replica_socket_timeout_ms
    unseen = (
        unseen_disconnection_violations(cluster, brokers)
        or timed_out_violations(cluster, brokers)
        or wakeup_violations(cluster, brokers)
    )
    if unseen:
        return unseen
    if isinstance(step, DoWork):
        after = fetcher_view(cluster, step.broker, step.source)
        return deadline_violations(fetcher, after, timeout) or backoff_violations(
            fetcher, after, [e.payload for e in recorder.sent], backoff
        )
    if isinstance(step, Deliver) and seen.answer is not None:
        after = fetcher_view(cluster, step.dst, step.src)
        return deadline_violations(fetcher, after, timeout) or answer_violations(
            fetcher, after, seen.answer, backoff
        )
    if isinstance(step, ShrinkIsr):
        now, lag, before = cluster.clock.now_ms, judge.lag_times, seen.state
        if cluster.variant.isr == "alter-partition":
            proposed = _proposed_isr(recorder, step.broker)
            in_flight = seen.isr_in_flight
            return proposal_violations(lag, step.broker, before, in_flight, proposed, now)
        return shrink_violations(lag, step.broker, before, recorder.state, now)
    return []


def client_violations(r: Recorder, books: Arrivals) -> list[Violation]:
    """The answers the last step sent to the client, and the client's requests held too
    long (`client_answers`), by the ledger of their arrivals."""
    found = client_answer_violations(r.cluster, r.tp, r.sent, r.state, books.arrivals)
    held = held_request_violations(r.cluster, r.state, books.waiting, books.answered, books.arrived)
    return found + held
