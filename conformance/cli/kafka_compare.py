"""`kreplica kafka compare`: each fault schedule on kreplica's simulator and on a real Kafka 2.6.3
cluster, their outcomes side by side, the agreement rates, and the outcome table; and `kreplica
kafka predict`: the set of outcomes the model allows for each schedule, with no cluster."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from kreplica.conformance.cli.console import console as make_console
from kreplica.conformance.cli.kafka import RUNS_DIR, cluster_options, layout_for
from kreplica.conformance.cli.outputs import check_output_file
from kreplica.conformance.errors import EXIT_OK, EXIT_UNEXPECTED, KreplicaError
from kreplica.conformance.kafka.cluster import (
    NodeFailed,
    StartTimeout,
    fresh_run_dir,
)
from kreplica.conformance.kafka.compare import (
    Comparison,
    RunFailed,
    RunReal,
    SetPlan,
    agreement,
    agreement_lines,
    campaign,
    markdown_table,
)
from kreplica.conformance.kafka.convert import ConvertError
from kreplica.conformance.kafka.events import EventsError
from kreplica.conformance.kafka.generate import random_schedules
from kreplica.conformance.kafka.install import Installation, find_installation
from kreplica.conformance.kafka.outcome import Outcome
from kreplica.conformance.kafka.predict import DEFAULT_RUNS, key_text, predict_set
from kreplica.conformance.kafka.real import run_schedule
from kreplica.conformance.kafka.schedule import Schedule, ScheduleError, load_schedule
from kreplica.conformance.kafka.trace import find_agent, trace_run
from kreplica.conformance.tla.itf import write_text_atomic

COMPARE_EPILOG = """\b
Examples:
  kreplica kafka compare schedules/
  kreplica kafka compare --random 50 --seed 1 --journal out/campaign.jsonl
  kreplica kafka compare schedules/ --random 50 --report out/real-kafka-table.md
  kreplica kafka compare schedules/ --trace out/compare-traces

\b
A journal keeps one JSON line per finished schedule: run the same command again
after a crash or Ctrl-C and it goes on from the first schedule not in it (a
journal holding every schedule runs no cluster: it judges the runs again).

\b
A real outcome agrees when it is in the schedule's predicted set: the outcomes of
the single prediction and of --runs jittered runs of the simulator (kreplica
kafka predict). The single prediction's own agreement is reported beside it.

\b
Exit codes:
  0  every schedule ran on both, and every real outcome is in its predicted set
  1  some real outcome is outside its set, or a real run failed (its row says why)
  2  bad input: a missing or malformed schedule, a journal that is not one
  4  the environment lacks Java 11, the Kafka jars, iptables or root
  5  a port the cluster needs is in use (see --port-base)
  130  interrupted: the journal keeps every finished schedule
"""


def schedules_from(paths: tuple[Path, ...], random: int, seed: int) -> list[Schedule]:
    """The schedules of the given files and directories (*.json), then `random` generated ones;
    ScheduleError for a bad one, KreplicaError for two with one name."""
    found: list[Schedule] = []
    for path in paths:
        if path.is_dir():
            found += [load_schedule(p) for p in sorted(path.glob("*.json"))]
        else:
            found.append(load_schedule(path))
    found += random_schedules(seed, random)
    names = [s.name for s in found]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise KreplicaError(f"two schedules are named {twice[0]!r}: names key the journal")
    if not found:
        raise ScheduleError("no schedules: name files or directories, or give --random N")
    return found


def real_runner(
    install: Installation,
    runs: Path,
    port_base: int,
    start_timeout: float,
    agent: Path | None = None,
    traces: Path | None = None,
) -> RunReal:
    """Run a schedule on a fresh real cluster in `runs`/<schedule name>; with `agent`, record
    the brokers' steps and convert them into `traces`/traces/<schedule name>.itf.json."""

    def run(schedule: Schedule) -> Outcome:
        run_dir = fresh_run_dir((runs / schedule.name).absolute())
        try:
            real = run_schedule(
                schedule, install, layout_for(run_dir, port_base), start_timeout, agent=agent
            )
        except (StartTimeout, NodeFailed) as err:
            raise RunFailed(str(err)) from None
        if agent is not None and traces is not None:
            try:
                trace_run(run_dir, schedule, traces)
            except (EventsError, ConvertError) as err:
                raise RunFailed(f"its recording could not be converted: {err}") from None
        return real.outcome

    return run


F = TypeVar("F", bound=Callable[..., Any])


def schedule_options(verb: str) -> Callable[[F], F]:
    """The schedules to take: files and folders, and --random N of --seed S."""

    def decorate(command: F) -> F:
        command = click.option(
            "--seed",
            type=click.IntRange(min=0),
            default=0,
            show_default=True,
            help="The random schedules' seed.",
        )(command)
        command = click.option(
            "--random",
            "random_count",
            type=click.IntRange(min=0),
            default=0,
            help=f"Also {verb} this many random schedules.",
        )(command)
        return click.argument("paths", nargs=-1, type=click.Path(exists=True, path_type=Path))(
            command
        )

    return decorate


def set_options(least_runs: int, runs_help: str) -> Callable[[F], F]:
    """How predicted sets are made: --runs and --jitter-seed."""

    def decorate(command: F) -> F:
        command = click.option(
            "--jitter-seed",
            type=click.IntRange(min=0),
            default=0,
            show_default=True,
            help="The jittered runs' seed.",
        )(command)
        return click.option(
            "--runs",
            type=click.IntRange(min=least_runs),
            default=DEFAULT_RUNS,
            show_default=True,
            help=runs_help,
        )(command)

    return decorate


