"""The benchmarks' engines, one module per `kreplica bench NAME` subcommand (`cli.bench` parses
and renders), whose figures docs/ quotes beside the command: `impl` (simulated messages per
second), `fuzz` (fuzzer throughput and time to detection), `conform` (trace events checked per
second), `tlc` (one TLC process's cost per event), `hidden` (what a hidden variable costs),
`checkpoints` (how often a power loss leaves an HW checkpoint above the log that survived),
`search` (abstract-state coverage against time: the default campaign of stages, the correct
protocol's alone, guided or not), `kafka` (the real-cluster
harness: start-up, schedules per hour), `kafka_agent` (`kreplica bench kafka-agent`: what the
Java agent costs a broker) and `swarm` (`kreplica fuzz --master`'s steps per second on local[1]
and local[2], side by side). They return results and rows; none parses options or prints.

May import: `kafka`, `fuzz`, `validate`, `tla`, `errors`, and `kreplica.impl`. `cli` may not be
imported; a benchmark that times the CLI runs it as a process (`python -m kreplica`).
"""
