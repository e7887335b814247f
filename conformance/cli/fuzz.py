"""`kreplica fuzz`: the fuzzer's command line (a progress bar on stderr, a summary on stdout)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from kreplica.conformance.cli.console import console as make_console
from kreplica.conformance.cli.outputs import check_output_dir
from kreplica.conformance.errors import EXIT_OK, EXIT_UNEXPECTED, KreplicaError
from kreplica.conformance.fuzz.campaign import FuzzResult, never_taken, run_fuzz, save_failure
from kreplica.conformance.fuzz.campaign import summary_lines as fuzz_summary
from kreplica.conformance.fuzz.corpus_writer import CorpusWriter
from kreplica.conformance.fuzz.runs import RunStats
from kreplica.conformance.fuzz.setup import DEFAULT_EXAMPLES, DEFAULT_STEPS, FAULTS, FuzzSetup
from kreplica.impl.variants import VariantError, parse_variant

FUZZ_EXIT_CODES = """\b
Examples:
  kreplica fuzz --examples 150 --steps 50      the correct protocol: nothing found, exit 0
  kreplica fuzz --bug early-ack --no-unclean   a seeded bug: found, shrunk, saved; exit 1
  kreplica fuzz --variant acks=1 --no-unclean  an unsafe variant of the protocol
  kreplica fuzz --examples 500 --corpus out/corpus.jsonl
                                               every run's trace, for kreplica conform

\b
Exit codes:
  0  no invariant failed, and every run settled
  1  an invariant failed (or a step raised an exception), or a run did not
     settle (EventuallyReplicated, EventuallyAnswered); the shrunk run is saved
  2  bad input: unknown variant or bug, a bad number, an unwritable --out
     or --corpus
  4  --require-all-actions, and some spec action was never taken
"""

EXIT_ACTIONS_MISSING = 4
"""The exit code of a clean campaign with --require-all-actions that never took some spec
action (3 is the CLI's time-out code)."""


def build_setup(
    assignments: tuple[str, ...],
    bugs: tuple[str, ...],
    replicas: int,
    faults: tuple[bool, bool, bool],
    max_faults: int,
    invariants: bool = True,
    only: tuple[str, ...] = (),
    guided: bool = False,
    deletes: bool = True,
    rules_only: bool = False,
) -> FuzzSetup:
    """The campaign's set-up from the options; KreplicaError on an unknown name or on a
    --fault that the other options switch off."""
    try:
        variant = parse_variant(assignments, bugs)
    except VariantError as err:
        raise KreplicaError(str(err)) from None
    crash, unclean, network = faults
    kinds = frozenset(kind.replace("-", "_") for kind in only)
    checks_invariants = invariants and not rules_only
    setup = FuzzSetup(
        variant,
        replicas,
        crash,
        unclean,
        network,
        max_faults,
        checks_invariants,
        kinds,
        guided,
        deletes,
        rules_only,
    )
    off = sorted(kinds - set(setup.fault_kinds))
    if off:
        raise KreplicaError(f"--fault {off[0].replace('_', '-')} is switched off by another option")
    try:
        setup.schedule().cluster()
    except NotImplementedError as err:
        raise KreplicaError(str(err)) from None
    return setup


class FuzzProgress:
    """A progress bar on stderr (only on a terminal): runs, steps/s, failures, shrinking."""

    def __init__(self, examples: int, label: str) -> None:
        """Set up the bar for `examples` runs."""
        self.examples = examples
        console = Console(stderr=True)
        self.progress: Progress | None = None
        self.task: TaskID | None = None
        if console.is_terminal and examples > 0:
            self.progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]:>7,.0f} steps/s"),
                TextColumn("{task.fields[status]}"),
                TimeElapsedColumn(),
                console=console,
                transient=True,
            )
            self.task = self.progress.add_task(label, total=examples, rate=0.0, status="")

    @contextmanager
    def shown(self) -> Iterator[None]:
        """Show the bar while the campaign runs."""
        if self.progress is None:
            yield
            return
        with self.progress:
            yield

    def update(self, stats: RunStats) -> None:
        """Called at the start of each run."""
        if self.progress is None or self.task is None:
            return
        rate = stats.steps / max(stats.elapsed, 1e-9)
        if stats.detected is None:
            status = "[green]0 failures"
            done = min(stats.runs, self.examples)
        else:
            status = f"[red]1 failure[/], shrinking ({stats.runs - stats.runs_to_failure} runs)"
            done = self.examples
        self.progress.update(self.task, completed=done, rate=rate, status=status)


