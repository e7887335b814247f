"""One mutant through the campaign: `kreplica fuzz` on the mutated implementation, then, if the
fuzzer found nothing, `kreplica conform` on every trace it recorded.

By default the campaign is issue #14's study's, at 500 runs where the study ran 150 (never tuned
to a mutant; docs/mutation.md says why): `kreplica fuzz --examples 500 --steps 50 --seed S
--corpus C --no-shrink`, then `kreplica conform C --no-spark --workers 1 --why 0` (the verdict
is what counts); then, for each protocol variant of `variants`, the same size of campaign under
that variant: `kreplica fuzz --variant V --rules-only ...` (an unsafe variant breaks the spec's
invariants by design, so only Kafka's own rules are checked: timing, the answers to clients, the
HW by the clock, a step's effect, and a step that raises) and `kreplica conform C --variant V
...`, the variant's traces against the spec under the same variant; a variant the spec does not
model (isr=alter-partition) has no spec to conform to, so its stage is `kreplica fuzz --variant
V ...` with the fuzzer's checks on (it is a safe protocol: they hold for it). The variants' code
(truncation to the HW and the out-of-range reset, R9; unclean elections; KIP-101's end offsets
without epochs, R6; an ISR change answered later, KIP-497; requests without the current leader
epoch, KIP-320) is shared with the correct protocol's, and no other campaign reaches it. The
first stage is then the correct protocol's alone (`fuzz --stages correct`), as it was before
`kreplica fuzz` had stages.

With no `variants` (`kreplica mutate --variants ''`) the campaign is `kreplica fuzz`'s own
default of stages (issue #44: the correct protocol and every variant the implementation runs,
each judged by what holds for it, docs/fuzzing.md): one `kreplica fuzz --examples N --steps 50
--seed S --corpus C --no-shrink` with N = `examples` times its stages, so that each stage runs
`examples` runs with the same seed, exactly the runs of the variant stages above, then one
`kreplica conform C --as-recorded ...`, each trace under the variant it records (the stages the
spec does not model write none). A kill in a variant's stage is reported `fuzz (V)` or
`conformance (V)` as above.
Verdicts:

    killed      fuzz exited 1 (an invariant failed, a step raised, a run did not settle), or
                conform found a trace the spec does not allow (exit 1; or exit 2, which
                outranks 1, when other traces could not be checked); `by` says which
    timeout     the mutant's time limit passed (counted as killed, reported apart)
    stillborn   the mutated package does not import, or fuzz exited 2 (bad input at start-up):
                left out of the rate
    error       conform could not check some trace and found none violating (exit 2), or
                another exit code, or the failure is not the mutant's: the unmutated
                implementation replays it as it is (`kreplica replay` of the saved schedule
                or of the rejected trace exits 0; the mutant only changed which steps the
                fuzzer took, and a divergence of the implementation's own showed): left out
                of the rate, reported with its reason, and run again when the results are
                resumed
    survived    both exited 0

Every process runs in its own process group (and dies with this one, `tla.tlc.death_signal`);
a timeout or Ctrl-C kills the group, so nothing is left behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from itertools import islice
from pathlib import Path

from kreplica.conformance.mutation.operators import Mutant
from kreplica.conformance.mutation.overlay import build_overlay, overlay_env
from kreplica.conformance.tla.tlc import death_signal
from kreplica.impl.variants import distinct_variants, not_in_spec, parse_variant

KILLED = "killed"
TIMEOUT = "timeout"
STILLBORN = "stillborn"
ERROR = "error"
SURVIVED = "survived"
EQUIVALENT = "equivalent"
"""Not a run's verdict: a mutant argued equivalent in equivalent.toml (never run)."""

KREPLICA = ("-m", "kreplica")
"""`python -m kreplica ARGS` is `kreplica ARGS` with the interpreter that runs this one (and
the overlay's mutated kreplica.impl, first on its PYTHONPATH)."""


