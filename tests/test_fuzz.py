"""The fuzzer: the correct protocol survives it; it finds every seeded bug and unsafe variant."""

from __future__ import annotations

import importlib
import random
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from kreplica.conformance.bench.checkpoints import count
from kreplica.conformance.bridge.recorder import SpecRecorder
from kreplica.conformance.bridge.step_codec import STEP_CLASSES, step_from_json, step_to_json
from kreplica.conformance.errors import TraceError
from kreplica.conformance.fuzz.campaign import run_fuzz, save_failure
from kreplica.conformance.fuzz.choices import CHOICES, fuzzer_may_take
from kreplica.conformance.fuzz.corpus_writer import CorpusWriter
from kreplica.conformance.fuzz.settle import replay_saved
from kreplica.conformance.fuzz.setup import CONFIG, DEFAULT_STEPS, DURABLE_MIN_ISR, FuzzSetup
from kreplica.conformance.fuzz.targets import TARGETS, Target
from kreplica.conformance.judges.checked_steps import (
    IMPLEMENTATION_ERROR,
    OFFSETS,
    POWER_LOSS_INVARIANTS,
    TAKES_EFFECT,
    Judge,
    apply_checked,
    checked_violations,
    offset_violations,
)
from kreplica.conformance.judges.invariants import (
    INVARIANTS,
    epoch_cache_matches_log,
    violations,
)
from kreplica.conformance.judges.invariants import judged as judged_invariants
from kreplica.conformance.replay.schedule import (
    TP,
    failure_kind,
    minimize,
    read_schedule,
    recorded_checks,
    replay_schedule,
)
from kreplica.conformance.tla.itf import read_trace
from kreplica.impl.cluster import SimulationError
from kreplica.impl.messages import IsolationLevel
from kreplica.impl.steps import (
    CheckpointHighWatermarks,
    ConsumerFetch,
    ConsumerListOffsets,
    Crash,
    DeleteRecords,
    Deliver,
    DetectFailure,
    DoWork,
    Elect,
    Flush,
    Produce,
    Step,
    Tick,
    UncleanShutdown,
)
from kreplica.impl.variants import (
    BUGS,
    DIMENSIONS,
    IMPL_ONLY,
    SPEC_CONSTANTS,
    Variant,
    parse_variant,
)

# ---------------------------------------------------------------- the correct protocol


