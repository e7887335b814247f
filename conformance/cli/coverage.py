"""`kreplica coverage`: map corpora onto a small config's state graph and report what they
covered (tables on stdout, progress on stderr; JSON and a picture on request).

The engine is `kreplica.conformance.coverage` (graph, mapping, report, picture, spark): call it
from Python rather than this command, which exits instead of returning."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from kreplica.conformance.cli.console import console as make_console
from kreplica.conformance.coverage.graph import DEFAULT_CONFIG, StateGraph, load_state_graph
from kreplica.conformance.coverage.mapping import (
    Coverage,
    GraphIndex,
    accumulate,
    decode_item,
    map_trace,
)
from kreplica.conformance.coverage.picture import draw
from kreplica.conformance.coverage.report import CoverageReport, build_report
from kreplica.conformance.errors import KreplicaError, TraceError, file_error
from kreplica.conformance.tla.itf import ItfTrace, printable
from kreplica.conformance.tla.specs import resolve_spec_dir
from kreplica.conformance.validate.sources import iter_local, local_files

EPILOG = """\b
Examples:
  kreplica coverage build/cov/c.jsonl --picture build/cov/coverage.png
                                              a corpus of kreplica fuzz --replicas 2
                                              --no-network-faults --no-unclean
  kreplica coverage a.jsonl b.jsonl traces/   several corpora: the union
  kreplica coverage big.jsonl --spark         the traces mapped on Spark
  kreplica coverage p.jsonl --config CoveragePowerLoss --json build/cov/p.json

\b
A CORPUS is a JSON-lines file of ITF traces (kreplica fuzz --corpus), an
.itf.json file, or a directory searched for both. The graph is TLC's dump of
--config (spec/<NAME>.cfg), cached in build/coverage/ (outside a checkout:
~/.cache/kreplica/coverage) by the sha256 of the spec and the config; the first
run of a config takes TLC's time (CoverageCrash: about 30 s). docs/coverage.md
explains the report.

\b
Exit codes:
  0  the report was written
  2  bad input: a missing corpus, a file that is not an ITF trace, an
     unknown config, no Java, TLC could not dump the graph, an unwritable
     --out, --json or --picture
  130  interrupted (Ctrl-C)
"""


def _progress(console: Console) -> Progress:
    """A spinner with a count of traces, on stderr."""
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TextColumn("{task.completed:,} traces"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


def _traces(corpora: tuple[str, ...]) -> Iterator[ItfTrace]:
    """Every trace of the corpora, decoded (TraceError at the first that is not one)."""
    for item in iter_local(local_files(list(corpora))):
        yield decode_item(item)


def map_in_process(corpora: tuple[str, ...], index: GraphIndex, bar: Progress) -> Coverage:
    """The Coverage of every trace of the corpora, mapped here, one trace at a time."""
    task = bar.add_task("mapping traces onto the graph", total=None)
    total = Coverage()
    for trace in _traces(corpora):
        accumulate(total, map_trace(trace, index))
        bar.advance(task)
    return total


def _percent(part: int, whole: int) -> str:
    """`part/whole (p%)`."""
    share = f" ({100 * part / whole:.1f}%)" if whole else ""
    return f"{part:,}/{whole:,}{share}"


def render(report: CoverageReport, graph: StateGraph, console: Console) -> None:
    """Print the report as tables (stdout)."""
    c = report.counts
    summary = Table(title=f"coverage of {report.config} ({graph.tlc_states:,} TLC states)")
    for column in ("", "covered", "notes"):
        summary.add_column(column)
    summary.add_row("states", _percent(report.states_covered, report.states),
                    f"{c['states']:,} trace states: {c['states_outside']:,} outside the bounds, "
                    f"{c['states_unmatched']:,} within them but not in the graph")  # fmt: skip
    summary.add_row("edges", _percent(report.edges_covered, report.edges),
                    f"{c['steps']:,} steps, {c['steps_covered']:,} on a graph edge")  # fmt: skip
    absent = ", ".join(report.actions_absent) or "none"
    summary.add_row("actions", _percent(report.actions_covered, len(report.actions)),
                    f"not in this graph: {absent}")  # fmt: skip
    summary.add_row("traces", f"{c['traces']:,}",
                    f"{c['traces_outside']:,} recorded with other constants")  # fmt: skip
    console.print(summary)
    actions = Table(title="edges per action")
    for column in ("action", "edges", "taken"):
        actions.add_column(column, justify="left" if column == "action" else "right")
    for row in sorted(report.actions, key=lambda r: (r.covered / r.edges, r.action)):
        actions.add_row(row.action, f"{row.edges:,}", _percent(row.covered, row.edges))
    console.print(actions)
    witnesses = Table(title="witnesses (states where the predicate is false)")
    for column in ("witness", "states", "reached"):
        witnesses.add_column(column)
    for w in report.witnesses:
        witnesses.add_row(w.witness, f"{w.states:,}", f"{w.reached:,}" if w.states else "-")
    console.print(witnesses)
    for missed in report.missed:
        console.print(Text(f"never taken: {missed.action}, shortest path ({len(missed.path)} "
                           f"steps): {' -> '.join(missed.path)}"))  # fmt: skip
    for w in report.witnesses:
        if w.path:
            console.print(Text(f"never reached: {w.witness}, shortest path ({len(w.path)} "
                               f"steps): {' -> '.join(w.path)}"))  # fmt: skip


def _write_json(path: Path, report: CoverageReport, coverage: Coverage, graph: StateGraph) -> None:
    """The report, the covered sets and the graph's identity, as one JSON file."""
    body: dict[str, Any] = {
        "config": graph.config,
        "graph_sha256": graph.digest,
        "report": report.to_json(),
        "coverage": coverage.to_json(),
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(body) + "\n", encoding="utf-8")
    except OSError as err:
        raise file_error("write", path, err) from None