@click.command(name="compare", epilog=COMPARE_EPILOG)
@schedule_options("run")
@click.option(
    "--journal",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("out/kafka-compare.jsonl"),
    show_default=True,
    help="One JSON line per finished schedule; an existing journal is resumed.",
)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=RUNS_DIR / "compare",
    show_default=True,
    help="Each schedule's run directory (configs, data, logs) goes under it, by name.",
)
@click.option(
    "--report",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the outcome table (Markdown) here.",
)
@click.option(
    "--trace",
    "trace_out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Also record the real runs with the kreplica agent and write each as a trace of the "
    "spec into DIR/traces/ (check them with kreplica conform, or kreplica kafka trace).",
)
@set_options(
    0, "Jittered simulator runs per schedule for its predicted set (0: the single prediction only)."
)
@cluster_options
def compare_command(
    paths: tuple[Path, ...],
    random_count: int,
    seed: int,
    journal: Path,
    workdir: Path,
    report: Path | None,
    trace_out: Path | None,
    runs: int,
    jitter_seed: int,
    port_base: int,
    start_timeout: float,
    java: Path | None,
    kafka_lib: Path | None,
) -> int:
    """Run fault schedules on kreplica and on a real Kafka 2.6.3 cluster; compare outcomes."""
    schedules = schedules_from(paths, random_count, seed)
    install = find_installation(java, kafka_lib)
    agent = find_agent(None) if trace_out is not None else None
    check_output_file(journal, "the journal to")
    if report is not None:
        check_output_file(report, "the outcome table to")
    out = make_console()
    progress = Progress(
        TextColumn("[bold]comparing"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[tally]}"),
        TimeElapsedColumn(),
        console=out,
        transient=True,
        disable=not out.is_terminal,
    )
    task = progress.add_task("", total=len(schedules), tally="")
    done: list[Comparison] = []

    def shown(result: Comparison, resumed: bool) -> None:
        done.append(result)
        agree, differ, failed = agreement(done)
        progress.update(task, advance=1, tally=f"{agree} agree, {differ} differ, {failed} failed")
        verdict = _verdict(result)
        where = " (from the journal)" if resumed else f" ({result.seconds:.0f} s)"
        progress.console.print(f"{result.schedule.name}: {verdict}{where}", soft_wrap=True)

    with progress:
        results = campaign(
            schedules,
            real_runner(install, workdir, port_base, start_timeout, agent, trace_out),
            journal,
            shown,
            SetPlan(runs, jitter_seed),
        )
    for line in agreement_lines(results):
        out.print(line, soft_wrap=True)
    out.print(f"journal: {journal}", soft_wrap=True)
    agree = agreement(results)[0]
    if report is not None:
        summary = "".join(f"\n{line}\n" for line in agreement_lines(results))
        write_text_atomic(report, markdown_table(results) + summary)
        out.print(f"outcome table: {report}")
    return EXIT_OK if agree == len(results) else EXIT_UNEXPECTED


def _verdict(result: Comparison) -> str:
    """One schedule's verdict as a line: in the set (and the single prediction's agreement)."""
    if result.real is None:
        return f"failed: {result.error}"
    single = "single agrees" if result.agree_single else "single: " + "; ".join(result.differences)
    allowed = result.predicted_set
    if allowed is None:
        return "agree" if result.agree else "DIFFER: " + "; ".join(result.differences)
    where = "in" if result.agree else "OUTSIDE"
    return f"{where} the predicted set of {len(allowed.outcomes)} ({single})"


PREDICT_EPILOG = """\b
Examples:
  kreplica kafka predict schedules/acks-all-leader-crash.json
  kreplica kafka predict schedules/ --random 100 --seed 1 --json out/predicted.json

\b
Each schedule runs once unjittered (the single prediction) and --runs times with
what a real run leaves to chance drawn from measured ranges (message latency, the
ISR task's phase, session expiry, which broker hosts the controller, failover and
start-up times, the order of concurrent work; docs/real-kafka.md). The outcomes,
projected onto the compared fields, are the set a real run must fall in.

\b
Exit codes:
  0  every set predicted
  2  bad input: a missing or malformed schedule, an unwritable --json file
"""


@click.command(name="predict", epilog=PREDICT_EPILOG)
@schedule_options("predict")
@set_options(1, "Jittered simulator runs per schedule.")
@click.option(
    "--json",
    "json_out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write every set (outcomes, run counts, time) as JSON here.",
)
def predict_command(
    paths: tuple[Path, ...],
    random_count: int,
    seed: int,
    runs: int,
    jitter_seed: int,
    json_out: Path | None,
) -> int:
    """Predict the set of outcomes real Kafka 2.6.3 may end a fault schedule with."""
    schedules = schedules_from(paths, random_count, seed)
    if json_out is not None:
        check_output_file(json_out, "the predicted sets to")
    out = make_console()
    progress = Progress(
        TextColumn("[bold]predicting"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=out,
        transient=True,
        disable=not out.is_terminal,
    )
    task = progress.add_task("", total=len(schedules) * runs)
    found = []
    with progress:
        for schedule in schedules:
            allowed = predict_set(
                schedule, runs, jitter_seed, on_run=lambda _: progress.advance(task)
            )
            found.append(allowed)
            progress.console.print(
                f"{schedule.name}: {len(allowed.outcomes)} outcome(s) in "
                f"{allowed.seconds:.2f} s; single: {key_text(allowed.single)}",
                soft_wrap=True,
            )
            for key, count in allowed.counts:
                progress.console.print(f"  {count:5d} of {runs}  {key_text(key)}", soft_wrap=True)
    if json_out is not None:
        text = json.dumps([s.to_json() for s in found], indent=1) + "\n"
        write_text_atomic(json_out, text)
        out.print(f"predicted sets: {json_out}")
    return EXIT_OK
