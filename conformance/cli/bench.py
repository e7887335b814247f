"""`kreplica bench NAME`: the benchmarks whose figures docs/ quotes beside the command.

Each subcommand parses its options, calls its engine in `kreplica.conformance.bench` (one
module per benchmark: what it measures and how is said there), and renders what comes back:
a table, or a line, on stdout, as the figures in docs/ were printed. Call the engines from
Python rather than these commands, which exit instead of returning.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from kreplica.conformance.bench import checkpoints as checkpoints_bench
from kreplica.conformance.bench import fuzz as fuzz_bench
from kreplica.conformance.bench import hidden as hidden_bench
from kreplica.conformance.bench import impl as impl_bench
from kreplica.conformance.bench import search as search_bench
from kreplica.conformance.cli.bench_kafka import kafka_agent_command, kafka_command
from kreplica.conformance.cli.bench_swarm import swarm_command
from kreplica.conformance.cli.bench_validate import conform_command, tlc_command
from kreplica.conformance.cli.console import markdown_table
from kreplica.conformance.errors import EXIT_OK, EXIT_UNEXPECTED, PROG
from kreplica.conformance.fuzz.campaign import FuzzResult
from kreplica.conformance.fuzz.setup import DEFAULT_EXAMPLES
from kreplica.conformance.fuzz.targets import TARGETS, Target

EXIT_CODES = """\b
Exit codes:
  0  the figures are printed
  2  bad input: a bad option or number, a missing input
  130  interrupted (Ctrl-C, SIGTERM)
"""
"""The exit codes of a benchmark that cannot fail on its own."""

GROUP_EPILOG = """\b
Examples:
  kreplica bench impl                          simulated messages per CPU second
  kreplica bench fuzz --seeds 0                the fuzzer's throughput (steps/s)
  kreplica bench swarm                         kreplica fuzz --master, local[1]
                                               against local[2]
  kreplica bench conform --traces 200 --steps 50
                                               trace events checked per second
  kreplica bench tlc --corpus out/corpus.jsonl --traces 100 --repeat 1
                                               one TLC process's cost per event
  kreplica bench kafka --runs 1                the real-cluster harness (JVMs)

Each benchmark's --help lists its options, examples and exit codes; docs/
quotes each figure beside the command that printed it.
"""


@click.group(name="bench", epilog=GROUP_EPILOG)
def bench_group() -> None:
    """Measure what docs/ quotes: the simulator, the fuzzer (in process and on Spark),
    conformance checking, TLC, the real-Kafka harness and its Java agent."""


# -- impl ------------------------------------------------------------------------------------

IMPL_EPILOG = (
    """\b
Examples:
  kreplica bench impl                          2000 rounds, best of 3
  kreplica bench impl --gc default             with Python's own GC settings
  kreplica bench impl --rounds 200 --repeat 1  a quick look

A 3-broker cluster with 10 partitions (replication factor 3) under steady
produce (acks=-1, one record per partition per round) and follower fetching,
on the simulator's fair scheduler; every request and response delivered is
one message. The rate is per CPU second of this process (one core).

