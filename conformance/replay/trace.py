"""Replay a trace's spec actions on the implementation, comparing states step by step.

A trace (a TLC counterexample from `kreplica check`, a golden trace, a fuzz trace) names one
spec action per state. `replay_trace` turns each into the simulator step that performs it, applies
it through the Recorder, and compares the projected state with the trace's state, variable by
variable (a trace may omit variables; only those it has are compared). It stops at the first
step that no simulator step reproduces, or whose state differs.

A trace kreplica recorded (`hidden_steps` in its `#meta`) also holds what the spec cannot say:
before each state, the impl steps the spec did not see (clock ticks, a client's send, a fetcher
iteration in backoff), and the simulated clock after its action. The replay performs those
steps first and reaches the recorded time exactly, so the action it then derives from the
trace's name and arguments meets the implementation as the recorded run left it: a fetcher's
backoff over, a follower lagging by just as long.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kreplica.conformance.bridge.local_partitions import SPEC_TP, spec_cluster
from kreplica.conformance.bridge.projection import CONTROLLER, State, delivered_to_running
from kreplica.conformance.bridge.recorder import Event, Recorder, SpecRecorder
from kreplica.conformance.bridge.step_codec import step_from_json
from kreplica.conformance.errors import TraceError
from kreplica.conformance.judges.arrivals import Arrivals
from kreplica.conformance.judges.checked_steps import client_violations
from kreplica.conformance.judges.invariants import violations
from kreplica.conformance.tla.itf import ItfState, ItfTrace
from kreplica.conformance.tla.vocabulary import VARIABLES
from kreplica.impl.broker import Outgoing
from kreplica.impl.cluster import Cluster, SimulationError
from kreplica.impl.config import BrokerConfig
from kreplica.impl.messages import (
    RECORD_SIZE_BYTES,
    AlterPartitionRequest,
    AlterPartitionResponse,
    FetchRequest,
    FetchResponse,
    LeaderAndIsrRequest,
    ListOffsetsRequest,
    ListOffsetsResponse,
    Message,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    ProduceRequest,
)
from kreplica.impl.network import Envelope
from kreplica.impl.steps import (
    CheckpointHighWatermarks,
    Crash,
    DeleteRecords,
    Deliver,
    DetectFailure,
    DoWork,
    Drop,
    Elect,
    FailLogDir,
    Flush,
    HaltOnLogDirFailure,
    Produce,
    Restart,
    ShrinkIsr,
    Step,
    Tick,
    UncleanShutdown,
)
from kreplica.impl.variants import SPEC_CONSTANTS, Variant

TP = SPEC_TP
# A produce must outlive the ISR lag that a LeaderShrinkIsr replay waits for.
PRODUCE_TIMEOUT_MS = 10 * BrokerConfig().replica_lag_time_max_ms

# The messages each delivering action takes off the network.
DELIVERED: dict[str, type] = {
    "LeaderHandleFetch": FetchRequest,
    "FollowerHandleFetchResponse": FetchResponse,
    "LeaderHandleOffsetsForLeaderEpoch": OffsetsForLeaderEpochRequest,
    "FollowerHandleOffsetsForLeaderEpochResponse": OffsetsForLeaderEpochResponse,
    "LeaderHandleListOffsets": ListOffsetsRequest,
    "FollowerHandleListOffsetsResponse": ListOffsetsResponse,
    "BecomeLeaderOrFollower": LeaderAndIsrRequest,
}
# One iteration of a follower's fetcher thread towards its leader.
FETCHER_ACTIONS = (
    "FollowerTruncateToHighWatermark",
    "FollowerSendFetch",
    "FollowerSendOffsetsForLeaderEpoch",
)
# The ISR change of isr=alter-partition, which the spec does not model
# (vocabulary.IMPL_ONLY_ACTIONS): the message each action takes off the network, and
# whether the controller takes it.
ALTER_PARTITION_DELIVERIES: dict[str, tuple[type, bool]] = {
    "ControllerHandleAlterPartition": (AlterPartitionRequest, True),
    "LeaderHandleAlterPartitionResponse": (AlterPartitionResponse, False),
}
BROKER_STEPS: dict[str, Callable[[int], Step]] = {
    "Crash": Crash,
    "UncleanShutdown": UncleanShutdown,
    "Restart": Restart,
    "ControllerDetectFailure": DetectFailure,
    "Flush": Flush,
    "CheckpointHighWatermarks": CheckpointHighWatermarks,
    "FailLogDir": lambda broker: FailLogDir(broker, TP),
    "HaltOnLogDirFailure": HaltOnLogDirFailure,
}


# Spec actions the implementation does not model (R18, R20): only real Kafka traces
# (`kreplica kafka trace`) take them, and no simulator step can replay them.
SPEC_ONLY_ACTIONS = frozenset({"Reregister", "ControlledShutdown", "DeposedLeaderIncrementHw"})
# Every action of the spec (the names traces use).
SPEC_ACTIONS = frozenset(
    {
        "Produce",
        "ControllerElectLeader",
        "LeaderShrinkIsr",
        "ExpireDelayedProduce",
        "DeleteRecords",
        "LoseMessage",
    }
    | set(DELIVERED)
    | set(BROKER_STEPS)
    | set(FETCHER_ACTIONS)
    | SPEC_ONLY_ACTIONS
)
# What a replay takes: the spec's actions the implementation models, and the recorder's names
# for the steps of isr=alter-partition (an implementation-only variant: replayed, never
# conformed).
REPLAYABLE_ACTIONS = (SPEC_ACTIONS - SPEC_ONLY_ACTIONS) | set(ALTER_PARTITION_DELIVERIES)


@dataclass(frozen=True)
class Setup:
    """What a replay needs to build the cluster: replicas, variant and broker config."""

    replicas: int = 3
    variant: Variant = field(default_factory=Variant)
    min_insync_replicas: int = 1
    fetch_max_records: int = 1_048_576
    batch_max_records: int | None = None
    """message.max.bytes in records, if the trace records it (a fuzz run's is 1:
    `setup.BATCH_MAX_RECORDS`); else the broker's default."""
    produce_timeout_ms: int = PRODUCE_TIMEOUT_MS
    """The producer's request timeout: a recorded run's own (the simulator's default);
    longer for a TLC trace, whose LeaderShrinkIsr waits must not expire produces."""
    local_records: int = 0
    """Records in each broker's local partition (`local_partitions`): a fuzz run's, if the trace
    records it; 0 (t-0 alone) for a TLC trace."""
    hw_checkpoint_interval_ms: int | None = (
        BrokerConfig.replica_high_watermark_checkpoint_interval_ms
    )
    """How often the HW checkpoint task runs on the clock: a recorded run's own (the
    simulator's default); never for a TLC trace, whose CheckpointHighWatermarks actions say
    when it runs (its ticks must not run it)."""

    def cluster(self) -> Cluster:
        """A fresh cluster answering follower fetches at once, as the spec does."""
        config = BrokerConfig(
            replica_fetch_wait_max_ms=0,
            min_insync_replicas=self.min_insync_replicas,
            replica_fetch_max_bytes=self.fetch_max_records,
            replica_high_watermark_checkpoint_interval_ms=self.hw_checkpoint_interval_ms,
        )
        if self.batch_max_records is not None:
            config = replace(config, max_message_bytes=self.batch_max_records * RECORD_SIZE_BYTES)
        return spec_cluster(self.replicas, self.variant, config, self.local_records)


