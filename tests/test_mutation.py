"""Mutation testing (`kreplica mutate`): each operator makes the edit it names and nothing else,
the mutants and a seed's sample are the same every time, the overlay really runs the mutated
code, a breaking mutant is killed by a real (small) campaign, results resume, and bad input is
one stderr line and exit 2."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from cli_helpers import one_error_line
from click.testing import CliRunner

from kreplica.conformance.cli.main import main
from kreplica.conformance.mutation.campaign import (
    EQUIVALENT,
    ERROR,
    KILLED,
    STILLBORN,
    SURVIVED,
    Campaign,
    Outcome,
    _failed_stage,
    run_baseline,
    run_mutant,
    unmutated_replays,
)
from kreplica.conformance.mutation.engine import picked, plan, run, settings_of
from kreplica.conformance.mutation.operators import Mutant
from kreplica.conformance.mutation.overlay import build_overlay, overlay_env
from kreplica.conformance.mutation.results import Results, load_equivalent, markdown, tally
from kreplica.conformance.mutation.sites import all_mutants, impl_dir, mutants_of, mutated_source
from kreplica.conformance.tla.specs import resolve_spec_dir
from kreplica.conformance.validate.locks import lock_output

SNIPPET = textwrap.dedent(
    '''\
    """A module."""
    LIMIT = 3


    def f(a: int, b: int) -> int:
        """Docstring."""
        if a < b and not a == 0:  # keep me
            a += 1
        return max(a, b - 2)


    def __repr__(self) -> str:
        return f"{1 + 2}"
    '''
)


def _edits(source: str) -> dict[str, str]:
    """Mutant id -> the one changed line of its source."""
    found = {}
    for mutant in mutants_of("m.py", source):
        new = mutated_source(mutant, source).splitlines()
        old = source.splitlines()
        changed = [n for o, n in zip(old, new, strict=True) if o != n]
        found[mutant.id] = changed[0].strip()
    return found


def test_each_operator_makes_its_edit_and_keeps_the_rest_of_the_line() -> None:
    assert _edits(SNIPPET) == {
        "m.py:2:8:int-plus1": "LIMIT = 4",
        "m.py:2:8:int-minus1": "LIMIT = 2",
        "m.py:7:7:cmp-lt-le": "if a <= b and not a == 0:  # keep me",
        "m.py:7:7:and-or": "if a < b or not a == 0:  # keep me",
        "m.py:7:17:not-drop": "if a < b and a == 0:  # keep me",
        "m.py:7:21:cmp-eq-ne": "if a < b and not a != 0:  # keep me",
        "m.py:7:26:int-plus1": "if a < b and not a == 1:  # keep me",
        "m.py:7:26:int-minus1": "if a < b and not a == -1:  # keep me",
        "m.py:8:8:add-sub": "a -= 1",
        "m.py:8:8:stmt-pass": "pass",
        "m.py:8:13:int-plus1": "a += 2",
        "m.py:8:13:int-minus1": "a += 0",
        "m.py:9:11:max-min": "return min(a, b - 2)",
        "m.py:9:18:sub-add": "return max(a, b + 2)",
        "m.py:9:22:int-plus1": "return max(a, b - 3)",
        "m.py:9:22:int-minus1": "return max(a, b - 1)",
    }, "docstrings, annotations, __repr__ and f-strings are not mutated, nor is a module-level "
    "statement deleted"


def test_a_splice_is_parenthesised_when_precedence_needs_it() -> None:
    """`0 ** 2` with 0 made -1 must read `(-1) ** 2`: `-1 ** 2` is -(1 ** 2)."""
    source = "y = 0 ** 2\n"
    mutant = next(m for m in mutants_of("p.py", source) if m.operator == "int-minus1")
    assert mutated_source(mutant, source) == "y = (-1) ** 2\n"


def test_enumeration_is_deterministic_and_a_seed_gives_the_same_sample() -> None:
    first, second = all_mutants(), all_mutants()
    assert first == second
    assert len({m.id for m in first}) == len(first), "mutant ids are unique"
    assert plan(80, 1) == plan(80, 1)
    assert plan(80, 1) != plan(80, 2)
    assert plan(10, 1) == plan(80, 1)[:10], "a smaller sample is a prefix of a larger one"
    ids = [m.id for m in plan(3, 1)]
    assert [m.id for m in picked([ids[2], ids[0], ids[2]])] == [ids[2], ids[0]]
    assert settings_of(3, 1, Campaign(), ids)["mutants"] == ids
    assert "sample" not in settings_of(3, 1, Campaign(), ids)


def _mutant(file: str, operator: str, needle: str) -> Mutant:
    """The mutant of `file` with `operator` whose edited line holds `needle`."""
    source = (impl_dir() / file).read_text(encoding="utf-8")
    lines = source.splitlines()
    for mutant in mutants_of(file, source):
        if mutant.operator == operator and needle in lines[mutant.line - 1]:
            return mutant
    raise AssertionError(f"no {operator} mutant of {file} at {needle!r}")


def test_the_overlay_runs_the_mutated_module_and_the_real_rest(tmp_path: Path) -> None:
    """A leader's append moves the LEO to first + len(records) (5 + 2); its `+` made `-`
    (5 - 2) shows in a fresh process, and the real code still runs without the overlay."""
    mutant = _mutant("log.py", "add-sub", "self.next_offset = first + len(record_ids)")
    overlay = build_overlay(mutant, tmp_path / "overlay")
    probe = textwrap.dedent(
        """\
        import kreplica.impl.log as log, kreplica.impl.partition as partition
        from kreplica.impl.messages import TopicPartition
        l = log.Log(TopicPartition("t", 0))
        l.truncate_fully_and_start_at(5)
        l.append_as_leader((1, 2), 0)
        print(l._leo(), log.__file__, partition.__file__)
        """
    )
    out = subprocess.run([sys.executable, "-c", probe], env=overlay_env(overlay),
                         capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    assert out[0] == "3", out
    assert out[1] == str(overlay / "kreplica/impl/log.py")
    assert Path(out[2]).resolve() == impl_dir() / "partition.py"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True).stdout.split()[0] == "7"  # fmt: skip


def test_an_obviously_breaking_mutant_is_killed_by_a_real_campaign(tmp_path: Path) -> None:
    """The leader's high watermark never moves (its assignment deleted): acks=all produces
    never complete, or conformance sees a HW the spec would have advanced."""
    mutant = _mutant("log.py", "stmt-pass", "self.high_watermark = new_high_watermark")
    outcome = run_mutant(mutant, Campaign(examples=15, steps=30, time_limit=120), tmp_path)
    assert outcome.verdict == KILLED, outcome
    assert outcome.by in ("fuzz", "conformance")
    assert list(tmp_path.iterdir()) == [], "the mutant's scratch folder is removed"


def test_a_mutant_that_cannot_be_made_is_stillborn(tmp_path: Path) -> None:
    broken = Mutant("log.py", 1, 0, "nothing-here", "no such site")
    outcome = run_mutant(broken, Campaign(time_limit=60), tmp_path)
    assert outcome.verdict == STILLBORN and "cannot make the mutant" in outcome.detail


def test_results_are_written_after_each_mutant_and_a_rerun_skips_them(tmp_path: Path) -> None:
    campaign = Campaign(examples=1, steps=1, time_limit=60)
    mutants = plan(3, 7)
    settings = settings_of(3, 7, campaign)
    results = Results.open(tmp_path, settings)
    results.add(Outcome(mutants[0].id, KILLED, by="fuzz", description=mutants[0].description))
    results.add(Outcome(mutants[1].id, SURVIVED, description=mutants[1].description))
    results.add(Outcome(mutants[2].id, ERROR, detail="conform exit 2"))
    saved = json.loads((tmp_path / "results.json").read_text())
    assert [o["mutant"] for o in saved["outcomes"]] == [m.id for m in mutants]
    resumed = Results.open(tmp_path, settings)
    equivalent = {m.id: "argued equivalent for this test" for m in mutants[1:]}
    ran: list[str] = []
    outcomes = run(
        mutants, resumed, campaign, equivalent, on_outcome=lambda o: ran.append(o.mutant)
    )
    assert ran == [mutants[2].id], "the two done are skipped; an error is judged again"
    assert [o.verdict for o in outcomes] == [KILLED, EQUIVALENT, EQUIVALENT], (
        "a survivor argued equivalent after its run is reported equivalent"
    )
    assert len(json.loads((tmp_path / "results.json").read_text())["outcomes"]) == 3


def test_the_shipped_equivalent_file_reads(tmp_path: Path) -> None:
    known = {m.id for m in all_mutants()}
    for mutant_id, argument in load_equivalent().items():
        assert mutant_id in known, f"{mutant_id}: no such mutant (the file changed?)"
        assert len(argument) > 40
        for cited in re.findall(r"\b[a-z_]+\.py:\d+:\d+:[a-z0-9-]+", argument):
            assert cited in known, f"{mutant_id} cites {cited}: no such mutant"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sample", "0"], "--sample 0"),
        (["--equivalent", "{tmp}/missing.toml"], "cannot read"),
        (["--equivalent", "{tmp}/bad.toml"], "not TOML"),
        (["--out", "{tmp}/a-file"], "is not a directory"),
        (["--out", "{tmp}/other"], "other settings"),
        (["--jobs", "0"], "--jobs"),
        (["--examples", "0"], "--examples"),
        (["--sample", "1", "--steps", "3", "--out", "{tmp}/default-size"], "other settings"),
        (["--variants", "truncation=hw,election=bogus"], "--variants election=bogus"),
        (["--sample", "1", "--variants", "", "--out", "{tmp}/default-size"], "other settings"),
        (["--mutant", "log.py:1:0:nope"], "--mutant log.py:1:0:nope"),
        (["--mutant", "log.py:289:11:cmp-gt-ge", "--out", "{tmp}/default-size"], "other settings"),
    ],
    ids=[
        "sample-0",
        "equivalent-missing",
        "equivalent-not-toml",
        "out-is-a-file",
        "out-other-settings",
        "jobs-0",
        "examples-0",
        "another-campaign-size",
        "unknown-variant",
        "other-variants",
        "unknown-mutant",
        "picked-into-a-sample",
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "bad.toml").write_text("[equivalent\n")
    (tmp_path / "a-file").write_text("")
    Results.open(tmp_path / "other", {"sample": 1}).add(Outcome("x.py:1:0:op", KILLED))
    default_size = settings_of(1, 1, Campaign())  # a run of 500 runs of 50 steps, resumed smaller
    Results.open(tmp_path / "default-size", default_size).add(Outcome("x.py:1:0:op", KILLED))
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    result = CliRunner().invoke(main, ["mutate", *args])
    assert result.exit_code == 2, result.output
    line = one_error_line(result)
    assert line.startswith("kreplica: error:") and message in line


def test_a_second_run_into_the_same_out_fails_at_once(tmp_path: Path) -> None:
    out = tmp_path / "seed-1"
    holder = lock_output(tmp_path / "seed-1.lock", out, "mutate")  # a run in progress
    try:
        result = CliRunner().invoke(main, ["mutate", "--sample", "1", "--out", str(out)])
    finally:
        os.close(holder)
    assert result.exit_code == 2, result.output
    assert f"in use by another kreplica mutate (pid {os.getpid()})" in one_error_line(result)
    assert not (out / "results.json").exists()


def test_mutate_help_lists_the_exit_codes() -> None:
    result = CliRunner().invoke(main, ["mutate", "--help"])
    assert result.exit_code == 0
    for line in ("0  every sampled mutant", "1  the unmutated", "2  bad input", "130  interrupted"):
        assert line in result.output


def test_a_kill_in_a_variants_campaign_counts_for_its_checker() -> None:
    """`by` names the variant's campaign; the tally counts it with its checker, and apart."""
    outcomes = [
        Outcome("a.py:1:0:op", KILLED, by="fuzz"),
        Outcome("a.py:2:0:op", KILLED, by="conformance (truncation=hw)"),
        Outcome("a.py:3:0:op", SURVIVED),
    ]
    t = tally(outcomes)
    assert (t.by, t.in_variants, t.rate) == ({"fuzz": 1, "conformance": 1}, 1, 2 / 3)
    assert "| (of these, in a variant's campaign) | (1) |" in markdown(outcomes, {})


