"""The bridge between the implementation and the spec: the only room that knows both.

Holds: `projection` (impl state onto the spec's variables), `recorder` (a run as an ITF trace,
one state per spec action), `replay` (a trace's actions driven on the implementation),
`setups` (the cluster a recorded trace replays on),
`invariants` (the spec's safety properties on a projected state), `checked_steps` (a step
applied with the invariants checked after it), `schedule` (a run's steps as JSON, replayed and
minimised), `step_codec` (a simulator step as JSON), `local_partitions` (the fuzzer's cluster:
the modelled partition and its neighbours). The judges of Kafka's rules that the spec abstracts:
`client_answers` (every answer a client gets), `lag_times` (caught-up times), `checkpoint_times`
(the HW checkpoint task's period), `backoff` (a follower's fetch back-off), `idle_fetchers`
(no idle fetcher thread after a LeaderAndIsr).

May import: `kreplica.impl`, `kreplica.conformance.tla`, `kreplica.conformance.errors`.
"""
