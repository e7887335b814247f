"""`kreplica conform`: TLC trace validation, on a process pool and on Spark (local mode).

Real TLC, real PySpark, real files. One SparkContext (local[2,2]: two threads, a task may
fail once) serves every Spark test. The corpora are short random walks of the correct
protocol (kreplica.conformance.fuzz.random_walk), so every one must conform.
"""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
from collections import Counter
from itertools import pairwise
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner, Result
from corpus_helpers import trace_tlc, walks, write_corpus
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kreplica.conformance.cli.main import main
from kreplica.conformance.errors import TraceError
from kreplica.conformance.tla.specs import default_spec_dir
from kreplica.conformance.tla.tlc import TlcOptions
from kreplica.conformance.validate import conform as conform_module
from kreplica.conformance.validate.conform import SparkRun, run_spark, ship_files
from kreplica.conformance.validate.results import iter_rows
from kreplica.conformance.validate.sources import (
    Lines,
    Share,
    batches,
    iter_local,
    newlines,
    number_lines,
    plan,
    read_share,
    split_file,
)
from kreplica.conformance.validate.tracecheck import (
    CheckSettings,
    SpecParams,
    check_texts,
    full_prepare,
    prepare,
)

pytestmark = pytest.mark.tlc
SPARK_MASTER = "local[2,2]"


@pytest.fixture(scope="module")
def settings_() -> CheckSettings:
    tlc = trace_tlc()
    return CheckSettings(SpecParams(fetch_max_records=2), default_spec_dir(), tlc)


def conform(*args: str) -> Result:
    return CliRunner().invoke(main, ["conform", *args])


def rows(out: Path) -> list[dict[str, Any]]:
    return list(iter_rows(out / "results.parquet"))


# ---------------------------------------------------------------- verdicts and pinpointing


def test_short_walks_of_the_correct_protocol_conform(settings_: CheckSettings) -> None:
    texts = walks(4, 15)
    results = check_texts([(f"t{i}", t) for i, t in enumerate(texts)], settings_)
    assert [r.verdict for r in results] == ["conforms"] * 4, [r.row() for r in results]
    assert [r.events for r in results] == [len(json.loads(t)["states"]) - 1 for t in texts]


def _corrupt(text: str, step: int, variable: str, value: Any) -> str:
    data = json.loads(text)
    data["states"][step][variable] = value
    return json.dumps(data)


def test_a_corrupted_state_is_pinpointed(settings_: CheckSettings) -> None:
    """The first step whose logged state no successor explains, and the variable that differs."""
    text = walks(1, 12, seed=4)[0]
    bad_hw = _corrupt(text, 5, "hw", [7, 7, 7])
    bad_init = _corrupt(text, 0, "nextRecord", 42)
    results = check_texts([("hw", bad_hw), ("init", bad_init), ("good", text)], settings_)
    hw, init, good = results
    assert good.verdict == "conforms"
    assert (hw.verdict, hw.step, hw.variables) == ("violates", 5, ["hw"])
    assert json.loads(hw.diff or "{}")["hw"]["expected"] == [7, 7, 7]
    assert (init.verdict, init.step, init.variables) == ("violates", 0, ["nextRecord"])


