"""`kreplica fuzz`'s default campaign of stages: the correct protocol and every protocol variant
the implementation runs with code of its own, sharing --examples, each judged by the checks
that hold for it; a stage is the campaign `kreplica fuzz --variant V` runs with those checks;
the campaign stops at its first failure; a swarm of stages is its seeds' campaigns one after
the other; `kreplica conform --as-recorded` checks a mixed corpus, each trace under its own
variant."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import fuzz, one_error_line
from click.testing import CliRunner

from kreplica.conformance.cli.fuzz import staged_summary
from kreplica.conformance.cli.main import main
from kreplica.conformance.fuzz.campaign import FuzzResult, run_fuzz
from kreplica.conformance.fuzz.corpus_writer import CorpusWriter
from kreplica.conformance.fuzz.guided import ROUND_RUNS, Yields, arms, fault_mixes, run_guided
from kreplica.conformance.fuzz.runs import RunStats
from kreplica.conformance.fuzz.setup import FuzzSetup
from kreplica.conformance.fuzz.stages import (
    CORRECT,
    STAGE_NAMES,
    UNSAFE,
    Stage,
    parse_stages,
    plan,
    rerun_options,
    run_stages,
    shares,
)
from kreplica.conformance.fuzz.swarm import SeedCampaign, Swarm, run_swarm, taken
from kreplica.conformance.fuzz.targets import TARGETS
from kreplica.conformance.tla.itf import iter_jsonl_traces
from kreplica.impl.variants import (
    DIMENSIONS,
    NOT_IMPLEMENTED,
    RUNS_AS_DEFAULT,
    Variant,
    not_in_spec,
    parse_variant,
)

ROOT = Path(__file__).resolve().parent.parent
EARLY_ACK = FuzzSetup(variant=parse_variant(bugs=["early-ack"]), unclean=False)
"""A set-up that fails within a few runs (a stage that fails, for the tests that need one)."""


def test_every_variant_of_the_registry_is_a_stage_or_left_out_for_a_reason() -> None:
    """A value added to the registry is a stage unless it is not implemented or runs the
    default's code under another name."""
    left_out = {**NOT_IMPLEMENTED, **RUNS_AS_DEFAULT}
    for dim, values in DIMENSIONS.items():
        for value in values[1:]:
            word = f"{dim}={value}"
            assert (word in STAGE_NAMES) != (value in left_out.get(dim, ())), word
    assert STAGE_NAMES[0] == CORRECT
    assert {t.word for t in TARGETS if "=" in t.word} == UNSAFE
    assert set(STAGE_NAMES) > UNSAFE


def test_each_stage_is_judged_by_the_checks_that_hold_for_it() -> None:
    stages = {s.name: s for s in plan(FuzzSetup(), STAGE_NAMES, 70)}
    for name, stage in stages.items():
        s = stage.setup
        if name in UNSAFE:  # TLC breaks the spec's invariants under it: Kafka's rules alone
            assert (s.invariants, s.rules) == (False, True), name
        else:  # the correct protocol, and a safe variant the spec does not model
            assert s.invariants, name
        assert stage.corpus == (not not_in_spec(s.variant)), name
    assert stages["isr=alter-partition"].setup.invariants
    assert not stages["isr=alter-partition"].corpus
    # --rules-only and --no-invariants hold for every stage
    for base in (FuzzSetup(invariants=False, rules=True), FuzzSetup(invariants=False)):
        for stage in plan(base, STAGE_NAMES, 70):
            assert (stage.setup.invariants, stage.setup.rules) == (False, base.rules)


def test_the_stages_share_the_runs_and_the_time() -> None:
    assert shares(3000, 7) == (429, 429, 429, 429, 428, 428, 428)
    assert shares(3, 7) == (1, 1, 1, 0, 0, 0, 0)
    stages = plan(FuzzSetup(), STAGE_NAMES, 3000, 70.0)
    assert sum(s.examples for s in stages) == 3000
    assert {s.time_limit for s in stages} == {70.0 / len(STAGE_NAMES)}


def test_stages_are_picked_by_name_in_the_campaigns_order() -> None:
    assert parse_stages("all") == STAGE_NAMES
    assert parse_stages("acks=1, correct") == ("correct", "acks=1")
    with pytest.raises(Exception, match="unknown stage 'elr=on'"):
        parse_stages("correct,elr=on")


