"""One schedule in both worlds: kreplica's predictions beside real Kafka's outcome, and a
campaign of schedules kept in a journal, one JSON line per schedule, so a crash loses no
finished run and a second start picks up where the first stopped.

Two predictions stand beside each real outcome: the single, unjittered interleaving (kept in
the journal, compared field by field: `differences`) and the set of outcomes the model allows
(`predict.PredictedSet`, computed again from the schedule whenever a campaign is read, since it
depends only on the schedule, the runs and the seed). A real run agrees when its outcome is in
the set."""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kreplica.conformance.errors import KreplicaError, file_error
from kreplica.conformance.kafka.outcome import (
    AGREEMENT_FIELDS,
    Outcome,
    disagreements,
    outcome_from_json,
)
from kreplica.conformance.kafka.predict import PredictedSet, key_of, predict_set
from kreplica.conformance.kafka.schedule import Schedule, ScheduleError, parse_schedule
from kreplica.conformance.kafka.simulate import simulate
from kreplica.conformance.kafka.timing import harness_timing

RunReal = Callable[[Schedule], Outcome]
"""Runs a schedule on the real cluster and returns its outcome (RunFailed if this run failed;
any other KreplicaError, such as a missing Java or a port in use, ends the campaign)."""


class RunFailed(KreplicaError):
    """One real run failed (a node did not start in time, a JVM died): kept as that schedule's
    error, and the campaign goes on."""


@dataclass(frozen=True)
class Comparison:
    """A schedule's predicted and real outcomes, and the fields on which they differ."""

    schedule: Schedule
    predicted: Outcome
    real: Outcome | None
    """None when the real run failed (`error` says why)."""
    differences: tuple[str, ...]
    seconds: float
    """The real run's wall-clock time."""
    error: str = ""
    predicted_set: PredictedSet | None = None
    """The outcomes the model allows (not journalled: computed from the schedule)."""

    @property
    def agree_single(self) -> bool:
        """The real run finished and matches the single prediction on every compared field."""
        return self.real is not None and not self.differences

    @property
    def agree(self) -> bool:
        """The real run finished and its outcome is in the predicted set (without a set: the
        single prediction's agreement)."""
        if self.real is None:
            return False
        if self.predicted_set is None:
            return self.agree_single
        return self.predicted_set.allows(self.real)

    def to_json(self) -> dict[str, Any]:
        """One journal line."""
        return {
            "schedule": self.schedule.to_json(),
            "predicted": self.predicted.to_json(),
            "real": self.real.to_json() if self.real is not None else None,
            "differences": list(self.differences),
            "seconds": round(self.seconds, 1),
            "error": self.error,
        }


def comparison_from_json(data: dict[str, Any]) -> Comparison:
    """A Comparison from one journal line (KeyError/TypeError/ScheduleError if malformed)."""
    real = data["real"]
    return Comparison(
        schedule=parse_schedule(data["schedule"]),
        predicted=outcome_from_json(data["predicted"]),
        real=outcome_from_json(real) if real is not None else None,
        differences=tuple(data["differences"]),
        seconds=float(data["seconds"]),
        error=str(data.get("error", "")),
    )


def compare(schedule: Schedule, run_real: RunReal) -> Comparison:
    """Predict the schedule's outcome with the harness's timeouts, then run it for real."""
    predicted = simulate(schedule, timing=harness_timing())
    began = time.monotonic()
    try:
        real = run_real(schedule)
    except RunFailed as err:
        return Comparison(schedule, predicted, None, (), time.monotonic() - began, str(err))
    seconds = time.monotonic() - began
    return Comparison(schedule, predicted, real, tuple(disagreements(predicted, real)), seconds)


def read_journal(path: Path) -> list[Comparison]:
    """The comparisons a journal holds (a partial last line, left by a crash, is skipped)."""
    if not path.exists():
        return []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise file_error("read", path, err) from None
    found: list[Comparison] = []
    for number, line in enumerate(lines, 1):
        try:
            found.append(comparison_from_json(json.loads(line)))
        except (ValueError, KeyError, TypeError, ScheduleError) as err:
            if number == len(lines):
                break  # cut off by a crash while it was written
            raise KreplicaError(f"{path}:{number}: not a comparison ({err})") from None
    return found


def append_journal(path: Path, comparison: Comparison) -> None:
    """Append one line with one write and fsync it: a crash loses at most this line."""
    line = json.dumps(comparison.to_json(), separators=(",", ":")) + "\n"
    try:
        with path.open("a", encoding="utf-8") as out:
            out.write(line)
            out.flush()
            os.fsync(out.fileno())
    except OSError as err:
        raise file_error("write", path, err) from None


@dataclass(frozen=True)
class SetPlan:
    """How predicted sets are made: jittered runs per schedule and the seed (runs 0: none)."""

    runs: int
    seed: int = 0


