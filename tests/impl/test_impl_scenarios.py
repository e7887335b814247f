"""End-to-end scenarios on the simulator: KIP-101 S1/S2, KIP-279 S3, KAFKA-7164 S7, seeded bugs."""

from __future__ import annotations

import pytest

from kreplica.impl.client import CLIENT_ID
from kreplica.impl.config import BrokerConfig
from kreplica.impl.controller import CONTROLLER_ID
from kreplica.impl.scenario import Scenario
from kreplica.impl.variants import Variant

EPOCH_TRUNCATION = ["kip279", "kip101", "fetch-diverging"]


def s1_without_restart(truncation: str) -> Scenario:
    """S1: a LeaderAndIsr (ISR shrink bumps the epoch) makes follower A truncate to its HW."""
    sc = Scenario(brokers=3, variant=Variant(truncation=truncation))  # B=1 leads, A=2, C=3
    m1, m2 = 1, 2
    assert sc.produce(1) == [m1]
    assert sc.send_produce(1) == [m2]
    sc.deliver(CLIENT_ID, 1)  # B appends m2; the parked fetches of A and C complete
    sc.deliver(1, 2)
    sc.deliver(1, 3)
    assert sc.records(2) == [m1, m2] and sc.hw(2) == 1
    sc.fetch(2, respond=False)  # A and C fetch at 2: B's HW becomes 2 and m2 is acked
    sc.fetch(3, respond=False)
    sc.deliver(1, CLIENT_ID)
    assert sc.acked_records() == [m1, m2]
    assert (sc.hw(1), sc.hw(2)) == (2, 1)  # A has not seen the new HW yet
    sc.crash(3)  # the controller drops C from the ISR: new epoch, LeaderAndIsr to A and B
    sc.deliver_controller()
    sc.tick(500)  # A's fetch parked at B expires; A ignores the answer (it is Truncating now)
    sc.deliver(1, 2)
    assert sc.hw(2) == 1
    sc.do_work(2, 1)  # A's truncation step: to its HW (hw) or an OLE request (epochs)
    sc.crash(1)  # B dies before A re-fetches m2; A is elected from the ISR
    sc.deliver_controller()
    assert sc.leader() == 2
    return sc


def test_s1_kip101_scenario_1_loses_acked_data_with_hw_truncation() -> None:
    sc = s1_without_restart("hw")
    assert sc.records(2) == [1]
    assert sc.lost_acked() == [2]
    sc.produce(1)  # the new leader writes over offset 1
    assert sc.log(2)[1][2] != 2


@pytest.mark.parametrize("truncation", EPOCH_TRUNCATION)
def test_s1_kip101_scenario_1_no_loss_with_leader_epochs(truncation: str) -> None:
    sc = s1_without_restart(truncation)
    assert sc.records(2) == [1, 2]
    assert sc.lost_acked() == []


@pytest.mark.parametrize(
    ("truncation", "checkpointed", "lost"),
    [("hw", True, [2]), ("hw", False, [1, 2]), ("kip279", True, []), ("kip279", False, [])],
)
def test_s1_with_restart_and_unclean_election(
    truncation: str, checkpointed: bool, lost: list[int]
) -> None:
    """In 2.6.3 a restarted follower leaves the ISR, so only an unclean election elects it. It
    restarts with its checkpointed HW: 1 if the checkpoint task ran after B learned it, else 0,
    and truncation to the HW then cuts m1 too; leader epochs lose nothing either way."""
    sc = Scenario(brokers=2, variant=Variant(truncation=truncation, election="unclean"))
    assert sc.produce(1) == [1]
    sc.send_produce(1)
    sc.deliver(CLIENT_ID, 1)
    sc.deliver(1, 2)
    sc.fetch(2, respond=False)
    sc.deliver(1, CLIENT_ID)
    assert sc.acked_records() == [1, 2] and sc.hw(2) == 1
    if checkpointed:
        sc.checkpoint_high_watermarks(2)
    sc.crash(2)
    sc.restart(2)  # back as a follower, out of the ISR
    assert sc.isr() == (1,)
    sc.do_work(2, 1)  # truncate to HW (hw) or send OLE (epochs)
    sc.crash(1)  # before A re-fetches m2; unclean election picks A
    sc.deliver_controller()
    assert sc.leader() == 2
    assert sc.lost_acked() == lost


