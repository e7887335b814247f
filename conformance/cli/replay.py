"""`kreplica replay TRACE`: drive the implementation through a trace's actions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from kreplica.conformance.bridge.replay import (
    SPEC_ACTIONS,
    ReplayResult,
    Setup,
    replay,
    setup_from_config,
)
from kreplica.conformance.bridge.schedule import variant_from_json
from kreplica.conformance.cli.console import console as make_console
from kreplica.conformance.errors import EXIT_OK, EXIT_UNEXPECTED, TraceError
from kreplica.conformance.tla.itf import ItfTrace, printable, read_trace
from kreplica.conformance.tla.specs import resolve_spec_dir
from kreplica.conformance.tla.vocabulary import VARIABLES
from kreplica.conformance.validate.shapes import ShapeError, check_shapes
from kreplica.impl.variants import VariantError, parse_variant

EPILOG = """\b
Exit codes:
  0  the implementation conforms: every step reproduced, every state equal
  1  it does not: the first step that differs is reported
  2  bad input: a missing, truncated or non-ITF trace (or one nested too
     deeply), an unknown action or variable, a value of another type than the
     spec's, an unknown variant or bug
"""


def check_vocabulary(trace: ItfTrace) -> None:
    """TraceError unless the trace uses only the spec's variables and actions."""
    unknown = [v for v in trace.vars if v not in VARIABLES]
    if unknown:
        raise TraceError(f"unknown variable {unknown[0]!r}; the spec's are {', '.join(VARIABLES)}")
    for i, state in enumerate(trace.states):
        if i > 0 and state.action not in SPEC_ACTIONS:
            raise TraceError(f"state {i}: unknown action {state.action!r}")
    try:  # a value of another type than the spec's is bad input, not a difference
        check_shapes(trace)
    except ShapeError as err:
        raise TraceError(str(err)) from None


def choose_setup(
    trace: ItfTrace, spec_dir: Path, variants: tuple[str, ...], bugs: tuple[str, ...]
) -> Setup:
    """The cluster to replay on: the options, else the trace's config, else the set-up a fuzz
    trace records, else the correct protocol on the trace's size."""
    config = trace.meta.get("config")
    if not variants and not bugs and isinstance(config, str):
        path = spec_dir / f"{config}.cfg"
        if path.is_file():
            return setup_from_config(path)
    if not variants and not bugs and trace.meta.get("source") == "kreplica fuzz":
        return _fuzz_setup(trace)
    try:
        variant = parse_variant(variants, bugs)
    except VariantError as exc:
        raise TraceError(str(exc)) from None
    logs = trace.states[0].values.get("log")
    replicas = len(logs) if isinstance(logs, tuple) and logs else 3
    return Setup(replicas=replicas, variant=variant)


def _fuzz_setup(trace: ItfTrace) -> Setup:
    """The set-up in a `kreplica fuzz` trace's #meta: a saved failure's `variant` object, or a
    corpus trace's `dimensions` and `bugs`; its replicas and broker config."""
    meta = trace.meta
    recorded = meta.get("variant")
    if not isinstance(recorded, dict):
        recorded = {"dimensions": meta.get("dimensions", {}), "bugs": meta.get("bugs", [])}
    variant = variant_from_json(recorded, "#meta.variant")
    numbers: dict[str, int] = {}
    for key in ("replicas", "min_insync_replicas", "fetch_max_records"):
        value = meta.get(key)
        numbers[key] = value if isinstance(value, int) and value > 0 else 0
    if not all(numbers.values()):
        raise TraceError("a kreplica fuzz trace must record replicas, min_insync_replicas and "
                         "fetch_max_records in #meta as positive integers")  # fmt: skip
    return Setup(
        replicas=numbers["replicas"],
        variant=variant,
        min_insync_replicas=numbers["min_insync_replicas"],
        fetch_max_records=numbers["fetch_max_records"],
    )


def report(result: ReplayResult, console: Console) -> None:
    """Print the verdict, and where and how the implementation differs."""
    if result.conforms:
        console.print(f"conforms: {result.steps} steps reproduced, every state equal")
        for name, reason in result.violations:
            console.print(f"the implementation breaks {name}: {reason}")
        return
    console.print(f"differs at step {result.step} ({result.action} {result.args}): {result.reason}")
    if result.differences:
        table = Table("variable", "trace (expected)", "implementation (got)")
        for d in result.differences:
            table.add_row(d.variable, _show(d.expected), _show(d.got))
        console.print(table)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 400 else text[:397] + "..."


@click.command("replay", epilog=EPILOG)
@click.argument("trace_path", metavar="TRACE", type=click.Path(path_type=Path))
@click.option("--variant", "variants", multiple=True, help="NAME=VALUE (repeatable).")
@click.option("--bug", "bugs", multiple=True, help="A seeded bug (repeatable).")
@click.option("--spec-dir", type=click.Path(path_type=Path), help="Spec directory.")
def replay_command(
    trace_path: Path, variants: tuple[str, ...], bugs: tuple[str, ...], spec_dir: Path | None
) -> int:
    """Replay TRACE's actions on the implementation, comparing every state.

    TRACE is an ITF file: a counterexample of `kreplica check` (its config gives the variant),
    a golden trace of traces/, or a fuzz trace. Without --variant/--bug the variant is read
    from the trace's config, or from the set-up a fuzz trace records, else the correct
    protocol is used.
    """
    trace = read_trace(trace_path)
    try:
        check_vocabulary(trace)
    except TraceError as err:
        raise TraceError(f"{printable(str(trace_path))}: {err}") from None
    setup = choose_setup(trace, resolve_spec_dir(spec_dir), variants, bugs)
    result = replay(trace, setup)
    report(result, make_console())
    return EXIT_OK if result.conforms else EXIT_UNEXPECTED
