"""`kreplica explain`: every golden trace drawn as a timeline, in the terminal, as PNG and SVG,
with the marks where they happen; bad input gets one line and exit 2; a long trace a window; a
real-Kafka trace (40 steps cut from a run where the leader is killed) with its controller lane,
its wall-clock gaps, its unknown values and its idle fetch round trips folded."""

from __future__ import annotations

import json
import re
import string
from pathlib import Path

import pytest
from cli_helpers import one_error_line
from click.testing import CliRunner, Result
from corpus_helpers import REJECTED

from kreplica.conformance.cli.main import main
from kreplica.conformance.explain.kafka_words import KAFKA_METHODS, describe
from kreplica.conformance.explain.rejection import find_row, rejection_of
from kreplica.conformance.explain.timeline import duration_text, timeline, with_rejection
from kreplica.conformance.explain.window import MAX_FRAMES, window
from kreplica.conformance.tla.itf import read_trace
from kreplica.conformance.tla.vocabulary import ACTION_ARGS, IMPL_ONLY_ACTIONS, INIT_ACTION

GOLDEN = Path(__file__).resolve().parent.parent / "traces" / "golden"
TRACES = sorted(GOLDEN.glob("*.itf.json"))
REAL = Path(__file__).resolve().parent / "fixtures" / "explain" / "real-leader-crash.itf.json"
"""States 78 to 117 of a real run (kreplica's agent; acks=all, the leader killed), renumbered:
steps 1-21 are idle fetches (400 ms long polls), 22 the crash of broker 1, 23 the controller
noticing it (a new epoch, leader 2), 24 and 26 the brokers taking epoch 1, 32-34 and 39 steps no
hook saw the HW at."""


def explain(*args: str) -> Result:
    """Run `kreplica explain ARGS` in-process."""
    return CliRunner().invoke(main, ["explain", *args])


def test_every_action_has_kafka_words_naming_only_its_arguments() -> None:
    """Each action the traces may name reads as the Kafka method it models, and the words use
    only the action's own arguments."""
    assert set(KAFKA_METHODS) == {INIT_ACTION, *ACTION_ARGS, *IMPL_ONLY_ACTIONS}
    for action, args in ACTION_ARGS.items():
        fields = {f for _, f, _, _ in string.Formatter().parse(KAFKA_METHODS[action]) if f}
        assert fields <= args, action
    words = describe("Produce", {"replica": 1, "record": 3, "acks": -1})
    assert words == "ReplicaManager.appendRecords: leader 1 appends record 3 (acks=-1)"
    assert describe("NoSuchAction", {"x": 1}) == "NoSuchAction(x=1)"


@pytest.mark.parametrize("path", TRACES, ids=[p.name.split(".")[0] for p in TRACES])
def test_every_golden_trace_is_drawn(path: Path, tmp_path: Path) -> None:
    """The terminal shows every step with its lanes; the PNG is a PNG, the SVG names the
    replicas and the steps' Kafka methods."""
    png, svg = tmp_path / "t.png", tmp_path / "t.svg"
    result = explain(str(path), "--png", str(png), "--svg", str(svg))
    assert result.exit_code == 0, result.output
    trace = read_trace(path)
    for i in range(len(trace.states)):
        assert f"step {i}: " in result.stdout
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    text = svg.read_text()
    assert "replica 1" in text and "replica 2" in text
    last = trace.states[-1]
    assert describe(last.action or "", last.args)[:40] in text.replace("&gt;", ">")


def test_a_counterexample_is_marked_where_it_breaks() -> None:
    """S1 (KAFKA-1211 before KIP-101): the follower truncates to its HW and drops the
    acknowledged record 1; that step loses it and breaks CommittedRecordsOnIsr, and the
    next, its election, AckedRecordsNeverLost. S3 (KIP-101's fast failover): the logs diverge
    before any invariant breaks, and that is marked where it appears."""
    s1 = timeline(read_trace(GOLDEN / "S1_HwTruncation.itf.json"), "S1")
    marks = {(f.index, m.kind, m.replica) for f in s1.frames for m in f.marks}
    assert (11, "lost-ack", 2) in marks and (11, "invariant", None) in marks
    assert s1.first_violation == 11
    texts = [m.text for m in s1.frames[12].marks]
    assert any(t.startswith("AckedRecordsNeverLost is violated") for t in texts)
    s3 = timeline(read_trace(GOLDEN / "S3_Kip101FastFailover.itf.json"), "S3")
    diverged = [f.index for f in s3.frames for m in f.marks if m.kind == "diverged"]
    assert diverged and s3.first_violation is not None and diverged[0] < s3.first_violation
    assert len(diverged) == 1  # marked where it appears, not at every step it lasts


