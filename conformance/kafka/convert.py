"""A real run's broker events, converted into one ITF trace in the spec's vocabulary.

Theory of operation. `events.read_run` gives every step the brokers' hooks recorded, in one
order. Each becomes at most one step of spec/KafkaReplication.tla, named as the spec names
its actions, with the arguments the spec logs (`vocabulary.ACTION_ARGS`), and the state after
it: each replica's variables as its own broker last reported them (a broker reports the
Partition's state with every event of its own), the cluster's as the harness and the
controller's hooks report them. `conformance/validate` then checks the trace with TLC like any
other: every step must be a successor, under the logged action, of the state before it.

| broker event (hook) | spec step |
|---|---|
| makeLeader / makeFollower | BecomeLeaderOrFollower(replica, epoch, leader) |
| appendRecordsToLeader | Produce(replica, record, acks); a refusal as NOT_LEADER is no step |
| readFromLocalLog + updateFollowerFetchState | LeaderHandleFetch(replica, follower, offset) |
| readFromLocalLog in DelayedFetch.onComplete | see "A parked fetch" below |
| buildFetch | FollowerSendFetch(replica, leader) |
| processPartitionData | FollowerHandleFetchResponse(replica, leader) |
| fetchEpochEndOffsets (its start) | FollowerSendOffsetsForLeaderEpoch(replica, leader) |
| lastOffsetForLeaderEpoch | LeaderHandleOffsetsForLeaderEpoch(replica, follower, requested) |
| truncate after fetchEpochEndOffsets | FollowerHandleOffsetsForLeaderEpochResponse(replica, |
|  | leader) |
| truncate with no epoch asked | FollowerTruncateToHighWatermark(replica, leader) |
| shrinkIsr | LeaderShrinkIsr(replica, followers) |
| checkpointHighWatermarks (a new HW) | CheckpointHighWatermarks(replica) |
| controller: onBrokerFailure(r) | ControllerDetectFailure(r) |
| controller: onBrokerStartup(r) | Restart(r); Reregister(r) if r never stopped |
| controller failover: r offline, then an election | one ControllerDetectFailure(r), two epochs |
| controller: leader and others lost in one event | one ControllerDetectFailure(leader) (R22) |
| controller: a decision while r shuts down | ControlledShutdown(r) |
| updateFollowerFetchState after makeFollower | DeposedLeaderIncrementHw(r), if its HW rose |
| controller: another LeaderAndIsr decision | ControllerElectLeader(leader) |
| harness: crash (SIGKILL) | Crash(r) |

Record identity. The spec's records are ids 1, 2, ... in the order producers send them
(`nextRecord`); a real record is the append at (leader epoch, offset) of a leader, which every
copy keeps. Each Produce step takes the next id, and every log entry is named by the id of
the append at its (epoch, offset).

A parked fetch. A follower's fetch that finds nothing to read is parked in the leader's
DelayedFetch purgatory (replica.fetch.wait.max.ms) and read again when it completes; the
spec answers every fetch at once. The conversion takes a parked fetch as what it is
equivalent to for both sides: the leader's LeaderHandleFetch when the fetch arrived (its
update of the follower's LEO, the ISR, the HW), whose empty answer the follower never
handles, and the same fetch sent again (FollowerSendFetch, which gives up on that answer, as
the spec's fetcher does under an unreliable network) and handled when the purgatory
completes it, whose answer the follower then handles. Those two steps are the only ones no
hook saw; neither changes a recorded variable.

Why one long module: every handler reads and writes the same observed state (each replica's
report, the controller's variables, the fetch rounds) in event order, and the decisions above
are about how they meet; split by concern it would be one class in pieces. The event order
itself (`order`) is apart.

Hidden variables (never recorded, so TLC searches them): the messages in flight, the
fetcher's state, the recovery point, and the history (pending and acknowledged produces,
what was committed, records removed, counters). The spec computes every one of them from the
steps; `AckedRecordsNeverLost` reads `acked` as the spec derives it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kreplica.conformance.errors import KreplicaError
from kreplica.conformance.kafka.events import BROKERS, Event, Recording
from kreplica.conformance.kafka.order import fetch_at_read, fetch_windows, produce_at_append

NO_LEADER = -1
NO_EPOCH = -1
NOT_HOSTED = -2

OBSERVED = (
    "log",
    "hw",
    "hwCheckpoint",
    "epochCache",
    "leaderEpoch",
    "leader",
    "isr",
    "remoteLeo",
    "alive",
    "incarnation",
    "ctrlLive",
    "ctrlLeader",
    "ctrlEpoch",
    "ctrlIsr",
)
"""The spec variables a real trace records; every other one is hidden."""

HIDDEN = (
    "recoveryPoint",
    "fetchState",
    "logDirOffline",
    "msgs",
    "nextRecord",
    "pending",
    "acked",
    "committed",
    "crashes",
    "uncleanShutdowns",
    "removed",
)
"""The spec variables a real trace leaves to TLC."""

CONTROLLER_EVENTS = frozenset(
    {"onControllerFailover", "onBrokerFailure", "onBrokerStartup", "addLeaderAndIsrRequest"}
)
"""The controller's hooks (on whichever broker is the controller)."""

FLUSHING = frozenset(
    {"onControllerFailover", "onBrokerFailure", "onBrokerStartup", "makeLeader", "makeFollower"}
)
"""Events after which the controller is done with a burst of decisions about lost brokers."""

