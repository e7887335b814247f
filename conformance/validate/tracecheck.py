"""Trace validation with TLC: does a recorded trace conform to spec/KafkaReplication.tla?

A batch of traces becomes one generated module (`TraceData.tla`, in a temporary directory,
never in spec/) that defines `TraceLog` for spec/KafkaReplicationTrace.tla, and one TLC run
checks them all: TLC prints the number of every trace whose last event it reaches. Traces it
does not print are run again, in one diagnostic TLC run (a batch of one trace has only that
run), which prints every step reached and every successor of the logged action that does not
agree with the trace; from those this module pinpoints the first step no spec action explains
and the variables that differ.
Traces that begin alike are walked together as far as they agree, and what TLC printed of such
an event is said of each of them (`per_trace`, `prefixes`).

With invariants (`SpecParams.invariants`, `--invariant`), a state that breaks one ends its
branch too, and the diagnostic run also prints where; `invariants` holds the rule that tells
an invariant's violation from a step no action explains.

Every input gets exactly one `TraceResult`: conforms, violates, or error (malformed input,
unknown names, TLC crashed or timed out).

Why one module of about 860 lines (over the house's 600): its four sections (reading and
rendering, the TLC run, the diagnosis, the whole check) are one pipeline over `Prepared` and
`Printed`, and the rule that every input gets one row of its own runs through all four. The
first section, which depends on nothing below it, is the one to move out when it grows (what
invariants need without TLC already lives in `invariants`).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from kreplica.conformance.errors import KreplicaError, TraceError
from kreplica.conformance.tla.itf import ItfTrace, decode_trace, loads_json, printable, to_itf
from kreplica.conformance.tla.tlavalue import Value, format_value, parse_value
from kreplica.conformance.tla.tlc import SHORT_RUN_JVM_FLAGS, TlcOptions, run_tlc
from kreplica.conformance.tla.tlc_output import TlcResult, Verdict
from kreplica.conformance.tla.vocabulary import (
    ACTION_ARGS,
    IMPL_ONLY_ACTIONS,
    INIT_ACTION,
    VARIABLES,
)
from kreplica.conformance.validate import invariants, prefixes, tlcdata
from kreplica.conformance.validate.shapes import ShapeError, check_shapes
from kreplica.conformance.validate.sources import UNREADABLE, recorded_variant, variant_note
from kreplica.conformance.validate.trace_events import hidden, trace_events
from kreplica.impl.variants import Variant, VariantError, not_in_spec, parse_variant

TRACE_MODULE = "KafkaReplicationTrace"
SPEC_MODULE = "KafkaReplication"
DATA_MODULE = "TraceData"
SPEC_MODULES = (SPEC_MODULE, TRACE_MODULE, tlcdata.AGREEMENT_MODULE)
"""The modules of spec/ a batch is checked with (TraceData is written per batch)."""
UNBOUNDED = 1_000_000
"""The spec's search bounds (records, epochs, crashes) do not limit a trace."""

CONFORMS, VIOLATES, ERROR = "conforms", "violates", "error"


@dataclass
class TraceResult:
    """The verdict on one trace, with the pinpointed step when it does not conform."""

    trace_id: str
    verdict: str
    events: int = 0
    step: int | None = None
    action: str | None = None
    args: str | None = None
    variables: list[str] = field(default_factory=list)
    diff: str | None = None
    reason: str = ""
    seconds: float = 0.0
    note: str = ""
    """Said of a trace that is checked all the same: recorded under another variant than the
    one it is checked against (`sources.variant_note`)."""
    why_line: int | None = None
    """Of a rejected step: the line in spec/KafkaReplication.tla of the conjunct of the logged
    action that is false (`why`), when it was looked for and found."""
    why: str = ""
    """That conjunct's text."""
    why_values: str = ""
    """The values of the names it mentions: a JSON object, name to TLA+ value."""
    invariant: str = ""
    """Of a trace that is a behaviour of the spec as far as `step` but cannot take that step
    without breaking an invariant it is checked against (`SpecParams.invariants`): the names
    of those it breaks there, comma-separated; "" otherwise."""

    def row(self) -> dict[str, Any]:
        """A plain dict (one result row)."""
        return asdict(self)


@dataclass(frozen=True)
class SpecParams:
    """The spec's constants a batch is checked against; the replicas come from each trace,
    and so does min.insync.replicas where its #meta records it (`min_isr_of`)."""

    variant: Variant = field(default_factory=Variant)
    min_insync_replicas: int = 1
    fetch_max_records: int = 1_048_576
    lossy_network: bool = True
    duplicating_network: bool = True
    fire_and_forget: bool = True
    record_deletion: bool = True
    log_dir_failures: bool = True
    controlled_shutdowns: bool = True
    deposed_leader_hw_race: bool = True
    invariants: tuple[str, ...] = ()
    """The spec's state predicates every state of a trace must satisfy (`--invariant`), by
    name (`invariant_names`); none: the trace is checked as a behaviour only."""
    as_recorded: bool = False
    """Check each trace under the variant and bugs its #meta records (`variant_for`), and one
    that records none under `variant` (`kreplica conform --as-recorded`)."""


