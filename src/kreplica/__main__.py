"""`python -m kreplica ARGS` is `kreplica ARGS`: how a room below the CLI (a mutation campaign,
a benchmark) runs the command in a fresh process without importing the CLI's room."""

from kreplica.conformance.cli.main import main

main()
