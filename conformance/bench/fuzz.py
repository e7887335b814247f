"""Benchmark of the fuzzer: throughput, and time to detect each seeded bug and unsafe variant.

Throughput: state-machine steps (rule applications) per second of a campaign on the correct
protocol with every fault on, every step recorded as an ITF trace and checked; per CPU
second of this process (one core) and per wall second.

Detection: for each target (`fuzz_targets.TARGETS`, each with its own set-up), campaigns with
seeds 0..k-1, each searching for at most `--time-limit` seconds: the seconds until the first
failing run, the runs it took, and the failing run once minimised (`schedule.minimize`; no
Hypothesis shrinking): its spec actions and impl steps. Medians are over the seeds; a seed
that found nothing counts as slower than the limit. With `--defaults`, each target's campaign
is `kreplica fuzz --bug X` (or `--variant X`) with every other option at its default: the
default set-up, DEFAULT_STEPS steps per run, at most DEFAULT_EXAMPLES runs.

Profile (`--profile`): the throughput campaign under cProfile, its time by where it goes
(`ROOMS`): each function's own time, a built-in's (or a frozen standard module's) counted with
the function that called it. cProfile's own cost per call inflates what makes many small calls,
so the shares are a guide; the throughput measured without it is the figure.

Hypothesis's floor (`--hypothesis-floor`): the fuzzer takes `machine.BURST` steps of a run
per Hypothesis rule step and reads their choices from bytes choices of the test case
(`fuzz.hypothesis_shim.ByteChoices`). `floor(draws)` runs a state machine whose one rule does
nothing but draw `draws` bytes choices of `machine.CHUNK_BYTES` the same way, under the
fuzzer's settings (`campaign.fuzz_settings`): its CPU time per step is what Hypothesis costs a
Hypothesis step of the fuzzer that draws as many. `hypothesis_per_step` counts the Hypothesis
steps and the bytes choices of the throughput campaign per step of its runs.

`throughput`, `detect`, `profile` and `floor` are the engines of `kreplica bench fuzz
[--seeds 5] [--only WORD] [--defaults] [--markdown] [--profile] [--hypothesis-floor]`, which
renders what they return.
"""

from __future__ import annotations

import cProfile
import math
import pstats
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis.stateful import RuleBasedStateMachine, rule, run_state_machine_as_test

from kreplica.conformance.errors import BenchmarkFailed
from kreplica.conformance.fuzz import machine
from kreplica.conformance.fuzz.campaign import FuzzResult, fuzz_settings, run_fuzz
from kreplica.conformance.fuzz.hypothesis_shim import bytes_drawer, draw_the_one_rule
from kreplica.conformance.fuzz.setup import DEFAULT_EXAMPLES, DEFAULT_STEPS, FuzzSetup
from kreplica.conformance.fuzz.targets import TARGETS, Target

MAX_SPEC_ACTIONS = 15
"""The issue's bound on a shrunk failing run."""


@dataclass(frozen=True)
class Throughput:
    """A campaign on the correct protocol: its steps and the CPU and wall seconds it took."""

    runs: int
    steps: int
    impl_steps: int
    cpu_seconds: float
    wall_seconds: float

    @property
    def rate(self) -> float:
        """State-machine steps per CPU second."""
        return self.steps / self.cpu_seconds

    @property
    def wall_rate(self) -> float:
        """State-machine steps per wall second."""
        return self.steps / self.wall_seconds


def throughput(examples: int, max_steps: int = 100) -> Throughput:
    """Fuzz the correct protocol with every fault on; time it. BenchmarkFailed if it fails."""
    cpu, wall = time.process_time(), time.perf_counter()
    result = run_fuzz(FuzzSetup(), examples, max_steps, seed_value=0)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    if result.failure is not None:
        raise BenchmarkFailed(f"the correct protocol failed: {result.failure.reason}")
    s = result.stats
    return Throughput(s.runs, s.steps, s.impl_steps, cpu, wall)


