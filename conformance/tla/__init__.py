"""The spec's side: TLC and Apalache, their output, TLA+ values, ITF traces, model configs.

Holds: `tlc` (run TLC, `tlc_output` parses what it prints), `distributed` (TLC's own
distributed mode on loopback: a TLCServer and its TLCWorkers over RMI), `apalache`, `tlavalue`
(TLA+ values as Python values, printed and parsed as TLC does), `itf` (the trace format),
`specs` (model configs and suites in spec/), `suite` (a suite of configs checked: the engine of
`kreplica check`), `vocabulary` (the spec's action and variable names).

May import: `kreplica.conformance.errors` only. It knows nothing of the implementation, so
trace validation on a Spark worker loads none of `kreplica.impl` to learn the spec's names.
"""
