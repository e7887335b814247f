"""Driving the implementation: Hypothesis state machines, targets, corpora of recorded runs.

Holds: `setup` (a campaign's set-up), `choices` (which enabled step each rule may take),
`machine` (the rule-based state machine), `plan` (a run's budgets, fault windows, swarm,
focus and priorities, decided from Hypothesis's draws), `hypothesis_shim` (the machine's two
touches of Hypothesis internals, with the release they were checked against), `campaign`
(runs, failures, saving, the summary), `runs` (what the runs of a campaign share: its
counters, its failures), `targets` (each seeded bug and unsafe variant with the
set-up that hunts it), `corpus_writer` (every run's trace as a JSON line), `random_walk`
(cheap random-walk corpora), `reproducible` (a seeded campaign that depends on its seed
alone), `settle` (the settle phase: once the faults stop, the cluster settles and is judged
by `judges.liveness`),
`guidance` (abstract states, a run's rarity, a campaign's coverage of them), `guided` (`--guided`:
a campaign's runs handed out in rounds to the stage and fault mix that find the most new
abstract states), `stages` (the default
campaign's stages: the correct protocol and every variant, each judged by the checks that hold
for it), `swarm` (a campaign as a swarm of seeded campaigns, a Spark task per seed and stage:
`kreplica fuzz --master`).

May import: `kreplica.conformance.replay`, `.judges`, `.bridge`, `.spark` (for `swarm`), `.tla`,
`.errors`, and `kreplica.impl`.
"""
