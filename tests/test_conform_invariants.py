"""Invariants on a trace (`kreplica conform --invariant NAME`): a trace that is a behaviour of a
variant of the spec but reaches a state where one of the spec's safety properties is false
violates it at that step, named in the `invariant` column; a trace that is not a behaviour is
rejected as without invariants when its unexplained step comes first.

The steps the tests expect are computed from the recorded states (`acked_lost_at`), not
written down. Real TLC, the process pool, and one Spark run."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from corpus_helpers import trace_tlc

from kreplica.conformance.cli.main import main
from kreplica.conformance.replay.trace import setup_from_config
from kreplica.conformance.tla.apalache import _invariant_names
from kreplica.conformance.tla.itf import ItfTrace, decode_trace, loads_json
from kreplica.conformance.tla.specs import default_spec_dir
from kreplica.conformance.tla.tlc import TlcOptions
from kreplica.conformance.tla.tlc_output import Verdict
from kreplica.conformance.validate import invariants, tracecheck
from kreplica.conformance.validate.tlcdata import build_reader
from kreplica.conformance.validate.tracecheck import (
    CheckSettings,
    Printed,
    SpecParams,
    TraceResult,
    check_texts,
    invariant_names,
)
from kreplica.impl.variants import Variant

pytestmark = pytest.mark.tlc

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "traces" / "golden"
SPEC = default_spec_dir()
KREPLICA = Path(sys.executable).parent / "kreplica"
LOST = "AckedRecordsNeverLost"


def trace(name: str) -> ItfTrace:
    text = (GOLDEN / f"{name}.itf.json").read_text(encoding="utf-8")
    return decode_trace(loads_json(text, name), name)


def acked_lost_at(t: ItfTrace) -> int | None:
    """The first state of `t` in which a leader in office lacks an acknowledged record
    (AckedRecordsNeverLost on the recorded values; the golden traces delete no records)."""
    for index, state in enumerate(t.states):
        v = state.values
        for leader in range(1, len(v["hw"]) + 1):
            in_office = (
                leader in v["alive"]
                and leader == v["ctrlLeader"]
                and v["leader"][leader - 1] == leader
                and v["leaderEpoch"][leader - 1] == v["ctrlEpoch"]
            )
            held = {entry["record"] for entry in v["log"][leader - 1]}
            if in_office and not set(v["acked"]) <= held:
                return index
    return None


def params_of(name: str, *names: str) -> SpecParams:
    """The constants of the golden trace's own config (its variant, fetch size, MinIsr)."""
    setup = setup_from_config(SPEC / f"{name}.cfg")
    return SpecParams(
        variant=setup.variant,
        min_insync_replicas=setup.min_insync_replicas,
        fetch_max_records=setup.fetch_max_records,
        invariants=names,
    )


@pytest.fixture(scope="module")
def tlc() -> TlcOptions:
    return trace_tlc()


def conform(tmp_path: Path, *args: str) -> tuple[int, str, list[dict[str, Any]]]:
    """`kreplica conform` in the process pool: exit code, output, result rows."""
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main, ["conform", *args, "--no-spark", "--workers", "1", "--out", str(out)]
    )
    rows = [json.loads(line) for line in (out / "results.json").read_text().splitlines()]
    return result.exit_code, result.output, rows


# ---------------------------------------------------------------- the command


