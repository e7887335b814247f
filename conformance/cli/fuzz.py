"""`kreplica fuzz`: the fuzzer's command line (a progress bar on stderr, a summary on stdout).

Without `--variant` or `--bug` the campaign is one of stages (`fuzz.stages`): the correct
protocol and every protocol variant, sharing `--examples`, each judged by the checks that
hold for it; `--stages` picks some of them (`--stages correct`: the correct protocol alone).
With `--variant` or `--bug` it is that one campaign. It runs in this process
(`fuzz.stages.run_stages`, each stage a `fuzz.campaign.run_fuzz`); with `--master`, a swarm of
seeded campaigns runs on Spark, a task per seed and stage (`fuzz.swarm.run_swarm`). Either way
the first failure is saved the same way (`campaign.save_failure`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from kreplica.conformance.cli.console import console as make_console
from kreplica.conformance.cli.outputs import check_output_dir
from kreplica.conformance.cli.spark_options import read_spark_conf
from kreplica.conformance.errors import EXIT_OK, EXIT_UNEXPECTED, KreplicaError
from kreplica.conformance.fuzz.campaign import (
    FuzzResult,
    action_mix_lines,
    never_taken,
    save_failure,
)
from kreplica.conformance.fuzz.campaign import summary_lines as fuzz_summary
from kreplica.conformance.fuzz.corpus_writer import CorpusWriter
from kreplica.conformance.fuzz.guided import ROUND_RUNS, run_guided
from kreplica.conformance.fuzz.runs import RunStats
from kreplica.conformance.fuzz.setup import DEFAULT_EXAMPLES, DEFAULT_STEPS, FAULTS, FuzzSetup
from kreplica.conformance.fuzz.stages import (
    ALL,
    CORRECT,
    STAGE_NAMES,
    Stage,
    StagedResult,
    parse_stages,
    plan,
    rerun_options,
    run_stages,
    single,
)
from kreplica.conformance.fuzz.swarm import (
    DEFAULT_SEEDS,
    Swarm,
    SwarmResult,
    run_swarm,
    seeds_from,
)
from kreplica.impl.variants import VariantError, parse_variant

FUZZ_EXIT_CODES = """\b
Examples:
  kreplica fuzz                                every stage: the correct protocol and
                                               each variant, 3,000 runs in all; exit 0
  kreplica fuzz --stages correct --examples 150 --steps 50
                                               the correct protocol alone: exit 0
  kreplica fuzz --bug early-ack --no-unclean   a seeded bug: found, shrunk, saved; exit 1
  kreplica fuzz --variant acks=1 --no-unclean  an unsafe variant of the protocol
  kreplica fuzz --examples 500 --corpus out/corpus.jsonl
                                               every run's trace, for kreplica conform
                                               --as-recorded
  kreplica fuzz --master local[2] --seeds 4 --bug early-ack --no-unclean
                                               4 seeds' campaigns, a Spark task each

