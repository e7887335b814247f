"""kreplica.impl: a sans-IO reference implementation of Kafka 2.6 partition replication."""
