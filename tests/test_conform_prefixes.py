"""Shared prefixes are checked once, and every trace gets the row it gets when walked alone.

The Java reader lets TLC walk each event that several traces of a batch begin with alike once
(`java/TraceDataPrefixes.java`), and `validate/prefixes.py` says what TLC printed of it of every
trace through it. The rule: with sharing on or off (`-Dkreplica.tracedata.share=false`), every
result row is the same, field by field, `seconds` (the batch's time, shared out) alone
excepted. Checked here on a real fuzz corpus recorded under a seeded bug (rejected traces, with
`--why`), with a rejected trace's prefixes and repeats added; on every prefix of a trace that
breaks an invariant; and on traces with a hidden variable, whose search branches."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from corpus_helpers import trace_tlc

from kreplica.conformance.bench.hidden import hide
from kreplica.conformance.cli.main import main
from kreplica.conformance.tla.specs import default_spec_dir
from kreplica.conformance.tla.tlc import TlcOptions
from kreplica.conformance.validate import prefixes, tracecheck
from kreplica.conformance.validate.conform import check_items
from kreplica.conformance.validate.tlcdata import build_reader
from kreplica.conformance.validate.tracecheck import CheckSettings, SpecParams
from kreplica.impl.variants import parse_variant

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "traces" / "golden"
OFF = "-Dkreplica.tracedata.share=false"


# ---------------------------------------------------------------- the mapping alone


def test_each_event_is_held_by_the_first_trace_that_has_it() -> None:
    """Trace 1 holds its own events; 2 branches off 1 after 3 events; 3 repeats 1's first two
    (a prefix: it holds nothing); 4 branches off 2 after 5 events (the first 3 held by 1)."""
    shares = {2: (1, 3), 3: (1, 2), 4: (2, 5)}
    events = {1: 4, 2: 5, 3: 1, 4: 6}
    assert prefixes.holders(shares, events) == {
        1: [1, 1, 1, 1, 1],
        2: [1, 1, 1, 2, 2, 2],
        3: [1, 1],
        4: [1, 1, 1, 2, 2, 4, 4],
    }


def test_a_trace_reaches_as_far_as_the_holders_of_its_events_reached() -> None:
    """Reaching a holder's later event reaches its earlier ones; a trace stops at the first
    event whose holder did not get that far."""
    path = [1, 1, 1, 2, 2, 4, 4]
    assert prefixes.reached(path, {1: 9, 2: 4, 4: 6}) == 6
    assert prefixes.reached(path, {1: 9, 2: 3, 4: 6}) == 3  # 2 stopped at its first own event
    assert prefixes.reached(path, {1: 1}) == 1
    assert prefixes.reached(path, {}) is None


def test_facts_of_a_held_event_are_facts_of_every_trace_through_it() -> None:
    """A mismatch printed of (holder, step) is trace 4's at that step; trace 3, a prefix,
    conforms when its last event was reached in its holder's name."""
    path = [1, 1, 1, 2, 2, 4, 4]
    facts = {(2, 4): "m", (1, 4): "not 4's", (4, 6): "n"}
    assert prefixes.at_steps(path, facts, 4) == {(4, 4): "m", (4, 6): "n"}
    assert prefixes.conforms([1, 1], {(1, 1)})
    assert not prefixes.conforms([1, 1], {(1, 2)})


# ---------------------------------------------------------------- real TLC, on and off


@pytest.fixture(scope="module")
def tlc() -> TlcOptions:
    return trace_tlc()


def settings_for(tlc: TlcOptions, params: SpecParams, share: bool, why: int = 0) -> CheckSettings:
    options = tlc if share else replace(tlc, jvm_flags=(*tlc.jvm_flags, OFF))
    return CheckSettings(params, default_spec_dir(), options, build_reader(), why)


def rows(items: list[tuple[str, str]], settings: CheckSettings) -> list[dict[str, Any]]:
    """The rows of one batch, `--why` included, without `seconds`."""
    found = check_items(items, settings)
    for row in found:
        row.pop("seconds")
    return found


