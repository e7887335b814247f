"""Schedules: the impl steps of a run as JSON, replayed exactly, and minimised.

Each step is a JSON object as `step_codec` writes it. A schedule file (`*.schedule.json`) adds
what a replay needs: the variant, the number of replicas, the broker config and the violation
the run shows (see `Schedule`).

`replay_schedule` runs a schedule on a fresh cluster with the fuzzer's checks; `same_failure` says
whether what it shows is the failure the schedule recorded (an exception only with the same
type and message); a step the simulator refuses means the schedule no longer applies, and
raises SimulationError rather than blaming the implementation. `minimize` deletes the steps a
violation does not need, replaying each candidate. A schedule that records a liveness failure
(`LIVENESS`) holds the run up to its settle phase, which both run again after its steps when
given the fuzzer's (`Settle`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from kreplica.conformance.bridge.local_partitions import SPEC_TP, spec_cluster
from kreplica.conformance.bridge.projection import State
from kreplica.conformance.bridge.recorder import Recorder, SpecRecorder
from kreplica.conformance.bridge.step_codec import step_from_json, step_to_json
from kreplica.conformance.errors import TraceError
from kreplica.conformance.judges.checked_steps import (
    IMPLEMENTATION_ERROR,
    Judge,
    Violation,
    apply_checked,
)
from kreplica.conformance.judges.liveness import LIVENESS
from kreplica.conformance.tla.itf import ItfTrace, read_json, write_text_atomic
from kreplica.impl.cluster import Cluster, SimulationError
from kreplica.impl.config import BrokerConfig
from kreplica.impl.steps import Step
from kreplica.impl.variants import DIMENSIONS, Variant, VariantError, parse_variant

SCHEDULE_FORMAT = 1
"""The version of the schedule file format."""

SCHEDULE_KEYS = frozenset(
    {"format", "version", "variant", "replicas", "config", "local_records", "violation", "steps"}
)
"""The keys a schedule file gives meaning to; any other goes to `Schedule.meta`."""

TP = SPEC_TP
"""The partition a schedule drives, on replicas 1..n (the spec models one partition)."""


def variant_to_json(variant: Variant) -> dict[str, Any]:
    """The variant's non-default dimensions and its bugs."""
    dims = {d: getattr(variant, d) for d in DIMENSIONS if getattr(variant, d) != DIMENSIONS[d][0]}
    return {"dimensions": dims, "bugs": sorted(variant.bugs)}


def variant_from_json(obj: Any, where: str = "variant") -> Variant:
    """Decode a variant written by `variant_to_json`; TraceError if it is not one."""
    if not isinstance(obj, dict):
        raise TraceError(f"{where}: expected an object")
    dims, bugs = obj.get("dimensions", {}), obj.get("bugs", [])
    try:
        return parse_variant([f"{k}={v}" for k, v in dims.items()], bugs)
    except (VariantError, AttributeError, TypeError) as err:
        raise TraceError(f"{where}: {err}") from None


@dataclass(frozen=True)
class Schedule:
    """A saved run: how to build the cluster, its steps, and the violation it shows."""

    variant: Variant
    replicas: int
    steps: tuple[Step, ...]
    config: BrokerConfig = field(default_factory=BrokerConfig)
    violation: Violation | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
    local_records: int = 0
    """Records in each broker's local partition from the start (`local_partitions`); 0: the
    cluster has t-0 alone (a schedule saved before 2026-11-27 says nothing, and means 0)."""

    def cluster(self) -> Cluster:
        """A fresh cluster to run the schedule on: partition t-0 on all its brokers, 1..n,
        and each broker's local partition if `local_records`."""
        return spec_cluster(self.replicas, self.variant, self.config, self.local_records)

    def to_json(self) -> dict[str, Any]:
        """The schedule as a JSON object."""
        defaults = asdict(BrokerConfig())
        config = {k: v for k, v in asdict(self.config).items() if v != defaults[k]}
        violation = None
        if self.violation is not None:
            violation = {"invariant": self.violation[0], "reason": self.violation[1]}
        return {
            "format": "kreplica-schedule",
            "version": SCHEDULE_FORMAT,
            **dict(self.meta),
            "variant": variant_to_json(self.variant),
            "replicas": self.replicas,
            "config": config,
            **({"local_records": self.local_records} if self.local_records else {}),
            "violation": violation,
            "steps": [step_to_json(s) for s in self.steps],
        }