"""
    + EXIT_CODES
)


@bench_group.command(
    name="impl", epilog=IMPL_EPILOG, short_help="Simulated protocol messages per CPU second."
)
@click.option(
    "--rounds",
    type=click.IntRange(min=1),
    default=2_000,
    show_default=True,
    help="Produce rounds: one record to every partition, replicated before the next.",
)
@click.option(
    "--repeat",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="Runs; the best is reported.",
)
@click.option(
    "--brokers", type=click.IntRange(min=3), default=3, show_default=True, help="Brokers (3+)."
)
@click.option(
    "--partitions",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Partitions, each replicated on 3 brokers.",
)
@click.option(
    "--gc",
    "gc_mode",
    type=click.Choice(("tuned", "default")),
    default="tuned",
    show_default=True,
    help="tuned: gc.freeze() after set-up and gen-0 threshold 50000; "
    "default: Python's own GC settings.",
)
def impl_command(rounds: int, repeat: int, brokers: int, partitions: int, gc_mode: str) -> None:
    """Simulated protocol messages per second (3 brokers, 10 partitions)."""
    best = impl_bench.best_run(rounds, repeat, brokers, partitions, gc_mode)
    click.echo(
        f"brokers={brokers} partitions={partitions} rounds={rounds} gc={gc_mode} "
        f"messages={best.messages} acked={best.acked} cpu_seconds={best.cpu_seconds:.3f} "
        f"wall_seconds={best.wall_seconds:.3f} (wall rate {best.wall_rate:,.0f}/s)"
    )
    click.echo(f"messages/s: {best.rate:,.0f}")


# -- fuzz ------------------------------------------------------------------------------------

FUZZ_EPILOG = """\b
Examples:
  kreplica bench fuzz --seeds 0                throughput only
  kreplica bench fuzz --seeds 0 --throughput-examples 200 --profile
                                               where a step's time goes
  kreplica bench fuzz --seeds 0 --hypothesis-floor
                                               Hypothesis's own time per step
  kreplica bench fuzz --throughput-examples 0 --seeds 5 --time-limit 120 --markdown
                                               time to detect every target
  kreplica bench fuzz --throughput-examples 0 --seeds 5 --defaults --only kafka-10706
                                               one target, kreplica fuzz's defaults

Throughput: steps per second of a campaign on the correct protocol with every
fault on, every step recorded and checked. Detection: per target (a seeded bug
or unsafe variant, with its own set-up), one campaign per seed 0..N-1, each
searching --time-limit seconds; the medians of the time to the first failing
run, of its runs, and of its minimised failure's size.

\b
Exit codes:
  0  the figures are printed
  1  the correct protocol failed the throughput campaign
  2  bad input: an unknown --only target, a bad number
  130  interrupted (Ctrl-C, SIGTERM)
"""


def one_campaign(target: Target, result: FuzzResult) -> str:
    """A one-line account of one detection campaign."""
    f = result.failure
    if f is None:
        return f"not found in {result.stats.runs} runs ({result.seconds:.0f} s)"
    s = result.stats
    other = "" if f.invariant in target.breaks else " (not the target's failure)"
    return (
        f"{f.invariant}{other} after {s.detected or 0:.1f} s (run {s.runs_to_failure}); "
        f"minimised to {f.spec_actions} spec actions, {len(f.steps)} impl steps"
    )


def detection_table(rows: Sequence[fuzz_bench.Detection]) -> Table:
    """The rich table of every target's detection."""
    table = Table(title="time to detection (one campaign per seed, no Hypothesis shrinking)")
    for name in fuzz_bench.COLUMNS:
        table.add_column(name, overflow="fold")
    for row in rows:
        table.add_row(*row.cells())
    return table


def detection_markdown(rows: Sequence[fuzz_bench.Detection]) -> str:
    """The same table in markdown (for docs/fuzzing.md)."""
    cells = [row.cells() for row in rows]
    for row in cells:
        row[1] = f"`{row[1]}`" if row[1] != "(defaults)" else row[1]
    return markdown_table(fuzz_bench.COLUMNS, cells)


