"""Guided fuzzing: the abstract states, the rarity score, and `--guided` reaching Hypothesis."""

from __future__ import annotations

from pathlib import Path

from cli_helpers import fuzz
from hypothesis import Phase

from kreplica.conformance.bridge.recorder import SpecRecorder
from kreplica.conformance.fuzz.campaign import fuzz_settings, run_fuzz
from kreplica.conformance.fuzz.guidance import Coverage, abstract_state, joint_curve
from kreplica.conformance.fuzz.setup import FuzzSetup
from kreplica.conformance.replay.schedule import TP
from kreplica.impl.steps import Deliver, DoWork, Produce, Step, Tick


def _states(steps: list[Step]) -> list[dict[str, object]]:
    """The spec states of the default cluster after each of `steps`."""
    cluster = FuzzSetup().schedule().cluster()
    recorder = SpecRecorder(cluster, TP, {})
    states = [recorder.state]
    for step in steps:
        recorder.apply(step)
        states.append(recorder.state)
    return states


def test_a_lagging_follower_is_another_abstract_state() -> None:
    produce = Produce(TP, (1,), -1, 1)
    first = _states([])[0]
    states = _states([produce, Deliver(-1, 1, 0)])
    assert abstract_state(first) == abstract_state(_states([])[0])  # a function of the state
    assert abstract_state(states[-1]) != abstract_state(first)  # the leader's LEO moved ahead
    _, views, unacked = abstract_state(states[-1])
    leader, follower = views[0], views[1]
    assert leader[1] == "leader" and follower[1] == "follower"
    assert follower[4] == -1, "the follower's LEO is below its leader's"
    assert not unacked


def test_the_abstraction_forgets_offsets_and_record_ids() -> None:
    """Two records instead of one: the same relations, the same abstract state."""
    one = _states([Produce(TP, (1,), -1, 1), Deliver(-1, 1, 0)])[-1]
    two = _states(
        [Produce(TP, (1,), -1, 1), Deliver(-1, 1, 0), Produce(TP, (2,), -1, 1), Deliver(-1, 1, 0)]
    )[-1]
    assert one["log"] != two["log"]
    assert abstract_state(one) == abstract_state(two)


def test_rarity_rewards_what_the_campaign_has_not_seen() -> None:
    coverage = Coverage()
    states = [abstract_state(s) for s in _states([DoWork(2, 1), Tick(1_000)])]
    assert coverage.rarity(states) == len(set(states))
    assert coverage.observe(states) == len(set(states))  # scored before it is counted
    assert coverage.rarity(states) == len(set(states)) / 2
    assert coverage.curve[-1][1] == len(set(states))


def test_guided_settings_run_hypothesis_target_phase() -> None:
    assert Phase.target in fuzz_settings(10, 10, guided=True).phases
    assert Phase.target not in fuzz_settings(10, 10).phases


def test_a_guided_campaign_counts_coverage_after_every_run() -> None:
    result = run_fuzz(FuzzSetup(guided=True), 40, 30, seed_value=3, shrink=False)
    assert result.failure is None
    curve = result.stats.coverage.curve
    assert len(curve) == result.stats.runs
    counts = [n for _, n in curve]
    assert counts == sorted(counts) and counts[-1] == len(result.stats.coverage.seen) > 10


def test_the_cli_takes_guided_and_names_it(tmp_path: Path) -> None:
    out = str(tmp_path / "out")
    result = fuzz("--guided", "--examples", "5", "--steps", "10", "--no-faults", "--out", out)
    assert result.exit_code == 0, result.output
    assert FuzzSetup(guided=True).name(0).endswith("-guided-s0")


def test_the_coverage_of_campaigns_one_after_the_other_counts_each_state_once() -> None:
    """`joint_curve`: a state is counted when the first campaign that reached it did, each
    campaign's times shifted by when it started."""
    first, second = Coverage(), Coverage()
    first.first_seen.update({("a",): 1.0, ("b",): 2.0})
    second.first_seen.update({("b",): 0.5, ("c",): 1.0})
    assert joint_curve([(0.0, first), (3.0, second)]) == [(1.0, 1), (2.0, 2), (4.0, 3)]
    assert joint_curve([(0.0, second), (1.0, first)]) == [(0.5, 1), (1.0, 2), (2.0, 3)]