def test_an_action_the_spec_does_not_allow_is_pinpointed(settings_: CheckSettings) -> None:
    """A logged action whose guard is false: the step, the action, 'not enabled'."""
    data = json.loads(walks(1, 6, seed=5)[0])
    data["states"][1]["#meta"] = {"action": "Restart", "args": {"replica": 1}}  # 1 is running
    (result,) = check_texts([("r", json.dumps(data))], settings_)
    assert (result.verdict, result.step, result.action) == ("violates", 1, "Restart")
    assert "not enabled" in result.reason


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"vars": [', "truncated"),
        ("not json", "not valid JSON"),
        ('{"states": []}', "vars"),
        (None, "unknown action 'Teleport'"),
        ("unknown-variable", "unknown variable 'bogus'"),
    ],
)
def test_malformed_traces_get_an_error_row(
    settings_: CheckSettings, text: str | None, reason: str
) -> None:
    good = walks(1, 4, seed=11)[0]
    if text is None:
        data = json.loads(good)
        data["states"][2]["#meta"]["action"] = "Teleport"
        text = json.dumps(data)
    elif text == "unknown-variable":
        data = json.loads(good)
        data["vars"].append("bogus")
        for state in data["states"]:
            state["bogus"] = 0
        text = json.dumps(data)
    (result,) = check_texts([("bad", text)], settings_)
    assert result.verdict == "error"
    assert reason in result.reason


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_corrupt_files_each_get_one_row(data: st.DataObject) -> None:
    """Hypothesis corrupts traces (cut, flipped bytes, junk); every input still gets one row."""
    tlc = trace_tlc()
    check = CheckSettings(SpecParams(fetch_max_records=2), default_spec_dir(), tlc)
    good = walks(1, 5, seed=13)[0]
    texts = []
    for _ in range(data.draw(st.integers(2, 5))):
        kind = data.draw(st.sampled_from(["cut", "flip", "junk", "good"]))
        if kind == "cut":
            texts.append(good[: data.draw(st.integers(0, len(good) - 1))])
        elif kind == "flip":
            at = data.draw(st.integers(0, len(good) - 1))
            texts.append(good[:at] + data.draw(st.characters()) + good[at + 1 :])
        elif kind == "junk":
            texts.append(data.draw(st.text(max_size=50)))
        else:
            texts.append(good)
    results = check_texts([(f"c{i}", t) for i, t in enumerate(texts)], check)
    assert [r.trace_id for r in results] == [f"c{i}" for i in range(len(texts))]
    for text, result in zip(texts, results, strict=True):
        assert result.verdict in {"conforms", "violates", "error"}
        if text == good:
            assert result.verdict == "conforms"


@pytest.mark.parametrize(
    ("meta", "expected"),
    [({"min_insync_replicas": 2}, 2), ({}, None), ({"min_insync_replicas": True}, None),
     ({"min_insync_replicas": 0}, None), ({"min_insync_replicas": "2"}, None)],
)  # fmt: skip
def test_a_traces_min_isr_is_read_from_its_meta_by_both_readers(
    meta: dict[str, Any], expected: int | None
) -> None:
    """The min.insync.replicas a trace records (kreplica fuzz writes it per run) is what its
    batch is checked under; the fast path (the Java reader's) finds it in the text, after a
    nested object and whatever the key order, as the full decode does."""
    golden = Path(__file__).resolve().parent.parent / "traces" / "golden"
    trace = json.loads((golden / "Acks1Loss.itf.json").read_text())
    trace["#meta"] = {"dimensions": {"acks": "1"}, **meta, "description": "x"}
    text = json.dumps(trace)
    assert prepare("t", text, fast=True).min_isr == expected
    assert full_prepare("t", text).min_isr == expected


# ---------------------------------------------------------------- reading byte ranges

LINES = st.lists(st.sampled_from(["", " ", "{}", '{"a": "\u00e9\u2028"}\r', "x" * 40]), max_size=12)


def _numbered(shares: list[Share]) -> list[tuple[str, str]]:
    """The traces of `shares` once their line numbers are filled in, newline-stripped."""
    shares = number_lines(shares, lambda segments: [newlines(*s) for s in segments])
    return [(i, t.rstrip("\n")) for share in shares for i, t in read_share(share)]


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(lines=LINES, end=st.sampled_from(["", "\n"]), cuts=st.lists(st.integers(1, 600)))
def test_byte_ranges_read_every_line_once_with_its_number(
    tmp_path_factory: pytest.TempPathFactory, lines: list[str], end: str, cuts: list[int]
) -> None:
    """Whatever the cuts, the ranges' lines are the file's, each once, numbered as in the file."""
    text = "\n".join(lines) + end
    path = tmp_path_factory.mktemp("ranges") / "c.jsonl"
    path.write_text(text, encoding="utf-8")
    size = path.stat().st_size
    bounds = [0, *sorted({c for c in cuts if c < size}), size]
    shares: list[Share] = [(Lines(str(path), a, b),) for a, b in pairwise(bounds)]
    assert _numbered(shares) == split_file(str(path), text)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    files=st.lists(st.one_of(st.none(), LINES), max_size=5),
    batch=st.integers(1, 5),
    workers=st.integers(1, 3),
)
def test_a_plan_covers_every_trace_in_order(
    tmp_path_factory: pytest.TempPathFactory,
    files: list[list[str] | None],
    batch: int,
    workers: int,
) -> None:
    """Planned shares (runs of ITF files, byte ranges of corpora, across files) read every
    trace once, in order, with the ids the process pool gives them."""
    root = tmp_path_factory.mktemp("plan")
    paths = []
    for n, lines in enumerate(files):
        paths.append(root / (f"t{n}.itf.json" if lines is None else f"c{n}.jsonl"))
        paths[-1].write_text("{}" if lines is None else "\n".join(lines), encoding="utf-8")
    shares = plan(paths, batch, workers)
    assert all(shares)
    expected = [(i, t.rstrip("\n")) for i, t in iter_local(paths)]
    assert _numbered(shares) == expected


