"""Project exceptions: each one is a user-facing problem the CLI reports in one stderr line."""

from __future__ import annotations

PROG = "kreplica"
"""The command's name, as its messages print it."""

# Exit codes of the `kreplica` CLI (documented in docs/cli.md and in `kreplica check --help`).
EXIT_OK = 0
EXIT_UNEXPECTED = 1
EXIT_BAD_INPUT = 2
EXIT_TIMEOUT = 3


class KreplicaError(Exception):
    """A user mistake or environment problem; the CLI prints it as one line and exits."""

    exit_code: int = EXIT_BAD_INPUT


class SpecError(KreplicaError):
    """The spec directory, a model config, its header or the suites file is missing or wrong."""


class CheckerError(KreplicaError):
    """A model checker cannot run: no Java, no tla2tools.jar, no Apalache."""


class TraceError(KreplicaError):
    """An ITF trace file is missing, not JSON, truncated or not a valid ITF trace."""


class TlaValueError(KreplicaError, ValueError):
    """Text that is not a TLA+ value as TLC prints it."""
