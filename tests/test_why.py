"""Why a trace was rejected (conformance/validate/why.py): the false conjunct of the logged
action, found by real TLC runs, and the values of the names it mentions."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from corpus_helpers import trace_tlc, walks

from kreplica.conformance.cli.main import main
from kreplica.conformance.tla.specs import default_spec_dir
from kreplica.conformance.validate.conform import check_items
from kreplica.conformance.validate.tracecheck import CheckSettings, SpecParams
from kreplica.conformance.validate.why import (
    Node,
    action_span,
    expression_text,
    false_conjunct,
    mentioned_terms,
    why_text,
)

ROOT = Path(__file__).resolve().parents[1]
REGRESSIONS = ROOT / "traces" / "regressions"
SPEC = (default_spec_dir() / "KafkaReplication.tla").read_text(encoding="utf-8").splitlines()


def spec_line(fragment: str, after: str = "") -> int:
    """The first line (1-based) of the spec holding `fragment`, after the line holding
    `after`: the tests find their conjuncts by text, not by number."""
    start = next(i for i, line in enumerate(SPEC) if after in line) if after else 0
    return next(i + 1 for i in range(start, len(SPEC)) if fragment in SPEC[i])


@pytest.fixture(scope="module")
def settings_() -> CheckSettings:
    tlc = trace_tlc()
    return CheckSettings(SpecParams(fetch_max_records=2), default_spec_dir(), tlc)


def checked(settings: CheckSettings, *items: tuple[str, str]) -> list[dict[str, Any]]:
    return check_items(list(items), settings)


def regression(name: str) -> tuple[str, str]:
    path = REGRESSIONS / f"{name}.itf.json"
    return name, path.read_text(encoding="utf-8")


def test_an_hw_not_clamped_to_the_log_is_the_hw_conjunct(settings_: CheckSettings) -> None:
    """KAFKA seeded bug hw-not-clamped: the follower takes the leader's HW beyond its own LEO;
    the false conjunct is the follower's HW assignment, with the values that show it."""
    (row,) = checked(settings_, regression("bug-hw-not-clamped-r3-s3"))
    assert (row["verdict"], row["step"]) == ("violates", 7)
    assert row["why_line"] == spec_line('/\\ hw\' = [hw EXCEPT ![f] = IF "hw-not-clamped"')
    assert row["why"].startswith("hw' = [hw EXCEPT ![f] =")
    values = json.loads(row["why_values"])
    assert values["hw'"] == "<<3, 3, 0>>" and values["f"] == "2"
    assert values["Len(newLog)"] == "2"  # the follower's LEO: the HW should stop there
    assert "KafkaReplication.tla:" in why_text(row)


def test_an_early_ack_is_the_pending_branch(settings_: CheckSettings) -> None:
    """bug early-ack: an acks=-1 produce acknowledged at once; the THEN branch that keeps it
    waiting is the false one."""
    (row,) = checked(settings_, regression("bug-early-ack-r3-fcedpi4-s2"))
    assert row["step"] == 1 and row["action"] == "Produce"
    assert row["why_line"] == spec_line("THEN pending' = (pending \\ DoneProduces", "Produce(l,")
    assert json.loads(row["why_values"])["pending'"] == "{}"


def test_an_action_not_enabled_is_its_guard(settings_: CheckSettings) -> None:
    """Restart of a replica that runs: the guard that it is down is false."""
    data = json.loads(walks(1, 6, seed=5)[0])
    data["states"][1]["#meta"] = {"action": "Restart", "args": {"replica": 1}}
    (row,) = checked(settings_, ("r", json.dumps(data)))
    assert row["step"] == 1 and row["variables"] == []
    assert row["why_line"] == spec_line("/\\ r \\notin alive", "Restart(r) ==")
    assert json.loads(row["why_values"]) == {"r": "1", "alive": "{1, 2, 3}"}


