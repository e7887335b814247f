"""Trace validation: recorded runs of the implementation conform to the spec (real TLC).

A small random-walk corpus of the correct protocol (kreplica.conformance.fuzz.random_walk, a
fixed seed) must conform step by step: every divergence trace validation has found between the
spec and the implementation is resolved (docs/vocabulary.md lists them), so one rejected trace is a
regression of the spec, the projection, the recorder or the implementation. The golden traces
(TLC counterexamples) must conform as well, each under the variant of its own config.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from corpus_helpers import trace_tlc

from kreplica.conformance.bridge.projection import NO_LEADER, NOT_HOSTED
from kreplica.conformance.bridge.recorder import Recorder
from kreplica.conformance.fuzz.random_walk import corpus
from kreplica.conformance.fuzz.setup import CONFIG, FETCH_MAX_RECORDS
from kreplica.conformance.replay.trace import TP, setup_from_config
from kreplica.conformance.tla.itf import dumps_trace
from kreplica.conformance.tla.specs import resolve_spec_dir
from kreplica.conformance.validate.tracecheck import (
    CONFORMS,
    CheckSettings,
    SpecParams,
    TraceResult,
    check_texts,
)
from kreplica.impl.cluster import Cluster
from kreplica.impl.steps import (
    Crash,
    Deliver,
    DetectFailure,
    DoWork,
    Drop,
    Elect,
    Restart,
    ShrinkIsr,
    Tick,
)
from kreplica.impl.variants import Variant

pytestmark = pytest.mark.tlc

SPEC = resolve_spec_dir(None)
GOLDEN = Path(__file__).parent.parent / "traces" / "golden"
FIXTURES = Path(__file__).parent / "fixtures" / "conformance"
TLC = trace_tlc()


def walks(n: int, steps: int, seed: int) -> list[tuple[str, str]]:
    """`n` random walks of the correct protocol on 3 brokers, as (id, ITF JSON) pairs."""
    return [
        (f"walk-{seed}-{i}", json.dumps(json.loads(dumps_trace(trace))))
        for i, trace in enumerate(corpus(n, steps, seed, Variant(), replicas=3))
    ]


def rejected(results: list[TraceResult]) -> list[str]:
    """One line per trace that does not conform: where, and why."""
    return [
        f"{r.trace_id}: {r.verdict} at step {r.step} {r.action} {r.args}: {r.reason} {r.diff}"
        for r in results
        if r.verdict != CONFORMS
    ]


def test_a_random_walk_corpus_conforms() -> None:
    """20 walks of 60 steps: crashes, restarts, elections, lost and reordered messages,
    request timeouts, ISR shrinks, expiring produces."""
    params = SpecParams(
        min_insync_replicas=CONFIG.min_insync_replicas, fetch_max_records=FETCH_MAX_RECORDS
    )
    results = check_texts(walks(20, 60, seed=11), CheckSettings(params, SPEC, TLC))
    assert len(results) == 20
    assert rejected(results) == []


@pytest.mark.parametrize(
    "path", sorted(GOLDEN.glob("*.itf.json")), ids=lambda p: p.name.removesuffix(".itf.json")
)
def test_a_golden_trace_conforms_to_its_own_variant(path: Path) -> None:
    """A TLC counterexample conforms to the spec under the constants of its config (and
    a network that neither loses nor duplicates, and producers that all use the variant's
    acks, as the config has it): a spec change that no longer allows it must re-record it."""
    name = path.name.removesuffix(".itf.json")
    setup = setup_from_config(SPEC / f"{name}.cfg")
    params = SpecParams(
        variant=setup.variant,
        min_insync_replicas=setup.min_insync_replicas,
        fetch_max_records=setup.fetch_max_records,
        lossy_network=False,
        duplicating_network=False,
        fire_and_forget=False,
    )
    [result] = check_texts([(name, path.read_text())], CheckSettings(params, SPEC, TLC))
    assert rejected([result]) == []


def test_a_golden_trace_under_another_variant_is_rejected() -> None:
    """The S3 counterexample (KIP-101's lookup) does not conform to the KIP-279 spec: the
    check pinpoints the step where the two protocols part."""
    path = GOLDEN / "S3_Kip101FastFailover.itf.json"
    params = SpecParams(variant=Variant(), lossy_network=False)
    [result] = check_texts([("S3", path.read_text())], CheckSettings(params, SPEC, TLC))
    assert result.verdict == "violates"
    assert result.step is not None and result.step > 0


def test_a_partition_with_no_leader_epoch_yet_answers_unknown_leader_epoch() -> None:
    """A restarted broker whose first LeaderAndIsr names no leader hosts the Partition with
    leader epoch -1 (Kafka 2.6.3 creates it before makeFollowers aborts), so a follower's fetch
    in an older, real epoch gets UNKNOWN_LEADER_EPOCH, not NOT_LEADER_OR_FOLLOWER. Recorded
    through the implementation: 2 follows 3 in epoch 1; 3 crashes, 1 leads epoch 2 alone
    (2 never hears of it); 3 restarts (its LeaderAndIsr is lost); 1 crashes, so the partition
    goes offline in epoch 3 and 3 first hears of it without a leader; then 2 fetches from 3."""
    c = Cluster([1, 2, 3], {TP.topic: 1}, variant=Variant(), config=CONFIG)
    rec = Recorder(c, TP, {"id": "hosted-without-epoch"})
    for step in (
        Elect(TP, 3), Deliver(0, 3), Deliver(0, 2), Deliver(0, 1),
        Crash(3), DetectFailure(3), Deliver(0, 1), Drop(0, 2),
        Restart(3), Drop(0, 3),
        Tick(CONFIG.replica_lag_time_max_ms + 1), ShrinkIsr(1), Crash(1), DetectFailure(1),
    ):  # fmt: skip
        rec.apply(step)
    assert rec.state["leaderEpoch"] == (NOT_HOSTED, 1, NOT_HOSTED)
    [hosted] = rec.apply(Deliver(0, 3))
    assert (hosted.action, hosted.args) == (
        "BecomeLeaderOrFollower", {"replica": 3, "epoch": 3, "leader": NO_LEADER}
    )  # fmt: skip
    assert hosted.state["leaderEpoch"] == (NOT_HOSTED, 1, -1)
    rec.apply(Deliver(0, 2))  # 2 keeps following 3 in epoch 1
    rec.apply(DoWork(2, 3))
    [handled] = rec.apply(Deliver(2, 3))
    assert handled.action == "LeaderHandleFetch"
    [answer] = [m for m in handled.state["msgs"] if m["type"] == "FetchResponse"]
    assert (answer["src"], answer["epoch"], answer["error"]) == (3, 1, "UNKNOWN_LEADER_EPOCH")
    rec.apply(Deliver(3, 2))

    params = SpecParams(
        min_insync_replicas=CONFIG.min_insync_replicas, fetch_max_records=FETCH_MAX_RECORDS
    )
    text = json.dumps(json.loads(dumps_trace(rec.trace())))
    [result] = check_texts([("hosted-without-epoch", text)], CheckSettings(params, SPEC, TLC))
    assert rejected([result]) == []


def test_an_append_that_moves_the_hw_completes_the_produces_waiting() -> None:
    """Found by a fuzz corpus (seed 1): the leader, alone in its ISR, holds its HW back for a
    follower caught up within replica.lag.time.max.ms, so an acks=-1 produce waits; a later
    append finds that follower no longer caught up, and the HW jumps past both records. Kafka's
    appendRecordsToLeader completes the waiting produce in the same call; the spec's Produce
    did not (it now does). The trace is the corpus's, cut after that Produce."""
    path = FIXTURES / "produce-completes-waiting.itf.json"
    text = path.read_text()
    states = json.loads(text)["states"]
    before, after = states[-2], states[-1]
    assert after["#meta"]["action"] == "Produce"
    assert [p["record"] for p in before["pending"]["#set"]] == [3]
    assert after["pending"]["#set"] == [] and 3 in after["acked"]["#set"]
    params = SpecParams(
        min_insync_replicas=CONFIG.min_insync_replicas, fetch_max_records=FETCH_MAX_RECORDS
    )
    [result] = check_texts([("produce-completes-waiting", text)], CheckSettings(params, SPEC, TLC))
    assert rejected([result]) == []


def test_a_controller_failover_and_failures_handled_together_conform() -> None:
    """The controller's two ways of handling a dead leader that Kafka 2.6.3 has beside the
    plain onBrokerFailure, recorded through the implementation, are steps of the spec's
    ControllerDetectFailure: a failover takes the leader offline and then elects (two leader
    epochs), and brokers lost in one ZooKeeper watch get one election for all (R22, one epoch;
    the other dead broker leaves the live set in the same step)."""
    failover = Cluster([1, 2, 3], {TP.topic: 1}, variant=Variant(), config=CONFIG)
    rec_failover = Recorder(failover, TP, {"id": "failover"})
    rec_failover.apply(Crash(1))
    [detected] = rec_failover.apply(DetectFailure(1, failover=True))
    assert (detected.action, detected.state["ctrlLeader"], detected.state["ctrlEpoch"]) == (
        "ControllerDetectFailure", 2, 2
    )  # fmt: skip
    assert detected.state["ctrlIsr"] == {2, 3} and failover.controller.controller_epoch == 2
    for step in (Deliver(0, 2), Deliver(0, 3)):
        rec_failover.apply(step)
    together = Cluster([1, 2, 3], {TP.topic: 1}, variant=Variant(), config=CONFIG)
    rec_together = Recorder(together, TP, {"id": "together"})
    rec_together.apply(Crash(1))
    rec_together.apply(Crash(2))
    [both] = rec_together.apply(DetectFailure(1, together=(2,)))
    assert (both.state["ctrlLeader"], both.state["ctrlEpoch"], both.state["ctrlIsr"]) == (
        3, 1, {3}
    )  # fmt: skip
    assert both.state["ctrlLive"] == {3}
    rec_together.apply(Deliver(0, 3))

    params = SpecParams(min_insync_replicas=1, fetch_max_records=FETCH_MAX_RECORDS)
    texts = [
        (name, json.dumps(json.loads(dumps_trace(rec.trace()))))
        for name, rec in (("failover", rec_failover), ("together", rec_together))
    ]
    three = json.loads(texts[0][1])  # a failover of three epochs is no step of the spec's
    three["states"][2]["ctrlEpoch"] = 3
    results = check_texts([*texts, ("three", json.dumps(three))], CheckSettings(params, SPEC, TLC))
    assert rejected(results[:2]) == []
    assert (results[2].verdict, results[2].step, results[2].action) == (
        "violates", 2, "ControllerDetectFailure"
    )  # fmt: skip


def test_a_follower_whose_leader_is_not_behind_keeps_its_epoch_cache() -> None:
    """Found by a fuzz corpus (`--variant fencing=off`, seed 39, one-rule draws): a follower
    whose records were all deleted (its log starts at its LEO, 2, and so does its one epoch) is
    answered an out-of-range reset's LATEST with the leader's LEO (3). Kafka 2.6.3's
    fetchOffsetAndTruncate truncates only when the leader's LEO is below the follower's;
    otherwise it asks EARLIEST and truncates nothing. The spec's
    FollowerHandleListOffsetsResponse truncated to the leader's LEO even then, which trims the
    epoch cache from the follower's LEO (Log.truncateTo at or past the end) and dropped the
    epoch the implementation kept. The trace is the corpus's, cut after it."""
    path = FIXTURES / "list-offsets-at-leo-keeps-epoch-cache.itf.json"
    text = path.read_text()
    states = json.loads(text)["states"]
    before, after = states[-2], states[-1]
    assert after["#meta"]["action"] == "FollowerHandleListOffsetsResponse"
    assert before["epochCache"][2] == after["epochCache"][2] == [{"epoch": 0, "startOffset": 2}]
    params = SpecParams(
        variant=Variant(fencing="off"), min_insync_replicas=2, fetch_max_records=FETCH_MAX_RECORDS
    )
    [result] = check_texts([("list-offsets-at-leo", text)], CheckSettings(params, SPEC, TLC))
    assert rejected([result]) == []
