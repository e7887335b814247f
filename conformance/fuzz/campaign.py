"""Fuzz campaigns: run a set-up with Hypothesis's search and shrinking, minimise a failing run,
save it, and summarise the campaign."""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from hypothesis import HealthCheck, Phase, Verbosity, seed, settings
from hypothesis.stateful import (
    run_state_machine_as_test,
)

from kreplica.conformance.bridge.local_partitions import LOCAL_RECORDS
from kreplica.conformance.fuzz.choices import (
    fuzzer_may_take,
)
from kreplica.conformance.fuzz.corpus_writer import CorpusWriter
from kreplica.conformance.fuzz.machine import BURST, ReplicationMachine
from kreplica.conformance.fuzz.reproducible import local_constants_off
from kreplica.conformance.fuzz.runs import (
    Campaign,
    Failure,
    FuzzFailure,
    RunStats,
    StoppedRunFailure,
)
from kreplica.conformance.fuzz.settle import settle
from kreplica.conformance.fuzz.setup import (
    BATCH_MAX_RECORDS,
    FETCH_MAX_RECORDS,
    FuzzSetup,
)
from kreplica.conformance.judges.liveness import LIVENESS
from kreplica.conformance.replay.schedule import (
    Schedule,
    minimize,
    replay_schedule,
    steps_json,
    variant_to_json,
    write_schedule,
)
from kreplica.conformance.tla.itf import ItfTrace, write_trace
from kreplica.conformance.tla.vocabulary import ACTION_ARGS


@dataclass(frozen=True)
class FuzzResult:
    """The outcome of one campaign."""

    setup: FuzzSetup
    seed: int
    examples: int
    max_steps: int
    stats: RunStats
    seconds: float
    failure: Failure | None = None


def machine_for(
    setup: FuzzSetup,
    stats: RunStats,
    seed_value: int,
    max_steps: int,
    corpus: CorpusWriter | None = None,
) -> Callable[[], ReplicationMachine]:
    """A factory of state machines for one set-up, counting into `stats`, seeded with
    `seed_value`, writing every generated run to `corpus` (if given): what
    `run_state_machine_as_test` takes."""
    shared = Campaign(
        setup=setup,
        stats=stats,
        corpus=corpus,
        run_prefix=f"{setup.name(seed_value)}-n{max_steps}",
        max_gap=max_steps // (setup.max_faults + 1),
        max_steps=max_steps,
    )
    stats.seed = seed_value
    return seed(seed_value)(lambda: ReplicationMachine(shared))