def test_a_variable_an_action_keeps_is_its_unchanged(settings_: CheckSettings) -> None:
    """A step that changes `crashes` where the action keeps it: the UNCHANGED that lists it
    (through historyVars) is the false conjunct; TLC's coverage does not count UNCHANGED."""
    data = json.loads(walks(1, 12, seed=7)[0])
    step = next(
        i
        for i, s in enumerate(data["states"])
        if i > 0 and s["#meta"]["action"] == "FollowerSendFetch"
    )
    for later in data["states"][step:]:
        later["crashes"] = 5
    (row,) = checked(settings_, ("c", json.dumps(data)))
    assert (row["step"], row["variables"]) == (step, ["crashes"])
    assert row["why_line"] == spec_line("historyVars, removed>>", "FollowerSendFetch(f) ==") - 1
    assert row["why"].startswith("UNCHANGED <<replicaVars")


def test_why_is_looked_for_in_the_first_rejections_of_a_batch_only(
    settings_: CheckSettings,
) -> None:
    """--why N: N rejected traces per batch get a conjunct, the others keep their verdict."""
    from dataclasses import replace

    bad = regression("bug-hw-not-clamped-r3-s3")
    rows = checked(replace(settings_, why=1), bad, ("again", bad[1]))
    assert [r["verdict"] for r in rows] == ["violates", "violates"]
    assert rows[0]["why"] and rows[1]["why"] == "" and rows[1]["why_line"] is None
    (none,) = checked(replace(settings_, why=0), bad)
    assert none["why"] == "" and none["step"] == 7


def test_the_cli_prints_it_and_writes_it_to_every_result_file(tmp_path: Path) -> None:
    out = tmp_path / "out"
    path = str(REGRESSIONS / "bug-hw-not-clamped-r3-s3.itf.json")
    result = CliRunner().invoke(main, ["conform", path, "--no-spark", "--workers", "1",
                                       "--out", str(out)])  # fmt: skip
    assert result.exit_code == 1, result.output
    line = spec_line('/\\ hw\' = [hw EXCEPT ![f] = IF "hw-not-clamped"')
    assert f"step 7: KafkaReplication.tla:{line}: hw' = [hw EXCEPT" in result.output
    (row,) = [json.loads(x) for x in (out / "results.json").read_text().splitlines()]
    assert row["why_line"] == line
    failure = ET.parse(out / "junit.xml").getroot().find("testcase/failure")
    assert failure is not None and f"why: KafkaReplication.tla:{line}" in (failure.text or "")


# ---------------------------------------------------------------- the parts, on the spec's text


def test_the_furthest_conjunct_reached_is_the_false_one() -> None:
    """Coverage nodes of the Restart action, made by hand: the last one reached in the text."""
    first, _ = action_span(SPEC, "Restart") or (0, 0)
    guard = spec_line("/\\ r \\notin alive", "Restart(r) ==")
    col = SPEC[guard - 1].index("r \\notin") + 1
    node = Node(0, guard, col, guard, col + 13, "KafkaReplicationWhy", 1)
    assert first == guard - 1
    assert false_conjunct(SPEC, [node], "Restart", frozenset()) == node
    assert expression_text(SPEC, node) == "r \\notin alive"
    assert false_conjunct(SPEC, [], "Restart", frozenset()) is None


def test_mentioned_terms_leave_out_keywords_fields_and_bound_names() -> None:
    terms = mentioned_terms(
        'hw\' = [hw EXCEPT ![f] = IF "x" \\in Bugs THEN m.hw ELSE Max2(LogStart(f), m.hw)]'
    )
    assert terms == ["hw'", "hw", "f", "Bugs", "m.hw", "LogStart(f)"]
    assert mentioned_terms("\\E x \\in S : x > y[l]") == ["S", "y[l]"]
    assert mentioned_terms('[type |-> "a", src |-> f]') == ["f"]
    assert mentioned_terms("hw' = hw", primed_ok=False) == ["hw"]