def test_a_mutant_of_kip101_code_is_killed_in_the_kip101_stage(tmp_path: Path) -> None:
    """A KIP-101 leader answers OffsetsForLeaderEpoch without an epoch, and the follower
    truncates to the offset it gives, done (R6 case (b)): code only `truncation=kip101` runs. The
    correct protocol's stage cannot see a mutant of it, the variant's conformance does (the
    follower asks again where the spec's follower fetches)."""
    mutant = _mutant("fetcher.py", "true-false", "min(leader_epoch_offset.end_offset, replica_end")
    campaign = Campaign(examples=60, steps=40, time_limit=300, variants=("truncation=kip101",))
    outcome = run_mutant(mutant, campaign, tmp_path)
    assert (outcome.verdict, outcome.by) == (KILLED, "conformance (truncation=kip101)"), outcome
    assert outcome.exits["fuzz"] == outcome.exits["conform"] == 0


def test_without_variants_the_default_campaign_of_stages_kills_it_in_its_stage(
    tmp_path: Path,
) -> None:
    """`--variants ''`: one `kreplica fuzz` of the default campaign's stages (60 runs each) and
    one `conform --as-recorded`, which checks the truncation=kip101 stage's traces under that
    variant and sees the mutant as the stage of its own did (the test above)."""
    mutant = _mutant("fetcher.py", "true-false", "min(leader_epoch_offset.end_offset, replica_end")
    campaign = Campaign(examples=60, steps=40, time_limit=300, variants=())
    outcome = run_mutant(mutant, campaign, tmp_path)
    assert (outcome.verdict, outcome.by) == (KILLED, "conformance (truncation=kip101)"), outcome
    assert outcome.exits == {"fuzz": 0, "conform": 1}