\b
Exit codes:
  0  no check failed in any stage: the invariants (and every run settled)
     where they hold, Kafka's rules in every stage
  1  a check failed (an invariant, or one of Kafka's rules), a step raised an
     exception, or a run did not settle (EventuallyReplicated,
     EventuallyAnswered); the shrunk run is saved, and the stages after the
     one that failed are not run
  2  bad input: unknown variant, bug or stage, --stages with --variant or
     --bug, --guided with --master, a bad number, an unwritable --out or
     --corpus; with --master, Spark failed (a master it cannot reach or
     parse, a lost task)
  4  --require-all-actions, and some spec action was never taken
"""

EXIT_ACTIONS_MISSING = 4
"""The exit code of a clean campaign with --require-all-actions that never took some spec
action (3 is the CLI's time-out code)."""


def build_setup(
    assignments: tuple[str, ...],
    bugs: tuple[str, ...],
    replicas: int,
    faults: tuple[bool, bool, bool],
    max_faults: int,
    invariants: bool = True,
    only: tuple[str, ...] = (),
    guided: bool = False,
    deletes: bool = True,
    rules_only: bool = False,
) -> FuzzSetup:
    """The campaign's set-up from the options; KreplicaError on an unknown name or on a
    --fault that the other options switch off."""
    try:
        variant = parse_variant(assignments, bugs)
    except VariantError as err:
        raise KreplicaError(str(err)) from None
    crash, unclean, network = faults
    kinds = frozenset(kind.replace("-", "_") for kind in only)
    checks_invariants = invariants and not rules_only
    setup = FuzzSetup(
        variant,
        replicas,
        crash,
        unclean,
        network,
        max_faults,
        checks_invariants,
        kinds,
        guided,
        deletes,
        rules_only,
    )
    off = sorted(kinds - set(setup.fault_kinds))
    if off:
        raise KreplicaError(f"--fault {off[0].replace('_', '-')} is switched off by another option")
    try:
        setup.schedule().cluster()
    except NotImplementedError as err:
        raise KreplicaError(str(err)) from None
    return setup


class SwarmProgress:
    """A progress bar on stderr (only on a terminal): the tasks (a seed's stage each) done."""

    def __init__(self, tasks: int, label: str) -> None:
        """Set up the bar for `tasks` tasks."""
        console = Console(stderr=True)
        self.progress: Progress | None = None
        self.task: TaskID | None = None
        if console.is_terminal:
            self.progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("tasks"),
                TimeElapsedColumn(),
                console=console,
                transient=True,
            )
            self.task = self.progress.add_task(label, total=tasks)

    @contextmanager
    def shown(self) -> Iterator[None]:
        """Show the bar while the swarm runs."""
        if self.progress is None:
            yield
            return
        with self.progress:
            yield

    def update(self, done: int, total: int | None) -> None:
        """Called with the tasks done (polled from Spark's status tracker)."""
        if self.progress is not None and self.task is not None:
            self.progress.update(self.task, completed=done, total=total)


class FuzzProgress:
    """A progress bar on stderr (only on a terminal): runs, steps/s, failures, shrinking."""

    def __init__(self, stages: tuple[Stage, ...], label: str) -> None:
        """Set up the bar for the stages' runs."""
        examples = sum(stage.examples for stage in stages)
        self.examples = examples
        self.runs: dict[int, int] = {}
        """Runs so far of each campaign (a stage, or a guided round), by its counters' id."""
        console = Console(stderr=True)
        self.progress: Progress | None = None
        self.task: TaskID | None = None
        if console.is_terminal and examples > 0:
            self.progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]:>7,.0f} steps/s"),
                TextColumn("{task.fields[status]}"),
                TimeElapsedColumn(),
                console=console,
                transient=True,
            )
            self.task = self.progress.add_task(label, total=examples, rate=0.0, status="")

    @contextmanager
    def shown(self) -> Iterator[None]:
        """Show the bar while the campaign runs."""
        if self.progress is None:
            yield
            return
        with self.progress:
            yield

    def update(self, stage: Stage, stats: RunStats) -> None:
        """Called at the start of each run of a stage."""
        if self.progress is None or self.task is None:
            return
        self.runs[id(stats)] = min(stats.runs, stage.examples)
        rate = stats.steps / max(stats.elapsed, 1e-9)
        if stats.detected is None:
            status = f"[green]0 failures[/] {stage.name}"
            done = sum(self.runs.values())
        else:
            status = f"[red]1 failure[/], shrinking ({stats.runs - stats.runs_to_failure} runs)"
            done = self.examples
        self.progress.update(self.task, completed=done, rate=rate, status=status)


