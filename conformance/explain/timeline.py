"""A trace as a timeline: one frame per step, one lane per replica, and the marks that matter.

Every picture of `kreplica explain` (the terminal, PNG and SVG) draws the same `Timeline`, so
what is highlighted is decided once, here, from the spec's variables:

- `lost-ack`: an acknowledged record a replica held is gone from it (AckedRecordsNeverLost);
- `diverged`: two replicas hold different records at one offset below both their LEOs;
- `hw-back`: a replica's high watermark moved back;
- `invariant`: the first step after which one of the spec's invariants is false (the rule
  `checked_violations` applies: after a power loss only those the spec proves under it).

Beside the replicas, the controller's own view (`ctrlLeader`, `ctrlEpoch`, `ctrlIsr`,
`ctrlLive`) is a lane of its own, for every trace that has those variables; each lane says which
of its fields the step changed.

A real-Kafka trace (kreplica's Java agent) observes only some variables: those it never sees
are left out of `vars` (its `#meta.hidden`), and a state leaves out those no hook saw at that
step (its `#meta.omitted`). An omitted field is drawn from its last value seen and flagged
`unknown` (a `?` in the pictures); its invariants are not judged at such a state. Each real
state's `#meta.nano` (CLOCK_MONOTONIC) gives the wall-clock gap since the step before.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from kreplica.conformance.bridge.projection import DELETED_RECORD, log_start_of
from kreplica.conformance.explain.kafka_words import describe
from kreplica.conformance.judges.checked_steps import checked_violations
from kreplica.conformance.tla.itf import ItfTrace, to_itf

State = dict[str, Any]

REQUIRED = ("log", "hw", "leader", "leaderEpoch")
"""The variables a timeline cannot be drawn without."""

NO_LEADER = -1
"""The spec's NoLeader (a replica, or the controller, that knows no leader)."""

NOT_HOSTED = -2
"""The spec's NotHosted: the leaderEpoch of a broker that hosts no Partition (restarted, no
LeaderAndIsr since)."""

LANE_FIELDS = {"log": "log", "hw": "hw", "leader": "role", "leaderEpoch": "role",
               "alive": "role", "isr": "isr"}  # fmt: skip
"""The spec variable behind each field of a replica's lane (`Lane.unknown`, `Lane.changed`)."""

CONTROLLER_FIELDS = {"ctrlLeader": "leader", "ctrlEpoch": "epoch", "ctrlIsr": "isr",
                     "ctrlLive": "live"}  # fmt: skip
"""The spec variable behind each field of the controller's lane."""

LONG_GAP_NS = 500_000_000
"""A gap between two steps that stands out (500 ms: Kafka's replica.fetch.wait.max.ms, the
longest a fetch waits at the leader; a longer gap is more than replication's own rhythm)."""


def duration_text(ns: int) -> str:
    """A duration in nanoseconds as `850 µs`, `12.3 ms` or `6.021 s` (`0`: none)."""
    sign, ns = ("-", -ns) if ns < 0 else ("", ns)
    if ns == 0:
        return "0"
    if ns < 1_000_000:
        return f"{sign}{ns / 1e3:.0f} µs"
    if ns < 1_000_000_000:
        return f"{sign}{ns / 1e6:.1f} ms"
    return f"{sign}{ns / 1e9:.3f} s"


@dataclass(frozen=True, slots=True)
class Cell:
    """One log entry: its offset, the leader epoch it was written in, and its record id (0: a
    record deleted below the log start offset)."""

    offset: int
    epoch: int
    record: int


@dataclass(frozen=True, slots=True)
class Lane:
    """One replica at one step: its log, HW and LEO, whom it follows, and the ISR it keeps."""

    replica: int
    cells: tuple[Cell, ...]
    log_start: int
    hw: int
    leo: int
    leader: int
    epoch: int
    alive: bool
    isr: frozenset[int]
    """The ISR this replica keeps (a leader's view; empty for a follower)."""
    unknown: frozenset[str] = frozenset()
    """The fields no observation gave at this step ('log', 'hw', 'role', 'isr'; a real trace's
    `#meta.omitted`): their values are the last ones seen, drawn as unknown."""
    changed: frozenset[str] = frozenset()
    """The fields this step changed ('log', 'hw', 'role', 'isr')."""

    @property
    def hosted(self) -> bool:
        """The broker hosts the Partition (its leaderEpoch is not NotHosted)."""
        return self.epoch != NOT_HOSTED

    @property
    def hw_text(self) -> str:
        """The HW, or `?` when no observation gave it at this step."""
        return "?" if "hw" in self.unknown else str(self.hw)

    @property
    def leads(self) -> bool:
        """The replica believes it leads the partition."""
        return self.alive and self.leader == self.replica

    @property
    def isr_text(self) -> str:
        """The ISR it keeps, as `{1,2}`."""
        return "{" + ",".join(map(str, sorted(self.isr))) + "}"