def test_a_witness_has_no_marks() -> None:
    """A witness of the correct protocol breaks nothing, so nothing is marked."""
    line = timeline(read_trace(GOLDEN / "WitnessCommit.itf.json"), "w")
    assert line.first_violation is None
    assert all(not f.marks for f in line.frames)


def long_trace(path: Path, steps: int) -> None:
    """S1's counterexample, then its last state again and again (a Flush each)."""
    trace = json.loads((GOLDEN / "S1_HwTruncation.itf.json").read_text())
    states = trace["states"]
    for i in range(len(states), steps + 1):
        meta = {"index": i, "action": "Flush", "args": {"replica": 1}}
        states.append({**states[-1], "#meta": meta})
    path.write_text(json.dumps(trace))


def test_a_long_trace_is_shown_as_a_window(tmp_path: Path) -> None:
    """10,000 steps: the terminal and the picture show a window that ends a few steps after
    the first broken invariant, and say which steps they show."""
    path, png = tmp_path / "long.itf.json", tmp_path / "long.png"
    long_trace(path, 10_000)
    result = explain(str(path), "--png", str(png))
    assert result.exit_code == 0, result.output
    assert "steps 0 to 39 of 10000 shown" in result.stdout
    assert "step 39: " in result.stdout and "step 40: " not in result.stdout
    assert png.read_bytes().startswith(b"\x89PNG")
    result = explain(str(path), "--window", "20", "--step", "5000", "--quiet")
    assert result.exit_code == 0, result.output
    line = timeline(read_trace(path), "long")
    shown = window(line, 20, 5000)
    assert [f.index for f in shown.frames] == list(range(4984, 5004))
    assert shown.summary == "steps 4984 to 5003 of 10000 shown"
    assert len(window(line).frames) == MAX_FRAMES


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        ('{"vars": ["log"', "truncated JSON"),
        ('{"a": 1}', "not an ITF trace"),
        ("unknown-variable", "unknown variable 'bogus'"),
        ("no-hw", "which a picture needs"),
    ],
    ids=["missing", "truncated", "not-itf", "unknown-variable", "missing-variable"],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, content: str | None, message: str
) -> None:
    """A missing, truncated or non-ITF file, an unknown variable, a trace without a variable
    the picture needs: one line on stderr, exit 2, no picture written."""
    path, png = tmp_path / "bad.itf.json", tmp_path / "bad.png"
    trace = json.loads((GOLDEN / "S1_HwTruncation.itf.json").read_text())
    if content == "unknown-variable":
        trace["vars"].append("bogus")
        for s in trace["states"]:
            s["bogus"] = 1
        content = json.dumps(trace)
    elif content == "no-hw":
        trace["vars"].remove("hw")
        for s in trace["states"]:
            del s["hw"]
        content = json.dumps(trace)
    if content is not None:
        path.write_text(content)
    result = explain(str(path), "--png", str(png))
    assert result.exit_code == 2, result.output
    line = one_error_line(result)
    assert line.startswith("kreplica: error: ") and message in line, line
    assert not png.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--png", "x.jpg"], "does not end in .png"),
        (["--svg", "x.png"], "does not end in .svg"),
        (["--html", "x.htm"], "does not end in .html"),
        (["--png", "/no/such/dir/x.png", "--quiet"], "cannot write /no/such/dir/x.png"),
        (["--step", "99"], "the trace has 13 steps"),
        (["--steps", "9:3"], "9:3 is not A:B"),
        (["--steps", "five"], "five is not A:B"),
        (["--steps", "0:13"], "the trace has 13 steps"),
        (["--steps", "1:2", "--step", "3"], "give --steps or --step, not both"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(args: list[str], message: str) -> None:
    result = explain(str(GOLDEN / "S1_HwTruncation.itf.json"), *args)
    assert result.exit_code == 2, result.output
    assert message in one_error_line(result)


def test_the_terminal_shows_lanes_hw_and_marks() -> None:
    """Each step is a table of the replicas: role, log with the HW bar, HW, LEO, ISR."""
    result = explain(str(GOLDEN / "S1_HwTruncation.itf.json"))
    step = result.stdout.split("step 11: ")[1].split("step 12: ")[0]
    assert "AbstractFetcherThread.truncateToHighWatermark: 2 truncates to its HW" in step
    assert re.search(r"1\s+leader e0\s+1 \|\s+1\s+1\s+\{1,2\}", step), step
    assert "! acked record 1 lost by replica 2 (offset 0)" in step
    assert "! CommittedRecordsOnIsr is violated" in step


def _block(stdout: str, title: str) -> str:
    """The terminal's block of one step: its title line up to the next blank line."""
    return stdout.split("\n" + title, 1)[1].split("\n\n", 1)[0]


def test_the_controller_is_a_lane_of_its_own() -> None:
    """S3: step 2, the controller electing 2 in epoch 1, changes no replica; the controller's
    lane shows it, and says which fields changed."""
    line = timeline(read_trace(GOLDEN / "S3_Kip101FastFailover.itf.json"), "S3")
    before, after = line.frames[1].controller, line.frames[2].controller
    assert before is not None and after is not None
    assert (before.leader, before.epoch, after.leader, after.epoch) == (1, 0, 2, 1)
    assert after.changed == {"leader", "epoch"} and not before.changed
    assert all(not lane.changed for lane in line.frames[2].lanes)
    result = explain(str(GOLDEN / "S3_Kip101FastFailover.itf.json"))
    assert re.search(r"controller\s+leader 2 epoch 1\s+live \{1,2\}\s+\{1,2\}",
                     _block(result.stdout, "step 2: "))  # fmt: skip


# ---------------------------------------------------------------- a real-Kafka trace


def test_a_real_trace_is_drawn_with_its_controller_and_time_gaps(tmp_path: Path) -> None:
    """The terminal: each step's gap since the one before and time since the first, the idle
    fetches folded into one row whose 4 s gap stands out, the controller's new epoch and
    leader at step 23, a `?` for an HW no hook saw, where each step was seen. The PNG and the
    SVG draw it too (the SVG with the controller's column and the gaps)."""
    png, svg = tmp_path / "real.png", tmp_path / "real.svg"
    result = explain(str(REAL), "--png", str(png), "--svg", str(svg))
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "real Kafka 2.6.3, kreplica agent: the variables it does not observe: " in out
    assert "26 fetch steps that change nothing observable folded into 3 rows" in out
    assert ("steps 1 to 21 [+4.028 s long gap, t 4.028 s]: 21 fetch steps that change nothing "
            "observable: FollowerSendFetch ×21") in out  # fmt: skip
    crash = _block(out, "step 22 [+319.6 ms, t 4.348 s]: broker 1 crashes")
    assert "seen at broker-2/events.jsonl:150 addLeaderAndIsrRequest" in crash
    assert re.search(r"controller\s+leader 1 epoch 0\s+live \{1,2,3\}\s+\{1,2,3\}", crash)
    detect = _block(out, "step 23 [+0, t 4.348 s]: KafkaController.onBrokerFailure")
    assert re.search(r"controller\s+leader 2 epoch 1\s+live \{2,3\}\s+\{2,3\}", detect)
    assert re.search(r"1\s+down", detect)
    unseen = _block(out, "step 39 [+41.8 ms, t 4.613 s]: ")
    assert re.search(r"3\s+follows 2 e1\s+1 2 3 4 5\s+\?\s+5", unseen), unseen
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    text = svg.read_text()
    assert "controller" in text and "+319.6 ms" in text and "epoch 1" in text


def test_a_real_trace_s_timeline() -> None:
    """Hidden variables are not drawn and judge no invariant; an omitted HW is the last one
    seen, flagged unknown, and no change; the gaps come from `#meta.nano`."""
    line = timeline(read_trace(REAL), "real")
    assert line.real and line.timed and "acked" in line.hidden
    assert line.first_violation is None
    crash, detect = line.frames[22], line.frames[23]
    assert crash.gap is not None and duration_text(crash.gap) == "319.6 ms"
    assert detect.gap == 0 and not line.long(crash) and line.long(window(line).frames[1])
    assert detect.controller is not None and detect.controller.epoch == 1
    assert detect.controller.changed == {"leader", "epoch", "isr", "live"}
    assert [n for n, _, _ in detect.changed] == ["ctrlEpoch", "ctrlIsr", "ctrlLeader", "ctrlLive"]
    assert crash.lanes[0].changed == {"role", "isr"} and not crash.lanes[0].alive
    unseen = line.frames[32]
    assert unseen.omitted == ("hw",) and not unseen.changed
    assert all(lane.unknown == {"hw"} and lane.hw_text == "?" for lane in unseen.lanes)
    assert [lane.hw for lane in unseen.lanes] == [lane.hw for lane in line.frames[31].lanes]
    assert ("hw", "[5,5,4]", "[5,5,5]") in line.frames[35].changed
    assert [f.index for f in window(line, folded=False).frames] == list(range(40))
    rows = window(line).frames
    assert [(f.index, f.last) for f in rows if f.folded] == [(1, 21), (32, 34), (36, 37)]


def test_a_window_of_steps_and_the_long_gap_threshold() -> None:
    """--steps A:B shows those steps (folded or not); --long-gap sets what stands out."""
    result = explain(str(REAL), "--steps", "20:26", "--no-fold", "--long-gap", "300")
    assert result.exit_code == 0, result.output
    assert "steps 20 to 26 of 39 shown" in result.stdout
    shown = re.findall(r"^step (\d+) \[", result.stdout, re.MULTILINE)
    assert shown == [str(i) for i in range(20, 27)]
    assert "step 22 [+319.6 ms long gap, t 4.348 s]" in result.stdout
    assert "step 21 [+1.0 ms, t 4.028 s]" in result.stdout
    folded = explain(str(REAL), "--steps", ":5", "--quiet")
    assert folded.exit_code == 0, folded.output


# ---------------------------------------------------------------- a trace conform rejected


def test_a_rejected_trace_shows_the_step_the_values_and_the_false_conjunct(
    rejected_results: Path, tmp_path: Path
) -> None:
    """--results: the step conform pinpointed is marked, with the variables the trace logged
    against those the spec allows, and the false conjunct with its line in the spec."""
    png = tmp_path / "rejected.png"
    result = explain(str(REJECTED), "--results", str(rejected_results), "--png", str(png))
    assert result.exit_code == 0, result.output
    step = " ".join(result.stdout.split("step 7: ", 1)[1].split())  # as one line, unwrapped
    assert "! conform rejected step 7: no successor of FollowerHandleFetchResponse" in step
    assert "hw: the trace logged [3,3,0]; the spec allows [3,2,0]" in step
    assert re.search(r"why: KafkaReplication\.tla:\d+: hw' = \[hw EXCEPT", step)
    assert "Len(newLog) = 2" in step
    assert png.stat().st_size > 0
    rejection = rejection_of(find_row(rejected_results, REJECTED))
    assert rejection is not None
    line = with_rejection(timeline(read_trace(REJECTED), "t"), rejection)
    marked = [f.index for f in line.frames if any(m.kind == "rejected" for m in f.marks)]
    assert marked == [7] and line.first_violation == 7  # the window ends after it


@pytest.mark.parametrize(
    ("results", "message"),
    [
        ("not-results", "is not a result row"),
        ("other-trace", "have no row for"),
        ("missing", "cannot read the results"),
    ],
)
def test_bad_results_are_one_line_and_exit_2(
    rejected_results: Path, tmp_path: Path, results: str, message: str
) -> None:
    path = tmp_path / "results.json"
    if results == "not-results":
        path.write_text('{"vars": []}\n')
    elif results == "other-trace":
        row = json.loads((rejected_results / "results.json").read_text())
        row["trace_id"] = "elsewhere/other.itf.json"
        path.write_text(json.dumps(row) + "\n")
    result = explain(str(REJECTED), "--results", str(path), "--quiet")
    assert result.exit_code == 2, result.output
    assert message in one_error_line(result)


def test_a_rejected_line_of_a_corpus_is_drawn_by_its_id(
    rejected_results: Path, tmp_path: Path
) -> None:
    """TRACE as PATH:LINE, the id conform gives a corpus line: that line is drawn, and its row
    of the results is found by the same id; a line without a trace is bad input."""
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("\n" + json.dumps(json.loads(REJECTED.read_text())) + "\n")
    row = json.loads((rejected_results / "results.json").read_text())
    row["trace_id"] = f"{corpus}:2"
    results = tmp_path / "results.json"
    results.write_text(json.dumps(row) + "\n")
    result = explain(f"{corpus}:2", "--results", str(results))
    assert result.exit_code == 0, result.output
    assert "conform rejected step 7" in " ".join(result.stdout.split())
    missing = explain(f"{corpus}:1", "--results", str(results))
    assert missing.exit_code == 2 and "no trace on that line" in one_error_line(missing)


def test_a_rejected_step_outside_the_window_is_said_not_linked(
    rejected_results: Path, tmp_path: Path
) -> None:
    page = tmp_path / "early.html"
    args = ["--results", str(rejected_results), "--window", "3", "--step", "0", "--quiet"]
    result = explain(str(REJECTED), *args, "--html", str(page))
    assert result.exit_code == 0, result.output
    text = page.read_text()
    assert "(step 7 is outside the steps shown)" in text and 'id="to-rejected"' not in text
