"""Real Apache Kafka under the model: one fault schedule, run on a real cluster and on kreplica.

Holds: `schedule` (the schedule format both worlds read), `outcome` (what a run ends with: acked
records lost, diverged replicas, final HW, ISR and leader epoch; and whether two outcomes agree),
`simulate` (a schedule on kreplica's simulator), `timing` (the timeouts it runs with),
`producer` (the harness's producer in it), `seat` (where its controller runs, and its
failover), `jitter` (what a real run leaves to chance), `predict` (the set of outcomes the model
allows), `generate` (named and random schedules), `compare` (one schedule in both worlds, and
a campaign's journal), and the real cluster's harness: `install` (the jars, Java 11,
iptables), `cluster` (ZooKeeper and three broker JVMs), `nemesis` (partitions as iptables
rules; power losses), `powerloss` (the FUSE filesystem that drops unsynced writes on command:
its mount and commands), `powerloss_daemon` (the filesystem's own process),
`reaper` (removes rules, mounts and processes a harness killed with -9 leaves), `workload`
(the producers and the final read), `observe`
(what is read off the brokers' disks), `real` (one schedule on the cluster); and the brokers'
own steps: `events` (the agent's event files, read and merged), `order` (put in the order of
their spec steps), `convert` (into a trace of the spec), `trace` (recorded and checked per
variant).

May import: `kreplica.impl`, `kreplica.conformance.tla`, `kreplica.conformance.errors`.
"""
