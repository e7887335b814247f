"""Real Kafka traces: recorded by the kreplica agent, converted, checked against the spec.

The committed traces under traces/real/ were recorded on a real Kafka 2.6.3 cluster
(`kreplica kafka trace`); checking them needs no cluster. One live case runs a short schedule
end to end (record, convert, check) on a real cluster, where `make kafka` has run.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from cli_helpers import one_error_line
from click.testing import CliRunner, Result
from corpus_helpers import trace_tlc
from test_kafka_real import assert_nothing_left, needs_kafka

from kreplica.conformance.cli.main import main
from kreplica.conformance.kafka.install import CHECKOUT
from kreplica.conformance.tla.specs import default_spec_dir
from kreplica.conformance.validate.tracecheck import CheckSettings, SpecParams, check_texts
from kreplica.impl.variants import Variant

REAL = CHECKOUT / "traces" / "real"
SHORT = REAL / "follower-crash-short.schedule.json"
EVENTS = REAL / "events" / "follower-crash-short"
SPEC_DIR = default_spec_dir()
LIVE_SCHEDULE = CHECKOUT / "tests" / "fixtures" / "kafka" / "follower-crash-short.json"


def kreplica(*args: str) -> Result:
    """Run `kreplica ARGS` in-process."""
    return CliRunner().invoke(main, list(args))


def variant_args(trace: Path) -> list[str]:
    """--variant options for the variant a committed trace was checked under."""
    label = json.loads(trace.read_text())["#meta"]["checked_as"]
    return [] if label == "correct" else [a for v in label.split(",") for a in ("--variant", v)]


@pytest.mark.parametrize("trace", sorted(REAL.glob("*.itf.json")), ids=lambda p: p.name)
def test_a_committed_real_trace_conforms_to_its_variant(trace: Path, tmp_path: Path) -> None:
    result = kreplica(
        "conform", str(trace), "--no-spark", "--workers", "1", "--out", str(tmp_path / "c"),
        "--fetch-max-records", "1000000", *variant_args(trace),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    row = json.loads((tmp_path / "c" / "results.json").read_text().splitlines()[0])
    assert row["verdict"] == "conforms"
    assert row["events"] > 100


def test_a_committed_real_trace_is_rejected_by_the_wrong_variant(tmp_path: Path) -> None:
    """The acks=1 run is no behaviour of the acks=-1 spec: its first acks=1 produce is not
    enabled there (the check can fail)."""
    trace = REAL / "acks1-leader-fails-before-replication.itf.json"
    result = kreplica(
        "conform", str(trace), "--no-spark", "--workers", "1", "--out", str(tmp_path / "c"),
        "--fetch-max-records", "1000000", "--why", "0",
    )  # fmt: skip
    assert result.exit_code == 1
    row = json.loads((tmp_path / "c" / "results.json").read_text().splitlines()[0])
    first_produce = next(
        s["#meta"]["index"]
        for s in json.loads(trace.read_text())["states"]
        if s["#meta"]["action"] == "Produce"
    )
    assert (row["verdict"], row["step"], row["action"]) == ("violates", first_produce, "Produce")


def _states(trace: dict) -> list[dict]:
    return [{k: v for k, v in s.items() if k != "#meta"} | {"#a": s["#meta"]["action"]}
            for s in trace["states"]]  # fmt: skip


def test_the_committed_events_convert_to_the_committed_trace(tmp_path: Path) -> None:
    out = tmp_path / "t.itf.json"
    result = kreplica(
        "kafka", "convert", str(EVENTS), "--schedule", str(SHORT),
        "--out", str(out),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    made, committed = (
        json.loads(out.read_text()),
        json.loads((REAL / "follower-crash-short.itf.json").read_text()),
    )
    assert _states(made) == _states(committed)


def _copy_events(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(EVENTS, run)
    return run


def _convert(run: Path, tmp_path: Path) -> Result:
    return kreplica(
        "kafka", "convert", str(run), "--schedule", str(SHORT),
        "--out", str(tmp_path / "t.itf.json"),
    )  # fmt: skip


def test_a_truncated_event_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    run = _copy_events(tmp_path)
    path = run / "broker-2" / "events.jsonl"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    result = _convert(run, tmp_path)
    assert result.exit_code == 2
    assert "truncated" in one_error_line(result)
    assert not (tmp_path / "t.itf.json").exists()


def test_events_out_of_order_are_one_line_and_exit_2(tmp_path: Path) -> None:
    run = _copy_events(tmp_path)
    path = run / "broker-1" / "events.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:1] + lines[1:][::-1]))  # the header first, then reversed
    result = _convert(run, tmp_path)
    assert result.exit_code == 2
    assert "out of order" in one_error_line(result)


def test_events_of_another_kafka_version_are_refused(tmp_path: Path) -> None:
    run = _copy_events(tmp_path)
    path = run / "broker-3" / "events.jsonl"
    path.write_text(path.read_text().replace('"kafka":"2.6.3"', '"kafka":"3.9.1"', 1))
    result = _convert(run, tmp_path)
    assert result.exit_code == 2
    assert "recorded on Kafka '3.9.1'" in one_error_line(result)


def test_a_missing_broker_is_one_line_and_exit_2(tmp_path: Path) -> None:
    run = _copy_events(tmp_path)
    shutil.rmtree(run / "broker-2")
    result = _convert(run, tmp_path)
    assert result.exit_code == 2
    assert "broker-2/events.jsonl: no event file" in one_error_line(result)


def test_a_power_loss_is_refused_not_guessed(tmp_path: Path) -> None:
    """The agent records no flush, so what a power loss keeps cannot be told: one line, exit 2,
    and no trace written."""
    run = _copy_events(tmp_path)
    with (run / "harness-events.jsonl").open("a") as harness:
        harness.write('{"broker": 3, "nano": 11079676225776, "op": "power-loss"}\n')
    result = _convert(run, tmp_path)
    assert result.exit_code == 2, result.output
    assert "a power loss of broker 3 cannot be converted yet" in one_error_line(result)
    assert not (tmp_path / "t.itf.json").exists()


def test_a_file_that_is_not_the_agents_is_refused(tmp_path: Path) -> None:
    run = _copy_events(tmp_path)
    (run / "broker-1" / "events.jsonl").write_text('{"hello": 1}\n')
    result = _convert(run, tmp_path)
    assert result.exit_code == 2
    assert "not an event file of the kreplica agent" in one_error_line(result)


def _runs(name: str) -> Path:
    """Run directories under build/kafka-runs: the brokers' own uids must reach them."""
    path = CHECKOUT / "build" / "kafka-runs" / f"pytest-trace-{name}"
    shutil.rmtree(path, ignore_errors=True)
    return path


