"""A trace as a timeline: one frame per step, one lane per replica, and the marks that matter.

Every picture of `kreplica explain` (the terminal, PNG and SVG) draws the same `Timeline`, so
what is highlighted is decided once, here, from the spec's variables:

- `lost-ack`: an acknowledged record a replica held is gone from it (AckedRecordsNeverLost);
- `diverged`: two replicas hold different records at one offset below both their LEOs;
- `hw-back`: a replica's high watermark moved back;
- `invariant`: the first step after which one of the spec's invariants is false (the rule
  `checked_violations` applies: after a power loss only those the spec proves under it).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from kreplica.conformance.bridge.checked_steps import checked_violations
from kreplica.conformance.bridge.invariants import DELETED_RECORD, log_start_of
from kreplica.conformance.explain.kafka_words import describe
from kreplica.conformance.tla.itf import ItfTrace, to_itf

State = dict[str, Any]

REQUIRED = ("log", "hw", "leader", "leaderEpoch")
"""The variables a timeline cannot be drawn without."""


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

    @property
    def leads(self) -> bool:
        """The replica believes it leads the partition."""
        return self.alive and self.leader == self.replica

    @property
    def isr_text(self) -> str:
        """The ISR it keeps, as `{1,2}`."""
        return "{" + ",".join(map(str, sorted(self.isr))) + "}"


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
    """The spec variables this step changed: (name, value before, value after), as ITF JSON."""

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

    @property
    def first_violation(self) -> int | None:
        """The index of the first frame with an `invariant` mark (None: there is none)."""
        return next((f.index for f in self.frames if f.broken), None)


class TimelineError(ValueError):
    """A trace that cannot be drawn (a variable it needs is missing or malformed)."""


def _lane(s: State, r: int) -> Lane:
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
    """The variables whose value differs, in the trace's order."""
    return tuple(
        (name, _text(before[name]), _text(value))
        for name, value in after.items()
        if name in before and before[name] != value
    )


def _frame(index: int, action: str, args: dict[str, Any], s: State, replicas: int) -> Frame:
    return Frame(
        index=index,
        action=action,
        args=args,
        words=describe(action, args),
        lanes=tuple(_lane(s, r) for r in range(1, replicas + 1)),
        acked=frozenset(s.get("acked", ())),
    )


def timeline(trace: ItfTrace, title: str) -> Timeline:
    """Every step of `trace` as a frame, with its marks (TimelineError if it cannot be drawn)."""
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
    before: State | None = None
    for i, state in enumerate(trace.states):
        s = state.values
        try:
            frame = _frame(i, state.action or ("Init" if i == 0 else "?"), state.args, s, replicas)
        except (KeyError, TypeError, IndexError, ValueError) as err:
            raise TimelineError(f"state {i}: a variable has an unexpected shape ({err})") from None
        marks = _new_marks(frame, frames[-1], carried) if frames else ()
        marks = (*marks, *_invariants(s, before, seen))
        changed = () if before is None else _changed(before, s)
        frames.append(replace(frame, marks=marks, changed=changed))
        before = s
    return Timeline(title, tuple(frames), replicas)


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
