"""Real Apache Kafka under the model: one fault schedule, run on a real cluster and on kreplica.

Holds: `schedule` (the schedule format both worlds read), `outcome` (what a run ends with: acked
records lost, diverged replicas, final HW, ISR and leader epoch; and whether two outcomes agree),
`simulate` (a schedule on kreplica's simulator), and the real cluster's harness: the install,
ZooKeeper and three broker JVMs, the nemesis, the workload and what is read off the brokers;
and the brokers' own steps: `events` (the agent's event files, read and merged), `order` (put
in the order of their spec steps), `convert` (into a trace of the spec), `trace` (recorded and
checked per variant).

May import: `kreplica.impl`, `kreplica.conformance.bridge`, `kreplica.conformance.tla`,
`kreplica.conformance.errors`.
"""
