"""A suite of model configs checked with TLC (or Apalache): the engine of `kreplica check`.

Theory of operation. `select_configs` (specs.py) names the configs; `check_modules` fails early
on a missing module; `run_all` checks every config with a `Runner` (`tlc_runner`,
`apalache_runner`), first each config whose header says `cores: all`, alone with every job's
workers, then the others `jobs` at a time, and returns one `CheckRow` per config in the suite's
order. A row knows whether its verdict is the expected one; `write_counterexamples` writes a
violation's trace as ITF; `exit_code`, `markdown_report`, `json_report` and `run_record` say
what the run found. What the user sees while it runs is the caller's (`Display`).
"""

from __future__ import annotations

import hashlib
import shlex
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Protocol

from kreplica.conformance.errors import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    EXIT_TIMEOUT,
    EXIT_UNEXPECTED,
    PROG,
    SpecError,
)
from kreplica.conformance.tla.apalache import find_apalache, run_apalache
from kreplica.conformance.tla.itf import write_trace
from kreplica.conformance.tla.specs import ModelConfig, default_spec_dir
from kreplica.conformance.tla.tlc import (
    TlcOptions,
    find_java,
    find_tla2tools,
    kill_running,
    run_tlc,
)
from kreplica.conformance.tla.tlc_output import ProgressCallback, TlcResult, Verdict

TRACE_VERDICTS = frozenset({Verdict.VIOLATION, Verdict.DEADLOCK, Verdict.TEMPORAL})
"""Verdicts whose checker output holds a trace (a counterexample)."""

Runner = Callable[[ModelConfig, ProgressCallback], TlcResult]
"""Checks one config, reporting its progress."""


@dataclass
class CheckRow:
    """One config's outcome in a `kreplica check` run."""

    config: ModelConfig
    result: TlcResult
    command: str
    counterexample: Path | None = None

    @property
    def as_expected(self) -> bool:
        """Whether the checker's verdict is the one the config's header expects."""
        return self.result.outcome.satisfies(self.config.expect)


class Display(Protocol):
    """What the caller shows while configs are checked."""

    def live(self) -> AbstractContextManager[Any]:
        """The context in which the display is shown."""

    def start(self, name: str) -> ProgressCallback:
        """Show config `name` as running; its progress callback."""

    def finish(self, name: str, row: CheckRow) -> None:
        """Config `name` is done."""


def tlc_runner(
    java: str | None, jar: Path | None, workers: int, limit: float | None, jobs: int = 1
) -> Runner:
    """A runner that checks one config with TLC: `workers` TLC workers, or `workers * jobs`
    for a config that runs alone (`ModelConfig.alone`, see `run_all`)."""
    base = TlcOptions(java=find_java(java), jar=find_tla2tools(jar), workers=workers)

    def run(config: ModelConfig, on_progress: ProgressCallback) -> TlcResult:
        options = TlcOptions(
            java=base.java,
            jar=base.jar,
            workers=workers * jobs if config.alone else workers,
            check_deadlock=config.check_deadlock,
            time_limit=limit,
        )
        return run_tlc(config.module_path, config.path, options, on_progress)

    return run


def apalache_runner(limit: float | None) -> Runner:
    """A runner that checks one config with Apalache."""
    launcher = find_apalache()

    def run(config: ModelConfig, on_progress: ProgressCallback) -> TlcResult:
        return run_apalache(launcher, config.module_path, config.path, config.check_deadlock, limit)

    return run


def check_modules(configs: Sequence[ModelConfig]) -> None:
    """Fail early when a config's .tla module is missing."""
    for config in configs:
        if not config.module_path.is_file():
            raise SpecError(f"{config.path}: module file {config.module_path.name} not found")


def reproduce(config: ModelConfig, spec_dir: Path, checker: str) -> str:
    """The command that re-checks one config."""
    cmd = f"{PROG} check --config {config.name}"
    if spec_dir != default_spec_dir():
        cmd += f" --spec-dir {spec_dir}"
    return cmd + (" --checker apalache" if checker == "apalache" else "")


def run_all(
    configs: Sequence[ModelConfig],
    runner: Runner,
    jobs: int,
    command: Callable[[ModelConfig], str],
    display: Display,
) -> list[CheckRow]:
    """Check every config, keeping the configs' order in the rows: first each config that runs
    alone (header `cores: all`: its runner gives it the cores of every job), one at a time,
    then the others `jobs` at a time. A large config checked beside the small ones leaves a core
    idle once they are done; alone, it keeps both busy throughout."""

    def one(config: ModelConfig) -> CheckRow:
        row = CheckRow(config, runner(config, display.start(config.name)), command(config))
        display.finish(config.name, row)
        return row

    alone = [c for c in configs if c.alone]
    shared = [c for c in configs if not c.alone]
    with display.live(), ThreadPoolExecutor(max_workers=jobs) as pool:
        try:
            rows = {c.name: one(c) for c in alone}
            rows.update(zip((c.name for c in shared), pool.map(one, shared), strict=True))
            return [rows[c.name] for c in configs]
        except KeyboardInterrupt:
            pool.shutdown(wait=False, cancel_futures=True)
            kill_running()
            raise