def test_a_failing_stage_is_read_from_the_fuzz_summary() -> None:
    """A kill in a stage of the default campaign names the stage: from the fuzz summary's
    stage line, or from the rejected trace's recorded variant."""
    summary = "  stage correct: invariants and Kafka's rules; 60 runs; clean\n" + (
        "  stage isr=alter-partition: invariants and Kafka's rules; 3 runs; failed: TypeOK"
    )
    assert _failed_stage(summary) == " (isr=alter-partition)"
    assert _failed_stage("  stage correct: x; failed: TypeOK") == ""
    assert _failed_stage("violation TypeOK: no stages here") == ""


def test_a_mutant_of_alter_partition_code_is_killed_by_that_variant_s_fuzzer(
    tmp_path: Path,
) -> None:
    """The maximal ISR (a proposed ISR change pending, KIP-497) is read only under
    isr=alter-partition, which the spec does not model: that stage is the fuzzer's checks
    alone, with no corpus and no conform, and it sees the mutant where the correct protocol's
    stage cannot."""
    mutant = _mutant("partition.py", "stmt-pass", "pending = self.pending_isr")
    campaign = Campaign(examples=30, steps=40, time_limit=300, variants=("isr=alter-partition",))
    outcome = run_mutant(mutant, campaign, tmp_path)
    assert (outcome.verdict, outcome.by) == (KILLED, "fuzz (isr=alter-partition)"), outcome
    assert outcome.exits["fuzz"] == outcome.exits["conform"] == 0
    assert "conform (isr=alter-partition)" not in outcome.exits


