"""Record a run of the implementation as an ITF trace in the spec's vocabulary.

`Recorder(cluster, tp).apply(step)` performs one simulator step and appends one ITF state per
spec action that the step performed, named as the spec names it, with its arguments. A step
the spec does not see (a client sending, a message to a dead broker) changes no spec variable
and is recorded as nothing: the spec stutters. A Tick can be several spec actions (one per
delayed produce that expires); the states between them differ only in `pending`.

Each state's `#meta` holds the impl step that performed its action (`step`, for reading), the
simulated clock after it (`now_ms`) and, under `hidden`, the steps since the previous state
that the spec did not see (clock ticks, a client's send, a fetcher iteration in backoff), as
`step_codec` writes them. They change no spec variable, but they do change the
implementation: a tick ends a fetcher's backoff or makes a follower lag. `replay` performs
them before the action, so a recorded trace replays exactly.
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass, field
from typing import Any

from kreplica.conformance.bridge.local_partitions import SPEC_TP
from kreplica.conformance.bridge.projection import (
    CLIENT,
    Projector,
    State,
    delivered_to_running,
    log_start_of,
)
from kreplica.conformance.bridge.step_codec import step_to_json
from kreplica.conformance.bridge.touch import brokers_touched, client_links_only, client_only
from kreplica.conformance.tla.itf import ItfState, ItfTrace
from kreplica.conformance.tla.vocabulary import IMPL_ONLY_ACTIONS, VARIABLES
from kreplica.impl.cluster import Cluster
from kreplica.impl.fetcher import AbstractFetcherThread
from kreplica.impl.messages import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    FetchRequest,
    FetchResponse,
    LeaderAndIsrRequest,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    ProduceRequest,
    TopicPartition,
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
    Restart,
    ShrinkIsr,
    Step,
    Tick,
    UncleanShutdown,
)

Args = dict[str, Any]


# Responses named by the action that handles them at the follower.
RESPONSE_HANDLERS: dict[type, str] = {
    FetchResponse: "FollowerHandleFetchResponse",
    OffsetsForLeaderEpochResponse: "FollowerHandleOffsetsForLeaderEpochResponse",
    ListOffsetsResponse: "FollowerHandleListOffsetsResponse",
}

# Steps that are one spec action of one broker.
BROKER_STEPS: dict[type, str] = {
    Crash: "Crash",
    UncleanShutdown: "UncleanShutdown",
    Restart: "Restart",
    DetectFailure: "ControllerDetectFailure",
    Flush: "Flush",
    CheckpointHighWatermarks: "CheckpointHighWatermarks",
    FailLogDir: "FailLogDir",
    HaltOnLogDirFailure: "HaltOnLogDirFailure",
}


NO_OPS = frozenset(
    {
        "LoseMessage",
        "Flush",
        "CheckpointHighWatermarks",
        "FailLogDir",
        "HaltOnLogDirFailure",
        *IMPL_ONLY_ACTIONS,
    }
)
"""Actions whose step may change nothing (a flush of a flushed log, a checkpoint of the HW it
holds, a halt of a broker whose log dir has not failed, an ISR change refused): recorded only
when the state moves."""


@dataclass(frozen=True)
class Event:
    """One spec action performed by the implementation, and the state it led to."""

    action: str
    args: Args
    state: State
    step: str
    hidden: tuple[Step, ...] = field(default=())
    """The steps before this action that the spec did not see (see the module docstring)."""
    now_ms: int | None = None
    """The simulated clock after the action (None for the initial state)."""


def delivery_action(
    cluster: Cluster,
    step: Deliver | Drop,
    projector: Projector | None = None,
    tp: TopicPartition = SPEC_TP,
) -> tuple[str, Args] | None:
    """The spec action that delivering (or dropping) the message at `step` performs for
    partition `tp`; with a projector, None for a message that is not in the spec's `msgs`.
    A LeaderAndIsr or a fetcher's request about other partitions only (a broker's local
    partition, `local_partitions`) performs none."""
    envelope = cluster.network.queues[(step.src, step.dst)][step.index]
    payload = envelope.payload
    src, dst = step.src, step.dst
    if isinstance(payload, ProduceRequest) and isinstance(step, Deliver):
        if not delivered_to_running(cluster, envelope):
            return None
        records = [r for p in payload.partitions for r in p.record_ids]
        record = records[0] if records else -1
        return "Produce", {"replica": dst, "record": record, "acks": payload.acks}
    # isr=alter-partition's ISR change (vocabulary.IMPL_ONLY_ACTIONS): recorded so that the
    # fuzzer follows the state and judges it; `kreplica conform` refuses the variant
    if isinstance(payload, AlterPartitionRequest) and isinstance(step, Deliver):
        return "ControllerHandleAlterPartition", {"replica": src}
    if isinstance(payload, AlterPartitionResponse) and isinstance(step, Deliver):
        if not delivered_to_running(cluster, envelope):
            return None
        return "LeaderHandleAlterPartitionResponse", {"replica": dst}
    if not delivered_to_running(cluster, envelope) or isinstance(payload, ProduceRequest):
        return None  # not in the spec's msgs: a message to a dead incarnation, or a client's
    if projector is not None and not projector.shown(envelope):
        return None  # not in the spec's msgs: the answer to a request given up on
    if isinstance(step, Drop):
        return "LoseMessage", {"from": src, "to": dst}
    if isinstance(payload, LeaderAndIsrRequest):
        state = next((p for p in payload.partition_states if p.tp == tp), None)
        if state is None:
            return None
        args = {"replica": dst, "epoch": state.leader_epoch, "leader": state.leader}
        return "BecomeLeaderOrFollower", args
    if isinstance(payload, FetchRequest):
        fetch = next((p for p in payload.partitions if p.tp == tp), None)
        if fetch is None:
            return None
        args = {"replica": dst, "follower": src, "offset": fetch.fetch_offset}
        return "LeaderHandleFetch", args
    if isinstance(payload, OffsetsForLeaderEpochRequest):
        asked = next((p for p in payload.partitions if p.tp == tp), None)
        if asked is None:
            return None
        args = {"replica": dst, "follower": src, "requested": asked.leader_epoch}
        return "LeaderHandleOffsetsForLeaderEpoch", args
    if isinstance(payload, ListOffsetsRequest):
        if all(p.tp != tp for p in payload.partitions):
            return None
        return "LeaderHandleListOffsets", {"replica": dst, "follower": src}
    name = RESPONSE_HANDLERS.get(type(payload))
    return (name, {"replica": dst, "leader": src}) if name else None


def _timed(event: Event, now_ms: int, hidden: tuple[Step, ...]) -> Event:
    """`event` at the clock's `now_ms`, after the `hidden` steps (what `dataclasses.replace`
    would make, without its generic field-by-field copy: one per recorded action)."""
    return Event(event.action, event.args, event.state, event.step, hidden, now_ms)


class Recorder:
    """Applies simulator steps and records the spec actions they perform (an ITF trace)."""

    def __init__(self, cluster: Cluster, tp: TopicPartition, meta: dict[str, Any]) -> None:
        self.cluster = cluster
        self.tp = tp
        self.projector = Projector(cluster, tp)
        self.meta = meta
        self.events: list[Event] = [Event("Init", {}, self.projector.project(), "")]
        # (follower, its incarnation, leader, correlation id) of each fetcher request -> the
        # fetcher that sent it
        self.senders: dict[tuple[int, int, int, int], AbstractFetcherThread] = {}
        self.hidden: list[Step] = []
        """Steps applied since the last recorded action that performed none."""
        self.sent: list[Envelope] = []
        """The messages the last step put on the network."""
        self.touched: Set[int] | None = None
        """The brokers the last step could change (`touch.brokers_touched`; None: any)."""

    @property
    def state(self) -> State:
        """The current spec state."""
        return self.events[-1].state

    def apply(self, step: Step) -> list[Event]:
        """Perform one simulator step; return (and record) the spec actions it performed."""
        before = self.state
        named = self._name(step)
        if (
            isinstance(step, Deliver)
            and named is not None
            and named[0] == "Produce"
            and before["leader"][step.dst - 1] == step.dst
        ):
            self.projector.note_produce_delivered()
        if isinstance(step, Crash | UncleanShutdown):
            self.projector.note_fault(unclean=isinstance(step, UncleanShutdown))
        elif (
            isinstance(step, FailLogDir)
            and step.broker in before["alive"] - before["logDirOffline"]
        ):
            self.projector.note_fault(unclean=False)  # the spec counts it as a crash
        self.touched = brokers_touched(self.cluster, step)
        sent = self.sent = self.cluster.apply(step)
        if isinstance(step, DoWork):
            self._remember_senders(step.broker, step.source, sent)
        elif isinstance(step, Deliver) and (step.src, step.dst) in self._fetcher_links(sent):
            self._remember_senders(step.dst, step.src, sent)  # an answer's next request (R9)
        if client_only(step):  # it changed no spec variable (`touch`)
            after = self.projector.client_step(sent)
        else:
            cause = "unclean-shutdown" if isinstance(step, UncleanShutdown) else None
            quiet = self.touched is not None and client_links_only(step, sent)
            after = self.projector.step(before, cause, self.touched, sent if quiet else None)
        events = self._events(step, named, before, after, sent)
        if not events:
            self.hidden.append(step)
            return events
        now, hidden = self.cluster.clock.now_ms, tuple(self.hidden)
        events = [_timed(e, now, hidden if i == 0 else e.hidden) for i, e in enumerate(events)]
        self.hidden = []
        self.events.extend(events)
        return events

    def _fetcher(self, broker: int, source: int) -> AbstractFetcherThread | None:
        manager = self.cluster.brokers[broker].replica_manager.replica_fetcher_manager
        return manager.fetcher_for(source)

    @staticmethod
    def _fetcher_links(sent: list[Envelope]) -> set[tuple[int, int]]:
        """(leader, follower) of the LIST_OFFSETS requests among `sent`: the one request a
        fetcher sends on an answer (an out-of-range reset's next call, R9)."""
        return {(e.dst, e.src) for e in sent if isinstance(e.payload, ListOffsetsRequest)}

    def _remember_senders(self, broker: int, source: int, sent: list[Envelope]) -> None:
        fetcher = self._fetcher(broker, source)
        if fetcher is not None:
            for e in sent:
                corr = getattr(e.payload, "correlation_id", -1)
                self.senders[(e.src, e.src_incarnation, e.dst, corr)] = fetcher

    def _given_up(self, envelope: Envelope) -> bool:
        """True if the answer in `envelope` is to a request its fetcher has given up on (a
        request timeout): that fetcher awaits nothing, or another request. (An answer to a
        fetcher since shut down, because its leader changed, is one the spec sees as stale.)"""
        fetcher = self._fetcher(envelope.dst, envelope.src)
        corr = getattr(envelope.payload, "correlation_id", -1)
        if (
            fetcher is None
            or self.senders.get((envelope.dst, envelope.dst_incarnation, envelope.src, corr))
            is not fetcher
        ):
            return False
        in_flight = fetcher.in_flight
        return in_flight is None or in_flight.correlation_id != corr

    def _name(self, step: Step) -> tuple[str, Args] | None:
        """The action a step performs, decided before it runs (None: decided after, or a
        message that is not on the link, which the simulator refuses: SimulationError)."""
        if isinstance(step, Deliver | Drop):
            if self.cluster.network.peek((step.src, step.dst), step.index) is None:
                return None
            named = delivery_action(self.cluster, step, self.projector, self.tp)
            envelope = self.cluster.network.queues[(step.src, step.dst)][step.index]
            answer = named is not None and named[0] in RESPONSE_HANDLERS.values()
            if isinstance(step, Deliver) and answer and self._given_up(envelope):
                # Kafka closed the connection the answer was to travel on: it is lost
                return "LoseMessage", {"from": step.src, "to": step.dst}
            return named
        if isinstance(
            step,
            Crash
            | UncleanShutdown
            | FailLogDir
            | HaltOnLogDirFailure
            | Restart
            | DetectFailure
            | Flush
            | CheckpointHighWatermarks,
        ):
            return BROKER_STEPS[type(step)], {"replica": step.broker}
        if isinstance(step, Elect):
            return "ControllerElectLeader", {"replica": step.broker}
        return None

    def _events(
        self,
        step: Step,
        named: tuple[str, Args] | None,
        before: State,
        after: State,
        sent: list[Envelope],
    ) -> list[Event]:
        """The spec actions of one step, with the states between them."""
        if isinstance(step, DoWork):
            return self._do_work_events(step, before, after, repr(step), sent)
        if isinstance(step, ShrinkIsr):
            out = before["isr"][step.broker - 1] - after["isr"][step.broker - 1]
            if not out:
                return []
            args = {"replica": step.broker, "followers": out}
            return [Event("LeaderShrinkIsr", args, after, repr(step))]
        if isinstance(step, Tick):
            return self._tick_events(before, after, repr(step))
        if isinstance(step, DeleteRecords):
            return self._delete_records_events(before, after, repr(step))
        if named is None or (after == before and named[0] in NO_OPS):
            return []  # most steps: no action, and no text of the step to write
        if named[0] in ("ControllerDetectFailure", "ControllerElectLeader") and after == before:
            return []
        return [Event(named[0], named[1], after, repr(step))]

    def _do_work_events(
        self, step: DoWork, before: State, after: State, text: str, sent: list[Envelope]
    ) -> list[Event]:
        """One fetcher iteration: truncate to the HW and fetch, send a fetch, or ask for epochs
        (the request is not in msgs when the leader is down: the network lost it)."""
        b = step.broker
        kinds = {type(e.payload) for e in sent}
        args: Args = {"replica": b, "leader": step.source}
        truncated = before["fetchState"][b - 1] == "Truncating" and after["fetchState"][b - 1] in (
            "Fetching",
            "Failed",  # the truncation failed (a failed log dir)
        )
        if truncated:
            return [Event("FollowerTruncateToHighWatermark", args, after, text)]
        if FetchRequest in kinds:
            return [Event("FollowerSendFetch", args, after, text)]
        if OffsetsForLeaderEpochRequest in kinds:
            return [Event("FollowerSendOffsetsForLeaderEpoch", args, after, text)]
        if after != before:
            return [Event("Unmapped", {"replica": b}, after, text)]
        return []

    @staticmethod
    def _delete_records_events(before: State, after: State, text: str) -> list[Event]:
        """DeleteRecords on the leader whose log start offset it raised (none: a no-op)."""
        return [
            Event("DeleteRecords", {"replica": r, "offset": log_start_of(after, r)}, after, text)
            for r in range(1, len(after["log"]) + 1)
            if before["log"][r - 1] != after["log"][r - 1]
        ]

    def _tick_events(self, before: State, after: State, text: str) -> list[Event]:
        """The clock's work: delayed produces that timed out (REQUEST_TIMED_OUT), then HW
        checkpoints written, one action each (they change different variables)."""
        gone = sorted(before["pending"] - after["pending"], key=repr)
        written = [
            r
            for r in range(1, len(after["hwCheckpoint"]) + 1)
            if before["hwCheckpoint"][r - 1] != after["hwCheckpoint"][r - 1]
        ]
        events: list[Event] = []
        pending = set(before["pending"])
        checkpoints = before["hwCheckpoint"]
        for p in gone:
            pending.discard(p)
            state = {**after, "pending": frozenset(pending), "hwCheckpoint": checkpoints}
            args: Args = {"replica": p["replica"], "record": p["record"]}
            events.append(Event("ExpireDelayedProduce", args, state, text))
        for r in written:
            checkpoints = (*checkpoints[: r - 1], after["hwCheckpoint"][r - 1], *checkpoints[r:])
            state = {**after, "hwCheckpoint": checkpoints}
            events.append(Event("CheckpointHighWatermarks", {"replica": r}, state, text))
        if not events and after != before:
            events.append(Event("Unmapped", {}, after, text))
        return events

    def trace(self) -> ItfTrace:
        """The run so far as an ITF trace (action, arguments, impl step and hidden steps in
        #meta)."""
        states = [ItfState(e.state, e.action, e.args, meta=_meta(e)) for e in self.events]
        return ItfTrace(list(VARIABLES), states, meta={**self.meta, "hidden_steps": True})


class SpecRecorder(Recorder):
    """The recorder, except that some client requests are no spec action: a consumer's FETCH
    and LIST_OFFSETS (the spec's reads are its `committed` history; `client_answers` judges
    their answers), and a PRODUCE the broker refuses before the spec's Produce could take it:
    at a broker that does not lead, with invalid acks, to another partition, or in a batch
    that is not one record (the spec's Produce appends one; message.max.bytes refuses two in
    the fuzzer's set-up). The fuzzer retries such a record at once, as a producer does, so the
    spec's producer sends it once."""

    def _name(self, step: Step) -> tuple[str, Args] | None:
        """The spec action of a step; None for a client request the spec does not see."""
        if isinstance(step, Deliver) and step.src == CLIENT:
            envelope = self.cluster.network.peek((step.src, step.dst), step.index)
            payload = None if envelope is None else envelope.payload  # None: refused
            if isinstance(payload, FetchRequest | ListOffsetsRequest) and payload.replica_id < 0:
                return None
            if isinstance(payload, ProduceRequest) and not self._spec_produce(step.dst, payload):
                return None
        return super()._name(step)

    def _spec_produce(self, broker: int, request: ProduceRequest) -> bool:
        """True if the spec's Produce(broker, acks) is the one to judge `request`."""
        s = self.state
        return (
            request.acks in (-1, 0, 1)
            and all(p.tp == self.tp and len(p.record_ids) == 1 for p in request.partitions)
            and broker in s["alive"]
            and s["leader"][broker - 1] == broker
        )


def _meta(event: Event) -> dict[str, Any]:
    """A state's `#meta` beyond its action: the impl step, and the hidden steps before it."""
    meta: dict[str, Any] = {"step": event.step} if event.step else {}
    if event.now_ms is not None:
        meta["now_ms"] = event.now_ms
    if event.hidden:
        meta["hidden"] = [step_to_json(s) for s in event.hidden]
    return meta
