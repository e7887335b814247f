"""Trace validation: do recorded traces conform to the spec? TLC answers, in batches.

Holds: `tracecheck` (one batch of traces through TLC, one verdict each), `trace_events` (a trace
as the check reads it: each state's action and what changed), `tlcdata` (trace data in a binary
file that the Java reader in `java/` hands to TLC), `prefixes` (what TLC printed of an event
that several traces begin with, said of each of them), `shapes` (each variable's type, from the
spec's TypeOK, for one-line errors on values of the wrong type), `sources` (ITF files and
JSON-lines corpora, read as `(trace id, text)`), `runs` (a local input laid out, and cut into
runs of one kind of trace each, a TLC process each, across batches), `conform` (the Spark and
process-pool runners), `suite_spark` (`kreplica check --master`: model configs as Spark tasks),
`locks` (the lock a run holds on its output directory), `results` (one row per trace: Parquet, JSON
lines, JUnit XML, the summary), `invariants` (`--invariant`: which state predicates, and where
a trace breaks one), `why` (the false conjunct of a rejected step).

May import: `kreplica.conformance.spark` (what every Spark job shares), `.tla`, `.errors`, and
`kreplica.impl` (for the variant registry, `kreplica.impl.variants`, alone). Not `bridge`: trace
validation needs the spec's side only, so a Spark executor that checks traces loads none of the
simulator.
"""
