"""The default campaign's stages: the correct protocol, then every protocol variant the
implementation runs with code of its own, each judged by the checks that hold for it.

A variant's code is the correct protocol's but for a few branches (truncation to the HW,
unclean elections, KIP-101's end offsets, acks=1, requests without a leader epoch, an ISR
change answered later), which no run of the correct protocol takes. So `kreplica fuzz` without
`--variant` or `--bug` runs a campaign of stages: `correct` first, then one stage per variant
of `variants.distinct_variants()` (every non-default value of one dimension that the
implementation implements and runs differently from the default), in the registry's order.

Each stage is the campaign `kreplica fuzz --variant V` runs with the same options, judged by
what holds for V (`stage_setup`): an unsafe variant (a fuzz target, `targets.TARGETS`: the spec
under it breaks the invariants by design, TLC has a counterexample) by Kafka's own rules alone,
as `--rules-only` does; a safe one (`isr=alter-partition`) and the correct protocol by the
invariants and the rules. `--rules-only` and `--no-invariants` apply to every stage. Only the
stages whose variant the spec models write to `--corpus` (`Stage.corpus`): `kreplica conform
--as-recorded` checks each of those traces under the variant it records; the spec has nothing
to check `isr=alter-partition`'s traces against.

The stages share the campaign's `--examples` and `--time-limit` in equal shares (`shares`), so
the default campaign takes about as long as one stage did alone; each stage runs with the
campaign's seed, so a stage's runs are exactly those of `kreplica fuzz --variant V --examples
SHARE --seed S` with its checks (`rerun_options`). The stages run in order and the campaign
stops at its first failure, as a single campaign does; the stages after it are not run.
A swarm (`swarm.py`) runs each (seed, stage) as a task of its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from kreplica.conformance.errors import KreplicaError
from kreplica.conformance.fuzz.campaign import FuzzResult, run_fuzz
from kreplica.conformance.fuzz.corpus_writer import CorpusWriter
from kreplica.conformance.fuzz.runs import RunStats, merged_stats
from kreplica.conformance.fuzz.setup import FuzzSetup
from kreplica.conformance.fuzz.targets import TARGETS, setup_options
from kreplica.impl.variants import Variant, distinct_variants, not_in_spec

CORRECT = "correct"
"""The stage of the correct protocol (every dimension at its default, no bug)."""

ALL = "all"
"""`--stages all`: every stage (the default)."""

UNSAFE = frozenset(t.word for t in TARGETS if "=" in t.word)
"""The registry's unsafe variants, as NAME=VALUE: each is a fuzz target, and TLC breaks the
spec's invariants under it (docs/fuzzing.md, "Targets")."""


def stage_names() -> tuple[str, ...]:
    """Every stage's name, in the order the default campaign runs them."""
    return (CORRECT, *(v.label() for v in distinct_variants()))


STAGE_NAMES = stage_names()


@dataclass(frozen=True)
class Stage:
    """One stage: its name, the set-up it runs (variant and checks), its share of the runs and
    of the time, and whether its runs go to the corpus."""

    name: str
    setup: FuzzSetup
    examples: int
    time_limit: float | None = None
    corpus: bool = True
    """Its runs are written to --corpus (the spec models its variant, or the campaign has a
    single stage and its user asked for that variant)."""

    def checks(self) -> str:
        """What judges the stage's runs, in a few words."""
        s = self.setup
        if s.invariants:
            return "invariants and Kafka's rules"
        return "Kafka's rules (invariants broken by design)" if s.rules else "nothing (recorded)"


def stage_setup(base: FuzzSetup, variant: Variant) -> FuzzSetup:
    """`base` under `variant`, judged by what holds for it: an unsafe variant (UNSAFE) by
    Kafka's rules alone, any other by what `base` checks."""
    setup = replace(base, variant=variant)
    if base.invariants and variant.label() in UNSAFE:
        return replace(setup, invariants=False, rules=True)
    return setup


def shares(total: int, parts: int) -> tuple[int, ...]:
    """`total` in `parts` shares as equal as integers allow, the larger ones first."""
    whole, left = divmod(total, parts)
    return tuple(whole + (1 if i < left else 0) for i in range(parts))


def parse_stages(text: str) -> tuple[str, ...]:
    """`--stages`: `all`, or stage names separated by commas, in the default campaign's order;
    KreplicaError for an unknown name."""
    words = [w.strip() for w in text.split(",") if w.strip()]
    if words == [ALL]:
        return STAGE_NAMES
    unknown = [w for w in words if w not in STAGE_NAMES]
    if unknown or not words:
        what = f"unknown stage {unknown[0]!r}" if unknown else "no stage named"
        raise KreplicaError(
            f"--stages: {what}; give {ALL} or some of {', '.join(STAGE_NAMES)}, separated by commas"
        )
    return tuple(name for name in STAGE_NAMES if name in words)


