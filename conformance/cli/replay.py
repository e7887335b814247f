"""`kreplica replay TRACE`: drive the implementation through a trace's actions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from kreplica.conformance.cli.console import console as make_console
from kreplica.conformance.errors import EXIT_OK, EXIT_UNEXPECTED, TraceError
from kreplica.conformance.fuzz.settle import replay_saved
from kreplica.conformance.replay.schedule import (
    Schedule,
    recorded_checks,
    same_failure,
    schedule_from_json,
)
from kreplica.conformance.replay.setups import choose_setup
from kreplica.conformance.replay.trace import (
    REPLAYABLE_ACTIONS,
    SPEC_ONLY_ACTIONS,
    ReplayResult,
    hidden_steps,
    replay_trace,
)
from kreplica.conformance.tla.itf import (
    ItfTrace,
    corpus_line,
    decode_trace,
    iter_jsonl_traces,
    printable,
    read_json,
    trace_on_line,
)
from kreplica.conformance.tla.specs import resolve_spec_dir
from kreplica.conformance.tla.vocabulary import VARIABLES
from kreplica.conformance.validate.shapes import ShapeError, check_shapes
from kreplica.conformance.validate.sources import CORPUS_SUFFIXES
from kreplica.impl.cluster import SimulationError

EXIT_CANNOT_REPLAY = 4
"""A step the implementation cannot take (a Restart of a running broker, ...): the trace or
schedule does not apply to it, which is no failure of the implementation."""

EPILOG = """\b
Exit codes:
  0  the implementation conforms: every step reproduced, every state equal
     (for a JSON-lines file or several traces: every one of them); a
     schedule shows the failure it recorded: the same invariant (an
     exception: its type and message; a liveness failure: its reason)
  1  it does not: the first step that differs is reported (a schedule:
     not the failure it recorded)
  2  bad input: a missing, truncated or non-ITF trace (or one nested too
     deeply), PATH:LINE naming no trace, an unknown action or variable, a
     value of another type than the spec's, an unknown variant or bug
  4  a step cannot be replayed: the implementation cannot take it (e.g. a
     Restart of a broker that is running, a delivery from an empty link: a
     schedule that no longer applies); the step and the reason are printed
