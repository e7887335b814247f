"""The fuzzer under isr=alter-partition (KIP-497), which the spec does not model: the recorder
follows the ISR when the controller's answer lands, and the ISR rules are judged where the
leader decides (conformance/judges/checked_steps.py, lag_times.py; docs/fuzzing.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kreplica.conformance.bridge.projection import CLIENT, CONTROLLER
from kreplica.conformance.bridge.recorder import SpecRecorder
from kreplica.conformance.cli.main import main
from kreplica.conformance.fuzz.choices import CHOICES
from kreplica.conformance.fuzz.setup import FuzzSetup
from kreplica.conformance.judges.checked_steps import Judge, apply_checked
from kreplica.conformance.replay.schedule import TP
from kreplica.conformance.replay.trace import ALTER_PARTITION_DELIVERIES
from kreplica.conformance.tla.vocabulary import ACTION_ARGS, IMPL_ONLY_ACTIONS
from kreplica.impl.messages import AlterPartitionRequest, AlterPartitionResponse
from kreplica.impl.partition import Partition
from kreplica.impl.steps import Deliver, DoWork, Drop, Produce, ShrinkIsr, Step, Tick
from kreplica.impl.variants import parse_variant

LAG_MS = 30_001


def recorder() -> Judge:
    """The fuzzer's cluster (brokers 1..3, broker 1 leading) under isr=alter-partition."""
    setup = FuzzSetup(variant=parse_variant(["isr=alter-partition"]))
    return Judge(SpecRecorder(setup.schedule().cluster(), TP, {}))


def checked(judged: Judge, *steps: Step) -> None:
    for step in steps:
        assert apply_checked(judged, step) is None, step


def test_a_shrink_is_proposed_then_lands_with_the_answer() -> None:
    """Followers 2 and 3 never fetch: the isr-expiration task proposes ISR {1} (judged by the
    proposal), the state keeps ISR {1, 2, 3} until the controller's answer lands, and the two
    steps the spec lacks are recorded under their own names."""
    judged = recorder()
    checked(judged, Tick(LAG_MS), ShrinkIsr(1))
    [request] = [
        e.payload for e in judged.recorder.sent if isinstance(e.payload, AlterPartitionRequest)
    ]
    assert request.partitions[0].new_isr == (1,)
    assert judged.recorder.state["isr"][0] == {1, 2, 3}
    checked(judged, ShrinkIsr(1))  # a change in flight: nothing more is proposed, rightly
    checked(judged, Deliver(1, CONTROLLER, 0))
    assert judged.recorder.events[-1].action == "ControllerHandleAlterPartition"
    assert judged.recorder.state["ctrlIsr"] == {1}
    checked(judged, Deliver(CONTROLLER, 1, 0))
    assert judged.recorder.events[-1].action == "LeaderHandleAlterPartitionResponse"
    assert judged.recorder.state["isr"][0] == {1}


def test_a_proposal_that_drops_a_caught_up_follower_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    judged = recorder()
    monkeypatch.setattr(Partition, "get_out_of_sync_replicas", lambda self, ms: frozenset({2, 3}))
    found = apply_checked(judged, ShrinkIsr(1))  # no time has passed: nobody lags
    assert found is not None and found[0] == "IsrShrinksOnLagTime"
    assert "proposed dropping [2, 3]" in found[1]


def shrunk_to_the_leader_with_a_record(judged: Judge) -> None:
    """The ISR shrinks to {1} (proposed, answered), then leader 1 takes a record: its HW is 1,
    and follower 2's LEO 0."""
    checked(
        judged, Tick(LAG_MS), ShrinkIsr(1), Deliver(1, CONTROLLER, 0), Deliver(CONTROLLER, 1, 0)
    )
    checked(judged, Produce(TP, (1,), acks=1, broker=1), Deliver(CLIENT, 1, 0))
    assert judged.recorder.state["hw"][0] == 1 and judged.recorder.state["isr"][0] == {1}