def schedule_from_json(obj: Any, source: str = "schedule") -> Schedule:
    """Decode and validate a schedule object; TraceError names `source`."""
    if not isinstance(obj, dict) or obj.get("format") != "kreplica-schedule":
        raise TraceError(f"{source}: not a kreplica schedule (no 'format': 'kreplica-schedule')")
    replicas, raw_steps = obj.get("replicas"), obj.get("steps")
    if not isinstance(replicas, int) or not isinstance(raw_steps, list):
        raise TraceError(f"{source}: 'replicas' must be an integer and 'steps' a list")
    try:
        config = BrokerConfig(**obj.get("config", {}))
    except TypeError as err:
        raise TraceError(f"{source}: bad config: {err}") from None
    violation = obj.get("violation")
    if violation is not None and not (
        isinstance(violation, dict) and {"invariant", "reason"} <= set(violation)
    ):
        raise TraceError(f"{source}: 'violation' must hold 'invariant' and 'reason'")
    local_records = obj.get("local_records", 0)
    if not isinstance(local_records, int) or isinstance(local_records, bool) or local_records < 0:
        raise TraceError(f"{source}: 'local_records' must be a whole number")
    return Schedule(
        variant=variant_from_json(obj.get("variant", {}), f"{source}: variant"),
        replicas=replicas,
        steps=tuple(step_from_json(s, f"{source}: step {i}") for i, s in enumerate(raw_steps)),
        config=config,
        violation=(violation["invariant"], violation["reason"]) if violation else None,
        meta={k: v for k, v in obj.items() if k not in SCHEDULE_KEYS},
        local_records=local_records,
    )


def recorded_checks(schedule: Schedule, source: str = "schedule") -> tuple[bool, bool]:
    """(invariants, rules): what the campaign that saved `schedule` checked (`fuzz
    --no-invariants`, `--rules-only`), so that a replay checks the same; both True for a
    schedule that does not say. TraceError names `source` if either is not a boolean."""
    invariants = schedule.meta.get("invariants", True)
    rules = schedule.meta.get("rules", invariants)
    if not isinstance(invariants, bool) or not isinstance(rules, bool):
        raise TraceError(f"{source}: 'invariants' and 'rules' must be true or false")
    return invariants, rules


def dumps_schedule(schedule: Schedule) -> str:
    """JSON text of a schedule, one step per line."""
    obj = schedule.to_json()
    head = json.dumps({k: v for k, v in obj.items() if k != "steps"}, indent=2)
    rows = ",\n".join(f"    {json.dumps(s)}" for s in obj["steps"])
    return head[:-2] + ',\n  "steps": [\n' + rows + "\n  ]\n}\n"


def write_schedule(path: Path, schedule: Schedule) -> None:
    """Write a schedule file atomically."""
    write_text_atomic(path, dumps_schedule(schedule))


def read_schedule(path: Path) -> Schedule:
    """Read and validate a schedule file."""
    return schedule_from_json(read_json(path), str(path))


def steps_json(steps: Sequence[Step]) -> list[dict[str, Any]]:
    """Several steps as JSON objects."""
    return [step_to_json(s) for s in steps]


# ---------------------------------------------------------------- replaying and minimising


@dataclass(frozen=True)
class Replay:
    """A schedule run again: the first violation (if any), after how many steps, the trace."""

    violation: Violation | None
    steps_applied: int
    trace: ItfTrace
    """The trace of the schedule's steps (a settle phase after them, `Settle`, is not in it)."""


Allowed = Callable[[Cluster, State, Step | None, Step], bool]
"""Whether a step may follow `previous` in the current state (e.g. the fuzzer's rules)."""

Settle = Callable[[Recorder, Callable[[Step], None]], Violation | None]
"""What follows a schedule's steps when it records a liveness failure (`LIVENESS`): the
fuzzer's settle phase (`fuzz.settle.settle`), which takes its steps through the function it
is given (each checked as the schedule's were) and returns the liveness requirement the
settled cluster breaks, or None. Such a schedule holds the run up to its settle phase: the
phase is deterministic, so it replays, and it is the check, not part of the run."""


class _Stopped(Exception):
    """A step of the settle phase broke an invariant or a rule: the phase stops there."""

    def __init__(self, violation: Violation) -> None:
        super().__init__(violation)
        self.violation = violation


def _settled(
    judge: Judge, settle: Settle, invariants: bool, rules: bool | None
) -> Violation | None:
    """Run the settle phase on the judged run's cluster: the first violation of one of its
    steps, else the liveness requirement it reports broken, else None."""

    def apply(step: Step) -> None:
        found = apply_checked(judge, step, invariants, rules)
        if found is not None:
            raise _Stopped(found)

    try:
        return settle(judge.recorder, apply)
    except _Stopped as stopped:
        return stopped.violation


