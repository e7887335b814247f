"""What a hidden variable costs: the same traces checked with one variable left out.

    kreplica bench hidden --traces 50 --steps 100
    kreplica bench hidden --real build/campaign/final/traces

A trace may omit variables (leave them out of its `vars`); TLC then searches their values,
and the trace conforms if some behaviour consumes it whole. For each spec variable this
removes it from every trace of a random-walk corpus, checks the corpus in one TLC run, and
reports the states TLC explored per trace event (1.0 when every step is determined), the
seconds, and whether every trace still conforms. `hidden_costs` is the engine; `kreplica bench
hidden` prints each cost as it comes, then the table.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

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


@dataclass(frozen=True)
class HiddenCost:
    """One TLC run over the corpus with the `label` variables hidden."""

    label: str
    conforming: int
    traces: int
    states: int
    """Distinct states TLC explored."""
    events: int
    """Trace events, and one initial state per trace."""
    seconds: float

    @property
    def states_per_event(self) -> float:
        """States TLC explored per trace event (1.0: every step determined)."""
        return self.states / self.events if self.events else 0.0


def hidden_costs(
    traces: int, steps: int, seed: int, real: tuple[Path, ...] = ()
) -> Iterator[HiddenCost]:
    """Check one corpus once with every variable, once per hidden variable, and once with all
    but `OBSERVABLE` hidden; one cost per check, as each ends. The corpus is `traces` random
    walks of `steps` steps from `seed`, or the real Kafka traces under `real`."""
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
        yield HiddenCost(
            label, len(printed.conforms), len(batch), result.distinct or 0, events, seconds
        )
