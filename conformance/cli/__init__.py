"""The `kreplica` command line: one module per subcommand, each parsing, calling an engine from
another room and rendering what it returns.

Holds: `main` (the click group; `errors.run_command` turns every error into one stderr line and
an exit code), `check`, `replay`, `fuzz`, `walk` (random-walk corpora), `conform`, `explain`,
`coverage`, `mutate`, `demo`, `kafka` (with `kafka_compare` and `kafka_trace`), `bench` (the
group `kreplica bench`: one subcommand per benchmark, with `bench_validate` for conform and
tlc, `bench_kafka` for the real-cluster ones and `bench_swarm` for `kreplica fuzz --master`),
`outputs` (output paths checked before long work), `spark_options` (the `--conf` option the
Spark-running subcommands share), `console` (how every subcommand prints). `main` imports a
subcommand's module only when it runs.

May import: every other room. No other room imports it.
"""
