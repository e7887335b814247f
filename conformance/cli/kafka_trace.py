"""`kreplica kafka trace`: real Kafka 2.6.3 runs, recorded step by step by the kreplica agent,
converted into traces of the spec, and checked like any trace (`kreplica conform`, on Spark)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from kreplica.conformance.cli.conform import conform_command
from kreplica.conformance.cli.console import console as make_console
from kreplica.conformance.cli.kafka import RUNS_DIR, cluster_options, layout_for
from kreplica.conformance.cli.kafka_compare import schedules_from
from kreplica.conformance.errors import EXIT_BAD_INPUT, EXIT_OK, EXIT_UNEXPECTED
from kreplica.conformance.kafka.cluster import NodeFailed, StartTimeout, fresh_run_dir
from kreplica.conformance.kafka.convert import ConvertError
from kreplica.conformance.kafka.events import EventsError
from kreplica.conformance.kafka.install import find_installation
from kreplica.conformance.kafka.real import run_schedule
from kreplica.conformance.kafka.schedule import Schedule
from kreplica.conformance.kafka.trace import (
    DONE_MARKER,
    Traced,
    find_agent,
    groups,
    label,
    rows_of,
    state_source,
    trace_run,
    variant_of,
)
from kreplica.conformance.tla.itf import write_text_atomic

FETCH_MAX_RECORDS = 1_000_000
"""replica.fetch.max.bytes (1 MiB) holds every record of a test's log: no limit in records."""

TRACE_EPILOG = """\b
Examples:
  kreplica kafka trace schedules/acks-all-leader-crash.json
  kreplica kafka trace schedules/ --random 100 --seed 1 --out out/kafka-trace
  kreplica kafka trace schedules/ --no-spark          # a local process pool, not Spark

\b
Each schedule's run directory (build/kafka-runs/trace/NAME) keeps the brokers'
event files (broker-N/events.jsonl); a run directory that holds a finished
recording is converted again, not run again (--rerun runs it anew), so the same
command goes on after a crash or Ctrl-C. OUT holds traces/NAME.itf.json, one
conform result set per variant (conform-VARIANT/), summary.json and report.md.

\b
Exit codes:
  0  every trace conforms to its variant of the spec
  1  some trace is rejected (report.md: the step, the broker event, the
     variables that differ, the false conjunct), or a real run failed
  2  bad input: a schedule, an event file (truncated, out of order, of another
     Kafka version, a broker missing), a trace that could not be checked
  3  a node was not ready within --start-timeout
  4  the environment lacks Java 11, the Kafka jars, the agent ('make kafka'),
     iptables or root (for partitions)
  5  a port the cluster needs is in use (see --port-base)
  130  interrupted: every JVM is stopped; finished runs are kept
"""


def _finished(run_dir: Path) -> bool:
    return (run_dir / DONE_MARKER).exists()


def record(
    schedule: Schedule,
    runs: Path,
    out: Path,
    agent: Path,
    rerun: bool,
    debug_loggers: bool,
    cluster: dict[str, Any],
) -> Traced:
    """Run the schedule with the agent (unless its recording is there), then convert it."""
    run_dir = (runs / schedule.name).absolute()
    seconds = 0.0
    if rerun or not _finished(run_dir):
        run_dir = fresh_run_dir(run_dir)
        began = time.monotonic()
        try:
            run_schedule(
                schedule,
                cluster["install"],
                layout_for(run_dir, cluster["port_base"]),
                cluster["start_timeout"],
                agent=agent,
                debug_loggers=debug_loggers,
            )
        except (StartTimeout, NodeFailed) as err:
            return Traced(schedule.name, run_dir, None, variant_of(schedule), error=str(err))
        seconds = time.monotonic() - began
        (run_dir / DONE_MARKER).write_text(f"{seconds:.1f}\n", encoding="utf-8")
    try:
        return trace_run(run_dir, schedule, out, seconds)
    except (EventsError, ConvertError) as err:
        return Traced(
            schedule.name, run_dir, None, variant_of(schedule), error=str(err), bad_input=True
        )