def s2_power_outage(truncation: str) -> Scenario:
    """S2: A (1) and B (2) lose power; B loses unflushed m2, is elected and writes m3."""
    sc = Scenario(brokers=2, variant=Variant(truncation=truncation))
    [m1] = sc.produce(1)
    sc.flush()
    [m2] = sc.produce(1)
    assert sc.records(1) == sc.records(2) == [m1, m2] and sc.hw(1) == sc.hw(2) == 2
    sc.checkpoint_high_watermarks()  # both wrote HW 2 to their checkpoint files
    sc.flush(1)  # only A flushed m2
    sc.unclean_shutdown(1, detect=False)
    sc.unclean_shutdown(2, detect=False)
    sc.detect_failure(1)
    sc.detect_failure(2)
    assert sc.records(2) == [m1] and sc.records(1) == [m1, m2]
    sc.restart(2)  # B first: it is the last ISR member, so it leads
    assert sc.leader() == 2
    [m3] = sc.produce(1)
    assert sc.records(2) == [m1, m3]
    sc.restart(1)  # A comes back as a follower with HW 2
    sc.settle()
    sc.produce(1)
    return sc


def test_s2_kip101_scenario_2_diverges_with_hw_truncation() -> None:
    sc = s2_power_outage("hw")
    assert sc.records(1) == [1, 2, 4]
    assert sc.records(2) == [1, 3, 4]
    assert sc.diverged()


@pytest.mark.parametrize("truncation", EPOCH_TRUNCATION)
def test_s2_kip101_scenario_2_no_divergence_with_leader_epochs(truncation: str) -> None:
    sc = s2_power_outage(truncation)
    assert sc.records(1) == sc.records(2) == [1, 3, 4]
    assert not sc.diverged()


def s3_fast_failover(truncation: str) -> Scenario:
    """S3: B leads e1 briefly and writes m3; A (which never saw e1) leads e2 and writes m4."""
    sc = Scenario(brokers=2, variant=Variant(truncation=truncation))  # A=1 leads e0, B=2
    [m1] = sc.produce(1)
    [m2] = sc.send_produce(1, acks=1)
    sc.deliver(CLIENT_ID, 1)  # A appends m2/e0; B's parked fetch answer is lost
    assert sc.drop(1, 2) == 1
    assert sc.elect(2, deliver=False).name == "NONE"  # B becomes leader in e1 ...
    sc.deliver_controller(2)
    sc.drop(CONTROLLER_ID, 1)  # ... and A never hears about e1
    [m3] = sc.produce(1, acks=1, settle=False)
    assert sc.log(2) == [(0, 0, m1), (1, 1, m3)]
    assert sc.elect(1).name == "NONE"  # leadership returns to A in e2 (A is still in the ISR)
    [m4] = sc.produce(1, acks=1, settle=False)
    assert sc.log(1) == [(0, 0, m1), (1, 0, m2), (2, 2, m4)]
    sc.settle()
    return sc


def test_s3_kip279_scenario_diverges_under_kip101() -> None:
    sc = s3_fast_failover("kip101")
    assert sc.records(1) == [1, 2, 4]
    assert sc.records(2) == [1, 3, 4]  # B "truncated" to 2: nothing removed
    assert sc.diverged()
    assert sc.hw(1) == 3  # and the divergent offset 1 is below the HW


@pytest.mark.parametrize("truncation", ["kip279", "fetch-diverging"])
def test_s3_kip279_scenario_is_fine_under_kip279(truncation: str) -> None:
    sc = s3_fast_failover(truncation)
    assert sc.records(1) == sc.records(2) == [1, 2, 4]
    assert not sc.diverged()


def s7_same_leader_new_epoch(bugs: frozenset[str]) -> Scenario:
    """S7: B misses epoch 1 (leader C) and then hears 'leader A, epoch 2' from its old leader."""
    sc = Scenario(brokers=3, variant=Variant(bugs=bugs))  # A=1 leads e0, B=2, C=3
    [m1] = sc.produce(1)
    assert sc.send_produce(1, acks=1) == [2]  # m2
    sc.deliver(CLIENT_ID, 1)
    sc.deliver(1, 2)  # only B gets m2
    sc.drop(1, 3)
    sc.elect(3, deliver=False)  # C leads e1; B never hears about it
    sc.deliver_controller(1)
    sc.deliver_controller(3)
    sc.drop(CONTROLLER_ID, 2)
    sc.run()  # A truncates m2 (OLE to C) and follows C
    [m3] = sc.produce(1, acks=1)
    assert sc.records(1) == [m1, m3]
    sc.elect(1)  # back to A in e2: for B the leader id did not change
    sc.settle()
    return sc


def test_s7_follower_truncates_when_same_leader_has_a_new_epoch() -> None:
    sc = s7_same_leader_new_epoch(frozenset())
    assert sc.records(2) == [1, 3]
    assert not sc.diverged()


def test_s7_seeded_bug_skip_same_leader_truncation_diverges() -> None:
    sc = s7_same_leader_new_epoch(frozenset({"skip-same-leader-truncation"}))
    assert sc.records(2)[:2] == [1, 2]
    assert sc.diverged()


