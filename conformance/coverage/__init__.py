"""Spec coverage: which states, edges and actions of a small config's state graph a corpus reached.

Holds: `states` (a state's key, equal for TLC's print and an ITF trace of the same state),
`graph` (TLC's dump of a small config, `spec/Coverage*.cfg`, as a networkx graph, with the
states where each reachability witness is false; cached in build/coverage/), `mapping` (a
trace's states and steps onto the graph's nodes and edges; outside the bounds, unmatched;
`covered_nodes` for callers that want node ids only), `report` (covered and total states, edges
and actions, witnesses reached, shortest paths to what was missed), `picture` (matplotlib),
`spark` (the mapping on Spark executors, merged as a union). `kreplica coverage` is its
command line (docs/coverage.md).

May import: `validate`, `spark`, `tla` and `errors`.
"""