def test_the_default_campaign_takes_each_stage(tmp_path: Path) -> None:
    corpus = tmp_path / "runs.jsonl"
    args = ["--examples", "14", "--steps", "20", "--corpus", str(corpus)]
    result = fuzz(*args, "--out", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    assert f"kreplica fuzz: {len(STAGE_NAMES)} stages sharing 14 runs, seed 0" in result.stdout
    for name in STAGE_NAMES:
        checks = "Kafka's rules (invariants" if name in UNSAFE else "invariants and Kafka's rules"
        assert f"  stage {name}: {checks}" in result.stdout, name
    assert "no invariant failed in the stages that check them" in result.stdout
    found = list(iter_jsonl_traces(corpus))
    by_variant = {t.meta["variant"]: t for t in found}
    modelled = {"default", *(n for n in STAGE_NAMES[1:] if not not_in_spec(parse_variant([n])))}
    assert set(by_variant) == modelled  # isr=alter-partition writes no trace
    for label, trace in by_variant.items():
        assert trace.meta["invariants"] == (label not in UNSAFE)
        assert trace.meta["rules"] is True
    assert "not the runs of isr=alter-partition" in result.stdout
    assert f"kreplica conform {corpus} --as-recorded" in result.stdout


def test_a_stage_runs_what_its_variants_campaign_runs(tmp_path: Path) -> None:
    """The staged corpus is, byte for byte, the stages' own campaigns' corpora one after the
    other: `kreplica fuzz --variant V --rules-only --examples SHARE --seed S` for each."""
    staged = tmp_path / "staged.jsonl"
    args = ["--examples", "9", "--steps", "15", "--seed", "4"]
    result = fuzz(*args, "--stages", "correct,truncation=hw,acks=1", "--corpus", str(staged))
    assert result.exit_code == 0, result.output
    alone = tmp_path / "alone.jsonl"
    for stage in plan(FuzzSetup(), ("correct", "truncation=hw", "acks=1"), 9):
        words = rerun_options(stage, 4).split()
        done = fuzz(*words, "--steps", "15", "--corpus", str(alone), "--out", str(tmp_path / "o"))
        assert done.exit_code == 0, done.output
    assert staged.read_bytes() == alone.read_bytes()


def test_a_campaign_of_stages_stops_at_its_first_failure(tmp_path: Path) -> None:
    stages = (
        Stage("first", FuzzSetup(), 3),
        Stage("second", EARLY_ACK, 40),
        Stage("third", FuzzSetup(), 3),
    )
    result = run_stages(stages, 30, seed_value=1, shrink=False)
    assert [r.setup for r in result.results] == [FuzzSetup(), EARLY_ACK]
    assert result.failed_stage == stages[1] and result.not_run == stages[2:]
    assert result.failure is result.results[1] and result.failure.failure is not None
    assert result.stats.runs == sum(r.stats.runs for r in result.results)
    lines = staged_summary(result, 46)
    assert "  stage third: not run (the campaign stopped at its first failure)" in lines
    assert any(line.startswith("violation ClientAnswersMatchLeader") for line in lines)
    assert any(
        line.startswith("  again, that campaign alone: kreplica fuzz --bug early-ack")
        for line in lines
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--stages", "correct", "--variant", "acks=1"], "--stages picks stages of the default"),
        (["--stages", "correct", "--bug", "early-ack"], "--stages picks stages of the default"),
        (["--stages", "elr=on"], "--stages: unknown stage 'elr=on'"),
        (["--stages", ","], "--stages: no stage named"),
    ],
)
def test_bad_stages_are_one_line_and_exit_2(args: list[str], message: str, tmp_path: Path) -> None:
    result = fuzz(*args, "--examples", "1", "--out", str(tmp_path / "out"))
    assert result.exit_code == 2, result.output
    assert message in one_error_line(result)


def _campaign(result: FuzzResult) -> SeedCampaign:
    return SeedCampaign(result)


def test_a_swarm_counts_each_seeds_stages_up_to_its_first_failure() -> None:
    """`kreplica fuzz --seed S` stops at its first failing stage; so does what a swarm takes of
    that seed's tasks, which all ran."""
    ok = FuzzResult(FuzzSetup(), 0, 1, 1, RunStats(), 0.0)
    bad = FuzzResult(EARLY_ACK, 0, 1, 1, RunStats(), 0.0, failure=object())  # type: ignore[arg-type]
    tasks = [_campaign(r) for r in (ok, bad, ok, ok, ok, ok)]
    kept = taken(tasks, 3)
    assert [c.result for c in kept] == [ok, bad, ok, ok, ok]


