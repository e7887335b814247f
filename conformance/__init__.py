"""kreplica.conformance: TLC runner, ITF traces, trace validation and the `kreplica` CLI."""
