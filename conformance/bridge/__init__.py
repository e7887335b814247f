"""The bridge between the implementation and the spec: the only room that knows both.

Holds: `projection` (impl state onto the spec's variables), `recorder` (a run as an ITF trace,
one state per spec action), `replay` (a trace's actions driven on the implementation),
`invariants` (the spec's safety properties on a projected state), `checked_steps` (a step
applied with the invariants checked after it), `schedule` (a run's steps as JSON, replayed and
minimised).

May import: `kreplica.impl`, `kreplica.conformance.tla`, `kreplica.conformance.errors`.
"""
