"""A corpus's traces mapped onto a config's state graph: the nodes and edges they cover.

Contract: a trace state covers a node when it equals the node on every spec variable (their
`states.state_key`s agree); a step covers an edge when both its states are nodes joined by an
edge keyed by the step's action. What cannot lie in the graph is counted apart, never as missed:
- a trace recorded with other constants (replicas, MaxFetchRecords, MinIsr, the variant, a
  lossy or duplicating network the config does not allow), or one that does not record every
  spec variable, is *outside*, with all its states;
- a state beyond the config's bounds (more records than MaxRecords, a higher epoch, more
  crashes or power losses) is outside, and so is every later state of its trace (those
  counters never go down);
- a state within the bounds that is no node is *unmatched*: the graph lacks it, which says
  the trace does not conform, or the config leaves out something the trace does.

Rules: pure functions of a trace and a `GraphIndex` (the keys, the edges and the bounds, small
enough to ship to Spark executors); no TLC, no networkx. `covered_nodes` is the one call for a
caller that wants only the covered node ids of some traces (coverage over time, say).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from kreplica.conformance.errors import TraceError
from kreplica.conformance.tla.itf import ItfTrace, decode_trace, loads_json
from kreplica.conformance.tla.tlavalue import Value
from kreplica.conformance.validate.sources import UNREADABLE, Item

from .graph import Bounds, StateGraph
from .states import StateKey, covers_every_variable, state_key

Edge = tuple[int, int, str]
"""(source node, target node, action name)."""


@dataclass(frozen=True)
class GraphIndex:
    """What mapping a trace needs of a StateGraph: the node of each key, the edges, the bounds."""

    keys: Mapping[StateKey, int]
    edges: frozenset[Edge]
    bounds: Bounds

    @classmethod
    def of(cls, graph: StateGraph) -> GraphIndex:
        """The index of a StateGraph."""
        edges = frozenset((u, v, str(k)) for u, v, k in graph.graph.edges(keys=True))
        return cls(graph.keys, edges, graph.bounds)


@dataclass
class Coverage:
    """The nodes and edges some traces covered, and how many traces, states and steps were
    inside, outside or unmatched. `merge` is a union: the coverage of two corpora is the merge
    of theirs."""

    nodes: set[int] = field(default_factory=set)
    edges: set[Edge] = field(default_factory=set)
    traces: int = 0
    traces_outside: int = 0
    states: int = 0
    states_outside: int = 0
    states_unmatched: int = 0
    steps: int = 0
    steps_covered: int = 0

    def merge(self, other: Coverage) -> Coverage:
        """A new Coverage: the union of the sets, the sums of the counts."""
        counts = {f.name: getattr(self, f.name) + getattr(other, f.name) for f in _COUNTS}
        return Coverage(self.nodes | other.nodes, self.edges | other.edges, **counts)

    def to_json(self) -> dict[str, Any]:
        """A JSON object (sorted node ids, sorted edges as lists)."""
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in _COUNTS}
        out["nodes"] = sorted(self.nodes)
        out["edges"] = [list(e) for e in sorted(self.edges)]
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Coverage:
        """The Coverage `to_json` wrote."""
        counts = {f.name: int(obj[f.name]) for f in _COUNTS}
        edges = {(int(u), int(v), str(a)) for u, v, a in obj["edges"]}
        return cls(set(obj["nodes"]), edges, **counts)


_COUNTS = [f for f in fields(Coverage) if f.name not in ("nodes", "edges")]


def outside_reason(trace: ItfTrace, bounds: Bounds) -> str | None:
    """Why a whole trace cannot lie in a graph of `bounds` (its recorded constants differ, or
    it leaves out a variable), or None when it can."""
    if not covers_every_variable(trace.vars):
        return "it does not record every spec variable"
    meta, first = trace.meta, trace.states[0].values
    hw = first.get("hw")
    replicas = meta.get("replicas", len(hw) if isinstance(hw, tuple) else None)
    faults = set(meta.get("faults") or ())
    checks = [
        (replicas == bounds.replicas, f"{replicas} replicas"),
        (meta.get("fetch_max_records", bounds.max_fetch_records) == bounds.max_fetch_records,
         f"MaxFetchRecords {meta.get('fetch_max_records')}"),
        (meta.get("min_insync_replicas", bounds.min_isr) == bounds.min_isr,
         f"MinIsr {meta.get('min_insync_replicas')}"),
        (_words(meta.get("variant", bounds.variant)) == _words(bounds.variant),
         f"variant {meta.get('variant')}"),
        (bounds.lossy_network or not faults & {"drop", "isolate"}, "a lossy network"),
        (bounds.duplicating_network or "duplicate" not in faults, "a duplicating network"),
    ]  # fmt: skip
    for ok, what in checks:
        if not ok:
            return f"recorded with {what}"
    return None


def _words(label: object) -> frozenset[str]:
    """A variant label's words (`truncation=hw,bug=x`), `default` left out."""
    return frozenset(w for w in str(label).split(",") if w and w != "default")