@dataclass(frozen=True)
class Difference:
    """One variable whose value in the implementation differs from the trace's."""

    variable: str
    expected: Any
    got: Any


@dataclass
class ReplayResult:
    """The verdict of a replay: conforms, or the first step that does not."""

    steps: int
    conforms: bool
    step: int | None = None
    action: str | None = None
    args: dict[str, Any] = field(default_factory=dict)
    reason: str = ""
    differences: list[Difference] = field(default_factory=list)
    violations: list[tuple[str, str]] = field(default_factory=list)
    cannot_replay: bool = False
    """The implementation cannot take the step at all (SimulationError): not a difference."""


def setup_from_config(path: Path) -> Setup:
    """The replicas, variant and configuration that a model config (spec/*.cfg) names."""
    text = path.read_text(encoding="utf-8")

    def constant(name: str) -> str | None:
        match = re.search(rf"^\s*{name}\s*=\s*(.+?)\s*$", text, re.M)
        return match.group(1) if match else None

    values = {
        dim: (constant(const) or '"' + Variant().__dict__[dim] + '"').strip('"')
        for dim, const in SPEC_CONSTANTS.items()
    }
    bugs = re.findall(r'"([a-z-]+)"', constant("Bugs") or "")
    replicas = len(re.findall(r"\d+", constant("Replicas") or "{1, 2, 3}"))
    return Setup(
        replicas=replicas,
        variant=Variant(bugs=frozenset(bugs), **values),
        min_insync_replicas=int(constant("MinIsr") or 1),
        fetch_max_records=int(constant("MaxFetchRecords") or 1_048_576),
        hw_checkpoint_interval_ms=None,
    )