@dataclass(frozen=True, slots=True)
class Controller:
    """The controller's view at one step: the leader it elected (NO_LEADER: none), its leader
    epoch, the ISR it keeps in ZooKeeper and the brokers it believes alive (None: the trace
    has no such variable), which of them this step changed, and which no observation gave."""

    leader: int
    epoch: int
    isr: frozenset[int] | None
    live: frozenset[int] | None
    changed: frozenset[str] = frozenset()
    """The fields this step changed: 'leader', 'epoch', 'isr', 'live'."""
    unknown: frozenset[str] = frozenset()

    def fields(self) -> tuple[tuple[str, str], ...]:
        """(field, text) for each field the trace has, e.g. ('epoch', 'epoch 1'); `?` for a
        value no observation gave."""
        leader = "none" if self.leader == NO_LEADER else str(self.leader)
        out = [("leader", f"leader {leader}"), ("epoch", f"epoch {self.epoch}")]
        if self.isr is not None:
            out.append(("isr", f"ISR {_set_text(self.isr)}"))
        if self.live is not None:
            out.append(("live", f"live {_set_text(self.live)}"))
        return tuple(
            (name, text.split(" ")[0] + " ?" if name in self.unknown else text)
            for name, text in out
        )


def _set_text(values: frozenset[int]) -> str:
    return "{" + ",".join(map(str, sorted(values))) + "}"


@dataclass(frozen=True, slots=True)
class Mark:
    """Something to highlight at a step: its kind, the replica (None: the cluster) and the
    offsets it concerns, and one line that says what happened."""

    kind: str
    replica: int | None
    text: str
    offsets: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Frame:
    """The state after one step, and the step that led to it."""

    index: int
    action: str
    args: dict[str, Any]
    words: str
    """The action in the words of the Kafka method it models (`kafka_words.describe`)."""
    lanes: tuple[Lane, ...]
    acked: frozenset[int]
    marks: tuple[Mark, ...] = ()
    changed: tuple[tuple[str, str, str], ...] = ()
    """The spec variables this step changed: (name, value before, value after), as ITF JSON;
    before a variable a state omitted, the value last seen."""
    controller: Controller | None = None
    """The controller's lane (None: the trace has no `ctrlLeader` and `ctrlEpoch`)."""
    nano: int | None = None
    """The CLOCK_MONOTONIC nanoseconds of the event behind the step (a real trace's
    `#meta.nano`; None: not recorded)."""
    gap: int | None = None
    """Nanoseconds since the step before (for a folded row: since the step before its first)."""
    source: str = ""
    """Where the step was seen (a real trace's `#meta.source`: FILE:LINE and the hook)."""
    omitted: tuple[str, ...] = ()
    """The variables the state leaves out (`#meta.omitted`): no observation gave them."""
    folded: int = 0
    """For a row that stands for a run of steps that change nothing observable
    (`window.fold`): how many steps it stands for beyond its first (0: one step)."""

    @property
    def last(self) -> int:
        """The index of the last step the row stands for."""
        return self.index + self.folded

    @property
    def quiet(self) -> bool:
        """The step changes nothing observable and marks nothing (never the first step)."""
        return self.index > 0 and not self.changed and not self.marks

    @property
    def broken(self) -> bool:
        """An invariant broke at this step, or `kreplica conform` rejected it."""
        return any(m.kind in ("invariant", "rejected") for m in self.marks)

    def marked(self, replica: int) -> set[int]:
        """The offsets this step's marks point at in the replica's lane."""
        return {o for m in self.marks if m.replica in (None, replica) for o in m.offsets}


