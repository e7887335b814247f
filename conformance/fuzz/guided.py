"""Guided fuzzing (`kreplica fuzz --guided`): a campaign's runs handed out round by round to the
arm, a stage and a fault mix, whose last rounds reached the most abstract states the campaign
had not seen.

Theory of operation. The abstract states of `guidance` (the relations between the replicas'
views where replication bugs live) measure how far a search has reached. An unguided campaign
of stages gives each stage an equal share, whether its runs still find new states or not.
Guidance spends the share where the finding is: the arms are each stage of the campaign with
each fault mix its set-up allows (`fault_mixes`: every fault, or one family of them: process
faults, elections, network faults), so a stage whose runs under some mix have stopped finding
new states gives way to one that still does, as a fault-mix swarm whose mixes are weighed by
the rarity of what they reach. A round is `ROUND_RUNS` runs of one arm, a campaign
(`campaign.run_fuzz`) of its own seed, `round_seed`, so no round repeats another's runs. First
every arm gets one round, in order; then three rounds in four go to the arm of the highest
yield (new abstract states per run, an average that halves the weight of each older round of
that arm), and every fourth to the arm with the fewest rounds, so that no arm is judged on one
unlucky round. Every choice depends on the runs alone, never on the clock: a seed's guided
campaign is the same on every machine (the time limit only cuts it shorter).

This replaced Hypothesis's `target()` with the run's rarity as its score (`FuzzSetup.guided`,
which the library still offers), which reached fewer abstract states than no guidance in the
same time: Hypothesis's optimiser hill-climbs the run of the best score, and a rarity score
falls as the campaign sees more, so the best score was an early run's, which no later run
could beat (docs/fuzzing.md has the figures of both).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from kreplica.conformance.fuzz.campaign import run_fuzz
from kreplica.conformance.fuzz.corpus_writer import CorpusWriter
from kreplica.conformance.fuzz.guidance import AbstractState
from kreplica.conformance.fuzz.runs import RunStats
from kreplica.conformance.fuzz.setup import FuzzSetup
from kreplica.conformance.fuzz.stages import Stage, StagedResult

ROUND_RUNS = 20
"""Runs of a round: about a second of one core; the default campaign's 3,000 runs are 150
rounds, the first sweep of its 28 arms (7 stages, 4 mixes each) 560 of them."""

EXPLORE_EVERY = 4
"""Every fourth round after the first sweep goes to the arm with the fewest rounds."""

FAMILIES: tuple[tuple[str, frozenset[str]], ...] = (
    ("process faults", frozenset({"crash", "unclean_shutdown", "fail_log_dir"})),
    ("elections", frozenset({"elect"})),
    ("network faults", frozenset({"drop", "duplicate", "isolate"})),
)
"""The fault families a mix may keep to (names of `setup.FAULTS`)."""


def fault_mixes(setup: FuzzSetup) -> list[tuple[str, frozenset[str]]]:
    """The fault mixes of a set-up: every fault it allows (its own `only_faults`), then each
    family of them alone, where that is a narrower choice."""
    kinds = frozenset(setup.fault_kinds)
    mixes = [("", setup.only_faults)]
    for name, family in FAMILIES:
        chosen = family & kinds
        if chosen and chosen != kinds:
            mixes.append((name, chosen))
    return mixes


def arms(stages: Sequence[Stage]) -> list[Stage]:
    """Every stage with every fault mix of its set-up, as stages of one round each (named
    after their stage; the mix is in the set-up): each stage with every fault first, so that
    the first sweep reaches every stage soonest, then each with its first family, ..."""
    mixes = [fault_mixes(stage.setup) for stage in stages]
    return [
        replace(stage, setup=replace(stage.setup, only_faults=mix[i][1]), time_limit=None)
        for i in range(max(len(m) for m in mixes))
        for stage, mix in zip(stages, mixes, strict=True)
        if i < len(mix)
    ]


def round_seed(seed_value: int, number: int) -> int:
    """The Hypothesis seed of round `number` (from 0) of the guided campaign of `seed_value`:
    seed 2's round 17 is 20017."""
    return seed_value * 10_000 + number


@dataclass
class Yields:
    """Each arm's rounds and its yield: new abstract states per run, each older round of the
    arm weighing half as much as the next."""

    rounds: list[int]
    value: list[float]
    seen: set[AbstractState] = field(default_factory=set)

    def next_arm(self, number: int) -> int:
        """The arm of round `number`: each once in order, then the best, or every
        EXPLORE_EVERY-th round the least tried (the first of equals)."""
        if number < len(self.rounds):
            return number
        if (number - len(self.rounds)) % EXPLORE_EVERY == EXPLORE_EVERY - 1:
            return min(range(len(self.rounds)), key=lambda i: (self.rounds[i], i))
        return max(range(len(self.value)), key=lambda i: (self.value[i], -i))

    def count(self, arm: int, states: set[AbstractState], runs: int) -> None:
        """Count a round of `arm` that reached `states` in `runs` runs."""
        new = len(states - self.seen)
        self.seen |= states
        found = new / max(runs, 1)
        first = self.rounds[arm] == 0
        self.value[arm] = found if first else (self.value[arm] + found) / 2
        self.rounds[arm] += 1


def run_guided(
    stages: Sequence[Stage],
    max_steps: int,
    seed_value: int = 0,
    on_run: Callable[[Stage, RunStats], None] | None = None,
    shrink: bool = True,
    corpus: CorpusWriter | None = None,
    time_limit: float | None = None,
) -> StagedResult:
    """Run the stages' runs (their examples summed) in rounds of `ROUND_RUNS`, each round on
    the arm `Yields.next_arm` picks, until the runs are spent, the time is over or a round
    fails (the rounds after it are not run)."""
    pool = arms(stages)
    budget = sum(stage.examples for stage in stages)
    yields = Yields([0] * len(pool), [0.0] * len(pool))
    started = time.perf_counter()
    results, offsets, ran = [], [], []
    number = 0
    while budget > 0:
        left = None if time_limit is None else time_limit - (time.perf_counter() - started)
        if left is not None and left <= 0:
            break
        arm = yields.next_arm(number)
        stage = replace(pool[arm], examples=min(ROUND_RUNS, budget))
        offsets.append(time.perf_counter() - started)
        report = None if on_run is None else (lambda stats, s=stage: on_run(s, stats))
        writer = corpus if stage.corpus else None
        result = run_fuzz(
            stage.setup, stage.examples, max_steps, round_seed(seed_value, number), report,
            shrink, writer, left,
        )  # fmt: skip
        results.append(result)
        ran.append(stage)
        if result.failure is not None:
            break
        yields.count(arm, set(result.stats.coverage.seen), result.stats.runs)
        budget -= stage.examples
        number += 1
    seconds = time.perf_counter() - started
    return StagedResult(
        tuple(stages), tuple(results), tuple(offsets), seed_value, seconds, time_limit,
        tuple(ran),
    )  # fmt: skip
