"""How often a power loss leaves a broker's HW checkpoint above the log that survived it.

    kreplica bench checkpoints --examples 600 --steps 50 --seed 1

At a restart the broker reads its HW back from the checkpoint file, and Kafka clamps it to the
LEO when the log that survived is shorter (R13); S13 and KIP-279 start there. This runs the
campaign of `kreplica fuzz --fault unclean-shutdown` with a corpus, then counts over its traces
the power losses (`UncleanShutdown`), those after which the broker's `hwCheckpoint` is above
its LEO, and the checkpoints written (`CheckpointHighWatermarks`). `power_losses` is the
engine; `kreplica bench checkpoints` renders its counts.
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from pathlib import Path

from kreplica.conformance.fuzz.campaign import FuzzResult, run_fuzz
from kreplica.conformance.fuzz.corpus_writer import CorpusWriter
from kreplica.conformance.fuzz.setup import FuzzSetup
from kreplica.conformance.tla.itf import ItfTrace, decode_trace

COUNTS = ("power losses", "... leaving the checkpoint above the LEO", "checkpoints written")
"""What `count` counts, in the order the table shows them."""


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


def power_losses(examples: int, steps: int, seed: int) -> tuple[FuzzResult, Counter[str]]:
    """Run the power-loss campaign once (no shrinking) and count over its traces (`COUNTS`);
    when the campaign failed, the counts are of the runs before the failure."""
    setup = FuzzSetup(only_faults=frozenset({"unclean_shutdown"}))
    counts: Counter[str] = Counter()
    with tempfile.TemporaryDirectory(prefix="kreplica-bench-") as scratch:
        path = Path(scratch) / "corpus.jsonl"
        result = run_fuzz(setup, examples, steps, seed, shrink=False, corpus=CorpusWriter(path))
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                count(decode_trace(json.loads(line)), counts)
    return result, counts