"""


def check_vocabulary(trace: ItfTrace) -> None:
    """TraceError unless the trace uses only the spec's variables and actions (and the
    recorder's names for isr=alter-partition's ISR change, REPLAYABLE_ACTIONS)."""
    unknown = [v for v in trace.vars if v not in VARIABLES]
    if unknown:
        raise TraceError(f"unknown variable {unknown[0]!r}; the spec's are {', '.join(VARIABLES)}")
    for i, state in enumerate(trace.states):
        if i > 0 and state.action in SPEC_ONLY_ACTIONS:
            raise TraceError(
                f"state {i}: {state.action} is a spec action the implementation does not model "
                "(real Kafka traces only): the trace cannot be replayed"
            )
        if i > 0 and state.action not in REPLAYABLE_ACTIONS:
            raise TraceError(f"state {i}: unknown action {state.action!r}")
    try:  # a value of another type than the spec's is bad input, not a difference
        check_shapes(trace)
    except ShapeError as err:
        raise TraceError(str(err)) from None


def report(result: ReplayResult, console: Console) -> None:
    """Print the verdict, and where and how the implementation differs."""
    if result.conforms:
        console.print(
            f"conforms: {result.steps} steps reproduced, every state equal", soft_wrap=True
        )
        for name, reason in result.violations:
            console.print(f"the implementation breaks {name}: {reason}", soft_wrap=True)
        return
    if result.cannot_replay:
        console.print(
            f"cannot be replayed: step {result.step} ({result.action} {result.args}): "
            f"{result.reason}",
            soft_wrap=True,
        )
        return
    console.print(
        f"differs at step {result.step} ({result.action} {result.args}): {result.reason}",
        soft_wrap=True,
    )
    if result.differences:
        table = Table("variable", "trace (expected)", "implementation (got)")
        for d in result.differences:
            table.add_row(d.variable, _show(d.expected), _show(d.got))
        console.print(table)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 400 else text[:397] + "..."


def read_traces(text: str) -> tuple[list[tuple[str, ItfTrace]], Schedule | None]:
    """What TRACE names: an ITF file, every line of a JSON-lines file, one line of it
    (`PATH:LINE`, as `kreplica conform` prints trace ids), or a `*.schedule.json` file."""
    path = Path(text)
    line = corpus_line(text)
    if line is not None:
        return [trace_on_line(*line)], None
    if path.is_dir():
        raise TraceError(f"{printable(text)}: a directory; name a trace file")
    if path.name.endswith(CORPUS_SUFFIXES):
        traces = [(str(t.meta.get("id", "")) or "", t) for t in iter_jsonl_traces(path)]
        if not traces:
            raise TraceError(f"{printable(text)}: no traces in the file")
        return [(f"{printable(text)}:{n}", t) for n, (_, t) in _numbered(path, traces)], None
    obj = read_json(path)
    if isinstance(obj, dict) and obj.get("format") == "kreplica-schedule":
        return [], schedule_from_json(obj, printable(text))
    return [(printable(text), decode_trace(obj, printable(text)))], None


def _numbered(
    path: Path, traces: list[tuple[str, ItfTrace]]
) -> list[tuple[int, tuple[str, ItfTrace]]]:
    """Each trace with its line number (empty lines hold none)."""
    with path.open(encoding="utf-8") as handle:
        lines = [n for n, line in enumerate(handle, start=1) if line.strip()]
    return list(zip(lines, traces, strict=False))


def check_saved_schedule(schedule: Schedule, name: str, console: Console) -> int:
    """Run a saved schedule exactly, with the checks its campaign made (a liveness failure's
    with the settle phase after its steps): 0 if it shows the failure it recorded
    (`same_failure`: an exception of the same type and message), 1 if another, 4 if a step
    cannot be applied (the schedule no longer applies to the implementation)."""
    invariants, rules = recorded_checks(schedule, name)
    try:
        result = replay_saved(schedule, invariants=invariants, rules=rules)
    except SimulationError as exc:
        console.print(f"{name}: cannot be replayed: {exc}", soft_wrap=True)
        return EXIT_CANNOT_REPLAY
    shown = result.violation
    console.print(f"{name}: {result.steps_applied} of {len(schedule.steps)} impl steps replayed")
    if shown is not None:
        console.print(f"violation {shown[0]}: {shown[1]}", soft_wrap=True)
    else:
        console.print("no invariant failed")
    recorded = schedule.violation
    if same_failure(recorded, shown):
        console.print("the same as recorded" if recorded else "as recorded")
        return EXIT_OK
    console.print(
        f"recorded: {recorded[0] + ': ' + recorded[1] if recorded else 'no violation'}",
        soft_wrap=True,
    )
    return EXIT_UNEXPECTED


@click.command("replay", epilog=EPILOG)
@click.argument("trace_path", metavar="TRACE")
@click.option("--variant", "variants", multiple=True, help="NAME=VALUE (repeatable).")
@click.option("--bug", "bugs", multiple=True, help="A seeded bug (repeatable).")
@click.option("--spec-dir", type=click.Path(path_type=Path), help="Spec directory.")
def replay_command(
    trace_path: str, variants: tuple[str, ...], bugs: tuple[str, ...], spec_dir: Path | None
) -> int:
    """Replay TRACE's actions on the implementation, comparing every state.

    TRACE is an ITF file (a counterexample of `kreplica check`, a golden trace of traces/, a
    fuzz trace), a JSON-lines corpus (every line is replayed, one verdict line each, then a
    summary), one line of it as `PATH:LINE` (the ids `kreplica conform` prints), or a
    `*.schedule.json` that `kreplica fuzz` saved (its impl steps are run exactly, a liveness
    failure's with the settle phase after them, and the violation compared with the recorded
    one). Replicas and broker config come from the
    trace's config or its recorded #meta; the variant too, unless --variant/--bug is given.
    """
    console = make_console()
    traces, schedule = read_traces(trace_path)
    if schedule is not None:
        if variants or bugs:
            raise TraceError("--variant/--bug do not apply to a schedule: it records its variant")
        return check_saved_schedule(schedule, printable(trace_path), console)
    spec = resolve_spec_dir(spec_dir)
    checked = []
    for name, trace in traces:
        try:
            check_vocabulary(trace)
            hidden_steps(trace)
        except TraceError as err:
            raise TraceError(f"{name}: {err}") from None
        checked.append((name, trace, choose_setup(trace, spec, variants, bugs)))
    if len(checked) == 1:
        name, trace, setup = checked[0]
        result = replay_trace(trace, setup)
        report(result, console)
        return _code(result)
    codes = []
    for name, trace, setup in checked:
        result = replay_trace(trace, setup)
        codes.append(_code(result))
        console.print(f"{name}: ", end="", soft_wrap=True)
        report(result, console)
    counts = {code: codes.count(code) for code in (EXIT_OK, EXIT_UNEXPECTED, EXIT_CANNOT_REPLAY)}
    console.print(
        f"{len(codes)} traces: {counts[EXIT_OK]} conform, {counts[EXIT_UNEXPECTED]} differ, "
        f"{counts[EXIT_CANNOT_REPLAY]} cannot be replayed"
    )
    return max(codes, key=lambda c: (c == EXIT_CANNOT_REPLAY, c == EXIT_UNEXPECTED))


def _code(result: ReplayResult) -> int:
    if result.conforms:
        return EXIT_OK
    return EXIT_CANNOT_REPLAY if result.cannot_replay else EXIT_UNEXPECTED
