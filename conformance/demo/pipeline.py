"""The main job's steps: each a `kreplica` command run as a child process, its output in a log
file, and its inputs remembered, so that a second run reuses a step whose inputs did not change.

A step's inputs are its command line, the text of every file of the spec, the implementation
and the conformance code but this room's (a change there can change any outcome), and the
outputs of the steps it reads. Their sha256 is its key; a step is reused when `steps.json`
records the same key and an accepted exit code for it, and its outputs are all still there.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

PACKAGE = Path(__file__).resolve().parents[2]
"""The project's root: spec/, impl/ and conformance/ are here."""
CODE_DIRS = ("spec", "impl", "conformance")
RECORD = "steps.json"
"""What the last run of each step was: its key, exit code, time (in the output directory)."""


@dataclass(frozen=True)
class Step:
    """One step of the main job: a kreplica command, the exit codes that mean it did its job,
    the paths it writes and the paths (files or directories) whose content it reads."""

    name: str
    title: str
    args: tuple[str, ...]
    ok_exits: frozenset[int] = frozenset({0})
    outputs: tuple[Path, ...] = ()
    reads: tuple[Path, ...] = ()
    clean: tuple[Path, ...] = ()
    """Removed before the step runs (a corpus it appends to, a directory it fills)."""


@dataclass
class Outcome:
    """How a step went: run or reused, its exit code, its seconds, its log."""

    name: str
    title: str
    command: str
    exit_code: int
    seconds: float
    log: str
    reused: bool = False
    key: str = ""
    ok: bool = True


def _digest_files(paths: Iterable[Path], into: Any) -> None:
    for path in sorted(paths):
        if path.is_dir():
            _digest_files((p for p in path.rglob("*") if p.is_file() and _counts(p)), into)
        elif path.is_file():
            into.update(str(path).encode())
            into.update(path.read_bytes())


DEMO = Path(__file__).resolve().parent
"""This room: its report and pictures change no step's outcome (the pictures have a key of
their own)."""


def _counts(path: Path) -> bool:
    """A file whose content can change a step's outcome (not caches, not this room)."""
    return "__pycache__" not in path.parts and path.suffix != ".pyc" and DEMO not in path.parents


_CODE_KEY: str | None = None


def code_key() -> str:
    """sha256 of the spec, the implementation and the conformance code (once per process)."""
    global _CODE_KEY
    if _CODE_KEY is None:
        digest = hashlib.sha256()
        _digest_files([PACKAGE / d for d in CODE_DIRS], digest)
        _CODE_KEY = digest.hexdigest()
    return _CODE_KEY


def step_key(step: Step) -> str:
    """The key of a step's inputs: its command, the code, and what it reads."""
    digest = hashlib.sha256(code_key().encode())
    digest.update(json.dumps(step.args).encode())
    _digest_files(step.reads, digest)
    return digest.hexdigest()


def load_record(out: Path) -> dict[str, dict[str, Any]]:
    """The outcomes of the last run, by step name ({} when there is none, or it is unreadable)."""
    try:
        data = json.loads((out / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save_record(out: Path, record: dict[str, dict[str, Any]], outcome: Outcome) -> None:
    """Add `outcome` to `record` and write it (atomically: a crash leaves the old record), so
    that an interrupted run keeps what its finished steps did."""
    record[outcome.name] = asdict(outcome)
    tmp = out / (RECORD + ".tmp")
    tmp.write_text(json.dumps(record, indent=1), encoding="utf-8")
    tmp.replace(out / RECORD)


def kreplica_command(args: Sequence[str]) -> list[str]:
    """The command line of `kreplica ARGS`: the script beside this Python (the same venv)."""
    script = Path(sys.executable).parent / "kreplica"
    return [str(script) if script.is_file() else shutil.which("kreplica") or "kreplica", *args]


def run_step(
    step: Step,
    out: Path,
    record: dict[str, dict[str, Any]],
    on_line: Callable[[str], None] | None = None,
) -> Outcome:
    """Run `step` (its output to logs/NAME.log), or reuse its last run when its key and outputs
    say nothing changed."""
    key = step_key(step)
    log = out / "logs" / f"{step.name}.log"
    last = record.get(step.name)
    command = "kreplica " + " ".join(step.args)
    if (
        last is not None
        and last.get("key") == key
        and last.get("exit_code") in step.ok_exits
        and log.is_file()
        and all(p.exists() for p in step.outputs)
    ):
        return Outcome(step.name, step.title, command, int(last["exit_code"]),
                       float(last["seconds"]), str(log.relative_to(out)), True, key)  # fmt: skip
    log.parent.mkdir(parents=True, exist_ok=True)
    for path in step.clean:
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    start = time.monotonic()
    env = dict(os.environ, COLUMNS="160")
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    with log.open("w", encoding="utf-8") as handle:
        handle.write(f"$ {command}\n")
        handle.flush()
        proc = subprocess.Popen(
            kreplica_command(step.args),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=Path.cwd(),
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            handle.write(line)
            if on_line is not None and line.strip():
                on_line(line.strip())
        code = proc.wait()
    seconds = time.monotonic() - start
    ok = code in step.ok_exits
    return Outcome(step.name, step.title, command, code, seconds, str(log.relative_to(out)),
                   False, key if ok else "", ok)  # fmt: skip
