"""Random-walk trace corpora: many recorded runs of the implementation, fast, as JSON lines.

`kreplica fuzz --corpus` records the runs Hypothesis generates; this module is the cheap way
to a large corpus for conformance benchmarks: a seeded random walk over the fuzzer's own
step choices (`fuzz.CHOICES`), recorded by the same recorder, without checking invariants.
Each line is one ITF trace whose #meta carries its id, variant and broker configuration.
`corpus` yields the traces, `write_corpus` writes them; `kreplica walk` is the command:

    kreplica walk --traces 1000 --steps 100 --out corpus.jsonl
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import TextIO

from kreplica.conformance.bridge.projection import CLIENT
from kreplica.conformance.bridge.recorder import Recorder
from kreplica.conformance.errors import KreplicaError, file_error
from kreplica.conformance.fuzz.choices import CHOICES
from kreplica.conformance.fuzz.setup import BATCH_MAX_RECORDS, CONFIG, FETCH_MAX_RECORDS, TICK_MS
from kreplica.conformance.replay.trace import TP
from kreplica.conformance.tla.itf import ItfTrace, dumps_trace
from kreplica.impl.cluster import Cluster
from kreplica.impl.steps import Deliver, Tick
from kreplica.impl.variants import Variant

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


def write_corpus(
    out: Path,
    traces: int,
    steps: int,
    seed: int,
    variant: Variant,
    replicas: int,
    on_trace: Callable[[], None] = lambda: None,
) -> None:
    """Write the `corpus` to OUT, one compact JSON line per trace; `on_trace()` is told after
    each. OUT is opened before any trace is recorded; KreplicaError if it cannot be written."""
    handle = open_output(out)
    try:  # a full disk fails a write, or only the last flush on closing
        with handle:
            for trace in corpus(traces, steps, seed, variant, replicas):
                text = json.dumps(json.loads(dumps_trace(trace)), separators=(",", ":"))
                handle.write(text + "\n")
                on_trace()
    except OSError as err:
        raise file_error("write", out, err) from None


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
