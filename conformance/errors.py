"""Project exceptions, exit codes, and `run_command`: the one place where an error becomes one
stderr line and an exit code, for the `kreplica` CLI and the fixture recorders alike.

This module may import only the standard library and click: every room imports it. click is
imported where a command runs (`run_command`), not with the module, which a Spark task's
Python imports too (it costs a worker about a third of a second)."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from os import PathLike
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    import click

PROG = "kreplica"
"""The command's name, as its messages print it."""

# Exit codes of the `kreplica` CLI and of the fixture recorders under tests/fixtures/tlc/
# (documented in docs/cli.md and in each command's --help).
EXIT_OK = 0
EXIT_UNEXPECTED = 1
EXIT_BAD_INPUT = 2
EXIT_TIMEOUT = 3
EXIT_INTERRUPTED = 130
"""Ctrl-C, SIGTERM or SIGHUP (128 + SIGINT, as a shell reports it)."""


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


class BenchmarkFailed(KreplicaError):
    """A benchmark's own work failed (the correct protocol broke, a checking process failed):
    its figures would mean nothing."""

    exit_code = EXIT_UNEXPECTED


def file_error(verb: str, path: str | PathLike[str], err: OSError) -> KreplicaError:
    """`cannot VERB PATH: REASON`, e.g. `cannot write out/x.jsonl: Permission denied`."""
    return KreplicaError(f"cannot {verb} {path}: {err.strerror or err}")


def run_command(
    command: click.Command, prog: str, args: Sequence[str] | None = None, **extra: Any
) -> NoReturn:
    """Run a click command (standalone mode off) and exit with its exit code.

    The command's return value is the exit code (None: 0). Every problem the user can act on
    ends in one line `PROG: error: MESSAGE` on stderr, never a traceback: a usage error (with
    `(see 'PROG --help')`, 2), another `click.ClickException` (its `exit_code`), a
    `KreplicaError` (its `exit_code`), an `OSError` that escaped (`cannot access PATH: REASON`,
    2) and Ctrl-C, SIGTERM or SIGHUP (`interrupted`, 130).
    `prog` is also the program name usage and help print. `args` (default: sys.argv[1:]) and
    `extra` go to `click.Command.main`."""
    with _terminate_as_interrupt():
        code = _exit_code(command, prog, args, **extra)
    sys.exit(code)


def error_line(prog: str, message: str) -> None:
    """Print one `PROG: error: MESSAGE` line on stderr."""
    import click

    click.echo(f"{prog}: error: {message}", err=True)


def _exit_code(command: click.Command, prog: str, args: Sequence[str] | None, **extra: Any) -> int:
    """Run the command; return its exit code, reporting errors as one stderr line."""
    import click

    try:
        code = command.main(args, prog, standalone_mode=False, **extra)
    except click.UsageError as err:
        if type(err).__name__ == "NoArgsIsHelpError":  # a bare group: show the help
            err.show()
            return err.exit_code
        where = err.ctx.command_path if err.ctx is not None else prog
        error_line(prog, f"{err.format_message()} (see '{where} --help')")
        return err.exit_code
    except click.ClickException as err:  # not a usage mistake: --help would not help
        error_line(prog, err.format_message())
        return err.exit_code
    except (click.Abort, KeyboardInterrupt):
        error_line(prog, "interrupted")
        return EXIT_INTERRUPTED
    except KreplicaError as err:
        error_line(prog, str(err))
        return err.exit_code
    except OSError as err:  # a file the command did not check: name it, if the OS did
        if err.filename is None:
            error_line(prog, f"{err.strerror or err}")
        else:
            error_line(prog, str(file_error("access", err.filename, err)))
        return EXIT_BAD_INPUT
    return code if isinstance(code, int) else EXIT_OK


@contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """Turn SIGTERM/SIGHUP into KeyboardInterrupt (main thread only), so checkers get killed."""
    saved: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            saved[sig] = signal.signal(sig, _interrupt)
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """Signal handler: behave like Ctrl-C."""
    raise KeyboardInterrupt
