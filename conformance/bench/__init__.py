"""The benchmark commands, each a `python -m kreplica.conformance.bench.NAME` program whose
figures docs/ quotes beside the command: `impl` (simulated messages per second), `fuzz` (fuzzer
throughput and time to detection), `conform` (trace events checked per second), `tlc` (one TLC
process's cost per event), `hidden` (what a hidden variable costs), `checkpoints` (how often a
power loss leaves an HW checkpoint above the log that survived).

May import: `fuzz`, `validate`, `bridge`, `tla`, `errors`, and `kreplica.impl`. `cli` may not be
imported; a benchmark that times the CLI runs it as a process.
"""
