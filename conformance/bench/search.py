"""Benchmark of the search: abstract-state coverage against time, for the default campaign of
stages, the correct protocol's campaign alone (the default before issue #44), each of them
guided (`--guided`, `fuzz.guided`), and the correct protocol steered by Hypothesis's
`target()` (`FuzzSetup.guided`, what `--guided` did before issue #44).

For each seed, one campaign of each mode (`MODES`) with the default options, one after the
other, so that every mode of a seed runs under about the same load, each searching the same
number of seconds (the campaign's `--time-limit`, which the stages share equally) or until
its runs (`--examples`, the default 3,000; since the fuzzer takes eight steps per Hypothesis
step a default campaign takes its 3,000 runs in under 30 s, so a comparison against time
asks for more). A campaign's coverage is the distinct abstract states of the replicas'
views (`fuzz.guidance`) its runs reached, over all its stages (`guidance.joint_curve`), against
the seconds since it started. The curves are drawn into one picture, a colour per mode and a
line per seed, and the final counts are a table. `curves`, `draw` and `rows` are the engine of

    kreplica bench search [--seconds 60] [--seeds 3] [--examples 3000] [--modes LIST]
        [--picture docs/img/search-coverage.png] [--markdown]
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt

from kreplica.conformance.fuzz.guidance import joint_curve
from kreplica.conformance.fuzz.guided import run_guided
from kreplica.conformance.fuzz.setup import DEFAULT_EXAMPLES, DEFAULT_STEPS, FuzzSetup
from kreplica.conformance.fuzz.stages import CORRECT, STAGE_NAMES, plan, run_stages


@dataclass(frozen=True)
class Mode:
    """A way to search: the stages of the campaign, guided or not, and its command."""

    name: str
    stages: tuple[str, ...]
    guided: bool
    """Rounds handed out by `guided.run_guided` (`--guided`)."""
    command: str
    colour: str
    target: bool = False
    """Hypothesis's `target()` with each run's rarity (`FuzzSetup.guided`)."""


MODES = (
    Mode("default", STAGE_NAMES, False, "kreplica fuzz", "tab:green"),
    Mode("default guided", STAGE_NAMES, True, "kreplica fuzz --guided", "tab:olive"),
    Mode("correct", (CORRECT,), False, "kreplica fuzz --stages correct", "tab:blue"),
    Mode("correct guided", (CORRECT,), True, "kreplica fuzz --stages correct --guided", "tab:cyan"),
    Mode(
        "correct target",
        (CORRECT,),
        False,
        "--stages correct, Hypothesis's target() (--guided before #44)",
        "tab:orange",
        target=True,
    ),
)


@dataclass(frozen=True)
class Curve:
    """One campaign's coverage: (seconds, distinct abstract states) where it grew."""

    mode: str
    seed: int
    points: tuple[tuple[float, int], ...]
    runs: int
    load: tuple[float, float]
    """The 1-minute load average before and after the campaign."""
    found: str | None = None
    """What stopped the campaign early: a failure in one of its stages, or None."""

    @property
    def final(self) -> int:
        """Distinct abstract states at the end of the campaign."""
        return self.points[-1][1] if self.points else 0

    def at(self, seconds: float) -> int:
        """Distinct abstract states after `seconds`."""
        return max((n for t, n in self.points if t <= seconds), default=0)


def modes_named(names: Sequence[str]) -> tuple[Mode, ...]:
    """The modes of these names, in MODES's order; KeyError for an unknown one."""
    known = {m.name for m in MODES}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise KeyError(unknown[0])
    return tuple(m for m in MODES if m.name in names)


def campaign(
    mode: Mode, seed_value: int, seconds: float, examples: int = DEFAULT_EXAMPLES
) -> Curve:
    """A campaign of `mode` with the default options but `examples` runs at most, searching
    for `seconds`."""
    before = os.getloadavg()[0]
    stages = plan(FuzzSetup(guided=mode.target), mode.stages, examples, seconds)
    if mode.guided:
        result = run_guided(stages, DEFAULT_STEPS, seed_value, shrink=False, time_limit=seconds)
    else:
        result = run_stages(stages, DEFAULT_STEPS, seed_value, shrink=False)
    parts = zip(result.offsets, (r.stats.coverage for r in result.results), strict=True)
    failed = result.failure
    found = None if failed is None or failed.failure is None else failed.failure.invariant
    load = (before, os.getloadavg()[0])
    return Curve(mode.name, seed_value, tuple(joint_curve(parts)), result.stats.runs, load, found)


def curves(
    seconds: float, seeds: int, modes: Sequence[Mode] = MODES, examples: int = DEFAULT_EXAMPLES
) -> Iterator[Curve]:
    """For each seed 0..seeds-1, a campaign of each mode in turn (`examples` runs at most);
    each curve as it ends."""
    for seed_value in range(seeds):
        for mode in modes:
            yield campaign(mode, seed_value, seconds, examples)


def draw(found: Sequence[Curve], seconds: float, path: Path) -> None:
    """Coverage against time, one line per campaign, a colour per mode."""
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for mode in MODES:
        for i, c in enumerate(x for x in found if x.mode == mode.name):
            ax.step(
                [0.0, *(t for t, _ in c.points), seconds],
                [0, *(n for _, n in c.points), c.final],
                where="post",
                color=mode.colour,
                alpha=0.8,
                label=mode.command if i == 0 else None,
            )
            if c.found and c.points:
                ax.plot(*c.points[-1], marker="x", color=mode.colour, markersize=9)
    ax.set_xlim(0, seconds)
    ax.set_xlabel("seconds")
    ax.set_ylabel("distinct abstract states")
    ax.set_title("kreplica fuzz: abstract-state coverage (one line a seed)")
    ax.text(0.01, 0.97, "x: a stage's run failed", transform=ax.transAxes, va="top")
    ax.legend(loc="lower right", fontsize="small")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def rows(found: Sequence[Curve], seconds: float) -> list[list[str]]:
    """Per mode: its command, the final coverage of each seed, its median, the median at half
    the time, the runs' median, the load, and what stopped a campaign early."""
    out = []
    for mode in MODES:
        mine = [c for c in found if c.mode == mode.name]
        if not mine:
            continue
        finals = [c.final for c in mine]
        loads = [x for c in mine for x in c.load]
        out.append(
            [
                f"`{mode.command}`",
                ", ".join(str(n) for n in finals),
                f"{statistics.median(finals):.0f}",
                f"{statistics.median([c.at(seconds / 2) for c in mine]):.0f}",
                f"{statistics.median([c.runs for c in mine]):.0f}",
                f"{min(loads):.1f} to {max(loads):.1f}",
                ", ".join(f"seed {c.seed}: {c.found}" for c in mine if c.found) or "-",
            ]
        )
    return out


COLUMNS = (
    "mode",
    "abstract states per seed",
    "median",
    "median at half time",
    "median runs",
    "load avg",
    "stopped early by",
)