@bench_group.command(
    name="fuzz", epilog=FUZZ_EPILOG, short_help="The fuzzer's throughput and time to detection."
)
@click.option(
    "--throughput-examples",
    type=click.IntRange(min=0),
    default=500,
    show_default=True,
    help="Runs of the throughput campaign (0: skip it).",
)
@click.option(
    "--seeds",
    type=click.IntRange(min=0),
    default=5,
    show_default=True,
    help="Detection campaigns per target (0: skip detection).",
)
@click.option(
    "--time-limit",
    type=click.FloatRange(min=0, min_open=True),
    default=120.0,
    show_default=True,
    help="Seconds each detection campaign may search.",
)
@click.option("--only", multiple=True, metavar="WORD", help="Only this target (repeatable).")
@click.option(
    "--defaults",
    is_flag=True,
    help="Run each target with kreplica fuzz's default options (--bug X or --variant X only) "
    "instead of its own set-up.",
)
@click.option("--markdown", "as_markdown", is_flag=True, help="Also print a markdown table.")
@click.option(
    "--profile",
    "as_profile",
    is_flag=True,
    help="Run the throughput campaign under cProfile instead, and print where its time goes "
    "(markdown rows).",
)
@click.option(
    "--hypothesis-floor",
    is_flag=True,
    help="Instead of the throughput campaign, measure Hypothesis's own CPU time per step (a "
    "machine that only draws 1, 2, 3 and 6 bytes choices a step) and the Hypothesis steps and "
    "bytes choices per step of the campaign's runs.",
)
def fuzz_command(
    throughput_examples: int,
    seeds: int,
    time_limit: float,
    only: tuple[str, ...],
    defaults: bool,
    as_markdown: bool,
    as_profile: bool,
    hypothesis_floor: bool,
) -> None:
    """Measure the fuzzer's throughput and its time to detect each seeded bug and variant."""
    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=200)  # a log file: no wrapping
    unknown = fuzz_bench.unknown_targets(only)
    if unknown:
        raise click.BadParameter(f"unknown target {unknown[0]!r}", param_hint="--only")
    if hypothesis_floor and throughput_examples > 0:
        _print_floor(console, throughput_examples)
    elif as_profile and throughput_examples > 0:
        rooms, total = fuzz_bench.profile(throughput_examples)
        console.print(f"where the time goes (cProfile, {total:.1f} s in all):", soft_wrap=True)
        for room, seconds in rooms.most_common():
            console.print(f"| {room} | {seconds:.1f} s | {100 * seconds / total:.0f}% |")
    elif throughput_examples > 0:
        t = fuzz_bench.throughput(throughput_examples)
        console.print(
            f"throughput: {t.rate:,.0f} steps/s per CPU second ({t.wall_rate:,.0f} per wall "
            f"second): {t.steps:,} steps ({t.impl_steps:,} impl steps) in {t.runs:,} runs, "
            f"{t.cpu_seconds:.1f} s CPU, {t.wall_seconds:.1f} s wall"
        )
    chosen = [t for t in TARGETS if seeds and (not only or t.word in only)]
    rows = []
    for target in chosen:

        def told(seed: int, result: FuzzResult, target: Target = target) -> None:
            """Print one campaign as it ends."""
            console.print(f"  {target.word} seed {seed}: {one_campaign(target, result)}")

        rows.append(fuzz_bench.detect(target, seeds, time_limit, told, defaults))
    if rows:
        console.print(detection_table(rows))
        if as_markdown:
            console.print(detection_markdown(rows), soft_wrap=True)


def _print_floor(console: Console, examples: int) -> None:
    """Hypothesis's CPU time per Hypothesis step for a few bytes choices per step, the line
    through them, and what that makes of the throughput campaign's steps and choices."""
    fuzz_bench.floor(1, examples)  # a first campaign in the process, not reported: warm-up
    floors = [fuzz_bench.floor(draws, examples) for draws in fuzz_bench.DRAWS]
    for f in floors:
        console.print(f"hypothesis floor: {f.draws} bytes choices a step: {f.micros:.1f} us/step "
                      f"({f.steps:,} steps, {f.cpu_seconds:.2f} s CPU)")  # fmt: skip
    loop, per_draw = fuzz_bench.loop_and_draw(floors)
    acts, draws = fuzz_bench.hypothesis_per_step(examples)
    console.print(
        f"the stateful loop {loop:.1f} us/step, {per_draw:.1f} us per bytes choice; the "
        f"throughput campaign takes {acts:.3f} Hypothesis steps and {draws:.3f} bytes choices "
        f"a step of its runs: Hypothesis about {acts * loop + draws * per_draw:.1f} us a step"
    )