@click.command(epilog=FUZZ_EXIT_CODES)
@click.option(
    "--examples",
    type=click.IntRange(min=0),
    default=DEFAULT_EXAMPLES,
    show_default=True,
    help="Runs to generate (Hypothesis max_examples), shared equally by the stages.",
)
@click.option(
    "--steps",
    type=click.IntRange(min=1),
    default=DEFAULT_STEPS,
    show_default=True,
    help="Most steps per run (stateful_step_count).",
)
@click.option(
    "--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Hypothesis seed."
)
@click.option(
    "--variant",
    "assignments",
    multiple=True,
    metavar="NAME=VALUE",
    help="Protocol variant, e.g. truncation=hw (repeatable).",
)
@click.option("--bug", "bugs", multiple=True, metavar="NAME", help="Seeded bug (repeatable).")
@click.option(
    "--replicas", type=click.IntRange(2, 5), default=3, show_default=True, help="Replicas 1..N."
)
@click.option(
    "--max-faults",
    type=click.IntRange(min=0),
    default=4,
    show_default=True,
    help="Most faults per run (crashes, power losses, elections, lost/duplicated messages).",
)
@click.option(
    "--faults/--no-faults",
    default=True,
    show_default=True,
    help="Crashes, failed log dirs, restarts, failure detection, elections.",
)
@click.option(
    "--unclean/--no-unclean",
    default=True,
    show_default=True,
    help="Unclean shutdowns (power loss), flushes and HW checkpoints.",
)
@click.option(
    "--network-faults/--no-network-faults",
    default=True,
    show_default=True,
    help="Lost and duplicated messages.",
)
@click.option(
    "--delete-records/--no-delete-records",
    "deletes",
    default=True,
    show_default=True,
    help="Clients delete records below the leader's HW (DeleteRecords), in half the runs.",
)
@click.option(
    "--fault",
    "only_faults",
    multiple=True,
    type=click.Choice([kind.replace("_", "-") for kind in FAULTS]),
    help="Allow only this fault (repeatable), like a spec config's bounds; default: every "
    "fault the options above allow.",
)
@click.option(
    "--shrink/--no-shrink",
    default=True,
    show_default=True,
    help="Let Hypothesis shrink the failing run (tens of seconds); it is always minimised "
    "step by step afterwards.",
)
@click.option(
    "--time-limit",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
    help="Stop generating runs after this long without a failure (each stage after its "
    "equal share).",
)
@click.option(
    "--invariants/--no-invariants",
    default=True,
    show_default=True,
    help="Check the spec's invariants after every step (--no-invariants: only record the "
    "runs, e.g. to check a buggy variant's traces with TLC later).",
)
@click.option(
    "--rules-only",
    is_flag=True,
    help="Check Kafka's own rules after every step (timing, the answers to clients, the HW "
    "by the clock, a step's effect) but not the spec's invariants, which an unsafe variant "
    "breaks by design; implies --no-invariants.",
)
@click.option(
    "--corpus",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Append the ITF trace of every run Hypothesis generates to this JSON-lines file, "
    "one trace per line (runs replayed while shrinking are left out).",
)
@click.option(
    "--stages",
    "stage_list",
    metavar="LIST",
    default=None,
    help=f"Without --variant and --bug, the campaign's stages, which share --examples and "
    f"--time-limit equally: {ALL} (the default: {', '.join(STAGE_NAMES)}), or some of them "
    f"separated by commas; {CORRECT} alone is the correct protocol's campaign. An unsafe "
    "variant's stage checks Kafka's rules alone (as --rules-only); only the stages of variants "
    "the spec models write to --corpus (kreplica conform --as-recorded checks each trace under "
    "its own variant).",
)
@click.option(
    "--guided/--unguided",
    default=False,
    show_default=True,
    help=f"Hand the runs out in rounds of {ROUND_RUNS} to the stage and fault mix whose last "
    "rounds "
    "reached the most abstract states of the replicas' views the campaign had not seen "
    "(docs/fuzzing.md, 'Guided fuzzing'); not with --master.",
)
@click.option(
    "--require-all-actions",
    is_flag=True,
    default=False,
    help="Exit 4 if some spec action never occurred in the campaign's runs (the summary's "
    "'never taken' line lists them).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("out/fuzz"),
    show_default=True,
    help="Directory for the shrunk failing run (<name>.itf.json, <name>.schedule.json).",
)
@click.option(
    "--master",
    metavar="URL",
    help="Run a swarm on Spark (local[N], spark://host:port, ...): each stage of the campaign "
    "of each seed of --seeds is a Spark task; the corpus and the failures are gathered here, "
    "and the lowest seed's failure is saved.",
)
@click.option(
    "--seeds",
    "seed_count",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help=f"The swarm's campaigns (--master): seeds --seed to --seed + N - 1, a task per "
    f"stage each [default: {DEFAULT_SEEDS}].",
)
@click.option(
    "--conf",
    "confs",
    multiple=True,
    metavar="KEY=VALUE",
    help="A Spark property for --master (repeatable), e.g. spark.pyspark.python=/usr/bin/python3.",
)
def fuzz(
    examples: int,
    steps: int,
    seed: int,
    assignments: tuple[str, ...],
    bugs: tuple[str, ...],
    replicas: int,
    max_faults: int,
    faults: bool,
    unclean: bool,
    network_faults: bool,
    deletes: bool,
    only_faults: tuple[str, ...],
    shrink: bool,
    time_limit: float | None,
    invariants: bool,
    rules_only: bool,
    corpus: Path | None,
    stage_list: str | None,
    guided: bool,
    require_all_actions: bool,
    out: Path,
    master: str | None,
    seed_count: int | None,
    confs: tuple[str, ...],
) -> int:
    """Fuzz the implementation with Hypothesis; check the spec's invariants after every step."""
    spark_conf = _swarm_options(master, seed_count, confs)
    on = (faults, unclean, network_faults)
    setup = build_setup(
        assignments,
        bugs,
        replicas,
        on,
        max_faults,
        invariants,
        only_faults,
        False,  # --guided steers the rounds (fuzz.guided), not Hypothesis's target()
        deletes,
        rules_only,
    )
    if guided and master is not None:
        raise KreplicaError(
            "--guided hands a seed's runs out round by round in one process: give --master "
            "or --guided, not both"
        )
    stages = campaign_stages(setup, bool(assignments or bugs), stage_list, examples, time_limit)
    check_output_dir(out, "failures to")
    if master is not None:
        seeds = seeds_from(seed, seed_count or DEFAULT_SEEDS)
        swarm = Swarm(setup, seeds, examples, steps, master, shrink, time_limit, spark_conf, stages)
        return _fuzz_swarm(swarm, corpus, out, require_all_actions)
    label = setup.variant.label() if len(stages) == 1 else f"{len(stages)} stages"
    display = FuzzProgress(stages, f"fuzz {label}{' guided' if guided else ''}")
    run = run_guided if guided else run_stages
    with _corpus(corpus) as writer, display.shown():
        result = run(stages, steps, seed, display.update, shrink, writer, time_limit)
    reported = result.failure
    paths, unsaved = _save(reported, out) if reported is not None else ((), None)
    if len(stages) == 1 and not guided:
        lines = fuzz_summary(result.results[0], paths)
    else:
        lines = staged_summary(result, examples, paths)
    if writer is not None:
        lines += corpus_lines(writer, stages)
    make_console().print("\n".join(lines), soft_wrap=True)
    if unsaved is not None:  # the finding is shown above; saving it is what failed
        raise unsaved
    return _exit_code(result, require_all_actions)