LEADER_STEPS = frozenset(
    {
        "appendRecordsToLeader",
        "updateFollowerFetchState",
        "readFromLocalLog",
        "shrinkIsr",
        "expandIsr",
        "makeLeader",
        "makeFollower",
    }
)
"""A leader's hooks whose steps change what a concurrent fetch's update reports."""

_CLIENT_BROKER = re.compile(r"broker-(\d+)-fetcher")


class ConvertError(KreplicaError):
    """A recording that cannot be turned into a trace (no initial state, an unknown broker)."""


@dataclass
class Replica:
    """What one broker last reported of its Partition, in the spec's terms."""

    log: list[tuple[int, int]] = field(default_factory=list)
    """(epoch, record id) per offset."""
    hw: int = 0
    cache: list[tuple[int, int]] = field(default_factory=list)
    leader_epoch: int = 0
    leader: int = 1
    isr: frozenset[int] = frozenset()
    remote: dict[int, int] = field(default_factory=dict)
    checkpoint: int = 0
    hw_stamp: int = -1
    """The stamp of the report the HW was taken from: a report stamped earlier, reached later
    because the conversion moved a step (a fetch to its read, an append), is older."""


@dataclass
class Step:
    """One spec step: the action, its arguments, the observed state after it, what it omits."""

    action: str
    args: dict[str, Any]
    state: dict[str, Any]
    omit: tuple[str, ...] = ()
    source: str = ""
    nano: int = 0


@dataclass
class FetchRound:
    """A follower's fetch: sent to `leader`, and whether the leader has handled it."""

    leader: int
    handled: bool = False
    lost: bool = False
    """Its answer never reached the follower (the connection failed), whenever the leader
    handles it."""


@dataclass
class Burst:
    """The controller's decisions about the brokers it lost, gathered until it is done."""

    controller: int
    leader_before: int
    gone: list[int] = field(default_factory=list)
    leader: int = NO_LEADER
    epoch: int = -1
    isr: frozenset[int] = frozenset()
    last: Event | None = None

    def decide(self, leader: int, epoch: int, isr: frozenset[int], event: Event) -> None:
        """The controller's latest decision in the burst."""
        self.leader, self.epoch, self.isr, self.last = leader, epoch, isr, event


@dataclass
class Conversion:
    """The trace's steps, and what the conversion noticed on the way."""

    steps: list[Step]
    skipped: dict[str, int]
    notes: list[str]
    replicas: int
    min_isr: int


