"""Benchmark of one TLC process checking one batch of traces: where trace validation's time goes.

Takes the first `--traces` lines of a JSON-lines corpus, writes them as one batch (as
`kreplica conform` does, with the Java reader), and runs TLC on it `--repeat` times, reporting
for each run the CPU seconds of the TLC process, the part spent reading the traces (the reader
times itself), the CPU microseconds per trace event, and the process's peak resident memory.
The JVM's start and warm-up are included, as they are in a real batch. `time_batch` is the
engine; `kreplica bench tlc` renders its runs:

    kreplica bench tlc --corpus b10k/a.jsonl --traces 1000 --repeat 3
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from kreplica.conformance.errors import KreplicaError, file_error
from kreplica.conformance.tla.specs import resolve_spec_dir
from kreplica.conformance.tla.tlc import (
    SHORT_RUN_JVM_FLAGS,
    TlcOptions,
    find_java,
    find_tla2tools,
    tlc_command,
)
from kreplica.conformance.validate import tlcdata
from kreplica.conformance.validate.tracecheck import (
    TRACE_MODULE,
    SpecParams,
    parse_printed,
    per_trace,
    prepare,
    tlc_config,
    write_batch,
)

_READ = re.compile(r"kreplica TraceData: \d+ bytes from .* in ([0-9.]+) ms")


@dataclass(frozen=True)
class Run:
    """One TLC run over the batch."""

    events: int
    conforming: int
    wall_seconds: float
    cpu_seconds: float
    read_seconds: float
    peak_mb: float

    @property
    def us_per_event(self) -> float:
        """CPU microseconds of the TLC process per trace event."""
        return 1e6 * self.cpu_seconds / self.events if self.events else 0.0


def read_lines(corpus: Path, traces: int) -> list[str]:
    """The corpus's first `traces` lines; KreplicaError if it cannot be read or has none."""
    try:
        with corpus.open(encoding="utf-8") as handle:
            lines = [line.rstrip("\n") for line in itertools.islice(handle, traces)]
    except OSError as err:
        raise file_error("read", corpus, err) from None
    except UnicodeDecodeError:
        raise KreplicaError(f"cannot read {corpus}: not UTF-8 text") from None
    if not lines:
        raise KreplicaError(f"{corpus}: no traces (an empty corpus)")
    return lines


def write(corpus: Path, traces: int, workdir: Path, params: SpecParams) -> list[str]:
    """Write the batch of the corpus's first `traces` lines into `workdir`; the TLC command."""
    java, jar = find_java(), find_tla2tools()  # no Java: said at once, before reading
    lines = read_lines(corpus, traces)
    batch = [prepare(f"{corpus}:{n}", line, fast=True) for n, line in enumerate(lines, 1)]
    module = write_batch(workdir, resolve_spec_dir(None), batch, tlcdata.build_reader(jar))
    config = workdir / f"{TRACE_MODULE}.cfg"
    config.write_text(tlc_config(params, batch[0].replicas, diagnose=False), encoding="utf-8")
    options = TlcOptions(java=java, jar=jar, jvm_flags=SHORT_RUN_JVM_FLAGS)
    cmd = tlc_command(module, config, options, workdir)
    return [cmd[0], f"-D{tlcdata.PROPERTY}.verbose=true", *cmd[1:]]


def run_once(cmd: list[str], workdir: Path) -> Run:
    """Run TLC once; its CPU time and peak memory from the kernel, its reading time from the
    reader."""
    (workdir / "tmp").mkdir(exist_ok=True)
    shutil.rmtree(workdir / "meta", ignore_errors=True)
    out, err = workdir / "stdout.txt", workdir / "stderr.txt"
    start = time.monotonic()
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = subprocess.Popen(cmd, cwd=workdir, stdout=stdout, stderr=stderr)
        _, _, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    text = out.read_text(encoding="utf-8", errors="replace")
    read = _READ.search(err.read_text(encoding="utf-8", errors="replace"))
    events = sum(int(n) for n in re.findall(r'<<"kreplica-events", \d+, (\d+)>>', text))
    return Run(
        events=events,
        conforming=len(per_trace(parse_printed(text)).conforms),  # shared events: each trace
        wall_seconds=wall,
        cpu_seconds=usage.ru_utime + usage.ru_stime,
        read_seconds=float(read.group(1)) / 1000 if read else float("nan"),
        peak_mb=usage.ru_maxrss / 1024,  # Linux: KiB
    )


def time_batch(corpus: Path, traces: int, repeat: int, fetch_max_records: int) -> list[Run]:
    """Write the batch of the corpus's first `traces` lines and run TLC on it `repeat` times,
    in a scratch directory removed afterwards; KreplicaError (before any TLC run) if the corpus
    cannot be read or Java or TLC cannot be found."""
    params = SpecParams(fetch_max_records=fetch_max_records)
    workdir = Path(tempfile.mkdtemp(prefix="kreplica-bench-tlc-"))
    try:
        cmd = write(corpus, traces, workdir, params)
        return [run_once(cmd, workdir) for _ in range(repeat)]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