def test_a_follower_behind_the_hw_is_not_proposed() -> None:
    judged = recorder()
    shrunk_to_the_leader_with_a_record(judged)
    checked(judged, DoWork(2, 1), Deliver(2, 1, 0))  # a fetch from offset 0
    assert not [e for e in judged.recorder.sent if isinstance(e.payload, AlterPartitionRequest)]


def test_a_proposal_to_add_a_follower_that_has_not_caught_up_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """R11 is the leader's decision: judged in the step that proposes the join (the FETCH's
    arrival), not when the controller's answer lands."""
    judged = recorder()
    shrunk_to_the_leader_with_a_record(judged)
    monkeypatch.setattr(Partition, "is_follower_in_sync", lambda self, replica, hw: True)
    checked(judged, DoWork(2, 1))
    found = apply_checked(judged, Deliver(2, 1, 0))
    assert found is not None and found[0] == "IsrJoinsCaughtUp"
    assert "follower 2 joined leader 1's ISR from offset 0" in found[1]


def test_the_network_never_loses_an_isr_change() -> None:
    """Kafka's broker-to-controller channel resends an ALTER_PARTITION until it is answered:
    the fuzzer may delay it (deliver it late, reorder it), never drop it."""
    judged = recorder()
    checked(judged, Tick(LAG_MS), ShrinkIsr(1))
    drops = CHOICES["drop"](judged.recorder.cluster, judged.recorder.state)
    assert Drop(1, CONTROLLER, 0) not in drops
    checked(judged, Deliver(1, CONTROLLER, 0))
    answer = judged.recorder.cluster.network.peek((CONTROLLER, 1), 0)
    assert answer is not None and isinstance(answer.payload, AlterPartitionResponse)
    assert Drop(CONTROLLER, 1, 0) not in CHOICES["drop"](
        judged.recorder.cluster, judged.recorder.state
    )


def test_a_correct_implementation_passes_a_campaign_under_the_variant() -> None:
    """Until 2026-11-26 this failed at once (the recorder kept the ISR of before the answer)."""
    args = ["fuzz", "--variant", "isr=alter-partition", "--examples", "60", "--steps", "40"]
    result = CliRunner().invoke(main, [*args, "--seed", "1", "--no-shrink"])
    assert result.exit_code == 0, result.output
    assert "ControllerHandleAlterPartition" in result.output


def test_its_traces_replay_on_the_implementation_and_conform_says_why_it_cannot(
    tmp_path: Path,
) -> None:
    """A corpus recorded under the variant replays state for state (`kreplica replay` knows
    the two steps the spec lacks); `kreplica conform` names them as the variant's, one reason
    per trace, instead of an unknown action."""
    corpus = tmp_path / "c.jsonl"
    args = ["fuzz", "--variant", "isr=alter-partition", "--examples", "8", "--steps", "40"]
    fuzz = CliRunner().invoke(main, [*args, "--seed", "3", "--corpus", str(corpus)])
    assert fuzz.exit_code == 0, fuzz.output
    text = corpus.read_text()
    assert "ControllerHandleAlterPartition" in text
    replay = CliRunner().invoke(main, ["replay", str(corpus)])
    assert replay.exit_code == 0, replay.output
    assert "0 differ, 0 cannot be replayed" in replay.output
    out = tmp_path / "conform"
    conform = CliRunner().invoke(main, ["conform", str(corpus), "--no-spark", "--out", str(out)])
    assert conform.exit_code == 2, conform.output
    reasons = [json.loads(line)["reason"] for line in (out / "results.json").open()]
    assert any("is a step of isr=alter-partition, which the spec does not model" in r
               for r in reasons)  # fmt: skip


def test_the_variant_s_steps_have_one_name_each() -> None:
    """The recorder, the replay and conform's reader name the two steps alike."""
    assert set(ALTER_PARTITION_DELIVERIES) == set(IMPL_ONLY_ACTIONS)
    assert not set(IMPL_ONLY_ACTIONS) & set(ACTION_ARGS)  # none is the spec's
