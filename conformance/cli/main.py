"""The `kreplica` command line: the click group, and the one place where an error becomes one
stderr line and an exit code. Each subcommand lives in its own module of this room."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import FrameType
from typing import Any

import click

from kreplica.conformance.cli.check import check
from kreplica.conformance.cli.conform import conform_command
from kreplica.conformance.cli.fuzz import fuzz
from kreplica.conformance.cli.replay import replay_command
from kreplica.conformance.errors import (
    EXIT_OK,
    PROG,
    KreplicaError,
)


def error_line(message: str) -> None:
    """Print one `kreplica: error: ...` line on stderr."""
    click.echo(f"{PROG}: error: {message}", err=True)


class KreplicaGroup(click.Group):
    """A click group that turns every user mistake into one stderr line and an exit code."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """Run the command line; exit with the command's exit code."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        with _terminate_as_interrupt():
            code = self._main(args, prog_name, complete_var, **extra)
        sys.exit(code)

    def _main(
        self,
        args: Sequence[str] | None,
        prog_name: str | None,
        complete_var: str | None,
        **extra: Any,
    ) -> int:
        """Run the command; return its exit code, reporting errors as one stderr line."""
        try:
            code = super().main(args, prog_name or PROG, complete_var, False, **extra)
        except click.ClickException as err:
            if type(err).__name__ == "NoArgsIsHelpError":  # bare `kreplica`: show the help
                err.show()
                return err.exit_code
            ctx = getattr(err, "ctx", None)
            where = ctx.command_path if isinstance(ctx, click.Context) else PROG
            error_line(f"{err.format_message()} (see '{where} --help')")
            return err.exit_code
        except click.Abort:
            error_line("interrupted")
            return 130
        except KreplicaError as err:
            error_line(str(err))
            return err.exit_code
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


@click.group(name=PROG, cls=KreplicaGroup, context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """kreplica: a model-checked reference implementation of Kafka partition replication."""


main.add_command(check)
main.add_command(replay_command)
main.add_command(fuzz)
main.add_command(conform_command)