def test_seeded_bug_early_ack_loses_acked_record_under_clean_election() -> None:
    for bugs, lost in ((frozenset(), []), (frozenset({"early-ack"}), [2])):
        sc = Scenario(brokers=3, variant=Variant(bugs=bugs))
        sc.produce(1)
        sc.send_produce(1)
        sc.deliver(CLIENT_ID, 1)
        sc.drop(1, 2)
        sc.drop(1, 3)  # the followers never see m2
        sc.deliver(1, CLIENT_ID)
        sc.crash(1)
        sc.deliver_controller()
        assert sc.leader() == 2
        assert sc.lost_acked() == lost


def test_steady_state_replicates_everything_and_acks_everything() -> None:
    sc = Scenario(brokers=3, partitions=3)
    for p in range(3):
        tp = type(sc.tp)("t", p)
        sc.produce(4, tp=tp, settle=False)
    sc.settle()
    for p in range(3):
        tp = type(sc.tp)("t", p)
        leader = sc.leader(tp)
        assert leader is not None
        records = sc.records(leader, tp)
        assert len(records) == 4
        for b in sc.cluster.assignment[tp]:
            assert sc.records(b, tp) == records
            assert sc.hw(b, tp) == 4
        assert sorted(sc.acked_records(tp)) == sorted(records)


def s6_stale_hw_expansion(bugs: frozenset[str]) -> Scenario:
    """S6: new leader B has a stale HW; lagging C reaches that HW but not B's epoch start."""
    config = BrokerConfig(replica_lag_time_max_ms=1_000)
    sc = Scenario(4, variant=Variant(bugs=bugs), config=config, replication_factor=4)
    [m1] = sc.produce(1)
    sc.isolate(1, 3)  # C stops fetching from A
    [m2] = sc.send_produce(1)
    sc.run()
    assert sc.records(2) == sc.records(4) == [m1, m2] and sc.records(3) == [m1]
    sc.tick(1_001)  # parked fetches expire (HW still 1), then the ISR expires C
    sc.run()
    sc.shrink_isr(1)
    assert sc.isr() == (1, 2, 4)
    sc.deliver(1, CLIENT_ID)
    assert sc.acked_records() == [m1, m2] and sc.hw(1) == 2 and sc.hw(2) == 1
    sc.isolate(2, 4)  # D will not fetch from B for a while
    sc.crash(1)  # B is elected; D's LEO is unknown to B, so B's HW stays at 1 (true HW: 2)
    sc.deliver_controller()
    assert sc.leader() == 2 and sc.hw(2) == 1
    assert sc.cluster.partition(2, sc.tp).leader_epoch_start_offset == 2  # type: ignore[union-attr]
    sc.do_work(3, 2)  # C truncates against B (nothing to remove) ...
    sc.deliver(3, 2)
    sc.deliver(2, 3)
    sc.fetch(3, 2, respond=False)  # ... and fetches at its LEO 1 = B's HW
    sc.drop(2, 3)  # C never receives m2
    sc.crash(4)
    sc.crash(2)
    sc.deliver_controller()
    return sc


def test_s6_leso_guard_keeps_incomplete_follower_out_of_isr() -> None:
    sc = s6_stale_hw_expansion(frozenset())
    assert sc.leader() is None  # no complete replica is alive: unavailable, not lossy
    assert sc.records(3) == [1]


def test_s6_seeded_bug_no_leso_guard_loses_committed_data() -> None:
    sc = s6_stale_hw_expansion(frozenset({"no-leso-guard"}))
    assert sc.leader() == 3
    assert sc.lost_acked() == [2]


@pytest.mark.parametrize(
    ("bugs", "lost"), [(frozenset(), []), (frozenset({"hw-from-non-isr"}), [2])]
)
def test_seeded_bug_hw_from_non_isr_commits_without_a_lagging_isr_member(
    bugs: frozenset[str], lost: list[int]
) -> None:
    config = BrokerConfig(replica_lag_time_max_ms=1_000)
    sc = Scenario(brokers=3, variant=Variant(bugs=bugs), config=config)
    [m1] = sc.produce(1)
    sc.isolate(1, 3)  # C stays in the ISR but stops fetching
    [m2] = sc.send_produce(1)
    sc.run()
    assert sc.acked_records() == [m1]
    sc.tick(1_001)  # C is no longer caught up; the ISR has not been shrunk yet
    sc.run()
    sc.send_produce(1, acks=1)  # a leader append recomputes the HW
    sc.run()
    assert (m2 in sc.acked_records()) == bool(lost)
    sc.crash(1)
    sc.crash(2)
    sc.deliver_controller()
    assert sc.leader() == 3  # C never left the ISR
    assert sc.lost_acked() == lost
