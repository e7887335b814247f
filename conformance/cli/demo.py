"""`kreplica demo`: the main job, end to end (`make demo`)."""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from dataclasses import asdict
from pathlib import Path

import click
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from kreplica.conformance.cli.console import console as make_console
from kreplica.conformance.demo import draw as draw_module
from kreplica.conformance.demo.draw import Picture, draw_counterexamples, draw_rejected
from kreplica.conformance.demo.pipeline import (
    Outcome,
    Step,
    code_key,
    load_record,
    run_step,
    save_record,
)
from kreplica.conformance.demo.report import write_report
from kreplica.conformance.errors import EXIT_OK, EXIT_UNEXPECTED
from kreplica.conformance.tla.itf import printable
from kreplica.conformance.tla.specs import resolve_spec_dir, select_configs
from kreplica.impl.variants import VariantError, parse_variant

EPILOG = """\b
Examples:
  kreplica demo                      the main job, into out/demo (make demo)
  kreplica demo --fresh              every step again, nothing reused
  kreplica demo --config S1_HwTruncation --examples 30
                                     a small run: one model, 30 fuzz runs each

\b
Steps, each a kreplica command whose output goes to out/demo/logs/:
  1. check   the ci suite of spec/suites.toml (TLC), counterexamples kept
  2. fuzz    the correct protocol, every run recorded (a corpus)
  3. fuzz    one seeded bug (--bug), every run recorded; it must be found
  4. conform every recorded trace against the spec, on Spark local mode
  5. draw    every counterexample and every rejected trace (explain)
  6. report  out/demo/index.html, linking all of it
A step whose inputs (its command, the spec, the implementation, the
conformance code, what it reads) are unchanged since its last good run is
reused, and the report says so.

\b
Exit codes:
  0  every step did its job (the bug was found, the models met their expectations)
  1  some step did not: its log says why
  2  bad input (an unknown option value)
"""

DRAW = "draw"
DRAW_TITLE = "draw every counterexample and rejected trace"
SAVED = "pictures/pictures.json"


def _steps(out: Path, suite: str, configs: tuple[str, ...], examples: int, bug: str,
           java: str | None, master: str) -> list[Step]:  # fmt: skip
    """The kreplica commands of the main job."""
    corpus = out / "corpus"
    models = [a for c in configs for a in ("--config", c)] or ["--suite", suite]
    check = ["check", *models, "--jobs", "2", "--out", str(out / "counterexamples"),
             "--json", str(out / "check.json"), *(["--java", java] if java else [])]  # fmt: skip
    fuzz = ["fuzz", "--examples", str(examples), "--seed", "0"]
    correct_fuzz = [*fuzz, "--stages", "correct"]  # the correct protocol alone, as titled
    correct = corpus / "correct.jsonl"
    buggy = corpus / f"bug-{bug}.jsonl"
    return [
        Step(
            "check",
            "model-check the models",
            tuple(check),
            outputs=(out / "check.json",),
            clean=(out / "counterexamples",),
        ),
        Step(
            "fuzz-correct",
            "fuzz the correct protocol",
            (*correct_fuzz, "--corpus", str(correct), "--out", str(out / "fuzz" / "correct")),
            outputs=(correct,),
            clean=(correct, out / "fuzz" / "correct"),
        ),
        Step(
            "fuzz-bug",
            f"fuzz the seeded bug {bug}",
            (*fuzz, "--bug", bug, "--corpus", str(buggy), "--out", str(out / "fuzz" / "bug")),
            ok_exits=frozenset({1}),
            outputs=(buggy,),
            clean=(buggy, out / "fuzz" / "bug"),
        ),
        Step(
            "conform",
            "check every recorded trace on Spark",
            ("conform", str(corpus), "--out", str(out / "conform"), "--master", master),
            ok_exits=frozenset({0, 1}),
            outputs=(out / "conform" / "results.json",),
            reads=(corpus,),
        ),
    ]