@dataclass(frozen=True, slots=True)
class Rejection:
    """Where `kreplica conform` rejected the trace: the step, why in its words, the variables
    no successor agrees on (the value the trace logged, those the spec allows), and the false
    conjunct of the logged action (`validate.why`), when it was found."""

    step: int
    reason: str
    differs: tuple[tuple[str, str, str], ...] = ()
    why: str = ""

    def lines(self) -> list[str]:
        """The rejection as lines of text, for every picture."""
        out = [f"conform rejected step {self.step}: {self.reason}"]
        out += [f"{v}: the trace logged {logged}; the spec allows {allowed}"
                for v, logged, allowed in self.differs]  # fmt: skip
        if self.why:
            out.append(f"why: {self.why}")
        return out


@dataclass(frozen=True, slots=True)
class Timeline:
    """A whole trace as frames, under a title; the rejection, for a trace conform rejected."""

    title: str
    frames: tuple[Frame, ...]
    replicas: int
    rejection: Rejection | None = None
    source: str = ""
    """Where the trace comes from (its `#meta.source`, e.g. `real Kafka 2.6.3, kreplica
    agent`)."""
    hidden: tuple[str, ...] = ()
    """The spec variables the trace does not observe (its `#meta.hidden`)."""
    long_gap: int = LONG_GAP_NS
    """Nanoseconds from which a gap between steps stands out."""

    @property
    def real(self) -> bool:
        """The trace observes only some of the spec's variables (a real-Kafka trace)."""
        return bool(self.hidden)

    @property
    def timed(self) -> bool:
        """The steps carry wall-clock stamps."""
        return any(f.nano is not None for f in self.frames)

    def long(self, frame: Frame) -> bool:
        """The gap before `frame` stands out."""
        return frame.gap is not None and frame.gap >= self.long_gap

    def elapsed(self, frame: Frame) -> int | None:
        """Nanoseconds from the first step to `frame` (None: either has no stamp)."""
        start = self.frames[0].nano
        return None if start is None or frame.nano is None else frame.nano - start

    def gap_text(self, frame: Frame) -> str:
        """`+12.3 ms`: the gap before the row ('' without stamps)."""
        return "" if frame.gap is None else "+" + duration_text(frame.gap)

    def at_text(self, frame: Frame) -> str:
        """`t 1.234 s`: the time from the first step to the row ('' without stamps)."""
        elapsed = self.elapsed(frame)
        return "" if elapsed is None else f"t {duration_text(elapsed)}"

    def time_text(self, frame: Frame) -> str:
        """`+12.3 ms, t 1.234 s`: the gap before the row and the time since the first step
        ('' for a step without a stamp)."""
        return ", ".join(t for t in (self.gap_text(frame), self.at_text(frame)) if t)

    @property
    def first_violation(self) -> int | None:
        """The index of the first frame with an `invariant` mark (None: there is none)."""
        return next((f.index for f in self.frames if f.broken), None)


class TimelineError(ValueError):
    """A trace that cannot be drawn (a variable it needs is missing or malformed)."""


def _lane(s: State, r: int, omitted: frozenset[str] = frozenset()) -> Lane:
    log = s["log"][r - 1]
    cells = tuple(Cell(o, int(e["epoch"]), int(e["record"])) for o, e in enumerate(log))
    alive = s.get("alive")
    isr = s.get("isr")
    return Lane(
        replica=r,
        cells=cells,
        log_start=log_start_of(s, r),
        hw=int(s["hw"][r - 1]),
        leo=len(log),
        leader=int(s["leader"][r - 1]),
        epoch=int(s["leaderEpoch"][r - 1]),
        alive=True if alive is None else r in alive,
        isr=frozenset() if isr is None else frozenset(isr[r - 1]),
        unknown=frozenset(LANE_FIELDS[v] for v in omitted if v in LANE_FIELDS),
    )


def _records(lane: Lane) -> dict[int, int]:
    """record id -> offset, for the records a lane holds (deleted entries left out)."""
    return {c.record: c.offset for c in lane.cells if c.record != DELETED_RECORD}


def _lost_acks(before: Frame, lanes: Sequence[Lane], acked: frozenset[int]) -> list[Mark]:
    marks = []
    for old, new in zip(before.lanes, lanes, strict=True):
        held, holds = _records(old), _records(new)
        for record in sorted(acked & held.keys() - holds.keys()):
            offset = held[record]
            if offset < new.log_start:  # deleted below the log start: not lost
                continue
            marks.append(
                Mark(
                    "lost-ack",
                    new.replica,
                    f"acked record {record} lost by replica {new.replica} (offset {offset})",
                    (offset,),
                )
            )
    return marks


