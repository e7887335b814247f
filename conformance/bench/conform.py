"""Benchmark `kreplica conform`: end-to-end trace events checked per second, side by side.

    python -m kreplica.conformance.bench.conform --traces 10000 --steps 100

records a random-walk corpus of the correct protocol (JSON-lines files of --per-file traces;
or takes --corpus), then checks it with Spark local[1], Spark local[2] and the process pool
(--no-spark, 2 workers), each in a fresh process, and prints events/s, the ratios the targets
name, the load averages, and the peak memory of the driver process (its own resident set, not
Spark's JVM).

    python -m kreplica.conformance.bench.conform --master spark://127.0.0.1:7077 \
        --executor-python /usr/bin/python3 --mode "spark local[2]" --mode "spark cluster"

adds the mode "spark cluster": the same command with `--master URL` (a standalone cluster, for
instance one master and one worker), its executors running `--executor-python` (exported as
PYSPARK_PYTHON to the driver, which passes it on), so local[2] and a cluster are measured side
by side.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from kreplica.conformance.errors import run_command
from kreplica.conformance.fuzz.random_walk import corpus
from kreplica.conformance.tla.itf import dumps_trace
from kreplica.conformance.validate.results import PARQUET, iter_rows
from kreplica.impl.variants import Variant

MODES: dict[str, list[str]] = {
    "spark local[1]": ["--master", "local[1]"],
    "spark local[2]": ["--master", "local[2]"],
    "process pool (2)": ["--no-spark", "--workers", "2"],
}
CLUSTER = "spark cluster"
"""The mode that `--master URL` adds (run only when a URL is given)."""


@dataclass
class Measured:
    """One mode's run."""

    mode: str
    seconds: float
    events: int
    traces: int
    driver_mb: float
    exit_code: int

    @property
    def rate(self) -> float:
        """Events checked per second, end to end."""
        return self.events / self.seconds if self.seconds else 0.0


def make_corpus(directory: Path, traces: int, steps: int, per_file: int, seed: int) -> int:
    """Write the corpus as JSON-lines files; return its number of events."""
    directory.mkdir(parents=True, exist_ok=True)
    events, handle = 0, None
    for written, trace in enumerate(corpus(traces, steps, seed, Variant(), replicas=3)):
        if written % per_file == 0:
            if handle:
                handle.close()
            handle = (directory / f"part-{written // per_file:05d}.jsonl").open("w")
        assert handle is not None
        handle.write(json.dumps(json.loads(dumps_trace(trace)), separators=(",", ":")) + "\n")
        events += len(trace.states) - 1
    if handle:
        handle.close()
    return events


def _load() -> str:
    """The 1-, 5- and 15-minute load averages (the machine may be shared)."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def run_mode(
    mode: str, corpus_dir: Path, out: Path, batch_size: int, master: str | None = None,
    executor_python: str | None = None,
) -> Measured:  # fmt: skip
    """Run `kreplica conform` in a fresh process; time it and read its peak RSS. The cluster
    mode runs against `master`, its executors with `executor_python`."""
    code = (
        "import resource, runpy, sys\n"
        "try:\n    runpy.run_module('kreplica', run_name='__main__')\nexcept SystemExit as e:\n"
        "    print('RSS', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
        "    raise\n"
    )
    args = ["conform", str(corpus_dir), "--out", str(out), "--batch-size", str(batch_size)]
    env = dict(os.environ)
    if mode == CLUSTER:
        if master is None:
            raise click.UsageError(f"the mode {CLUSTER!r} needs --master URL")
        extra = ["--master", master]
        if executor_python:
            env["PYSPARK_PYTHON"] = executor_python
    else:
        extra = MODES[mode]
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", code, *args, *extra],
        capture_output=True, text=True, check=False, env=env,
    )  # fmt: skip
    seconds = time.monotonic() - start
    rss = [line for line in proc.stderr.splitlines() if line.startswith("RSS ")]
    driver_mb = int(rss[-1].split()[1]) / 1024 if rss else float("nan")
    if not (out / PARQUET).exists():
        lines = proc.stderr.strip().splitlines()
        raise click.ClickException(f"{mode} failed: {lines[-1] if lines else proc.returncode}")
    rows = list(iter_rows(out / PARQUET, ["events"]))
    events = sum(r["events"] or 0 for r in rows)
    return Measured(mode, seconds, events, len(rows), driver_mb, proc.returncode)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--traces", type=click.IntRange(min=1), default=10_000, show_default=True)
@click.option("--steps", type=click.IntRange(min=1), default=100, show_default=True)
@click.option("--per-file", type=click.IntRange(min=1), default=500, show_default=True)
@click.option("--batch-size", type=click.IntRange(min=1), default=2500, show_default=True)
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--mode", "modes", multiple=True, type=click.Choice([*MODES, CLUSTER]),
              help="Modes to run (default: all three, and the cluster with --master).")  # fmt: skip
@click.option("--master", help="A Spark cluster's master URL (spark://HOST:PORT): adds the "
              f"mode {CLUSTER!r}.")  # fmt: skip
@click.option("--executor-python", help="The cluster's executors' Python (PYSPARK_PYTHON); "
              "by default the workers' python3.")  # fmt: skip
@click.option("--corpus", "given", type=click.Path(exists=True, path_type=Path),
              help="Check this corpus (file or directory) instead of recording one.")  # fmt: skip
def main(
    traces: int, steps: int, per_file: int, batch_size: int, seed: int, modes: tuple[str, ...],
    given: Path | None, master: str | None, executor_python: str | None,
) -> None:  # fmt: skip
    """Measure conformance checking throughput on Spark and on a process pool."""
    console = Console(highlight=False)
    with tempfile.TemporaryDirectory(prefix="kreplica-bench-") as tmp:
        root = Path(tmp)
        source = given or root / "corpus"
        if given is None:
            console.print(f"recording {traces} traces of up to {steps} steps ...")
            events = make_corpus(source, traces, steps, per_file, seed)
            console.print(f"corpus: {events} events in {-(-traces // per_file)} files")
        results = []
        for mode in modes or (*MODES, *([CLUSTER] if master else [])):
            console.print(f"checking with {mode} (load {_load()}) ...")
            out = root / re.sub(r"[^a-z0-9]+", "-", mode)
            results.append(run_mode(mode, source, out, batch_size, master, executor_python))
        console.print(f"load average at the end: {_load()}")
    table = Table("mode", "traces", "events", "seconds", "events/s", "driver peak MB", "exit")
    for m in results:
        table.add_row(m.mode, str(m.traces), str(m.events), f"{m.seconds:.1f}", f"{m.rate:,.0f}",
                      f"{m.driver_mb:.0f}", str(m.exit_code))  # fmt: skip
    console.print(table)
    by = {m.mode: m.rate for m in results}
    if by.get("spark local[1]") and by.get("spark local[2]"):
        console.print(f"local[2] / local[1]: {by['spark local[2]'] / by['spark local[1]']:.2f}")
    if by.get("spark local[2]") and by.get("process pool (2)"):
        console.print(f"spark local[2] / pool: {by['spark local[2]'] / by['process pool (2)']:.2f}")
    if by.get(CLUSTER) and by.get("spark local[2]"):
        console.print(f"cluster / local[2]: {by[CLUSTER] / by['spark local[2]']:.2f}")


if __name__ == "__main__":
    run_command(main, "python -m kreplica.conformance.bench.conform")
