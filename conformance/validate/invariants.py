"""Invariants on a trace (`kreplica conform --invariant NAME`): which ones, and where a trace
breaks them.

The trace spec (spec/KafkaReplicationTrace.tla) checks them: the config sets `TraceInvariants`
to their names, and a state of a trace in which one is false ends its branch, as a successor
that disagrees with the trace does; a diagnostic run prints `<<"kreplica-invariant", trace,
step, names>>` there. A trace then conforms only if some behaviour of the spec consumes it
whole with every invariant true in every state.

The rule for a trace that does not (`blocked_at`): let `step` be the first step that no branch
reaches with every invariant true along the way. If some branch took that step and broke an
invariant there, the trace is a behaviour of the spec as far as `step` and cannot take it
without breaking one: it violates the invariant at `step`. If no branch ever broke one, the
diagnostic run was the diagnosis of a behaviour, and the trace is rejected as without
invariants (its first unexplained step). If branches broke one earlier but those that kept
them true ended at `step` on a mismatch (hidden variables leave several branches), a run
without invariants says whether any branch gets past `step`: if one does, the invariant is
violated at `step`; if none does, the trace is not a behaviour there. So the earlier of the
two steps wins, and they are never the same step.

This module has the parts that run no TLC: `tracecheck` runs it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

CONSTANT = "TraceInvariants"
"""The trace spec's definition of the invariants to check (default {}), set by the config."""

_ARM = re.compile(r'name = "([A-Za-z_]\w*)" -> ([A-Za-z_]\w*)\b')


def names_in(trace_spec: str) -> list[str]:
    """The state predicates the trace spec's text can check a trace against: the arms of the
    CASE of its `Invariant(name)`, in order."""
    start = trace_spec.find("\nInvariant(name) ==")
    if start < 0:
        return []
    body = trace_spec[start + 1 :].split("\n\n", 1)[0]
    return [name for name, value in _ARM.findall(body) if name == value]


def config_lines(names: Sequence[str]) -> list[str]:
    """The lines of a TLC config's CONSTANTS that set the invariants (none for none: a config
    without invariants is the one kreplica wrote before they existed)."""
    if not names:
        return []
    return [f"    {CONSTANT} = {{" + ", ".join(f'"{n}"' for n in names) + "}"]


@dataclass(frozen=True)
class Blocked:
    """Where the invariants stop a trace in a diagnostic run with invariants: the first step no
    branch reaches with every invariant true along the way (`step`), the invariants found false
    and the step at which (`names`, `first`)."""

    step: int
    names: frozenset[str]
    first: int
    certain: bool
    """Some branch took `step` and broke an invariant there (`first` = `step`): the invariant
    decides. Otherwise only branches that broke one before `step` may go further, and a run
    without invariants decides (`settled`)."""


def blocked_at(broken: Mapping[int, set[str]], reached: int | None) -> Blocked | None:
    """Where the invariants stopped a trace: `broken`, the invariants a diagnostic run printed
    false by step; `reached`, the last step a branch reached with all of them true (None: not
    even the initial state). None when no branch broke one."""
    if not broken:
        return None
    step = -1 if reached is None else reached
    step += 1
    if step in broken:
        return Blocked(step, frozenset(broken[step]), step, True)
    first = min(broken)
    return Blocked(step, frozenset(broken[first]), first, False)


def settled(blocked: Blocked, conforms: bool, reached: int | None) -> bool:
    """Whether an uncertain block (`Blocked.certain` False) is an invariant violation, from a
    diagnostic run without invariants: it is when the trace gets past the blocked step as a
    behaviour (`conforms`, or a branch `reached` it); otherwise the trace is not a behaviour
    there, which comes first."""
    return conforms or (reached is not None and reached >= blocked.step)


def reason(blocked: Blocked, order: Sequence[str], action: str, args: str) -> tuple[str, str]:
    """The row's reason and its `invariant` column (the names, in the order of `order`, the
    invariants as given), for a trace blocked at a step whose logged action and arguments are
    `action` and `args` (step 0: the initial state)."""
    rank = {name: i for i, name in enumerate(order)}
    names = sorted(blocked.names, key=lambda n: (rank.get(n, len(rank)), n))
    said = ("invariants " if len(names) > 1 else "invariant ") + ", ".join(names)
    are = "are" if len(names) > 1 else "is"
    if blocked.step == 0:
        text = f"{said} {are} false in the initial state"
    elif blocked.certain:
        text = f"{said} {are} false after step {blocked.step} ({action} {args})"
    else:
        text = (
            f"no way of taking step {blocked.step} ({action} {args}) keeps {said} true: "
            f"the ways that take it broke {'them' if len(names) > 1 else 'it'} "
            f"after step {blocked.first}"
        )
    return text, ", ".join(names)