def campaign(
    schedules: Iterable[Schedule],
    run_real: RunReal,
    journal: Path,
    on_done: Callable[[Comparison, bool], None] | None = None,
    sets: SetPlan | None = None,
) -> list[Comparison]:
    """Compare each schedule not already in the journal (by name), appending each result;
    every schedule's comparison, in order, each with its predicted set if `sets` asks for
    one. `on_done(comparison, resumed)` after each one."""
    done = {c.schedule.name: c for c in read_journal(journal)}
    results: list[Comparison] = []
    for schedule in schedules:
        resumed = schedule.name in done and done[schedule.name].schedule == schedule
        if resumed:
            result = done[schedule.name]
        else:
            result = compare(schedule, run_real)
            append_journal(journal, result)
        if sets is not None and sets.runs > 0:
            allowed = predict_set(schedule, sets.runs, sets.seed)
            result = dataclasses.replace(result, predicted_set=allowed)
        results.append(result)
        if on_done is not None:
            on_done(result, resumed)
    return results


def _cell(outcome: Outcome | None) -> list[str]:
    """An outcome as table cells: acked lost, diverged, HW, ISR, leader epoch."""
    if outcome is None:
        return ["-"] * 5
    lost = sum(len(v) for v in outcome.lost.values())
    return [
        f"{lost} lost" if lost else "no",
        "yes" if outcome.diverged else "no",
        str(outcome.high_watermark),
        "{" + ",".join(map(str, sorted(outcome.isr))) + "}",
        str(outcome.leader_epoch),
    ]


def markdown_table(comparisons: Iterable[Comparison]) -> str:
    """The outcome table: each schedule, kreplica's single prediction, real Kafka's outcome,
    whether they agree, and the predicted set's size and whether it holds the real outcome."""
    head = (
        "| schedule | acks | kreplica: acked lost | diverged | HW | ISR | epoch "
        "| kafka: acked lost | diverged | HW | ISR | epoch | single agrees | set size | in set |"
    )
    rows = [head, "|" + "---|" * 15]
    for c in comparisons:
        single = "yes" if c.agree_single else ("error: " + c.error if c.error else "**no**")
        size, inside = "-", "-"
        if c.predicted_set is not None:
            size = str(len(c.predicted_set.outcomes))
            inside = "-" if c.real is None else ("yes" if c.agree else "**no**")
        cells = [c.schedule.name, str(c.schedule.acks), *_cell(c.predicted), *_cell(c.real)]
        rows.append("| " + " | ".join([*cells, single, size, inside]) + " |")
    return "\n".join(rows) + "\n"


def agreement(comparisons: list[Comparison]) -> tuple[int, int, int]:
    """(agree, disagree, failed real runs): agreement by the predicted set where there is one."""
    agree = sum(c.agree for c in comparisons)
    failed = sum(c.real is None for c in comparisons)
    return agree, len(comparisons) - agree - failed, failed


def field_agreement(comparisons: list[Comparison]) -> dict[str, tuple[int, int]]:
    """For each compared field, (schedules that agree on it, schedules that ran on both)."""
    ran = [c for c in comparisons if c.real is not None]
    return {
        name: (sum(not any(d.startswith(f"{name}:") for d in c.differences) for c in ran), len(ran))
        for name in AGREEMENT_FIELDS
    }


def agreement_lines(comparisons: list[Comparison]) -> list[str]:
    """The agreement rates (by the set, and by the single prediction, in all and per field)
    and the sets' sizes and costs, as lines of text."""
    total = len(comparisons)
    ran = [c for c in comparisons if c.real is not None]
    single = sum(c.agree_single for c in comparisons)
    lines: list[str] = []
    sets = [c.predicted_set for c in comparisons if c.predicted_set is not None]
    if sets:
        inside = sum(c.agree for c in ran)
        sizes = sorted(len(s.outcomes) for s in sets)
        costs = sorted(s.seconds for s in sets)
        lines += [
            f"{total} schedules, {len(ran)} run on both: {inside} real outcomes in the predicted "
            f"set ({_percent(inside, len(ran))}), {len(ran) - inside} outside, "
            f"{total - len(ran)} failed",
            f"set size: median {statistics.median(sizes):g}, largest {sizes[-1]}, "
            f"one outcome in {sum(s == 1 for s in sizes)} of {len(sizes)} "
            f"({_percent(sum(s == 1 for s in sizes), len(sizes))}); "
            f"{sets[0].runs} jittered runs each, seed {sets[0].seed}; "
            f"{sum(s.late > 0 for s in sets)} sets still grew in their second half",
            f"time to predict a set: median {statistics.median(costs):.2f} s, "
            f"worst {costs[-1]:.2f} s",
        ]
    lines.append(
        f"single interleaving: {single} of {len(ran)} agree on every field "
        f"({_percent(single, len(ran))})"
    )
    if sets:
        today = sum(
            c.predicted_set is not None and key_of(c.real) == c.predicted_set.single
            for c in ran
            if c.real is not None
        )
        lines[-1] += (
            f" as journalled; {today} of {len(ran)} ({_percent(today, len(ran))}) by today's "
            "single prediction"
        )
    per_field = field_agreement(comparisons)
    lines.append("per field: " + ", ".join(f"{name} {a}/{n}" for name, (a, n) in per_field.items()))
    return lines


def _percent(part: int, whole: int) -> str:
    """part of whole as a rounded percentage ('-' of nothing)."""
    return f"{100 * part / whole:.0f}%" if whole else "-"
