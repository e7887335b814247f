"""`kreplica bench conform` and `kreplica bench tlc`: what checking traces against the spec
costs, end to end (`kreplica conform` on Spark or a process pool) and inside one TLC process.

Each parses its options, calls its engine (`kreplica.conformance.bench.conform`, `.tlc`) and
renders the figures as docs/conformance.md quotes them. `cli.bench` adds both to the
`kreplica bench` group.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from kreplica.conformance.bench import conform as conform_bench
from kreplica.conformance.bench import tlc as tlc_bench

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


@click.command(
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


@click.command(name="tlc", epilog=TLC_EPILOG, short_help="One TLC process's CPU per trace event.")
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
