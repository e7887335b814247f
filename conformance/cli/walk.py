"""`kreplica walk`: a random-walk corpus (JSON lines) of the implementation, fast and seeded.

The engine is `kreplica.conformance.fuzz.random_walk.write_corpus` (and `corpus`, which yields
the traces): call it from Python rather than this command, which exits instead of returning."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.progress import Progress

from kreplica.conformance.fuzz.random_walk import write_corpus
from kreplica.impl.variants import parse_variant

EPILOG = """\b
Examples:
  kreplica walk --traces 1000 --steps 100 --out out/corpus.jsonl
                                               1,000 walks of the correct protocol
  kreplica walk --traces 200 --bug early-ack --out out/early-ack.jsonl
                                               walks of a seeded bug
  kreplica walk --traces 50 --variant acks=1 --seed 3 --out out/acks1.jsonl

Each line of OUT is one ITF trace (its #meta: id walk-SEED-N, variant,
replicas, broker settings), for kreplica conform, replay or coverage. The
walks draw the fuzzer's own step choices at random, every fault included, and
check no invariant: a walk of the correct protocol conforms to the spec.

\b
Exit codes:
  0  the corpus is written
  2  bad input: an unknown variant or bug, a bad number, an OUT that cannot
     be written (checked before the first walk)
  130  interrupted (Ctrl-C, SIGTERM)
"""


@click.command(name="walk", epilog=EPILOG)
@click.option(
    "--traces",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="Random walks (traces) to record.",
)
@click.option(
    "--steps",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="Spec actions per walk at most.",
)
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="The walks' seed: the same seed, the same corpus.",
)
@click.option(
    "--variant",
    "variants",
    multiple=True,
    metavar="NAME=VALUE",
    help="A protocol variant, e.g. acks=1 or truncation=hw (repeatable).",
)
@click.option(
    "--bug",
    "bugs",
    multiple=True,
    metavar="NAME",
    help="A seeded bug, e.g. early-ack (repeatable).",
)
@click.option(
    "--replicas",
    type=click.IntRange(2, 5),
    default=3,
    show_default=True,
    help="Brokers, each a replica of the one partition.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="The JSON-lines corpus to write (replaced if it exists).",
)
def walk_command(
    traces: int,
    steps: int,
    seed: int,
    variants: tuple[str, ...],
    bugs: tuple[str, ...],
    replicas: int,
    out: Path,
) -> None:
    """Write a JSON-lines corpus of random-walk traces of the implementation to OUT."""
    try:
        variant = parse_variant(variants, bugs)
    except ValueError as err:  # VariantError: an unknown name or value
        raise click.UsageError(str(err)) from None
    console = Console(stderr=True)  # a bar only on a terminal: no stray blank line in a log
    with Progress(console=console, transient=True, disable=not console.is_terminal) as progress:
        task = progress.add_task("recording", total=traces)
        write_corpus(out, traces, steps, seed, variant, replicas, lambda: progress.advance(task))