class Converter:
    """Walks a recording's events in order, keeping the spec's observed state."""

    def __init__(self, recording: Recording, min_isr: int, brokers: Sequence[int] = BROKERS):
        self.recording = recording
        self.brokers = tuple(brokers)
        self.min_isr = min_isr
        self.replicas = {b: Replica() for b in self.brokers}
        self.alive = set(self.brokers)
        self.incarnation = {b: 1 for b in self.brokers}
        self.ctrl_live = set(self.brokers)
        self.ctrl_leader = min(self.brokers)
        self.ctrl_epoch = 0
        self.ctrl_isr = frozenset(self.brokers)
        self.records: dict[tuple[int, int], int] = {}
        self.next_record = 1
        self.steps: list[Step] = []
        self.skipped: dict[str, int] = {}
        self.notes: list[str] = []
        self.unknown: dict[int, set[str]] = {b: set() for b in self.brokers}
        self.rounds: dict[int, FetchRound | None] = {b: None for b in self.brokers}
        self.epoch_asked: dict[int, bool] = {b: False for b in self.brokers}
        self.epoch_answered: set[int] = set()
        """Followers whose OffsetsForLeaderEpoch request a leader's hook saw answered."""
        self.hw_sends: set[int] = set()
        self.started = False
        self.windows: dict[int, list[tuple[int, int, int]]] = {}
        self.by_broker: dict[int, list[Event]] = {}
        self.burst: Burst | None = None
        self.starting: set[int] = set()
        self.late_init: set[int] = set()
        """Brokers whose first LeaderAndIsr (epoch 0) came after Init."""
        self.deposed: dict[int, Event] = {}
        """A fetch's state update made after a LeaderAndIsr deposed its leader (R21)."""
        self.checkpoint_due: dict[int, tuple[int, Event]] = {}
        """A HW checkpoint read from a HW whose step is still to come."""
        self.harness_recorded = any(e.broker == 0 for e in recording.events)

    # -- the walk ---------------------------------------------------------------------------

    def run(self) -> Conversion:
        """Convert every event; the first step is the spec's Init."""
        events = fetch_at_read(produce_at_append(list(self.recording.events)))
        self.windows = fetch_windows(events)
        self.by_broker = {}
        for e in events:
            self.by_broker.setdefault(e.broker, []).append(e)
        start = self._initial(events)
        for event in events[start:]:
            self._dispatch(event)
        self.flush()
        return Conversion(self.steps, self.skipped, self.notes, len(self.brokers), self.min_isr)

    def _initial(self, events: list[Event]) -> int:
        """Find the three epoch-0 LeaderAndIsr handlings; the state after them is Init."""
        first = min(self.brokers)
        pending = {b for b in self.brokers}
        init_index = -1
        for init_index, event in enumerate(events):
            if first not in pending and _later_epoch(event):
                # the controller moved on before a broker cut off from it handled epoch 0:
                # Init is here, and that broker's epoch-0 handling, when it comes, changes
                # nothing Init does not already say of it (no log, epoch 0, leader `first`)
                self.late_init |= pending
                self.notes.append(f"brokers {sorted(pending)}: first LeaderAndIsr after Init")
                init_index -= 1
                break
            if event.broker in pending and event.name in ("makeLeader", "makeFollower"):
                if event.args.get("epoch") == 0:
                    pending.discard(event.broker)
            elif event.broker == 0 and event.name == "crash":
                # killed before it handled the first LeaderAndIsr: what Init says it holds
                # then (an empty log, epoch 0) is what it held, and the rest the crash loses
                r = event.args.get("broker")
                if r in pending:
                    pending.discard(r)
                    self.notes.append(f"broker {r}: killed before its first LeaderAndIsr")
            if not pending:
                break
        else:
            raise ConvertError(
                "the recording never reaches the initial state (every broker handling the "
                f"topic's first LeaderAndIsr, leader {first}, epoch 0)"
            )
        # Events before Init: the epoch-0 LeaderAndIsr handlings become Init; a follower's
        # own steps in between commute with the other brokers' handling of it and are kept.
        self._init_step(events[init_index].nano)
        keep = [
            e
            for e in events[: init_index + 1]
            if (e.broker > 0 or e.name == "crash")
            and e.name not in ("makeLeader", "makeFollower")
            and e.name not in CONTROLLER_EVENTS
            and e.name not in ("checkpointHighWatermarks",)
            and not (e.name.startswith("log.") or e.name.startswith("cache."))
        ]
        for event in keep:
            self._dispatch(event)
        return init_index + 1

    def _init_step(self, nano: int) -> None:
        first = min(self.brokers)
        for b, r in self.replicas.items():
            r.log, r.hw, r.checkpoint = [], 0, 0
            r.cache = [(0, 0)] if b == first else []
            r.leader_epoch, r.leader = 0, first
            r.isr = frozenset(self.brokers) if b == first else frozenset()
            r.remote = {}
        self.started = True
        self._emit("Init", {}, source="the epoch-0 LeaderAndIsr on every broker", nano=nano)

    def _skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1

    def _dispatch(self, event: Event) -> None:
        if self.burst is not None and (event.broker == 0 or event.name in FLUSHING):
            self.flush()
        handler = getattr(self, "_on_" + event.name.replace(".", "_").replace("-", "_"), None)
        if handler is None:
            self._skip(event.name)
            return
        handler(event)

    # -- state ---------------------------------------------------------------------------

    def _record_id(self, epoch: int, offset: int) -> int:
        key = (epoch, offset)
        if key not in self.records:
            # a copy of an append no hook saw (cannot happen while every append is hooked)
            self.notes.append(f"a record at epoch {epoch}, offset {offset} with no append seen")
            self.records[key] = 1000 + len(self.records)
        return self.records[key]

    def _absorb(
        self,
        event: Event,
        remote_of: int | None = None,
        everything: bool = False,
        isr: bool = False,
    ) -> None:
        """Take broker event.broker's reported Partition state as its replica's.

        A leader's request handlers run concurrently: the state a hook reads may already hold
        another follower's fetch whose step comes later, or not yet one whose step came
        before (moved to its read). So the leader's view of its followers' LEOs is taken
        whole only with a LeaderAndIsr (`everything`), and for the one follower a fetch step
        is about (`remote_of`) otherwise; its ISR only with a LeaderAndIsr or a step that
        changes the ISR (`isr`)."""
        s = event.state
        if not s:
            return
        r = self.replicas[event.broker]
        known = self.unknown[event.broker]
        if not s.get("hosted", True) or s.get("leo") is None:
            return
        entries = s.get("log") or []
        r.log = [(int(ep), self._record_id(int(ep), int(off))) for off, ep, *_ in entries]
        log_start = int(s.get("logStart", 0))
        if log_start > 0:
            self.notes.append(f"broker {event.broker}: log start offset {log_start} (not modelled)")
        if event.nano >= r.hw_stamp or everything:
            r.hw, r.hw_stamp = int(s["hw"]), event.nano
        r.cache = [(int(e), int(o)) for e, o in s.get("cache") or []]
        r.leader_epoch = int(s.get("leaderEpoch", r.leader_epoch))
        r.leader = int(s.get("leader", r.leader))
        if r.leader != event.broker:
            r.isr = frozenset()
        elif everything or isr:
            r.isr = frozenset(int(x) for x in s.get("isr") or [])
        remote = {int(k): int(v) for k, v in (s.get("remote") or {}).items()}
        if r.leader != event.broker:
            r.remote = {}
        elif everything:
            r.remote = remote
        elif remote_of is not None and remote_of in remote:
            r.remote[remote_of] = remote[remote_of]
        known.clear()

    def _absorb_fetch(self, event: Event, follower: int) -> None:
        """A fetch's state update, stamped after its read (where its step now is): only what
        it changes, the follower's LEO in the leader's view, the ISR and the HW. The log
        may already hold appends made since the read, whose steps come next."""
        s = event.state
        if not s or not s.get("hosted", True) or s.get("hw") is None:
            return
        r = self.replicas[event.broker]
        if event.nano >= r.hw_stamp:
            r.hw, r.hw_stamp = int(s["hw"]), event.nano
        if int(s.get("leader", -1)) == event.broker:
            # the ISR may hold another follower's expansion, made by a fetch handled at the
            # same time whose step comes later: this fetch adds its own follower only
            reported = frozenset(int(x) for x in s.get("isr") or [])
            r.isr = r.isr | (reported & {follower})
        remote = {int(k): int(v) for k, v in (s.get("remote") or {}).items()}
        if follower in remote:
            r.remote[follower] = remote[follower]

    def _busy(self, update: Event, follower: int) -> bool:
        """Whether the leader did anything else between this fetch's read and its update."""
        for start, end, f in self.windows.get(update.broker, ()):
            if f == follower and end == update.nano:
                return any(
                    start < e.nano < end and e.thread != update.thread
                    for e in self.by_broker.get(update.broker, ())
                    if e.name in LEADER_STEPS
                )
        return False

    def _next_on_thread(self, event: Event) -> Event | None:
        """The next event the same thread of the same broker recorded, past HW updates."""
        found = False
        for e in self.by_broker.get(event.broker, ()):
            if found and e.thread == event.thread and e.name != "updateHighWatermark":
                return e
            found = found or e is event
        return None

    def _concurrent(self, event: Event, follower: int | None) -> bool:
        """Whether another follower's fetch was being handled on this leader when the event
        was stamped: its HW may then hold that fetch's effect before that fetch's step."""
        for start, end, f in self.windows.get(event.broker, ()):
            if f != follower and start < event.nano < end:
                return True
        return False

    def _state(self) -> tuple[dict[str, Any], tuple[str, ...]]:
        """The observed variables, as ITF JSON, and those no report can give now."""
        bs = self.brokers
        reps = [self.replicas[b] for b in bs]
        omit: set[str] = set()
        for b in bs:
            omit |= self.unknown[b]
        state: dict[str, Any] = {
            "log": [[{"epoch": e, "record": rec} for e, rec in r.log] for r in reps],
            "hw": [r.hw for r in reps],
            "hwCheckpoint": [r.checkpoint for r in reps],
            "epochCache": [[{"epoch": e, "startOffset": o} for e, o in r.cache] for r in reps],
            "leaderEpoch": [r.leader_epoch for r in reps],
            "leader": [r.leader for r in reps],
            "isr": [{"#set": sorted(r.isr)} for r in reps],
            "remoteLeo": [[r.remote.get(f, -1) for f in bs] for r in reps],
            "alive": {"#set": sorted(self.alive)},
            "incarnation": [self.incarnation[b] for b in bs],
            "ctrlLive": {"#set": sorted(self.ctrl_live)},
            "ctrlLeader": self.ctrl_leader,
            "ctrlEpoch": self.ctrl_epoch,
            "ctrlIsr": {"#set": sorted(self.ctrl_isr)},
        }
        for name in omit:
            state.pop(name, None)
        return state, tuple(sorted(omit))

    def _emit(
        self,
        action: str,
        args: dict[str, Any],
        source: str,
        nano: int,
        omit: tuple[str, ...] = (),
    ) -> None:
        state, unknown = self._state()
        for name in omit:
            state.pop(name, None)
        self.steps.append(
            Step(action, args, state, tuple(sorted(set(omit) | set(unknown))), source, nano)
        )
        for b, (hw, event) in list(self.checkpoint_due.items()):
            if b in self.alive and self.replicas[b].hw == hw and "hw" in state:
                del self.checkpoint_due[b]
                self.replicas[b].checkpoint = hw
                self._emit_event("CheckpointHighWatermarks", {"replica": b}, event)

    def _emit_event(
        self, action: str, args: dict[str, Any], event: Event, omit: tuple[str, ...] = ()
    ) -> None:
        self._emit(action, args, f"{event.where} {event.name}", event.nano, omit)

    def _leader_of(self, broker: int) -> int:
        return self.replicas[broker].leader

    # -- leadership ----------------------------------------------------------------------

    def _on_makeLeader(self, event: Event) -> None:
        self._leadership(event)

    def _on_makeFollower(self, event: Event) -> None:
        self._leadership(event)

    def _leadership(self, event: Event) -> None:
        b = event.broker
        if b in self.late_init and event.args.get("epoch") == 0:
            self.late_init.discard(b)
            self._skip("a first LeaderAndIsr (epoch 0) handled after Init")
            return
        if b in self.starting and (b not in self.alive or b not in self.ctrl_live):
            self.starting.discard(b)
            self._back(b, event)  # the controller's onBrokerStartup sent this LeaderAndIsr
        if b not in self.alive:
            self._skip("a LeaderAndIsr on a broker the controller has not seen restart")
        self._absorb(event, everything=True)
        self.rounds[b] = None
        self.epoch_asked[b] = False
        self.hw_sends.discard(b)
        args = {
            "replica": b,
            "epoch": int(event.args.get("epoch", -1)),
            "leader": int(event.args.get("leader", NO_LEADER)),
        }
        self._emit_event("BecomeLeaderOrFollower", args, event)
        self._deposed_hw(b, event)

    def _deposed_hw(self, b: int, leadership: Event) -> None:
        """A fetch read while b led, whose HW recomputation ran after this LeaderAndIsr made
        b a follower (R21): the HW it reached, if it rose, as DeposedLeaderIncrementHw."""
        update = self.deposed.pop(b, None)
        if update is None or update.nano < leadership.nano:
            return
        r = self.replicas[b]
        hw = int((update.state or {}).get("hw", r.hw))
        if hw > r.hw:
            r.hw, r.hw_stamp = hw, update.nano
            self._emit_event("DeposedLeaderIncrementHw", {"replica": b}, update)

    # -- produce -------------------------------------------------------------------------

    def _on_appendRecordsToLeader(self, event: Event) -> None:
        error = event.args.get("error")
        if error and "NotEnoughReplicas" not in str(error):
            self._skip(f"a produce refused with {error}")
            return
        b = event.broker
        record = self.next_record
        self.next_record += 1
        if not error:
            epoch = int((event.state or {}).get("leaderEpoch", self.replicas[b].leader_epoch))
            first = event.args.get("firstOffset")
            if isinstance(first, int):
                self.records[(epoch, first)] = record
        self._absorb(event)
        acks = int(event.args.get("requiredAcks", -1))
        unseen = ("hw",) if self._concurrent(event, None) else ()
        self._emit_event("Produce", {"replica": b, "record": record, "acks": acks}, event, unseen)

    # -- the fetch path ------------------------------------------------------------------

    def _on_buildFetch(self, event: Event) -> None:
        f = event.broker
        if event.args.get("fetchState", "Fetching") != "Fetching" or event.args.get("delayed"):
            return  # the partition is truncating or backing off: not in this fetch
        leader = int(event.args.get("leader", self._leader_of(f)))
        if f in self.hw_sends:  # FollowerTruncateToHighWatermark sent this fetch
            self.hw_sends.discard(f)
            self.rounds[f] = FetchRound(leader)
            return
        self._close_round(f, event)
        self.rounds[f] = FetchRound(leader)
        self._emit_event("FollowerSendFetch", {"replica": f, "leader": leader}, event)

    def _close_round(self, f: int, event: Event) -> None:
        """A fetch whose answer the follower never handled (a stale answer, dropped): the spec
        consumes it as a no-op FollowerHandleFetchResponse before the next send."""
        current = self.rounds.get(f)
        if current is not None and current.handled and not current.lost:
            self._emit_event(
                "FollowerHandleFetchResponse", {"replica": f, "leader": current.leader}, event
            )
        self.rounds[f] = None

    def _on_readFromLocalLog(self, event: Event) -> None:
        leader = event.broker
        f = event.args.get("follower")
        if not isinstance(f, int) or f not in self.replicas:
            return
        offset = int(event.args.get("fetchOffset", -1))
        error = event.args.get("error")
        delayed = bool(event.args.get("delayed"))
        current = self.rounds.get(f)
        if delayed:
            if current is None or not current.handled or current.leader != leader:
                # the follower gave this fetch up (it fetches elsewhere now, or anew)
                self._skip("a parked fetch completed that its follower no longer awaits")
                return
            # the parked fetch: the same fetch sent again, read now (the first answer,
            # empty, given up by that send)
            self._emit_event("FollowerSendFetch", {"replica": f, "leader": leader}, event)
            args = {"replica": leader, "follower": f, "offset": offset}
            self._emit_event("LeaderHandleFetch", args, event)
            return
        if error not in (None, "NONE"):
            if current is None or current.leader != leader:
                # its follower fetches elsewhere now: the spec's fetcher gave this request
                # up (FetcherSend), and an error answer changes nothing on the leader
                self._skip("an error answer to a fetch its follower gave up")
                return
            # an error answer changes nothing on the leader; its state may already hold
            # steps whose hooks have not ended yet (a truncation): not taken
            current.handled = True
            self._emit_event(
                "LeaderHandleFetch", {"replica": leader, "follower": f, "offset": offset}, event
            )

    def _on_updateFollowerFetchState(self, event: Event) -> None:
        leader = event.broker
        f = int(event.args.get("follower", -1))
        if f not in self.replicas:
            return
        offset = int(event.args.get("fetchOffset", -1))
        current = self.rounds.get(f)
        if current is not None:
            current.handled = True
        args = {"replica": leader, "follower": f, "offset": offset}
        if int((event.state or {}).get("leader", leader)) != leader:
            # a LeaderAndIsr made this broker a follower between the read (where the step
            # is) and the update: the state holds the fetch's effect no longer, and the HW
            # it recomputed as a follower is a step after that LeaderAndIsr's (R21)
            self.deposed[leader] = event
            self._emit_event("LeaderHandleFetch", args, event, ("hw", "isr", "remoteLeo"))
            return
        before = self.replicas[leader].isr
        self._absorb_fetch(event, f)
        if self.replicas[leader].isr != before:
            self.ctrl_isr = self._zk_isr(event, self.ctrl_isr)
        unseen = ("hw",) if self._concurrent(event, f) or self._busy(event, f) else ()
        self._emit_event("LeaderHandleFetch", args, event, unseen)

    def _zk_isr(self, event: Event, default: frozenset[int]) -> frozenset[int]:
        """The ISR the leader wrote to ZooKeeper with this step, if it changed it."""
        s = event.state or {}
        if s.get("leader") == event.broker and int(s.get("leaderEpoch", -1)) == self.ctrl_epoch:
            return self.replicas[event.broker].isr
        return default

    def _on_expandIsr(self, event: Event) -> None:
        pass  # part of the LeaderHandleFetch step that follows (updateFollowerFetchState)

    def _on_processPartitionData(self, event: Event) -> None:
        f = event.broker
        current = self.rounds.get(f)
        leader = current.leader if current is not None else self._leader_of(f)
        self._absorb(event)
        self.rounds[f] = None
        self._emit_event("FollowerHandleFetchResponse", {"replica": f, "leader": leader}, event)

    # -- truncation ----------------------------------------------------------------------

    def _on_fetchEpochEndOffsetsRequest(self, event: Event) -> None:
        f = event.broker
        self.epoch_asked[f] = True
        self.epoch_answered.discard(f)
        leader = self._leader_of(f)
        self._emit_event(
            "FollowerSendOffsetsForLeaderEpoch", {"replica": f, "leader": leader}, event
        )

    def _on_fetchEpochEndOffsets(self, event: Event) -> None:
        f = event.broker
        error = event.args.get("error")
        if error not in (None, "NONE"):
            self.epoch_asked[f] = False
            leader = self._leader_of(f)
            if f not in self.epoch_answered:
                # a leader that hosts no Partition, or no leader in it yet (restarted, its
                # LeaderAndIsr to come) answers before any hooked method
                requested = int(event.args.get("requested", -1))
                args = {"replica": leader, "follower": f, "requested": requested}
                self._emit_event("LeaderHandleOffsetsForLeaderEpoch", args, event)
            args = {"replica": f, "leader": leader}
            self._emit_event("FollowerHandleOffsetsForLeaderEpochResponse", args, event)

    def _on_lastOffsetForLeaderEpoch(self, event: Event) -> None:
        leader = event.broker
        follower = self._requester(event)
        if follower is None:
            self._skip("lastOffsetForLeaderEpoch asked by no follower (a client)")
            return
        requested = int(event.args.get("requested", -1))
        args = {"replica": leader, "follower": follower, "requested": requested}
        self.epoch_answered.add(follower)
        self._emit_event("LeaderHandleOffsetsForLeaderEpoch", args, event)

    def _requester(self, event: Event) -> int | None:
        req = event.request or {}
        match = _CLIENT_BROKER.search(str(req.get("clientId", "")))
        if match is None:
            return None
        broker = int(match.group(1))
        return broker if broker in self.replicas else None

    def _on_truncate(self, event: Event) -> None:
        f = event.broker
        self._absorb(event)
        leader = self._leader_of(f)
        args = {"replica": f, "leader": leader}
        if self.epoch_asked[f]:
            self.epoch_asked[f] = False
            self._emit_event("FollowerHandleOffsetsForLeaderEpochResponse", args, event)
        else:
            self.hw_sends.add(f)
            self._emit_event("FollowerTruncateToHighWatermark", args, event)

    # -- the ISR and checkpoints ---------------------------------------------------------

    def _on_shrinkIsr(self, event: Event) -> None:
        """Partition.maybeShrinkIsr: the ISR written, then (same lock) the HW recomputed;
        the state after both is the next maybeIncrementLeaderHW's on the same thread. A
        write ZooKeeper refused (a stale zkVersion: the controller changed the partition)
        changes nothing: no step."""
        if event.args.get("applied") is False:
            self._skip("an ISR shrink ZooKeeper refused")
            return
        b = event.broker
        before = self.replicas[b].isr
        recomputed = self._next_on_thread(event)
        if recomputed is not None and recomputed.name == "maybeIncrementLeaderHW":
            event = replace(event, state=recomputed.state or event.state)
        self._absorb(event, isr=True)
        now = self.replicas[b].isr
        self.ctrl_isr = now
        out = sorted(before - now)
        self._emit_event("LeaderShrinkIsr", {"replica": b, "followers": {"#set": out}}, event)

    def _on_checkpointHighWatermarks(self, event: Event) -> None:
        b = event.broker
        s = event.state or {}
        r = self.replicas[b]
        if not s.get("hosted", True) or s.get("hw") is None or b not in self.alive:
            return
        written = event.args.get("written")  # what the file got (the state is read after)
        hw = int(written) if isinstance(written, int) else int(s["hw"])
        due = self.checkpoint_due.get(b)
        if hw == (due[0] if due is not None else r.checkpoint):
            return
        self.checkpoint_due.pop(b, None)
        if r.hw != hw and self._checkpoint_earlier(b, hw, event):
            r.checkpoint = hw
            return
        if r.hw != hw:
            # read from a HW whose step is still to come (a hook that had not ended yet):
            # the checkpoint step goes just after it (`_emit`)
            self.checkpoint_due[b] = (hw, event)
            return
        r.checkpoint = hw
        self._emit_event("CheckpointHighWatermarks", {"replica": b}, event)

    def _checkpoint_earlier(self, b: int, hw: int, event: Event) -> bool:
        """The checkpoint task reads every HW first and writes the file after: a HW that moved
        in between was read before it moved. The step goes back to the last state where the
        replica's HW was the one written (no restart of it can come between: it runs), and the
        states after it hold the new checkpoint."""
        at = None
        for index in range(len(self.steps) - 1, 0, -1):
            state = self.steps[index].state
            if (
                self.steps[index].action in ("Restart", "Crash")
                and self.steps[index].args.get("replica") == b
            ):
                return False
            if "hw" in state and state["hw"][b - 1] == hw:
                at = index
                break
        if at is None:
            return False
        column = self.brokers.index(b)

        def with_checkpoint(state: dict[str, Any]) -> dict[str, Any]:
            changed = dict(state)
            if "hwCheckpoint" in changed:
                old = changed["hwCheckpoint"]
                changed["hwCheckpoint"] = [hw if i == column else v for i, v in enumerate(old)]
            return changed

        inserted = Step(
            "CheckpointHighWatermarks",
            {"replica": b},
            with_checkpoint(self.steps[at].state),
            self.steps[at].omit,
            f"{event.where} {event.name} (the HW it wrote, read before step {at + 1})",
            event.nano,
        )
        for step in self.steps[at + 1 :]:
            step.state = with_checkpoint(step.state)
        self.steps.insert(at + 1, inserted)
        return True

    # -- the controller and faults -------------------------------------------------------

    def _on_onControllerFailover(self, event: Event) -> None:
        """A new controller: its decisions came as addLeaderAndIsrRequest; the brokers it
        does not find registered, and for which it decided nothing (neither leader nor in
        the ISR), leave ctrlLive with no new epoch."""
        if not self.started or event.args.get("phase") != "exit":
            return
        live = {int(x) for x in (event.controller or {}).get("live") or []}
        for r in sorted(self.ctrl_live - live if live else set()):
            self._implied_crash(r, event)
            self.ctrl_live.discard(r)
            self._emit_event("ControllerDetectFailure", {"replica": r}, event)

    def _on_onBrokerFailure(self, event: Event) -> None:
        """The controller learnt that brokers died; those it made no decision for (neither
        leader nor in the ISR) leave ctrlLive with no new epoch."""
        if event.args.get("phase") != "exit":
            return
        for r in sorted(int(x) for x in event.args.get("brokers") or []):
            if r in self.ctrl_live:
                self._implied_crash(r, event)
                self.ctrl_live.discard(r)
                self._emit_event("ControllerDetectFailure", {"replica": r}, event)

    def _on_onBrokerStartup(self, event: Event) -> None:
        """A broker registered again: the spec's Restart (a decision made inside it, an
        election of an offline partition, came as addLeaderAndIsrRequest)."""
        brokers = sorted(int(x) for x in event.args.get("brokers") or [])
        if event.args.get("phase") != "exit":
            self.starting |= set(brokers)  # its LeaderAndIsr may be handled before the exit
            return
        for r in brokers:
            self.starting.discard(r)
            if r not in self.ctrl_live or r not in self.alive:
                self._back(r, event)

    def _restart(self, r: int, event: Event) -> None:
        self.alive.add(r)
        self.ctrl_live.add(r)
        self.incarnation[r] += 1
        rep = self.replicas[r]
        rep.leader_epoch, rep.leader, rep.isr, rep.remote = NOT_HOSTED, NO_LEADER, frozenset(), {}
        # its HW and epoch cache are read from disk when its Partition is created: known
        # again from its own next report
        self.unknown[r] |= {"hw", "epochCache"}
        self._emit_event("Restart", {"replica": r}, event)

    def _implied_crash(self, r: int, event: Event) -> None:
        """Without the harness's record, a broker the controller finds dead crashed just
        before (never used when the harness recorded its faults)."""
        if r in self.alive and not self.harness_recorded:
            self.notes.append(f"broker {r}: crash implied by the controller (no harness record)")
            self._crash(r, event)

    def _on_addLeaderAndIsrRequest(self, event: Event) -> None:
        """The controller's decision as it sends it: leader, epoch, ISR. The same state sent
        again (to a restarted broker, by a new controller) is no decision.

        Decisions about brokers the controller lost are gathered (a burst) until the
        controller is done with them: a new controller takes every dead broker's replicas
        offline, one epoch each, and then elects (R19), where the spec takes one
        ControllerDetectFailure per broker, the dead leader's last. So each lost broker
        becomes one step; all but the last leave the controller's variables out (the real
        order of its intermediate states is not the spec's), the last records where the
        controller ended."""
        if not self.started:
            return
        leader = int(event.args.get("leader", NO_LEADER))
        epoch = int(event.args.get("leaderEpoch", -1))
        isr = frozenset(int(x) for x in event.args.get("isr") or [])
        burst = self.burst
        if epoch <= max(self.ctrl_epoch, burst.epoch if burst else -1):
            # the current state sent again: to other brokers, or by a new controller, which
            # finds registered a broker the old one had lost (it registered again meanwhile)
            live = {int(x) for x in (event.controller or {}).get("live") or []}
            if burst is None and epoch == self.ctrl_epoch and self.ctrl_leader != NO_LEADER:
                for r in sorted(live - self.ctrl_live):  # (offline: its election comes next)
                    self._back(r, event)
            return
        view = event.controller or {}
        live = {int(x) for x in view.get("live") or []}
        stopping = {int(x) for x in view.get("shuttingDown") or []} & self.ctrl_live & self.alive
        if stopping and burst is None:
            # a controlled shutdown (R20): the stopping broker stays registered until it exits
            r = min(stopping)
            self.ctrl_leader, self.ctrl_epoch, self.ctrl_isr = leader, epoch, isr
            self._emit_event("ControlledShutdown", {"replica": r}, event)
            return
        gone = set(self.ctrl_live - live - stopping) if live else set()
        back = sorted(live - self.ctrl_live) if live else []
        if burst is not None and (burst.controller != event.broker or leader in back):
            self.flush()  # another controller, or the election of a broker that came back
            burst = None
            gone = set(self.ctrl_live - live) if live else set()
        if (gone and leader not in back) or burst is not None:
            if burst is None:
                burst = self.burst = Burst(event.broker, self.ctrl_leader)
            for r in sorted(gone - set(burst.gone)):
                self._implied_crash(r, event)
                burst.gone.append(r)
            burst.decide(leader, epoch, isr, event)
            return
        self.ctrl_leader, self.ctrl_epoch, self.ctrl_isr = leader, epoch, isr
        if back:
            self._back(back[0], event)
        else:
            self._emit_event("ControllerElectLeader", {"replica": leader}, event)

    def flush(self) -> None:
        """Emit the steps of a burst of decisions about lost brokers (see above)."""
        burst, self.burst = self.burst, None
        if burst is None or burst.last is None:
            return
        order = sorted(burst.gone, key=lambda r: (r == burst.leader_before, r))
        together = order[-1] == burst.leader_before and burst.epoch == self.ctrl_epoch + 1
        if len(order) > 1 and together:
            # the leader and others lost in one onBrokerFailure, one election (R22)
            self.ctrl_live -= set(order)
            self.ctrl_leader, self.ctrl_epoch, self.ctrl_isr = burst.leader, burst.epoch, burst.isr
            self._emit_event("ControllerDetectFailure", {"replica": order[-1]}, burst.last)
            return
        for r in order[:-1]:
            self.ctrl_live.discard(r)
            unseen = ("ctrlEpoch", "ctrlIsr", "ctrlLeader")
            self._emit_event("ControllerDetectFailure", {"replica": r}, burst.last, unseen)
        self.ctrl_leader, self.ctrl_epoch, self.ctrl_isr = burst.leader, burst.epoch, burst.isr
        self.ctrl_live.discard(order[-1])
        self._emit_event("ControllerDetectFailure", {"replica": order[-1]}, burst.last)

    def _back(self, r: int, event: Event) -> None:
        """A broker registered again: restarted (Restart), or never stopped (Reregister)."""
        self.starting.discard(r)
        if r in self.alive:
            if r not in self.ctrl_live:
                self.ctrl_live.add(r)
                self._emit_event("Reregister", {"replica": r}, event)
        else:
            self._restart(r, event)

    def _on_crash(self, event: Event) -> None:
        r = int(event.args.get("broker", -1))
        if r in self.alive:
            self._crash(r, event)

    def _on_power_loss(self, event: Event) -> None:
        """A power loss (docs/power-loss.md) is the spec's UncleanShutdown, which keeps the log
        up to the recovery point that Kafka's flushes set (`Flush`); the agent records no
        flush, so the step cannot be told: refused rather than guessed."""
        raise ConvertError(
            f"{event.where}: a power loss of broker {event.args.get('broker')} cannot be "
            "converted yet (the agent records no flush, which sets what a power loss keeps)"
        )

    def _on_shutdown(self, event: Event) -> None:
        """A controlled shutdown (SIGTERM) ended: the broker stopped. The spec has no
        controlled shutdown; its leadership moves show as the controller's decisions."""
        r = int(event.args.get("broker", -1))
        if r in self.alive:
            self.notes.append(f"broker {r}: controlled shutdown, taken as a stop (Crash)")
            self._crash(r, event)

    def _crash(self, r: int, event: Event) -> None:
        self.alive.discard(r)
        self.checkpoint_due.pop(r, None)
        rep = self.replicas[r]
        rep.leader_epoch, rep.leader, rep.isr, rep.remote = NOT_HOSTED, NO_LEADER, frozenset(), {}
        self.rounds[r] = None
        self.epoch_asked[r] = False
        self.hw_sends.discard(r)
        self._emit_event("Crash", {"replica": r}, event)

    def _on_sendRequest(self, event: Event) -> None:
        """A fetch answered without the partition (a fetch session leaves out what did not
        change): the spec's FollowerHandleFetchResponse changes nothing. A fetch whose answer
        never came (the connection failed) or came while a LeaderAndIsr was taking the
        partition from this fetcher (which drops it unread): no step; the spec's fetcher
        gives that answer up with its next request (FetcherSend) or LeaderAndIsr."""
        f = event.broker
        if event.args.get("apiKey") != "FETCH":
            return
        current = self.rounds.get(f)
        if current is None:
            return
        if event.args.get("error") or event.args.get("disconnected"):
            current.lost = True
            self._skip("a fetch answer lost")
            return
        if not current.handled:
            return
        epoch = (event.state or {}).get("leaderEpoch")
        if isinstance(epoch, int) and epoch > self.replicas[f].leader_epoch:
            self.rounds[f] = None
            self._skip("a fetch answer dropped by a LeaderAndIsr")
            return
        if event.args.get("inResponse") is False:
            self.rounds[f] = None
            args = {"replica": f, "leader": current.leader}
            self._emit_event("FollowerHandleFetchResponse", args, event)

    def _on_handlePartitionsWithErrors(self, event: Event) -> None:
        f = event.broker
        current = self.rounds.get(f)
        if current is None or not current.handled:
            return
        self.rounds[f] = None
        if current.lost:
            return
        args = {"replica": f, "leader": current.leader}
        self._emit_event("FollowerHandleFetchResponse", args, event)