UNKNOWN = -1
"""The events of a trace not decoded here: the Java reader counts them."""


@dataclass
class Prepared:
    """A trace ready for TLC: its id, its number of replicas, its ITF JSON text, and its
    events and decoded trace, both made only when needed (see `prepare`); the
    min.insync.replicas it was recorded with, if its #meta says (`min_isr_of`)."""

    trace_id: str
    replicas: int
    events: int
    text: str
    decoded: ItfTrace | None = None
    min_isr: int | None = None

    @property
    def trace(self) -> ItfTrace:
        """The decoded trace (for the TLA+ rendering and for diagnosis)."""
        if self.decoded is None:
            self.decoded = load(self.trace_id, self.text)
        return self.decoded


class TraceInputError(KreplicaError):
    """A trace that cannot be checked: malformed, or naming something the spec does not have;
    with the step and the variable, when the problem is in one."""

    def __init__(
        self, message: str, step: int | None = None, variables: Sequence[str] = ()
    ) -> None:
        """The message, and where in the trace, when known."""
        super().__init__(message)
        self.step = step
        self.variables = list(variables)


# ---------------------------------------------------------------- reading and rendering


def load(trace_id: str, text: str) -> ItfTrace:
    """Decode one ITF trace from JSON text (TraceError on malformed input; TraceInputError,
    with the step and the variable, when the JSON is malformed inside a state's variable)."""
    try:
        obj = loads_json(text, trace_id)
    except TraceError as err:
        step, variable = _malformed_at(text)
        if step is None:
            raise
        where = f"step {step}" + (f", variable {variable!r}" if variable else "")
        raise TraceInputError(f"{err} ({where})", step, [variable] if variable else []) from None
    return decode_trace(obj, trace_id)


_STATE_INDEX = re.compile(r'"#meta"\s*:\s*\{\s*"index"\s*:\s*([0-9]+)')
_VARIABLE_KEY = re.compile(r'"(' + "|".join(VARIABLES) + r')"\s*:')


def _malformed_at(text: str) -> tuple[int | None, str | None]:
    """Where malformed JSON text goes wrong, when it does so in a state written as ours are
    (`#meta` with its index first): the step, and the variable whose value holds the spot
    (None when it is in the #meta); (None, None) when that cannot be told."""
    try:
        json.loads(text)
    except json.JSONDecodeError as err:
        head = text[: err.pos]
    except (RecursionError, ValueError):
        return None, None
    else:
        return None, None
    states = list(_STATE_INDEX.finditer(head))
    if not states:
        return None, None
    last = states[-1]
    keys = list(_VARIABLE_KEY.finditer(head, last.end()))
    return int(last.group(1)), keys[-1].group(1) if keys else None


def variant_for(text: str, params: SpecParams) -> Variant:
    """The variant a trace is checked under: `params.variant`, or with `params.as_recorded`
    the one its #meta records (`sources.recorded_variant`), if it records one.
    TraceInputError for a recorded variant the registry does not know or the spec does not
    model (isr=alter-partition: there is nothing to check its steps against)."""
    label = recorded_variant(text) if params.as_recorded else None
    if label is None:
        return params.variant
    words = [w for w in label.split(",") if w and w != "default"]
    bugs = [w.removeprefix("bug=") for w in words if w.startswith("bug=")]
    try:
        variant = parse_variant([w for w in words if not w.startswith("bug=")], bugs)
    except VariantError as err:
        raise TraceInputError(f"recorded variant {printable(label)}: {err}") from None
    unmodelled = not_in_spec(variant)
    if unmodelled:
        raise TraceInputError(
            f"recorded under {', '.join(unmodelled)}, which the spec does not model: there is "
            "nothing to check it against"
        )
    return variant


def _check_vocabulary(trace: ItfTrace, trace_id: str) -> None:
    """Every variable, action and argument the trace names is the spec's."""
    unknown = [v for v in trace.vars if v not in VARIABLES]
    if unknown:
        raise TraceInputError(f"{trace_id}: unknown variable {unknown[0]!r}")
    if not trace.states:
        raise TraceInputError(f"{trace_id}: the trace has no states")
    for index, state in enumerate(trace.states[1:], start=1):
        if state.action in IMPL_ONLY_ACTIONS:
            raise TraceInputError(
                f"{trace_id}: step {index}: {state.action} is a step of "
                f"{IMPL_ONLY_ACTIONS[state.action]}, which the spec does not model",
                index,
            )
        if state.action not in ACTION_ARGS:
            raise TraceInputError(
                f"{trace_id}: step {index}: unknown action {state.action!r}", index
            )
        if set(state.args) != ACTION_ARGS[state.action]:
            expected = ", ".join(sorted(ACTION_ARGS[state.action]))
            raise TraceInputError(
                f"{trace_id}: step {index}: {state.action} takes arguments {expected}, "
                f"got {', '.join(sorted(state.args)) or 'none'}",
                index,
            )
    try:
        check_shapes(trace)
    except ShapeError as err:
        where = [err.name] if err.name else []
        raise TraceInputError(f"{trace_id}: {err}", err.step, where) from None


