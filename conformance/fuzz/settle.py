"""The settle phase: once the faults stop, the cluster is let settle, and then judged.

A run in which nothing happens breaks no invariant, so each fuzz run ends with a settle phase
(`settle`): no more faults; every network partition heals, every dead broker restarts,
messages are delivered in order, fetchers run, leaders shrink ISRs of followers that cannot
catch up, the controller re-elects when brokers missed its decision, and time passes (backoffs
end, followers lag, delayed produces expire), all within bounds. Every settling step is a step
a fuzzer rule could take (`choices.CHOICES`, `setup.TICK_MS`), recorded and judged like the
others, so the trace still conforms to the spec. The settled cluster is then held to the
liveness requirements (`judges.liveness`: EventuallyReplicated, EventuallyAnswered).

The settle phase depends only on the run so far (the cluster and its recorded events), so a
failing run is saved up to its settle phase, and its schedule replays with the phase run again
after its steps (`replay_saved`). A run that does not settle fails, whatever the reason:
Kafka 2.6.0's truncation livelock, KAFKA-10706, is no exception, as Kafka 2.6.3, the release
modelled, has its fix; the seeded bug `kafka-10706` brings it back, and this is the check that
finds it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kreplica.conformance.bridge.projection import State
from kreplica.conformance.bridge.recorder import Recorder
from kreplica.conformance.fuzz.choices import CHOICES
from kreplica.conformance.judges.liveness import (
    LIVENESS,
    REPLICATED,
    Violation,
    progress_violation,
    sent_produces,
)
from kreplica.conformance.replay.schedule import TP, Replay, Schedule, replay_schedule
from kreplica.impl.cluster import Cluster
from kreplica.impl.steps import Elect, Step, Tick

SETTLE_KINDS = ("heal", "halt_on_log_dir_failure", "restart", "deliver", "shrink_isr", "fetch")
"""The rules the settle phase takes, in order of precedence: faults end first."""

SETTLE_TICKS = (1_000, 30_001, 1_000, 30_001)
"""The clock advances of a settle phase, one each time the cluster is quiet and not yet
settled: a backoff ends; followers lag and delayed produces expire; and once more each."""

SETTLE_ELECTIONS = 2
"""Elections the settle phase may ask for, when a broker missed the controller's decision."""

SETTLE_MAX_STEPS = 400
"""The most steps a settle phase takes (far more than a correct cluster needs)."""

LOOP_EVENTS = 12
"""The spec actions a settle phase that never ends names in its reason (the loop it is in)."""

IDLE_LIMIT = 8
"""Steps in a row that record no spec action after which the cluster counts as quiet."""


def next_settling_step(c: Cluster, s: State) -> Step | None:
    """The next step of the settle phase: heal, restart, deliver, shrink an ISR or fetch, the
    first enabled in that order (None: the cluster is quiet)."""
    for kind in SETTLE_KINDS:
        found = CHOICES[kind](c, s)
        if found:
            return found[0]
    return None


def stale_election(c: Cluster, s: State) -> Elect | None:
    """An election of the controller's leader (or of the first live broker, if it has none)
    when the partition has no leader or a running replica missed the controller's epoch (its
    LeaderAndIsr was lost): the controller sends its decision again (R1, R2)."""
    leader = c.leader(TP)
    missed = any(s["leaderEpoch"][b - 1] != s["ctrlEpoch"] for b in s["alive"])
    if leader is not None and not missed:
        return None
    candidates = sorted(s["ctrlLive"])
    if leader is not None and leader in candidates:
        return Elect(TP, leader)
    return Elect(TP, candidates[0]) if candidates else None


def settle(recorder: Recorder, apply: Callable[[Step], None]) -> Violation | None:
    """The settle phase on the recorder's cluster, each step taken through `apply` (which
    records and checks it, and raises to stop the phase): the steps that end the faults and
    let replication catch up, the first enabled in SETTLE_KINDS' order; when the cluster is
    quiet (or IDLE_LIMIT steps in a row recorded no spec action) and not settled yet, an
    election if a broker missed the controller's decision, else a clock advance; within
    bounds. The liveness requirement the settled cluster breaks (None: it keeps them). It
    depends only on the run so far, so a replay settles the same way (`schedule.Settle`)."""
    c = recorder.cluster
    advances: list[Step] = []
    idle = 0
    for _ in range(SETTLE_MAX_STEPS):
        step = next_settling_step(c, recorder.state)
        if step is None or idle >= IDLE_LIMIT:
            idle, step = 0, _unstick(recorder, advances)
            if step is None:
                return progress_violation(c, recorder.state, sent_produces(recorder))
            advances.append(step)
        recorded = len(recorder.events)
        apply(step)
        idle = idle + 1 if len(recorder.events) == recorded else 0
    last = sorted({e.action for e in recorder.events[-LOOP_EVENTS:]})
    return REPLICATED, (
        f"still busy after {SETTLE_MAX_STEPS} settling steps, the last ones: {', '.join(last)}"
    )


def _unstick(recorder: Recorder, advances: list[Step]) -> Step | None:
    """A quiet cluster that has not settled yet (`advances`: the elections and clock
    advances of this settle phase so far): an election if a broker missed the controller's
    decision, else the next clock advance (None: settled, or out of both)."""
    c, state = recorder.cluster, recorder.state
    if progress_violation(c, state, sent_produces(recorder)) is None:
        return None
    ticks = sum(isinstance(step, Tick) for step in advances)
    election = stale_election(c, state)
    if election is not None and len(advances) - ticks < SETTLE_ELECTIONS:
        return election
    return Tick(SETTLE_TICKS[ticks]) if ticks < len(SETTLE_TICKS) else None


def replay_saved(
    schedule: Schedule,
    meta: Mapping[str, Any] | None = None,
    invariants: bool = True,
    rules: bool | None = None,
) -> Replay:
    """Replay a saved failure's schedule as the fuzzer ran it (`schedule.replay_schedule`): one that
    records a liveness failure holds the run up to its settle phase, which runs again after
    its steps (`settle`)."""
    settling = schedule.violation is not None and schedule.violation[0] in LIVENESS
    return replay_schedule(
        schedule, meta, invariants=invariants, rules=rules, settle=settle if settling else None
    )