def test_shares_hold_a_batch_at_most_and_keep_every_worker_busy(tmp_path: Path) -> None:
    """Two corpora of 10 equal lines, batches of 3: 20 traces in 7 shares, one crossing from
    one file to the next; with 2 workers, 8 shares (a multiple of 2)."""
    paths = [write_corpus(tmp_path / f"{n}.jsonl", ["{}" * 10] * 10) for n in "ab"]
    assert len(plan(paths, 3, 2)) == 8
    shares = plan(paths, 3, 1)
    sizes = [sum(1 for _ in read_share(s)) for s in number_lines(shares, lambda g: [0] * len(g))]
    assert len(shares) == 7 and sum(sizes) == 20 and max(sizes) <= 3
    assert any(len({p.path for p in s if isinstance(p, Lines)}) == 2 for s in shares)


def test_big_traces_make_smaller_batches_and_small_corpora_use_every_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch holds at most BATCH_BYTES of trace text whatever the batch size (TLC's memory
    grows with it), and the process pool splits a corpus smaller than a batch over its
    workers, as Spark's shares do."""
    from kreplica.conformance.validate import sources

    paths = [write_corpus(tmp_path / "big.jsonl", ["{}" * 500] * 12)]  # 1,001 bytes a line
    assert len(plan(paths, 1000, 1)) == 1
    assert sources.balanced_batch_size(paths, 1000, 2) == 6
    monkeypatch.setattr(sources, "BATCH_BYTES", 3_003)  # three lines
    assert len(plan(paths, 1000, 1)) == 4
    assert len(plan(paths, 2, 1)) == 6  # the batch size still caps it
    assert sources.balanced_batch_size(paths, 1000, 2) == 3


@given(n=st.integers(0, 60), size=st.integers(1, 12), slack=st.integers(0, 4))
def test_batches_keep_order_and_fold_a_small_remainder_into_the_last(
    n: int, size: int, slack: int
) -> None:
    """Full batches, then a last one of at most `size + slack` that is not a lone sliver."""
    items = [(str(i), "") for i in range(n)]
    found = list(batches(items, size, slack))
    assert [item for batch in found for item in batch] == items
    assert all(len(batch) == size for batch in found[:-1])
    if found:
        assert 0 < len(found[-1]) <= size + slack
        assert len(found) == 1 or len(found[-1]) > slack


# ---------------------------------------------------------------- the process pool


def test_cli_without_spark_writes_every_result(tmp_path: Path) -> None:
    corpus_path = write_corpus(tmp_path / "c.jsonl", [*walks(3, 10), "{broken"])
    single = tmp_path / "one.itf.json"
    single.write_text(walks(1, 8, seed=2)[0])
    out = tmp_path / "out"
    result = conform(str(corpus_path), str(single), "--no-spark", "--batch-size", "2",
                     "--workers", "2", "--out", str(out))  # fmt: skip
    assert result.exit_code == 2, result.output  # the broken line is an error
    found = rows(out)
    assert Counter(r["verdict"] for r in found) == {"conforms": 4, "error": 1}
    assert sorted(r["trace_id"] for r in found) == sorted(
        [f"{corpus_path}:{n}" for n in (1, 2, 3, 4)] + [str(single)]
    )
    assert len((out / "results.json").read_text().splitlines()) == 5
    suite = ET.parse(out / "junit.xml").getroot()
    assert suite.get("tests") == "5" and suite.get("errors") == "1"
    assert len(suite.findall("testcase")) == 5


def test_cli_exit_codes(tmp_path: Path) -> None:
    good = write_corpus(tmp_path / "good.jsonl", walks(2, 6))
    assert conform(str(good), "--no-spark", "--out", str(tmp_path / "o1")).exit_code == 0
    bad = write_corpus(tmp_path / "bad.jsonl", [_corrupt(walks(1, 6)[0], 3, "hw", [9, 9, 9])])
    assert conform(str(bad), "--no-spark", "--out", str(tmp_path / "o2")).exit_code == 1
    missing = conform(str(tmp_path / "nope.jsonl"), "--no-spark", "--out", str(tmp_path / "o3"))
    assert missing.exit_code == 2
    assert "no such file" in missing.stderr and "Traceback" not in missing.output
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "no trace files" in conform(str(empty), "--no-spark").stderr