def test_a_swarm_of_stages_is_its_seeds_campaigns_one_after_the_other(tmp_path: Path) -> None:
    """Each (seed, stage) a Spark task; the corpus, the counters and the reported failure are
    those of `run_stages` for each seed in turn, whichever task ends first (seed 0's second
    stage fails at once; seed 1's too; the third stage's tasks of both run, and are set
    aside)."""
    stages = (
        Stage("first", FuzzSetup(), 4),
        Stage("second", EARLY_ACK, 30),
        Stage("third", FuzzSetup(), 4),
    )
    corpus = tmp_path / "swarm.jsonl"
    swarm = Swarm(FuzzSetup(), (0, 1), 38, 25, "local[2]", shrink=False, stages=stages)
    with CorpusWriter(corpus) as writer:
        result = run_swarm(swarm, writer)
    alone = tmp_path / "alone.jsonl"
    locals_ = []
    with CorpusWriter(alone) as writer:
        for seed in (0, 1):
            locals_.append(run_stages(stages, 25, seed, shrink=False, corpus=writer))
    assert corpus.read_bytes() == alone.read_bytes()
    expected = [r for staged in locals_ for r in staged.results]
    assert [(r.seed, r.setup) for r in result.results] == [(r.seed, r.setup) for r in expected]
    assert result.stats.runs == sum(r.stats.runs for r in expected)
    assert result.set_aside == 2
    reported = result.failure
    assert reported is not None and reported.failure is not None and reported.seed == 0
    first = locals_[0].failure
    assert first is not None and first.failure is not None
    assert (reported.failure.invariant, reported.failure.steps) == (
        first.failure.invariant,
        first.failure.steps,
    )


@pytest.mark.tlc
def test_conform_as_recorded_checks_each_trace_under_its_own_variant(tmp_path: Path) -> None:
    """A corpus of the default campaign's stages conforms, each trace under the variant it
    records; checked against the correct protocol instead, the variants' traces are noted. A
    trace of a variant the spec does not model is an error row under --as-recorded."""
    corpus = tmp_path / "runs.jsonl"
    result = fuzz("--examples", "21", "--steps", "25", "--seed", "2", "--corpus", str(corpus))
    assert result.exit_code == 0, result.output
    common = ["--no-spark", "--workers", "1", "--why", "0"]
    done = CliRunner().invoke(
        main, ["conform", str(corpus), *common, "--as-recorded", "--out", str(tmp_path / "a")]
    )
    assert done.exit_code == 0, done.output
    rows = [json.loads(x) for x in (tmp_path / "a" / "results.json").read_text().splitlines()]
    assert len(rows) == len(list(iter_jsonl_traces(corpus)))
    assert all(r["verdict"] == "conforms" and r["note"] == "" for r in rows)
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert manifest["as_recorded"] is True
    CliRunner().invoke(main, ["conform", str(corpus), *common, "--out", str(tmp_path / "d")])
    rows = [json.loads(x) for x in (tmp_path / "d" / "results.json").read_text().splitlines()]
    assert any(r["note"].startswith("recorded with variant truncation=hw") for r in rows)
    alter = tmp_path / "alter.jsonl"
    args = ["--variant", "isr=alter-partition", "--examples", "2", "--steps", "10"]
    assert fuzz(*args, "--corpus", str(alter)).exit_code == 0
    done = CliRunner().invoke(
        main, ["conform", str(alter), *common, "--as-recorded", "--out", str(tmp_path / "x")]
    )
    assert done.exit_code == 2, done.output
    rows = [json.loads(x) for x in (tmp_path / "x" / "results.json").read_text().splitlines()]
    assert rows and all("which the spec does not model" in r["reason"] for r in rows)


def test_the_correct_stage_alone_is_todays_default_campaign(tmp_path: Path) -> None:
    """`--stages correct` runs the correct protocol's campaign of all the runs, as `kreplica
    fuzz` did before it had stages, with its one-campaign summary."""
    corpus = tmp_path / "runs.jsonl"
    result = fuzz(
        "--stages", "correct", "--examples", "6", "--steps", "15", "--corpus", str(corpus)
    )
    assert result.exit_code == 0, result.output
    assert "kreplica fuzz: variant default, 3 replicas" in result.stdout
    alone = tmp_path / "alone.jsonl"
    with CorpusWriter(alone) as writer:
        run_fuzz(FuzzSetup(), 6, 15, 0, corpus=writer)
    assert corpus.read_bytes() == alone.read_bytes()
    assert Variant().is_safe