def campaign_stages(
    setup: FuzzSetup,
    explicit: bool,
    stage_list: str | None,
    examples: int,
    time_limit: float | None,
) -> tuple[Stage, ...]:
    """The stages the options ask for: the one campaign of an `explicit` --variant or --bug,
    else those of --stages (all by default), sharing the runs and the time; KreplicaError for
    --stages beside --variant or --bug, or an unknown stage."""
    if explicit:
        if stage_list is not None:
            raise KreplicaError(
                "--stages picks stages of the default campaign; --variant and --bug run one "
                "campaign of their own: give one or the other"
            )
        return single(setup, examples, time_limit)
    return plan(setup, parse_stages(stage_list or ALL), examples, time_limit)


def corpus_lines(writer: CorpusWriter, stages: tuple[Stage, ...]) -> list[str]:
    """The summary's corpus line, and which stages' runs it leaves out."""
    lines = [f"corpus: {writer.written:,} traces appended to {writer.path}"]
    left = [stage.name for stage in stages if not stage.corpus]
    if len(stages) > 1:
        also = f"; not the runs of {', '.join(left)}, which the spec does not model" if left else ""
        lines.append(
            f"  each trace records its stage's variant{also}: kreplica conform "
            f"{writer.path} --as-recorded checks each under its own"
        )
    return lines