# -- hidden ----------------------------------------------------------------------------------

HIDDEN_EPILOG = (
    """\b
Examples:
  kreplica bench hidden --traces 50 --steps 100
  kreplica bench hidden --real build/campaign/final/traces
  kreplica bench hidden --traces 5 --steps 20  a quick look

A trace may leave variables out; TLC then searches their values. For each spec
variable, this removes it from every trace of a random-walk corpus (or of the
--real traces), checks the corpus in one TLC run, and reports whether every
trace still conforms, the states TLC explored per trace event (1.00 when
every step is determined) and the seconds.

"""
    + EXIT_CODES
)


@bench_group.command(
    name="hidden",
    epilog=HIDDEN_EPILOG,
    short_help="What leaving a variable out of traces costs TLC.",
)
@click.option(
    "--traces",
    type=click.IntRange(min=1),
    default=50,
    show_default=True,
    help="Random walks in the corpus.",
)
@click.option(
    "--steps",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="Spec actions per walk at most.",
)
@click.option(
    "--seed", type=click.IntRange(min=0), default=0, show_default=True, help="The walks' seed."
)
@click.option(
    "--real",
    "real",
    multiple=True,
    type=click.Path(exists=True, path_type=Path),
    help="Real Kafka traces (files or directories of *.itf.json, from kreplica kafka trace) "
    "instead of random walks: those checked under the correct protocol, each of the variables "
    "they record hidden in turn.",
)
def hidden_command(traces: int, steps: int, seed: int, real: tuple[Path, ...]) -> None:
    """Check one corpus once with every variable and once per hidden variable."""
    table = Table("hidden", "conform", "states / event", "seconds", title="cost of hiding")
    console = Console(highlight=False)
    for cost in hidden_bench.hidden_costs(traces, steps, seed, real):
        table.add_row(cost.label, f"{cost.conforming}/{cost.traces}",
                      f"{cost.states_per_event:.2f}", f"{cost.seconds:.1f}")  # fmt: skip
        console.print(f"hidden {cost.label}: {cost.states} states, {cost.seconds:.1f}s")
    console.print(table)


# -- checkpoints -----------------------------------------------------------------------------

CHECKPOINTS_EPILOG = """\b
Examples:
  kreplica bench checkpoints --examples 600 --steps 50 --seed 1
  kreplica bench checkpoints --examples 20 --steps 20
                                               a quick look

Runs the campaign of `kreplica fuzz --fault unclean-shutdown` (no shrinking)
with a corpus, then counts over its traces the power losses, those after which
the broker's HW checkpoint is above its log end (R13 clamps it at restart),
and the checkpoints written.

\b
Exit codes:
  0  the counts are printed
  1  the campaign failed (the counts are of the runs before the failure)
  2  bad input: a bad number
  130  interrupted (Ctrl-C, SIGTERM)
"""


@bench_group.command(
    name="checkpoints",
    epilog=CHECKPOINTS_EPILOG,
    short_help="Power losses that leave the HW checkpoint above the log.",
)
@click.option(
    "--examples",
    type=click.IntRange(min=1),
    default=600,
    show_default=True,
    help="Runs of the campaign.",
)
@click.option(
    "--steps",
    type=click.IntRange(min=1),
    default=50,
    show_default=True,
    help="Steps per run at most.",
)
@click.option(
    "--seed", type=click.IntRange(min=0), default=1, show_default=True, help="The campaign's seed."
)
def checkpoints_command(examples: int, steps: int, seed: int) -> int:
    """Run the power-loss campaign once and count what its traces show."""
    result, counts = checkpoints_bench.power_losses(examples, steps, seed)
    table = Table("count", "value", title=f"kreplica fuzz --fault unclean-shutdown --seed {seed}")
    table.add_row("runs", str(result.stats.runs))
    for name in checkpoints_bench.COUNTS:
        table.add_row(name, str(counts[name]))
    Console(highlight=False).print(table)
    if result.failure is not None:  # the counts are of the runs before it
        click.echo(f"{PROG}: the campaign failed: {result.failure.invariant}", err=True)
        return EXIT_UNEXPECTED
    return EXIT_OK