def replay_schedule(
    schedule: Schedule,
    meta: Mapping[str, Any] | None = None,
    allowed: Allowed | None = None,
    invariants: bool = True,
    rules: bool | None = None,
    settle: Settle | None = None,
) -> Replay:
    """Run the schedule's steps on a fresh cluster, checking as the fuzzer does (with
    `invariants` False, as `fuzz --no-invariants` does: exceptions only, unless `rules`, as
    `fuzz --rules-only` does: Kafka's rules but not the spec's invariants); stop at the first
    violation. An exception the implementation raises is an ImplementationError violation; a
    step the simulator refuses (it is not enabled: the schedule no longer applies) raises
    SimulationError, `step N of M: why`. At a step that is not `allowed`, the replay stops
    without a violation. With `settle`, the settle phase follows the last step (`Settle`),
    and what it finds is the replay's violation."""
    judge = Judge(SpecRecorder(schedule.cluster(), TP, dict(meta or {})))
    recorder = judge.recorder
    previous: Step | None = None
    for n, step in enumerate(schedule.steps, start=1):
        if allowed is not None and not allowed(recorder.cluster, recorder.state, previous, step):
            return Replay(None, n - 1, recorder.trace())
        previous = step
        try:
            found = apply_checked(judge, step, invariants, rules, raise_refused=True)
        except SimulationError as err:
            raise SimulationError(f"step {n} of {len(schedule.steps)}: {err}") from None
        if found is not None:
            return Replay(found, n, recorder.trace())
    trace = recorder.trace()
    found = None if settle is None else _settled(judge, settle, invariants, rules)
    return Replay(found, len(schedule.steps), trace)


def failure_kind(violation: Violation) -> tuple[str, str]:
    """What a shrunk run must still show: the invariant, and for an exception its type and
    message (an AttributeError must not shrink into an IndexError of a step left without its
    cause, nor a list's IndexError into a deque's), for a liveness failure its reason (a
    livelock must not shrink into a partition left without a leader)."""
    name, reason = violation
    return name, reason if name == IMPLEMENTATION_ERROR or name in LIVENESS else ""


def same_failure(recorded: Violation | None, shown: Violation | None) -> bool:
    """Whether a replay shows the failure a schedule recorded: the same kind of failure
    (`failure_kind`: the invariant, and for an exception the same type and message, for a
    liveness failure the same reason), or none where none was recorded."""
    if recorded is None or shown is None:
        return recorded is None and shown is None
    return failure_kind(recorded) == failure_kind(shown)


def _still_fails(
    schedule: Schedule,
    steps: list[Step],
    kind: tuple[str, str],
    allowed: Allowed | None,
    invariants: bool,
    rules: bool | None = None,
    settle: Settle | None = None,
) -> list[Step] | None:
    """The steps of `steps` that still fail the same way (`failure_kind`), up to the
    violation (None: they do not). With `allowed`, a step that is no longer allowed is left
    out (a message whose request was deleted, a restart of a broker that no longer crashed),
    so that a step is deleted together with the steps that depend on it. With `settle`, the
    settle phase follows the steps (`Settle`)."""
    if allowed is None:
        candidate = replace(schedule, steps=tuple(steps))
        try:
            result = replay_schedule(candidate, invariants=invariants, rules=rules, settle=settle)
        except SimulationError:  # a step left without the one that enabled it
            return None
        if result.violation is None or failure_kind(result.violation) != kind:
            return None
        return steps[: result.steps_applied]
    judge = Judge(SpecRecorder(schedule.cluster(), TP, {}))
    recorder = judge.recorder
    kept: list[Step] = []
    for step in steps:
        previous = kept[-1] if kept else None
        if not allowed(recorder.cluster, recorder.state, previous, step):
            continue
        kept.append(step)
        found = apply_checked(judge, step, invariants, rules)
        if found is not None:
            return kept if failure_kind(found) == kind else None
    found = None if settle is None else _settled(judge, settle, invariants, rules)
    return kept if found is not None and failure_kind(found) == kind else None


MINIMIZE_CHUNKS = (16, 8, 4, 2, 1)
"""The sizes of the runs of consecutive steps `minimize` tries to delete, largest first."""


def minimize(
    schedule: Schedule,
    allowed: Allowed | None = None,
    max_replays: int = 2_000,
    invariants: bool = True,
    rules: bool | None = None,
    settle: Settle | None = None,
) -> Schedule:
    """Delete steps while the run still fails the same way and every step stays `allowed`:
    runs of consecutive steps, largest first, with the steps that depend on them (a greedy
    delta debugging), round after round until a round deletes nothing. Each try is a
    replay (checking `invariants` and `rules`, and settling with `settle`, as `replay_schedule`
    does); at most `max_replays` of them. SimulationError if the schedule's own steps
    cannot be applied."""
    if schedule.violation is None:
        return schedule
    kind, steps, tries = failure_kind(schedule.violation), list(schedule.steps), 0
    progress = True
    while progress and tries < max_replays:
        progress = False
        for size in MINIMIZE_CHUNKS:
            i = 0
            while i < len(steps) and tries < max_replays:
                tries += 1
                candidate = steps[:i] + steps[i + size :]
                kept = _still_fails(schedule, candidate, kind, allowed, invariants, rules, settle)
                if kept is not None and len(kept) < len(steps):
                    steps, progress = kept, True
                else:
                    i += 1
    final = replay_schedule(
        replace(schedule, steps=tuple(steps)), invariants=invariants, rules=rules, settle=settle
    )
    return replace(schedule, steps=tuple(steps), violation=final.violation)