@dataclass(frozen=True, slots=True)
class Campaign:
    """The campaign's settings: fuzz runs and steps, the fuzz seed, seconds per mutant."""

    examples: int = 500
    steps: int = 50
    seed: int = 1
    time_limit: float = 600.0
    variants: tuple[str, ...] = (
        "truncation=hw",
        "election=unclean",
        "truncation=kip101",
        "isr=alter-partition",
        "fencing=off",
        "acks=1",
    )
    """Protocol variants (`kreplica fuzz --variant`) whose runs must pass too: a variant the
    spec models by conformance, one it does not by the fuzzer's own checks. None: `kreplica
    fuzz`'s default campaign of stages alone (`FUZZ_STAGES`)."""


FUZZ_STAGES = 1 + len(distinct_variants())
"""The stages of `kreplica fuzz`'s default campaign: the correct protocol and each variant of
`variants.distinct_variants` (`fuzz.stages.STAGE_NAMES`)."""


@dataclass(slots=True)
class Outcome:
    """What happened to one mutant: the verdict, who killed it, how long, and why (one line)."""

    mutant: str
    verdict: str
    by: str | None = None
    seconds: float = 0.0
    detail: str = ""
    description: str = ""
    exits: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        """The outcome as a JSON object."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, object]) -> Outcome:
        """An outcome from `to_json`'s object."""
        return cls(**data)  # type: ignore[arg-type]


class _TimedOut(Exception):
    """The mutant's time limit passed while a command ran."""


class Stopped(Exception):
    """`stop_all` was called: the campaign was interrupted, its outcome is void."""


_LIVE: set[subprocess.Popen[bytes]] = set()
_LIVE_LOCK = threading.Lock()
_STOPPING = threading.Event()


def stop_all() -> None:
    """Kill every command a campaign is running (by process group) and start no other."""
    with _LIVE_LOCK:
        _STOPPING.set()
        live = list(_LIVE)
    for proc in live:
        _kill(proc)


def allow_runs() -> None:
    """Allow campaigns again after `stop_all`."""
    _STOPPING.clear()


def _run(args: list[str], cwd: Path, env: dict[str, str], deadline: float) -> tuple[int, str]:
    """Run `kreplica ARGS` in its own process group until `deadline` (monotonic); return its
    exit code and its output (stdout then stderr). _TimedOut after killing the group; Stopped
    if `stop_all` was called."""
    out_path = cwd / f"{args[0]}.out"
    with out_path.open("w", encoding="utf-8") as out:
        with _LIVE_LOCK:
            if _STOPPING.is_set():
                raise Stopped
            proc = subprocess.Popen(
                [sys.executable, *KREPLICA, *args],
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=death_signal(),
            )
            _LIVE.add(proc)
        try:
            code = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise _TimedOut from None
        finally:  # a timeout, Ctrl-C, or what the command left running in its group
            _kill(proc)
            with _LIVE_LOCK:
                _LIVE.discard(proc)
    if _STOPPING.is_set():
        raise Stopped
    return code, out_path.read_text(encoding="utf-8", errors="replace")


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL a process group and reap its leader."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _last_line(text: str, *markers: str) -> str:
    """The last output line holding one of the markers (else the last non-empty line)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        if any(m in line for m in markers):
            return line[:300]
    return lines[-1][:300] if lines else ""


def _violation(out: Path) -> tuple[str, str]:
    """The first violating trace of a conform result set: its id, and a line saying where and
    why (("", ""): none)."""
    try:
        lines = (out / "results.json").read_text(encoding="utf-8").splitlines()
        rows = [json.loads(line) for line in lines if line.strip()]
    except (OSError, ValueError):
        return "", ""
    for row in rows:
        if isinstance(row, dict) and row.get("verdict") == "violates":
            diff = str(row.get("diff") or row.get("reason") or "")[:200]
            where = f"step {row.get('step')} ({row.get('action')})"
            trace_id = str(row.get("trace_id"))
            return trace_id, f"{trace_id} violates at {where}: {diff}"
    return "", ""


OWN_FAILURE = "not the mutant's: the unmutated implementation replays it as it is"
"""The detail of an error verdict for a failure the implementation shows without the edit."""


def unmutated_replays(target: str, work: Path, deadline: float) -> bool:
    """True if `kreplica replay TARGET` on the unmutated implementation exits 0: a saved
    schedule shows the violation it recorded, or a corpus trace (PATH:LINE) is reproduced
    state for state. The failure is then the implementation's own, not the mutant's."""
    code, _ = _run(["replay", target], work, dict(os.environ), deadline)
    return code == 0


def run_mutant(mutant: Mutant, campaign: Campaign, scratch: Path | None = None) -> Outcome:
    """Build the mutant's overlay in a fresh folder (under `scratch`), run the campaign, remove
    the folder, and return the outcome."""
    outcome = Outcome(mutant.id, SURVIVED, description=mutant.description)
    return _in_scratch(
        campaign, outcome, "kreplica-mutant-", scratch,
        lambda work, deadline: _campaign(mutant, campaign, work, deadline, outcome),
    )  # fmt: skip


def run_baseline(campaign: Campaign, scratch: Path | None = None) -> Outcome:
    """Run the campaign on the implementation itself, unmutated: it must survive (every stage
    exits 0), or a kill says nothing about the mutant that was killed."""
    outcome = Outcome("(unmutated)", SURVIVED)
    return _in_scratch(
        campaign, outcome, "kreplica-baseline-", scratch,
        lambda work, deadline: _stages(
            campaign, work, dict(os.environ), deadline, outcome, mutated=False
        ),
    )  # fmt: skip


def _in_scratch(
    campaign: Campaign,
    outcome: Outcome,
    prefix: str,
    scratch: Path | None,
    body: Callable[[Path, float], None],
) -> Outcome:
    """Run `body` in a fresh folder within the campaign's time limit; time it, mark a time-out,
    remove the folder, and return the outcome it filled in."""
    start = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix=prefix, dir=scratch))
    try:
        body(work, start + campaign.time_limit)
    except _TimedOut:
        outcome.verdict, outcome.detail = TIMEOUT, f"over {campaign.time_limit:g} s"
    finally:
        outcome.seconds = round(time.monotonic() - start, 1)
        shutil.rmtree(work, ignore_errors=True)
    return outcome


def _stages(
    campaign: Campaign,
    work: Path,
    env: dict[str, str],
    deadline: float,
    o: Outcome,
    mutated: bool = True,
) -> None:
    """The correct protocol's stage (or, without variants, every stage of `kreplica fuzz`'s
    default campaign), then each variant's, until one does not survive."""
    for variant in (None, *campaign.variants):
        where = work / (variant or "default").replace("=", "-")
        _stage(campaign, variant, where, env, deadline, o, mutated)
        if o.verdict != SURVIVED:
            return


