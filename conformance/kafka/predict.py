"""The outcomes the model allows for a schedule: its single prediction and many jittered runs.

Theory of operation. A real run of a schedule is one of many: which broker hosts the
controller, whether a follower had fetched a record when a fault struck, when an ISR task ran,
in which ZooKeeper tick a session expired, how long a failover took. The schedule simulator
(`simulate.py`) asks each of these questions of a `jitter.Jitter`; `predict_set` runs the
schedule once unjittered (the single prediction, `jitter.Fixed`) and `runs` times jittered,
each with its own seed drawn from (seed, schedule name, run), and keeps every outcome's
projection onto the compared fields (`outcome.AGREEMENT_FIELDS`). That set is the prediction:
a real run agrees when its outcome is in it. Its size is part of the result (a set that
allows everything agrees with everything), and so is how many of the runs found something new
in their second half (a set still growing there may be missing outcomes).

May import: `kreplica.impl`, `kreplica.conformance.errors` and this room (the `kafka` room rule,
tests/test_layout.py).
"""

from __future__ import annotations

import time
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kreplica.conformance.kafka.jitter import Fixed, Jitter
from kreplica.conformance.kafka.outcome import AGREEMENT_FIELDS, Outcome
from kreplica.conformance.kafka.schedule import Schedule
from kreplica.conformance.kafka.simulate import KafkaSim
from kreplica.conformance.kafka.timing import Timing, harness_timing

DEFAULT_RUNS = 300
"""Jittered runs per schedule unless asked otherwise (docs/real-kafka.md measures the cost and
how often a set still grows in its second half)."""

Key = tuple[bool, bool, int, tuple[int, ...], int]
"""An outcome projected onto AGREEMENT_FIELDS: acked lost, diverged, HW, ISR (sorted), epoch."""


def key_of(outcome: Outcome) -> Key:
    """The outcome as the comparison sees it (`outcome.disagreements` compares these)."""
    return (
        outcome.acked_lost,
        outcome.diverged,
        outcome.high_watermark,
        tuple(sorted(outcome.isr)),
        outcome.leader_epoch,
    )


def key_text(key: Key) -> str:
    """An outcome key as a short line: 'lost=no diverged=no hw=6 isr={1,2,3} epoch=1'."""
    lost, diverged, hw, isr, epoch = key
    yes = {True: "yes", False: "no"}
    return (
        f"lost={yes[lost]} diverged={yes[diverged]} hw={hw} "
        f"isr={{{','.join(map(str, isr))}}} epoch={epoch}"
    )


@dataclass(frozen=True)
class PredictedSet:
    """The outcomes the model allows for one schedule, with how many runs gave each."""

    schedule: str
    single: Key
    """The single (unjittered) prediction's outcome."""
    counts: tuple[tuple[Key, int], ...]
    """Each outcome of the jittered runs and how many gave it, most frequent first."""
    runs: int
    seed: int
    late: int
    """Outcomes first seen in the second half of the jittered runs."""
    seconds: float

    @property
    def outcomes(self) -> frozenset[Key]:
        """The set: the single prediction's outcome and every jittered run's."""
        return frozenset({self.single, *(k for k, _ in self.counts)})

    def allows(self, outcome: Outcome) -> bool:
        """The outcome is one the model allows for this schedule."""
        return key_of(outcome) in self.outcomes

    def to_json(self) -> dict[str, Any]:
        """Plain JSON: each outcome as an object of AGREEMENT_FIELDS, with its run count."""
        return {
            "schedule": self.schedule,
            "runs": self.runs,
            "seed": self.seed,
            "size": len(self.outcomes),
            "late": self.late,
            "seconds": round(self.seconds, 3),
            "single": _key_json(self.single),
            "outcomes": [{**_key_json(k), "runs": n} for k, n in self.counts],
        }


def _key_json(key: Key) -> dict[str, Any]:
    """An outcome key as an object of AGREEMENT_FIELDS."""
    return dict(zip(AGREEMENT_FIELDS, (key[0], key[1], key[2], list(key[3]), key[4]), strict=True))


def run_seed(seed: int, schedule: str, run: int) -> int:
    """The jitter seed of one run: the same for the same campaign seed, schedule and run."""
    return zlib.crc32(f"{seed}/{schedule}/{run}".encode())


def predict_set(
    schedule: Schedule,
    runs: int = DEFAULT_RUNS,
    seed: int = 0,
    timing: Timing | None = None,
    on_run: Callable[[int], None] | None = None,
) -> PredictedSet:
    """The schedule's predicted set over `runs` jittered runs (and the single prediction),
    with the harness's timeouts unless `timing` says otherwise."""
    chosen = timing or harness_timing()
    began = time.monotonic()
    single = key_of(KafkaSim(schedule, timing=chosen, jitter=Fixed()).run())
    counts: Counter[Key] = Counter()
    late = 0
    for run in range(runs):
        jitter = Jitter(run_seed(seed, schedule.name, run))
        key = key_of(KafkaSim(schedule, timing=chosen, jitter=jitter).run())
        if key not in counts and key != single and run >= runs // 2:
            late += 1
        counts[key] += 1
        if on_run is not None:
            on_run(run)
    return PredictedSet(
        schedule.name,
        single,
        tuple(counts.most_common()),
        runs,
        seed,
        late,
        time.monotonic() - began,
    )
