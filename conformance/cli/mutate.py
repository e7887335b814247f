"""`kreplica mutate`: sample mutants of impl/'s core, run the fuzz + conformance campaign on
each, and report the kill rate and the survivors (a table on stdout, progress on stderr).

The engine is `kreplica.conformance.mutation.engine.run`: call it from Python rather than this
command, which exits instead of returning."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from kreplica.conformance.cli.console import console as make_console
from kreplica.conformance.errors import KreplicaError, file_error
from kreplica.conformance.mutation.campaign import SURVIVED, Campaign, Outcome, run_baseline
from kreplica.conformance.mutation.engine import picked, plan, refuted, run, settings_of
from kreplica.conformance.mutation.results import (
    EQUIVALENT_FILE,
    Results,
    load_equivalent,
    markdown,
    tally,
)
from kreplica.conformance.validate.locks import lock_output
from kreplica.impl.variants import VariantError, parse_variant

EPILOG = """\b
Examples:
  kreplica mutate                         80 mutants, seed 1 (make mutation)
  kreplica mutate --seed 2 --jobs 2 --markdown build/mutation/seed-2.md
  kreplica mutate --sample 5 --out build/mutation/try
  kreplica mutate --mutant log.py:289:11:cmp-gt-ge   one mutant, by its id

\b
Each sampled mutant (one small edit of impl/log.py, partition.py, ...: see
docs/mutation.md) runs `kreplica fuzz --examples 500 --steps 50 --seed S
--corpus C --no-shrink` (--examples and --steps change the campaign's size)
and, if the fuzzer found nothing, `kreplica conform C --no-spark --workers 1`;
then the same for each of --variants with `--variant V --rules-only` and
`conform --variant V`, whose traces must conform to the spec under V (for a
variant the spec does not model, such as isr=alter-partition, `fuzz --variant V`
with its checks on, and no conform); the first fuzz is then `--stages correct`.
With --variants '' the fuzz is kreplica fuzz's default campaign of stages (the
correct protocol and every variant, --examples runs each) and the conform
`--as-recorded`.
results.json in --out is rewritten after every mutant; run the same command
again to resume. Mutants argued equivalent in
conformance/mutation/equivalent.toml are listed, not run, and left out of the
kill rate with the stillborn ones (the edit does not import).

\b
Before the first mutant, the same campaign runs on impl/ itself: if the
unmutated implementation fails it, no kill would mean anything, and the
command stops (exit 1) naming the stage and the failure. And each kill is
replayed on the unmutated implementation (`kreplica replay` of the saved
schedule or the rejected trace): if it replays, the failure is not the
mutant's, and the verdict is error.

\b
Exit codes:
  0  every sampled mutant has an outcome (whatever the kill rate)
  1  the unmutated implementation fails the campaign: nothing was run
  2  bad input: --sample below 1, a --mutant id that is no mutant's, an
     unknown variant in --variants, an
     unreadable or malformed equivalent file,
     an --out that is a file, holds results of other settings or is in use
     by another kreplica mutate, an unwritable --markdown
  130  interrupted (Ctrl-C): the outcomes so far are kept in --out
