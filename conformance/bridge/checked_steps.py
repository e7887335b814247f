"""What the fuzzer checks, and when: the spec's invariants after every spec action of a run.

`checked_violations` is the one rule that says which invariants count in a state (durability
is not promised after a power loss). `apply_checked` performs one simulator step through the
recorder and returns the first violation it shows; the fuzzer and the replay of a saved
schedule both use it, so a saved failure replays exactly as it was found.
"""

from __future__ import annotations

from kreplica.conformance.bridge.invariants import violations
from kreplica.conformance.bridge.projection import CLIENT, State
from kreplica.conformance.bridge.recorder import Args, Recorder
from kreplica.impl.messages import FetchRequest
from kreplica.impl.steps import Deliver, Step

Violation = tuple[str, str]
"""(invariant name, reason)."""

POWER_LOSS_INVARIANTS = frozenset(
    {
        "HighWatermarkWithinLog",
        "LogMatching",
        "FollowersMatchLeader",
        "EpochCacheOrdered",
        "LeaderEpochsOnlyGrow",
    }
)
"""The properties the spec proves under power loss (spec/Kip279UncleanShutdown.cfg)."""

IMPLEMENTATION_ERROR = "ImplementationError"
"""The name a failure gets when a step raised an exception instead of breaking an invariant."""


def checked_violations(state: State, before: State | None) -> list[Violation]:
    """The violations that count in `state` (reached from `before`). THE rule:

    Kafka 2.6 acknowledges a write without an fsync, so a power loss (an unclean shutdown) may
    legitimately lose acknowledged and committed records (KIP-966 addresses it). So once a run
    has had an unclean shutdown, only the properties the spec proves under power loss count
    (`POWER_LOSS_INVARIANTS`): AckedRecordsNeverLost, CommittedRecordsOnIsr and ConsistentReads
    are no longer checked. Before that, and in runs with process crashes only (the log
    survives), every invariant counts: such a state is one of the spec's crash-only model,
    where all of them are proved.
    """
    found = violations(state, before)
    if state["uncleanShutdowns"] == 0:
        return found
    return [(name, reason) for name, reason in found if name in POWER_LOSS_INVARIANTS]


class SpecRecorder(Recorder):
    """The recorder, except that a consumer's FETCH is no spec action: the spec's reads are
    its `committed` history (the recorder names it LeaderHandleFetch of follower -1)."""

    def _name(self, step: Step) -> tuple[str, Args] | None:
        """The spec action of a step; None for a consumer FETCH reaching a broker."""
        if isinstance(step, Deliver) and step.src == CLIENT:
            payload = self.cluster.network.queues[(step.src, step.dst)][step.index].payload
            if isinstance(payload, FetchRequest) and payload.replica_id < 0:
                return None
        return super()._name(step)


def apply_checked(recorder: Recorder, step: Step, invariants: bool = True) -> Violation | None:
    """Apply one step through the recorder; the first violation it shows, if any (with
    `invariants` False, only exceptions count).

    An exception from the simulator is a finding too: it is reported as IMPLEMENTATION_ERROR.
    """
    before = recorder.state
    try:
        events = recorder.apply(step)
    except Exception as err:
        return IMPLEMENTATION_ERROR, f"{type(err).__name__}: {err}"
    if not invariants:
        return None
    for event in events:
        found = checked_violations(event.state, before)
        if found:
            return found[0]
        before = event.state
    return None
