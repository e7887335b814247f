"""Liveness and progress: each fuzz run ends by settling the cluster, and a component that stops
working fails the run; a campaign reports the spec actions it never took."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from cli_helpers import fuzz
from hypothesis import strategies as st
from hypothesis.control import current_build_context
from hypothesis.errors import StopTest

from kreplica.conformance.bridge.recorder import SpecRecorder
from kreplica.conformance.fuzz import campaign as campaign_module
from kreplica.conformance.fuzz.campaign import (
    FuzzResult,
    machine_for,
    never_taken,
    run_fuzz,
    summary_lines,
)
from kreplica.conformance.fuzz.corpus_writer import CorpusWriter
from kreplica.conformance.fuzz.machine import ReplicationMachine
from kreplica.conformance.fuzz.plan import RunPlan
from kreplica.conformance.fuzz.runs import FuzzFailure, RunStats, StoppedRunFailure
from kreplica.conformance.fuzz.settle import SETTLE_TICKS, replay_saved, settle
from kreplica.conformance.fuzz.setup import TICK_MS, FuzzSetup
from kreplica.conformance.judges.liveness import (
    ANSWERED,
    REPLICATED,
    SentProduce,
    progress_violation,
)
from kreplica.conformance.replay.schedule import TP, minimize, read_schedule, replay_schedule
from kreplica.conformance.tla.itf import iter_jsonl_traces
from kreplica.conformance.tla.vocabulary import ACTION_ARGS
from kreplica.impl.cluster import Cluster
from kreplica.impl.config import BrokerConfig
from kreplica.impl.controller import Controller
from kreplica.impl.delayed_ops import DelayedProduce
from kreplica.impl.errors import Errors
from kreplica.impl.fetcher import AbstractFetcherThread
from kreplica.impl.messages import TopicPartition
from kreplica.impl.steps import Deliver, DoWork, Elect, Produce
from kreplica.impl.variants import parse_variant

CONFIG = BrokerConfig(replica_fetch_wait_max_ms=0)
"""Follower fetches answered at once, as the fuzzer's."""


def campaign(examples: int = 40, max_steps: int = 30) -> FuzzResult:
    """A small campaign of the default set-up, without Hypothesis's shrinking."""
    return run_fuzz(FuzzSetup(), examples=examples, max_steps=max_steps, shrink=False)


def test_the_correct_protocol_settles_in_every_run() -> None:
    """Every run of a campaign settles: no liveness failure, and settling took steps."""
    result = campaign()
    assert result.failure is None, result.failure and result.failure.reason
    assert 0 < result.stats.settle_steps < result.stats.impl_steps


def test_followers_stuck_in_truncating_are_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 14's example: a follower fetcher that never leaves Truncating replicates nothing
    and breaks no invariant. The fetcher-iteration check sees it first (a partition due, an
    iteration that does nothing); without it, the settle phase would: the follower has not
    caught up (EventuallyReplicated)."""
    monkeypatch.setattr(AbstractFetcherThread, "maybe_truncate", lambda self: [])
    failure = campaign().failure
    assert failure is not None
    assert failure.invariant == "FetchBackoffOnTime" and "did nothing" in failure.reason
    c = Cluster((1, 2), {"t": 1}, config=CONFIG)
    rec = SpecRecorder(c, TP, {})
    for step in (Produce(TP, (1,), 1, 1), Deliver(-1, 1), DoWork(2, 1), DoWork(2, 1)):
        rec.apply(step)  # the stuck fetcher's iterations, unchecked
    found = progress_violation(c, rec.state, [])
    assert found is not None and found[0] == REPLICATED
    assert "has not caught up with leader" in found[1]


def test_a_controller_that_refuses_every_election_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 14's other example: once its leader dies, the partition stays offline."""

    def refuse(self: Controller, tp: TopicPartition, candidate: int) -> tuple[Errors, list[object]]:
        return Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE, []

    monkeypatch.setattr(Controller, "offline_partition_leader_election", lambda self, tp: False)
    monkeypatch.setattr(Controller, "elect_leader", refuse)
    failure = campaign().failure
    assert failure is not None
    assert (failure.invariant, failure.reason) == (
        REPLICATED,
        "the partition has no leader after settling",
    )


def test_a_produce_never_answered_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """A leader that completes a delayed produce without answering it: the client's requests
    on time see it first (the HW has passed the record, no answer); without that check, the
    settle phase would (EventuallyAnswered)."""
    monkeypatch.setattr(DelayedProduce, "on_complete", lambda self: None)
    failure = campaign().failure
    assert failure is not None
    assert failure.invariant == "ClientAnswersMatchLeader" and "still waits" in failure.reason
    c = Cluster((1, 2), {"t": 1}, config=CONFIG)
    rec = SpecRecorder(c, TP, {})
    rounds = [DoWork(2, 1), Deliver(2, 1), Deliver(1, 2)] * 3  # truncate, fetch, fetch
    for step in (Produce(TP, (1,), -1, 1), Deliver(-1, 1), *rounds):
        rec.apply(step)  # replicated: the HW passes record 1, and the produce completes
    assert rec.state["hw"] == (1, 1)
    [corr] = c.client.pending
    found = progress_violation(c, rec.state, [SentProduce(corr, 1, c.incarnation(1), 1)])
    assert found is not None and found[0] == ANSWERED
    assert "has no answer after settling" in found[1]