def test_a_seed_generates_the_same_runs_whatever_modules_are_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hypothesis would draw integers from the constants of any local module imported: a
    module imported between two campaigns of one seed must not change their runs."""

    def campaign(name: str) -> list[str]:
        corpus = tmp_path / f"{name}.jsonl"
        with CorpusWriter(corpus) as writer:
            run_fuzz(FuzzSetup(), examples=40, max_steps=30, seed_value=3, corpus=writer)
        return corpus.read_text().splitlines()

    before = campaign("before")
    constants = ", ".join(str(n) for n in range(2, 400))
    (tmp_path / "kreplica_local_constants.py").write_text(f"NUMBERS = ({constants})\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("kreplica_local_constants")
    assert campaign("after") == before


@pytest.mark.parametrize("replicas", [2, 4, 5])
def test_every_cluster_size_the_cli_allows(replicas: int) -> None:
    """--replicas 2..5: the partition lives on every broker, and the correct protocol survives."""
    result = run_fuzz(FuzzSetup(replicas=replicas), examples=25, max_steps=40, seed_value=0)
    assert result.failure is None, result.failure and result.failure.reason


def test_correct_protocol_keeps_every_invariant_under_every_fault() -> None:
    """150 runs of up to 50 steps, every fault on: no invariant fails (make test's size)."""
    result = run_fuzz(FuzzSetup(), examples=150, max_steps=50, seed_value=0)
    assert result.failure is None, result.failure and result.failure.reason
    assert result.stats.runs >= 150 and result.stats.steps > 3_000


# ---------------------------------------------------------------- what is checked when


def test_after_a_power_loss_only_the_power_loss_invariants_count() -> None:
    """AckedRecordsNeverLost counts until the first unclean shutdown, not after it."""
    setup = FuzzSetup(variant=Variant(acks="1"))
    recorder = SpecRecorder(setup.schedule().cluster(), TP, {})
    for step in (Produce(TP, (1,), 1, 1), Deliver(-1, 1), Crash(1), DetectFailure(1)):
        recorder.apply(step)
    recorder.apply(Deliver(0, 2))
    lost = recorder.state
    assert [name for name, _ in checked_violations(lost, None)] == ["AckedRecordsNeverLost"]
    after_power_loss = {**lost, "uncleanShutdowns": 1}
    assert checked_violations(after_power_loss, None) == []
    assert {*INVARIANTS, "LeaderEpochsOnlyGrow", "IsrJoinsCaughtUp"} > POWER_LOSS_INVARIANTS


def cache_state(log: list[tuple[int, int]], cache: list[tuple[int, int]]) -> dict[str, Any]:
    """One replica's log ((epoch, record) per offset, record 0 = deleted) and epoch cache
    ((epoch, start offset) per entry), as the projection writes them."""
    return {
        "log": (tuple({"epoch": e, "record": r} for e, r in log),),
        "epochCache": (tuple({"epoch": e, "startOffset": o} for e, o in cache),),
    }


@pytest.mark.parametrize(
    ("log", "cache", "broken"),
    [
        ([(0, 1), (1, 2)], [(0, 0), (1, 1)], None),
        ([(0, 1)], [(0, 0), (2, 1)], None),  # an epoch begun at the LEO, nothing in it yet
        ([(0, 0), (1, 2)], [(1, 1)], None),  # offset 0 deleted (below the log start)
        ([], [], None),
        ([(0, 1), (1, 2)], [(0, 0)], "offset 1 has epoch 1, its epoch cache says 0"),
        ([(0, 1), (0, 2)], [(0, 1)], "no entry at or below offset 0"),
        ([(0, 1), (2, 2)], [(0, 0), (1, 1)], "offset 1 has epoch 2, its epoch cache says 1"),
    ],
)
def test_epoch_cache_matches_log_holds_exactly_when_the_cache_describes_the_log(
    log: list[tuple[int, int]], cache: list[tuple[int, int]], broken: str | None
) -> None:
    """EpochCacheMatchesLog: every record a replica still holds has the epoch of the last
    cache entry at or below its offset, and there is one."""
    reason = epoch_cache_matches_log(cache_state(log, cache))
    assert reason is None if broken is None else broken in (reason or ""), reason


KAFKA_10706_WIPE = (
    Produce(TP, (1,), -1, 1),
    Deliver(-1, 1, 0),
    DoWork(2, 1),
    Deliver(2, 1, 0),
    Deliver(1, 2, 0),
    Elect(TP, 2),
    Deliver(0, 2, 0),
    Produce(TP, (2,), -1, 1),
    Deliver(-1, 1, 0),
    Elect(TP, 1),
    Deliver(0, 1, 0),
    Deliver(0, 1, 0),
    Deliver(0, 2, 0),
    DoWork(2, 1),
    Deliver(2, 1, 0),
    Deliver(1, 2, 0),
    DoWork(2, 1),
    Deliver(2, 1, 0),
    Deliver(1, 2, 0),
)
"""Found by `kreplica fuzz --bug kafka-10706 --seed 0` while EpochCacheMatchesLog was judged
under the bug: broker 2 takes office at epoch 1 with nothing written (its cache (1, 1)), broker
1 writes record 2 at offset 1 in epoch 0 and leads again at epoch 2; broker 2's truncation to
its LEO ends at once (case e), and appending record 2 of epoch 0 after epoch 1 wipes its
cache below (R2)."""


@pytest.mark.parametrize("bugs", [[], ["kafka-10706"]])
def test_epoch_cache_matches_log_is_not_judged_where_a_variant_breaks_it_by_design(
    bugs: list[str],
) -> None:
    """Kafka 2.6.3 keeps the cache describing the log through the run; the seeded bug
    kafka-10706 breaks EpochCacheMatchesLog by design, so its runs do not judge it (nor those
    of truncation=kip101 or fencing=off: invariants.BROKEN_BY_DESIGN), and go on to the
    livelock the bug is known for."""
    variant = parse_variant([], bugs)
    recorder = SpecRecorder(FuzzSetup(variant).schedule().cluster(), TP, {})
    judge = Judge(recorder)
    for step in KAFKA_10706_WIPE:
        assert apply_checked(judge, step) is None
    broken = epoch_cache_matches_log(recorder.state)
    assert (broken is not None) == bool(bugs), broken
    judged = [name for name, _ in violations(recorder.state)]
    assert judged == (["EpochCacheMatchesLog"] if bugs else [])
    assert violations(recorder.state, variant=variant) == []
    for word in ("truncation=kip101", "fencing=off"):
        assert "EpochCacheMatchesLog" not in judged_invariants(parse_variant([word]))
    assert "EpochCacheMatchesLog" in judged_invariants(parse_variant(["truncation=hw"]))
    assert "EpochCacheMatchesLog" in POWER_LOSS_INVARIANTS


def test_the_default_set_up_sees_a_broken_isr_guard_where_it_breaks() -> None:
    """KAFKA-7128 (`no-leso-guard`) rarely loses data in a default run, but its ISR join below
    the new leader's epoch start breaks IsrJoinsCaughtUp (R11) at the join itself."""
    [target] = [t for t in TARGETS if t.word == "no-leso-guard"]
    # seed 2: of seeds 0 to 11 (since R23), 0, 1 and 4 find nothing in 200 runs and 6 finds
    # CommittedRecordsOnIsr first; the others find IsrJoinsCaughtUp
    result = run_fuzz(target.default_setup, 200, max_steps=40, seed_value=2, shrink=False)
    assert result.failure is not None and result.failure.invariant == "IsrJoinsCaughtUp"
    assert "joined leader" in result.failure.reason
    assert run_fuzz(FuzzSetup(), 200, max_steps=40, seed_value=2, shrink=False).failure is None


def test_a_log_whose_offsets_skip_one_breaks_consecutive_offsets() -> None:
    """The projection reads a log's records in order, so the fuzzer checks the offsets
    themselves: a LEO one past where the records end (a record's offset skipped) is found, by
    the check and by a step through apply_checked, and a correct log is not."""
    cluster = FuzzSetup().schedule().cluster()
    recorder = SpecRecorder(cluster, TP, {})
    judge = Judge(recorder)
    for step in (Produce(TP, (1,), -1, 1), Deliver(-1, 1, 0)):
        assert apply_checked(judge, step) is None
    log = cluster.log(1, TP)
    assert log is not None and [e.offset for e in log.entries] == [0]
    assert offset_violations(cluster, TP) == []
    log.next_offset += 1  # the next record would go to offset 2: offset 1 skipped
    [(name, reason)] = offset_violations(cluster, TP)
    assert name == OFFSETS and "broker 1: records at offsets [0], log start 0, LEO 2" in reason
    found = apply_checked(judge, Tick(1))
    assert found is not None and found[0] == OFFSETS


@pytest.mark.parametrize("step", [Flush(1), CheckpointHighWatermarks(1), DeleteRecords(TP, 1)])
def test_a_step_that_changes_nothing_where_the_spec_acts_breaks_step_takes_effect(
    step: Step, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flush, an HW checkpoint or a deletion where the spec's action has work to do (a record
    above the recovery point, an HW the checkpoint does not hold, a record below the HW) must
    be recorded as that action: one the simulator silently skips is found. Once done, the same
    step is no action and no failure. The fuzzer offers the step only where it has work to do."""
    cluster = FuzzSetup(replicas=1).schedule().cluster()
    recorder = SpecRecorder(cluster, TP, {})
    judge = Judge(recorder)
    for produce in (Produce(TP, (1,), -1, 1), Deliver(-1, 1, 0)):
        assert apply_checked(judge, produce) is None
    kind = {Flush: "flush", CheckpointHighWatermarks: "checkpoint"}.get(type(step))
    kind = kind or "delete_records"
    assert CHOICES[kind](cluster, recorder.state) == [step]
    with monkeypatch.context() as patched:
        if isinstance(step, Flush):
            patched.setattr(cluster.log_managers[1], "flush_all", lambda: None)
        elif isinstance(step, CheckpointHighWatermarks):
            patched.setattr(cluster.brokers[1], "checkpoint_high_watermarks", lambda: None)
        else:
            log = cluster.log(1, TP)
            patched.setattr(log, "maybe_increment_log_start_offset", lambda offset: None)
        found = apply_checked(judge, step)
    assert found is not None and found[0] == TAKES_EFFECT, found
    assert f"{step!r} changed nothing" in found[1]
    assert apply_checked(judge, step) is None  # the real step does its work
    assert CHOICES[kind](cluster, recorder.state) == []
    assert apply_checked(judge, step) is None  # nothing left to do: no action, no failure


def test_the_checkpoint_bench_counts_a_power_loss_below_the_checkpoint() -> None:
    """`kreplica bench checkpoints` counts a power loss whose broker's checkpoint is above the
    log that survived it: one replica, a record committed and checkpointed, then the power
    loss."""
    cluster = FuzzSetup(replicas=1).schedule().cluster()
    recorder = SpecRecorder(cluster, TP, {})
    judge = Judge(recorder)
    steps = (Produce(TP, (1,), -1, 1), Deliver(-1, 1, 0), CheckpointHighWatermarks(1))
    for step in (*steps, UncleanShutdown(1)):
        assert apply_checked(judge, step) is None
    counts: Counter[str] = Counter()
    count(recorder.trace(), counts)
    assert counts == Counter(
        {
            "checkpoints written": 1,
            "power losses": 1,
            "... leaving the checkpoint above the LEO": 1,
        }
    )


def test_the_fuzzer_takes_only_answers_that_are_on_the_network() -> None:
    """After a client request's delivery the fuzzer takes its answer, which is on the network;
    a delivery at an index past the link's queue is no step of the fuzzer's (a minimised run
    once kept one, and failed on it with the simulator's IndexError instead of its own)."""
    cluster = FuzzSetup().schedule().cluster()
    recorder = SpecRecorder(cluster, TP, {})
    ask = ConsumerListOffsets(TP, -2, 1)
    recorder.apply(ask)
    delivered = Deliver(-1, 1, 0)
    recorder.apply(delivered)
    state = recorder.state
    assert fuzzer_may_take(cluster, state, delivered, Deliver(1, -1, 0))
    assert not fuzzer_may_take(cluster, state, delivered, Deliver(1, -1, 1))


def test_the_fuzzer_asks_to_elect_a_dead_broker_and_the_controller_refuses() -> None:
    """An invalid request among the fuzzer's inputs: electing a broker the controller knows is
    dead. The controller refuses it, so the step records no spec action (and costs no fault)."""
    cluster = FuzzSetup().schedule().cluster()
    recorder = SpecRecorder(cluster, TP, {})
    recorder.apply(Crash(2))
    recorder.apply(DetectFailure(2))
    assert 2 not in recorder.state["ctrlLive"]
    assert Elect(TP, 2) in CHOICES["elect"](cluster, recorder.state)
    leader = cluster.controller.leader_of(TP)
    assert recorder.apply(Elect(TP, 2)) == []
    assert cluster.controller.leader_of(TP) == leader


def test_a_consumer_fetch_is_no_spec_action() -> None:
    """The recorder names no action for a consumer's FETCH (the spec's reads are history)."""
    recorder = SpecRecorder(FuzzSetup().schedule().cluster(), TP, {})
    assert recorder.apply(ConsumerFetch(TP, 0, 1)) == []
    assert recorder.apply(Deliver(-1, 1)) == []


def test_the_rules_choose_among_the_simulators_enabled_steps() -> None:
    """Every choice of a rule (but network partitions) is one of Cluster.enabled_steps()."""
    rng = random.Random(7)
    setup = FuzzSetup()
    recorder = SpecRecorder(setup.schedule().cluster(), TP, {})
    cluster = recorder.cluster
    for _ in range(300):
        enabled = set(cluster.enabled_steps())
        options: list[Step] = []
        for kind, choices in CHOICES.items():
            found = choices(cluster, recorder.state)
            if kind not in ("isolate", "heal"):
                assert set(found) <= enabled, kind
            if kind not in ("crash", "unclean_shutdown", "fail_log_dir") or rng.random() < 0.05:
                options += found
        options.append(cluster.next_record(TP))
        recorder.apply(rng.choice(options))


# ---------------------------------------------------------------- schedules


def test_every_step_survives_its_json_form() -> None:
    steps: list[Step] = [
        Deliver(1, 2, 3),
        DoWork(2, 1),
        Tick(30_001),
        Produce(TP, (4, 5), 0, 1, 100),
        ConsumerFetch(TP, 2, 1, IsolationLevel.READ_COMMITTED, 10),
        Flush(3),
    ]
    for step in steps:
        assert step_from_json(step_to_json(step)) == step
    assert {"Deliver", "Elect", "Isolate", "UncleanShutdown"} <= set(STEP_CLASSES)


def acks1_loss() -> list[Step]:
    """An acks=1 record that the new leader never had (with steps it does not need)."""
    return [
        Tick(1_000),
        Produce(TP, (1,), 1, 1),
        Deliver(-1, 1),
        Flush(1),
        Tick(1_000),
        Crash(1),
        Tick(1_000),
        DetectFailure(1),
        Deliver(0, 2),
        Deliver(0, 3),
    ]


def test_replay_and_minimize_keep_the_violation_and_drop_the_noise() -> None:
    setup = FuzzSetup(variant=Variant(acks="1"))
    schedule = setup.schedule(acks1_loss())
    found = replay_schedule(schedule)
    assert found.violation is not None and found.violation[0] == "AckedRecordsNeverLost"
    assert found.steps_applied == 9  # the last step is never reached
    small = minimize(replace(schedule, violation=found.violation), fuzzer_may_take)
    assert [type(s).__name__ for s in small.steps] == [
        "Produce",
        "Deliver",
        "Crash",
        "DetectFailure",
        "Deliver",
    ]
    assert small.violation == found.violation


def test_a_refused_step_is_a_finding_when_fuzzing_and_a_stale_schedule_in_replay() -> None:
    """The fuzzer takes only enabled steps, so a step the simulator refuses there is reported
    like any exception (ImplementationError); a saved schedule's step that is refused means
    the schedule no longer applies, and its replay raises SimulationError (issue 43)."""
    step = Deliver(1, 2)
    schedule = FuzzSetup().schedule([step])
    found = apply_checked(Judge(SpecRecorder(schedule.cluster(), TP, {})), step)
    assert found == (IMPLEMENTATION_ERROR, f"SimulationError: nothing to deliver at {step}")
    with pytest.raises(SimulationError, match=r"^step 1 of 1: nothing to deliver at Deliver"):
        replay_schedule(schedule)


def test_a_saved_failure_replays_from_its_files(tmp_path: Path) -> None:
    setup = FuzzSetup(variant=parse_variant(["acks=1"]))
    result = run_fuzz(setup, examples=300, max_steps=40, seed_value=1)
    assert result.failure is not None
    trace_path, schedule_path = save_failure(result, tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
        [trace_path.name, schedule_path.name]
    )
    schedule = read_schedule(schedule_path)
    assert replay_schedule(schedule).violation == schedule.violation
    trace = read_trace(trace_path)
    assert trace.meta["violation"]["invariant"] == result.failure.invariant
    assert trace.meta["variant"] == {"dimensions": {"acks": "1"}, "bugs": []}
    assert len(trace.meta["impl_steps"]) == len(schedule.steps)
    assert len(trace.states) - 1 == result.failure.spec_actions <= 15


def test_a_durable_runs_failure_keeps_its_min_isr(tmp_path: Path) -> None:
    """A failure found in a run of Kafka's durable set-up is saved with that run's broker
    config: its schedule replays on brokers with min.insync.replicas 2, and its trace says
    so (`kreplica conform` checks it under MinIsr 2)."""
    setup = FuzzSetup(variant=parse_variant(["acks=1"]))
    found = run_fuzz(setup, examples=300, max_steps=40, seed_value=3)
    assert found.failure is not None
    durable = replace(CONFIG, min_insync_replicas=DURABLE_MIN_ISR)
    result = replace(found, failure=replace(found.failure, config=durable))
    trace_path, schedule_path = save_failure(result, tmp_path)
    assert read_schedule(schedule_path).config == durable
    assert read_trace(trace_path).meta["min_insync_replicas"] == DURABLE_MIN_ISR
    _, default_path = save_failure(found, tmp_path / "default")
    assert read_schedule(default_path).config == CONFIG


# ---------------------------------------------------------------- every bug is found

DETECTED = {
    # target: (seed, most runs); seeds that find it fast
    "early-ack": (0, 100),
    "hw-from-non-isr": (0, 100),
    "no-leso-guard": (0, 400),
    "skip-same-leader-truncation": (0, 100),
    "hw-not-clamped": (0, 100),
    "kafka-10706": (1, 100),
    "truncation=kip101": (0, 100),
    "truncation=hw": (1, 100),
    "election=unclean": (0, 100),
    "acks=1": (0, 100),
    "fencing=off": (1, 200),
}
STEPS = {"fencing=off": DEFAULT_STEPS}
"""Steps per run, where a target's seed was found with other than 100: S4's seed 1 finds it
within 200 runs of the default steps (in run 125; seed 0 does not), since eight steps share a
Hypothesis step (#44; before, seed 6, and before 2026-11-27 seed 2 in run 104), and 14 seeds of
300 runs of 100 steps did not, at the end of 2026-11-26 (docs/fuzzing.md). The seeds of
no-leso-guard and skip-same-leader-truncation moved on the same day: the first seed that finds
the target within its runs and shrinks it to at most 15 spec actions. Four moved again when one
rule came to draw every step (#44), which changed every seed's runs: no-leso-guard (2 to 0),
kafka-10706 (0 to 1), skip-same-leader-truncation (15 to 0) and election=unclean (0 to 1), each
the first seed that does so now; and again when eight steps came to share a Hypothesis step:
truncation=hw (4 to 1: seed 0 finds it, minimised to 19 spec actions) and election=unclean (1
to 0), besides S4's above."""


def test_every_seeded_bug_and_unsafe_variant_is_a_target() -> None:
    """Every seeded bug, and every value the spec models besides a dimension's default (each
    unsafe: spec/*.cfg has a config that shows it), is a target."""
    unsafe = [
        f"{dim}={value}"
        for dim in SPEC_CONSTANTS
        for value in DIMENSIONS[dim][1:]
        if value not in IMPL_ONLY.get(dim, ())
    ]
    words = [t.word for t in TARGETS]
    assert sorted(words) == sorted([*BUGS, *unsafe])
    assert set(DETECTED) == set(words)


@pytest.mark.parametrize("target", TARGETS, ids=[t.word for t in TARGETS])
def test_the_fuzzer_finds_and_shrinks(target: Target) -> None:
    """With its set-up and a fixed seed, the campaign finds the target, and the failing run
    minimises to at most 15 spec actions that replay to the same violation."""
    seed_value, most = DETECTED[target.word]
    steps = STEPS.get(target.word, 100)
    result = run_fuzz(target.setup, most, max_steps=steps, seed_value=seed_value, shrink=False)
    f = result.failure
    assert f is not None, f"{target.command(seed_value)}: not found in {most} runs"
    assert f.invariant in target.breaks, f.reason
    assert f.spec_actions <= 15, f"{f.spec_actions} spec actions"
    saved = replace(target.setup.schedule(f.steps), violation=(f.invariant, f.reason))
    again = replay_saved(saved)  # a liveness failure's with its settle phase
    assert again.violation == (f.invariant, f.reason)


def test_a_shrunk_exception_keeps_its_type_and_message() -> None:
    """Shrinking keeps the invariant, and for an exception its type and message: an
    AttributeError must not shrink into the IndexError of a client request left without its
    send, nor a list's IndexError (a mutant's epoch cache) into a deque's (a delivery of an
    answer that is not on the network)."""
    assert failure_kind(("ImplementationError", "IndexError: deque index out of range")) != (
        failure_kind(("ImplementationError", "AttributeError: no attribute 'completed'"))
    )
    assert failure_kind(("ImplementationError", "IndexError: deque index out of range")) != (
        failure_kind(("ImplementationError", "IndexError: list index out of range"))
    )
    assert failure_kind(("HighWatermarkWithinLog", "HW 3 > LEO 2")) == (
        "HighWatermarkWithinLog",
        "",
    )


def test_a_campaign_without_invariants_reports_the_exception(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`fuzz --no-invariants`: a run that breaks an invariant (the seeded bug hw-not-clamped)
    and then raises is reported, shrunk and replayed as the exception, as the campaign saw it,
    not as the invariant a replay with invariants on would meet first."""
    from kreplica.impl.replica_fetcher import ReplicaFetcherThread

    fetch = ReplicaFetcherThread.maybe_fetch

    def after_the_bug(self: ReplicaFetcherThread) -> Any:
        # raised outside any one partition's processing, which the fetcher would keep to
        # that partition (AbstractFetcherThread catches it)
        for tp in self.partition_states.partitions():
            log = self.replica_manager.all_partitions[tp].log
            if log is not None and log.high_watermark > log.log_end_offset:  # broken before
                raise RuntimeError("fetcher")
        return fetch(self)

    monkeypatch.setattr(ReplicaFetcherThread, "maybe_fetch", after_the_bug)
    setup = FuzzSetup(variant=Variant(bugs=frozenset({"hw-not-clamped"})), invariants=False)
    f = run_fuzz(setup, 300, max_steps=50, seed_value=1, shrink=False).failure
    assert f is not None and f.invariant == "ImplementationError", f and f.invariant
    assert f.reason.startswith("RuntimeError: fetcher")


def test_a_rules_only_campaign_reports_a_rule_and_its_schedule_replays_with_its_checks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`fuzz --rules-only` (the mutation campaign's variant stages): under an unsafe variant
    the spec's invariants are not checked, Kafka's rules are: a leader that never moves its
    HW breaks HighWatermarkOnTime. The saved schedule says which checks its campaign made, so
    `kreplica replay` checks the same and shows the same violation."""
    from kreplica.conformance.cli.replay import check_saved_schedule
    from kreplica.conformance.fuzz.campaign import failure_schedule
    from kreplica.conformance.judges.lag_times import HW_NAME
    from kreplica.impl.partition import Partition

    monkeypatch.setattr(Partition, "maybe_increment_leader_hw", lambda self, log, now=None: False)
    variant = parse_variant(["truncation=hw"])
    setup = FuzzSetup(variant=variant, invariants=False, rules=True)
    assert "invariants not checked, Kafka's rules checked" in setup.describe()
    assert setup.name(1).endswith("-rules-s1")
    result = run_fuzz(setup, 100, max_steps=50, seed_value=1, shrink=False)
    assert result.failure is not None and result.failure.invariant == HW_NAME
    schedule = failure_schedule(result)
    assert recorded_checks(schedule) == (False, True)
    console = Console(record=True, width=200)
    assert check_saved_schedule(schedule, "run", console) == 0
    assert "the same as recorded" in console.export_text()
    bad = replace(schedule, meta={**schedule.meta, "rules": "yes"})
    with pytest.raises(TraceError, match="'invariants' and 'rules' must be true or false"):
        recorded_checks(bad)


def test_the_bench_counts_only_a_targets_own_failure_as_found() -> None:
    """A fencing=off campaign that stops at another failure (EventuallyReplicated, say) has
    not found S4: the bench's table counts it apart, and its time is not a detection time."""
    from kreplica.conformance.bench.fuzz import Detection
    from kreplica.conformance.fuzz.campaign import FuzzResult
    from kreplica.conformance.fuzz.runs import Failure, RunStats
    from kreplica.conformance.fuzz.targets import target

    s4 = target("fencing=off")
    trace = replay_schedule(s4.setup.schedule(())).trace

    def campaign(invariant: str | None) -> FuzzResult:
        stats = RunStats(detected=1.0, detected_cpu=1.0, runs_to_failure=3)
        failure = None if invariant is None else Failure(invariant, "why", (), trace)
        return FuzzResult(s4.setup, 0, 10, 40, stats, 2.0, failure)

    row = Detection(
        s4, (campaign("EventuallyReplicated"), campaign("CommittedRecordsOnIsr"), campaign(None)), 9
    )
    assert [r.failure.invariant for r in row.found if r.failure] == ["CommittedRecordsOnIsr"]
    assert len(row.other) == 1
    cells = row.cells()
    assert cells[2] == "1/3" and cells[-1] == "1: EventuallyReplicated"
    assert row.seconds() == [float("inf"), 1.0, float("inf")]
