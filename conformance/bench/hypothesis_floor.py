"""Hypothesis's own cost per step of the fuzzer: the floor under its throughput.

The fuzzer (`fuzz.machine`) takes one Hypothesis rule step per step of a run and draws its
choices as bare integer choices of the test case (`fuzz.hypothesis_shim`). `floor(draws)` runs
a state machine whose one rule does nothing but draw `draws` integers the same way, under the
fuzzer's settings (`campaign.fuzz_settings`): its CPU time per step is what Hypothesis costs a
step of the fuzzer that draws as many. `draws_per_step` counts what the throughput campaign
(`throughput` in the fuzz module beside this one) draws. `kreplica bench fuzz
--hypothesis-floor` prints both.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hypothesis.stateful import RuleBasedStateMachine, rule, run_state_machine_as_test

from kreplica.conformance.fuzz import machine
from kreplica.conformance.fuzz.campaign import fuzz_settings, run_fuzz
from kreplica.conformance.fuzz.hypothesis_shim import draw_the_one_rule, integer_drawer
from kreplica.conformance.fuzz.setup import FuzzSetup

DRAWS = (1, 2, 3, 6)
"""The integer draws per step `kreplica bench fuzz --hypothesis-floor` measures."""


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
    """Hypothesis's CPU time per step of a one-rule machine that draws `draws` integers in
    [0, 23] a step, as the fuzzer draws them, over `examples` runs of up to `max_steps`."""
    steps = [0]

    class Drawing(RuleBasedStateMachine):
        """One rule, drawn without a choice (as the fuzzer's), that only draws integers."""

        def __init__(self) -> None:
            super().__init__()
            draw_the_one_rule(self)

        @rule()
        def act(self) -> None:
            """Draw `draws` integers."""
            steps[0] += 1
            draw = integer_drawer()
            for _ in range(draws):
                draw(0, 23)

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


def draws_per_step(examples: int = 500, max_steps: int = 100) -> float:
    """The integer choices the throughput campaign draws per rule step (settling steps draw
    none), counted by wrapping the drawer the machine takes at its first step."""
    drawn = [0]
    names = vars(machine)  # the machine looks its drawer up by this name at its first step
    real: Callable[[], Callable[[int, int], int]] = names["integer_drawer"]

    def counting() -> Callable[[int, int], int]:
        draw = real()

        def counted(lo: int, hi: int) -> int:
            drawn[0] += 1
            return draw(lo, hi)

        return counted

    names["integer_drawer"] = counting
    try:
        stats = run_fuzz(FuzzSetup(), examples, max_steps, seed_value=0).stats
    finally:
        names["integer_drawer"] = real
    return drawn[0] / max(1, stats.steps - stats.settle_steps)
