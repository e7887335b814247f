"""Which cluster a recorded trace replays on: its model config's, what its #meta records, or
its size; and the variant, from the trace or from the caller.

Theory of operation. A TLC counterexample names its model config (`#meta.config`), whose
constants give the replicas, the broker config and the variant (`replay.setup_from_config`).
A run that kreplica recorded (`kreplica fuzz`, a random walk) carries its set-up in `#meta`:
replicas, min.insync.replicas, the fetch and batch sizes, and its variant in one of three
forms (`recorded_setup`). Anything else replays on the correct protocol with as many replicas
as its first state has logs. A variant given by the caller replaces the trace's, and keeps the
rest of its set-up (`choose_setup`).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from kreplica.conformance.errors import TraceError
from kreplica.conformance.replay.schedule import variant_from_json
from kreplica.conformance.replay.trace import PRODUCE_TIMEOUT_MS, Setup, setup_from_config
from kreplica.conformance.tla.itf import ItfTrace, printable
from kreplica.impl.variants import Variant, VariantError, parse_variant


def choose_setup(
    trace: ItfTrace, spec_dir: Path, variants: tuple[str, ...], bugs: tuple[str, ...]
) -> Setup:
    """The cluster to replay on. Replicas and broker config: the trace's model config, else
    what its #meta records (`kreplica fuzz`, random walks), else the trace's size. Variant:
    --variant/--bug if given (the rest of the set-up is kept), else the config's or the
    recorded one, else the correct protocol."""
    config = trace.meta.get("config")
    base: Setup | None = None
    if isinstance(config, str) and (spec_dir / f"{config}.cfg").is_file():
        base = setup_from_config(spec_dir / f"{config}.cfg")
    elif any(key in trace.meta for key in RECORDED):
        base = recorded_setup(trace)
    if base is None:
        logs = trace.states[0].values.get("log")
        base = Setup(replicas=len(logs) if isinstance(logs, tuple) and logs else 3)
    if not variants and not bugs:
        return base
    try:
        variant = parse_variant(variants, bugs)
    except VariantError as exc:
        raise TraceError(str(exc)) from None
    return replace(base, variant=variant)


RECORDED_PRODUCE_TIMEOUT_MS = PRODUCE_TIMEOUT_MS
"""The produce timeout a recorded run is replayed with."""

RECORDED = ("replicas", "min_insync_replicas", "fetch_max_records")
"""The set-up a recorded trace's #meta holds beside its variant."""


def recorded_setup(trace: ItfTrace) -> Setup:
    """The set-up in a recorded trace's #meta: a saved failure's `variant` object, a corpus
    trace's `dimensions` and `bugs`, or a random walk's variant label; its replicas and
    broker config."""
    meta = trace.meta
    recorded = meta.get("variant")
    if isinstance(recorded, dict):
        variant = variant_from_json(recorded, "#meta.variant")
    elif "dimensions" in meta or "bugs" in meta:
        obj = {"dimensions": meta.get("dimensions", {}), "bugs": meta.get("bugs", [])}
        variant = variant_from_json(obj, "#meta")
    elif isinstance(recorded, str):
        variant = variant_from_label(recorded)
    else:
        variant = Variant()
    numbers: dict[str, int] = {}
    for key in RECORDED:
        value = meta.get(key)
        numbers[key] = value if isinstance(value, int) and value > 0 else 0
    if not all(numbers.values()):
        raise TraceError(
            "a recorded trace must hold replicas, min_insync_replicas and fetch_max_records "
            "in #meta as positive integers"
        )
    batch = meta.get("batch_max_records")  # recorded since 2026-11-26
    local = meta.get("local_records")  # recorded since 2026-11-27: local_partitions
    return Setup(
        replicas=numbers["replicas"],
        variant=variant,
        min_insync_replicas=numbers["min_insync_replicas"],
        fetch_max_records=numbers["fetch_max_records"],
        batch_max_records=batch if isinstance(batch, int) and batch > 0 else None,
        local_records=local if isinstance(local, int) and local > 0 else 0,
        produce_timeout_ms=RECORDED_PRODUCE_TIMEOUT_MS,
    )


def variant_from_label(label: str) -> Variant:
    """A variant from its label (`Variant.label`): 'default', 'truncation=hw,bug=early-ack'."""
    words = [w for w in label.split(",") if w and w != "default"]
    bugs = [w.partition("=")[2] for w in words if w.startswith("bug=")]
    try:
        return parse_variant([w for w in words if not w.startswith("bug=")], bugs)
    except VariantError as exc:
        raise TraceError(f"#meta.variant {printable(label)!r}: {exc}") from None