def test_an_acks1_loss_conforms_to_acks1_and_violates_acked_records_never_lost(
    tmp_path: Path,
) -> None:
    """The acks=1 counterexample is a behaviour of the acks=1 variant; with the invariant it
    violates at the step where the acknowledged record leaves the leader in office, and every
    result file names the invariant; no --why probe runs for it."""
    path = str(GOLDEN / "Acks1Loss.itf.json")
    lost = acked_lost_at(trace("Acks1Loss"))
    assert lost is not None and lost > 0
    code, _, [plain] = conform(tmp_path / "plain", path, "--variant", "acks=1")
    assert (code, plain["verdict"], plain["invariant"]) == (0, "conforms", "")

    code, output, [row] = conform(tmp_path, path, "--variant", "acks=1", "--invariant", LOST)
    assert code == 1, output
    logged = trace("Acks1Loss").states[lost]
    assert (row["verdict"], row["step"], row["invariant"]) == ("violates", lost, LOST)
    assert (row["action"], json.loads(row["args"])) == (logged.action, dict(logged.args))
    assert row["reason"] == f"invariant {LOST} is false after step {lost} ({row['action']} " + (
        f"{row['args']})"
    )
    assert row["why"] == "" and row["why_line"] is None and row["variables"] == []
    assert f"invariant {LOST}" in output
    case = ET.parse(tmp_path / "out" / "junit.xml").getroot().find("testcase")
    assert case is not None
    prop = case.find("properties/property")
    assert prop is not None and (prop.get("name"), prop.get("value")) == ("invariant", LOST)
    failure = case.find("failure")
    assert failure is not None and f"invariant {LOST} is false" in failure.get("message", "")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["invariants"] == [LOST]
    table = pq.read_table(tmp_path / "out" / "results.parquet")
    assert table.column("invariant").to_pylist() == [LOST]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("NoSuchInvariant", "unknown invariant 'NoSuchInvariant': a trace can be checked against"),
        ("TypeOK", "TypeOK is not checked on traces"),
    ],
)
def test_an_unknown_invariant_is_one_line_before_tlc(
    tmp_path: Path, name: str, message: str
) -> None:
    """Refused in one line, exit 2, before anything runs (here: no Java, no jar)."""
    done = subprocess.run(
        [str(KREPLICA), "conform", str(GOLDEN / "Acks1Loss.itf.json"), "--no-spark",
         "--invariant", LOST, "--invariant", name, "--out", str(tmp_path / "out"),
         "--java", str(tmp_path / "no-java"), "--jar", str(tmp_path / "no.jar")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and LOST in lines[0], done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert not (tmp_path / "out").exists()


def test_spark_carries_the_invariants_to_its_executors(tmp_path: Path) -> None:
    """The same verdict on Spark (the settings reach the executors in the task's job)."""
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main,
        ["conform", str(GOLDEN / "Acks1Loss.itf.json"), "--variant", "acks=1", "--invariant",
         LOST, "--master", "local[1]", "--out", str(out)],
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    [row] = [json.loads(line) for line in (out / "results.json").read_text().splitlines()]
    assert (row["step"], row["invariant"]) == (acked_lost_at(trace("Acks1Loss")), LOST)


# ---------------------------------------------------------------- the checker


def test_an_unclean_election_violates_it_and_both_readers_agree(tlc: TlcOptions) -> None:
    """S12 conforms to its own variant (election=unclean), and with the invariant violates it
    where the unclean leader takes office without the acknowledged record; the Java reader and
    the TLA+ reader give the same row."""
    name = "S12_UncleanElection"
    item = (name, (GOLDEN / f"{name}.itf.json").read_text(encoding="utf-8"))
    java = CheckSettings(params_of(name, LOST), SPEC, tlc, build_reader(tlc.jar, java=tlc.java))
    assert java.params.variant.election == "unclean"
    [plain] = check_texts([item], replace(java, params=params_of(name)))
    assert plain.verdict == "conforms"
    [row] = check_texts([item], java)
    [same] = check_texts([item], replace(java, reader=None))
    lost = acked_lost_at(trace(name))
    assert (row.verdict, row.step, row.invariant) == ("violates", lost, LOST)
    assert row.action == trace(name).states[row.step].action
    assert _comparable(row) == _comparable(same)


def _comparable(row: TraceResult) -> dict[str, Any]:
    return {k: v for k, v in row.row().items() if k != "seconds"}


def test_every_trace_of_a_batch_gets_its_own_verdict(tlc: TlcOptions) -> None:
    """One batch (one TLC run, two replicas each) under acks=1 with the invariant: the loss
    violates it, a trace that keeps it conforms, and a trace whose last state was corrupted (a
    HW past the log) is rejected there as without invariants."""
    names = ["Acks1Loss", "WitnessStorageError", "WitnessCommit"]
    items = [(n, (GOLDEN / f"{n}.itf.json").read_text(encoding="utf-8")) for n in names]
    corrupt = json.loads(items[2][1])
    last = len(corrupt["states"]) - 1
    corrupt["states"][last]["hw"] = [7, 7]
    items[2] = ("corrupt", json.dumps(corrupt))
    settings = CheckSettings(params_of("Acks1Loss", LOST), SPEC, tlc)
    loss, kept, other = check_texts(items, settings)
    lost = acked_lost_at(trace("Acks1Loss"))
    assert (loss.verdict, loss.step, loss.invariant) == ("violates", lost, LOST)
    assert (kept.verdict, kept.invariant) == ("conforms", "")
    assert (other.verdict, other.step, other.variables, other.invariant) == (
        "violates", last, ["hw"], ""
    )  # fmt: skip


def test_a_step_no_action_explains_comes_first(tlc: TlcOptions) -> None:
    """S12 checked against the correct protocol (clean elections) with the invariant: the
    unclean election is not a behaviour there, and that step comes before the loss, so the row
    is the rejection, with the variables that differ, not the invariant."""
    name = "S12_UncleanElection"
    item = (name, (GOLDEN / f"{name}.itf.json").read_text(encoding="utf-8"))
    params = replace(params_of(name, LOST), variant=Variant())
    [row] = check_texts([item], CheckSettings(params, SPEC, tlc))
    lost = acked_lost_at(trace(name))
    assert row.verdict == "violates" and row.step is not None and lost is not None
    assert row.step < lost and row.invariant == "" and row.variables


# ---------------------------------------------------------------- the rule, without TLC


def test_the_names_are_the_trace_specs_and_cover_every_configs_invariants() -> None:
    """Every invariant a spec config checks (but TypeOK) can be checked on a trace."""
    known = invariant_names(SPEC)
    assert LOST in known and "TypeOK" not in known and len(known) == len(set(known))
    for cfg in sorted(SPEC.glob("*.cfg")):
        for name in _invariant_names(cfg):  # the config's INVARIANT(S), as Apalache reads them
            assert name in known or name == "TypeOK", (cfg.name, name)


def test_where_the_invariants_block_a_trace() -> None:
    """A print at the first step no clean branch reaches decides; prints only before it leave
    it to a run without invariants; none: a behaviour's diagnosis."""
    assert invariants.blocked_at({}, 4) is None
    sure = invariants.blocked_at({5: {"A"}, 2: {"B"}}, 4)
    assert sure == invariants.Blocked(5, frozenset({"A"}), 5, True)
    unsure = invariants.blocked_at({2: {"B"}, 3: {"A"}}, 4)
    assert unsure == invariants.Blocked(5, frozenset({"B"}), 2, False)
    assert invariants.blocked_at({0: {"A"}}, None) == invariants.Blocked(
        0, frozenset({"A"}), 0, True
    )
    assert invariants.settled(unsure, conforms=True, reached=None)
    assert invariants.settled(unsure, conforms=False, reached=5)
    assert not invariants.settled(unsure, conforms=False, reached=4)
    text, names = invariants.reason(sure, ["B", "A"], "Crash", '{"replica": 1}')
    assert (text, names) == ('invariant A is false after step 5 (Crash {"replica": 1})', "A")
    both = invariants.Blocked(0, frozenset({"A", "B"}), 0, True)
    assert invariants.reason(both, ["B", "A"], "Init", "{}") == (
        "invariants B, A are false in the initial state", "B, A"
    )  # fmt: skip
    assert invariants.config_lines([]) == []
    assert invariants.config_lines(["A", "B"]) == ['    TraceInvariants = {"A", "B"}']


def test_the_printed_invariants_are_read_short_or_wrapped() -> None:
    """TLC prints a long value over several lines; each print adds to its (trace, step)."""
    output = "\n".join([
        '<<"kreplica-invariant", 2, 5, {"AckedRecordsNeverLost"}>>',
        '<< "kreplica-invariant",',
        "   2,",
        "   5,",
        '   { "ConsistentReads",',
        '     "CommittedRecordsOnIsr" } >>',
        '<<"kreplica-reached", 2, 4>>',
    ])  # fmt: skip
    printed = tracecheck.parse_printed(output)
    assert printed.invariants == {
        (2, 5): {"AckedRecordsNeverLost", "ConsistentReads", "CommittedRecordsOnIsr"}
    }
    assert printed.reached == {2: 4}


@pytest.mark.parametrize("gets_past", [True, False])
def test_an_uncertain_block_is_settled_by_a_run_without_invariants(
    monkeypatch: pytest.MonkeyPatch, gets_past: bool
) -> None:
    """Branches that kept the invariant ended on a mismatch at step 5 and one broke it at
    step 2 (hidden variables): if the trace gets past step 5 as a behaviour, the invariant is
    violated at 5; if not, step 5 is a step no action explains."""
    name = "S1_HwTruncation"
    text = (GOLDEN / f"{name}.itf.json").read_text(encoding="utf-8")
    runs: list[tuple[bool, tuple[str, ...]]] = []

    def run_batch(traces: Any, params: SpecParams, *args: Any) -> tuple[Any, Printed]:
        diagnose = args[2]
        runs.append((diagnose, params.invariants))
        printed = Printed()
        if diagnose and params.invariants:
            printed.reached, printed.invariants = {1: 4}, {(1, 2): {LOST}}
        elif diagnose:
            printed.reached = {1: 9 if gets_past else 4}
        ok = SimpleNamespace(outcome=SimpleNamespace(verdict=Verdict.OK), message="", output="")
        return ok, printed

    monkeypatch.setattr(tracecheck, "run_batch", run_batch)
    settings = CheckSettings(SpecParams(invariants=(LOST,)), SPEC, TlcOptions())
    [row] = check_texts([(name, text)], settings)
    assert runs == [(True, (LOST,)), (True, ())]  # a batch of one: its diagnosis, then the settling
    action = trace(name).states[5].action
    assert (row.verdict, row.step, row.action) == ("violates", 5, action)
    if gets_past:
        assert row.invariant == LOST
        assert row.reason.startswith(f"no way of taking step 5 ({action} ")
        assert row.reason.endswith(f"keeps invariant {LOST} true: the ways that take it "
                                   "broke it after step 2")  # fmt: skip
    else:
        assert row.invariant == ""
        assert row.reason == f"{action} with these arguments is not enabled in the spec here"


@pytest.mark.tlc
def test_a_trace_alone_gets_the_row_it_gets_in_a_batch(tlc: TlcOptions) -> None:
    """A batch of one trace has its diagnostic run only (`check_prepared`): traces checked
    one by one get the rows they get checked together (a plain run, then the diagnosis of the
    rejected), the invariant on: an action not enabled, a successor that disagrees, a broken
    invariant, and a trace that conforms."""
    names = ["Acks1Loss", "BugHwNotClamped", "BugSkipSameLeaderTruncation", "WitnessCommit"]
    items = [(name, (GOLDEN / f"{name}.itf.json").read_text(encoding="utf-8")) for name in names]
    settings = CheckSettings(SpecParams(invariants=(LOST,)), SPEC, tlc, build_reader(tlc.jar), 0)
    together = check_texts(items, settings)
    alone = [row for item in items for row in check_texts([item], settings)]

    def bare(rows: list[TraceResult]) -> list[dict[str, Any]]:
        return [{k: v for k, v in r.row().items() if k != "seconds"} for r in rows]

    assert bare(alone) == bare(together)
    assert [(r.verdict, r.step, r.invariant) for r in together] == [
        ("violates", 1, ""), ("violates", 5, ""), ("violates", 7, LOST), ("conforms", None, "")
    ]  # fmt: skip