class Replayer:
    """Drives a cluster through a trace's actions and compares each state."""

    def __init__(self, setup: Setup) -> None:
        self.produce_timeout_ms = setup.produce_timeout_ms
        self.cluster = setup.cluster()
        self.recorder = SpecRecorder(self.cluster, TP, {"source": "replay"})
        self.arrivals = Arrivals()
        """The client's requests and their answers, for `client_answers` to judge."""
        self.wrong_answers: list[tuple[str, str]] = []
        """The first wrong answer to the client (client_answers), once one is sent."""
        self.queued: list[Event] = []
        self._pending: list[Event] = []
        self.until_ms: int | None = None
        """The simulated clock the current action must leave (a recorded trace's `now_ms`)."""

    def perform(
        self, action: str, args: dict[str, Any], expected: dict[str, Any] | None = None
    ) -> Event:
        """Reproduce one spec action; TraceError if no simulator step does. Where several
        steps could perform it (which message of a link, whether to wait out a backoff), the
        first whose projected state equals `expected` is taken."""
        if self.queued and (self.queued[0].action, self.queued[0].args) == (action, args):
            return self.queued.pop(0)
        if self.queued:
            raise TraceError(f"the implementation already did {self.queued[0].action} here")
        candidates = self.candidates(action, args)
        if len(candidates) > 1 and expected is not None:
            for steps in candidates:
                trial = copy.deepcopy((self.cluster, self.recorder))
                sent = self._outboxes()
                try:
                    event = self._apply(trial[1], steps, action, args)
                except (TraceError, SimulationError):  # a candidate the impl refuses
                    continue
                finally:
                    self._restore_outboxes(sent)
                if not compare(expected, event.state):
                    # Taken again on the real cluster: a copy's callbacks (closures, which
                    # deepcopy shares) still reach the original objects.
                    return self._apply_done(self._apply(self.recorder, steps, action, args))
        return self._apply_done(self._apply(self.recorder, candidates[0], action, args))

    def _apply(
        self, recorder: Recorder, steps: list[Step], action: str, args: dict[str, Any]
    ) -> Event:
        events: list[Event] = []
        for step in steps:
            events += self._record(step) if recorder is self.recorder else recorder.apply(step)
        matching = [i for i, e in enumerate(events) if (e.action, e.args) == (action, args)]
        if not matching:
            did = ", ".join(e.action for e in events) or "nothing the spec sees"
            raise TraceError(
                f"the implementation did {did}" + (f" {events[0].args}" if len(events) == 1 else "")
            )
        self._pending = events[matching[0] + 1 :]
        return events[matching[0]]

    def _outboxes(self) -> list[tuple[list[Outgoing], int]]:
        """Every broker's outbox and its length now (see _restore_outboxes)."""
        return [(b.outbox, len(b.outbox)) for b in self.cluster.brokers.values()]

    @staticmethod
    def _restore_outboxes(sent: list[tuple[list[Outgoing], int]]) -> None:
        """Drop what a trial put in the real brokers' outboxes: a copied operation's callback
        (a closure, which deepcopy shares) still appends its answer to the original broker's."""
        for outbox, length in sent:
            del outbox[length:]

    def _record(self, step: Step) -> list[Event]:
        """Apply one step through the recorder, and judge what it answered the client: the
        first wrong answer is kept (`client_answers`)."""
        r = self.recorder
        arrival = self.arrivals.before(self.cluster, r.tp, r.state, step)
        events = r.apply(step)
        self.arrivals.after(arrival, r.sent)
        if not self.wrong_answers:
            self.wrong_answers = client_violations(r, self.arrivals)[:1]
        return events

    def _apply_done(self, event: Event) -> Event:
        self.queued = self._pending
        return event

    def candidates(self, action: str, args: dict[str, Any]) -> list[list[Step]]:
        """Every way of performing `action` the trace's state may tell apart (at the recorded
        time, when the trace gives it: each way's own steps after one tick to that time)."""
        first = self.steps_for(action, args)
        found = self._own_candidates(action, args, first)
        if self.until_ms is None:
            return found
        wait = self.until_ms - self.cluster.clock.now_ms
        timed: list[list[Step]] = []
        for steps in found:
            candidate: list[Step] = [Tick(wait)] if wait > 0 else []
            candidate += [s for s in steps if not isinstance(s, Tick)]
            if candidate not in timed:
                timed.append(candidate)
        return timed

    def perform_hidden(self, steps: list[Step]) -> None:
        """Apply steps the trace records as unseen by the spec; TraceError if one is seen,
        SimulationError if the implementation cannot take one."""
        if self.queued and steps:
            raise TraceError(f"the implementation already did {self.queued[0].action} here")
        for step in steps:
            try:
                events = self._record(step)
            except (KeyError, IndexError, ValueError, SimulationError) as err:  # e.g. no message
                raise SimulationError(f"hidden step {step!r} cannot be taken: {err}") from None
            if events:
                raise TraceError(
                    f"the implementation did {events[0].action} {events[0].args} at {step!r}, "
                    "a step the trace records as unseen by the spec"
                )

    def _own_candidates(
        self, action: str, args: dict[str, Any], first: list[Step]
    ) -> list[list[Step]]:
        try:
            if action in DELIVERED and action != "BecomeLeaderOrFollower":
                src, r = self._peer(args), int(args.get("replica", 0))
                queue = self.cluster.network.queue((src, r))
                return [first] + [
                    [Deliver(src, r, i)]
                    for i, env in enumerate(queue)
                    if self._is(env.payload, action, args) and [Deliver(src, r, i)] != first
                ]
            if action == "LoseMessage":
                src, dst = int(args["from"]), int(args["to"])
                n = len(self.cluster.network.queue((src, dst)))
                return [first] + [[Drop(src, dst, i)] for i in range(1, n)]
            if action in FETCHER_ACTIONS:
                wait = self.cluster.config.replica_fetch_backoff_ms
                lag = self.cluster.config.replica_lag_time_max_ms + 1
                return [first, [Tick(wait), *first], [Tick(lag), *first]]
            if action == "LeaderShrinkIsr":
                return [first, *self._shrink_candidates(int(args["replica"]), args["followers"])]
            if action == "ControllerDetectFailure":  # also a failover, or with others (R19, R22)
                r = int(args["replica"])
                found = self.cluster.failover_detections()
                return [first, *[[s] for s in found if getattr(s, "broker", None) == r]]
        except (KeyError, TypeError, ValueError):
            pass
        return [first]

    def steps_for(self, action: str, args: dict[str, Any]) -> list[Step]:
        """The simulator steps that perform one spec action; TraceError for a malformed one."""
        try:
            return self._steps_for(action, args)
        except (KeyError, TypeError, ValueError) as exc:
            raise TraceError(f"action {action} with arguments {args} is malformed: {exc}") from None

    def _steps_for(self, action: str, args: dict[str, Any]) -> list[Step]:
        r = int(args.get("replica", 0))
        if action == "Produce":
            record = int(args["record"])
            queue = self.cluster.network.queue((-1, r))
            for i, envelope in enumerate(queue):  # sent already (a recorded hidden step)
                if isinstance(envelope.payload, ProduceRequest) and any(
                    record in p.record_ids for p in envelope.payload.partitions
                ):
                    return [Deliver(-1, r, i)]
            acks = int(args.get("acks", self.cluster.variant.acks))
            send = Produce(TP, (record,), acks, r, self.produce_timeout_ms)
            return [send, Deliver(-1, r, len(queue))]
        if action in DELIVERED:
            src = 0 if action == "BecomeLeaderOrFollower" else self._peer(args)
            return [Deliver(src, r, self._index(src, r, action, args))]
        if action in ALTER_PARTITION_DELIVERIES:
            kind, to_controller = ALTER_PARTITION_DELIVERIES[action]
            src, dst = (r, CONTROLLER) if to_controller else (CONTROLLER, r)
            return [Deliver(src, dst, self._first_of(src, dst, kind, action))]
        if action in BROKER_STEPS:
            return [BROKER_STEPS[action](r)]
        if action == "ControllerElectLeader":
            return [Elect(TP, r)]
        if action in FETCHER_ACTIONS:
            return [DoWork(r, int(args["leader"]))]
        if action == "LeaderShrinkIsr":
            return [Tick(self.cluster.config.replica_lag_time_max_ms + 1), ShrinkIsr(r)]
        if action == "ExpireDelayedProduce":
            return [Tick(self.produce_timeout_ms + 1)]
        if action == "DeleteRecords":
            return [DeleteRecords(TP, int(args["offset"]))]
        if action == "LoseMessage":
            return [Drop(int(args["from"]), int(args["to"]), 0)]
        raise TraceError(f"unknown action {action!r}")

    def _shrink_candidates(self, leader: int, followers: Any) -> list[list[Step]]:
        """ShrinkIsr right now, or after just enough time for exactly `followers` to lag."""
        partition = self.cluster.partition(leader, TP)
        if partition is None:
            return []
        lag = self.cluster.config.replica_lag_time_max_ms
        now = self.cluster.clock.now_ms
        caught = [
            partition.remote_replicas[f].last_caught_up_time_ms
            for f in followers
            if f in partition.remote_replicas
        ]
        wait = max(0, max(caught, default=now) + lag + 1 - now)
        return (
            [[ShrinkIsr(leader)], [Tick(wait), ShrinkIsr(leader)]]
            if wait
            else [[ShrinkIsr(leader)]]
        )

    @staticmethod
    def _peer(args: dict[str, Any]) -> int:
        return int(args.get("follower", args.get("leader", 0)))

    def _index(self, src: int, dst: int, action: str, args: dict[str, Any]) -> int:
        """Where on link src -> dst the message that `action` handles waits (one sent to the
        broker's running incarnation: a message to an earlier one is not in the spec's msgs)."""
        return self._position(
            src,
            dst,
            action,
            lambda e: delivered_to_running(self.cluster, e) and self._is(e.payload, action, args),
        )

    def _first_of(self, src: int, dst: int, kind: type, action: str) -> int:
        """Where on link src -> dst the first message of `kind` waits."""
        return self._position(src, dst, action, lambda e: isinstance(e.payload, kind))

    def _position(self, src: int, dst: int, action: str, wanted: Callable[[Envelope], bool]) -> int:
        """The index of the first `wanted` message on link src -> dst; TraceError if none."""
        for i, envelope in enumerate(self.cluster.network.queue((src, dst))):
            if wanted(envelope):
                return i
        raise TraceError(f"no message for {action} on link {src} -> {dst}")

    @staticmethod
    def _is(payload: Message, action: str, args: dict[str, Any]) -> bool:
        if not isinstance(payload, DELIVERED[action]):
            return False
        if isinstance(payload, LeaderAndIsrRequest):
            return any(
                s.tp == TP and s.leader_epoch == args["epoch"] for s in payload.partition_states
            )
        return True