YOUNG_OBJECTS = 10_000
"""Allocations (net of frees) between two runs of Python's cyclic garbage collector over the
youngest objects while a campaign runs (Python's default is 700), see `fewer_collections`."""


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """Within the block, Python's cyclic collector looks at the youngest objects every
    YOUNG_OBJECTS allocations, and so at the older ones (Hypothesis's search tree, which
    grows with the campaign) a few times rather than every few hundred steps: at Python's
    default it took a ninth of the CPU time of `kreplica bench fuzz`'s campaign, with this
    a seventeenth (docs/fuzzing.md). The collector's timing changes no run; garbage cycles
    (a run's cluster) are still freed. The thresholds are restored after the block."""
    before = gc.get_threshold()
    gc.set_threshold(YOUNG_OBJECTS, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


def fuzz_settings(
    examples: int, max_steps: int, shrink: bool = True, guided: bool = False
) -> settings:
    """Hypothesis settings for a reproducible campaign: no database, generate (and, guided,
    optimise the runs' `target` scores in between), then shrink."""
    phases = [
        Phase.generate,
        *([Phase.target] if guided else []),
        *([Phase.shrink] if shrink else []),
    ]
    return settings(
        max_examples=examples,
        stateful_step_count=-(-max_steps // BURST),
        database=None,
        deadline=None,
        phases=phases,
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet,
        print_blob=False,
    )


def run_fuzz(
    setup: FuzzSetup,
    examples: int,
    max_steps: int,
    seed_value: int = 0,
    on_run: Callable[[RunStats], None] | None = None,
    shrink: bool = True,
    corpus: CorpusWriter | None = None,
    time_limit: float | None = None,
) -> FuzzResult:
    """Run up to `examples` runs of up to `max_steps` steps, or until `time_limit` seconds
    have passed without a failure. The first failing run is shrunk by Hypothesis (if
    `shrink`; not a run Hypothesis had stopped before its settle phase failed,
    `StoppedRunFailure`), then minimised step by step (always). With a corpus, every
    generated run's trace is appended to it (CorpusError if it cannot be written)."""
    stats = RunStats(on_run=on_run, time_limit=time_limit)
    failure = None
    if examples > 0:
        machines = machine_for(setup, stats, seed_value, max_steps, corpus)
        try:
            with local_constants_off(), fewer_collections():
                # Hypothesis 6.170 types the factory as a class; its docstring takes any
                # callable that returns a machine, as this one is.
                run_state_machine_as_test(
                    machines,  # type: ignore[arg-type]
                    settings=fuzz_settings(examples, max_steps, shrink, setup.guided),
                )
        except FuzzFailure as err:
            failure = _failure(setup, err)
        except StoppedRunFailure as stopped:  # found where Hypothesis could not take it
            failure = _failure(setup, stopped.failure)
        except Exception:
            if not stats.timed_out:
                raise
    if stats.corpus_error is not None:
        raise stats.corpus_error
    seconds = time.perf_counter() - stats.started
    return FuzzResult(setup, seed_value, examples, max_steps, stats, seconds, failure)


def _failure(setup: FuzzSetup, err: FuzzFailure) -> Failure:
    """The failing run Hypothesis reported, minimised, with its trace. A liveness failure is
    kept up to its settle phase, which every replay of it runs again (`settle.settle`):
    its steps and trace are the run's before the settle phase."""
    checks, rules = setup.invariants, setup.checks_rules
    steps, settling = err.steps, None
    if err.violation[0] in LIVENESS and err.settled_from is not None:
        steps, settling = err.steps[: err.settled_from], settle
    schedule = replace(setup.schedule(steps, err.config), violation=err.violation)
    schedule = minimize(schedule, fuzzer_may_take, invariants=checks, rules=rules, settle=settling)
    result = replay_schedule(schedule, invariants=checks, rules=rules, settle=settling)
    violation = result.violation or err.violation
    steps = schedule.steps[: result.steps_applied]
    return Failure(violation[0], violation[1], steps, result.trace, len(err.steps), err.config)


# ---------------------------------------------------------------- saving


def failure_schedule(result: FuzzResult) -> Schedule:
    """The schedule that replays a campaign's failure (with how it was found)."""
    assert result.failure is not None
    f = result.failure
    meta = {
        "description": f"kreplica fuzz: {result.setup.describe()}",
        "seed": result.seed,
        "examples": result.examples,
        "max_steps": result.max_steps,
        "invariants": result.setup.invariants,
        "rules": result.setup.checks_rules,
    }
    schedule = result.setup.schedule(f.steps, f.config)
    return replace(schedule, violation=(f.invariant, f.reason), meta=meta)


def failure_trace(result: FuzzResult) -> ItfTrace:
    """The failure's trace, with the violation, variant, seed and impl steps in its #meta."""
    assert result.failure is not None
    f = result.failure
    meta = {
        "source": "kreplica fuzz",
        "description": result.setup.describe(),
        "violation": {"invariant": f.invariant, "reason": f.reason},
        "variant": variant_to_json(result.setup.variant),
        "replicas": result.setup.replicas,
        "min_insync_replicas": f.config.min_insync_replicas,
        "fetch_max_records": FETCH_MAX_RECORDS,
        "batch_max_records": BATCH_MAX_RECORDS,
        "local_records": LOCAL_RECORDS,
        "seed": result.seed,
        "impl_steps": steps_json(f.steps),
    }
    return replace(f.trace, meta=meta)


def save_failure(result: FuzzResult, out: Path) -> tuple[Path, Path]:
    """Write `<out>/<name>.itf.json` and `<out>/<name>.schedule.json`, each atomically."""
    stem = result.setup.name(result.seed)
    trace_path, schedule_path = out / f"{stem}.itf.json", out / f"{stem}.schedule.json"
    write_schedule(schedule_path, failure_schedule(result))
    write_trace(trace_path, failure_trace(result))
    return trace_path, schedule_path


def never_taken(stats: RunStats) -> list[str]:
    """The spec actions (ACTION_ARGS, in its order) that no generated run of the campaign took."""
    return [name for name in ACTION_ARGS if stats.actions[name] == 0]


def action_mix_lines(stats: RunStats) -> list[str]:
    """The campaign's action mix: each spec action taken with its count (most taken first),
    then the ones never taken."""
    taken = sorted(
        ((n, name) for name, n in stats.actions.items() if n), key=lambda item: (-item[0], item[1])
    )
    mix = ", ".join(f"{name} {n:,}" for n, name in taken) or "none"
    missing = never_taken(stats)
    return [f"actions: {mix}", f"never taken: {', '.join(missing) or 'none'}", churn_line(stats)]


def churn_line(stats: RunStats) -> str:
    """How often the campaign's generated runs changed leaders, and truncated across epochs."""
    counts = stats.leader_changes
    runs = sum(counts.values())
    once = sum(n for changes, n in counts.items() if changes >= 1)
    twice = sum(n for changes, n in counts.items() if changes >= 2)
    return (
        f"leader changes: {once:,} of {runs:,} runs moved the leader, {twice:,} twice or more; "
        f"{stats.multi_epoch_truncations:,} OffsetsForLeaderEpoch requests from a follower "
        f"caching two epochs or more"
    )


def summary_lines(result: FuzzResult, paths: Sequence[Path] = ()) -> list[str]:
    """The human summary of a campaign: its set-up and size, the action mix of its generated
    runs, and its outcome."""
    s = result.stats
    rate = s.steps / result.seconds if result.seconds > 0 else 0.0
    lines = [
        f"kreplica fuzz: {result.setup.describe()}, seed {result.seed}",
        f"runs {s.runs:,}, steps {s.steps:,} ({s.impl_steps:,} impl steps, {s.settle_steps:,} "
        f"of them settling), time {result.seconds:.1f} s ({rate:,.0f} steps/s)",
        *action_mix_lines(s),
    ]
    f = result.failure
    if f is None:
        limit = f" (time limit of {s.time_limit:g} s)" if s.timed_out and s.time_limit else ""
        settled = ", every run settled" if result.setup.invariants else ""
        return [*lines, f"no invariant failed{settled}{limit}"]
    lines += [
        f"violation {f.invariant}: {f.reason}",
        f"  found in run {s.runs_to_failure:,} after {s.detected or 0:.1f} s; shrunk to "
        f"{len(f.steps)} impl steps, {f.spec_actions} spec actions",
    ]
    return lines + [f"  {kind}: {p}" for kind, p in zip(("trace", "schedule"), paths, strict=False)]
