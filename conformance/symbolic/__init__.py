"""Symbolic checks: the implementation's pure decisions against the spec's operators, by z3.

Holds: `engine` (a bounded input space in z3, and the loop that runs the implementation on
every input in it and holds each answer against the spec operator written as a z3 formula),
`checks` (the decisions: `end_offset_for` (R3), the follower's truncation point (R6), the cut
of its log and epoch cache (R4, R6) and its become-follower trigger (R7, S7), the HW advance
(R13), the fetch isolation bound (R15), the ISR expansion guard (R11), the follower's HW update
(R8) and the acks=-1 completion (R14)).

It is a room rather than a test helper because the oracles are a second reading of the spec
(beside `tla`, which runs the spec itself) and mypy strict holds them like every other room;
the tests in tests/test_symbolic.py only choose bounds and bugs and assert.

May import: `kreplica.impl`.
"""
