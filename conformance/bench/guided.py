"""Benchmark of guided fuzzing: abstract-state coverage against time, guided and unguided.

For each seed, two campaigns of the correct protocol with the default set-up search for the same
number of seconds (or until the default 3,000 runs, which also bounds the runs Hypothesis's
target phase may spend: half of them): one unguided, one `--guided` (each run hands its rarity
to Hypothesis's `target()`, see `fuzz.guidance`). Each campaign's coverage curve (distinct
abstract states after each run) is drawn, both modes side by side, into one picture, and the
final counts are printed as a table. `coverage_curves`, `draw` and `rows` are the engine of

    kreplica bench guided [--seconds 60] [--seeds 3] [--picture docs/img/guided-coverage.png]
        [--markdown]
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt

from kreplica.conformance.fuzz.campaign import run_fuzz
from kreplica.conformance.fuzz.setup import DEFAULT_EXAMPLES, DEFAULT_STEPS, FuzzSetup

MODES = (("unguided", False), ("guided", True))


@dataclass(frozen=True)
class Curve:
    """One campaign's coverage: (seconds, distinct abstract states) after each run."""

    mode: str
    seed: int
    points: tuple[tuple[float, int], ...]
    runs: int
    found: str | None = None
    """What stopped the campaign early: a requirement the correct protocol broke, or None
    (Kafka 2.6.0's truncation livelock KAFKA-10706 stopped campaigns before the model took
    2.6.3's fix; it is now the seeded bug `kafka-10706`: docs/fuzzing.md)."""

    @property
    def final(self) -> int:
        """Distinct abstract states at the end of the campaign."""
        return self.points[-1][1] if self.points else 0


def campaign(guided: bool, seed_value: int, seconds: float) -> Curve:
    """A campaign of the correct protocol, guided or not, searching for `seconds`."""
    setup = FuzzSetup(guided=guided)
    result = run_fuzz(
        setup, DEFAULT_EXAMPLES, DEFAULT_STEPS, seed_value, shrink=False, time_limit=seconds
    )
    mode = "guided" if guided else "unguided"
    curve = tuple(result.stats.coverage.curve)
    found = None if result.failure is None else result.failure.invariant
    return Curve(mode, seed_value, curve, result.stats.runs, found)


def coverage_curves(seconds: float, seeds: int) -> Iterator[Curve]:
    """For each seed 0..seeds-1, an unguided then a guided campaign of `seconds`; each curve
    as its campaign ends."""
    for seed_value in range(seeds):
        for _, guided in MODES:
            yield campaign(guided, seed_value, seconds)


def draw(curves: Sequence[Curve], seconds: float, path: Path) -> None:
    """Coverage against time, one line per campaign, a colour per mode."""
    colours = {"unguided": "tab:blue", "guided": "tab:orange"}
    fig, ax = plt.subplots(figsize=(7, 4))
    for mode, _ in MODES:
        for i, c in enumerate(x for x in curves if x.mode == mode):
            ax.plot(
                [t for t, _ in c.points],
                [n for _, n in c.points],
                color=colours[mode],
                alpha=0.8,
                label=mode if i == 0 else None,
            )
            if c.found and c.points:
                ax.plot(*c.points[-1], marker="x", color=colours[mode], markersize=9)
    ax.set_xlim(0, seconds)
    ax.set_xlabel("seconds")
    ax.set_ylabel("distinct abstract states")
    ax.set_title("kreplica fuzz: abstract-state coverage (one line a seed)")
    ax.text(0.01, 0.97, "x: a run broke a liveness requirement", transform=ax.transAxes, va="top")
    ax.legend(loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def rows(curves: Sequence[Curve]) -> list[list[str]]:
    """Per mode: the final coverage of each seed, its median, and the runs' median."""
    out = []
    for mode, _ in MODES:
        mine = [c for c in curves if c.mode == mode]
        finals = [c.final for c in mine]
        out.append(
            [
                mode,
                ", ".join(str(n) for n in finals),
                f"{statistics.median(finals):.0f}",
                f"{statistics.median([c.runs for c in mine]):.0f}",
                ", ".join(f"seed {c.seed}: {c.found}" for c in mine if c.found) or "-",
            ]
        )
    return out


COLUMNS = ("mode", "abstract states per seed", "median", "median runs", "stopped early by")