def test_a_default_swarm_of_stages_runs_from_the_command_line(tmp_path: Path) -> None:
    """`kreplica fuzz --master local[2] --seeds 2`: every stage of both seeds, the totals of
    `kreplica fuzz --seed 0` and `--seed 1`."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, "-m", "kreplica", "fuzz", "--master", "local[2]", "--seeds", "2",
         "--examples", "7", "--steps", "15", "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=300, env=env, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert f"{len(STAGE_NAMES)} stages (correct, " in done.stdout
    assert "a Spark task per seed and stage" in done.stdout
    runs = 0
    for seed in ("0", "1"):
        alone = fuzz("--examples", "7", "--steps", "15", "--seed", seed)
        runs += int(alone.stdout.split("\nruns ")[1].split(",")[0].replace(",", ""))
    assert f"runs {runs:,}, " in done.stdout


def test_guidance_arms_are_each_stage_with_each_fault_mix() -> None:
    """Every fault first, then one family at a time where that is narrower; the first sweep
    reaches every stage with every fault before any narrower mix."""
    assert [name for name, _ in fault_mixes(FuzzSetup())] == [
        "", "process faults", "elections", "network faults",
    ]  # fmt: skip
    assert fault_mixes(FuzzSetup(only_faults=frozenset({"elect"}))) == [("", {"elect"})]
    mixed = FuzzSetup(only_faults=frozenset({"crash", "drop"}))
    assert fault_mixes(mixed)[1:] == [("process faults", {"crash"}), ("network faults", {"drop"})]
    stages = plan(FuzzSetup(), STAGE_NAMES, 70)
    pool = arms(stages)
    assert len(pool) == 4 * len(stages)
    assert [a.name for a in pool[: len(stages)]] == list(STAGE_NAMES)
    assert all(not a.setup.only_faults for a in pool[: len(stages)])


def test_guidance_sweeps_then_follows_the_yield_and_explores() -> None:
    yields = Yields([0] * 3, [0.0] * 3)
    assert [yields.next_arm(n) for n in range(3)] == [0, 1, 2]
    yields.count(0, {("a",), ("b",)}, 2)  # 1 new state per run
    yields.count(1, {("a",), ("c",), ("d",), ("e",)}, 1)  # 3 new
    yields.count(2, {("b",)}, 1)  # nothing new
    assert yields.value == [1.0, 3.0, 0.0]
    assert [yields.next_arm(n) for n in range(3, 7)] == [1, 1, 1, 0]  # the fourth explores
    yields.count(1, {("a",)}, 1)  # its yield halves with a round that found nothing
    assert yields.value[1] == 1.5


def test_a_guided_campaign_depends_on_its_seed_alone(tmp_path: Path) -> None:
    stages = plan(FuzzSetup(), ("correct", "truncation=hw"), 3 * ROUND_RUNS)
    corpora = []
    for name in ("one", "two"):
        path = tmp_path / f"{name}.jsonl"
        with CorpusWriter(path) as writer:
            result = run_guided(stages, 15, 5, shrink=False, corpus=writer)
        corpora.append(path.read_bytes())
        assert [r.seed for r in result.results] == [50000, 50001, 50002]
        assert [s.name for s in result.runs_of] == ["correct", "truncation=hw", "correct"]
    assert corpora[0] == corpora[1]


def test_a_guided_failure_is_its_rounds_campaign(tmp_path: Path) -> None:
    """The failing round is `kreplica fuzz` of its stage and fault mix, its runs and its
    seed: the command the summary prints finds the same failure."""
    stages = (Stage("ok", FuzzSetup(), 2 * ROUND_RUNS), Stage("bug", EARLY_ACK, ROUND_RUNS))
    result = run_guided(stages, 30, 1, shrink=False)
    reported, failed = result.failure, result.failed_stage
    assert reported is not None and reported.failure is not None and failed is not None
    assert failed.name == "bug" and reported.seed == 10001
    again = run_fuzz(failed.setup, failed.examples, 30, reported.seed, shrink=False)
    assert again.failure is not None and again.failure.steps == reported.failure.steps
    words = rerun_options(failed, reported.seed)
    assert words.startswith("--bug early-ack --no-unclean") and "--seed 10001" in words


def test_guided_is_not_a_swarm_option(tmp_path: Path) -> None:
    result = fuzz("--guided", "--master", "local[1]", "--out", str(tmp_path / "out"))
    assert result.exit_code == 2, result.output
    assert "give --master or --guided, not both" in one_error_line(result)