"""


def _commit() -> str:
    """The checkout's commit (`+dirty`: uncommitted changes in impl/, conformance/ or spec/)."""
    try:
        root = Path(__file__).resolve().parents[2]
        git = ["git", "-C", str(root)]
        head = subprocess.run([*git, "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True, timeout=10, check=True)  # fmt: skip
        dirty = subprocess.run([*git, "status", "--porcelain", "--", "impl", "conformance", "spec"],
                               capture_output=True, text=True, timeout=10)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def _lock(folder: Path) -> int:
    """Hold `<folder>.lock` for the rest of the process, so that a second run into the same
    folder fails at once instead of overwriting this one's results (OutputInUse, exit 2)."""
    if folder.exists() and not folder.is_dir():
        raise KreplicaError(f"--out {folder} is not a directory")
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise file_error("create", folder.parent, err) from None
    return lock_output(folder.parent / f"{folder.name}.lock", folder, "mutate")


@click.command("mutate", epilog=EPILOG)
@click.option("--sample", "size", type=int, default=80, show_default=True,
              help="Mutants to sample from every mutant of the core.")  # fmt: skip
@click.option("--seed", type=click.IntRange(min=0), default=1, show_default=True,
              help="Sampling seed; also the fuzz seed.")  # fmt: skip
@click.option("--jobs", type=click.IntRange(min=1), default=1, show_default=True,
              help="Mutants run in parallel.")  # fmt: skip
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Directory for results.json (default: build/mutation/seed-SEED).")  # fmt: skip
@click.option("--time-limit", type=click.FloatRange(min=0, min_open=True), default=600.0,
              show_default=True, metavar="SECONDS",
              help="Seconds per mutant; past them it counts as killed (timeout).")  # fmt: skip
@click.option("--examples", type=click.IntRange(min=1), default=Campaign().examples,
              show_default=True, help="Fuzz runs per mutant (fuzz --examples).")  # fmt: skip
@click.option("--steps", type=click.IntRange(min=1), default=50, show_default=True,
              help="Most steps per fuzz run (kreplica fuzz --steps).")  # fmt: skip
@click.option("--variants", default=",".join(Campaign().variants), show_default=True,
              help="Protocol variants whose runs must pass too, comma-separated: conform if "
              "the spec models one, else the fuzzer's checks; the first stage is then the correct "
              "protocol's alone (fuzz --stages correct). '' for none: kreplica fuzz's default "
              "campaign of stages alone, --examples runs per stage, then conform "
              "--as-recorded.")  # fmt: skip
@click.option("--markdown", "markdown_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the report as Markdown to this file.")  # fmt: skip
@click.option("--equivalent", "equivalent_path", type=click.Path(path_type=Path),
              default=EQUIVALENT_FILE, show_default=False,
              help="TOML file of equivalent mutants (default: the shipped one).")  # fmt: skip
@click.option("--mutant", "mutant_ids", multiple=True, metavar="ID",
              help="Run this mutant (an id such as log.py:289:11:cmp-gt-ge; repeatable) "
              "in place of a sample.")  # fmt: skip
def mutate_command(
    size: int,
    seed: int,
    jobs: int,
    out: Path | None,
    time_limit: float,
    examples: int,
    steps: int,
    variants: str,
    markdown_path: Path | None,
    equivalent_path: Path,
    mutant_ids: tuple[str, ...],
) -> int:
    """Mutation testing: how many small edits of impl/ the fuzz + conformance campaign kills."""
    if size < 1:
        raise KreplicaError(f"--sample {size}: sample at least 1 mutant")
    equivalent = load_equivalent(equivalent_path)
    chosen = tuple(v.strip() for v in variants.split(",") if v.strip())
    for v in chosen:
        try:
            parse_variant([v])
        except VariantError as err:
            raise KreplicaError(f"--variants {v}: {err}") from None
    try:
        mutants = picked(mutant_ids) if mutant_ids else plan(size, seed)
    except KeyError as err:
        raise KreplicaError(f"--mutant {err.args[0]}: no mutant of the core has this id") from None
    campaign = Campaign(examples, steps, seed, time_limit, chosen)
    folder = out or Path("build/mutation") / (f"seed-{seed}" + ("-picked" if mutant_ids else ""))
    fd = _lock(folder)
    click.get_current_context().call_on_close(lambda: os.close(fd))
    results = Results.open(folder, settings_of(size, seed, campaign, mutant_ids))
    errors = make_console(stderr=True)
    done = sum(m.id in results.outcomes for m in mutants)
    commit = _commit()
    errors.print(
        f"kreplica mutate: {len(mutants)} mutants (seed {seed}), {done} done before, "
        f"{jobs} at a time, commit {commit}; results in {folder}/results.json"
    )
    if done < len(mutants):
        baseline = run_baseline(campaign)
        if baseline.verdict != SURVIVED:
            errors.print(
                f"kreplica mutate: the unmutated implementation fails the campaign "
                f"({baseline.by or baseline.verdict}, {baseline.seconds:.0f} s): {baseline.detail}"
            )
            return 1
        passed = f"the unmutated implementation passes ({baseline.seconds:.0f} s)"
        errors.print(f"kreplica mutate: {passed}")
    start = time.monotonic()
    columns = (TextColumn("mutants"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.description}"), TimeElapsedColumn())  # fmt: skip
    bar = Progress(*columns, console=errors)
    with bar:
        task = bar.add_task("", total=len(mutants), completed=done)

        def advance(outcome: Outcome) -> None:
            bar.update(task, advance=1, description=f"{outcome.mutant} {outcome.verdict}")

        outcomes = run(mutants, results, campaign, equivalent, jobs, advance)
    wall = time.monotonic() - start
    render(outcomes)
    for wrong in refuted(outcomes, equivalent):
        errors.print(f"warning: {wrong.mutant} is argued equivalent but was {wrong.verdict}")
    errors.print(f"wall time {wall:.0f} s for {len(mutants) - done} mutant(s)")
    if markdown_path is not None:
        spent = sum(o.seconds for o in outcomes)
        default_size = (examples, steps) == (Campaign().examples, Campaign().steps)
        size_options = "" if default_size else f" --examples {examples} --steps {steps}"
        chosen_options = "".join(f" --mutant {i}" for i in mutant_ids) or f" --sample {size}"
        header = (
            f"`kreplica mutate{chosen_options} --seed {seed}{size_options}`: commit {commit}; "
            f"{len(mutants) - done} mutant(s) run now in {wall:.0f} s ({jobs} job(s)), "
            f"{done} taken from an earlier run; the campaigns took {spent:.0f} s in all"
        )
        try:
            markdown_path.parent.mkdir(parents=True, exist_ok=True)
            markdown_path.write_text(markdown(outcomes, equivalent, header) + "\n", "utf-8")
        except OSError as err:
            raise file_error("write", markdown_path, err) from None
    return 0


def render(outcomes: list[Outcome]) -> None:
    """The tally and the survivors, as tables on stdout."""
    out = make_console()
    t = tally(outcomes)
    table = Table(title="mutants")
    for column in ("killed (fuzz)", "killed (conformance)", "timeout", "survived",
                   "equivalent", "stillborn", "error", "kill rate"):  # fmt: skip
        table.add_column(column, justify="right")
    rate = "n/a" if t.rate is None else f"{100 * t.rate:.1f}%"
    c = t.counts
    table.add_row(str(t.by.get("fuzz", 0)), str(t.by.get("conformance", 0)),
                  str(c.get("timeout", 0)), str(c.get("survived", 0)), str(c.get("equivalent", 0)),
                  str(c.get("stillborn", 0)), str(c.get("error", 0)), rate)  # fmt: skip
    out.print(table)
    survivors = [o for o in outcomes if o.verdict == SURVIVED]
    if survivors:
        table = Table(title="survivors")
        for column in ("mutant", "edit", "seconds"):
            table.add_column(column)
        for o in survivors:
            table.add_row(o.mutant, o.description, f"{o.seconds:.0f}")
        out.print(table)