def test_the_report_lists_rejections_by_id_says_how_many_more_and_prints_no_markup(
    tmp_path: Path,
) -> None:
    """12 rejected traces written out of order: the ten with the smallest ids, in order, then
    '... and 2 more'; an action named like rich markup is printed as text; one stderr line."""
    base = walks(1, 6)[0]
    bad = _corrupt(base, 3, "hw", [9, 9, 9])
    odd = json.loads(bad)
    odd["states"][3]["#meta"]["action"] = "[/red]"  # not a spec action: an error row
    directory = tmp_path / "traces"
    directory.mkdir()
    for n in reversed(range(12)):
        (directory / f"t{n:02d}.itf.json").write_text(bad)
    (directory / "zz.itf.json").write_text(json.dumps(odd))
    result = conform(str(directory), "--no-spark", "--workers", "1", "--out", str(tmp_path / "o"))
    assert result.exit_code == 2, result.output
    lines = result.stdout.splitlines()
    why = [line for line in lines if line.startswith("why ")]
    shown = [line for line in lines if ("t0" in line or "t1" in line) and line not in why]
    ids = [re.search(r"t\d\d", line).group(0) for line in shown]  # type: ignore[union-attr]
    assert ids == [f"t{n:02d}" for n in range(10)]
    assert len(why) == 3  # --why 3: the first three rejections of the batch
    assert "... and 2 more rejected" in result.stdout
    assert "[/red]" in result.stdout and "Traceback" not in result.output
    assert result.stderr.splitlines() == ["kreplica: error: 1 of 13 traces could not be checked"]


def _java_that_dies_once(tmp_path: Path) -> Path:
    """A `java` that, the first time it is started, runs the real JVM for a second and then
    kills it (SIGKILL), as a crash would; later starts are the real JVM. Deterministic where
    watching for the process was not: a batch that finishes quickly can slip past a watcher."""
    real = shutil.which("java")
    assert real is not None
    wrapper = tmp_path / "java"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'if mkdir "{tmp_path}/killed" 2>/dev/null; then\n'
        f'  "{real}" "$@" & pid=$!\n'
        "  sleep 1; kill -9 $pid; wait $pid; exit 137\n"
        "fi\n"
        f'exec "{real}" "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper


def test_a_killed_tlc_process_costs_no_result(tmp_path: Path) -> None:
    """The batch whose TLC dies is run again; every trace still has exactly one row."""
    path = write_corpus(tmp_path / "c.jsonl", walks(4, 40))
    java = _java_that_dies_once(tmp_path)
    out = tmp_path / "o"
    result = conform(
        str(path), "--no-spark", "--batch-size", "2", "--out", str(out), "--java", str(java)
    )
    assert (tmp_path / "killed").is_dir(), "no TLC process was started"
    found = rows(out)
    assert sorted(r["trace_id"] for r in found) == [f"{path}:{n}" for n in (1, 2, 3, 4)]
    assert {r["verdict"] for r in found} == {"conforms"}, result.output


# ---------------------------------------------------------------- Spark (local mode)


def test_spark_end_to_end_with_retried_tasks(tmp_path: Path, settings_: CheckSettings) -> None:
    """Spark's tasks read their own byte ranges of the files, ship the spec and jar, retry
    failed tasks: one row per trace, line numbers as in the file, Parquet and JSON."""
    corpus_dir = tmp_path / "corpus"
    corpus_dir.mkdir()
    write_corpus(corpus_dir / "a.jsonl", walks(3, 10, seed=21))
    write_corpus(corpus_dir / "b.jsonl", [*walks(2, 10, seed=22), "", "not json"])
    (corpus_dir / "one.itf.json").write_text(walks(1, 6, seed=23)[0])
    (corpus_dir / "ignored.txt").write_text("not a trace file")
    out = tmp_path / "out"
    ship = ship_files(settings_)
    run = SparkRun([str(corpus_dir)], settings_, 2, SPARK_MASTER, ship, fail_first_attempts=True)
    run_spark(run, out, lambda done, total: None)
    found = list(iter_rows(out / "results.parquet"))
    expected = [f"{corpus_dir / 'a.jsonl'}:{n}" for n in (1, 2, 3)]
    expected += [f"{corpus_dir / 'b.jsonl'}:{n}" for n in (1, 2, 4)]
    assert sorted(r["trace_id"] for r in found) == sorted(
        [*expected, str(corpus_dir / "one.itf.json")]
    )
    assert Counter(r["verdict"] for r in found) == {"conforms": 6, "error": 1}
    assert pq.read_table(out / "results.parquet").num_rows == 7
    assert not list((out / "results.parquet").glob(".*")), "a failed attempt left its part"
    json_rows = [json.loads(line) for line in (out / "results.json").read_text().splitlines()]
    assert sorted(r["trace_id"] for r in json_rows) == sorted(r["trace_id"] for r in found)