@pytest.fixture
def shared_count(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many traces the reader said share a prefix, per TLC run (so a test can tell that
    sharing took place)."""
    counts: list[int] = []
    original = tracecheck.per_trace

    def spy(found: tracecheck.Printed) -> tracecheck.Printed:
        counts.append(len(found.shares))
        return original(found)

    monkeypatch.setattr(tracecheck, "per_trace", spy)
    return counts


def truncated(text: str, states: int, name: str) -> str:
    """The trace's first `states` states, under another id."""
    data = json.loads(text)
    data["states"] = data["states"][:states]
    data["#meta"]["id"] = name
    return json.dumps(data)


@pytest.mark.tlc
def test_a_fuzz_corpus_gets_the_same_rows_with_prefixes_shared(
    tmp_path: Path, tlc: TlcOptions, shared_count: list[int]
) -> None:
    """A corpus of `kreplica fuzz` under the seeded bug early-ack (no invariants while
    recording), checked against the correct protocol, with a rejected trace's prefix that
    ends just before its rejected step (conforms), the prefix that ends on it (rejected
    there, with the same variables and diff) and a repeat of it: every row is the same with
    sharing on as off, `--why` on the first rejected trace included."""
    corpus = tmp_path / "corpus.jsonl"
    result = CliRunner().invoke(main, [
        "fuzz", "--examples", "60", "--steps", "30", "--seed", "1", "--bug", "early-ack",
        "--no-invariants", "--corpus", str(corpus),
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    texts = corpus.read_text(encoding="utf-8").splitlines()
    items = [(f"corpus.jsonl:{i + 1}", t) for i, t in enumerate(texts)]
    params = SpecParams(fetch_max_records=2)
    alone = rows(items, settings_for(tlc, params, share=False))
    rejected = [i for i, r in enumerate(alone) if r["verdict"] == "violates" and r["step"] > 1]
    assert rejected, "no trace of the corpus was rejected"
    first = rejected[0]
    step = alone[first]["step"]
    extra = [
        ("before", truncated(texts[first], step, "before")),
        ("on", truncated(texts[first], step + 1, "on")),
        ("repeat", truncated(texts[first], len(json.loads(texts[first])["states"]), "repeat")),
    ]
    items += extra
    shared_count.clear()
    off = rows(items, settings_for(tlc, params, share=False, why=1))
    assert not any(shared_count), "sharing was not off"
    shared_count.clear()
    on = rows(items, settings_for(tlc, params, share=True, why=1))
    assert shared_count and shared_count[0] > len(items) // 3, shared_count
    assert len(on) == len(off) == len(texts) + 3
    for a, b in zip(on, off, strict=True):
        assert a == b
    assert sum(r["verdict"] == "violates" for r in on) > 1
    assert on[first]["why"] != "", "the first rejected trace has no conjunct"
    before, at, repeat = on[-3:]
    assert before["verdict"] == "conforms"
    drop = ("trace_id", "events", "why", "why_line", "why_values")
    same = {k: v for k, v in on[first].items() if k not in drop}
    assert {k: v for k, v in at.items() if k not in drop} == same
    assert {k: v for k, v in repeat.items() if k not in ("trace_id", "why", "why_line",
                                                          "why_values")} == {
        k: v for k, v in on[first].items() if k not in ("trace_id", "why", "why_line",
                                                         "why_values")
    }  # fmt: skip


@pytest.mark.tlc
def test_every_prefix_of_an_invariants_violation_gets_its_own_row(
    tlc: TlcOptions, shared_count: list[int]
) -> None:
    """Acks1Loss conforms to acks=1 but loses an acknowledged record at step `lost`: checked
    with AckedRecordsNeverLost, its prefixes that end before `lost` conform, the others
    violate the invariant at `lost`, the same with sharing on as off."""
    text = (GOLDEN / "Acks1Loss.itf.json").read_text(encoding="utf-8")
    states = len(json.loads(text)["states"])
    items = [(f"p{n}", truncated(text, n, f"p{n}")) for n in range(states, 0, -1)]
    items.append(("again", text))
    params = SpecParams(
        variant=parse_variant(["acks=1"]), fetch_max_records=2,
        invariants=("AckedRecordsNeverLost",),
    )  # fmt: skip
    off = rows(items, settings_for(tlc, params, share=False))
    on = rows(items, settings_for(tlc, params, share=True))
    assert max(shared_count) == len(items) - 1  # every trace but the first shares
    assert on == off
    violated = [r for r in on if r["verdict"] == "violates"]
    assert violated and {r["invariant"] for r in violated} == {"AckedRecordsNeverLost"}
    lost = violated[0]["step"]
    for row in on:
        verdict = "conforms" if row["events"] < lost else "violates"
        assert row["verdict"] == verdict, row


@pytest.mark.tlc
def test_traces_with_a_hidden_variable_share_only_with_each_other(
    tmp_path: Path, tlc: TlcOptions, shared_count: list[int]
) -> None:
    """Traces that leave `msgs` out (TLC searches the messages in flight) and the same traces
    with `msgs`, with prefixes of both, in one batch: each trace keeps its row. Checked
    under fetch size 1 against a corpus fetched 2 at a time, so some of them are rejected."""
    corpus = tmp_path / "corpus.jsonl"
    result = CliRunner().invoke(main, [
        "fuzz", "--stages", "correct", "--examples", "12", "--steps", "20", "--seed", "2",
        "--corpus", str(corpus),
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    texts = corpus.read_text(encoding="utf-8").splitlines()[:8]
    items = []
    for i, t in enumerate(texts):
        half = len(json.loads(t)["states"]) // 2 + 1
        for name, text in ((f"t{i}", t), (f"h{i}", hide(t, ("msgs",)))):
            items += [(name, text), (f"{name}-half", truncated(text, half, f"{name}-half"))]
    for fetch in (2, 1):
        params = SpecParams(fetch_max_records=fetch)
        off = rows(items, settings_for(tlc, params, share=False))
        on = rows(items, settings_for(tlc, params, share=True))
        assert on == off
    assert any(r["verdict"] == "violates" for r in on)
    assert max(shared_count) >= len(texts) * 2