def _campaign(mutant: Mutant, campaign: Campaign, work: Path, deadline: float, o: Outcome) -> None:
    """The campaign's steps, filling in the outcome `o` (raises _TimedOut)."""
    try:
        overlay = build_overlay(mutant, work / "overlay")
    except (KeyError, ValueError) as err:
        o.verdict, o.detail = STILLBORN, f"cannot make the mutant: {err}"
        return
    env = overlay_env(overlay)
    module = "kreplica.impl." + mutant.file.removesuffix(".py")
    if _STOPPING.is_set():
        raise Stopped
    probe = subprocess.run(
        [sys.executable, "-c", f"import {module}, kreplica.impl.cluster"],
        env=env, cwd=work, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    if probe.returncode != 0:
        o.verdict, o.detail = STILLBORN, "import fails: " + _last_line(probe.stderr)
        return
    _stages(campaign, work, env, deadline, o)


def _stage(
    campaign: Campaign,
    variant: str | None,
    work: Path,
    env: dict[str, str],
    deadline: float,
    o: Outcome,
    mutated: bool,
) -> None:
    """One fuzz + conform campaign: the correct protocol's (`variant` None, invariants on), a
    modelled variant's (Kafka's rules, then conformance), or an unmodelled variant's (the
    fuzzer's checks only: there is no spec to conform to); fills in the outcome `o` unless
    the mutant survives it. For a mutant (`mutated`), a failure the unmutated implementation
    replays is an error."""
    work.mkdir()
    corpus = work / "corpus.jsonl"
    staged = variant is None and not campaign.variants  # kreplica fuzz's stages
    chosen = [] if variant is None else ["--variant", variant]
    chosen_fuzz = chosen if variant is not None or staged else ["--stages", "correct"]
    modelled = variant is None or not not_in_spec(parse_variant([variant]))
    examples = campaign.examples * (FUZZ_STAGES if staged else 1)
    fuzz_args = [
        "fuzz", "--examples", str(examples), "--steps", str(campaign.steps),
        "--seed", str(campaign.seed), "--no-shrink", "--out", str(work / "fuzz"), *chosen_fuzz,
        *(["--corpus", str(corpus)] if modelled else []),
        *([] if variant is None or not modelled else ["--rules-only"]),
    ]  # fmt: skip
    where = "" if variant is None else f" ({variant})"
    code, text = _run(fuzz_args, work, env, deadline)
    o.exits["fuzz" + where] = code
    if code != 0:
        _judge_fuzz(code, text, where or _failed_stage(text), work, deadline, o, mutated)
        return
    if not modelled:
        return
    conform_args = ["conform", str(corpus), "--no-spark", "--workers", "1", "--why", "0", *chosen]
    conform_args += ["--as-recorded"] if staged else []
    code, text = _run([*conform_args, "--out", str(work / "conform")], work, env, deadline)
    o.exits["conform" + where] = code
    if code != 0:
        _judge_conform(code, text, where, work, deadline, o, mutated)


def _failed_stage(text: str) -> str:
    """` (V)` for the variant stage V whose failure `kreplica fuzz`'s summary of stages
    reports (`  stage V: ...; failed: ...`), "" for the correct protocol's or none."""
    for line in text.splitlines():
        head, _, tail = line.strip().partition(": ")
        if head.startswith("stage ") and "; failed: " in tail:
            name = head.removeprefix("stage ")
            return "" if name == "correct" else f" ({name})"
    return ""


def _recorded_stage(corpus_line: str) -> str:
    """` (V)` for a corpus trace (`PATH:LINE`) recorded under a variant V, "" for the correct
    protocol's or one that cannot be read."""
    path, _, number = corpus_line.rpartition(":")
    try:
        with open(path, encoding="utf-8") as lines:
            line = next(islice(lines, int(number) - 1, None))
        label = json.loads(line)["#meta"]["variant"]
    except (OSError, ValueError, KeyError, TypeError, StopIteration):
        return ""
    return "" if label == "default" or not isinstance(label, str) else f" ({label})"


def _judge_fuzz(
    code: int, text: str, where: str, work: Path, deadline: float, o: Outcome, mutated: bool
) -> None:
    """The verdict of a fuzz stage that did not pass (exit `code`, output `text`)."""
    if code == 2:
        o.verdict, o.detail = STILLBORN, f"fuzz{where} exit 2: " + _last_line(text, "error")
        return
    if code != 1:
        o.verdict, o.detail = ERROR, f"fuzz{where} exit {code}: " + _last_line(text)
        return
    detail = _last_line(text, "violation ")  # the summary's line, else the traceback's
    saved = sorted((work / "fuzz").glob("*.schedule.json"))
    if mutated and saved and unmutated_replays(str(saved[0]), work, deadline):
        o.verdict, o.detail = ERROR, f"fuzz{where}: {OWN_FAILURE}: {detail}"
        return
    o.verdict, o.by, o.detail = KILLED, "fuzz" + where, detail


def _judge_conform(
    code: int, text: str, where: str, work: Path, deadline: float, o: Outcome, mutated: bool
) -> None:
    """The verdict of a conform stage that did not pass (exit `code`, output `text`)."""
    trace_id, violation = _violation(work / "conform") if code in (1, 2) else ("", "")
    where = where or _recorded_stage(trace_id)
    if code == 2 and violation:  # exit 2 outranks 1: some traces unchecked, some violate
        violation = f"{violation} (and: {_last_line(text, 'could not be checked')})"
    killed = code == 1 or bool(violation)
    if killed and mutated and trace_id and unmutated_replays(trace_id, work, deadline):
        o.verdict, o.detail = ERROR, f"conformance{where}: {OWN_FAILURE}: {violation}"
        return
    if killed:
        o.verdict, o.by = KILLED, "conformance" + where
        o.detail = violation or _last_line(text, "violat")
    else:
        o.verdict = ERROR
        o.detail = f"conform{where} exit {code}: " + _last_line(text, "error")
