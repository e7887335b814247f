"""Shared prefixes: what TLC printed about the event a trace holds, said of every trace through it.

The Java reader (`java/TraceDataPrefixes.java`) lets TLC walk each event that several traces
of a batch begin with alike once, in the first trace that has it (its holder); it prints
`<<"kreplica-share", number, holder, shared>>` for each trace whose first `shared` events are
walked in an earlier trace, `holder`, which holds the last of them. TLC then prints what it
found (reached, mismatch, invariant, conforms) in the holder's name, and `kreplica-end` for a
trace that adds no event of its own (a repeat, or a prefix of an earlier one), at its last
event in the holder's name. This module says, for every trace of the batch, which trace holds
each of its events (`holders`), and rewrites the printed facts per trace (`per_trace`), so the
rows are what they would be had every trace been walked alone.

Why that is exact: two traces hold the same event only if they agree on their hidden variables
and on every event up to it (action, arguments, recorded values, omitted variables), which is
all that decides the states TLC finds there (`spec/KafkaReplicationTrace.tla`). The view tells
the states of one event apart as before, so the states, and what is printed of them, are the
same as a walk of that trace alone would find. Pinned by `tests/test_conform_prefixes.py`.

Imports nothing of kreplica: `tracecheck` calls it with what it parsed.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import TypeVar

T = TypeVar("T")


def holders(
    shares: Mapping[int, tuple[int, int]], events: Mapping[int, int]
) -> dict[int, list[int]]:
    """For each trace of `events` (number: its events after the initial state), the trace that
    holds each of its events, from the initial state on; `shares` maps a trace to (holder,
    shared), the holder always an earlier trace (so its list is made first)."""
    paths: dict[int, list[int]] = {}
    for number in sorted(events):
        length = events[number] + 1
        if number in shares:
            holder, shared = shares[number]
            before = paths.get(holder, [])
            if len(before) < shared:  # the holder was not counted: nothing to say of it
                paths[number] = [number] * length
                continue
            paths[number] = before[:shared] + [number] * (length - shared)
        else:
            paths[number] = [number] * length
    return paths


def reached(path: list[int], reached_by: Mapping[int, int]) -> int | None:
    """The last event of a trace reached, given the last reached in each holder (None: not
    even the initial state). A holder's events form one chain, so reaching a later one of
    them reaches every earlier one."""
    last = None
    for step, holder in enumerate(path):
        if reached_by.get(holder, -1) < step:
            break
        last = step
    return last


def at_steps(
    path: list[int], facts: Mapping[tuple[int, int], T], number: int
) -> dict[tuple[int, int], T]:
    """The facts printed of (holder, step), said of trace `number` at the steps it holds there."""
    return {
        (number, step): facts[(holder, step)]
        for step, holder in enumerate(path)
        if (holder, step) in facts
    }


def conforms(path: list[int], ended: Set[tuple[int, int]]) -> bool:
    """Whether the trace's last event was reached: (its holder, that step) is among `ended`."""
    return (path[-1], len(path) - 1) in ended
