"""`kreplica conform PATH...`: validate recorded traces against the TLA+ spec with TLC."""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from dataclasses import fields, replace
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from kreplica.conformance.cli.console import console as make_console
from kreplica.conformance.cli.outputs import check_output_dir
from kreplica.conformance.cli.spark_options import read_spark_conf
from kreplica.conformance.errors import (
    EXIT_BAD_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_UNEXPECTED,
    CheckerError,
    KreplicaError,
)
from kreplica.conformance.tla.specs import resolve_spec_dir
from kreplica.conformance.tla.tlc import TlcOptions, find_java, find_tla2tools
from kreplica.conformance.validate.conform import (
    PoolRun,
    SparkRun,
    run_pool,
    run_spark,
    ship_files,
    spark_inputs,
)
from kreplica.conformance.validate.results import (
    JUNIT,
    MANIFEST,
    PARQUET,
    RUN_METADATA,
    ResultSet,
    Summary,
    counts,
    spec_hashes,
    summarise,
    write_junit,
    write_manifest,
)
from kreplica.conformance.validate.sources import local_files
from kreplica.conformance.validate.tlcdata import build_reader, default_cache_dir
from kreplica.conformance.validate.tracecheck import (
    ERROR,
    VIOLATES,
    CheckSettings,
    SpecParams,
    invariant_names,
    trace_tlc_options,
)
from kreplica.conformance.validate.why import why_text
from kreplica.impl.variants import Variant, VariantError, not_in_spec, parse_variant

EPILOG = """\b
Exit codes:
  0  every trace conforms
  1  some trace violates the spec, or an --invariant (and none failed to
     be checked)
  2  errors: a trace could not be checked (malformed, unknown names, TLC
     crashed or timed out), or bad input: no traces, a bad option, no Java,
     an --out in use by another run
  130  interrupted (Ctrl-C): an older result set in --out is kept as it was
\b
Results (in --out): results.parquet and results.json (one row per trace:
trace_id, verdict, events, step, action, args, variables, diff, reason,
seconds, note, why_line, why, why_values, invariant), junit.xml (one test
case per trace) and manifest.json (the run: variant, invariants, spec hash,
version, times, inputs, counts, command line). A run writes them into a
directory of its own and renames it to --out when it is complete, replacing
an older set whole; an interrupted run leaves the older set as it was. One
run at a time per --out (a lock, <out>.lock, beside it).
"""


class Interrupted(KreplicaError):
    """Ctrl-C (or SIGTERM) during a run: one line saying what became of the results."""

    exit_code = EXIT_INTERRUPTED


TLA_READER_BATCH = 200
"""Traces per TLC process at most when traces reach TLC as a generated TLA+ module, which SANY
parses at about 0.3 MB/s (the Java reader has no such limit)."""


def _params(
    variants: tuple[str, ...], bugs: tuple[str, ...], min_isr: int, fetch: int
) -> SpecParams:
    """The spec's constants: the variant (default the correct protocol) and broker config."""
    try:
        variant = parse_variant(variants, bugs)
    except VariantError as err:
        raise click.BadParameter(str(err)) from None
    unmodelled = not_in_spec(variant)
    if unmodelled:
        raise click.BadParameter(
            f"the spec does not model {', '.join(unmodelled)} (the implementation alone has it): "
            "traces are checked against the spec"
        )
    return SpecParams(variant=variant, min_insync_replicas=min_isr, fetch_max_records=fetch)


def _invariants(names: tuple[str, ...], spec_dir: Path) -> tuple[str, ...]:
    """--invariant's names, each once, in order; one line for a name the trace spec cannot
    check (`tracecheck.invariant_names`), before anything runs."""
    known = invariant_names(spec_dir)
    for name in names:
        if name not in known:
            what = f"unknown invariant {name!r}"
            if name == "TypeOK":  # the model's bounds; shapes.py checks a trace's types
                what = "TypeOK is not checked on traces (their types are, before TLC)"
            raise click.BadParameter(
                f"{what}: a trace can be checked against "
                f"{', '.join(known) or 'none (the trace spec defines no Invariant)'}",
                param_hint="'--invariant'",
            )
    return tuple(dict.fromkeys(names))