def _divergence(lanes: Sequence[Lane]) -> list[Mark]:
    """The lowest offset where two replicas hold different records, once per pair."""
    marks = []
    for i, a in enumerate(lanes):
        for b in lanes[i + 1 :]:
            start = max(a.log_start, b.log_start)
            for offset in range(start, min(a.leo, b.leo)):
                ra, rb = a.cells[offset].record, b.cells[offset].record
                if ra != rb:
                    text = (
                        f"replicas {a.replica} and {b.replica} diverge at offset {offset} "
                        f"(records {ra} and {rb})"
                    )
                    marks.append(Mark("diverged", None, text, (offset,)))
                    break
    return marks


def _hw_back(before: Frame, lanes: Sequence[Lane]) -> list[Mark]:
    return [
        Mark(
            "hw-back",
            new.replica,
            f"HW of replica {new.replica} moved back from {old.hw} to {new.hw}",
            (new.hw,),
        )
        for old, new in zip(before.lanes, lanes, strict=True)
        if new.hw < old.hw
    ]


def _invariants(s: State, before: State | None, seen: set[str]) -> list[Mark]:
    """Marks for the invariants that break at this step (each only the first time)."""
    try:
        found = checked_violations(s, before)
    except (KeyError, TypeError, IndexError, AttributeError):
        return []  # an older trace without every variable: no invariant verdict
    marks = []
    for name, reason in found:
        if name not in seen:
            seen.add(name)
            marks.append(Mark("invariant", None, f"{name} is violated: {reason}"))
    return marks


def _new_marks(frame: Frame, before: Frame, carried: set[str]) -> tuple[Mark, ...]:
    """Divergences are marked where they appear, not at every step they last."""
    diverged = _divergence(frame.lanes)
    fresh = [m for m in diverged if m.text not in carried]
    carried.clear()
    carried.update(m.text for m in diverged)
    return (
        *_lost_acks(before, frame.lanes, frame.acked),
        *fresh,
        *_hw_back(before, frame.lanes),
    )


VALUE_CHARS = 160
"""The longest value a state diff shows (longer ones are cut)."""


def _text(value: Any) -> str:
    text = json.dumps(to_itf(value), separators=(",", ":"))
    return text if len(text) <= VALUE_CHARS else text[: VALUE_CHARS - 1] + "…"


def _changed(before: State, after: State) -> tuple[tuple[str, str, str], ...]:
    """The variables whose value differs, in the trace's order (a variable `after` leaves out
    has not changed: no observation gave it)."""
    return tuple(
        (name, _text(before[name]), _text(value))
        for name, value in after.items()
        if name in before and before[name] != value
    )


def _lane_changes(old: Lane, new: Lane) -> frozenset[str]:
    changed = {
        "log": old.cells != new.cells,
        "hw": old.hw != new.hw,
        "role": (old.leader, old.epoch, old.alive) != (new.leader, new.epoch, new.alive),
        "isr": old.isr != new.isr,
    }
    return frozenset(name for name, differs in changed.items() if differs)


def _controller(s: State, omitted: frozenset[str]) -> Controller | None:
    if "ctrlLeader" not in s or "ctrlEpoch" not in s:
        return None
    isr, live = s.get("ctrlIsr"), s.get("ctrlLive")
    return Controller(
        leader=int(s["ctrlLeader"]),
        epoch=int(s["ctrlEpoch"]),
        isr=None if isr is None else frozenset(isr),
        live=None if live is None else frozenset(live),
        unknown=frozenset(CONTROLLER_FIELDS[v] for v in omitted if v in CONTROLLER_FIELDS),
    )


def _controller_changes(old: Controller | None, new: Controller | None) -> frozenset[str]:
    if old is None or new is None:
        return frozenset()
    pairs = {
        "leader": (old.leader, new.leader),
        "epoch": (old.epoch, new.epoch),
        "isr": (old.isr, new.isr),
        "live": (old.live, new.live),
    }
    return frozenset(name for name, (a, b) in pairs.items() if a != b)


