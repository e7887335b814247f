"""The outcomes the model allows for a schedule (conformance/kafka/predict.py), and the pieces of
a real run it draws on: the controller on a broker (seat.py) and the jitter (jitter.py).

Each scenario below is one a real Kafka 2.6.3 run showed (docs/real-kafka.md names the run);
each is pinned with a jitter that makes the one choice it needs, so the test fails if the
simulator stops modelling it, and the set is checked to be the same for the same seed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from click.testing import CliRunner

from kreplica.conformance.cli.main import main
from kreplica.conformance.kafka.compare import (
    Comparison,
    SetPlan,
    agreement_lines,
    append_journal,
    campaign,
)
from kreplica.conformance.kafka.jitter import Fixed, Jitter
from kreplica.conformance.kafka.predict import key_of, predict_set
from kreplica.conformance.kafka.schedule import Schedule, Step, load_schedule
from kreplica.conformance.kafka.simulate import KafkaSim, simulate
from kreplica.conformance.kafka.timing import harness_timing

SCHEDULES = Path(__file__).resolve().parent.parent / "schedules"


class Choose(Fixed):
    """The single prediction, but with the controller on `host` and quick harness steps."""

    def __init__(self, host: int, nemesis_ms: int = 10) -> None:
        self.host = host
        self.quick = nemesis_ms

    def first_controller(self, brokers: Sequence[int]) -> int:
        return self.host

    def nemesis_ms(self, op: str, nominal_ms: int) -> int:
        return self.quick


def run(schedule: Schedule, jitter: Fixed) -> KafkaSim:
    """The schedule's run on the simulator with the harness's timeouts and this jitter."""
    sim = KafkaSim(schedule, timing=harness_timing(), jitter=jitter)
    sim.run()
    return sim


def steps(*ops: Step) -> tuple[Step, ...]:
    return (Step("produce", count=3), *ops, Step("produce", count=1))


def test_killing_the_controllers_broker_while_it_leads_takes_two_epochs() -> None:
    """A new controller's failover takes the dead leader offline and then elects: epochs 1
    and 2 (unclean-after-isr-shrank, random-1-5); with the controller elsewhere, one."""
    schedule = Schedule(
        "kill-leader", steps(Step("crash", broker=1), Step("restart", broker=1)), acks=-1
    )
    on_leader = run(schedule, Choose(host=1)).outcome()
    elsewhere = run(schedule, Choose(host=3)).outcome()
    assert (on_leader.leader, on_leader.leader_epoch) == (2, 2)
    assert (elsewhere.leader, elsewhere.leader_epoch) == (2, 1)
    assert not on_leader.acked_lost and not elsewhere.acked_lost


def test_brokers_lost_in_one_zookeeper_tick_get_one_election() -> None:
    """A kill and a pause close together expire in one ZooKeeper watch: one onBrokerFailure,
    one election, one epoch (R22; random-1-71). Handled one by one it would take two."""
    schedule = Schedule(
        "two-at-once",
        steps(
            Step("crash", broker=1),
            Step("pause", broker=2),
            Step("wait", until="leader", timeout_s=1),
            Step("produce", count=1),
            Step("resume", broker=2),
            Step("restart", broker=1),
        ),
        acks=-1,
        min_insync_replicas=1,
    )
    outcome = run(schedule, Choose(host=3, nemesis_ms=0)).outcome()
    assert outcome.leader == 3 and outcome.leader_epoch == 1


def test_a_leader_no_isr_member_can_replace_keeps_leading_through_its_controllers_shutdown() -> (
    None
):
    """The controller's own broker, sole ISR member, shuts down: its leadership cannot move,
    no controller is left to take it offline, and when it restarts and takes the controller
    back it finds itself the live leader: epoch 0 (random-1-16)."""
    schedule = Schedule(
        "sole-leader-shutdown",
        (
            Step("produce", count=3),
            Step("partition", groups=((2, 3), (1, "zk"))),
            Step("produce", count=1),  # the followers fall behind
            Step("wait", until="isr-shrunk", timeout_s=30),
            Step("wait", until="isr-full", timeout_s=5),  # 5 s: the cut-off sessions expire
            Step("shutdown", broker=1),
            Step("heal"),
            Step("restart", broker=1),
            Step("produce", count=2),
        ),
        acks=1,
    )

    class SlowReconnect(Choose):
        def reconnect_ms(self) -> int:
            return 2_000  # the cut-off brokers' ZooKeeper clients retry after the restart

        def isr_task_phase_ms(self, period_ms: int) -> int:
            return 1_500  # the leader's shrink (4.5 s) comes before the sessions expire (6 s)

    sim = run(schedule, SlowReconnect(host=1))
    outcome = sim.outcome()
    assert outcome.leader == 1 and outcome.leader_epoch == 0
    assert sim.seat.host == 1 and sim.seat.failovers == 1


def test_an_answer_to_a_parked_fetch_crosses_the_harness_cut() -> None:
    """The harness's rules drop requests, not answers to requests that arrived before the cut:
    the followers get the record the cut-off leader appended, the producer's retry appends
    it again at the new leader, and the log holds it twice (acks-all-leader-partition)."""
    schedule = load_schedule(SCHEDULES / "acks-all-leader-partition.json")
    outcome = run(schedule, Choose(host=3)).outcome()
    assert outcome.high_watermark == 16 and not outcome.acked_lost
    assert outcome.replicas[1].records.count(5) == 2


def test_the_set_holds_the_single_prediction_and_is_the_same_for_the_same_seed() -> None:
    schedule = load_schedule(SCHEDULES / "acks-all-leader-crash.json")
    first = predict_set(schedule, runs=30, seed=4)
    again = predict_set(schedule, runs=30, seed=4)
    assert first.outcomes == again.outcomes and first.counts == again.counts
    assert first.single == key_of(simulate(schedule, timing=harness_timing()))
    assert first.single in first.outcomes
    assert sum(n for _, n in first.counts) == 30
    # The controller's broker decides the epoch: on the killed leader, a failover's two.
    assert {k[4] for k in first.outcomes} == {1, 2}


def test_jitter_draws_are_the_same_for_the_same_seed() -> None:
    a, b = Jitter(9), Jitter(9)
    assert [a.latency_ms() for _ in range(20)] == [b.latency_ms() for _ in range(20)]
    assert a.expiry_ms(1_000, 6_000) == b.expiry_ms(1_000, 6_000)


def test_a_real_outcome_outside_its_set_disagrees_and_the_lines_say_so(tmp_path: Path) -> None:
    schedule = load_schedule(SCHEDULES / "acks-all-leader-crash.json")
    predicted = simulate(schedule, timing=harness_timing())
    inside = Comparison(schedule, predicted, predicted, (), 20.0)
    odd = Comparison(
        Schedule("odd", schedule.steps, acks=-1),
        predicted,
        predicted.__class__(**{**predicted.__dict__, "leader_epoch": 7}),
        ("leader_epoch: kreplica 1 vs kafka 7",),
        20.0,
    )
    journal = tmp_path / "journal.jsonl"
    for c in (inside, odd):
        append_journal(journal, c)

    def no_cluster(s: Schedule) -> None:
        raise AssertionError(f"{s.name} is in the journal: no real run")

    results = campaign([inside.schedule, odd.schedule], no_cluster, journal, sets=SetPlan(20))  # type: ignore[arg-type]
    assert [c.agree for c in results] == [True, False]
    lines = agreement_lines(results)
    assert lines[0].startswith("2 schedules, 2 run on both: 1 real outcomes in the predicted set")
    assert "single interleaving: 1 of 2" in lines[-2]


def test_kafka_predict_prints_each_set_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "sets.json"
    result = CliRunner().invoke(
        main,
        [
            "kafka", "predict", str(SCHEDULES / "acks-all-leader-crash.json"),
            "--runs", "10", "--json", str(out),
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "acks-all-leader-crash:" in result.output and "of 10" in result.output
    [written] = json.loads(out.read_text())
    assert written["runs"] == 10 and sum(o["runs"] for o in written["outcomes"]) == 10
    distinct = {
        json.dumps({k: v for k, v in o.items() if k != "runs"}, sort_keys=True)
        for o in [*written["outcomes"], {**written["single"], "runs": 0}]
    }
    assert written["size"] == len(distinct)  # the set: every jittered outcome and the single


def test_kafka_predict_with_a_malformed_schedule_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "x", "steps": [{"op": "explode"}]}')
    result = CliRunner().invoke(main, ["kafka", "predict", str(bad)])
    assert result.exit_code == 2
    assert len(result.output.strip().splitlines()) == 1