def compare(expected: dict[str, Any], got: State) -> list[Difference]:
    """The variables of `expected` whose values differ in `got`."""
    return [
        Difference(name, value, got.get(name))
        for name, value in expected.items()
        if name in VARIABLES and got.get(name) != value
    ]


def hidden_steps(trace: ItfTrace) -> list[list[Step]] | None:
    """Each state's hidden steps, decoded, if kreplica recorded the trace (None otherwise);
    TraceError naming the state for one that is not a list of steps."""
    if trace.meta.get("hidden_steps") is not True:
        return None
    decoded: list[list[Step]] = []
    for index, state in enumerate(trace.states):
        raw = state.meta.get("hidden", [])
        where = f"state {index}: '#meta'.hidden"
        if not isinstance(raw, list):
            raise TraceError(f"{where} must be a list of steps")
        decoded.append([step_from_json(h, f"{where}[{i}]") for i, h in enumerate(raw)])
    return decoded


def replay_trace(trace: ItfTrace, setup: Setup) -> ReplayResult:
    """Replay every action of `trace`; the first step that differs, or 'conforms'. TraceError
    for hidden steps that are not steps (see `hidden_steps`)."""
    hidden = hidden_steps(trace)
    replayer = Replayer(setup)
    first = trace.states[0].values
    diffs = compare(first, replayer.recorder.state)
    if diffs:
        return ReplayResult(0, False, 0, "Init", {}, "the initial states differ", diffs)
    for index, state in enumerate(trace.states[1:], start=1):
        before = None if hidden is None else hidden[index]
        result = _replay_step(replayer, index, state, before)
        if result is not None:
            return result
    found = violations(replayer.recorder.state, variant=setup.variant) + replayer.wrong_answers
    return ReplayResult(len(trace.states) - 1, True, violations=found)


def _replay_step(
    replayer: Replayer, index: int, state: ItfState, hidden: list[Step] | None
) -> ReplayResult | None:
    """Perform one state's action (in a recorded trace, after its hidden steps and at its
    recorded time); a failing ReplayResult, or None when it matches."""
    action, args = state.action or "", dict(state.args)
    try:
        if hidden is not None:
            replayer.perform_hidden(hidden)
            now = state.meta.get("now_ms")
            replayer.until_ms = now if isinstance(now, int) and not isinstance(now, bool) else None
        event = replayer.perform(action, args, state.values)
    except TraceError as exc:
        return ReplayResult(index, False, index, action, args, str(exc))
    except SimulationError as exc:
        return ReplayResult(index, False, index, action, args, str(exc), cannot_replay=True)
    diffs = compare(state.values, event.state)
    if diffs:
        reason = "the states differ: " + ", ".join(d.variable for d in diffs)
        return ReplayResult(index, False, index, action, args, reason, diffs)
    return None