@needs_kafka
@pytest.mark.kafka
def test_a_short_live_run_records_converts_and_conforms(tmp_path: Path) -> None:
    """`kreplica kafka trace` on a real cluster: a follower killed and restarted between
    acks=-1 produces; the brokers' own steps conform to the spec."""
    began = time.monotonic()
    runs, out = _runs("live"), tmp_path / "out"
    try:
        result = kreplica(
            "kafka", "trace", str(LIVE_SCHEDULE), "--no-spark", "--workers", "1",
            "--out", str(out), "--workdir", str(runs), "--port-base", "19470",
        )  # fmt: skip
    finally:
        assert_nothing_left(runs / "follower-crash-short", 19470)
    seconds = time.monotonic() - began
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    (row,) = summary["rows"]
    assert row["verdict"] == "conforms" and row["events"] > 50
    (run,) = summary["runs"]
    assert run["events"] > 100 and not run["error"]
    assert seconds < 90, f"the live run took {seconds:.0f} s"


def _first_loss(trace: dict) -> int:
    """The first step after which the leader in office lacks a record acknowledged before,
    computed from the trace alone: an acks=1 record is acknowledged when its Produce appends
    it, any record once it is below the HW of the leader in office (min.insync.replicas 1)."""
    acked: set[int] = set()
    seen: dict = {}
    for given in trace["states"]:
        seen.update(given)  # a state may leave variables out (#meta.omitted): the last value
        state, meta = seen, given["#meta"]
        index = meta["index"]
        leader, epoch = state["ctrlLeader"], state["ctrlEpoch"]
        in_office = (
            leader in state["alive"]["#set"]
            and state["leader"][leader - 1] == leader
            and state["leaderEpoch"][leader - 1] == epoch
        )
        if meta["action"] == "Produce" and meta["args"]["acks"] == 1:
            log = state["log"][meta["args"]["replica"] - 1]
            acked |= {e["record"] for e in log if e["record"] == meta["args"]["record"]}
        if not in_office:
            continue
        records = [e["record"] for e in state["log"][leader - 1]]
        if not acked <= set(records):
            return index
        acked |= set(records[: state["hw"][leader - 1]])
    raise AssertionError("no acknowledged record is lost in this trace")