def beyond_bounds(values: Mapping[str, Value], bounds: Bounds) -> bool:
    """Whether a state has more records, a higher epoch, more crashes or more power losses
    than the bounds allow."""
    limits = {
        "nextRecord": bounds.max_records + 1,
        "ctrlEpoch": bounds.max_epoch,
        "crashes": bounds.max_crashes,
        "uncleanShutdowns": bounds.max_unclean_shutdowns,
    }
    return any(isinstance(values.get(k), int) and values[k] > m for k, m in limits.items())  # type: ignore[operator]


def map_trace(trace: ItfTrace, index: GraphIndex) -> Coverage:
    """The Coverage of one trace."""
    states = len(trace.states)
    cover = Coverage(traces=1, states=states, steps=states - 1)
    if outside_reason(trace, index.bounds) is not None:
        cover.traces_outside, cover.states_outside = 1, states
        return cover
    previous: int | None = None
    beyond = False
    for state in trace.states:
        beyond = beyond or beyond_bounds(state.values, index.bounds)
        node = None if beyond else index.keys.get(state_key(state.values))
        if beyond:
            cover.states_outside += 1
        elif node is None:
            cover.states_unmatched += 1
        else:
            cover.nodes.add(node)
            edge = (previous, node, state.action or "")
            if previous is not None and edge in index.edges:
                cover.edges.add((previous, node, state.action or ""))
                cover.steps_covered += 1
        previous = node
    return cover


def map_traces(traces: Iterable[ItfTrace], index: GraphIndex) -> Coverage:
    """The merged Coverage of some traces."""
    total = Coverage()
    for trace in traces:
        total = accumulate(total, map_trace(trace, index))
    return total


def accumulate(total: Coverage, one: Coverage) -> Coverage:
    """Merge `one` into `total` in place and return `total` (no copy per trace)."""
    total.nodes |= one.nodes
    total.edges |= one.edges
    for f in _COUNTS:
        setattr(total, f.name, getattr(total, f.name) + getattr(one, f.name))
    return total


def decode_item(item: Item) -> ItfTrace:
    """The trace of a `(trace id, JSON text)` item (TraceError says what is wrong with it)."""
    name, text = item
    if text.startswith(UNREADABLE):
        raise TraceError(f"{name}: {text[len(UNREADABLE) :]}")
    return decode_trace(loads_json(text, name), name)


def map_items(items: Iterable[Item], index: GraphIndex) -> Coverage:
    """The merged Coverage of the traces of some items (TraceError at the first bad one)."""
    return map_traces((decode_item(item) for item in items), index)


def covered_nodes(traces: Iterable[ItfTrace], graph: StateGraph | GraphIndex) -> set[int]:
    """The ids of the graph's nodes that some of `traces` reached."""
    index = graph if isinstance(graph, GraphIndex) else GraphIndex.of(graph)
    return map_traces(traces, index).nodes
