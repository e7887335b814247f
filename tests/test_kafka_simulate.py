"""kreplica's prediction of a fault schedule on real Kafka 2.6.3 (conformance/kafka/simulate.py).

Each named schedule (schedules/*.json) predicts the outcome issue 13 expects: no acknowledged loss
for acks=-1 with clean election, loss for an acks=1 leader that fails before replicating, loss
for an unclean election after the ISR shrank to the leader, and none for KIP-101 scenario 1 with
leader epochs, which loses a record with HW truncation (the check that the test can fail). The
random campaign is deterministic for a seed, each schedule round-trips through JSON and every
prediction is deterministic.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kreplica.conformance.kafka.generate import (
    MAX_STEPS,
    named_schedules,
    random_schedules,
    schedule_text,
)
from kreplica.conformance.kafka.outcome import Outcome
from kreplica.conformance.kafka.schedule import (
    BROKERS,
    Schedule,
    Step,
    load_schedule,
    parse_schedule,
)
from kreplica.conformance.kafka.simulate import KafkaSim, predict, simulate
from kreplica.conformance.kafka.timing import Timing, harness_timing
from kreplica.impl.variants import Variant

ROOT = Path(__file__).resolve().parent.parent
SCHEDULES = ROOT / "schedules"
NAMED = {s.name: s for s in named_schedules()}
HW_TRUNCATION = Variant(truncation="hw")
"""Pre-KIP-101: a follower truncates to its HW, with no leader epochs."""


def lost(outcome: Outcome) -> list[int]:
    """Every acknowledged value lost, any acks."""
    return sorted(v for values in outcome.lost.values() for v in values)


def test_every_named_schedule_is_a_file_that_loads_back_equal() -> None:
    files = sorted(SCHEDULES.glob("*.json"))
    assert sorted(f.stem for f in files) == sorted(NAMED)
    for path in files:
        assert load_schedule(path) == NAMED[path.stem]
        assert path.read_text(encoding="utf-8") == schedule_text(NAMED[path.stem]), (
            "regenerate with: python -c 'from pathlib import Path; from kreplica.conformance."
            'kafka.generate import write_named; write_named(Path("schedules"))\''
        )


@pytest.mark.parametrize("name", ["acks-all-leader-crash", "acks-all-leader-partition"])
def test_acks_all_min_isr_2_clean_election_loses_no_acked_record(name: str) -> None:
    outcome = predict(SCHEDULES / f"{name}.json")
    assert outcome.acked[-1] == tuple(range(15))  # every record acknowledged, in the end
    assert not outcome.acked_lost and not outcome.diverged
    assert outcome.leader == 2 and outcome.leader_epoch == 1  # one failover
    assert outcome.isr == BROKERS and outcome.high_watermark == 15


def test_acks_1_leader_cut_off_then_dead_loses_what_it_acknowledged_alone() -> None:
    outcome = predict(SCHEDULES / "acks1-leader-fails-before-replication.json")
    assert outcome.acked[1] == tuple(range(11))
    assert lost(outcome) == [5, 6, 7, 8, 9]  # acked by the cut-off leader only
    assert not outcome.diverged  # it truncated them when it came back
    assert outcome.isr == BROKERS and outcome.high_watermark == 6


def test_unclean_election_after_the_isr_shrank_to_the_leader_loses_acked_records() -> None:
    outcome = predict(SCHEDULES / "unclean-after-isr-shrank.json")
    assert lost(outcome) == [3, 4, 5]  # acked by the leader alone (min ISR 1)
    # Two ISR removals (by the controller that took over from broker 3, cut from ZooKeeper),
    # the leader taken offline (by the one after it), one unclean election: real Kafka's 4.
    assert outcome.leader == 2 and outcome.leader_epoch == 4
    assert not outcome.diverged


def test_clean_variant_of_the_unclean_schedule_refuses_the_election_and_loses_nothing() -> None:
    schedule = NAMED["unclean-after-isr-shrank"]
    outcome = simulate(Schedule(schedule.name, schedule.steps, -1, 1, unclean=False))
    assert not outcome.acked_lost
    assert any("does not allow unclean election" in note for note in outcome.notes)


def test_kip101_scenario_1_loses_nothing_with_leader_epochs() -> None:
    outcome = predict(SCHEDULES / "kip101-follower-restart-leader-fails.json")
    assert outcome.acked[-1] == tuple(range(6))
    assert not outcome.acked_lost and not outcome.diverged
    assert outcome.leader == 2 and outcome.isr == BROKERS


def test_kip101_scenario_1_loses_an_acked_record_with_hw_truncation() -> None:
    """The restarted follower truncates to the HW in its checkpoint file: the five produces
    and its crash take no simulated time, so its last checkpoint (at start-up) holds HW 0, and
    it loses all five; with the HW it had in memory it would have kept all but record 4."""
    outcome = simulate(NAMED["kip101-follower-restart-leader-fails"], HW_TRUNCATION)
    assert lost(outcome) == [0, 1, 2, 3, 4]


def test_a_paused_leader_past_the_session_timeout_is_replaced_and_rejoins() -> None:
    steps = (
        Step("produce", count=2),
        Step("pause", broker=1),
        Step("wait", until="leader", timeout_s=1),
        Step("produce", count=2),  # the producer's retries find the new leader
        Step("resume", broker=1),
        Step("wait", until="isr-full"),
        Step("produce", count=1),
    )
    outcome = simulate(Schedule("pause-leader", steps))
    assert outcome.acked[-1] == (0, 1, 2, 3, 4) and not outcome.acked_lost
    assert outcome.leader == 2 and outcome.isr == BROKERS


def test_a_short_pause_goes_unnoticed_by_the_controller() -> None:
    steps = (Step("produce", count=2), Step("pause", broker=3), Step("resume", broker=3))
    outcome = simulate(Schedule("short-pause", steps))
    assert outcome.leader_epoch == 0 and outcome.isr == BROKERS


def test_controlled_shutdown_moves_leadership_with_one_epoch_bump() -> None:
    steps = (Step("produce", count=3), Step("shutdown", broker=1), Step("produce", count=3))
    outcome = simulate(Schedule("shutdown-leader", steps))
    assert outcome.leader == 2 and outcome.leader_epoch == 1 and outcome.isr == (2, 3)
    assert outcome.acked[-1] == tuple(range(6)) and not outcome.acked_lost


def test_controlled_shutdown_writes_the_hw_checkpoint_before_it_stops() -> None:
    """KafkaServer.shutdown: ReplicaManager.shutdown writes every HW before the process ends,
    so the broker restarts with the HW it had (a kill -9 keeps the last periodic write)."""
    sim = KafkaSim(Schedule("shutdown-leader", (Step("produce", count=3),)))
    sim.run()
    [tp] = sim.cluster.log_managers[1].logs
    log = sim.cluster.log(1, tp)
    assert log is not None and log.high_watermark == 3
    sim.cluster.log_managers[1].hw_checkpoint[tp] = 0  # as if no periodic write had run yet
    sim.shutdown(Step("shutdown", broker=1))
    assert sim.cluster.log_managers[1].hw_checkpoint[tp] == 3


def test_simulate_is_deterministic() -> None:
    for schedule in [*named_schedules(), *random_schedules(7, 5)]:
        assert simulate(schedule) == simulate(schedule)


def test_random_schedules_are_deterministic_for_a_seed_and_differ_across_seeds() -> None:
    assert random_schedules(3, 20) == random_schedules(3, 20)
    assert random_schedules(3, 20) != random_schedules(4, 20)


def test_random_schedules_parse_back_from_json_and_end_healed_with_a_produce() -> None:
    for schedule in random_schedules(1, 60):
        assert parse_schedule(json.loads(json.dumps(schedule.to_json()))) == schedule
        assert len(schedule.steps) <= MAX_STEPS and schedule.steps[-1].op == "produce"
        assert_ends_recovered(schedule)


def assert_ends_recovered(schedule: Schedule) -> None:
    """No partition, pause or stopped broker is left in force when the last produce runs."""
    down: set[int] = set()
    paused: set[int] = set()
    partitioned = False
    for step in schedule.steps:
        broker = step.broker or 0
        if step.op in ("crash", "shutdown"):
            down.add(broker)
            paused.discard(broker)
        elif step.op == "restart":
            down.discard(broker)
        elif step.op == "pause":
            paused.add(broker)
        elif step.op == "resume":
            paused.discard(broker)
        elif step.op in ("partition", "heal"):
            partitioned = step.op == "partition"
    assert not (down or paused or partitioned), schedule.name


def test_a_campaign_of_fifty_random_schedules_ends_with_every_broker_in_the_isr() -> None:
    for schedule in random_schedules(13, 50):
        outcome = simulate(schedule)
        assert outcome.isr == BROKERS and outcome.leader is not None, schedule.name
        assert not outcome.diverged, schedule.name


def test_timing_is_a_parameter_the_real_harness_settings_can_match() -> None:
    # A session timeout longer than the request timeout: the first acks=-1 attempt at the
    # crashed leader's successor is not reached before the producer gives up on the record.
    fast = Timing(session_timeout_ms=6_000, request_timeout_ms=5_000, delivery_timeout_ms=5_000)
    steps = (Step("crash", broker=1), Step("produce", count=1))
    assert simulate(Schedule("slow-detection", steps), timing=fast).acked[-1] == ()
    assert simulate(Schedule("slow-detection", steps)).acked[-1] == (0,)


def test_kafka_predict_prints_the_prediction_and_refuses_a_missing_file(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "kreplica", "kafka", "predict", "--runs", "1"]
    out = tmp_path / "sets.json"
    done = subprocess.run(
        [*command, str(SCHEDULES / "acks-all-leader-crash.json"), "--json", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    [written] = json.loads(out.read_text())
    assert written["single"]["acked_lost"] is False and written["single"]["diverged"] is False
    missing = subprocess.run(
        [*command, str(tmp_path / "nope.json")], capture_output=True, text=True, check=False
    )
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1
    assert "does not exist" in missing.stderr and "Traceback" not in missing.stderr


EXPECTED_LOST = {
    "acks-all-leader-crash": [],
    "acks-all-leader-partition": [],
    "acks1-leader-fails-before-replication": [5, 6, 7, 8, 9],
    "unclean-after-isr-shrank": [3, 4, 5],
    "kip101-follower-restart-leader-fails": [],
}


@pytest.mark.parametrize("name", sorted(EXPECTED_LOST))
def test_the_verdicts_hold_under_the_real_harness_timeouts(name: str) -> None:
    outcome = predict(SCHEDULES / f"{name}.json", harness_timing())
    assert lost(outcome) == EXPECTED_LOST[name] and not outcome.diverged
    assert outcome.isr == BROKERS


def test_kip101_scenario_1_under_the_harness_timeouts_fails_with_hw_truncation() -> None:
    schedule = NAMED["kip101-follower-restart-leader-fails"]
    assert lost(simulate(schedule, HW_TRUNCATION, harness_timing())) == [0, 1, 2, 3, 4]