def _with_changes(frame: Frame, before: Frame) -> Frame:
    """The frame with the fields of each lane (and the controller's) that differ from
    `before`'s."""
    lanes = []
    for old, new in zip(before.lanes, frame.lanes, strict=True):
        changed = _lane_changes(old, new)
        lanes.append(replace(new, changed=changed) if changed else new)
    ctrl = frame.controller
    ctrl_changed = _controller_changes(before.controller, ctrl)
    if ctrl is not None and ctrl_changed:
        ctrl = replace(ctrl, changed=ctrl_changed)
    return replace(frame, lanes=tuple(lanes), controller=ctrl)


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _source(meta: dict[str, Any], runs: tuple[str, ...]) -> str:
    """The state's `#meta.source`, the run's directory left out."""
    source = meta.get("source")
    if not isinstance(source, str):
        return ""
    for run in runs:
        source = source.replace(run.rstrip("/") + "/", "")
    return source


def _frame(
    index: int,
    action: str,
    args: dict[str, Any],
    s: State,
    replicas: int,
    omitted: frozenset[str] = frozenset(),
) -> Frame:
    return Frame(
        index=index,
        action=action,
        args=args,
        words=describe(action, args),
        lanes=tuple(_lane(s, r, omitted) for r in range(1, replicas + 1)),
        acked=frozenset(s.get("acked", ())),
        controller=_controller(s, omitted),
        omitted=tuple(sorted(omitted)),
    )


def timeline(trace: ItfTrace, title: str, long_gap: int = LONG_GAP_NS) -> Timeline:
    """Every step of `trace` as a frame, with its marks (TimelineError if it cannot be drawn);
    a gap of `long_gap` nanoseconds or more between steps stands out."""
    if not trace.states:
        raise TimelineError("the trace has no states")
    missing = [v for v in REQUIRED if v not in trace.states[0].values]
    if missing:
        raise TimelineError(f"the trace has no variable {missing[0]!r}, which a picture needs")
    logs = trace.states[0].values["log"]
    if not isinstance(logs, tuple):
        raise TimelineError("the variable 'log' is not a tuple of logs")
    replicas = len(logs)
    frames: list[Frame] = []
    seen: set[str] = set()
    carried: set[str] = set()
    known: State = {}  # each variable's last value seen
    before: State | None = None  # the state before, if it omits nothing
    runs = tuple(
        d for d in (trace.meta.get(k) for k in ("run_dir", "run")) if isinstance(d, str) and d
    )
    last_nano: int | None = None
    for i, state in enumerate(trace.states):
        omitted = frozenset(v for v in trace.vars if v not in state.values)
        s = {**known, **state.values} if omitted else state.values
        action = state.action or ("Init" if i == 0 else "?")
        try:
            frame = _frame(i, action, state.args, s, replicas, omitted)
        except (KeyError, TypeError, IndexError, ValueError) as err:
            raise TimelineError(f"state {i}: a variable has an unexpected shape ({err})") from None
        if frames:
            frame = _with_changes(frame, frames[-1])
        marks = _new_marks(frame, frames[-1], carried) if frames else ()
        if not omitted:  # an invariant is judged on what was observed only
            marks = (*marks, *_invariants(s, before, seen))
        changed = () if not known else _changed(known, state.values)
        nano = _int_or_none(state.meta.get("nano"))
        gap = None if nano is None or last_nano is None else nano - last_nano
        frame = replace(frame, marks=marks, changed=changed, nano=nano, gap=gap,
                        source=_source(state.meta, runs))  # fmt: skip
        frames.append(frame)
        known = s
        before = None if omitted else s
        last_nano = nano
    source = trace.meta.get("source")
    hidden = trace.meta.get("hidden")
    return Timeline(
        title,
        tuple(frames),
        replicas,
        source=source if isinstance(source, str) else "",
        hidden=tuple(str(v) for v in hidden) if isinstance(hidden, list) else (),
        long_gap=long_gap,
    )


def with_rejection(line: Timeline, rejection: Rejection) -> Timeline:
    """The timeline with conform's rejection marked at its step (TimelineError if the trace
    has no such step)."""
    if not 0 <= rejection.step < len(line.frames):
        raise TimelineError(f"the rejected step {rejection.step} is not in the trace")
    frames = list(line.frames)
    frame = frames[rejection.step]
    mark = Mark("rejected", None, rejection.lines()[0])
    frames[rejection.step] = replace(frame, marks=(*frame.marks, mark))
    return replace(line, frames=tuple(frames), rejection=rejection)