CLOCK = "the clock judges (backoff, lag_times, checkpoint_times, idle_fetchers)"
RECORDING = "recording and ITF (recorder, step_codec, tla/)"
RULES = "the rules and their choices (fuzz/machine.py, choices.py)"
ROOMS = (
    ("hypothesis/", "Hypothesis (drawing rules and arguments, the engine)"),
    ("conformance/bridge/projection.py", "the projection (bridge/projection.py)"),
    ("conformance/judges/invariants.py", "the invariants (judges/invariants.py)"),
    ("conformance/fuzz/guidance.py", "abstract states (fuzz/guidance.py)"),
    ("conformance/judges/backoff.py", CLOCK),
    ("conformance/judges/lag_times.py", CLOCK),
    ("conformance/judges/checkpoint_times.py", CLOCK),
    ("conformance/judges/idle_fetchers.py", CLOCK),
    ("conformance/judges/client_answers.py", "the client's answers (judges/client_answers.py)"),
    ("conformance/judges/checked_steps.py", "the other step checks (judges/checked_steps.py)"),
    ("conformance/bridge/recorder.py", RECORDING),
    ("conformance/bridge/step_codec.py", RECORDING),
    ("conformance/tla/", RECORDING),
    ("conformance/fuzz/settle.py", "settling (fuzz/settle.py)"),
    ("conformance/fuzz/machine.py", RULES),
    ("conformance/fuzz/choices.py", RULES),
    ("/impl/", "the simulator (impl/)"),
)  # fmt: skip
"""Where a step's time goes: (a part of a file's path, the room it belongs to)."""


def _room(path: str) -> str:
    """The room of `path` in ROOMS ('other' if none: the standard library, set-up)."""
    return next((room for part, room in ROOMS if part in path), "other")


def profile(examples: int, max_steps: int = 100) -> tuple[Counter[str], float]:
    """The throughput campaign under cProfile: seconds per room (`ROOMS`) and in all."""
    profiler = cProfile.Profile()
    profiler.runcall(run_fuzz, FuzzSetup(), examples, max_steps, seed_value=0)
    stats: dict[Any, Any] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    rooms: Counter[str] = Counter()
    for (path, _, _), (_, _, own, _, callers) in stats.items():
        if not _lent(path):
            rooms[_room(path)] += own
            continue
        for (caller, _, _), (_, _, from_caller, _) in callers.items():
            rooms[_room(caller)] += from_caller
    return rooms, sum(rooms.values())


def _lent(path: str) -> bool:
    """A built-in, or a frozen module of the standard library (`collections.abc`'s Mapping
    methods, which compare TLA+ records): its time counts for the function that called it."""
    return path == "~" or path.startswith("<frozen")


@dataclass(frozen=True)
class Detection:
    """One target's campaigns, one per seed."""

    target: Target
    results: tuple[FuzzResult, ...]
    time_limit: float
    defaults: bool = False
    """The campaigns ran with the default options, not the target's own set-up."""

    def hit(self, result: FuzzResult) -> bool:
        """The campaign failed, and with one of the target's own failures (`Target.breaks`)."""
        return result.failure is not None and result.failure.invariant in self.target.breaks

    @property
    def found(self) -> list[FuzzResult]:
        """The campaigns that found the target."""
        return [r for r in self.results if self.hit(r)]

    @property
    def other(self) -> list[FuzzResult]:
        """The campaigns that stopped at a failure that is not the target's."""
        return [r for r in self.results if r.failure is not None and not self.hit(r)]

    def seconds(self) -> list[float]:
        """Seconds to the first failing run per seed (inf: not found in the time limit)."""
        return [(r.stats.detected or 0.0) if self.hit(r) else math.inf for r in self.results]

    def median_seconds(self) -> float:
        """The median time to detection (inf when most seeds found nothing)."""
        return statistics.median(self.seconds())

    def median_cpu_seconds(self) -> float:
        """The median CPU time to detection (inf when most seeds found nothing)."""
        cpu = [(r.stats.detected_cpu or 0.0) if self.hit(r) else math.inf for r in self.results]
        return statistics.median(cpu)

    def spec_actions(self) -> list[int]:
        """Spec actions of each minimised failing run."""
        return [r.failure.spec_actions for r in self.found if r.failure]

    def cells(self) -> list[str]:
        """The table row."""
        found = self.found
        runs = [float(r.stats.runs_to_failure) for r in found]
        actions = self.spec_actions()
        impl = [float(len(r.failure.steps)) for r in found if r.failure]
        invariants = sorted({r.failure.invariant for r in found if r.failure})
        others = sorted({r.failure.invariant for r in self.other if r.failure})
        median, cpu = self.median_seconds(), self.median_cpu_seconds()
        return [
            self.target.word,
            "(defaults)" if self.defaults else " ".join(self.target.options()[1:]) or "(defaults)",
            f"{len(found)}/{len(self.results)}",
            f"{median:.1f}" if math.isfinite(median) else f"> {self.time_limit:g}",
            f"{cpu:.1f}" if math.isfinite(cpu) else "-",
            _median(runs, "{:.0f}"),
            f"{_median([float(a) for a in actions], '{:.0f}')} (max {max(actions)})"
            if actions
            else "-",
            _median(impl, "{:.0f}"),
            ", ".join(invariants) or "-",
            f"{len(self.other)}: {', '.join(others)}" if others else "-",
        ]


