"""`kreplica fuzz --corpus` and `--no-invariants`: every run as one JSON line, crash-safe."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import fuzz, one_error_line

from kreplica.conformance.fuzz.campaign import run_fuzz
from kreplica.conformance.fuzz.corpus_writer import CorpusError, CorpusWriter
from kreplica.conformance.fuzz.setup import FuzzSetup
from kreplica.conformance.tla.itf import ItfTrace, iter_jsonl_traces
from kreplica.conformance.tla.vocabulary import VARIABLES
from kreplica.impl.variants import parse_variant


def traces(path: Path) -> list[ItfTrace]:
    return list(iter_jsonl_traces(path))


def test_every_run_is_one_line_with_its_id_and_set_up(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus" / "runs.jsonl"
    args = ["--stages", "correct", "--examples", "12", "--steps", "25", "--seed", "3"]
    result = fuzz(*args, "--replicas", "2", "--corpus", str(corpus), "--out", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    found = traces(corpus)
    assert len(found) >= 12
    assert f"corpus: {len(found)} traces appended to {corpus}" in result.stdout
    ids = [t.meta["id"] for t in found]
    assert len(set(ids)) == len(ids)
    assert ids[0] == "default-r2-s3-n25-1"
    for trace in found:
        assert trace.meta["variant"] == "default" and trace.meta["bugs"] == []
        assert trace.meta["replicas"] == 2 and trace.meta["seed"] == 3
        assert trace.meta["variables"] == trace.vars == list(VARIABLES)
        assert trace.meta["invariants"] is True and "violation" not in trace.meta
        assert trace.states[0].action == "Init"
        assert all(state.action for state in trace.states[1:])


def test_a_second_campaign_appends(tmp_path: Path) -> None:
    corpus = tmp_path / "runs.jsonl"
    for seed in ("0", "1"):
        args = ["--examples", "5", "--steps", "15", "--seed", seed, "--corpus", str(corpus)]
        assert fuzz(*args, "--out", str(tmp_path / "out")).exit_code == 0
    seeds = [t.meta["seed"] for t in traces(corpus)]
    assert seeds[0] == 0 and seeds[-1] == 1 and len(set(seeds)) == 2


def test_no_invariants_records_a_buggy_variant_without_failing(tmp_path: Path) -> None:
    """hw-from-non-isr breaks CommittedRecordsOnIsr within a few runs when checked."""
    corpus, out = tmp_path / "runs.jsonl", tmp_path / "out"
    args = ["--bug", "hw-from-non-isr", "--examples", "30", "--steps", "40", "--seed", "0"]
    checked = fuzz(*args, "--out", str(out))
    assert checked.exit_code == 1, checked.output
    result = fuzz(*args, "--no-invariants", "--corpus", str(corpus), "--out", str(out / "x"))
    assert result.exit_code == 0, result.output
    assert "invariants not checked" in result.stdout and "no invariant failed" in result.stdout
    assert not (out / "x").exists()
    found = traces(corpus)
    assert len(found) >= 30
    assert {t.meta["invariants"] for t in found} == {False}
    assert found[0].meta["bugs"] == ["hw-from-non-isr"]
    assert found[0].meta["id"].startswith("bug-hw-from-non-isr-r3-noinv-s0-n40-")


def test_the_failing_run_is_recorded_with_its_violation_and_shrinking_is_not(
    tmp_path: Path,
) -> None:
    corpus = tmp_path / "runs.jsonl"
    setup = FuzzSetup(variant=parse_variant([], ["hw-from-non-isr"]))
    with CorpusWriter(corpus) as writer:
        result = run_fuzz(setup, examples=50, max_steps=40, seed_value=0, corpus=writer)
    assert result.failure is not None
    found = traces(corpus)
    assert len(found) == result.stats.runs_to_failure < result.stats.runs
    assert "violation" in found[-1].meta
    assert all("violation" not in t.meta for t in found[:-1])


def test_a_partial_last_line_is_set_aside_and_earlier_lines_survive(tmp_path: Path) -> None:
    """A crash in the middle of a write leaves a partial line; the next writer moves it to
    <file>.partial (nothing is lost) and appends after the whole lines."""
    corpus = tmp_path / "runs.jsonl"
    with CorpusWriter(corpus) as writer:
        run_fuzz(FuzzSetup(), examples=3, max_steps=10, corpus=writer)
    complete = corpus.read_bytes()
    half = complete.splitlines()[0][:200]
    with corpus.open("ab") as handle:
        handle.write(half)  # the crash: half a trace, no newline
    with CorpusWriter(corpus) as writer:
        assert writer.repaired == 200
        assert writer.set_aside == tmp_path / "runs.jsonl.partial"
        run_fuzz(FuzzSetup(), examples=2, max_steps=10, seed_value=9, corpus=writer)
    assert corpus.read_bytes().startswith(complete)
    assert len(traces(corpus)) == len(complete.splitlines()) + writer.written
    assert (tmp_path / "runs.jsonl.partial").read_bytes() == half + b"\n"


def test_a_whole_last_line_without_newline_is_kept(tmp_path: Path) -> None:
    """A corpus whose last trace lacks only its newline (hand-made, another tool) loses nothing:
    the line is ended and new traces follow it."""
    corpus = tmp_path / "runs.jsonl"
    with CorpusWriter(corpus) as writer:
        run_fuzz(FuzzSetup(), examples=2, max_steps=10, corpus=writer)
    before = corpus.read_bytes()
    corpus.write_bytes(before.rstrip(b"\n"))
    with CorpusWriter(corpus) as writer:
        assert writer.repaired == 0 and writer.set_aside is None
        run_fuzz(FuzzSetup(), examples=1, max_steps=10, seed_value=3, corpus=writer)
    assert corpus.read_bytes().startswith(before)
    assert len(traces(corpus)) == len(before.splitlines()) + writer.written
    assert not (tmp_path / "runs.jsonl.partial").exists()


def test_each_line_is_written_and_flushed_at_once(tmp_path: Path) -> None:
    """Without close (a killed process), every appended trace is already in the file."""
    corpus = tmp_path / "runs.jsonl"
    writer = CorpusWriter(corpus)
    run_fuzz(FuzzSetup(), examples=2, max_steps=10, corpus=writer)
    lines = corpus.read_text(encoding="utf-8").splitlines()
    assert len(lines) == writer.written and all(json.loads(line) for line in lines)
    writer.close()


def test_an_unwritable_corpus_is_one_line_and_exit_2(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = fuzz("--examples", "3", "--corpus", str(blocker / "runs.jsonl"))
    assert result.exit_code == 2, result.output
    line = one_error_line(result)
    assert line.startswith(f"kreplica: error: cannot write corpus {blocker / 'runs.jsonl'}")
    assert result.stdout == ""


def test_a_corpus_that_is_a_directory_is_bad_input(tmp_path: Path) -> None:
    result = fuzz("--examples", "3", "--corpus", str(tmp_path))
    assert result.exit_code == 2
    assert "Invalid value for '--corpus'" in one_error_line(result)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_failing_write_stops_the_campaign_with_one_line(tmp_path: Path) -> None:
    """A write that fails mid-campaign (here: no space left) is bad input, not a finding."""
    result = fuzz("--examples", "5", "--steps", "10", "--corpus", "/dev/full")
    assert result.exit_code == 2, result.output
    assert one_error_line(result).startswith("kreplica: error: cannot write corpus /dev/full")
    with pytest.raises(CorpusError, match="No space left"):
        CorpusWriter(Path("/dev/full")).append(ItfTrace(vars=[], states=[]))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--fault", "fire"], "Invalid value for '--fault'"),
        (["--fault", "drop", "--no-network-faults"], "--fault drop is switched off by"),
        (["--fault", "unclean-shutdown", "--no-unclean"], "--fault unclean-shutdown is"),
    ],
)
def test_bad_fault_options_are_one_line(args: list[str], message: str, tmp_path: Path) -> None:
    result = fuzz(*args, "--examples", "1", "--out", str(tmp_path / "out"))
    assert result.exit_code == 2, result.output
    assert message in one_error_line(result)


def test_only_the_chosen_faults_happen(tmp_path: Path) -> None:
    corpus = tmp_path / "runs.jsonl"
    args = ["--fault", "elect", "--examples", "20", "--steps", "40", "--corpus", str(corpus)]
    result = fuzz(*args, "--out", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    assert "faults: elect (at most 4 per run)" in result.stdout
    actions = {s.action for t in traces(corpus) for s in t.states}
    assert "ControllerElectLeader" in actions
    assert not actions & {"Crash", "UncleanShutdown", "Restart"}


def test_the_cli_says_where_a_partial_last_line_went(tmp_path: Path) -> None:
    corpus = tmp_path / "runs.jsonl"
    corpus.write_bytes(b'{"vars": ["log"], "sta')
    result = fuzz("--examples", "1", "--steps", "5", "--corpus", str(corpus))
    assert result.exit_code == 0, result.output
    assert f"it was moved to {corpus}.partial" in result.stderr
    assert (tmp_path / "runs.jsonl.partial").read_bytes() == b'{"vars": ["log"], "sta\n'