def replicas_of(trace: ItfTrace) -> int:
    """The number of replicas: the length of a per-replica variable in the first state."""
    for name in ("hw", "log", "leader", "alive"):
        value = trace.states[0].values.get(name)
        if isinstance(value, tuple | frozenset):
            if not value:
                raise TraceInputError(f"step 0: variable {name!r} is empty: no replicas", 0, [name])
            return len(value)
    raise TraceInputError("cannot tell the number of replicas: no hw, log, leader or alive")


def _record(fields: Mapping[str, Value]) -> str:
    """A TLA+ record of already-valued fields (`<<>>` when empty)."""
    if not fields:
        return "<<>>"
    return "[" + ", ".join(f"{k} |-> {format_value(v)}" for k, v in fields.items()) + "]"


def render(trace: ItfTrace) -> str:
    """The trace as a TLA+ record [hidden, events], each event keeping only what changed."""
    names = "{" + ", ".join(f'"{v}"' for v in hidden(trace)) + "}"
    events: list[str] = []
    for event in trace_events(trace):
        parts = [
            f'e |-> "{event.action}"',
            f"a |-> {_record(event.args)}",
            f"v |-> {_record(event.changed)}",
        ]
        if event.missing:
            parts.append("o |-> {" + ", ".join(f'"{v}"' for v in event.missing) + "}")
        events.append("[" + ", ".join(parts) + "]")
    return f"[hidden |-> {names}, events |-> <<\n  " + ",\n  ".join(events) + ">>]"


def prepare(trace_id: str, text: str, fast: bool = False) -> Prepared:
    """Read one trace and check its names (TraceError/TraceInputError if bad).

    `fast` (for the Java reader): leave the JSON to the reader, which decodes it, checks its
    names and counts its events much faster than Python; only the number of replicas is read
    here, from the first state's `hw`. A trace the reader refuses is read here again
    (`full_prepare`), for the precise complaint.

    Text that `sources` could not read (not UTF-8, an I/O error) is refused here, saying why."""
    if text.startswith(UNREADABLE):
        raise TraceInputError(f"{trace_id}: {text[len(UNREADABLE) :]}")
    if fast:
        replicas = _replicas_in_text(text)
        if replicas is not None:
            return Prepared(trace_id, replicas, UNKNOWN, text, min_isr=_min_isr_in_text(text))
    return full_prepare(trace_id, text)


def full_prepare(trace_id: str, text: str) -> Prepared:
    """`prepare`, decoding the whole trace in Python."""
    if text.startswith(UNREADABLE):
        raise TraceInputError(f"{trace_id}: {text[len(UNREADABLE) :]}")
    trace = load(trace_id, text)
    _check_vocabulary(trace, trace_id)
    try:
        replicas = replicas_of(trace)
    except TraceInputError as err:
        raise TraceInputError(f"{trace_id}: {err}", err.step, err.variables) from None
    min_isr = min_isr_of(trace.meta)
    return Prepared(trace_id, replicas, len(trace.states) - 1, text, trace, min_isr)


MIN_ISR_KEY = "min_insync_replicas"
"""The #meta key of the min.insync.replicas a trace was recorded with."""


def min_isr_of(meta: dict[str, Any]) -> int | None:
    """The min.insync.replicas a trace's #meta says it was recorded with (`kreplica fuzz`
    writes it, one value per run), or None: it does not say, or says something else than
    a positive integer."""
    value = meta.get(MIN_ISR_KEY)
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
    return value if ok else None


_FIRST_HW = re.compile(r'"hw"\s*:\s*\[([-0-9,\s]*)\]')
_MIN_ISR = re.compile(r'"' + MIN_ISR_KEY + r'"\s*:\s*([0-9]+)\s*[,}]')


def _min_isr_in_text(text: str) -> int | None:
    """`min_isr_of` the trace's #meta, read from the JSON text without decoding it: the key
    is no spec variable's, and a string holding it escapes its quotes."""
    found = _MIN_ISR.search(text)
    return None if found is None else min_isr_of({MIN_ISR_KEY: int(found.group(1))})


