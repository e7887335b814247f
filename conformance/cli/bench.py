"""`kreplica bench NAME`: the benchmarks whose figures docs/ quotes beside the command.

Each subcommand parses its options, calls its engine in `kreplica.conformance.bench` (one
module per benchmark: what it measures and how is said there), and renders what comes back:
a table, or a line, on stdout, as the figures in docs/ were printed. Call the engines from
Python rather than these commands, which exit instead of returning.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from kreplica.conformance.bench import checkpoints as checkpoints_bench
from kreplica.conformance.bench import conform as conform_bench
from kreplica.conformance.bench import fuzz as fuzz_bench
from kreplica.conformance.bench import guided as guided_bench
from kreplica.conformance.bench import hidden as hidden_bench
from kreplica.conformance.bench import impl as impl_bench
from kreplica.conformance.bench import kafka as kafka_bench
from kreplica.conformance.bench import kafka_agent as agent_bench
from kreplica.conformance.bench import tlc as tlc_bench
from kreplica.conformance.errors import EXIT_OK, EXIT_UNEXPECTED, PROG, KreplicaError, file_error
from kreplica.conformance.fuzz.campaign import FuzzResult
from kreplica.conformance.fuzz.targets import TARGETS, Target
from kreplica.conformance.kafka.schedule import load_schedule

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
    """Measure what docs/ quotes: the simulator, the fuzzer, conformance checking, TLC, the
    real-Kafka harness and its Java agent."""


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
    columns = fuzz_bench.COLUMNS
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        cells = row.cells()
        cells[1] = f"`{cells[1]}`" if cells[1] != "(defaults)" else cells[1]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


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
def fuzz_command(
    throughput_examples: int,
    seeds: int,
    time_limit: float,
    only: tuple[str, ...],
    defaults: bool,
    as_markdown: bool,
    as_profile: bool,
) -> None:
    """Measure the fuzzer's throughput and its time to detect each seeded bug and variant."""
    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=200)  # a log file: no wrapping
    unknown = fuzz_bench.unknown_targets(only)
    if unknown:
        raise click.BadParameter(f"unknown target {unknown[0]!r}", param_hint="--only")
    if as_profile and throughput_examples > 0:
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


# -- conform ---------------------------------------------------------------------------------

CONFORM_EPILOG = """\b
Examples:
  kreplica bench conform --traces 10000 --steps 100
                                               record a corpus, check it 3 ways
  kreplica bench conform --corpus b10k         check a corpus already made
  kreplica bench conform --corpus m10k --mode "spark local[2]"
  kreplica bench conform --master spark://127.0.0.1:7077 --executor-python /usr/bin/python3
                                               a standalone Spark cluster too

Records a random-walk corpus of the correct protocol (or takes --corpus), then
checks it with `kreplica conform` in a fresh process per mode, and prints each
mode's events/s, the ratios between them, the load averages, and the driver
process's peak memory (its own resident set, not Spark's JVM).

\b
Exit codes:
  0  the figures are printed
  1  a mode's `kreplica conform` wrote no results (its last error line)
  2  bad input: a missing --corpus, a bad number, the mode 'spark cluster'
     without --master
  130  interrupted (Ctrl-C, SIGTERM)
"""


@bench_group.command(
    name="conform",
    epilog=CONFORM_EPILOG,
    short_help="Trace events checked per second: Spark, a pool.",
)
@click.option(
    "--traces",
    type=click.IntRange(min=1),
    default=10_000,
    show_default=True,
    help="Random walks in the corpus it records.",
)
@click.option(
    "--steps",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="Spec actions per walk at most.",
)
@click.option(
    "--per-file",
    type=click.IntRange(min=1),
    default=500,
    show_default=True,
    help="Traces per JSON-lines file of the corpus.",
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=2500,
    show_default=True,
    help="kreplica conform's --batch-size: traces per TLC run.",
)
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="The walks' seed.",
)
@click.option("--mode", "modes", multiple=True, type=click.Choice([*conform_bench.MODES,
              conform_bench.CLUSTER]),
              help="Modes to run (default: all three, and the cluster with --master).")  # fmt: skip
@click.option("--master", help="A Spark cluster's master URL (spark://HOST:PORT): adds the "
              f"mode {conform_bench.CLUSTER!r}.")  # fmt: skip
@click.option("--executor-python", help="The cluster's executors' Python (PYSPARK_PYTHON); "
              "by default the workers' python3.")  # fmt: skip
@click.option("--corpus", "given", type=click.Path(exists=True, path_type=Path),
              help="Check this corpus (file or directory) instead of recording one.")  # fmt: skip