@pytest.mark.parametrize(
    ("name", "variant"),
    [("acks1-leader-fails-before-replication", "acks=1"),
     ("unclean-after-followers-crash", "election=unclean")],
)  # fmt: skip
def test_a_real_loss_conforms_to_its_variant_and_breaks_acked_records_never_lost(
    name: str, variant: str, tmp_path: Path
) -> None:
    """The real run that loses acknowledged records is a behaviour of its variant (see the
    test above) and breaks AckedRecordsNeverLost exactly where the loss happens."""
    trace = REAL / f"{name}.itf.json"
    result = kreplica(
        "conform", str(trace), "--no-spark", "--workers", "1", "--out", str(tmp_path / "c"),
        "--fetch-max-records", "1000000", "--variant", variant,
        "--invariant", "AckedRecordsNeverLost",
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    row = json.loads((tmp_path / "c" / "results.json").read_text().splitlines()[0])
    assert (row["verdict"], row["invariant"]) == ("violates", "AckedRecordsNeverLost")
    assert row["step"] == _first_loss(json.loads(trace.read_text()))


@needs_kafka
@pytest.mark.kafka
def test_kafka_compare_traces_its_real_runs(tmp_path: Path) -> None:
    """`kreplica kafka compare --trace DIR` records the real run with the agent and writes its
    trace, which conforms."""
    runs, out = _runs("compare"), tmp_path / "traced"
    try:
        result = kreplica(
            "kafka", "compare", str(LIVE_SCHEDULE), "--trace", str(out),
            "--journal", str(tmp_path / "j.jsonl"), "--workdir", str(runs), "--port-base", "19480",
        )  # fmt: skip
    finally:
        assert_nothing_left(runs / "follower-crash-short", 19480)
    assert result.exit_code == 0, result.output
    trace = out / "traces" / "follower-crash-short.itf.json"
    checked = kreplica(
        "conform", str(trace), "--no-spark", "--workers", "1", "--out", str(tmp_path / "c"),
        "--fetch-max-records", "1000000",
    )  # fmt: skip
    assert checked.exit_code == 0, checked.output


RACE = REAL / "deposed-leader-hw-race.itf.json"


def _check_race(race: bool) -> list[str]:
    tlc = trace_tlc(600)
    params = SpecParams(
        variant=Variant(acks="1"), fetch_max_records=1_000_000, deposed_leader_hw_race=race
    )
    results = check_texts([("race", RACE.read_text())], CheckSettings(params, SPEC_DIR, tlc))
    return [results[0].verdict, results[0].action or "", str(results[0].step)]


def test_a_real_deposed_leader_raises_its_hw_as_in_kafka_2_6_3(tmp_path: Path) -> None:
    """R21, seen on a real 2.6.3 cluster: broker 1 handled broker 3's fetch as leader, a
    LeaderAndIsr made it a follower of broker 2, and the fetch's HW recomputation then ran
    with an empty ISR: broker 1's HW rose to its LEO while it followed. The spec allows the
    step only with DeposedLeaderHwRace, where real traces are checked."""
    states = json.loads(RACE.read_text())["states"]
    [at] = [i for i, s in enumerate(states) if s["#meta"]["action"] == "DeposedLeaderIncrementHw"]
    before, after = states[at - 1], states[at]
    assert before["#meta"]["action"] == "BecomeLeaderOrFollower"
    assert (after["leader"][0], after["leaderEpoch"][0]) == (2, 3)
    assert (before["hw"][0], after["hw"][0]) == (0, len(after["log"][0])) == (0, 5)
    assert _check_race(True)[0] == "conforms"
    assert _check_race(False) == ["violates", "DeposedLeaderIncrementHw", str(at)]
