"""Benchmark `kreplica conform`: end-to-end trace events checked per second, side by side.

    kreplica bench conform --traces 10000 --steps 100

records a random-walk corpus of the correct protocol (JSON-lines files of --per-file traces;
or takes --corpus), then checks it with Spark local[1], Spark local[2] and the process pool
(--no-spark, 2 workers), each in a fresh process, and prints events/s, the ratios the targets
name, the load averages, and the peak memory of the driver process (its own resident set, not
Spark's JVM).

    kreplica bench conform --master spark://127.0.0.1:7077 \
        --executor-python /usr/bin/python3 --mode "spark local[2]" --mode "spark cluster"

adds the mode "spark cluster": the same command with `--master URL` (a standalone cluster, for
instance one master and one worker), its executors running `--executor-python` (exported as
PYSPARK_PYTHON to the driver, which passes it on), so local[2] and a cluster are measured side
by side. `make_corpus`, `measure` and `ratios` are the engine; `kreplica bench conform`
renders what they return.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kreplica.conformance.errors import BenchmarkFailed, KreplicaError
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


def load_average() -> str:
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
    mode runs against `master`, its executors with `executor_python` (KreplicaError without a
    master); BenchmarkFailed if the run wrote no results."""
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
            raise KreplicaError(f"the mode {CLUSTER!r} needs --master URL")
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
        raise BenchmarkFailed(f"{mode} failed: {lines[-1] if lines else proc.returncode}")
    rows = list(iter_rows(out / PARQUET, ["events"]))
    events = sum(r["events"] or 0 for r in rows)
    return Measured(mode, seconds, events, len(rows), driver_mb, proc.returncode)


def modes_to_run(modes: Sequence[str], master: str | None) -> tuple[str, ...]:
    """The modes chosen, in the order given; by default all of `MODES`, and `CLUSTER` when
    there is a master. KreplicaError if `CLUSTER` is chosen without a master."""
    chosen = tuple(modes) or (*MODES, *([CLUSTER] if master else []))
    if CLUSTER in chosen and master is None:
        raise KreplicaError(f"the mode {CLUSTER!r} needs --master URL")
    return chosen


def measure(
    source: Path, modes: Sequence[str], scratch: Path, batch_size: int,
    master: str | None = None, executor_python: str | None = None,
    on_mode: Callable[[str], None] = lambda mode: None,
) -> list[Measured]:  # fmt: skip
    """Check the corpus `source` once per mode (`run_mode`), each into a directory of its own
    under `scratch`; `on_mode(mode)` is told before each starts."""
    results = []
    for mode in modes:
        on_mode(mode)
        out = scratch / re.sub(r"[^a-z0-9]+", "-", mode)
        results.append(run_mode(mode, source, out, batch_size, master, executor_python))
    return results


def ratios(results: Sequence[Measured]) -> list[tuple[str, float]]:
    """The ratios of events/s the targets name, for the modes that ran: local[2] over local[1],
    local[2] over the pool, the cluster over local[2]."""
    by = {m.mode: m.rate for m in results}
    pairs = (
        ("local[2] / local[1]", "spark local[2]", "spark local[1]"),
        ("spark local[2] / pool", "spark local[2]", "process pool (2)"),
        ("cluster / local[2]", CLUSTER, "spark local[2]"),
    )
    return [(label, by[a] / by[b]) for label, a, b in pairs if by.get(a) and by.get(b)]