def test_spark_reads_other_uris_through_spark(
    tmp_path: Path, settings_: CheckSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A URI the driver cannot open (hdfs://, s3a://) is read by Spark's own reader, each file
    whole; here a file: URI stands in for one."""
    monkeypatch.setattr(conform_module, "_local_path", lambda path: None)
    path = write_corpus(tmp_path / "c.jsonl", [*walks(2, 6, seed=41), "", "{"])
    out = tmp_path / "out"
    run = SparkRun([path.as_uri()], settings_, 2, SPARK_MASTER, ship_files(settings_))
    run_spark(run, out, lambda done, total: None)
    found = {r["trace_id"].rsplit(":", 1)[1]: r["verdict"] for r in rows(out)}
    assert found == {"1": "conforms", "2": "conforms", "4": "error"}


def test_spark_rejects_a_missing_path_before_starting(
    tmp_path: Path, settings_: CheckSettings
) -> None:
    run = SparkRun([str(tmp_path / "nope.jsonl")], settings_, 2, SPARK_MASTER, [])
    with pytest.raises(TraceError, match="no such file"):
        run_spark(run, tmp_path / "out", lambda done, total: None)


def test_spark_cli(tmp_path: Path) -> None:
    """Spark's results replace an older run's in the same directory, and the pool's Spark's."""
    path = write_corpus(tmp_path / "c.jsonl", walks(2, 8, seed=31))
    out = tmp_path / "o"
    assert conform(str(path), "--no-spark", "--out", str(out)).exit_code == 0
    result = conform(str(path), "--master", SPARK_MASTER, "--out", str(out))
    assert result.exit_code == 0, result.output
    assert [r["verdict"] for r in rows(out)] == ["conforms"] * 2
    assert len((out / "results.json").read_text().splitlines()) == 2
    assert conform(str(path), "--no-spark", "--out", str(out)).exit_code == 0  # and back
    assert len(rows(out)) == 2


@pytest.mark.tlc
def test_a_hidden_variable_is_searched(
    settings_: CheckSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Traces that leave `msgs` out conform: TLC searches the messages in flight, following
    every message a logged receive could be about (the trace spec's VIEW keeps those branches
    apart), and a wrong value that is recorded is still caught at its step."""
    from kreplica.conformance.bench.hidden import hide
    from kreplica.conformance.validate import tlcdata, tracecheck

    texts = [hide(t, ("msgs",)) for t in walks(6, 60, seed=3)]
    spoiled = json.loads(texts[0])
    spoiled["states"][20]["hw"] = [9, 9, 9]
    items = [(f"t{i}", t) for i, t in enumerate([*texts, json.dumps(spoiled)])]
    runs: list[Any] = []
    real = tracecheck.run_tlc

    def recording_run_tlc(module: Path, config: Path, options: TlcOptions) -> Any:
        runs.append(real(module, config, options))
        return runs[-1]

    monkeypatch.setattr(tracecheck, "run_tlc", recording_run_tlc)
    for reader in (None, tlcdata.build_reader()):
        runs.clear()
        checking = CheckSettings(settings_.params, settings_.spec_dir, settings_.tlc, reader)
        results = check_texts(items, checking)
        assert [r.verdict for r in results] == ["conforms"] * 6 + ["violates"]
        assert (results[-1].step, results[-1].variables) == (20, ["hw"])
        events = sum(len(json.loads(t)["states"]) for t in [*texts, json.dumps(spoiled)])
        assert runs[0].distinct > events  # the search did branch on the hidden messages