def kind_of(head: str, min_isr: int) -> tuple[int, int] | None:
    """What a trace's TLC run is fixed to, read from the first bytes of its text: its number of
    replicas and its min.insync.replicas (`min_isr` where its #meta records none), as
    `check_texts` groups traces; None when the head does not tell."""
    replicas = _replicas_in_text(head)
    if replicas is None:
        return None
    found = _min_isr_in_text(head)
    return replicas, min_isr if found is None else found


def _replicas_in_text(text: str) -> int | None:
    """The length of the first `hw` in the JSON text (a list of integers), or None."""
    found = _FIRST_HW.search(text)
    if found is None or not found.group(1).strip():
        return None
    return found.group(1).count(",") + 1


# ---------------------------------------------------------------- the TLC run


def _tla_bool(value: bool) -> str:
    """A Python boolean as a TLA+ one."""
    return "TRUE" if value else "FALSE"


def tlc_config(params: SpecParams, replicas: int, diagnose: bool) -> str:
    """The TLC config of a batch."""
    v = params.variant
    bugs = "{" + ", ".join(f'"{b}"' for b in sorted(v.bugs)) + "}"
    return "\n".join(
        [
            "CONSTANTS",
            f"    Replicas = {{{', '.join(str(r) for r in range(1, replicas + 1))}}}",
            f"    MaxRecords = {UNBOUNDED}",
            f"    MaxEpoch = {UNBOUNDED}",
            f"    MaxCrashes = {UNBOUNDED}",
            f"    MaxUncleanShutdowns = {UNBOUNDED}",
            f"    MaxFetchRecords = {params.fetch_max_records}",
            f"    MinIsr = {params.min_insync_replicas}",
            f'    Truncation = "{v.truncation}"',
            f'    Election = "{v.election}"',
            f'    Acks = "{v.acks}"',
            f'    Fencing = "{v.fencing}"',
            f"    Bugs = {bugs}",
            f"    LossyNetwork = {_tla_bool(params.lossy_network)}",
            f"    DuplicatingNetwork = {_tla_bool(params.duplicating_network)}",
            f"    FireAndForget = {_tla_bool(params.fire_and_forget)}",
            f"    RecordDeletion = {_tla_bool(params.record_deletion)}",
            f"    LogDirFailures = {_tla_bool(params.log_dir_failures)}",
            f"    ControlledShutdowns = {_tla_bool(params.controlled_shutdowns)}",
            f"    DeposedLeaderHwRace = {_tla_bool(params.deposed_leader_hw_race)}",
            f"    Diagnose = {_tla_bool(diagnose)}",
            *invariants.config_lines(params.invariants),
            "INIT TraceInit",
            "NEXT TraceNext",
            "VIEW TraceView",
            "",
        ]
    )


def invariant_names(spec_dir: Path) -> list[str]:
    """The state predicates of the spec a trace can be checked against (`--invariant`)."""
    return invariants.names_in((spec_dir / f"{TRACE_MODULE}.tla").read_text(encoding="utf-8"))


def write_batch(
    workdir: Path, spec_dir: Path, traces: Sequence[Prepared], reader: Path | None = None
) -> Path:
    """Copy the spec and write the batch's TraceData: as binary data for the Java reader
    (`reader`, its compiled classes; see tlcdata) or as a TLA+ module. Return the spec's path."""
    for name in SPEC_MODULES:
        shutil.copyfile(spec_dir / f"{name}.tla", workdir / f"{name}.tla")
    if reader is not None:
        blobs = [tlcdata.json_blob(p.text) for p in traces]
        tlcdata.install_blobs(workdir, blobs, reader, shapes=True)
        return workdir / f"{TRACE_MODULE}.tla"
    body = ",\n".join(render(p.trace) for p in traces)
    (workdir / f"{DATA_MODULE}.tla").write_text(
        f"---- MODULE {DATA_MODULE} ----\nEXTENDS Integers, Sequences\n\n"
        f"TraceLog == <<\n{body}\n>>\n====\n",
        encoding="utf-8",
    )
    return workdir / f"{TRACE_MODULE}.tla"


_PRINT_START = re.compile(r'^<<\s*"kreplica-')
_PRINT_NUMBERS = re.compile(r'<<"(kreplica-[a-z]+)", (\d+)(?:, (\d+))?(?:, (\d+))?>>')
"""The common short lines (a trace's events, its verdict), read without the TLA+ parser."""


def printed_values(output: str) -> Iterable[Value]:
    """The values the trace spec printed (TLC pretty-prints long ones over several lines)."""
    lines = output.splitlines()
    i = 0
    while i < len(lines):
        if _PRINT_START.match(lines[i]):
            j = i + 1
            while j < len(lines) and lines[j][:1] == " ":
                j += 1
            short = _PRINT_NUMBERS.fullmatch(lines[i]) if j == i + 1 else None
            if short:
                kind, *numbers = short.groups()
                yield (kind, *(int(n) for n in numbers if n is not None))
            else:
                yield parse_value("\n".join(lines[i:j]))
            i = j
        else:
            i += 1


