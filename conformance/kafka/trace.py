"""`kreplica kafka trace`: real runs recorded by the agent, converted, checked against the spec.

Theory of operation. Each schedule runs on a real Kafka 2.6.3 cluster with the kreplica agent
in every broker (`real.run_schedule(agent=...)`); the brokers' event files and the harness's
faults (events.py) become one ITF trace (convert.py), written to `OUT/traces/NAME.itf.json`.
The traces are then checked by the engine of `kreplica conform` (Spark by default), one check
per variant of the spec: a schedule's producers' acks (-1, or 1 for the acks=1 variant) and
its unclean election setting choose it. A run directory that already holds a finished
recording (`DONE_MARKER`) is converted again, not run again, so a campaign stopped by a crash
or Ctrl-C goes on from where it was.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kreplica.conformance.kafka.convert import convert, to_itf
from kreplica.conformance.kafka.events import read_run
from kreplica.conformance.kafka.install import CHECKOUT, EnvironmentProblem
from kreplica.conformance.kafka.schedule import Schedule
from kreplica.conformance.tla.itf import write_text_atomic

AGENT_JAR = CHECKOUT / "build" / "kafka" / "agent" / "kreplica-agent.jar"
"""The agent `make kafka` builds (override: --agent or KREPLICA_AGENT)."""

DONE_MARKER = ".kreplica-trace-done"
"""Written into a run directory once its run ended and its event files are complete."""


@dataclass(frozen=True)
class Traced:
    """One schedule's recording: where it ran, its trace, and the variant it is checked under."""

    schedule: str
    run_dir: Path
    trace: Path | None
    variant: tuple[str, ...]
    """`--variant` arguments (empty: the correct protocol)."""
    steps: int = 0
    events: int = 0
    seconds: float = 0.0
    notes: tuple[str, ...] = ()
    error: str | None = None
    bad_input: bool = False
    """The error is the recording's (an event file that cannot be read or converted), not the
    run's (a node that did not start)."""
    skipped: dict[str, int] = field(default_factory=dict)


def find_agent(path: Path | None) -> Path:
    """The agent jar: --agent, else KREPLICA_AGENT, else what `make kafka` built."""
    chosen = path or (
        Path(os.environ["KREPLICA_AGENT"]) if "KREPLICA_AGENT" in os.environ else AGENT_JAR
    )
    if not chosen.is_file():
        raise EnvironmentProblem(f"no kreplica agent at {chosen}: 'make kafka' builds it")
    return chosen.absolute()


def variant_of(schedule: Schedule) -> tuple[str, ...]:
    """The spec variant a schedule's run is a behaviour of: the acks=1 variant (producers may
    ask for acks=-1 or acks=1, per request) if any of its producers uses acks=1, else the
    correct protocol's; and its election."""
    acks = {
        s.acks if s.acks is not None else schedule.acks for s in schedule.steps if s.op == "produce"
    }
    args: list[str] = ["acks=1"] if 1 in acks else []
    if schedule.unclean:
        args.append("election=unclean")
    return tuple(args)


def label(variant: tuple[str, ...]) -> str:
    """A variant as a name for files: `correct`, `acks=1`, `acks=1,election=unclean`."""
    return ",".join(variant) or "correct"


def trace_run(run_dir: Path, schedule: Schedule, out: Path, seconds: float = 0.0) -> Traced:
    """Convert a finished run's recording into OUT/traces/NAME.itf.json."""
    recording = read_run(run_dir)
    conversion = convert(recording, schedule.min_insync_replicas)
    variant = variant_of(schedule)
    meta = {
        "description": f"real Kafka 2.6.3 run of schedule {schedule.name}",
        "schedule": schedule.name,
        "checked_as": label(variant),
        "run": run_dir.name,
        "events": len(recording.events),
        "ties": recording.ties,
        "skipped": conversion.skipped,
        "notes": conversion.notes,
    }
    path = out / "traces" / f"{schedule.name}.itf.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(to_itf(conversion, meta)) + "\n")
    return Traced(
        schedule.name,
        run_dir,
        path,
        variant,
        steps=len(conversion.steps),
        events=len(recording.events),
        seconds=seconds,
        notes=tuple(conversion.notes) + tuple(recording.agent_errors),
        skipped=dict(conversion.skipped),
    )


def groups(traced: Sequence[Traced]) -> dict[tuple[str, ...], list[Traced]]:
    """The traces to check, by the variant each is checked under."""
    found: dict[tuple[str, ...], list[Traced]] = {}
    for t in traced:
        if t.trace is not None:
            found.setdefault(t.variant, []).append(t)
    return found


def state_source(trace: Path, step: int | None) -> str:
    """The broker event behind a step of a trace (`#meta.source`), for reports."""
    if step is None:
        return ""
    try:
        states = json.loads(trace.read_text(encoding="utf-8"))["states"]
        return str(states[step]["#meta"].get("source", ""))
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return ""


def rows_of(results: Path) -> list[dict[str, Any]]:
    """The result rows of one conform run (results.json, JSON lines)."""
    if not results.exists():
        return []
    return [json.loads(line) for line in results.read_text(encoding="utf-8").splitlines() if line]