def conform_command(
    traces: int, steps: int, per_file: int, batch_size: int, seed: int, modes: tuple[str, ...],
    given: Path | None, master: str | None, executor_python: str | None,
) -> None:  # fmt: skip
    """Measure conformance checking throughput on Spark and on a process pool."""
    chosen = conform_bench.modes_to_run(modes, master)
    console = Console(highlight=False)

    def checking(mode: str) -> None:
        """Say which mode starts, and the machine's load then."""
        console.print(f"checking with {mode} (load {conform_bench.load_average()}) ...")

    with tempfile.TemporaryDirectory(prefix="kreplica-bench-") as tmp:
        root = Path(tmp)
        source = given or root / "corpus"
        if given is None:
            console.print(f"recording {traces} traces of up to {steps} steps ...")
            events = conform_bench.make_corpus(source, traces, steps, per_file, seed)
            console.print(f"corpus: {events} events in {-(-traces // per_file)} files")
        results = conform_bench.measure(
            source, chosen, root, batch_size, master, executor_python, checking
        )
        console.print(f"load average at the end: {conform_bench.load_average()}")
    table = Table("mode", "traces", "events", "seconds", "events/s", "driver peak MB", "exit")
    for m in results:
        table.add_row(m.mode, str(m.traces), str(m.events), f"{m.seconds:.1f}", f"{m.rate:,.0f}",
                      f"{m.driver_mb:.0f}", str(m.exit_code))  # fmt: skip
    console.print(table)
    for label, ratio in conform_bench.ratios(results):
        console.print(f"{label}: {ratio:.2f}")


# -- tlc -------------------------------------------------------------------------------------

TLC_EPILOG = """\b
Examples:
  kreplica bench tlc --corpus b10k/a.jsonl --traces 1000 --repeat 3
  kreplica bench tlc --corpus out/corpus.jsonl --traces 100 --repeat 1

Writes the corpus's first --traces lines as one batch (as kreplica conform
does, with the Java reader) and runs TLC on it --repeat times: per run, the
TLC process's CPU seconds, the part spent reading the traces, the CPU
microseconds per trace event and its peak memory, the JVM's start included.

\b
Exit codes:
  0  the figures are printed
  2  bad input: a missing, empty or unreadable --corpus, a bad number; no Java
     or no tla2tools.jar
  130  interrupted (Ctrl-C, SIGTERM)
"""


@bench_group.command(
    name="tlc", epilog=TLC_EPILOG, short_help="One TLC process's CPU per trace event."
)
@click.option(
    "--corpus",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    required=True,
    help="A JSON-lines corpus of the correct protocol (kreplica walk).",
)
@click.option(
    "--traces",
    type=click.IntRange(min=1),
    default=1000,
    show_default=True,
    help="The corpus's first lines to check, as one batch.",
)
@click.option(
    "--repeat", type=click.IntRange(min=1), default=3, show_default=True, help="TLC runs."
)
@click.option(
    "--fetch-max-records",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="The spec's FetchMaxRecords (the walks' own is 2).",
)
def tlc_command(corpus: Path, traces: int, repeat: int, fetch_max_records: int) -> None:
    """Time one TLC process on a batch of the corpus's first traces."""
    runs = tlc_bench.time_batch(corpus, traces, repeat, fetch_max_records)
    table = Table(
        "run", "events", "conform", "wall s", "CPU s", "reading s", "CPU µs/event", "peak MB"
    )
    for n, run in enumerate(runs, 1):
        table.add_row(
            str(n),
            f"{run.events:,}",
            f"{run.conforming:,}",
            f"{run.wall_seconds:.2f}",
            f"{run.cpu_seconds:.2f}",
            f"{run.read_seconds:.2f}",
            f"{run.us_per_event:.0f}",
            f"{run.peak_mb:,.0f}",
        )
    Console().print(table)


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


# -- guided ----------------------------------------------------------------------------------

GUIDED_EPILOG = (
    """\b
Examples:
  kreplica bench guided --seconds 60 --seeds 3 --markdown
  kreplica bench guided --seconds 5 --seeds 1 --picture out/guided.png
                                               a quick look

For each seed, two campaigns of the correct protocol with the default set-up,
one unguided and one --guided, each searching --seconds (or until 3,000 runs):
each campaign's distinct abstract states against time, drawn into --picture
(both modes side by side), and the final counts as a table. The default
--picture replaces the one docs/fuzzing.md shows.

"""
    + EXIT_CODES
)