@dataclass
class Printed:
    """What the trace spec printed, by trace number (1-based, in batch order)."""

    conforms: set[int] = field(default_factory=set)
    reached: dict[int, int] = field(default_factory=dict)
    mismatches: dict[tuple[int, int], list[Value]] = field(default_factory=dict)
    init_mismatches: dict[int, list[Value]] = field(default_factory=dict)
    events: dict[int, int] = field(default_factory=dict)
    """Events of each trace, as the Java reader counted them."""
    invalid: dict[int, str] = field(default_factory=dict)
    """Traces the Java reader refused, and why."""
    invariants: dict[tuple[int, int], set[str]] = field(default_factory=dict)
    """(trace, step): the invariants false in a state the logged action led to there from a
    state in which they all held (a diagnostic run with invariants)."""
    shares: dict[int, tuple[int, int]] = field(default_factory=dict)
    """Traces whose first events TLC walked in an earlier trace: (that trace, how many), as
    the Java reader printed them (`prefixes`); empty once `per_trace` has said every fact of
    each trace."""
    ends: set[tuple[int, int]] = field(default_factory=set)
    """(trace, step): the last event of a trace that adds none of its own was reached there."""


def parse_printed(output: str) -> Printed:
    """Collect the spec's PrintT lines from TLC's output."""
    found = Printed()
    for value in printed_values(output):
        assert isinstance(value, tuple) and isinstance(value[1], int)
        kind, number = value[0], value[1]
        if kind == "kreplica-conforms":
            found.conforms.add(number)
        elif kind == "kreplica-reached":
            step = value[2]
            assert isinstance(step, int)
            found.reached[number] = max(step, found.reached.get(number, -1))
        elif kind == "kreplica-mismatch":
            step = value[2]
            assert isinstance(step, int)
            found.mismatches.setdefault((number, step), []).append(value[3])
        elif kind == "kreplica-init-mismatch":
            found.init_mismatches.setdefault(number, []).append(value[2])
        elif kind == "kreplica-events" and isinstance(value[2], int):
            found.events[number] = value[2]
        elif kind == "kreplica-invalid":
            found.invalid[number] = str(value[2])
        elif kind == "kreplica-invariant":
            step, names = value[2], value[3]
            assert isinstance(step, int) and isinstance(names, frozenset)
            found.invariants.setdefault((number, step), set()).update(str(n) for n in names)
        elif kind == "kreplica-share":
            holder, shared = value[2], value[3]
            assert isinstance(holder, int) and isinstance(shared, int)
            found.shares[number] = (holder, shared)
        elif kind == "kreplica-end":
            step = value[2]
            assert isinstance(step, int)
            found.ends.add((number, step))
    return per_trace(found)


def per_trace(found: Printed) -> Printed:
    """What TLC printed, said of every trace: a fact printed of an event that several traces
    share (in the name of the trace that holds it) is a fact of each of them (`prefixes`)."""
    if not found.shares:
        return found
    paths = prefixes.holders(found.shares, found.events)
    ended = found.ends | {(t, found.events[t]) for t in found.conforms if t in found.events}
    out = Printed(events=found.events, invalid=found.invalid)
    for number, path in paths.items():
        if prefixes.conforms(path, ended):
            out.conforms.add(number)
        last = prefixes.reached(path, found.reached)
        if last is not None:
            out.reached[number] = last
        out.mismatches.update(prefixes.at_steps(path, found.mismatches, number))
        out.invariants.update(prefixes.at_steps(path, found.invariants, number))
        if path[0] in found.init_mismatches:
            out.init_mismatches[number] = found.init_mismatches[path[0]]
    for number in found.conforms - set(paths):  # not counted by the reader: shares nothing
        out.conforms.add(number)
    for number, step in found.reached.items():
        if number not in paths:
            out.reached[number] = step
    for number, states in found.init_mismatches.items():
        if number not in paths:
            out.init_mismatches[number] = states
    for key, successors in found.mismatches.items():
        if key[0] not in paths:
            out.mismatches[key] = successors
    for key, names in found.invariants.items():
        if key[0] not in paths:
            out.invariants[key] = names
    return out


def run_batch(
    traces: Sequence[Prepared],
    params: SpecParams,
    spec_dir: Path,
    options: TlcOptions,
    diagnose: bool,
    reader: Path | None = None,
) -> tuple[TlcResult, Printed]:
    """One TLC run over `traces` (all with the same number of replicas)."""
    workdir = Path(tempfile.mkdtemp(prefix="kreplica-conform-"))
    try:
        module = write_batch(workdir, spec_dir, traces, reader)
        config = workdir / f"{TRACE_MODULE}.cfg"
        config.write_text(tlc_config(params, traces[0].replicas, diagnose), encoding="utf-8")
        result = run_tlc(module, config, options)
        return result, parse_printed(result.output)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


