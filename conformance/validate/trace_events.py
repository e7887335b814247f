"""A trace as TLC's trace check reads it: per state, its action and only what changed.

Both ways a trace reaches TLC, TLA+ text (`tracecheck.render`) and TLC's binary data
(`tlcdata.trace_value`), are built from these events, so they cannot drift apart."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from kreplica.conformance.tla.itf import ItfTrace
from kreplica.conformance.tla.tlavalue import Value
from kreplica.conformance.tla.vocabulary import INIT_ACTION, VARIABLES


@dataclass(frozen=True)
class TraceEvent:
    """One state: its action and arguments, the observed variables whose value changed since
    the previous state (all of them in the first), and the observed ones it omits."""

    action: str
    args: Mapping[str, Value]
    changed: dict[str, Value]
    missing: tuple[str, ...]


def observed(trace: ItfTrace) -> list[str]:
    """The spec variables the trace records, in the spec's order."""
    return [v for v in VARIABLES if v in trace.vars]


def hidden(trace: ItfTrace) -> list[str]:
    """The spec variables the trace does not record, in the spec's order."""
    return [v for v in VARIABLES if v not in trace.vars]


def trace_events(trace: ItfTrace) -> Iterator[TraceEvent]:
    """Each state of the trace as a TraceEvent, keeping only what changed."""
    names = observed(trace)
    previous: Mapping[str, Value] | None = None
    for state in trace.states:
        values = state.values
        changed = {
            v: values[v]
            for v in names
            if v in values and (previous is None or v not in previous or previous[v] != values[v])
        }
        missing = tuple(v for v in names if v not in values)
        yield TraceEvent(state.action or INIT_ACTION, state.args, changed, missing)
        previous = values