@bench_group.command(
    name="guided",
    epilog=GUIDED_EPILOG,
    short_help="Abstract-state coverage over time, guided or not.",
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
    "--picture",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("docs/img/guided-coverage.png"),
    show_default=True,
    help="Where the plot goes.",
)
@click.option("--markdown", "as_markdown", is_flag=True, help="Also print a markdown table.")
def guided_command(seconds: float, seeds: int, picture: Path, as_markdown: bool) -> None:
    """Plot abstract-state coverage against time for guided and unguided fuzzing."""
    console = Console(highlight=False, width=200)
    curves = []
    for curve in guided_bench.coverage_curves(seconds, seeds):
        found = f"; stopped: {curve.found} failed" if curve.found else ""
        console.print(
            f"  {curve.mode} seed {curve.seed}: {curve.final} states, {curve.runs} runs{found}"
        )
        curves.append(curve)
    guided_bench.draw(curves, seconds, picture)
    table = Table(title=f"abstract states after {seconds:g} s")
    for name in guided_bench.COLUMNS:
        table.add_column(name)
    for row in guided_bench.rows(curves):
        table.add_row(*row)
    console.print(table)
    console.print(f"picture: {picture}")
    if as_markdown:
        columns = guided_bench.COLUMNS
        lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        lines += ["| " + " | ".join(r) + " |" for r in guided_bench.rows(curves)]
        console.print("\n".join(lines), soft_wrap=True)


# -- kafka -----------------------------------------------------------------------------------


KAFKA_EXIT_CODES = """\b
Exit codes:
  0  the figures are printed
  2  bad input: a bad option or number, {bad_input}
  3  a node (ZooKeeper, a broker, the topic's first leader) was not ready in time
  4  the environment lacks something: {environment}
  5  a port the cluster needs is in use (see --port-base)
  6  a JVM exited on its own, or the cluster refused an admin request
  130  interrupted (Ctrl-C, SIGTERM): every JVM is stopped first
"""
"""The exit codes of a benchmark that starts real clusters (`kafka.cluster`, `kafka.install`)."""


KAFKA_EPILOG = """\b
Examples:
  kreplica bench kafka --runs 3
  kreplica bench kafka --runs 1 --schedule schedules/acks-all-leader-crash.json

Runs one schedule (default: the leader killed with -9 and restarted between
produces, acks=-1, no partition, so no root needed) --runs times, each on a
fresh real Kafka 2.6.3 cluster (ZooKeeper and three broker JVMs) in
build/kafka-runs/bench: per run the start-up, the steps, the final
observation, the teardown and the total; the harness's own CPU and the JVMs'.
Schedules per hour is 3600 over the median total.

""" + KAFKA_EXIT_CODES.format(
    bad_input="a missing or malformed\n     --schedule",
    environment="Java 11, the Kafka jars, root for\n"
    "     a --schedule with partitions ('make kafka' installs them)",
)


@bench_group.command(
    name="kafka",
    epilog=KAFKA_EPILOG,
    short_help="The real-cluster harness: start-up, schedules/hour.",
)
@click.option(
    "--runs",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="Runs, each on a fresh cluster.",
)
@click.option(
    "--schedule",
    "schedule_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="A schedule file (default: a leader killed with -9 and restarted, acks=-1).",
)
@click.option(
    "--port-base",
    type=click.IntRange(1024, 65000),
    default=19390,
    show_default=True,
    help="ZooKeeper's port; broker N listens on PORT_BASE+N.",
)
def kafka_command(runs: int, schedule_path: Path | None, port_base: int) -> None:
    """Real-cluster start-up time, schedules per hour, and the harness's own overhead."""
    schedule = load_schedule(schedule_path) if schedule_path else kafka_bench.REFERENCE
    results = kafka_bench.measure(schedule, runs, port_base)
    table = Table(title="kreplica kafka: the real-cluster harness")
    for name in kafka_bench.COLUMNS:
        table.add_column(name, justify="right")
    for row in kafka_bench.rows(results):
        table.add_row(*row)
    out = Console(highlight=False, markup=False)
    out.print(table)
    s = kafka_bench.summary(results)
    out.print(
        f"schedule {schedule.name} ({len(schedule.steps)} steps), {runs} runs: "
        f"start-up {s.start_seconds:.1f}s, {s.per_hour:.0f} schedules/hour, "
        f"harness CPU {s.harness_cpu:.1f}s per run ({100 * s.harness_share:.0f}% of one core)",
        soft_wrap=True,
    )


# -- kafka-agent -----------------------------------------------------------------------------

