"""Guided fuzzing: abstract states, the campaign's coverage of them, and a run's rarity score.

Replication bugs live where the replicas' views of the partition disagree: a follower whose HW
trails its leader's, a leader that does not know it was replaced, an ISR member behind the
committed offset. `abstract_state` keeps exactly those relations, per replica and relative to
the controller's leader, and forgets the concrete offsets, epochs and record ids, so that a
campaign's runs fall into a few thousand abstract states (the raw spec states are unbounded).

`Coverage` counts, over a campaign, how often each abstract state was seen, when each was first
reached, and the number of distinct ones after each run (the coverage curve of docs/fuzzing.md;
`joint_curve` joins the curves of campaigns run one after the other, such as a campaign's
stages). `kreplica fuzz --guided` hands a campaign's runs out by the new abstract states each
stage and fault mix reaches (`guided`). A set-up with `FuzzSetup.guided` hands each run's
rarity (`Coverage.rarity`) to Hypothesis's `target()` instead, so that Hypothesis mutates the
runs that reached rarely seen abstract states; that reached fewer abstract states than no
guidance (docs/fuzzing.md, "Guided fuzzing"), and `kreplica fuzz` no longer does it.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kreplica.conformance.bridge.projection import NO_LEADER, NOT_HOSTED, OnVariables, State
from kreplica.conformance.judges.invariants import agree

AbstractState = tuple[Any, ...]
"""A hashable abstraction of a spec state (see `abstract_state`)."""


def _sign(a: int, b: int) -> int:
    """-1, 0 or 1 as a is below, equal to or above b."""
    return (a > b) - (a < b)


def _prefix(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """One log is a prefix of the other (they have not diverged), but for deleted records."""
    return agree(a, b, min(len(a), len(b)))


def _replica(s: State, b: int, ref: int) -> tuple[Any, ...]:
    """Replica b's view relative to replica `ref` (the controller's leader): running, role,
    epoch against the controller's, fetch state, LEO and HW against ref's, ISR memberships,
    and whether its log has diverged from ref's."""
    i, r = b - 1, ref - 1
    epoch = s["leaderEpoch"][i]
    hosted = "unhosted" if epoch == NOT_HOSTED else _sign(epoch, s["ctrlEpoch"])
    leader = s["leader"][i]
    role = "leader" if leader == b else "none" if leader == NO_LEADER else "follower"
    log, ref_log = s["log"][i], s["log"][r]
    return (
        b in s["alive"],
        role,
        hosted,
        s["fetchState"][i],
        _sign(len(log), len(ref_log)),
        _sign(s["hw"][i], s["hw"][r]),
        b in s["ctrlIsr"],
        b in s["isr"][r],
        _prefix(log, ref_log),
    )


def abstract_state(s: State) -> AbstractState:
    """The relations between the replicas' views that replication bugs break: per replica, its
    view relative to the controller's leader (or to replica 1 when there is none), and whether
    some acknowledged record is not yet committed. (Computed again only when a variable it
    reads changed, `projection.OnVariables`.)"""
    return _ABSTRACT_STATE(s)


def _abstract_state(s: State) -> AbstractState:
    """`abstract_state`, computed."""
    replicas = range(1, len(s["hw"]) + 1)
    ref = s["ctrlLeader"] if s["ctrlLeader"] in replicas else 1
    committed = {record for _, record in s["committed"]}
    views = tuple(_replica(s, b, ref) for b in replicas)
    return (ref == s["ctrlLeader"], views, bool(s["acked"] - committed))


_ABSTRACT_STATE = OnVariables(
    _abstract_state,
    ("hw", "ctrlLeader", "committed", "acked", "leaderEpoch", "ctrlEpoch", "leader", "log",
     "alive", "fetchState", "ctrlIsr", "isr"),
)  # fmt: skip


@dataclass
class Coverage:
    """The abstract states a campaign's runs reached: how often each, and the curve of distinct
    states against time (one point per run)."""

    seen: Counter[AbstractState] = field(default_factory=Counter)
    started: float = field(default_factory=time.perf_counter)
    curve: list[tuple[float, int]] = field(default_factory=list)
    """(seconds since the campaign started, distinct abstract states) after each run."""
    first_seen: dict[AbstractState, float] = field(default_factory=dict)
    """Seconds since the campaign started when each abstract state was first reached (at the
    end of the run that reached it), for a curve over several campaigns (`joint_curve`)."""

    def rarity(self, run: Iterable[AbstractState]) -> float:
        """A run's score: the sum, over the distinct abstract states it reached, of 1 / (1 +
        the runs before it that reached that state). A run that reaches one never-seen state
        scores at least 1; one that stays among well-trodden states scores near 0."""
        states = run if isinstance(run, set | frozenset) else set(run)
        return sum(1.0 / (1 + self.seen[a]) for a in states)

    def observe(self, run: Iterable[AbstractState]) -> float:
        """Count a finished run's abstract states, extend the curve; the run's rarity (scored
        before it is counted)."""
        states = run if isinstance(run, set | frozenset) else set(run)
        now = time.perf_counter() - self.started
        seen, score = self.seen, 0.0
        # One pass, so each state is hashed once (a state is a nested tuple, whose hash is
        # computed afresh each time): `rarity`'s sum in the same order, then the counts.
        for state in states:
            count = seen[state]
            score += 1.0 / (1 + count)
            if count == 0:
                self.first_seen[state] = now
            seen[state] = count + 1
        self.curve.append((now, len(seen)))
        return score


def joint_curve(parts: Iterable[tuple[float, Coverage]]) -> list[tuple[float, int]]:
    """The distinct abstract states of campaigns run one after the other, against time: each
    campaign's coverage with the seconds from the first one's start to its own start; a point
    where the count grows."""
    first: dict[AbstractState, float] = {}
    for offset, coverage in parts:
        for state, seconds in coverage.first_seen.items():
            at = offset + seconds
            if state not in first or at < first[state]:
                first[state] = at
    return [(at, n) for n, at in enumerate(sorted(first.values()), start=1)]