def staged_summary(result: StagedResult, examples: int, paths: tuple[Path, ...] = ()) -> list[str]:
    """The human summary of a campaign of stages: the options, each stage with its checks,
    runs and outcome, the totals and action mix of the stages run, and the failure."""
    s, stages = result.stats, result.stages
    rate = s.steps / result.seconds if result.seconds > 0 else 0.0
    count = f"{len(stages)} stage{'s' if len(stages) > 1 else ''}"
    shared = (
        f"{count} sharing {examples:,} runs"
        if not result.ran
        else f"{count}, guided: {examples:,} runs in rounds of {ROUND_RUNS} to the stage and "
        "fault mix that find the most new abstract states"
    )
    options = stages[0].setup.describe().split(", ", 1)[1].split("; invariants")[0]
    lines = [f"kreplica fuzz: {shared}, seed {result.seed}; {options}"]  # each stage's checks below
    for stage in stages:
        ran = result.of_stage(stage.name)
        if not ran:
            why = (
                "the campaign stopped at its first failure"
                if result.failure is not None
                else "the runs or the time were spent first"
            )
            lines.append(f"  stage {stage.name}: not run ({why})")
            continue
        broken = [r.failure.invariant for r in ran if r.failure is not None]
        outcome = f"failed: {broken[0]}" if broken else "clean"
        rounds = f" in {len(ran)} rounds" if len(ran) > 1 else ""
        lines.append(
            f"  stage {stage.name}: {stage.checks()}; {sum(r.stats.runs for r in ran):,} runs"
            f"{rounds}, {sum(r.stats.steps for r in ran):,} steps, "
            f"{sum(r.seconds for r in ran):.1f} s; {outcome}"
        )
    lines += [
        f"runs {s.runs:,}, steps {s.steps:,} ({s.impl_steps:,} impl steps, {s.settle_steps:,} "
        f"of them settling), time {result.seconds:.1f} s ({rate:,.0f} steps/s)",
        *action_mix_lines(s),
    ]
    reported, failed = result.failure, result.failed_stage
    if reported is None or reported.failure is None or failed is None:
        limit = f" (time limit of {s.time_limit:g} s)" if s.timed_out and s.time_limit else ""
        if not any(st.setup.checks_rules for st in stages):
            return [*lines, f"no check failed: the runs were only recorded{limit}"]
        settled = " (and their runs settled)" if any(st.setup.invariants for st in stages) else ""
        return [
            *lines,
            f"no invariant failed in the stages that check them{settled}, and no rule of "
            f"Kafka's in any stage{limit}",
        ]
    f, one = reported.failure, reported.stats
    lines += [
        f"violation {f.invariant}: {f.reason}",
        f"  stage {failed.name}: found in its run {one.runs_to_failure:,} after "
        f"{one.detected or 0:.1f} s; shrunk to {len(f.steps)} impl steps, {f.spec_actions} "
        f"spec actions",
        f"  again, that campaign alone: kreplica fuzz {rerun_options(failed, reported.seed)}",
    ]
    return lines + [f"  {kind}: {p}" for kind, p in zip(("trace", "schedule"), paths, strict=False)]


def _exit_code(result: StagedResult | SwarmResult, require_all_actions: bool) -> int:
    """1 for a failure; 4 for a clean campaign (or swarm) that had to take every spec action
    and did not; else 0."""
    if result.failure is not None:
        return EXIT_UNEXPECTED
    if require_all_actions and never_taken(result.stats):
        return EXIT_ACTIONS_MISSING
    return EXIT_OK


def _swarm_options(
    master: str | None, seed_count: int | None, confs: tuple[str, ...]
) -> dict[str, str]:
    """--conf as Spark properties; one line for a swarm option without --master."""
    if master is None:
        if confs:
            raise click.BadParameter("--conf sets Spark properties; give --master too")
        if seed_count is not None:
            raise click.BadParameter(
                "--seeds runs a swarm on Spark; give --master too", param_hint="'--seeds'"
            )
        return {}
    return read_spark_conf(confs)


def _fuzz_swarm(swarm: Swarm, corpus: Path | None, out: Path, require_all_actions: bool) -> int:
    """Run the swarm, save its reported failure, print the summary; the exit code."""
    stages = swarm.plan
    label = swarm.setup.variant.label() if len(stages) == 1 else f"{len(stages)} stages"
    display = SwarmProgress(len(swarm.seeds) * len(stages), f"fuzz {label} on {swarm.master}")
    with _corpus(corpus) as writer, display.shown():
        result = run_swarm(swarm, writer, display.update)
    reported = result.failure
    paths, unsaved = _save(reported, out) if reported is not None else ((), None)
    lines = swarm_summary(result, paths)
    if writer is not None:
        lines += corpus_lines(writer, stages)
    make_console().print("\n".join(lines), soft_wrap=True)
    if unsaved is not None:
        raise unsaved
    return _exit_code(result, require_all_actions)