AGENT_EPILOG = """\b
Examples:
  kreplica bench kafka-agent --runs 3 --markdown
  kreplica bench kafka-agent --runs 3 --records 200 --prefill 2000 --no-pipelined --markdown
  kreplica bench kafka-agent --runs 1 --json out/agent.json

Starts the harness's real Kafka 2.6.3 cluster without kreplica's Java agent,
then with it, alternately, --runs pairs; on each, after --warmup and --prefill
records (not timed), it times --records acks=-1 produces one in flight and,
unless --no-pipelined, pipelined (5 in flight): records/s, p50 and p99 latency,
the brokers' CPU and the agent's event lines and bytes per record; then the
medians of each side and the ratio with/without.

""" + KAFKA_EXIT_CODES.format(
    bad_input="a missing --agent jar, a --json\n"
    "     in no directory, an agent that wrote no events.jsonl",
    environment="Java 11, the Kafka jars\n     ('make kafka' installs them)",
)


def agent_table(results: list[agent_bench.Measured]) -> Table:
    """The report as a rich table."""
    table = Table(title="kreplica's agent on real Kafka 2.6.3: acks=-1 produces of small records")
    for name in agent_bench.COLUMNS:
        table.add_column(name, justify="left" if name in ("agent", "phase") else "right")
    for row in agent_bench.rows(results):
        table.add_row(*row)
    return table


def agent_markdown(results: list[agent_bench.Measured]) -> str:
    """The report as a GitHub markdown table."""
    columns = agent_bench.COLUMNS
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(row) + " |" for row in agent_bench.rows(results)]
    return "\n".join(lines)


@bench_group.command(
    name="kafka-agent", epilog=AGENT_EPILOG, short_help="What the Java agent costs a real broker."
)
@click.option(
    "--runs",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="Pairs of clusters: without the agent, then with it.",
)
@click.option(
    "--records",
    type=click.IntRange(min=1),
    default=500,
    show_default=True,
    help="Records timed per phase.",
)
@click.option(
    "--warmup",
    type=click.IntRange(min=0),
    default=100,
    show_default=True,
    help="Records sent one at a time first, not timed.",
)
@click.option(
    "--prefill",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Records then sent all at once, not timed: the log the phases start from.",
)
@click.option(
    "--pipelined/--no-pipelined",
    default=True,
    show_default=True,
    help="Also time 5 requests in flight, every send issued at once.",
)
@click.option(
    "--agent",
    "agent_jar",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=agent_bench.AGENT_JAR,
    show_default=True,
    help="The agent's jar (make kafka builds it).",
)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=agent_bench.WORKDIR,
    show_default=True,
    help="Run directories: WORKDIR/without and WORKDIR/with, emptied at each start.",
)
@click.option(
    "--port-base",
    type=click.IntRange(1024, 65000),
    default=19690,
    show_default=True,
    help="ZooKeeper's port; broker N listens on PORT_BASE+N.",
)
@click.option("--markdown", is_flag=True, help="Print a markdown table instead of a rich one.")
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write every figure as JSON here.",
)
def kafka_agent_command(
    runs: int,
    records: int,
    warmup: int,
    prefill: int,
    pipelined: bool,
    agent_jar: Path,
    workdir: Path,
    port_base: int,
    markdown: bool,
    json_path: Path | None,
) -> None:
    """What kreplica's Java agent costs a real broker: produce throughput and latency, CPU and
    event bytes per record, without the agent and with it, alternately."""
    if json_path is not None and not json_path.parent.is_dir():
        raise KreplicaError(f"--json {json_path}: no directory {json_path.parent}")
    counts = agent_bench.Counts(warmup, prefill, records, pipelined)
    load_before = os.getloadavg()
    results = agent_bench.measure(runs, counts, agent_jar, workdir, port_base)
    load_after = os.getloadavg()
    out = Console(highlight=False, markup=False, width=None if sys.stdout.isatty() else 120)
    out.print(agent_markdown(results) if markdown else agent_table(results), soft_wrap=markdown)
    out.print(
        f"{runs} pairs; per cluster {warmup} warm-up records, {prefill} prefilled, "
        f"{records} timed per phase; load average before {_load(load_before)}, "
        f"after {_load(load_after)}; {os.cpu_count()} CPUs",
        soft_wrap=True,
    )
    if json_path is not None:
        settings = {
            "counts": asdict(counts),
            "agent_jar": str(agent_jar),
            "port_base": port_base,
            "load_average": {"before": load_before, "after": load_after},
            "cpus": os.cpu_count(),
        }
        text = json.dumps(agent_bench.to_json(results, settings), indent=2) + "\n"
        try:
            json_path.write_text(text, encoding="utf-8")
        except OSError as err:
            raise file_error("write", json_path, err) from None


def _load(load: tuple[float, float, float]) -> str:
    """Load averages as the summary line prints them."""
    return " ".join(f"{x:.2f}" for x in load)
