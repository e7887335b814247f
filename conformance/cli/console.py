"""The consoles the subcommands print with: rich on a terminal; elsewhere (CI, a pipe, a file)
as wide as a line needs, so that no path is split and no action name cut (rich would wrap at
80 columns), and no colour codes."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence

from rich.console import Console

WIDE = 400
"""The width off a terminal: a table still takes only the width it needs."""


def console(stderr: bool = False) -> Console:
    """A console on stdout (or stderr) that prints text as text: no markup is read from it."""
    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else WIDE
    return Console(stderr=stderr, highlight=False, width=width, markup=False)


def markdown_table(columns: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A GitHub markdown table of `rows` under `columns`, as docs/ quotes the benchmarks."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)