def test_settling_steps_are_recorded_and_take_the_fuzzers_ticks(tmp_path: Path) -> None:
    """The settle phase's steps are in each run's corpus trace: its last state is settled,
    and every clock advance is one a fuzzer rule takes."""
    assert set(SETTLE_TICKS) <= set(TICK_MS)
    corpus = tmp_path / "c.jsonl"
    with CorpusWriter(corpus) as writer:
        run_fuzz(FuzzSetup(), examples=10, max_steps=20, corpus=writer)
    traces = list(iter_jsonl_traces(corpus))
    assert len(traces) >= 10
    for trace in traces:
        last = trace.states[-1].values
        leader = last["ctrlLeader"]
        assert leader in last["alive"] and last["leader"][leader - 1] == leader
        assert all(log == last["log"][leader - 1] for log in last["log"])


def test_the_summary_names_the_actions_never_taken() -> None:
    """The summary counts each spec action taken and lists the ones never taken."""
    result = campaign(examples=20, max_steps=20)
    missing = never_taken(result.stats)
    assert missing, "a campaign this short leaves some spec action untaken"
    assert set(missing) | {a for a, n in result.stats.actions.items() if n} == set(ACTION_ARGS)
    lines = summary_lines(result)
    assert f"never taken: {', '.join(missing)}" in lines
    assert any(line.startswith("actions: LeaderHandleFetch ") for line in lines)


def test_require_all_actions_exits_4_when_an_action_was_never_taken(tmp_path: Path) -> None:
    """--require-all-actions turns the 'never taken' line into exit code 4."""
    args = ["--examples", "5", "--steps", "10", "--out", str(tmp_path)]
    plain = fuzz(*args)
    assert plain.exit_code == 0, plain.output
    strict = fuzz(*args, "--require-all-actions")
    assert strict.exit_code == 4, strict.output
    assert "never taken: " in strict.output and "LeaderHandleListOffsets" in strict.output


KAFKA_10706 = (
    DoWork(2, 1),
    Produce(TP, (1,), -1, 1),
    Deliver(-1, 1),
    Deliver(2, 1),
    Deliver(1, 2),
    Elect(TP, 1),
    Deliver(0, 1),
    Elect(TP, 2),
    Produce(TP, (2,), -1, 1),
    Deliver(-1, 1),
    Elect(TP, 1),
)
"""Found by `kreplica fuzz --examples 2000 --steps 100 --seed 0` (run 1,219), minimised, when
the model was Kafka 2.6.0: three elections in a row; broker 2 takes office at epoch 2 writing
nothing, then follows broker 1 at epoch 3, whose log has epoch 1 where broker 2's has epoch 2.
The follower asks for the end of epoch 2, the leader answers epoch 1 ending at 2, and the
follower truncates to its own LEO (R6 case d)."""

KAFKA_10706_BUG = FuzzSetup(parse_variant([], ["kafka-10706"]))
"""The seeded bug kafka-10706: truncation to the LEO leaves the epoch cache (Kafka 2.6.0)."""


def test_kafka_10706s_scenario_settles_replicated_on_kafka_2_6_3() -> None:
    """Kafka 2.6.3 truncates the epoch cache at the LEO even when no record goes (R4): epoch 2
    leaves broker 2's cache, it asks next for epoch 0, completes truncation and catches up."""
    machine = machine_for(FuzzSetup(), RunStats(), 0, 50)()
    machine.start()
    for step in KAFKA_10706:
        machine._apply(step)
    assert machine.settle() is None
    state = machine.recorder.state
    assert state["fetchState"][1] == "Fetching"
    assert state["log"][1] == state["log"][0]
    assert [c["epoch"] for c in state["epochCache"][1]] == [0, 1]


def test_the_seeded_bug_kafka_10706_livelocks_and_fails_liveness() -> None:
    """With Kafka 2.6.0's truncation the follower keeps epoch 2 and asks for its end again,
    forever: no invariant breaks, the settle phase never ends, and the run fails."""
    stats = RunStats()
    machine = machine_for(KAFKA_10706_BUG, stats, 0, 50)()
    machine.start()
    for step in KAFKA_10706:
        machine._apply(step)
    with pytest.raises(FuzzFailure) as failed:
        machine.teardown()
    invariant, reason = failed.value.violation
    assert invariant == REPLICATED and "still busy after" in reason
    assert "LeaderHandleOffsetsForLeaderEpoch" in reason
    assert machine.recorder.state["fetchState"][1] == "Truncating"
    assert [c["epoch"] for c in machine.recorder.state["epochCache"][1]] == [0, 2]
    assert failed.value.settled_from == len(KAFKA_10706)
    assert stats.failing_runs == 1


