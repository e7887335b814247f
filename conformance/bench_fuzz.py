"""Benchmark of the fuzzer: throughput, and time to detect each seeded bug and unsafe variant.

Throughput: state-machine steps (rule applications) per second of a campaign on the correct
protocol with every fault on, every step recorded as a trace and checked; per CPU second of
this process (one core) and per wall second. Detection: for each seeded bug and unsafe
variant, campaigns with seeds 0..k-1; the seconds until the first failing run, the runs it
took, and the shrunk run (impl steps, spec actions). The medians are over the seeds.

    .venv/bin/python -m kreplica.conformance.bench_fuzz [--examples N] [--seeds K] [--only L]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from kreplica.conformance.fuzz import FuzzResult, FuzzSetup, run_fuzz
from kreplica.impl.variants import BUGS, parse_variant

UNSAFE_VARIANTS = (
    "truncation=hw",
    "truncation=kip101",
    "election=unclean",
    "acks=1",
    "fencing=off",
)
"""The variant values that lose data or break an invariant (the spec's counterexamples)."""


def targets() -> dict[str, FuzzSetup]:
    """Every seeded bug and unsafe variant, by its label, with the fuzzer's default set-up."""
    setups = [FuzzSetup(variant=parse_variant([], [bug])) for bug in BUGS]
    setups += [FuzzSetup(variant=parse_variant([word])) for word in UNSAFE_VARIANTS]
    return {s.variant.label(): s for s in setups}


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
    """Fuzz the correct protocol with every fault on; time it."""
    cpu, wall = time.process_time(), time.perf_counter()
    result = run_fuzz(FuzzSetup(), examples, max_steps, seed_value=0)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    if result.failure is not None:
        raise SystemExit(f"the correct protocol failed: {result.failure.reason}")
    s = result.stats
    return Throughput(s.runs, s.steps, s.impl_steps, cpu, wall)


def _median(values: Sequence[float]) -> str:
    """The median, or '-' when there are no values."""
    return f"{statistics.median(values):.1f}" if values else "-"


def detection_row(label: str, setup: FuzzSetup, seeds: int, examples: int) -> str:
    """One markdown row: how often, how fast and how small the fuzzer finds `label`."""
    results: list[FuzzResult] = []
    for seed_value in range(seeds):
        results.append(run_fuzz(setup, examples, 100, seed_value))
        print(f"  {label} seed {seed_value}: {_one(results[-1])}", file=sys.stderr, flush=True)
    found = [r for r in results if r.failure is not None]
    detect = [r.stats.detected or 0.0 for r in found]
    runs = [float(r.stats.runs_to_failure) for r in found]
    shrink = [r.seconds - (r.stats.detected or 0.0) for r in found]
    actions = [float(r.failure.spec_actions) for r in found if r.failure]
    impl = [float(len(r.failure.steps)) for r in found if r.failure]
    invariants = sorted({r.failure.invariant for r in found if r.failure})
    cells = [label, f"{len(found)}/{seeds}", _median(detect), _median(runs), _median(shrink)]
    cells += [_median(actions), _median(impl), ", ".join(invariants) or "-"]
    return "| " + " | ".join(cells) + " |"


def _one(result: FuzzResult) -> str:
    """A one-line account of one campaign."""
    f = result.failure
    if f is None:
        return f"not found in {result.stats.runs} runs ({result.seconds:.0f} s)"
    return (
        f"{f.invariant} after {result.stats.detected or 0:.1f} s (run "
        f"{result.stats.runs_to_failure}), {f.spec_actions} actions / {len(f.steps)} steps, "
        f"{result.seconds:.1f} s in all"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Print the throughput and the detection table (markdown) on stdout."""
    parser = argparse.ArgumentParser(prog="python -m kreplica.conformance.bench_fuzz")
    parser.add_argument("--throughput-examples", type=int, default=500)
    parser.add_argument("--examples", type=int, default=5_000, help="most runs per campaign")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--only", action="append", help="a target label (repeatable)")
    args = parser.parse_args(argv)
    if args.throughput_examples > 0:
        t = throughput(args.throughput_examples)
        print(
            f"throughput: {t.rate:,.0f} steps/s per CPU second ({t.wall_rate:,.0f} per wall "
            f"second): {t.steps:,} steps ({t.impl_steps:,} impl steps) in {t.runs:,} runs, "
            f"{t.cpu_seconds:.1f} s CPU"
        )
    print(
        "\n| target | found | detection s (median) | runs to detection | shrink s "
        "| spec actions | impl steps | invariant |\n|---|---|---|---|---|---|---|---|",
        flush=True,
    )
    for label, setup in targets().items():
        if not args.only or label in args.only:
            print(detection_row(label, setup, args.seeds, args.examples), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