def check(
    traced: Sequence[Traced], out: Path, no_spark: bool, workers: int, why: int
) -> list[dict[str, Any]]:
    """Check each variant's traces with `kreplica conform`'s engine; their result rows."""
    rows: list[dict[str, Any]] = []
    ctx = click.get_current_context()
    for variant, members in sorted(groups(traced).items()):
        target = out / f"conform-{label(variant)}"
        paths = tuple(str(t.trace) for t in members)
        make_console().print(f"checking {len(paths)} trace(s) against {label(variant)}")
        ctx.invoke(
            conform_command,
            paths=paths,
            out=target,
            variants=variant,
            fetch_max_records=FETCH_MAX_RECORDS,
            no_spark=no_spark,
            workers=workers,
            why=why,
        )
        by_path = {str(Path(str(t.trace)).resolve()): t for t in members}
        for row in rows_of(target / "results.json"):
            t = by_path.get(str(Path(row["trace_id"]).resolve()))
            row["schedule"] = t.schedule if t else row["trace_id"]
            row["variant"] = label(variant)
            row["source"] = state_source(Path(row["trace_id"]), row.get("step"))
            rows.append(row)
    return rows


def report_markdown(traced: Sequence[Traced], rows: Sequence[dict[str, Any]]) -> str:
    """report.md: every trace's verdict; for every rejected one, where and why."""
    by_schedule = {r["schedule"]: r for r in rows}
    conforms = sum(1 for r in rows if r["verdict"] == "conforms")
    lines = [
        "# Real Kafka 2.6.3 traces checked against the spec",
        "",
        f"{len(traced)} runs, {len(rows)} traces checked, {conforms} conform.",
        "",
        "| schedule | variant | events | steps | verdict | step | action | variables |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for t in traced:
        r = by_schedule.get(t.schedule)
        if r is None:
            why = t.error or "no trace"
            lines.append(f"| {t.schedule} | {label(t.variant)} | {t.events} | {t.steps} | "
                         f"not checked: {why} | | | |")  # fmt: skip
            continue
        args = r.get("args") or ""
        lines.append(
            f"| {t.schedule} | {r['variant']} | {t.events} | {t.steps} | {r['verdict']} | "
            f"{r.get('step') if r.get('step') is not None else ''} | "
            f"{(r.get('action') or '')} {args} | {', '.join(r.get('variables') or [])} |"
        )
    rejected = [r for r in rows if r["verdict"] != "conforms"]
    if rejected:
        lines += ["", "## Every rejected trace", ""]
    for r in rejected:
        lines += [
            f"### {r['schedule']} ({r['variant']})",
            "",
            f"- step {r.get('step')}: {r.get('action')} {r.get('args') or ''}",
            f"- broker event: `{r.get('source', '')}`",
            f"- reason: {r.get('reason', '')}",
            f"- differing variables: {', '.join(r.get('variables') or []) or 'none'}",
            f"- false conjunct: {r.get('why_line', '')} `{r.get('why', '')}`",
            f"- diff: `{(r.get('diff') or '')[:2000]}`",
            "",
        ]
    return "\n".join(lines) + "\n"


def summary_table(traced: Sequence[Traced], rows: Sequence[dict[str, Any]]) -> Table:
    """The terminal's table: one row per schedule."""
    table = Table(title="real traces")
    for name in ("schedule", "variant", "steps", "verdict", "first rejected step"):
        table.add_column(name)
    by_schedule = {r["schedule"]: r for r in rows}
    for t in traced:
        r = by_schedule.get(t.schedule)
        if r is None:
            table.add_row(t.schedule, label(t.variant), str(t.steps), "not checked", t.error or "")
            continue
        where = ""
        if r["verdict"] != "conforms":
            where = f"{r.get('step')}: {r.get('action')} ({', '.join(r.get('variables') or [])})"
        table.add_row(t.schedule, r["variant"], str(t.steps), r["verdict"], where)
    return table


@click.command(name="trace", epilog=TRACE_EPILOG)
@click.argument("paths", nargs=-1, type=click.Path(exists=True, path_type=Path))
@click.option("--random", "random_count", type=click.IntRange(min=0), default=0,
              help="Also run this many random schedules.")  # fmt: skip
@click.option(
    "--seed", type=int, default=1, show_default=True, help="Seed of the random schedules."
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("out/kafka-trace"),
    show_default=True,
    help="Traces, result sets per variant, summary.json and report.md.",
)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=RUNS_DIR / "trace",
    show_default="build/kafka-runs/trace",
    help="Where each schedule's run directory goes.",
)
@click.option("--rerun", is_flag=True, help="Run every schedule anew, even one already recorded.")
@click.option(
    "--debug-loggers",
    is_flag=True,
    help="Also log the brokers' replication at DEBUG (server.log), to cross-check.",
)
@click.option("--no-spark", is_flag=True, help="Check with a local process pool, not Spark.")
@click.option("--workers", type=click.IntRange(min=1), default=os.cpu_count() or 1,
              show_default="cores", help="Processes for --no-spark.")  # fmt: skip
