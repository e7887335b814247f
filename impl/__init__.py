"""kreplica.impl: a sans-IO reference implementation of Kafka 2.6.3 partition replication.

Docstrings here cite Kafka's replication rules as R1-R17 and its known bad scenarios as S1-S14;
docs/kafka-rules.md explains each one, with the Kafka 2.6.3 method it comes from. docs/impl.md maps
every module and method to its Kafka counterpart. This package imports nothing else of kreplica,
and no clock, thread, socket or process module (tests/test_layout.py holds it to that).
"""
