"""Which steps of a long trace a picture shows: all of them up to `MAX_FRAMES`, else a window
that ends a few steps after the first invariant broken (or at the trace's end), so a trace of
10,000 steps still reads, and draws, in seconds; or the steps `A:B` asked for.

A real-Kafka trace is mostly fetch round trips that change nothing the agent observes: folded
(`fold`), each run of such steps is one row ("21 fetch steps that change nothing observable"),
so the window holds the steps that do something."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

from kreplica.conformance.explain.timeline import Frame, Timeline

MAX_FRAMES = 40
"""The most steps (rows) one picture shows."""

AFTER = 3
"""Steps shown after the first violation, when a window is needed."""

MIN_FOLD = 2
"""The shortest run of fetch steps that change nothing observable folded into one row."""

FETCH_ROUND_TRIP = frozenset(
    {"FollowerSendFetch", "LeaderHandleFetch", "FollowerHandleFetchResponse"}
)
"""The actions of a fetch round trip: the steps `fold` folds when they change nothing."""


@dataclass(frozen=True, slots=True)
class Window:
    """The frames shown (rows: a folded row stands for a run of steps), and how many of the
    trace's steps were left out before and after."""

    frames: tuple[Frame, ...]
    skipped_before: int
    skipped_after: int

    @property
    def folds(self) -> int:
        """The rows that stand for a run of steps."""
        return sum(1 for f in self.frames if f.folded)

    @property
    def summary(self) -> str:
        """One line on what the window leaves out and folds ('' if nothing)."""
        parts = []
        if self.skipped_before or self.skipped_after:
            first, last = self.frames[0].index, self.frames[-1].last
            parts.append(f"steps {first} to {last} of {last + self.skipped_after} shown")
        if self.folds:
            steps = sum(f.folded + 1 for f in self.frames if f.folded)
            rows = "1 row" if self.folds == 1 else f"{self.folds} rows"
            parts.append(f"{steps} fetch steps that change nothing observable folded into {rows}")
        return "; ".join(parts)


def _folded(run: Sequence[Frame]) -> Frame:
    """One row for a run of quiet steps: the last one's state, the time the run took."""
    first, last = run[0], run[-1]
    counts = Counter(f.action for f in run)
    actions = ", ".join(action + (f" ×{n}" if n > 1 else "") for action, n in counts.items())
    gaps = [f.gap for f in run]
    ctrl = last.controller
    return replace(
        last,
        index=first.index,
        action="",
        args={},
        words=f"{len(run)} fetch steps that change nothing observable: {actions}",
        lanes=tuple(replace(lane, changed=frozenset()) for lane in last.lanes),
        controller=None if ctrl is None else replace(ctrl, changed=frozenset()),
        gap=None if any(g is None for g in gaps) else sum(g for g in gaps if g is not None),
        source="",
        folded=len(run) - 1,
    )


def foldable(frame: Frame) -> bool:
    """A step of a fetch round trip that changes nothing observable and marks nothing."""
    return frame.quiet and frame.action in FETCH_ROUND_TRIP


def fold(frames: Sequence[Frame]) -> tuple[Frame, ...]:
    """The frames, each run of at least MIN_FOLD `foldable` steps as one row."""
    rows: list[Frame] = []
    run: list[Frame] = []
    for frame in (*frames, None):
        if frame is not None and foldable(frame):
            run.append(frame)
            continue
        rows.extend([_folded(run)] if len(run) >= MIN_FOLD else run)
        run = []
        if frame is not None:
            rows.append(frame)
    return tuple(rows)


def window(
    line: Timeline,
    size: int = MAX_FRAMES,
    around: int | None = None,
    *,
    steps: tuple[int, int] | None = None,
    folded: bool | None = None,
) -> Window:
    """At most `size` rows of `line`: from step A if `steps` is (A, B), which also ends them
    at step B; else ending AFTER steps past step `around` (default: the first violation, else
    the last step). `folded`: fold the runs of fetch steps that change nothing observable
    (default: for a real trace, which observes only some variables)."""
    frames: Sequence[Frame] = line.frames
    if steps is not None:
        frames = frames[steps[0] : steps[1] + 1]
    rows = fold(frames) if (line.real if folded is None else folded) else tuple(frames)
    if len(rows) <= size:
        start, end = 0, len(rows)
    elif steps is not None:
        start, end = 0, size
    else:
        focus = around if around is not None else line.first_violation
        at = None if focus is None else next(
            (k for k, r in enumerate(rows) if r.index <= focus <= r.last), None
        )  # fmt: skip
        end = len(rows) if at is None else min(len(rows), at + AFTER + 1)
        start = max(0, end - size)
        end = min(len(rows), start + size)
    shown = tuple(rows[start:end])
    return Window(shown, shown[0].index, len(line.frames) - 1 - shown[-1].last)
