"""Mutation testing: how much of a broken implementation the fuzz + conformance pipeline catches.

Holds: `operators` (mutation operators over Python's `ast`), `sites` (every mutant of impl/'s
core modules in one order, and a seeded sample), `overlay` (a `kreplica` package with one impl
module mutated, first on a process's PYTHONPATH), `campaign` (one mutant through `kreplica fuzz`
and `kreplica conform`, run as `python -m kreplica` in that overlay), `engine` (the run: sample,
mark the equivalent ones, run the rest), `results` (results.json, rewritten after every mutant).

May import: `tla`, `errors` and `kreplica.impl`; it runs the pipeline as processes.
"""
