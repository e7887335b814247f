"""How often a power loss leaves a broker's HW checkpoint above the log that survived it.

    python -m kreplica.conformance.bench.checkpoints --examples 600 --steps 50 --seed 1

At a restart the broker reads its HW back from the checkpoint file, and Kafka clamps it to the
LEO when the log that survived is shorter (R13); S13 and KIP-279 start there. This runs the
campaign of `kreplica fuzz --fault unclean-shutdown` with a corpus, then counts over its traces
the power losses (`UncleanShutdown`), those after which the broker's `hwCheckpoint` is above
its LEO, and the checkpoints written (`CheckpointHighWatermarks`).
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from kreplica.conformance.errors import run_command
from kreplica.conformance.fuzz.campaign import run_fuzz
from kreplica.conformance.fuzz.corpus_writer import CorpusWriter
from kreplica.conformance.fuzz.setup import FuzzSetup
from kreplica.conformance.tla.itf import ItfTrace, decode_trace

PROG = "python -m kreplica.conformance.bench.checkpoints"


def count(trace: ItfTrace, into: Counter[str]) -> None:
    """Add one trace's power losses, those that leave the checkpoint above the LEO, and its
    checkpoints written, to `into`."""
    for state in trace.states:
        if state.action == "CheckpointHighWatermarks":
            into["checkpoints written"] += 1
        if state.action != "UncleanShutdown":
            continue
        r = state.args["replica"]
        checkpoints, logs = state.values["hwCheckpoint"], state.values["log"]
        assert isinstance(r, int) and isinstance(checkpoints, tuple) and isinstance(logs, tuple)
        checkpoint, log = checkpoints[r - 1], logs[r - 1]
        assert isinstance(checkpoint, int) and isinstance(log, tuple)
        into["power losses"] += 1
        if checkpoint > len(log):
            into["... leaving the checkpoint above the LEO"] += 1


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--examples", type=click.IntRange(min=1), default=600, show_default=True)
@click.option("--steps", type=click.IntRange(min=1), default=50, show_default=True)
@click.option("--seed", type=click.IntRange(min=0), default=1, show_default=True)
def main(examples: int, steps: int, seed: int) -> int:
    """Run the power-loss campaign once and count what its traces show."""
    setup = FuzzSetup(only_faults=frozenset({"unclean_shutdown"}))
    counts: Counter[str] = Counter()
    with tempfile.TemporaryDirectory(prefix="kreplica-bench-") as scratch:
        path = Path(scratch) / "corpus.jsonl"
        result = run_fuzz(setup, examples, steps, seed, shrink=False, corpus=CorpusWriter(path))
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                count(decode_trace(json.loads(line)), counts)
    table = Table("count", "value", title=f"kreplica fuzz --fault unclean-shutdown --seed {seed}")
    table.add_row("runs", str(result.stats.runs))
    for name in ("power losses", "... leaving the checkpoint above the LEO", "checkpoints written"):
        table.add_row(name, str(counts[name]))
    Console(highlight=False).print(table)
    if result.failure is not None:  # the counts are of the runs before it
        click.echo(f"{PROG}: the campaign failed: {result.failure.invariant}", err=True)
        return 1
    return 0


if __name__ == "__main__":
    run_command(main, PROG)