def _draw(out: Path, record: dict[str, dict[str, object]],
          fresh: bool) -> tuple[Outcome, list[Picture], list[Picture], int]:  # fmt: skip
    """Step 5, in this process: the pictures, reused when the traces did not change."""
    results = out / "conform" / "results.json"
    digest = hashlib.sha256(code_key().encode())
    digest.update(Path(draw_module.__file__ or "").read_bytes())
    for path in [*sorted((out / "counterexamples").glob("*.itf.json")), results]:
        if path.is_file():
            digest.update(path.name.encode() + path.read_bytes())
    key, saved = digest.hexdigest(), out / SAVED
    last = record.get(DRAW, {})
    start = time.monotonic()
    if not fresh and last.get("key") == key and saved.is_file():
        try:
            data = json.loads(saved.read_text(encoding="utf-8"))
            pictures = [Picture(**p) for p in data["counterexamples"]]
            rejected = [Picture(**p) for p in data["rejected"]]
            total = int(data["rejected_total"])
        except (OSError, ValueError, KeyError, TypeError):
            pass  # a damaged list of pictures: draw them again
        else:
            seconds = float(str(last.get("seconds", 0)))
            outcome = Outcome(DRAW, DRAW_TITLE, "kreplica explain", 0, seconds, SAVED, True, key)
            return outcome, pictures, rejected, total
    shutil.rmtree(out / "pictures", ignore_errors=True)
    pictures = draw_counterexamples(out / "counterexamples", out)
    rejected, total = draw_rejected(results, out) if results.is_file() else ([], 0)
    saved.parent.mkdir(parents=True, exist_ok=True)
    saved.write_text(json.dumps({"counterexamples": [asdict(p) for p in pictures],
                                 "rejected": [asdict(p) for p in rejected],
                                 "rejected_total": total}, indent=1), encoding="utf-8")  # fmt: skip
    seconds = time.monotonic() - start
    outcome = Outcome(DRAW, DRAW_TITLE, "kreplica explain", 0, seconds, SAVED, False, key)
    return outcome, pictures, rejected, total


@click.command("demo", epilog=EPILOG, short_help="Run the main job end to end.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              default=Path("out/demo"), show_default=True,
              help="Directory for everything the job makes; index.html is its report.")  # fmt: skip
@click.option("--suite", default="ci", show_default=True, help="The models to check.")
@click.option("--config", "configs", multiple=True, metavar="NAME",
              help="Check these models instead of the suite (repeatable).")  # fmt: skip
@click.option("--examples", type=click.IntRange(min=1), default=300, show_default=True,
              help="Fuzz runs per campaign.")  # fmt: skip
@click.option("--bug", default="early-ack", show_default=True,
              help="The seeded bug the second campaign must find.")  # fmt: skip
@click.option("--java", help="Java for TLC (make demo passes the one it installed).")
@click.option("--master", default="local[*]", show_default=True, help="Spark master URL.")
@click.option("--fresh", is_flag=True, help="Run every step again; reuse nothing.")
def demo_command(out: Path, suite: str, configs: tuple[str, ...], examples: int, bug: str,
                 java: str | None, master: str, fresh: bool) -> int:  # fmt: skip
    """Run the main job: model-check, fuzz, conform on Spark, draw, report."""
    try:
        parse_variant((), (bug,))
    except VariantError as err:
        raise click.BadParameter(str(err), param_hint="--bug") from None
    select_configs(resolve_spec_dir(), suite, configs)  # an unknown suite or model: exit 2 now
    console = make_console()
    out.mkdir(parents=True, exist_ok=True)
    saved = load_record(out)
    record = {} if fresh else dict(saved)
    steps = _steps(out, suite, configs, examples, bug, java, master)
    outcomes: list[Outcome] = []
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
               TextColumn("{task.completed}/{task.total} steps"), TimeElapsedColumn())  # fmt: skip
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task("starting", total=len(steps) + 2)
        for step in steps:
            progress.update(task, description=step.title)

            def said(line: str, title: str = step.title) -> None:
                progress.update(task, description=f"{title}: {printable(line)[:60]}")

            outcome = run_step(step, out, record, said)
            outcomes.append(outcome)
            save_record(out, saved, outcome)
            done = "reused (inputs unchanged)" if outcome.reused else f"{outcome.seconds:.0f} s"
            verdict = "" if outcome.ok else f", exit {outcome.exit_code}: see {out / outcome.log}"
            progress.console.print(f"{step.title}: {done}{verdict}")
            progress.advance(task)
        progress.update(task, description=DRAW_TITLE)
        drawn, pictures, rejected, total = _draw(out, record, fresh)
        outcomes.append(drawn)
        save_record(out, saved, drawn)
        done = "reused (inputs unchanged)" if drawn.reused else f"{drawn.seconds:.0f} s"
        progress.console.print(
            f"draw {len(pictures)} counterexamples, {len(rejected)} rejected traces: {done}"
        )
        progress.advance(task)
        progress.update(task, description="write the report")
        report = write_report(out, outcomes, pictures, rejected, total)
        progress.advance(task)
    console.print(f"report: {printable(str(report))}")
    failed = [o for o in outcomes if not o.ok]
    if failed:
        names = ", ".join(f"{o.title} (exit {o.exit_code})" for o in failed)
        click.echo(f"kreplica: demo: {names}; the logs in {out / 'logs'} say why", err=True)
        return EXIT_UNEXPECTED
    return EXIT_OK