def test_the_unmutated_implementation_passes_a_small_campaign() -> None:
    baseline = run_baseline(Campaign(examples=3, steps=10, time_limit=300, variants=()))
    assert baseline.verdict == SURVIVED, baseline.detail


def test_a_campaign_the_unmutated_implementation_fails_runs_no_mutant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Against a spec whose Init no run starts from, even impl/ itself "is killed" by
    conformance: mutate stops before the first mutant, exit 1, and writes no outcome."""
    spec = tmp_path / "spec"
    shutil.copytree(resolve_spec_dir(None), spec)
    module = spec / "KafkaReplication.tla"
    text = module.read_text()
    init_hw = "    /\\ hw = [r \\in Replicas |-> 0]\n"
    assert init_hw in text
    module.write_text(text.replace(init_hw, init_hw.replace("0]", "1]")))
    monkeypatch.setenv("KREPLICA_SPEC_DIR", str(spec))
    out = tmp_path / "out"
    args = ["mutate", "--sample", "2", "--examples", "2", "--steps", "5", "--variants", ""]
    result = CliRunner().invoke(main, [*args, "--out", str(out)])
    assert result.exit_code == 1, result.output
    assert "the unmutated implementation fails the campaign (conformance" in result.stderr
    assert not (out / "results.json").exists(), "no mutant has an outcome"


def test_a_failure_the_unmutated_implementation_replays_is_not_the_mutants(
    tmp_path: Path,
) -> None:
    """A mutant can change only which steps the fuzzer takes (the tick to the next deadline
    reads the purgatory): a failure found then may be the implementation's own. The check
    replays it on the unmutated implementation: a saved schedule that shows its recorded
    violation, or a corpus trace reproduced state for state, is not the mutant's; a schedule
    whose recorded violation the implementation does not show is."""
    regressions = Path(__file__).parent.parent / "traces" / "regressions"
    [saved] = sorted(regressions.glob("bug-early-ack-*.schedule.json"))
    deadline = time.monotonic() + 120
    assert unmutated_replays(str(saved), tmp_path, deadline)
    other = json.loads(saved.read_text())
    other["violation"] = {"invariant": "FollowersMatchLeader", "reason": "not this one"}
    edited = tmp_path / "edited.schedule.json"
    edited.write_text(json.dumps(other))
    assert not unmutated_replays(str(edited), tmp_path, deadline)
    corpus = tmp_path / "corpus.jsonl"
    result = CliRunner().invoke(
        main, ["fuzz", "--examples", "3", "--steps", "10", "--corpus", str(corpus),
               "--out", str(tmp_path / "fuzz")],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert unmutated_replays(f"{corpus}:1", tmp_path, deadline)