COLUMNS = (
    "target",
    "set-up (kreplica fuzz options)",
    "found",
    "median s to detection",
    "median CPU s",
    "median runs",
    "spec actions (median)",
    "impl steps (median)",
    "invariant broken",
    "stopped by another failure",
)


def _median(values: Sequence[float], form: str) -> str:
    """The median, formatted, or '-' when there are no values."""
    return form.format(statistics.median(values)) if values else "-"


def detect(
    target: Target,
    seeds: int,
    time_limit: float,
    on_result: Callable[[int, FuzzResult], None] = lambda seed, result: None,
    defaults: bool = False,
) -> Detection:
    """Run one campaign per seed for the target (its own set-up, or with `defaults` the default
    options); `on_result(seed, result)` is told of each as it ends."""
    setup = target.default_setup if defaults else target.setup
    examples = DEFAULT_EXAMPLES if defaults else 10**9
    results = []
    for seed_value in range(seeds):
        result = run_fuzz(
            setup, examples, DEFAULT_STEPS, seed_value, shrink=False, time_limit=time_limit
        )
        results.append(result)
        on_result(seed_value, result)
    return Detection(target, tuple(results), time_limit, defaults)


def unknown_targets(words: Sequence[str]) -> list[str]:
    """The words that name no target of `TARGETS`, sorted."""
    return sorted(set(words) - {t.word for t in TARGETS})


# ---------------------------------------------------------------- Hypothesis's floor

DRAWS = (1, 2, 3, 6)
"""The bytes choices per Hypothesis step `kreplica bench fuzz --hypothesis-floor` measures."""


@dataclass(frozen=True)
class Floor:
    """A campaign of a machine that only draws: its draws per step, steps and CPU seconds."""

    draws: int
    steps: int
    cpu_seconds: float

    @property
    def micros(self) -> float:
        """CPU microseconds per step."""
        return 1e6 * self.cpu_seconds / self.steps


def floor(draws: int, examples: int = 500, max_steps: int = 100) -> Floor:
    """Hypothesis's CPU time per step of a one-rule machine that draws `draws` bytes choices
    of `machine.CHUNK_BYTES` a step, as the fuzzer draws them, over `examples` runs of up to
    `max_steps` steps."""
    steps = [0]

    class Drawing(RuleBasedStateMachine):
        """One rule, drawn without a choice (as the fuzzer's), that only draws bytes."""

        def __init__(self) -> None:
            super().__init__()
            draw_the_one_rule(self)

        @rule()
        def act(self) -> None:
            """Draw `draws` bytes choices."""
            steps[0] += 1
            draw = bytes_drawer()
            for _ in range(draws):
                draw(machine.CHUNK_BYTES)

    cpu = time.process_time()
    run_state_machine_as_test(Drawing, settings=fuzz_settings(examples, max_steps, shrink=False))
    return Floor(draws, steps[0], time.process_time() - cpu)


def loop_and_draw(floors: Sequence[Floor]) -> tuple[float, float]:
    """The least-squares line through the floors: µs per step with no draw (the stateful
    loop), and µs per draw."""
    slope, intercept = statistics.linear_regression(
        [f.draws for f in floors], [f.micros for f in floors]
    )
    return intercept, slope


def hypothesis_per_step(examples: int = 500, max_steps: int = 100) -> tuple[float, float]:
    """The Hypothesis steps (`act`, one `ByteChoices` each) and the bytes choices the
    throughput campaign takes per step of its runs (settling steps, which draw nothing, left
    out), counted by wrapping what the machine looks up by name."""
    acts, drawn = [0], [0]
    names = vars(machine)
    real_drawer: Callable[[], Callable[[int], bytes]] = names["bytes_drawer"]
    real_choices = names["ByteChoices"]

    def counting_drawer() -> Callable[[int], bytes]:
        draw = real_drawer()

        def counted(size: int) -> bytes:
            drawn[0] += 1
            return draw(size)

        return counted

    def counting_choices(draw: Callable[[int], bytes], chunk: int) -> Any:
        acts[0] += 1
        return real_choices(draw, chunk)

    names["bytes_drawer"], names["ByteChoices"] = counting_drawer, counting_choices
    try:
        stats = run_fuzz(FuzzSetup(), examples, max_steps, seed_value=0).stats
    finally:
        names["bytes_drawer"], names["ByteChoices"] = real_drawer, real_choices
    steps = max(1, stats.steps - stats.settle_steps)
    return acts[0] / steps, drawn[0] / steps