@click.command("coverage", epilog=EPILOG)
@click.argument("corpora", nargs=-1, required=True, metavar="CORPUS...")
@click.option("--config", "config_name", default=DEFAULT_CONFIG, show_default=True,
              metavar="NAME", help="The model config whose state graph is covered.")  # fmt: skip
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Directory for coverage.json and coverage.png.")  # fmt: skip
@click.option("--picture", type=click.Path(dir_okay=False, path_type=Path),
              help="Draw the coverage into this .png or .svg file.")  # fmt: skip
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the report and the covered node and edge ids as JSON.")  # fmt: skip
@click.option("--spark/--no-spark", default=False, show_default=True,
              help="Map the traces on Spark (local[*] unless --master).")  # fmt: skip
@click.option("--master", default="local[*]", show_default=True, help="Spark master URL.")
@click.option("--spec-dir", type=click.Path(path_type=Path), help="Spec directory.")
@click.option("--java", help="Java executable [env KREPLICA_JAVA].")
def coverage_command(
    corpora: tuple[str, ...],
    config_name: str,
    out: Path | None,
    picture: Path | None,
    json_path: Path | None,
    spark: bool,
    master: str,
    spec_dir: Path | None,
    java: str | None,
) -> int:
    """Report how much of a small config's state graph some corpora covered."""
    errors = make_console(stderr=True)
    files = local_files(list(corpora))  # a missing corpus fails before TLC runs
    graph = load_state_graph(
        resolve_spec_dir(spec_dir), config_name, java=java, on_phase=lambda s: errors.print(s)
    )
    index = GraphIndex.of(graph)
    start = time.monotonic()
    if spark:
        from kreplica.conformance.coverage.spark import map_on_spark

        errors.print(f"mapping {len(files)} file(s) on Spark ({master})")
        coverage = map_on_spark(files, index, master)
    else:
        with _progress(errors) as bar:
            coverage = map_in_process(corpora, index, bar)
    if not coverage.traces:
        raise TraceError(f"no traces in {', '.join(printable(c) for c in corpora)}")
    report = build_report(graph, coverage)
    render(report, graph, make_console())
    errors.print(f"{coverage.traces:,} traces mapped in {time.monotonic() - start:.1f} s")
    if out is not None:
        json_path = json_path or out / "coverage.json"
        picture = picture or out / "coverage.png"
    if json_path is not None:
        _write_json(json_path, report, coverage, graph)
    if picture is not None:
        _draw(report, picture)
    return 0


def _draw(report: CoverageReport, path: Path) -> None:
    """Draw the picture; an unwritable path or an unknown suffix is one line, exit 2."""
    if path.suffix.lower() not in (".png", ".svg"):
        raise KreplicaError(f"--picture {printable(str(path))}: use a .png or .svg file")
    try:
        draw(report, path)
    except OSError as err:
        raise file_error("write", path, err) from None
