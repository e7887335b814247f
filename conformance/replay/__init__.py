"""Replays: a run driven again on the implementation, and judged.

Holds: `trace` (`replay_trace`: a trace's spec actions driven on a fresh cluster, each state
compared with the trace's), `schedule` (`replay_schedule`: a saved run's simulator steps,
judged as the fuzzer judged them; saved, read and minimised), `setups` (the cluster a trace
replays on: its model config's, what its #meta records, or its size).

May import: `kreplica.impl`, `kreplica.conformance.judges`, `kreplica.conformance.bridge`,
`kreplica.conformance.tla`, `kreplica.conformance.errors`.
"""
