"""Random-walk trace corpora: many recorded runs of the implementation, fast, as JSON lines.

`kreplica fuzz --corpus` records the runs Hypothesis generates; this module is the cheap way
to a large corpus for conformance benchmarks: a seeded random walk over the fuzzer's own
step choices (`fuzz.CHOICES`), recorded by the same recorder, without checking invariants.
Each line is one ITF trace whose #meta carries its id, variant and broker configuration.

    python -m kreplica.conformance.fuzz.random_walk --traces 1000 --steps 100 --out corpus.jsonl
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TextIO

import click
from rich.console import Console
from rich.progress import Progress

from kreplica.conformance.bridge.projection import CLIENT
from kreplica.conformance.bridge.recorder import Recorder
from kreplica.conformance.errors import KreplicaError, file_error, run_command
from kreplica.conformance.fuzz.choices import CHOICES
from kreplica.conformance.fuzz.setup import BATCH_MAX_RECORDS, CONFIG, FETCH_MAX_RECORDS, TICK_MS
from kreplica.conformance.replay.trace import TP
from kreplica.conformance.tla.itf import ItfTrace, dumps_trace
from kreplica.impl.cluster import Cluster
from kreplica.impl.steps import Deliver, Tick
from kreplica.impl.variants import Variant, parse_variant

KINDS = (
    "deliver", "deliver", "deliver", "reorder", "fetch", "fetch", "fetch", "shrink_isr",
    "crash", "restart", "detect_failure", "elect", "drop",
)  # fmt: skip
"""The rules a walk draws from (with repeats as weights): every fault the spec models."""

PRODUCE_CHANCE = 0.15
TICK_CHANCE = 0.03


def _produce(c: Cluster, rec: Recorder, rng: random.Random) -> None:
    """A producer sends the next record to a broker that believes it leads, delivered at once."""
    s = rec.state
    leaders = [b for b in sorted(s["alive"]) if s["leader"][b - 1] == b]
    if leaders:
        broker = rng.choice(leaders)
        step = replace(c.next_record(TP, int(c.variant.acks)), broker=broker)
        index = len(c.network.queue((CLIENT, broker)))
        rec.apply(step)
        rec.apply(Deliver(CLIENT, broker, index))


def walk(
    variant: Variant, replicas: int, steps: int, rng: random.Random, meta: dict[str, object]
) -> ItfTrace:
    """One run of up to `steps` spec actions, choosing each step at random."""
    c = Cluster(list(range(1, replicas + 1)), {TP.topic: 1}, variant=variant, config=CONFIG)
    rec = Recorder(c, TP, meta)
    for _ in range(steps * 5):
        if len(rec.events) - 1 >= steps:
            break
        draw = rng.random()
        if draw < PRODUCE_CHANCE:
            _produce(c, rec, rng)
        elif draw < PRODUCE_CHANCE + TICK_CHANCE:
            rec.apply(Tick(rng.choice(TICK_MS)))
        else:
            options = CHOICES[rng.choice(KINDS)](c, rec.state)
            if options:
                rec.apply(rng.choice(options))
    return rec.trace()


def corpus(
    traces: int, steps: int, seed: int, variant: Variant, replicas: int
) -> Iterator[ItfTrace]:
    """`traces` random walks, reproducible from `seed`."""
    rng = random.Random(seed)
    for i in range(traces):
        meta: dict[str, object] = {
            "id": f"walk-{seed}-{i}",
            "variant": variant.label(),
            "replicas": replicas,
            "min_insync_replicas": CONFIG.min_insync_replicas,
            "fetch_max_records": FETCH_MAX_RECORDS,
            "batch_max_records": BATCH_MAX_RECORDS,
        }
        yield walk(variant, replicas, steps, rng, meta)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--traces", type=click.IntRange(min=1), default=100, show_default=True)
@click.option("--steps", type=click.IntRange(min=1), default=100, show_default=True)
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--variant", "variants", multiple=True, metavar="NAME=VALUE")
@click.option("--bug", "bugs", multiple=True, metavar="NAME")
@click.option("--replicas", type=click.IntRange(2, 5), default=3, show_default=True)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True)
def main(
    traces: int,
    steps: int,
    seed: int,
    variants: tuple[str, ...],
    bugs: tuple[str, ...],
    replicas: int,
    out: Path,
) -> None:
    """Write a JSON-lines corpus of random-walk traces to OUT."""
    try:
        variant = parse_variant(variants, bugs)
    except ValueError as err:
        raise click.UsageError(str(err)) from None
    handle = open_output(out)
    try:  # a full disk fails a write, or only the last flush on closing
        with handle, _progress() as progress:
            task = progress.add_task("recording", total=traces)
            for trace in corpus(traces, steps, seed, variant, replicas):
                text = json.dumps(json.loads(dumps_trace(trace)), separators=(",", ":"))
                handle.write(text + "\n")
                progress.advance(task)
    except OSError as err:
        raise file_error("write", out, err) from None


def _progress() -> Progress:
    """A progress bar on stderr, only when it is a terminal (no stray blank line in a log)."""
    console = Console(stderr=True)
    return Progress(console=console, transient=True, disable=not console.is_terminal)


def open_output(out: Path) -> TextIO:
    """OUT opened for writing, before any trace is recorded; one clear KreplicaError if not."""
    try:
        return out.open("w", encoding="utf-8")
    except FileNotFoundError as err:
        if not out.parent.is_dir():
            raise KreplicaError(
                f"cannot write {out}: directory {out.parent} does not exist"
            ) from None
        raise file_error("write", out, err) from None
    except OSError as err:
        raise file_error("write", out, err) from None


if __name__ == "__main__":
    run_command(main, "python -m kreplica.conformance.fuzz.random_walk")
