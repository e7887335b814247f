"""What a hidden variable costs: the same traces checked with one variable left out.

    python -m kreplica.conformance.bench.hidden --traces 50 --steps 100
    python -m kreplica.conformance.bench.hidden --real build/campaign/final/traces

A trace may omit variables (leave them out of its `vars`); TLC then searches their values,
and the trace conforms if some behaviour consumes it whole. For each spec variable this
removes it from every trace of a random-walk corpus, checks the corpus in one TLC run, and
reports the states TLC explored per trace event (1.0 when every step is determined), the
seconds, and whether every trace still conforms.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from kreplica.conformance.errors import run_command
from kreplica.conformance.fuzz.random_walk import corpus
from kreplica.conformance.tla.itf import dumps_trace
from kreplica.conformance.tla.specs import default_spec_dir
from kreplica.conformance.tla.tlc import SHORT_RUN_JVM_FLAGS, TlcOptions, find_java
from kreplica.conformance.tla.vocabulary import VARIABLES
from kreplica.conformance.validate.tlcdata import build_reader
from kreplica.conformance.validate.tracecheck import SpecParams, full_prepare, run_batch
from kreplica.impl.variants import Variant

OBSERVABLE = ("log", "hw", "leaderEpoch", "leader", "alive")
"""What an outside observer sees of a broker: its log, HW and role (the last row)."""


def hide(text: str, hidden: tuple[str, ...]) -> str:
    """The trace without the `hidden` variables (in `vars` and in every state)."""
    data = json.loads(text)
    data["vars"] = [v for v in data["vars"] if v not in hidden]
    for state in data["states"]:
        for variable in hidden:
            state.pop(variable, None)
    return json.dumps(data)


def real_traces(paths: tuple[Path, ...]) -> list[str]:
    """The real Kafka traces (`kreplica kafka trace`) checked under the correct protocol."""
    found = []
    for path in paths:
        for file in sorted(path.glob("*.itf.json")) if path.is_dir() else [path]:
            text = file.read_text(encoding="utf-8")
            if json.loads(text)["#meta"].get("checked_as") == "correct":
                found.append(text)
    return found


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--traces", type=click.IntRange(min=1), default=50, show_default=True)
@click.option("--steps", type=click.IntRange(min=1), default=100, show_default=True)
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option(
    "--real",
    "real",
    multiple=True,
    type=click.Path(exists=True, path_type=Path),
    help="Real Kafka traces (files or directories of *.itf.json, from kreplica kafka trace) "
    "instead of random walks: those checked under the correct protocol, each of the variables "
    "they record hidden in turn.",
)
def main(traces: int, steps: int, seed: int, real: tuple[Path, ...]) -> None:
    """Check one corpus once with every variable and once per hidden variable."""
    params = SpecParams(fetch_max_records=1_000_000 if real else 2)
    options = TlcOptions(java=find_java(), time_limit=1800, jvm_flags=SHORT_RUN_JVM_FLAGS)
    reader = build_reader(java=options.java)
    spec: Path = default_spec_dir()
    if real:
        texts = real_traces(real)
        recorded = json.loads(texts[0])["vars"] if texts else []
        names = [v for v in VARIABLES if v in recorded]
    else:
        texts = [dumps_trace(t) for t in corpus(traces, steps, seed, Variant(), replicas=3)]
        names = list(VARIABLES)
    table = Table("hidden", "conform", "states / event", "seconds", title="cost of hiding")
    console = Console(highlight=False)
    rows: list[tuple[str, tuple[str, ...]]] = [("(none)", ())]
    rows += [(v, (v,)) for v in names]
    rows.append(
        ("all but " + ", ".join(OBSERVABLE), tuple(v for v in names if v not in OBSERVABLE))
    )
    for label, hidden in rows:
        batch = [full_prepare(f"t{i}", hide(t, hidden)) for i, t in enumerate(texts)]
        events = sum(p.events for p in batch) + len(batch)
        start = time.monotonic()
        result, printed = run_batch(batch, params, spec, options, False, reader)
        seconds = time.monotonic() - start
        states = result.distinct or 0
        table.add_row(label, f"{len(printed.conforms)}/{len(batch)}",
                      f"{states / events:.2f}", f"{seconds:.1f}")  # fmt: skip
        console.print(f"hidden {label}: {states} states, {seconds:.1f}s")
    console.print(table)


if __name__ == "__main__":
    run_command(main, "python -m kreplica.conformance.bench.hidden")