_JAVA_OVERRIDE = re.compile(
    r"Attempted to apply the operator overridden by the Java method .*?"
    r"but it produced the following error:\s*",
    re.DOTALL,
)
"""TLC's wrapping of an error raised in a Java override: the Java signature says nothing."""


def _tlc_failed(result: TlcResult) -> str | None:
    """Why a TLC run gave no usable verdict, or None when it finished normally."""
    if result.outcome.verdict == Verdict.OK:
        return None
    message = _JAVA_OVERRIDE.sub("", result.message)
    return f"TLC {result.outcome.verdict}: {message}".strip().rstrip(":")


# ---------------------------------------------------------------- diagnosis


def _differing(logged: Mapping[str, Value], successors: Iterable[Mapping[str, Value]]) -> list[str]:
    """The logged variables that differ from the same variable in every successor."""
    options = list(successors)
    return [v for v, value in logged.items() if all(s.get(v) != value for s in options)]


def _as_state(value: Value) -> dict[str, Value]:
    """A state the trace spec printed (a record of the spec's variables)."""
    if not isinstance(value, Mapping):
        raise TraceInputError(f"TLC printed {value!r} where a state was expected")
    return {str(k): v for k, v in value.items()}


def _values_at(trace: ItfTrace, step: int) -> dict[str, Value]:
    """The recorded variables of state `step` (only those it observes)."""
    return dict(trace.states[step].values)


def _json(value: Value) -> Any:
    """A value as ITF JSON."""
    return to_itf(value)


def diagnose(p: Prepared, number: int, printed: Printed, seconds: float) -> TraceResult:
    """Pinpoint where trace `number` of a diagnostic run stopped conforming."""
    trace = p.trace
    if number in printed.init_mismatches or number not in printed.reached:
        logged = _values_at(trace, 0)
        got = printed.init_mismatches.get(number, [])
        initial = [_as_state(g) for g in got]
        variables = _differing(logged, initial)
        diff = {
            v: {"expected": _json(logged[v]), "got": [_json(s[v]) for s in initial]}
            for v in variables
        }
        return TraceResult(
            p.trace_id,
            VIOLATES,
            p.events,
            0,
            INIT_ACTION,
            "{}",
            variables,
            json.dumps(diff),
            "the first state is not the spec's Init",
            seconds,
        )
    step = printed.reached[number] + 1
    state = trace.states[step]
    args = json.dumps({k: _json(v) for k, v in state.args.items()}, sort_keys=True)
    printed_successors = printed.mismatches.get((number, step), [])
    if not printed_successors:
        reason = f"{state.action} with these arguments is not enabled in the spec here"
        return TraceResult(
            p.trace_id, VIOLATES, p.events, step, state.action, args, [], None, reason, seconds
        )
    successors = [_as_state(s) for s in printed_successors]
    logged = _values_at(trace, step)
    variables = _differing(logged, successors)
    diff = {
        v: {"expected": _json(logged[v]), "got": [_json(s[v]) for s in successors]}
        for v in variables
    }
    reason = f"no successor of {state.action} agrees with the trace on {', '.join(variables)}"
    return TraceResult(
        p.trace_id,
        VIOLATES,
        p.events,
        step,
        state.action,
        args,
        variables,
        json.dumps(diff),
        reason,
        seconds,
    )


# ---------------------------------------------------------------- the whole check


def trace_tlc_options(java: str, jar: Path, time_limit: float | None) -> TlcOptions:
    """How trace validation runs TLC (`kreplica conform`, and the tests that check traces
    themselves): runs of seconds, so the short-run JVM flags, and the class archives kept in
    the user's cache (`tlcdata.default_cache_dir`)."""
    return TlcOptions(
        java=java,
        jar=jar,
        time_limit=time_limit,
        jvm_flags=SHORT_RUN_JVM_FLAGS,
        class_archives=tlcdata.default_cache_dir() / "tlc-cds",
    )


@dataclass(frozen=True)
class CheckSettings:
    """How to check a batch: the spec's constants, where the spec is, and how to run TLC."""

    params: SpecParams
    spec_dir: Path
    tlc: TlcOptions
    reader: Path | None = None
    """The compiled Java trace-data reader (tlcdata.build_reader), or None: TLA+ text."""
    why: int = 3
    """Rejected traces per batch whose false conjunct is looked for (`why`): two more short
    TLC runs each; 0: none."""


