"""kreplica: a model-checked reference implementation of Apache Kafka 2.6 partition replication.

This folder is the import root of the one namespace, `kreplica.*`. Its two entries are links to
the repository's top-level folders, so an import path is also a file path:

| import path            | file path (through the link)        | the folder it is       |
|------------------------|-------------------------------------|------------------------|
| `kreplica.impl.log`    | `src/kreplica/impl/log.py`          | `impl/log.py`          |
| `kreplica.conformance` | `src/kreplica/conformance/...`      | `conformance/...`      |

- `kreplica.impl`: the sans-IO implementation of Kafka's replication path and its simulator.
  It imports nothing else of kreplica.
- `kreplica.conformance`: everything that holds the implementation against the TLA+ spec in
  `spec/`, in rooms by concern (see `kreplica/conformance/__init__.py` for the rooms and the
  directions their imports may take).

docs/architecture.md draws the rooms and what flows between them.
"""