def write_counterexamples(rows: Sequence[CheckRow], out: Path, checker: str) -> None:
    """Write `<out>/<Config>.itf.json` for each violation. An older counterexample is removed only
    when a completed check shows that its config no longer violates anything (verdict ok): a
    spec that does not parse, a TLC crash or a time limit says nothing about it, so it stays."""
    for row in rows:
        path = out / f"{row.config.name}.itf.json"
        meta = {
            "source": display_path(row.config.module_path),
            "description": f"{checker} counterexample: {row.config.name} got {row.result.outcome}",
            "checker": checker,
            "config": row.config.name,
            "verdict": str(row.result.outcome),
        }
        trace = row.result.to_itf(meta)
        if trace is not None and row.result.outcome.verdict in TRACE_VERDICTS:
            write_trace(path, trace)
            row.counterexample = path
        elif row.result.outcome.verdict == Verdict.OK:
            path.unlink(missing_ok=True)


def display_path(path: Path) -> str:
    """`path` relative to the working directory when it is below it, else absolute."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def fmt(value: int | float | None) -> str:
    """A table cell for a number."""
    if value is None:
        return "-"
    return f"{value:.1f}" if isinstance(value, float) else f"{value:,}"


def exit_code(rows: Sequence[CheckRow]) -> int:
    """2 if a config could not be checked, else 1 if one was unexpected, else 3 on a timeout."""
    if any(r.result.outcome.is_failure for r in rows):
        return EXIT_BAD_INPUT
    if any(not r.as_expected and r.result.outcome.verdict != Verdict.TIMEOUT for r in rows):
        return EXIT_UNEXPECTED
    if any(r.result.outcome.verdict == Verdict.TIMEOUT for r in rows):
        return EXIT_TIMEOUT
    return EXIT_OK


def _cell(text: str) -> str:
    """Escape a markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


REPORT_COLUMNS = (
    "config", "about", "bounds", "expected", "got", "states", "distinct", "depth", "seconds",
    "reproduce",
)  # fmt: skip
REPORT_HEADER = "| " + " | ".join(REPORT_COLUMNS) + " |"
"""The first line of every report `--report` writes."""


def markdown_report(rows: Sequence[CheckRow]) -> str:
    """The results as a markdown table."""
    lines = [REPORT_HEADER, "|" + "---|" * len(REPORT_COLUMNS)]
    for row in rows:
        r, c = row.result, row.config
        got = str(r.outcome) + ("" if row.as_expected else " (unexpected)")
        numbers = [fmt(r.states), fmt(r.distinct), fmt(r.depth), fmt(r.seconds)]
        cells = [c.name, c.about, c.bounds, str(c.expect), got, *numbers, f"`{row.command}`"]
        lines.append("| " + " | ".join(_cell(x) for x in cells) + " |")
    ok = sum(r.as_expected for r in rows)
    return "\n".join([*lines, "", f"{len(rows)} configs, {ok} as expected.", ""])


def json_report(
    rows: Sequence[CheckRow], spec_dir: Path, checker: str, run: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The results as a JSON object (with `run`, what run_record says of the run)."""
    results = [
        {
            "config": row.config.name,
            "module": row.config.module,
            "about": row.config.about,
            "bounds": row.config.bounds,
            "expected": str(row.config.expect),
            **row.result.summary(),
            "as_expected": row.as_expected,
            "counterexample": str(row.counterexample) if row.counterexample else None,
            "command": row.command,
        }
        for row in rows
    ]
    ok = sum(r.as_expected for r in rows)
    summary = {"configs": len(rows), "as_expected": ok, "exit_code": exit_code(rows)}
    head = {"spec_dir": str(spec_dir), "checker": checker, **({"run": run} if run else {})}
    return {**head, "results": results, "summary": summary}


def now() -> str:
    """The time now, UTC, ISO 8601 to the millisecond."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def run_record(spec_dir: Path, configs: Sequence[ModelConfig], started: str) -> dict[str, Any]:
    """What the JSON report says of its run: kreplica's version, the spec's and each config's
    sha256, the start and end times and the command line."""
    try:
        kreplica = version("kreplica")
    except PackageNotFoundError:
        kreplica = "unknown"
    files = sorted(spec_dir.glob("*.tla")) + [c.path for c in configs]
    return {
        "kreplica_version": kreplica,
        "started": started,
        "finished": now(),
        "spec_sha256": {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in files},
        "command": shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]]),
    }
