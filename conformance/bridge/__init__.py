"""The bridge between the implementation and the spec: a run of the implementation as a trace
in the spec's vocabulary.

Holds: `projection` (impl state onto the spec's variables), `recorder` (a run as an ITF trace,
one state per spec action, and `SpecRecorder`, which leaves out the client requests the spec
does not see), `step_codec` (a simulator step as JSON), `local_partitions` (the fuzzer's
cluster: the modelled partition and its neighbours), `touch` (what a step can have changed,
known from the step: the projection and the judges skip the rest). It records and judges
nothing: the judges (`kreplica.conformance.judges`) watch the events the recorder emits.

May import: `kreplica.impl`, `kreplica.conformance.tla`, `kreplica.conformance.errors`.
"""