@click.command(epilog=FUZZ_EXIT_CODES)
@click.option(
    "--examples",
    type=click.IntRange(min=0),
    default=DEFAULT_EXAMPLES,
    show_default=True,
    help="Runs to generate (Hypothesis max_examples).",
)
@click.option(
    "--steps",
    type=click.IntRange(min=1),
    default=DEFAULT_STEPS,
    show_default=True,
    help="Most steps per run (stateful_step_count).",
)
@click.option(
    "--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Hypothesis seed."
)
@click.option(
    "--variant",
    "assignments",
    multiple=True,
    metavar="NAME=VALUE",
    help="Protocol variant, e.g. truncation=hw (repeatable).",
)
@click.option("--bug", "bugs", multiple=True, metavar="NAME", help="Seeded bug (repeatable).")
@click.option(
    "--replicas", type=click.IntRange(2, 5), default=3, show_default=True, help="Replicas 1..N."
)
@click.option(
    "--max-faults",
    type=click.IntRange(min=0),
    default=4,
    show_default=True,
    help="Most faults per run (crashes, power losses, elections, lost/duplicated messages).",
)
@click.option(
    "--faults/--no-faults",
    default=True,
    show_default=True,
    help="Crashes, failed log dirs, restarts, failure detection, elections.",
)
@click.option(
    "--unclean/--no-unclean",
    default=True,
    show_default=True,
    help="Unclean shutdowns (power loss), flushes and HW checkpoints.",
)
@click.option(
    "--network-faults/--no-network-faults",
    default=True,
    show_default=True,
    help="Lost and duplicated messages.",
)
@click.option(
    "--delete-records/--no-delete-records",
    "deletes",
    default=True,
    show_default=True,
    help="Clients delete records below the leader's HW (DeleteRecords), in half the runs.",
)
@click.option(
    "--fault",
    "only_faults",
    multiple=True,
    type=click.Choice([kind.replace("_", "-") for kind in FAULTS]),
    help="Allow only this fault (repeatable), like a spec config's bounds; default: every "
    "fault the options above allow.",
)
@click.option(
    "--shrink/--no-shrink",
    default=True,
    show_default=True,
    help="Let Hypothesis shrink the failing run (tens of seconds); it is always minimised "
    "step by step afterwards.",
)
@click.option(
    "--time-limit",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
    help="Stop generating runs after this long without a failure.",
)
@click.option(
    "--invariants/--no-invariants",
    default=True,
    show_default=True,
    help="Check the spec's invariants after every step (--no-invariants: only record the "
    "runs, e.g. to check a buggy variant's traces with TLC later).",
)
@click.option(
    "--rules-only",
    is_flag=True,
    help="Check Kafka's own rules after every step (timing, the answers to clients, the HW "
    "by the clock, a step's effect) but not the spec's invariants, which an unsafe variant "
    "breaks by design; implies --no-invariants.",
)
@click.option(
    "--corpus",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Append the ITF trace of every run Hypothesis generates to this JSON-lines file, "
    "one trace per line (runs replayed while shrinking are left out).",
)
@click.option(
    "--guided/--unguided",
    default=False,
    show_default=True,
    help="Steer the search towards rarely reached abstract states of the replicas' views "
    "(each run hands its rarity to Hypothesis's target(); docs/fuzzing.md).",
)
@click.option(
    "--require-all-actions",
    is_flag=True,
    default=False,
    help="Exit 4 if some spec action never occurred in the campaign's runs (the summary's "
    "'never taken' line lists them).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("out/fuzz"),
    show_default=True,
    help="Directory for the shrunk failing run (<name>.itf.json, <name>.schedule.json).",
)
def fuzz(
    examples: int,
    steps: int,
    seed: int,
    assignments: tuple[str, ...],
    bugs: tuple[str, ...],
    replicas: int,
    max_faults: int,
    faults: bool,
    unclean: bool,
    network_faults: bool,
    deletes: bool,
    only_faults: tuple[str, ...],
    shrink: bool,
    time_limit: float | None,
    invariants: bool,
    rules_only: bool,
    corpus: Path | None,
    guided: bool,
    require_all_actions: bool,
    out: Path,
) -> int:
    """Fuzz the implementation with Hypothesis; check the spec's invariants after every step."""
    on = (faults, unclean, network_faults)
    setup = build_setup(
        assignments,
        bugs,
        replicas,
        on,
        max_faults,
        invariants,
        only_faults,
        guided,
        deletes,
        rules_only,
    )
    check_output_dir(out, "failures to")
    display = FuzzProgress(examples, f"fuzz {setup.variant.label()}")
    with _corpus(corpus) as writer, display.shown():
        result = run_fuzz(setup, examples, steps, seed, display.update, shrink, writer, time_limit)
    paths, unsaved = _save(result, out)
    lines = fuzz_summary(result, paths)
    if writer is not None:
        lines.append(f"corpus: {writer.written:,} traces appended to {writer.path}")
    make_console().print("\n".join(lines), soft_wrap=True)
    if unsaved is not None:  # the finding is shown above; saving it is what failed
        raise unsaved
    return _exit_code(result, require_all_actions)


def _exit_code(result: FuzzResult, require_all_actions: bool) -> int:
    """1 for a failure; 4 for a clean campaign that had to take every spec action and did
    not; else 0."""
    if result.failure is not None:
        return EXIT_UNEXPECTED
    if require_all_actions and never_taken(result.stats):
        return EXIT_ACTIONS_MISSING
    return EXIT_OK


@contextmanager
def _corpus(path: Path | None) -> Iterator[CorpusWriter | None]:
    """The corpus writer for --corpus (None without it), closed at the end."""
    if path is None:
        yield None
        return
    with CorpusWriter(path) as writer:
        if writer.set_aside is not None:
            click.echo(
                f"kreplica: note: {path} ended in a partial line ({writer.repaired} bytes, a "
                f"write that was interrupted); it was moved to {writer.set_aside}",
                err=True,
            )
        yield writer


def _save(result: FuzzResult, out: Path) -> tuple[tuple[Path, ...], KreplicaError | None]:
    """Write the failure's trace and schedule: the paths written, or the error that stopped
    them (raised by the caller once the finding has been shown)."""
    if result.failure is None:
        return (), None
    try:
        return save_failure(result, out), None
    except OSError as err:
        where = f" {err.filename}" if err.filename else ""
        return (), KreplicaError(f"cannot write{where}: {err.strerror or err}")