def check_prepared(batch: Sequence[Prepared], settings: CheckSettings) -> list[TraceResult]:
    """Check traces that share a number of replicas: one TLC run, then one to diagnose. A
    batch of one trace (`kreplica conform one.itf.json`, a tutorial's) has the diagnostic run
    only: it accepts exactly the traces the plain run does, also prints where a rejected one
    stopped, and on one trace takes about as long (one JVM of the two saved)."""
    start = time.monotonic()
    direct = len(batch) == 1
    result, printed = run_batch(
        batch, settings.params, settings.spec_dir, settings.tlc, direct, settings.reader
    )
    failed = _tlc_failed(result)
    seconds = (time.monotonic() - start) / len(batch)
    if failed:
        return [
            TraceResult(p.trace_id, ERROR, _events(p), reason=failed, seconds=seconds)
            for p in batch
        ]
    results: dict[int, TraceResult] = {}
    rejected: list[Prepared] = []
    for n, p in enumerate(batch, start=1):
        p.events = printed.events.get(n, p.events)
        if n in printed.invalid:
            results[n] = _refused(p, printed.invalid[n], seconds)
        elif n in printed.conforms:
            results[n] = TraceResult(p.trace_id, CONFORMS, p.events, seconds=seconds)
        else:
            rejected.append(p)
    if rejected:
        again, found = result, printed  # a batch of one: its run was the diagnosis
        if not direct:
            again, found = run_batch(
                rejected, settings.params, settings.spec_dir, settings.tlc, True, settings.reader
            )
        failed = _tlc_failed(again)
        undecided: list[tuple[Prepared, invariants.Blocked]] = []
        for n, p in enumerate(rejected, start=1):
            index = batch.index(p) + 1
            blocked = None if failed else _blocked(n, found)
            if failed:
                results[index] = TraceResult(
                    p.trace_id, ERROR, p.events, reason=f"diagnosis: {failed}", seconds=seconds
                )
            elif blocked is None:  # no invariant, or none broken: the diagnosis as before
                results[index] = _diagnosed(p, n, found, seconds)
            elif blocked.certain:
                results[index] = _invariant_row(p, blocked, settings, seconds)
            else:
                undecided.append((p, blocked))
        for p, row in _settle(undecided, settings, seconds):
            results[batch.index(p) + 1] = row
    return [results[n] for n in range(1, len(batch) + 1)]


def _blocked(number: int, printed: Printed) -> invariants.Blocked | None:
    """Where the invariants stopped trace `number` of a diagnostic run (`invariants`)."""
    broken = {step: names for (n, step), names in printed.invariants.items() if n == number}
    return invariants.blocked_at(broken, printed.reached.get(number))


def _settle(
    undecided: Sequence[tuple[Prepared, invariants.Blocked]],
    settings: CheckSettings,
    seconds: float,
) -> list[tuple[Prepared, TraceResult]]:
    """The rows of traces whose block is uncertain: one more diagnostic run, without
    invariants, says whether they get past the blocked step as behaviours (`invariants`)."""
    if not undecided:
        return []
    traces = [p for p, _ in undecided]
    params = replace(settings.params, invariants=())
    result, found = run_batch(traces, params, settings.spec_dir, settings.tlc, True,
                              settings.reader)  # fmt: skip
    failed = _tlc_failed(result)
    rows = []
    for n, (p, blocked) in enumerate(undecided, start=1):
        if failed:
            row = TraceResult(
                p.trace_id, ERROR, p.events, reason=f"diagnosis: {failed}", seconds=seconds
            )
        elif invariants.settled(blocked, n in found.conforms, found.reached.get(n)):
            row = _invariant_row(p, blocked, settings, seconds)
        else:
            row = _diagnosed(p, n, found, seconds)
        rows.append((p, row))
    return rows


def _invariant_row(
    p: Prepared, blocked: invariants.Blocked, settings: CheckSettings, seconds: float
) -> TraceResult:
    """The row of a trace that cannot take step `blocked.step` without breaking an invariant
    (or the error row of a trace that cannot be read in Python)."""
    try:
        action, args = INIT_ACTION, "{}"
        if blocked.step > 0:
            state = p.trace.states[blocked.step]
            action = str(state.action)
            args = json.dumps({k: _json(v) for k, v in state.args.items()}, sort_keys=True)
    except Exception as err:  # one trace's problem, its own row says why
        return _error_row(p, err, _events(p), seconds)
    reason, names = invariants.reason(blocked, settings.params.invariants, action, args)
    return TraceResult(p.trace_id, VIOLATES, p.events, blocked.step, action, args,
                       reason=reason, seconds=seconds, invariant=names)  # fmt: skip


def _diagnosed(p: Prepared, number: int, printed: Printed, seconds: float) -> TraceResult:
    """`diagnose`, or this trace's error row when it cannot be read in Python (the others of
    the batch keep their verdicts)."""
    try:
        return diagnose(p, number, printed, seconds)
    except Exception as err:  # one trace's problem, its own row says why
        return _error_row(p, err, _events(p), seconds)