# -- search ----------------------------------------------------------------------------------

SEARCH_EPILOG = (
    """\b
Examples:
  kreplica bench search --seconds 60 --seeds 3 --examples 100000 --markdown
  kreplica bench search --seconds 5 --seeds 1 --modes default,correct --picture out/search.png
                                               a quick look

For each seed, one campaign of each mode with the default options, one after
the other, each searching --seconds (shared by its stages) or until --examples
runs (a default campaign takes its 3,000 in under 30 s):
default (kreplica fuzz: the correct protocol and every variant, a stage each),
correct (kreplica fuzz --stages correct, the default before issue #44), each
of them --guided, and correct target (the correct protocol steered by
Hypothesis's target(), what --guided did before issue #44). Each campaign's
distinct abstract states against time (over all its stages) is drawn into
--picture, and the final counts are a table. The default --picture replaces
the one docs/fuzzing.md shows.

"""
    + EXIT_CODES
)


@bench_group.command(
    name="search",
    epilog=SEARCH_EPILOG,
    short_help="Abstract-state coverage over time: stages or not, guided or not.",
)
@click.option(
    "--seconds",
    type=click.FloatRange(min=0, min_open=True),
    default=60.0,
    show_default=True,
    help="Seconds each campaign searches.",
)
@click.option(
    "--seeds", type=click.IntRange(min=1), default=3, show_default=True, help="Seeds 0..N-1."
)
@click.option(
    "--examples",
    type=click.IntRange(min=1),
    default=DEFAULT_EXAMPLES,
    show_default=True,
    help="Runs each campaign may take at most (kreplica fuzz --examples), shared by its stages.",
)
@click.option(
    "--modes",
    default=",".join(m.name for m in search_bench.MODES),
    show_default=True,
    metavar="LIST",
    help="The modes to run, separated by commas.",
)
@click.option(
    "--picture",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("docs/img/search-coverage.png"),
    show_default=True,
    help="Where the plot goes.",
)
@click.option("--markdown", "as_markdown", is_flag=True, help="Also print a markdown table.")
def search_command(
    seconds: float, seeds: int, examples: int, modes: str, picture: Path, as_markdown: bool
) -> None:
    """Plot abstract-state coverage against time: the default campaign of stages, the correct
    protocol's alone, each guided or not."""
    try:
        chosen = search_bench.modes_named([m.strip() for m in modes.split(",") if m.strip()])
    except KeyError as err:
        names = ", ".join(m.name for m in search_bench.MODES)
        raise click.BadParameter(f"no mode {err}; choose from {names}") from None
    console = Console(highlight=False, width=200)
    found = []
    for curve in search_bench.curves(seconds, seeds, chosen, examples):
        stopped = f"; stopped: {curve.found} failed" if curve.found else ""
        console.print(
            f"  {curve.mode} seed {curve.seed}: {curve.final} states, {curve.runs} runs, load "
            f"{curve.load[0]:.1f} to {curve.load[1]:.1f}{stopped}"
        )
        found.append(curve)
    search_bench.draw(found, seconds, picture)
    table = Table(title=f"abstract states after {seconds:g} s")
    for name in search_bench.COLUMNS:
        table.add_column(name)
    for row in search_bench.rows(found, seconds):
        table.add_row(*row)
    console.print(table)
    console.print(f"picture: {picture}")
    if as_markdown:
        markdown = markdown_table(search_bench.COLUMNS, search_bench.rows(found, seconds))
        console.print(markdown, soft_wrap=True)


bench_group.add_command(conform_command)
bench_group.add_command(tlc_command)
bench_group.add_command(kafka_command)
bench_group.add_command(kafka_agent_command)
bench_group.add_command(swarm_command)
