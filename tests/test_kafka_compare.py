"""The comparison of the two worlds (conformance/kafka/compare.py): the journal that keeps a
campaign's finished runs across a crash, and the outcome table. The real runs themselves are
tested in tests/test_kafka_real.py; here the 'real' outcome of a journal line is written by the
test, and a campaign that would start a real run where it should resume fails the test."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from test_kafka_real import RUNS, kreplica, needs_kafka

from kreplica.conformance.errors import KreplicaError
from kreplica.conformance.kafka.compare import (
    Comparison,
    RunFailed,
    agreement,
    agreement_lines,
    append_journal,
    campaign,
    field_agreement,
    markdown_table,
    read_journal,
)
from kreplica.conformance.kafka.generate import named_schedules
from kreplica.conformance.kafka.outcome import Outcome, disagreements
from kreplica.conformance.kafka.schedule import Schedule
from kreplica.conformance.kafka.simulate import simulate
from kreplica.conformance.kafka.timing import harness_timing

ROOT = Path(__file__).parent.parent


def predicted(schedule: Schedule) -> Outcome:
    return simulate(schedule, timing=harness_timing())


def no_real_run(schedule: Schedule) -> Outcome:
    raise AssertionError(f"{schedule.name} was run again instead of resumed")


@pytest.fixture(scope="module")
def comparisons() -> list[Comparison]:
    """Each named schedule with its prediction; the first 'real' outcome differs in its HW."""
    found = []
    for i, schedule in enumerate(named_schedules()):
        outcome = predicted(schedule)
        real = replace(outcome, high_watermark=outcome.high_watermark + 1) if i == 0 else outcome
        found.append(Comparison(schedule, outcome, real, tuple(disagreements(outcome, real)), 30.0))
    return found


def test_a_journal_round_trips_and_resumes_without_running_again(
    comparisons: list[Comparison], tmp_path: Path
) -> None:
    journal = tmp_path / "journal.jsonl"
    for c in comparisons:
        append_journal(journal, c)
    assert read_journal(journal) == comparisons
    resumed: list[bool] = []
    again = campaign(
        [c.schedule for c in comparisons], no_real_run, journal, lambda _, r: resumed.append(r)
    )
    assert again == comparisons and resumed == [True] * len(comparisons)


def test_a_line_cut_off_by_a_crash_is_run_again(
    comparisons: list[Comparison], tmp_path: Path
) -> None:
    journal = tmp_path / "journal.jsonl"
    append_journal(journal, comparisons[0])
    journal.write_text(journal.read_text() + json.dumps(comparisons[1].to_json())[:200])
    assert read_journal(journal) == comparisons[:1]


def test_a_bad_line_before_the_last_is_one_error(
    comparisons: list[Comparison], tmp_path: Path
) -> None:
    journal = tmp_path / "journal.jsonl"
    journal.write_text("not json\n" + json.dumps(comparisons[0].to_json()) + "\n")
    with pytest.raises(KreplicaError, match=r"journal\.jsonl:1: not a comparison"):
        read_journal(journal)


def test_a_failed_real_run_is_kept_with_its_reason(tmp_path: Path) -> None:
    schedule = named_schedules()[0]

    def refuses(_: Schedule) -> Outcome:
        raise RunFailed("broker 2 did not start within 90 s")

    (result,) = campaign([schedule], refuses, tmp_path / "j.jsonl")
    assert (
        result.real is None
        and result.error == "broker 2 did not start within 90 s"
        and not result.agree
    )
    assert read_journal(tmp_path / "j.jsonl") == [replace(result, seconds=round(result.seconds, 1))]


def test_the_table_shows_both_worlds_and_the_disagreement(comparisons: list[Comparison]) -> None:
    table = markdown_table(comparisons).splitlines()
    assert len(table) == 2 + len(comparisons)
    first = table[2].split(" | ")
    assert first[-3].strip(" |") == "**no**" and all(
        r.endswith("| yes | - | - |") for r in table[3:]
    )
    assert comparisons[0].differences == (
        f"high_watermark: kreplica {comparisons[0].predicted.high_watermark} "
        f"vs kafka {comparisons[0].predicted.high_watermark + 1}",
    )
    assert agreement(comparisons) == (len(comparisons) - 1, 1, 0)


def test_agreement_is_given_per_field(comparisons: list[Comparison]) -> None:
    n = len(comparisons)
    per_field = field_agreement(comparisons)
    assert per_field["high_watermark"] == (n - 1, n)
    assert all(per_field[f] == (n, n) for f in ("acked_lost", "diverged", "isr", "leader_epoch"))
    lines = agreement_lines(comparisons)
    rate = f"{100 * (n - 1) / n:.0f}%"
    assert lines[0] == f"single interleaving: {n - 1} of {n} agree on every field ({rate})"


@needs_kafka
@pytest.mark.kafka
def test_compare_runs_a_schedule_on_both_worlds_and_resumes_from_its_journal(
    tmp_path: Path,
) -> None:
    """`kreplica kafka compare` end to end on a real cluster: one line per schedule, the
    agreement lines, the journal and the table; run again, it takes the schedule from the
    journal and starts no cluster."""
    schedule = ROOT / "schedules" / "acks-all-leader-crash.json"
    journal, table = tmp_path / "journal.jsonl", tmp_path / "table.md"
    runs = RUNS / f"test-compare-{os.getpid()}"  # the brokers' uids must reach it: not /tmp's
    args = ["kafka", "compare", str(schedule), "--journal", str(journal), "--report", str(table),
            "--port-base", "19590", "--workdir", str(runs)]  # fmt: skip
    try:
        _compare_twice(args, journal, table, runs)
    finally:
        shutil.rmtree(runs, ignore_errors=True)


def _compare_twice(args: list[str], journal: Path, table: Path, runs: Path) -> None:
    first = kreplica(*args)
    assert first.returncode in (0, 1), first.stderr
    lines = first.stdout.splitlines()
    assert lines[0].startswith("acks-all-leader-crash: ") and lines[0].endswith(" s)")
    assert lines[1].startswith("1 schedules, 1 run on both: ")
    assert lines[2].startswith("set size: ") and lines[3].startswith("time to predict a set: ")
    assert lines[4].startswith("single interleaving: ") and lines[5].startswith("per field: ")
    (done,) = read_journal(journal)
    assert done.real is not None and not done.real.acked_lost  # acks=-1, clean: nothing lost
    assert "| acks-all-leader-crash | -1 |" in table.read_text()
    again = kreplica(*args)
    assert again.returncode == first.returncode
    assert again.stdout.splitlines()[0].endswith("(from the journal)")
    assert len(journal.read_text().splitlines()) == 1
    assert (runs / "acks-all-leader-crash" / "broker-1" / "server.log").is_file()