def _error_row(
    p: Prepared, err: BaseException, events: int = 0, seconds: float = 0.0
) -> TraceResult:
    """The error row of trace `p` that `err` stopped: why, and where when it is known."""
    row = TraceResult(p.trace_id, ERROR, events, reason=_own_reason(p, err), seconds=seconds)
    if isinstance(err, TraceInputError):
        row.step, row.variables = err.step, err.variables
    return row


def _own_reason(p: Prepared, err: BaseException) -> str:
    """Why trace `p` could not be checked: its input's complaint, else the failure."""
    if isinstance(err, KreplicaError):
        return str(err)
    return f"{p.trace_id}: internal error: {type(err).__name__}: {err}"


def _refused(p: Prepared, why: str, seconds: float) -> TraceResult:
    """The row of a trace the Java reader refused: Python's own complaint, which is more
    precise, or the reader's."""
    try:
        full = full_prepare(p.trace_id, p.text)
    except Exception as err:  # whatever Python makes of it, it is this trace's
        return _error_row(p, err, seconds=seconds)
    return TraceResult(
        p.trace_id, ERROR, full.events, reason=f"{p.trace_id}: {why}", seconds=seconds
    )


def _events(p: Prepared) -> int:
    """The trace's events, decoding it if the reader never counted them (0 if malformed)."""
    if p.events == UNKNOWN:
        try:
            p.events = len(p.trace.states) - 1
        except Exception:  # malformed: no events to count
            return 0
    return p.events


RETRIES = 1
"""A single trace whose TLC crashed (not timed out) is run once more before it gets an error."""


def _batch_failed(results: Sequence[TraceResult]) -> bool:
    """TLC itself failed on the batch (every row is that error), rather than a trace."""
    return bool(results) and all(
        r.verdict == ERROR and r.reason.startswith(("TLC ", "diagnosis: TLC ")) for r in results
    )


def _check_group(
    batch: Sequence[Prepared], settings: CheckSettings, retries: int = RETRIES
) -> list[TraceResult]:
    """check_prepared, never raising. When TLC fails on a batch (a crash, an evaluation error
    that one odd trace causes), the batch is split in halves, down to single traces, so one
    trace cannot cost the others their verdicts; a single trace whose TLC crashed is retried.
    Timeouts are final: splitting would only spend the time again."""
    try:
        results = check_prepared(batch, settings)
    except Exception as err:  # no traceback reaches the user: the rows say why
        if len(batch) > 1:  # whose problem it is shows when the halves run alone
            half = len(batch) // 2
            return _check_group(batch[:half], settings) + _check_group(batch[half:], settings)
        (p,) = batch
        return [_error_row(p, err, _events(p))]
    if not _batch_failed(results) or "timeout" in results[0].reason:
        return results
    if len(batch) > 1:
        half = len(batch) // 2
        return _check_group(batch[:half], settings) + _check_group(batch[half:], settings)
    if retries > 0 and "crash" in results[0].reason:
        return _check_group(batch, settings, retries - 1)
    return results


def check_texts(items: Iterable[tuple[str, str]], settings: CheckSettings) -> list[TraceResult]:
    """Check (id, ITF JSON text) pairs: one result per item, in order, whatever happens."""
    results: dict[int, TraceResult] = {}
    groups: dict[tuple[int, int, Variant], list[tuple[int, Prepared]]] = {}
    notes: dict[int, str] = {}
    for index, (trace_id, text) in enumerate(items):
        notes[index] = ""
        try:
            variant = variant_for(text, settings.params)
            notes[index] = variant_note(text, variant.label())
            p = prepare(trace_id, text, fast=settings.reader is not None)
        except Exception as err:  # this trace's own error row
            results[index] = _error_row(Prepared(trace_id, 0, 0, text), err)
            continue
        min_isr = settings.params.min_insync_replicas if p.min_isr is None else p.min_isr
        groups.setdefault((p.replicas, min_isr, variant), []).append((index, p))
    for (_, min_isr, variant), group in groups.items():
        params = replace(settings.params, min_insync_replicas=min_isr, variant=variant)
        checked = _check_group([p for _, p in group], replace(settings, params=params))
        for (index, _), result in zip(group, checked, strict=True):
            results[index] = result
    for index, note in notes.items():
        results[index].note = note
    return [_printable(results[i]) for i in sorted(results)]


def _printable(result: TraceResult) -> TraceResult:
    """The row with its id and reason fit for a terminal, Parquet and XML: a trace's own
    text (a name it gives, a file name that is not UTF-8) cannot break the report."""
    result.trace_id, result.reason = printable(result.trace_id), printable(result.reason)
    return result
