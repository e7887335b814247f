"""Run Apalache (best effort): `apalache-mc` on PATH, else its Docker image.

Apalache's exit codes: 0 no error found, 12 a counterexample (of any kind: invariant, deadlock,
temporal), 75 the spec could not be evaluated, 120 type-checking error, 150 parse error,
255 other errors. A counterexample is read back from the `violation*.itf.json` it writes.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from kreplica.conformance.errors import CheckerError, KreplicaError
from kreplica.conformance.tla.itf import ItfTrace, lift_action, read_trace
from kreplica.conformance.tla.tlc import spawn, stream
from kreplica.conformance.tla.tlc_output import Outcome, TlcResult, Verdict, one_line

APALACHE_IMAGE = "ghcr.io/apalache-mc/apalache"
MISSING = (
    "apalache-mc not found and no Docker engine is running; install Apalache or use --checker tlc"
)
_EXIT_CODES = {
    0: Verdict.OK,
    12: Verdict.VIOLATION,
    75: Verdict.EVAL_ERROR,
    120: Verdict.PARSE_ERROR,
    150: Verdict.PARSE_ERROR,
}
_CFG_KEYWORDS = frozenset(
    [
        "CONSTANT",
        "CONSTANTS",
        "INIT",
        "NEXT",
        "SPECIFICATION",
        "INVARIANT",
        "INVARIANTS",
        "PROPERTY",
        "PROPERTIES",
        "SYMMETRY",
        "CONSTRAINT",
        "CONSTRAINTS",
        "ACTION_CONSTRAINT",
        "ACTION_CONSTRAINTS",
        "VIEW",
        "CHECK_DEADLOCK",
        "POSTCONDITION",
        "ALIAS",
    ]
)
_CFG_COMMENT = re.compile(r"\\\*[^\n]*|\(\*.*?\*\)", re.S)
_ERROR_LINE = re.compile(r"(error|violat|deadlock|exception)", re.I)


@dataclass(frozen=True)
class ApalacheLauncher:
    """How to start Apalache: the `apalache-mc` executable, or `docker`."""

    kind: str  # "native" or "docker"
    executable: str


def _docker_running(docker: str) -> bool:
    """Whether a Docker engine answers `docker info`."""
    try:
        done = subprocess.run([docker, "info"], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def find_apalache() -> ApalacheLauncher:
    """Find `apalache-mc` on PATH, else a running Docker engine; CheckerError if neither."""
    native = shutil.which("apalache-mc")
    if native:
        return ApalacheLauncher("native", native)
    docker = shutil.which("docker")
    if docker and _docker_running(docker):
        return ApalacheLauncher("docker", docker)
    raise CheckerError(MISSING)


def apalache_command(
    launcher: ApalacheLauncher, module: Path, config: Path, outdir: Path, check_deadlock: bool
) -> tuple[list[str], str | None]:
    """The command line (run with cwd = the module's directory) and the Docker container name."""
    args = ["check", f"--config={config.name}"]
    if not check_deadlock:
        args.append("--no-deadlock")
    if launcher.kind == "native":
        return [launcher.executable, *args, f"--out-dir={outdir}", module.name], None
    name = f"kreplica-apalache-{uuid.uuid4().hex[:12]}"
    docker = [launcher.executable, "run", "--rm", "--name", name]
    docker += ["-v", f"{module.parent}:/var/apalache", "-v", f"{outdir}:/out"]
    docker += ["-w", "/var/apalache", APALACHE_IMAGE]
    return [*docker, *args, "--out-dir=/out", module.name], name


def _invariant_names(config: Path) -> list[str]:
    """The invariants a TLC config names (Apalache does not print the violated one's name)."""
    try:
        text = config.read_text(encoding="utf-8")
    except OSError:
        return []
    names: list[str] = []
    collecting = False
    for word in _CFG_COMMENT.sub(" ", text).split():
        if word in _CFG_KEYWORDS:
            collecting = word in ("INVARIANT", "INVARIANTS")
        elif collecting:
            names.append(word)
    return names


def _outcome(code: int | None, output: str, config: Path) -> Outcome:
    """Apalache's verdict from its exit code and output."""
    verdict = _EXIT_CODES.get(code if code is not None else -1, Verdict.CRASH)
    if verdict != Verdict.VIOLATION:
        return Outcome(verdict)
    lowered = output.lower()
    if "deadlock" in lowered:
        return Outcome(Verdict.DEADLOCK)
    if "temporal" in lowered:
        return Outcome(Verdict.TEMPORAL)
    names = _invariant_names(config)
    return Outcome(Verdict.VIOLATION, names[0] if len(names) == 1 else None)


def _counterexample(outdir: Path) -> ItfTrace | None:
    """The first ITF counterexample Apalache wrote, with our `action` variable lifted."""
    found = sorted(outdir.rglob("violation*.itf.json")) or sorted(outdir.rglob("*.itf.json"))
    if not found:
        return None
    try:
        return lift_action(read_trace(found[0]))
    except KreplicaError:
        return None


def _message(outcome: Outcome, output: str, stderr: str) -> str:
    """A one-line summary of what Apalache said."""
    lines = [ln.strip() for ln in (output + "\n" + stderr).splitlines() if ln.strip()]
    hits = [ln for ln in lines if _ERROR_LINE.search(ln)]
    return one_line(hits[-1] if hits else (lines[-1] if lines else str(outcome)))


def run_apalache(
    launcher: ApalacheLauncher,
    module: Path,
    config: Path,
    check_deadlock: bool = False,
    time_limit: float | None = None,
) -> TlcResult:
    """Check `module` with `config` using Apalache; the result has the same shape as TLC's."""
    workdir = Path(tempfile.mkdtemp(prefix="kreplica-apalache-"))
    try:
        outdir = workdir / "out"
        outdir.mkdir()
        cmd, container = apalache_command(launcher, module, config, outdir, check_deadlock)
        return _run(cmd, module.parent, workdir, config, time_limit, container)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _run(
    cmd: list[str],
    cwd: Path,
    workdir: Path,
    config: Path,
    limit: float | None,
    container: str | None,
) -> TlcResult:
    """Run one Apalache command and read its verdict."""
    start = time.monotonic()
    lines: list[str] = []
    try:
        proc = spawn(cmd, cwd, workdir / "stderr.txt")
    except OSError as err:
        return TlcResult(Outcome(Verdict.CRASH), message=f"cannot run {cmd[0]!r}: {err}")
    timed_out = stream(proc, lines.append, limit)
    if timed_out and container:
        subprocess.run(["docker", "kill", container], capture_output=True, check=False)
    output = "".join(lines)
    stderr = (workdir / "stderr.txt").read_text(encoding="utf-8", errors="replace")
    outcome = Outcome(Verdict.TIMEOUT) if timed_out else _outcome(proc.returncode, output, config)
    message = f"time limit of {limit:g}s reached" if timed_out else ""
    return TlcResult(
        outcome=outcome,
        message=message or _message(outcome, output, stderr),
        seconds=time.monotonic() - start,
        exit_code=proc.returncode,
        itf=_counterexample(workdir / "out") if outcome.verdict in _WITH_TRACE else None,
        command=cmd,
        output=output,
        stderr=stderr,
    )


_WITH_TRACE = frozenset({Verdict.VIOLATION, Verdict.DEADLOCK, Verdict.TEMPORAL})
