"""`kreplica replay` on everything kreplica writes: fuzz corpora, random walks, `PATH:LINE`
ids, saved schedules; the set-up a trace records; exit codes 0, 1, 2 and 4."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from kreplica.conformance.cli.main import main
from kreplica.conformance.cli.replay import EXIT_CANNOT_REPLAY
from kreplica.conformance.replay.setups import choose_setup
from kreplica.conformance.tla.itf import iter_jsonl_traces
from kreplica.conformance.validate.results import iter_rows
from kreplica.conformance.validate.sources import local_files, variant_note

ROOT = Path(__file__).parent.parent
REGRESSIONS = ROOT / "traces" / "regressions"


def run(*args: str) -> Result:
    """Run `kreplica ARGS` in-process."""
    return CliRunner().invoke(main, list(args))


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A small fuzz corpus, a random-walk corpus and a saved early-ack failure."""
    root = tmp_path_factory.mktemp("made")
    fuzz = root / "fuzz.jsonl"
    result = run(
        "fuzz", "--examples", "20", "--steps", "30", "--seed", "3",
        "--corpus", str(fuzz), "--out", str(root / "clean"),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    walks = root / "walks.jsonl"
    result = run("walk", "--traces", "20", "--steps", "40", "--seed", "1", "--out", str(walks))
    assert result.exit_code == 0, result.output
    saved = root / "saved"
    result = run("fuzz", "--bug", "early-ack", "--no-unclean", "--no-shrink", "--out", str(saved))
    assert result.exit_code == 1, result.output
    return {"fuzz": fuzz, "walks": walks, "saved": saved}


def test_a_whole_corpus_is_replayed_line_by_line(made: dict[str, Path]) -> None:
    result = run("replay", str(made["walks"]))
    lines = result.stdout.splitlines()
    verdicts = [line for line in lines if line.startswith(f"{made['walks']}:")]
    assert len(verdicts) == 20, result.stdout
    assert lines[-1].startswith("20 traces: ")
    assert result.exit_code in (0, 1)


def test_a_line_of_a_corpus_is_addressed_as_conform_prints_it(made: dict[str, Path]) -> None:
    result = run("replay", f"{made['fuzz']}:1")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("conforms: ")


def _replayed(path: Path) -> list[int]:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    return [run("replay", f"{path}:{n}").exit_code for n in range(1, lines + 1)]


def test_every_recorded_trace_conforms(made: dict[str, Path]) -> None:
    """Before issue 12, 6 of 20 fuzz and 0 of 20 random-walk traces were 'conforms'; with the
    clock and the steps the spec does not see recorded, every one is. The fuzz corpus is the
    default campaign's, of stages: each trace replays under the variant it records."""
    fuzz, walks = _replayed(made["fuzz"]), _replayed(made["walks"])
    assert len(fuzz) >= 17 and len(walks) == 20
    assert fuzz + walks == [0] * (len(fuzz) + len(walks))


def test_a_recorded_trace_holds_its_hidden_steps_and_clock(made: dict[str, Path]) -> None:
    traces = list(iter_jsonl_traces(made["walks"]))
    assert all(t.meta["hidden_steps"] is True for t in traces)
    hidden = [h["step"] for t in traces for s in t.states for h in s.meta.get("hidden", [])]
    assert {"Tick", "Produce"} <= set(hidden)
    clocks = [s.meta["now_ms"] for s in traces[0].states[1:]]
    assert clocks == sorted(clocks)


def test_a_hidden_step_the_spec_would_see_is_a_difference(
    made: dict[str, Path], tmp_path: Path
) -> None:
    data = json.loads(made["walks"].read_text().splitlines()[0])
    data["states"][2]["#meta"]["hidden"] = [{"step": "Crash", "broker": 2}]
    path = tmp_path / "tampered.itf.json"
    path.write_text(json.dumps(data))
    result = run("replay", str(path))
    assert result.exit_code == 1, result.output
    assert "did Crash {'replica': 2} at Crash(broker=2), a step the trace records as unseen" in (
        result.stdout
    )


def test_a_saved_schedule_replays_to_the_same_violation(made: dict[str, Path]) -> None:
    (schedule,) = made["saved"].glob("*.schedule.json")
    recorded = json.loads(schedule.read_text())["violation"]["invariant"]
    result = run("replay", str(schedule))
    assert result.exit_code == 0, result.output
    assert f"violation {recorded}:" in result.stdout and "the same as recorded" in result.stdout
    (trace,) = made["saved"].glob("*.itf.json")
    result = run("replay", str(trace))
    assert result.exit_code == 0, result.output
    assert f"breaks {recorded}" in result.stdout


def test_a_bug_keeps_the_recorded_replicas_and_broker_config(made: dict[str, Path]) -> None:
    trace = next(iter_jsonl_traces(made["fuzz"]))
    setup = choose_setup(trace, ROOT / "spec", (), ("early-ack",))
    assert setup.variant.bugs == {"early-ack"}
    assert (setup.replicas, setup.min_insync_replicas, setup.fetch_max_records) == (
        trace.meta["replicas"],
        trace.meta["min_insync_replicas"],
        trace.meta["fetch_max_records"],
    )


def test_a_duplicated_restart_cannot_be_replayed(made: dict[str, Path], tmp_path: Path) -> None:
    data = json.loads(
        next(
            line
            for line in made["walks"].read_text().splitlines()
            if '"action":"Restart"' in line.replace(" ", "")
        )
    )
    states = data["states"]
    at = next(i for i, s in enumerate(states) if s["#meta"]["action"] == "Restart")
    data["states"] = [*states[: at + 1], states[at], *states[at + 1 :]]
    path = tmp_path / "twice.itf.json"
    path.write_text(json.dumps(data))
    result = run("replay", str(path))
    assert result.exit_code == EXIT_CANNOT_REPLAY, result.output
    assert result.stdout.startswith(f"cannot be replayed: step {at + 1} (Restart")
    assert len(result.output.splitlines()) == 1 and "Traceback" not in result.output


@pytest.mark.parametrize(
    "name",
    ["missing.itf.json", "CORPUS:0", "CORPUS:999", "other.json", "CORPUS:x"],
)
def test_bad_input_is_one_line_and_exit_2(made: dict[str, Path], tmp_path: Path, name: str) -> None:
    (tmp_path / "other.json").write_text('{"not": "a trace"}')
    target = name.replace("CORPUS", str(made["fuzz"]))
    result = run("replay", target if "CORPUS" in name or ":" in target else str(tmp_path / name))
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1, result.output


def test_a_directory_walk_skips_schedules_and_says_so(made: dict[str, Path]) -> None:
    notes: list[str] = []
    found = local_files([str(made["saved"])], notes.append)
    assert [p.name.endswith(".itf.json") for p in found] == [True]
    assert len(notes) == 1 and "skipped 1 file" in notes[0] and ".schedule.json" in notes[0]
    (schedule,) = made["saved"].glob("*.schedule.json")
    assert local_files([str(schedule)], notes.append) == [schedule]  # named: read anyway


def test_a_trace_recorded_under_another_variant_is_noted(made: dict[str, Path]) -> None:
    (trace,) = made["saved"].glob("*.itf.json")
    note = variant_note(trace.read_text(), "default")
    assert note == "recorded with variant bug=early-ack, checked against default"
    assert variant_note(trace.read_text(), "bug=early-ack") == ""
    assert variant_note(made["walks"].read_text().splitlines()[0], "default") == ""


def test_conform_notes_a_trace_recorded_under_another_variant(tmp_path: Path) -> None:
    """Checking a buggy implementation's trace against the correct spec is a feature; doing it
    silently is not: the row carries a note, and the report counts it."""
    trace = REGRESSIONS / "bug-early-ack-r3-fcedpi4-s2.itf.json"
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["conform", str(trace), "--no-spark", "--out", str(out)])
    assert result.exit_code in (0, 1), result.output
    (row,) = iter_rows(out / "results.parquet")
    assert row["note"] == "recorded with variant bug=early-ack, checked against default"
    assert "note: 1 traces recorded with variant bug=early-ack" in result.stdout
    again = CliRunner().invoke(
        main, ["conform", str(trace), "--bug", "early-ack", "--no-spark", "--out", str(out)]
    )
    assert again.exit_code in (0, 1), again.output
    (row,) = iter_rows(out / "results.parquet")
    assert row["note"] == ""


@pytest.mark.parametrize(
    ("hidden", "code", "says"),
    [
        ([{"step": "Deliver", "src": 1, "dst": 2, "index": 99}], 4, "cannot be taken"),
        ([{"step": "Tick", "ms": -5}], 4, "time cannot go backwards"),
        ([{"step": "Produce", "tp": "x"}], 2, "'#meta'.hidden[0]: bad Produce step"),
        ("x", 2, "'#meta'.hidden must be a list of steps"),
    ],
)
def test_bad_hidden_steps_are_one_line(
    made: dict[str, Path], tmp_path: Path, hidden: object, code: int, says: str
) -> None:
    """A hidden step the implementation cannot take is 'cannot be replayed' (4); one that is
    not a step at all is bad input (2); never a traceback."""
    data = json.loads(made["walks"].read_text().splitlines()[0])
    data["states"][2]["#meta"]["hidden"] = hidden
    path = tmp_path / "tampered.itf.json"
    path.write_text(json.dumps(data))
    result = run("replay", str(path))
    assert result.exit_code == code, result.output
    assert says in result.output and len(result.output.strip().splitlines()) == 1
    assert "Traceback" not in result.output