def _progress_bar(console: Console) -> Progress:
    return Progress(
        TextColumn("checking"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("batches"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


def _report(summary: Summary, seconds: float, out: Path, console: Console) -> None:
    """The summary table, the first rejected and failed traces by id, and where the rest are.
    Everything a trace brings (ids, actions, reasons) is printed as text, never as markup."""
    table = Table("traces", "conform", "violate", "error", "events", "seconds", "events/s")
    rate = summary.events / seconds if seconds > 0 else 0.0
    v = summary.verdicts
    table.add_row(
        str(summary.traces), str(v["conforms"]), str(v[VIOLATES]), str(v[ERROR]),
        str(summary.events), f"{seconds:.1f}", f"{rate:,.0f}",
    )  # fmt: skip
    console.print(table)
    if summary.rejected:
        rejected = Table("trace", "step", "logged action", "differs", title="first rejections")
        for row in summary.rejected:
            variables = ", ".join(row["variables"] or []) or "(action not enabled)"
            if row.get("invariant"):
                variables = f"invariant {row['invariant']}"
            rejected.add_row(Text(row["trace_id"], overflow="fold"), str(row["step"]),
                             Text(f"{row['action']} {row['args']}"), Text(variables))  # fmt: skip
        console.print(rejected)
        for row in summary.rejected:
            if row.get("why"):
                console.print(Text(f"why {row['trace_id']}, step {row['step']}: {why_text(row)}"))
        _more(console, v[VIOLATES] - len(summary.rejected), "rejected", out)
    for row in summary.errors:
        reason, where = row["reason"], f"{row['trace_id']}: "
        console.print(Text(f"error: {reason if reason.startswith(where) else where + reason}"))
    _more(console, v[ERROR] - len(summary.errors), "that could not be checked", out)
    for note, count in sorted(summary.notes.items()):
        console.print(Text(f"note: {count:,} traces {note} (the note column says which)"))
    console.print(
        Text(f"results: {out / PARQUET}, {out / 'results.json'}, {out / JUNIT}, {out / MANIFEST}")
    )


def _more(console: Console, count: int, what: str, out: Path) -> None:
    """`... and N more traces WHAT` when the lists above were cut."""
    if count > 0:
        console.print(
            Text(f"... and {count:,} more {what}: every row is in {out / 'results.json'}")
        )


def _outcome_line(summary: Summary) -> str | None:
    """One stderr line for a run that does not exit 0 (None when every trace conforms)."""
    v = summary.verdicts
    if v[ERROR]:
        return f"kreplica: error: {v[ERROR]:,} of {summary.traces:,} traces could not be checked"
    if v[VIOLATES]:
        return f"kreplica: {v[VIOLATES]:,} of {summary.traces:,} traces violate the spec"
    return None


def _reader(choice: str, tlc: TlcOptions) -> Path | None:
    """The compiled trace reader for --reader (None: TLA+ text)."""
    if choice == "tla":
        return None
    try:
        return build_reader(tlc.jar, java=tlc.java)
    except CheckerError:
        if choice == "java":
            raise
        return None  # auto: no javac here, so the slower TLA+ text


def _now() -> str:
    """The time now, UTC, ISO 8601 to the millisecond."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _kreplica_version() -> str:
    try:
        return version("kreplica")
    except PackageNotFoundError:
        return "unknown"


def _variant(variant: Variant) -> dict[str, str]:
    """Each dimension of the variant the traces are checked against, and its label."""
    dims = {f.name: str(getattr(variant, f.name)) for f in fields(variant) if f.name != "bugs"}
    return {**dims, "label": variant.label()}


def _options() -> dict[str, Any]:
    """The parsed options of this command, as JSON values."""
    params = click.get_current_context().params
    return {name: json.loads(json.dumps(value, default=str)) for name, value in params.items()}


def _record(paths: tuple[str, ...], settings: CheckSettings, run: ResultSet) -> dict[str, Any]:
    """The manifest as known when checking starts (also the Parquet schema's metadata)."""
    hashes = spec_hashes(settings.spec_dir)
    params = settings.params
    return {
        "kreplica_version": _kreplica_version(),
        "run_id": run.token,
        "pid": os.getpid(),
        "started": _now(),
        "inputs": list(paths),
        "out": str(run.out),
        "variant": _variant(params.variant),
        "bugs": sorted(params.variant.bugs),
        "as_recorded": params.as_recorded,
        "min_insync_replicas": params.min_insync_replicas,
        "fetch_max_records": params.fetch_max_records,
        "invariants": list(params.invariants),
        "spec_dir": str(settings.spec_dir),
        "spec_sha256": hashes.pop("all"),
        "spec_files_sha256": hashes,
        "reader": "java" if settings.reader is not None else "tla",
        "command": shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "argv": list(sys.argv),
        "options": _options(),
    }


def _kept(run: ResultSet) -> str:
    """What became of the results when a run stops early."""
    if run.committed:
        return f"{run.out} holds this run's complete results"
    if run.older:
        return (
            f"the older results in {run.out} are kept unchanged, this run's partial results removed"
        )
    return f"no results were written to {run.out}"


def _first_line(err: Exception) -> str:
    """The first meaningful line of an exception's message."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return f"{type(err).__name__}: {lines[0] if lines else ''}"[:300]


@click.command("conform", epilog=EPILOG)
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("out/conform"),
    show_default=True,
    help="Directory for results.parquet, results.json, junit.xml, manifest.json; replaced "
    "whole at the end of a run, so it must hold nothing else.",
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=2500,
    show_default=True,
    help="Traces per TLC process, at most; a batch also holds at most 256 MB of trace text "
    "(TLC then takes about 1.1 GB), and a corpus is split over every core. Bigger batches "
    "spread each JVM's start over more traces. With the TLA+ reader, at most 200.",
)
@click.option("--master", default="local[*]", show_default=True, help="Spark master URL.")
@click.option("--no-spark", is_flag=True, help="Use a local process pool instead of Spark.")
@click.option(
    "--conf",
    "confs",
    multiple=True,
    metavar="KEY=VALUE",
    help="A Spark property (repeatable), e.g. spark.pyspark.python=/usr/bin/python3.",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=os.cpu_count() or 1,
    show_default="cores",
    help="Processes for --no-spark.",
)
@click.option(
    "--variant",
    "variants",
    multiple=True,
    metavar="NAME=VALUE",
    help="Check against this variant of the spec (default: the correct protocol).",
)
@click.option("--bug", "bugs", multiple=True, metavar="NAME", help="Seeded bug in the spec.")
@click.option(
    "--as-recorded",
    is_flag=True,
    help="Check each trace under the variant and bugs its #meta records (a corpus of kreplica "
    "fuzz's stages, each run under its own variant); a trace that records none, under "
    "--variant and --bug. A trace recorded under a variant the spec does not model is an "
    "error.",
)
@click.option(
    "--invariant",
    "invariants",
    multiple=True,
    metavar="NAME",
    help="Also check that every state of each trace satisfies this state predicate of the "
    "spec (repeatable), e.g. AckedRecordsNeverLost, CommittedRecordsOnIsr, LogMatching: a "
    "trace the spec allows that cannot take a step without making it false violates there "
    "(the invariant column names it). A trace the spec does not allow is rejected at its "
    "first unexplained step, if that comes first.",
)
@click.option(
    "--min-isr",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="min.insync.replicas (MinIsr) of the traces whose #meta does not record it "
    "(kreplica fuzz records it in each trace).",
)
@click.option(
    "--fetch-max-records",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="Records per follower fetch the traces were recorded with (kreplica fuzz: 2).",
)
@click.option(
    "--tlc-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=600.0,
    show_default=True,
    help="Seconds one TLC process may take.",
)
@click.option(
    "--reader",
    type=click.Choice(["auto", "java", "tla"]),
    default="auto",
    show_default=True,
    help="How traces reach TLC: a binary file read by a compiled "
    "Java override (fast; needs javac once), or a generated TLA+ module; auto: java "
    "when javac is there.",
)
@click.option(
    "--why",
    type=click.IntRange(min=0),
    default=3,
    show_default=True,
    help="Rejected traces per batch whose false conjunct is looked for: the line of the "
    "logged action's definition that the logged state breaks, and the values of the names "
    "it mentions (two short TLC runs each); 0: none.",
)
@click.option("--spec-dir", type=click.Path(path_type=Path), help="Spec directory.")
@click.option("--java", help="Java executable [env KREPLICA_JAVA].")
@click.option("--jar", type=click.Path(path_type=Path), help="tla2tools.jar.")
def conform_command(
    paths: tuple[str, ...], out: Path, batch_size: int, master: str, no_spark: bool,
    workers: int, variants: tuple[str, ...], bugs: tuple[str, ...], min_isr: int,
    fetch_max_records: int, tlc_timeout: float, reader: str, why: int, spec_dir: Path | None,
    java: str | None, jar: Path | None, confs: tuple[str, ...] = (),
    invariants: tuple[str, ...] = (), as_recorded: bool = False,
) -> int:  # fmt: skip
    """Check that recorded traces conform to the spec: TLC walks each one.

    PATH is an ITF trace (*.itf.json), a JSON-lines corpus (*.jsonl, one trace per line) or a
    directory of them; with Spark, any path Spark reads (hdfs://, s3a://, ...). Each trace is
    checked against the spec's Init and Next with the logged actions; a rejected trace is
    reported with its first unexplained step, the logged action there, the variables that
    differ from every successor the spec allows, and (--why) the conjunct of the action's
    definition that is false, with the values of the names it mentions. With --invariant, a
    trace the spec allows is also rejected at the first step that no behaviour of the spec
    takes with the invariant true (docs/conformance.md, "Invariants on a trace"). Every trace
    is checked against --variant and --bug (default the correct protocol, so that a buggy
    run's trace is rejected), or with --as-recorded against the variant it records.
    """
    spec = resolve_spec_dir(spec_dir)
    spark_conf = read_spark_conf(confs, no_spark)
    check_output_dir(out, "results to")
    params = _params(variants, bugs, min_isr, fetch_max_records)
    params = replace(params, invariants=_invariants(invariants, spec), as_recorded=as_recorded)
    tlc = trace_tlc_options(find_java(java), find_tla2tools(jar), tlc_timeout)
    files = local_files(paths) if no_spark else spark_inputs(paths)[0]  # missing: fail now
    with ResultSet.claim(out) as result_set:  # one run per --out: a second fails at once
        settings = CheckSettings(params, spec, tlc, _reader(reader, tlc), why)
        try:
            summary, seconds = _run(
                paths, files, result_set, settings, batch_size, master, no_spark, workers, java,
                spark_conf,
            )  # fmt: skip
        except KeyboardInterrupt:
            raise Interrupted(f"interrupted: {_kept(result_set)}") from None
        except KreplicaError as err:
            wrapped = KreplicaError(f"{err}; {_kept(result_set)}")
            wrapped.exit_code = err.exit_code
            raise wrapped from None
        except OSError as err:  # a full disk, a directory removed under the run
            where = f" {err.filename}" if err.filename else ""
            reason = err.strerror or str(err)
            raise KreplicaError(f"cannot write{where}: {reason}; {_kept(result_set)}") from None
    _report(summary, seconds, out, make_console())
    line = _outcome_line(summary)
    if line is not None:
        click.echo(line, err=True)
    if summary.verdicts[ERROR]:
        return EXIT_BAD_INPUT
    return EXIT_UNEXPECTED if summary.verdicts[VIOLATES] else EXIT_OK


def _run(
    paths: tuple[str, ...], files: list[Path], result_set: ResultSet, settings: CheckSettings,
    batch_size: int, master: str, no_spark: bool, workers: int, java: str | None,
    spark_conf: dict[str, str],
) -> tuple[Summary, float]:  # fmt: skip
    """Check every trace into the run's own staging directory, summarise this run's rows
    (nothing else is in that directory), write the JUnit report and the manifest last, and
    put the set in place. Returns the summary and the seconds the checking took."""
    if settings.reader is None:  # SANY parses a generated module at about 0.3 MB/s
        batch_size = min(batch_size, TLA_READER_BATCH)
    record = _record(paths, settings, result_set)
    metadata = {RUN_METADATA: json.dumps(record, sort_keys=True)}
    staging = result_set.staging
    start = time.monotonic()
    with _progress_bar(make_console()) as bar:
        task = bar.add_task("checking", total=None)

        def progress(done: int, total: int | None) -> None:
            bar.update(task, completed=done, total=total)

        if no_spark:
            pool_run = PoolRun(files, settings, batch_size, workers, metadata)
            written = run_pool(pool_run, staging, progress)
        else:
            if not master.startswith("local"):
                settings = replace(settings, tlc=replace(settings.tlc, java=java or "java"))
            run = SparkRun(paths, settings, batch_size, master, ship_files(settings),
                           metadata=metadata, conf=spark_conf,
                           class_archives=default_cache_dir() / "spark-cds")  # fmt: skip
            try:
                written = run_spark(run, staging, progress)
            except Exception as err:  # Spark's errors are long Java traces: one line instead
                raise CheckerError(f"Spark failed: {_first_line(err)}") from None
    seconds = time.monotonic() - start
    summary = summarise(staging / PARQUET)
    if summary.traces != written:
        raise CheckerError(
            f"the run wrote {written:,} rows but its results hold {summary.traces:,}"
        )
    write_junit(staging / PARQUET, staging / JUNIT, summary)
    manifest = {
        **record,
        "finished": _now(),
        "seconds": round(seconds, 3),
        "counts": counts(summary),
    }
    write_manifest(staging, manifest)  # last: a set with its manifest is complete
    result_set.commit()
    return summary, seconds
