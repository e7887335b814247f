"""The judges: every check that judges a run of the implementation, each watching the events
the recorder emits (`kreplica.conformance.bridge.recorder`) and keeping its own books.

Holds: `checked_steps` (the `Judge` of one run: a step judged in three phases, before, the
recorder's apply, after; `apply_checked`), `invariants` (the spec's safety properties on a
projected state), `liveness` (EventuallyReplicated and EventuallyAnswered, once a run has
settled). The judges of Kafka's rules that the spec abstracts: `client_answers` (every answer
a client gets) with `arrivals` (its ledger of the client's requests), `lag_times` (caught-up
times), `checkpoint_times` (the HW checkpoint task's period), `backoff` (a follower's fetch
back-off), `idle_fetchers` (no idle fetcher thread after a LeaderAndIsr).

May import: `kreplica.impl`, `kreplica.conformance.bridge`.
"""