def _seed_list(seeds: list[int]) -> str:
    """Seeds for a line: `3, 5 and 6`, or the first ten and how many more."""
    shown = [str(s) for s in seeds[:10]]
    more = f" and {len(seeds) - 10:,} more" if len(seeds) > 10 else ""
    if len(shown) > 1 and not more:
        return f"{', '.join(shown[:-1])} and {shown[-1]}"
    return ", ".join(shown) + more


def swarm_summary(result: SwarmResult, paths: tuple[Path, ...] = ()) -> list[str]:
    """The human summary of a swarm: its set-up, seeds and master, the totals of every seed's
    campaign with the job's throughput, the action mix, and the reported failure."""
    swarm, s = result.swarm, result.stats
    seeds, stages = swarm.seeds, swarm.plan
    span = f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {seeds[0]} to {seeds[-1]}"
    what = swarm.setup.describe()
    if len(stages) > 1:
        names = ", ".join(stage.name for stage in stages)
        what = (
            f"{len(stages)} stages ({names}) sharing {swarm.examples:,} runs a seed; "
            + (what.split(", ", 1)[1])
        )
    each = "a Spark task each" if len(stages) == 1 else "a Spark task per seed and stage"
    set_aside = (
        f"; {result.set_aside:,} tasks of stages after their seed's failure set aside"
        if result.set_aside
        else ""
    )
    lines = [
        f"kreplica fuzz: {what}, {span} on {swarm.master} ({each}{set_aside})",
        f"runs {s.runs:,}, steps {s.steps:,} ({s.impl_steps:,} impl steps, {s.settle_steps:,} "
        f"of them settling), time {result.seconds:.1f} s ({result.steps_per_second:,.0f} "
        f"steps/s); Spark start-up {result.startup:.1f} s, the seeds' campaigns "
        f"{result.task_seconds:.1f} s in all",
        *action_mix_lines(s),
    ]
    reported = result.failure
    if reported is None or reported.failure is None:
        limit = f" (time limit of {s.time_limit:g} s)" if s.timed_out and s.time_limit else ""
        if len(stages) > 1:
            return [
                *lines,
                f"no invariant failed in any seed, in the stages that check them, and no "
                f"rule of Kafka's in any stage{limit}",
            ]
        settled = ", every run settled" if swarm.setup.invariants else ""
        return [*lines, f"no invariant failed in any seed{settled}{limit}"]
    f, failed = reported.failure, [r.seed for r in result.failed]
    one = reported.stats
    stage = next(st for st in stages if st.setup == reported.setup)
    where = "" if len(stages) == 1 else f" (stage {stage.name})"
    lines += [
        f"violation {f.invariant}: {f.reason}",
        f"  seed {reported.seed}{where}, the lowest of the {len(failed)} of {len(seeds)} seeds "
        f"that failed ({_seed_list(failed)}): found in its run {one.runs_to_failure:,} after "
        f"{one.detected or 0:.1f} s; shrunk to {len(f.steps)} impl steps, {f.spec_actions} "
        f"spec actions",
        f"  again: kreplica fuzz --seed {reported.seed} with the same options",
    ]
    return lines + [f"  {kind}: {p}" for kind, p in zip(("trace", "schedule"), paths, strict=False)]


@contextmanager
def _corpus(path: Path | None) -> Iterator[CorpusWriter | None]:
    """The corpus writer for --corpus (None without it), closed at the end."""
    if path is None:
        yield None
        return
    with CorpusWriter(path) as writer:
        if writer.set_aside is not None:
            click.echo(
                f"kreplica: note: {path} ended in a partial line ({writer.repaired} bytes, a "
                f"write that was interrupted); it was moved to {writer.set_aside}",
                err=True,
            )
        yield writer


def _save(result: FuzzResult, out: Path) -> tuple[tuple[Path, ...], KreplicaError | None]:
    """Write the failure's trace and schedule: the paths written, or the error that stopped
    them (raised by the caller once the finding has been shown)."""
    if result.failure is None:
        return (), None
    try:
        return save_failure(result, out), None
    except OSError as err:
        where = f" {err.filename}" if err.filename else ""
        return (), KreplicaError(f"cannot write{where}: {err.strerror or err}")