def test_a_saved_liveness_failure_replays_with_its_settle_phase() -> None:
    """A liveness failure is saved up to its settle phase: replayed as saved
    (`replay_saved`), the settle phase runs again after its steps and fails the same way;
    the steps alone show nothing, and minimising keeps the failure."""
    found = ("EventuallyReplicated", "")
    schedule = replace(KAFKA_10706_BUG.schedule(KAFKA_10706), violation=found)
    again = replay_saved(schedule)
    assert again.violation is not None and again.violation[0] == REPLICATED
    assert again.steps_applied == len(KAFKA_10706)
    assert len(again.trace.states) - 1 < len(KAFKA_10706)  # the settle phase is not in it
    assert replay_schedule(schedule).violation is None
    saved = replace(schedule, violation=again.violation)
    assert replay_saved(saved).violation == again.violation
    shrunk = minimize(saved, settle=settle)
    assert shrunk.violation == again.violation and len(shrunk.steps) <= len(KAFKA_10706)
    fixed = replace(saved, variant=FuzzSetup().variant)
    assert replay_saved(fixed).violation is None  # Kafka 2.6.3 settles it


class OverrunAfterKafka10706(ReplicationMachine):
    """The fuzzer's machine, except that run 1 of a campaign takes KAFKA_10706's steps in its
    plan and then draws more than Hypothesis's buffer holds: Hypothesis ends the run as
    overrun (as it does when a long run's draws outgrow the buffer), and the run's settle
    phase, in its teardown, finds the seeded bug's livelock. Later runs are the fuzzer's."""

    def _follow(self, plan: RunPlan) -> None:
        if self.run != 1:
            super()._follow(plan)
            return
        for step in KAFKA_10706:
            self._apply(step)
        too_large = st.binary(min_size=10_000)  # Hypothesis 6.170's buffer holds 8 KiB
        current_build_context().data.draw(too_large)
        raise AssertionError("unreachable: Hypothesis ends the run as overrun")


def test_a_failure_in_the_settle_phase_of_an_overrun_run_is_reported_and_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 43: Hypothesis discards an exception raised by a run it has already marked as
    overrun, so a failure the settle phase (teardown) finds in such a run used to be lost:
    the campaign went on without writing the corpus and exited 0. Now it ends the campaign,
    which reports it (exit 1), saves a schedule that replays it, and has written every run
    it generated to the corpus, the failing one with its violation."""
    monkeypatch.setattr(campaign_module, "ReplicationMachine", OverrunAfterKafka10706)
    out, corpus = tmp_path / "out", tmp_path / "runs.jsonl"
    args = ["--bug", "kafka-10706", "--examples", "5", "--steps", "10", "--no-shrink"]
    result = fuzz(*args, "--out", str(out), "--corpus", str(corpus))
    assert result.exit_code == 1, result.output
    assert f"violation {REPLICATED}: still busy after" in result.output
    assert "found in run 1 after" in result.output and "runs 1," in result.output
    traces = list(iter_jsonl_traces(corpus))
    assert [t.meta["run"] for t in traces] == [1]
    assert traces[0].meta["violation"]["invariant"] == REPLICATED
    (schedule,) = out.glob("*.schedule.json")
    again = replay_saved(read_schedule(schedule))
    assert again.violation is not None and again.violation[0] == REPLICATED


def test_a_stopped_runs_failure_ends_the_campaign_only_if_it_is_the_first() -> None:
    """The teardown of a run Hypothesis has stopped (its StopTest in flight) hands a settle
    phase's failure past Hypothesis (`StoppedRunFailure`) when it is the campaign's first;
    while a failure is being shrunk, a stopped candidate's failure is Hypothesis's to drop."""
    stats = RunStats()
    first = machine_for(KAFKA_10706_BUG, stats, 0, 50)()
    first.start()
    for step in KAFKA_10706:
        first._apply(step)
    with pytest.raises(StoppedRunFailure) as stopped:
        try:
            raise StopTest(0)
        finally:
            first.teardown()
    assert stopped.value.failure.violation[0] == REPLICATED
    assert stats.runs_to_failure == first.run == 1
    candidate = machine_for(KAFKA_10706_BUG, stats, 0, 50)()
    candidate.start()
    for step in KAFKA_10706:
        candidate._apply(step)
    with pytest.raises(FuzzFailure):
        try:
            raise StopTest(0)
        finally:
            candidate.teardown()
