"""`kreplica explain TRACE`: a trace as a picture, in the terminal, as PNG or SVG, and as an
HTML page that steps through the run."""

from __future__ import annotations

from pathlib import Path

import click

from kreplica.conformance.cli.console import console as make_console
from kreplica.conformance.cli.replay import check_vocabulary
from kreplica.conformance.errors import EXIT_OK, TraceError, file_error
from kreplica.conformance.explain import figure, html, terminal
from kreplica.conformance.explain.rejection import find_row, rejection_of
from kreplica.conformance.explain.timeline import (
    LONG_GAP_NS,
    TimelineError,
    timeline,
    with_rejection,
)
from kreplica.conformance.explain.window import MAX_FRAMES, window
from kreplica.conformance.tla.itf import printable, read_named_trace

EPILOG = """\b
Examples:
  kreplica explain traces/golden/S1_HwTruncation.itf.json
                                     every step in the terminal
  kreplica explain out/fuzz/early-ack-s0.itf.json --png build/early-ack.png --svg build/e.svg
  kreplica explain traces/golden/S3_Kip101FastFailover.itf.json --html build/s3.html
                                     a page: previous/next, a slider, each step's diff
  kreplica explain long.itf.json --window 20 --step 5000
                                     20 steps ending a few after step 5000
  kreplica explain out/kafka/run.itf.json --steps 90:140 --long-gap 100
                                     a real-Kafka trace: steps 90 to 140, its
                                     idle fetch round trips folded, gaps of
                                     100 ms or more in yellow
  kreplica explain bad.itf.json --results out/conform --html build/bad.html
                                     a trace conform rejected: the step, the
                                     variables logged against allowed, the
                                     false conjunct of the spec

\b
TRACE is an ITF file: a TLC counterexample (kreplica check), a golden trace
(traces/golden), a failing run kreplica fuzz saved, a real-Kafka trace; or
one line of a JSON-lines corpus, as PATH:LINE (the ids kreplica conform
prints).

One lane per replica: its log as cells coloured by leader epoch and labelled with
record ids, its HW (| in the terminal, a green bar in pictures), LEO, role and
ISR. Marked in red where they happen: an acknowledged record a replica loses,
replicas that diverge, an HW that moves back, the step where an invariant
breaks, the step kreplica conform rejected (--results). A trace longer than
--window steps is shown as a window that ends a few steps after its first
broken invariant or rejected step (or at its end), and says so; --steps A:B
shows the steps from A to B instead.

\b
A real-Kafka trace (kreplica's agent) observes only some variables and stamps
each step: the gap since the step before (+12.3 ms) and the time since the
first (t 1.234 s) stand beside each step, a gap of --long-gap or more stands
out, a value no hook saw at a step is ?, and each run of fetch round trips
that change nothing observable is one row (--no-fold: every step). The
controller's view (the leader it elected, its epoch, its ISR, the brokers it
believes alive) is a lane of its own, for every trace that has it.

\b
Exit codes:
  0  the picture was drawn
  2  bad input: a missing, truncated or non-ITF trace, an unknown variable or
     action, a value of another type than the spec's, an unwritable --png,
     --svg or --html, a --png/--svg/--html path without that suffix, --results
     that are not conform's results or have no row for TRACE, --steps past the
     trace's end or with --step
"""


def parse_steps(text: str | None, count: int) -> tuple[int, int] | None:
    """`A:B`, `A:` or `:B` as (A, B), both steps of a trace of `count` (BadParameter if
    not)."""
    if text is None:
        return None
    first, sep, last = text.partition(":")
    try:
        start = int(first) if first.strip() else 0
        end = int(last) if last.strip() else count - 1
    except ValueError:
        start = end = -1
    if not sep or start < 0 or end < start:
        raise click.BadParameter(f"{printable(text)} is not A:B (steps A to B, A <= B)",
                                 param_hint="--steps")  # fmt: skip
    if end >= count:
        raise click.BadParameter(f"the trace has {count} steps", param_hint="--steps")
    return start, end


@click.command(name="explain", epilog=EPILOG, short_help="Draw a trace as a picture.")
@click.argument("trace_path", metavar="TRACE", type=click.Path(path_type=Path))
@click.option("--png", "png", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the picture as PNG to this file.")  # fmt: skip
@click.option("--svg", "svg", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the picture as SVG to this file.")  # fmt: skip
@click.option("--html", "page", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write a self-contained HTML page that steps through the run.")  # fmt: skip
@click.option("--window", "size", type=click.IntRange(min=1), default=MAX_FRAMES,
              show_default=True, help="Most steps shown.")  # fmt: skip
@click.option("--step", "around", type=click.IntRange(min=0), default=None,
              help="End the window a few steps after this one (default: the first "
              "broken invariant).")  # fmt: skip
@click.option("--steps", "steps_text", metavar="A:B", default=None,
              help="Show the steps from A to B (A: or :B: to the end, from the start); at "
              "most --window rows of them.")  # fmt: skip
@click.option("--fold/--no-fold", "folded", default=None,
              help="Fold each run of fetch round trips that change nothing observable into "
              "one row  [default: for a real-Kafka trace]")  # fmt: skip
@click.option("--long-gap", "long_gap", type=click.FloatRange(min=0), default=LONG_GAP_NS / 1e6,
              show_default=True, metavar="MS",
              help="A gap between steps of this many milliseconds or more stands out "
              "(a trace whose steps carry wall-clock stamps).")  # fmt: skip
@click.option("--results", type=click.Path(path_type=Path),
              help="The results of a kreplica conform run (its --out, or its results.json) "
              "that rejected TRACE: mark the pinpointed step, the variables that differ "
              "(logged against allowed), and the false conjunct.")  # fmt: skip
@click.option("--quiet", is_flag=True, help="Draw no picture in the terminal.")
def explain_command(
    trace_path: Path,
    png: Path | None,
    svg: Path | None,
    page: Path | None,
    size: int,
    around: int | None,
    steps_text: str | None,
    folded: bool | None,
    long_gap: float,
    results: Path | None,
    quiet: bool,
) -> int:
    """Draw TRACE: one lane per replica, the marks that matter in red."""
    for path, suffix in ((png, ".png"), (svg, ".svg"), (page, ".html")):
        if path is not None and path.suffix.lower() != suffix:
            raise click.BadParameter(f"{printable(str(path))} does not end in {suffix}")
    name = printable(str(trace_path))
    trace = read_named_trace(str(trace_path))  # a file, or a corpus line
    try:
        check_vocabulary(trace)
        line = timeline(trace, printable(trace_path.name), round(long_gap * 1e6))
        rejection = None if results is None else rejection_of(find_row(results, trace_path))
        if rejection is not None:
            line = with_rejection(line, rejection)
    except (TraceError, TimelineError) as err:
        raise TraceError(f"{name}: {err}") from None
    if around is not None and around >= len(line.frames):
        raise click.BadParameter(f"the trace has {len(line.frames)} steps", param_hint="--step")
    if around is not None and steps_text is not None:
        raise click.BadParameter("give --steps or --step, not both", param_hint="--steps")
    steps = parse_steps(steps_text, len(line.frames))
    shown = window(line, size, around, steps=steps, folded=folded)
    if not quiet:
        terminal.render(line, shown, make_console())
    for path, writer in ((png, figure.save), (svg, figure.save), (page, html.save)):
        if path is not None:
            try:
                writer(line, shown, path)
            except OSError as err:
                raise file_error("write", path, err) from None
            make_console(stderr=True).print(f"wrote {printable(str(path))}")
    return EXIT_OK