def _later_epoch(event: Event) -> bool:
    """Whether the event is a LeaderAndIsr decision, or its handling, past epoch 0."""
    if event.name in ("makeLeader", "makeFollower"):
        return int(event.args.get("epoch", 0)) > 0
    if event.name == "addLeaderAndIsrRequest":
        return int(event.args.get("leaderEpoch", 0)) > 0
    return False


def convert(recording: Recording, min_isr: int) -> Conversion:
    """Convert a run's merged events into spec steps."""
    return Converter(recording, min_isr).run()


def to_itf(conversion: Conversion, meta: Mapping[str, Any]) -> dict[str, Any]:
    """The steps as one ITF trace (JSON), its hidden variables left out of `vars`."""
    states = []
    for index, step in enumerate(conversion.steps):
        st_meta: dict[str, Any] = {"index": index}
        if step.action != "Init":
            st_meta["action"] = step.action
            st_meta["args"] = step.args
        else:
            st_meta["action"] = "Init"
            st_meta["args"] = {}
        if step.omit:
            st_meta["omitted"] = list(step.omit)
        st_meta["source"] = step.source
        st_meta["nano"] = step.nano
        states.append({"#meta": st_meta, **step.state})
    full_meta = {
        "format": "ITF",
        "source": "real Kafka 2.6.3, kreplica agent",
        "min_insync_replicas": conversion.min_isr,
        "hidden": list(HIDDEN),
        **meta,
    }
    return {"#meta": full_meta, "vars": sorted(OBSERVED), "states": states}