@click.option("--why", type=click.IntRange(min=0), default=3, show_default=True,
              help="Rejected traces per batch whose false conjunct is looked for.")  # fmt: skip
@click.option(
    "--agent",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The agent jar [env KREPLICA_AGENT; default: what 'make kafka' built].",
)
@cluster_options
def trace_command(
    paths: tuple[Path, ...], random_count: int, seed: int, out: Path, workdir: Path,
    rerun: bool, debug_loggers: bool, no_spark: bool, workers: int, why: int,
    agent: Path | None, port_base: int, start_timeout: float, java: Path | None,
    kafka_lib: Path | None,
) -> int:  # fmt: skip
    """Run schedules on a real Kafka 2.6.3 cluster with the kreplica agent recording every
    broker's replication steps, convert each run into a trace of the spec, and check the
    traces against it (the engine of `kreplica conform`, on Spark).

    PATH is a schedule (*.json) or a directory of them."""
    schedules = schedules_from(paths, random_count, seed)
    install = find_installation(java, kafka_lib)
    jar = find_agent(agent)
    console = make_console()
    cluster = {"install": install, "port_base": port_base, "start_timeout": start_timeout}
    traced: list[Traced] = []
    for number, schedule in enumerate(schedules, start=1):
        t = record(schedule, workdir, out, jar, rerun, debug_loggers, cluster)
        traced.append(t)
        what = t.error or f"{t.events} events, {t.steps} steps"
        console.print(f"[{number}/{len(schedules)}] {schedule.name}: {what}", soft_wrap=True)
    rows = check(traced, out, no_spark, workers, why)
    console.print(summary_table(traced, rows))
    write_text_atomic(out / "report.md", report_markdown(traced, rows))
    summary = [
        {
            "schedule": t.schedule,
            "variant": label(t.variant),
            "run_dir": str(t.run_dir),
            "trace": str(t.trace) if t.trace else None,
            "events": t.events,
            "steps": t.steps,
            "seconds": round(t.seconds, 1),
            "error": t.error,
            "notes": list(t.notes),
        }
        for t in traced
    ]
    write_text_atomic(out / "summary.json", json.dumps({"runs": summary, "rows": rows}, indent=1))
    console.print(f"report: {out / 'report.md'}", soft_wrap=True)
    if any(r["verdict"] == "error" for r in rows) or any(t.bad_input for t in traced):
        return EXIT_BAD_INPUT
    bad = any(r["verdict"] != "conforms" for r in rows) or any(t.error for t in traced)
    return EXIT_UNEXPECTED if bad else EXIT_OK


CONVERT_EPILOG = """\b
Examples:
  kreplica kafka convert build/kafka-runs/trace/acks-all-leader-crash \\
      --schedule schedules/acks-all-leader-crash.json --out t.itf.json
  kreplica conform t.itf.json --fetch-max-records 1000000

\b
Exit codes:
  0  the recording became a trace
  2  bad input: an event file missing (a broker's), truncated, out of order,
     recorded on another Kafka version or by another agent; no initial state
"""


@click.command(name="convert", epilog=CONVERT_EPILOG)
@click.argument("run_dir", metavar="RUN_DIR", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--schedule",
    "schedule_path",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="The schedule the run ran (its min ISR, acks, election).",
)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The ITF trace to write.")  # fmt: skip
def convert_command(run_dir: Path, schedule_path: Path, out: Path) -> int:
    """Convert one real run's event files (broker-N/events.jsonl, harness-events.jsonl) into
    an ITF trace of the spec, as `kreplica kafka trace` does after each run."""
    from kreplica.conformance.kafka.schedule import load_schedule

    schedule = load_schedule(schedule_path)
    if not run_dir.is_dir():
        raise EventsError(f"{run_dir}: no such run directory")
    traced = trace_run(run_dir, schedule, out.parent / ".convert")
    assert traced.trace is not None
    out.parent.mkdir(parents=True, exist_ok=True)
    traced.trace.replace(out)
    make_console().print(
        f"{out}: {traced.events} events, {traced.steps} steps, variant {label(traced.variant)}",
        soft_wrap=True,
    )
    return EXIT_OK
