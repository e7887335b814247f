"""Which steps of a long trace a picture shows: all of them up to `MAX_FRAMES`, else a window
that ends a few steps after the first invariant broken (or at the trace's end), so a trace of
10,000 steps still reads, and draws, in seconds."""

from __future__ import annotations

from dataclasses import dataclass

from kreplica.conformance.explain.timeline import Frame, Timeline

MAX_FRAMES = 40
"""The most steps one picture shows."""

AFTER = 3
"""Steps shown after the first violation, when a window is needed."""


@dataclass(frozen=True, slots=True)
class Window:
    """The frames shown, and how many of the trace's steps were left out before and after."""

    frames: tuple[Frame, ...]
    skipped_before: int
    skipped_after: int

    @property
    def summary(self) -> str:
        """One line on what the window leaves out ('' if nothing)."""
        if not (self.skipped_before or self.skipped_after):
            return ""
        first, last = self.frames[0].index, self.frames[-1].index
        total = first + len(self.frames) + self.skipped_after
        return f"steps {first} to {last} of {total - 1} shown"


def window(line: Timeline, size: int = MAX_FRAMES, around: int | None = None) -> Window:
    """At most `size` frames of `line`, ending AFTER steps past step `around` (default: the
    first violation, else the last step)."""
    frames = line.frames
    if len(frames) <= size:
        return Window(frames, 0, 0)
    focus = around if around is not None else line.first_violation
    end = len(frames) if focus is None else min(len(frames), focus + AFTER + 1)
    start = max(0, end - size)
    end = min(len(frames), start + size)
    return Window(frames[start:end], start, len(frames) - end)
