"""`kreplica bench swarm`: `kreplica fuzz --master` on local[1] and local[2] (or any masters),
side by side in one run: steps per second, the ratio, the load average.

It parses its options, calls its engine (`kreplica.conformance.bench.swarm`) and renders the
rows as docs/fuzzing.md quotes them ("Campaigns on Spark"). `cli.bench` adds it to the
`kreplica bench` group.
"""

from __future__ import annotations

import click
from rich.console import Console
from rich.table import Table

from kreplica.conformance.bench import swarm as swarm_bench
from kreplica.conformance.cli.console import markdown_table
from kreplica.conformance.cli.spark_options import read_spark_conf

SWARM_EPILOG = """\b
Examples:
  kreplica bench swarm                         8 seeds of 500 runs, local[1] then local[2]
  kreplica bench swarm --seeds 4 --examples 20
                                               a quick look
  kreplica bench swarm --master local[2] --master spark://127.0.0.1:7077 \\
      --conf spark.pyspark.python=/usr/bin/python3
                                               local[2] beside a standalone cluster

The correct protocol's campaigns of seeds --seed to --seed + N - 1 (every
fault on, no shrinking: nothing should fail) as a swarm, a Spark task per
seed, on each master in turn, in this process. Steps per second are over the
job's wall time (Spark's start-up, once per master, is shown apart); the
ratio is the last master's over the first's. Every master must run the same
runs and steps. The seeds' campaigns' wall and CPU seconds, summed, and the
1-minute load average before and after are shown: on a shared machine the
cores are not all the swarm's (CPU well under wall says so).

\b
Exit codes:
  0  the figures are printed
  1  the correct protocol failed a campaign
  2  bad input (a bad number, a --conf without =), or Spark failed (a master
     it cannot reach or parse, a lost task)
  130  interrupted (Ctrl-C, SIGTERM)
"""

COLUMNS = (
    "master",
    "seeds",
    "runs",
    "steps",
    "Spark start-up",
    "job wall",
    "steps/s",
    "seeds' wall / CPU",
    "load avg (1 min)",
)


def cells(row: swarm_bench.SwarmRow) -> list[str]:
    """One master's row, as text."""
    r = row.result
    return [
        row.master,
        str(len(r.swarm.seeds)),
        f"{r.stats.runs:,}",
        f"{r.stats.steps:,}",
        f"{r.startup:.1f} s",
        f"{r.seconds:.1f} s",
        f"{r.steps_per_second:,.0f}",
        f"{r.task_seconds:.1f} s / {r.task_cpu_seconds:.1f} s",
        f"{row.load_before:.2f} → {row.load_after:.2f}",
    ]


@click.command(
    name="swarm",
    epilog=SWARM_EPILOG,
    short_help="kreplica fuzz --master: steps/s on local[1] and local[2], side by side.",
)
@click.option(
    "--seeds",
    type=click.IntRange(min=1),
    default=8,
    show_default=True,
    help="Campaigns (Spark tasks).",
)
@click.option(
    "--examples",
    type=click.IntRange(min=1),
    default=500,
    show_default=True,
    help="Runs per campaign.",
)
@click.option(
    "--steps",
    type=click.IntRange(min=1),
    default=40,
    show_default=True,
    help="Most steps per run.",
)
@click.option(
    "--seed", type=click.IntRange(min=0), default=0, show_default=True, help="The first seed."
)
@click.option(
    "--master",
    "masters",
    multiple=True,
    metavar="URL",
    help="A Spark master to measure, in order (repeatable) [default: local[1], local[2]].",
)
@click.option(
    "--conf",
    "confs",
    multiple=True,
    metavar="KEY=VALUE",
    help="A Spark property for every master (repeatable).",
)
@click.option("--markdown", "as_markdown", is_flag=True, help="Also print a markdown table.")
def swarm_command(
    seeds: int,
    examples: int,
    steps: int,
    seed: int,
    masters: tuple[str, ...],
    confs: tuple[str, ...],
    as_markdown: bool,
) -> None:
    """Measure kreplica fuzz --master: the same swarm on each master, steps per second."""
    conf = read_spark_conf(confs)
    rows = swarm_bench.measure(seeds, examples, steps, seed, masters or swarm_bench.MASTERS, conf)
    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=200)  # a log file: no wrapping
    table = Table(
        title=f"kreplica fuzz --master: {examples} runs of up to {steps} steps per seed, "
        "the correct protocol, every fault on"
    )
    for name in COLUMNS:
        table.add_column(name)
    for row in rows:
        table.add_row(*cells(row))
    console.print(table)
    same = "yes" if swarm_bench.same_work(rows) else "NO (a seed's campaign differed)"
    if len(rows) > 1:
        console.print(
            f"{rows[-1].master} / {rows[0].master}: {swarm_bench.ratio(rows):.2f}x the steps "
            f"per second; the same runs and steps on every master: {same}",
            soft_wrap=True,
        )
    if as_markdown:
        console.print(markdown_table(COLUMNS, [cells(r) for r in rows]), soft_wrap=True)