def plan(
    base: FuzzSetup, names: Sequence[str], examples: int, time_limit: float | None = None
) -> tuple[Stage, ...]:
    """The stages `names` of a campaign of the options `base` (its variant the default),
    sharing `examples` and `time_limit`."""
    variants = {v.label(): v for v in distinct_variants()} | {CORRECT: Variant()}
    runs = shares(examples, len(names))
    seconds = None if time_limit is None else time_limit / len(names)
    return tuple(
        Stage(name, setup, n, seconds, corpus=not not_in_spec(setup.variant))
        for name, n in zip(names, runs, strict=True)
        for setup in (stage_setup(base, variants[name]),)
    )


def single(setup: FuzzSetup, examples: int, time_limit: float | None = None) -> tuple[Stage]:
    """The one stage of a campaign of an explicit variant or bug (`--variant`, `--bug`): as
    asked, its runs written to the corpus whatever the variant."""
    return (Stage(setup.variant.label(), setup, examples, time_limit),)


def rerun_options(stage: Stage, seed: int) -> str:
    """The `kreplica fuzz` options that run the stage's campaign alone, the same runs."""
    words = setup_options(stage.setup)
    correct = [f"--stages {CORRECT}"] if stage.setup.variant.is_safe else []
    return " ".join([*correct, *words, f"--examples {stage.examples}", f"--seed {seed}"])


@dataclass(frozen=True)
class StagedResult:
    """A campaign of stages: the stages planned, the campaigns run (in order, up to the first
    that failed) with the stage each ran, when each began, the seed and the wall seconds. A
    campaign of stages runs each stage once; a guided one (`guided.run_guided`) runs rounds of
    its stages, each with fault mixes of their own."""

    stages: tuple[Stage, ...]
    results: tuple[FuzzResult, ...]
    offsets: tuple[float, ...]
    """Seconds from the campaign's start to each campaign's start."""
    seed: int
    seconds: float
    time_limit: float | None = None
    ran: tuple[Stage, ...] = ()
    """The stage each of `results` ran (its name is one of `stages`'s); empty: `stages`, in
    order."""

    @property
    def runs_of(self) -> tuple[Stage, ...]:
        """The stage each of `results` ran."""
        return self.ran or self.stages[: len(self.results)]

    @property
    def failure(self) -> FuzzResult | None:
        """The result of the campaign that failed (the last one run), or None."""
        failed = [r for r in self.results if r.failure is not None]
        return failed[0] if failed else None

    @property
    def failed_stage(self) -> Stage | None:
        """The stage (as run) that failed, or None."""
        for stage, result in zip(self.runs_of, self.results, strict=True):
            if result.failure is not None:
                return stage
        return None

    @property
    def not_run(self) -> tuple[Stage, ...]:
        """The planned stages no campaign ran."""
        names = {stage.name for stage in self.runs_of}
        return tuple(stage for stage in self.stages if stage.name not in names)

    def of_stage(self, name: str) -> list[FuzzResult]:
        """The results of the campaigns that ran the stage `name`."""
        return [r for s, r in zip(self.runs_of, self.results, strict=True) if s.name == name]

    @property
    def stats(self) -> RunStats:
        """The counters of the stages run, summed."""
        total = merged_stats([r.stats for r in self.results])
        total.seed, total.time_limit = self.seed, self.time_limit
        return total


def run_stages(
    stages: Sequence[Stage],
    max_steps: int,
    seed_value: int = 0,
    on_run: Callable[[Stage, RunStats], None] | None = None,
    shrink: bool = True,
    corpus: CorpusWriter | None = None,
    time_limit: float | None = None,
) -> StagedResult:
    """Run the stages in order, each `run_fuzz` of its set-up, its share and `seed_value`, its
    runs written to `corpus` if it keeps one; stop after the first that fails. `on_run` is
    called with the stage and its counters at the start of each run; `time_limit` is the
    campaign's, for the summary (each stage has its share)."""
    started = time.perf_counter()
    results: list[FuzzResult] = []
    offsets: list[float] = []
    for stage in stages:
        offsets.append(time.perf_counter() - started)
        report = None if on_run is None else _reporter(on_run, stage)
        writer = corpus if stage.corpus else None
        result = run_fuzz(
            stage.setup, stage.examples, max_steps, seed_value, report, shrink, writer,
            stage.time_limit,
        )  # fmt: skip
        results.append(result)
        if result.failure is not None:
            break
    seconds = time.perf_counter() - started
    return StagedResult(
        tuple(stages), tuple(results), tuple(offsets), seed_value, seconds, time_limit
    )


def _reporter(
    on_run: Callable[[Stage, RunStats], None], stage: Stage
) -> Callable[[RunStats], None]:
    """`run_fuzz`'s progress callback for one stage."""
    return lambda stats: on_run(stage, stats)
