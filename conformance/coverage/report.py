"""A coverage report: a Coverage (what some traces reached) read against its StateGraph.

Contract: `build_report(graph, coverage)` returns the states, edges and actions covered with
their totals, each witness's states and how many were reached, the states covered at each BFS
depth, and for every action and witness no trace reached, a shortest path of actions to it from
an initial state (networkx on the graph: the path's last step is that action, or its last state
one where that witness is false). Reports of several corpora merge by merging their Coverage
(`Coverage.merge`, a union) before the report is built.

Rules: an engine: it returns dataclasses and JSON, never text. `tests/test_coverage.py` checks
that a path to a missed action ends with it, and that merging two corpora is their union.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from itertools import pairwise
from typing import Any

import networkx as nx  # type: ignore[import-untyped]

from kreplica.conformance.tla.vocabulary import ACTION_ARGS

from .graph import StateGraph
from .mapping import Coverage


@dataclass(frozen=True)
class ActionRow:
    """One spec action: its edges in the graph and how many some trace took."""

    action: str
    edges: int
    covered: int


@dataclass(frozen=True)
class WitnessRow:
    """One witness: the graph's states where it is false, how many were reached, and a
    shortest path to one when none was (empty when it was, or when the graph has none)."""

    witness: str
    states: int
    reached: int
    path: tuple[str, ...] = ()


@dataclass(frozen=True)
class MissedAction:
    """An action of the graph no trace took, and a shortest path whose last step takes it."""

    action: str
    path: tuple[str, ...]


@dataclass(frozen=True)
class CoverageReport:
    """What some traces covered of a config's state graph."""

    config: str
    counts: Mapping[str, int]
    """The Coverage's counts: traces, states and steps, inside, outside, unmatched."""
    states: int
    states_covered: int
    edges: int
    edges_covered: int
    actions: tuple[ActionRow, ...]
    actions_absent: tuple[str, ...]
    """Spec actions with no edge in this graph (the config rules them out)."""
    witnesses: tuple[WitnessRow, ...]
    missed: tuple[MissedAction, ...]
    depths: tuple[tuple[int, int, int], ...]
    """(BFS depth, states at that depth, states covered)."""

    @property
    def actions_covered(self) -> int:
        """How many of the graph's actions some trace took."""
        return sum(1 for row in self.actions if row.covered)

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON object."""
        out = asdict(self)
        out["counts"] = dict(self.counts)
        out["actions_covered"] = self.actions_covered
        return out


def depths(graph: StateGraph) -> dict[int, int]:
    """Each node's BFS depth: the fewest steps from an initial state."""
    lengths = nx.multi_source_dijkstra_path_length(graph.graph, set(graph.initial))
    return {int(node): int(length) for node, length in lengths.items()}


def step_text(graph: StateGraph, u: int, v: int, action: str | None = None) -> str:
    """One step u -> v as `Action(args)` (the first action by name when none is given)."""
    edges = graph.graph.get_edge_data(u, v) or {}
    name = action if action is not None else min(edges)
    return f"{name}({edges[name].get('args', '')})"


def path_to(graph: StateGraph, node: int) -> tuple[str, ...]:
    """A shortest path of steps from an initial state to `node`."""
    _, nodes = nx.multi_source_dijkstra(graph.graph, set(graph.initial), target=node)
    return tuple(step_text(graph, u, v) for u, v in pairwise(nodes))


def path_to_action(graph: StateGraph, action: str, depth: Mapping[int, int]) -> tuple[str, ...]:
    """A shortest path whose last step is `action` (from the shallowest source of its edges)."""
    u, v = min(
        ((u, v) for u, v, k in graph.graph.edges(keys=True) if k == action),
        key=lambda e: (depth.get(e[0], 1 << 30), e),
    )
    return (*path_to(graph, u), step_text(graph, u, v, action))


def build_report(graph: StateGraph, coverage: Coverage) -> CoverageReport:
    """The report of `coverage` on `graph` (see the module docstring)."""
    depth = depths(graph)
    totals = Counter(str(k) for _, _, k in graph.graph.edges(keys=True))
    taken = Counter(a for _, _, a in coverage.edges)
    actions = tuple(ActionRow(a, totals[a], taken[a]) for a in sorted(totals))
    missed = tuple(
        MissedAction(row.action, path_to_action(graph, row.action, depth))
        for row in actions
        if not row.covered
    )
    return CoverageReport(
        config=graph.config,
        counts={k: v for k, v in coverage.to_json().items() if isinstance(v, int)},
        states=graph.graph.number_of_nodes(),
        states_covered=len(coverage.nodes),
        edges=graph.graph.number_of_edges(),
        edges_covered=len(coverage.edges),
        actions=actions,
        actions_absent=tuple(sorted(set(ACTION_ARGS) - set(totals))),
        witnesses=tuple(
            _witness_row(graph, w, nodes, coverage, depth) for w, nodes in graph.witnesses.items()
        ),
        missed=missed,
        depths=_depth_rows(depth, coverage),
    )


def _witness_row(
    graph: StateGraph, witness: str, nodes: frozenset[int], coverage: Coverage,
    depth: Mapping[int, int],
) -> WitnessRow:  # fmt: skip
    """A witness's row, with a shortest path to its shallowest state when none was reached."""
    reached = len(nodes & coverage.nodes)
    if reached or not nodes:
        return WitnessRow(witness, len(nodes), reached)
    nearest = min(nodes, key=lambda n: (depth.get(n, 1 << 30), n))
    return WitnessRow(witness, len(nodes), 0, path_to(graph, nearest))


def _depth_rows(depth: Mapping[int, int], coverage: Coverage) -> tuple[tuple[int, int, int], ...]:
    """(depth, states, covered) for every depth of the graph."""
    total = Counter(depth.values())
    covered = Counter(depth[n] for n in coverage.nodes if n in depth)
    return tuple((d, total[d], covered[d]) for d in sorted(total))
