"""The simulator: determinism, network faults, crashes, restarts, variants, fuzz smoke test."""

from __future__ import annotations

import random

import pytest

from kreplica.impl.client import CLIENT_ID
from kreplica.impl.cluster import Cluster, SimulationError
from kreplica.impl.config import BrokerConfig
from kreplica.impl.controller import CONTROLLER_ID
from kreplica.impl.messages import (
    AlterPartitionRequest,
    Errors,
    FetchRequest,
    OffsetsForLeaderEpochRequest,
    ProduceRequest,
    TopicPartition,
)
from kreplica.impl.scenario import Scenario
from kreplica.impl.steps import (
    Crash,
    DeleteRecords,
    Deliver,
    DoWork,
    Drop,
    Duplicate,
    FailLogDir,
    Heal,
    Isolate,
    Produce,
    Restart,
    ShrinkIsr,
    Step,
    Tick,
    UncleanShutdown,
)
from kreplica.impl.variants import Variant

TP = TopicPartition("t", 0)


def state(c: Cluster) -> tuple[object, ...]:
    rows: list[object] = [c.clock.now_ms, tuple(c.acked), tuple(e.payload for e in c.in_flight())]
    for b in c.broker_ids:
        for tp in c.partitions:
            log = c.log(b, tp)
            if log is not None:
                rows.append((b, tp, tuple(log.entries), log.high_watermark, log.recovery_point))
    return tuple(rows)


def weight(step: Step) -> float:
    if isinstance(step, Deliver | DoWork):
        return 20.0 if getattr(step, "index", 0) == 0 else 1.0
    if isinstance(step, Produce):
        return 5.0
    if isinstance(step, Tick):
        return 3.0
    return 0.4


def random_run(seed: int, steps: int, variant: Variant | None = None, unclean: bool = True):  # type: ignore[no-untyped-def]
    rng = random.Random(seed)
    c = Cluster((1, 2, 3), {"t": 2}, variant=variant)
    for _ in range(steps):
        enabled = c.enabled_steps()
        if not unclean:
            enabled = [s for s in enabled if not isinstance(s, UncleanShutdown)]
        c.apply(rng.choices(enabled, [weight(s) for s in enabled])[0])
        yield c


# ------------------------------------------------------------------------- determinism


def test_same_schedule_gives_the_same_run() -> None:
    *_, first = random_run(7, 300)
    *_, second = random_run(7, 300)
    assert first.history == second.history
    assert state(first) == state(second)
    replay = Cluster((1, 2, 3), {"t": 2})
    replay.run(list(first.history))
    assert state(replay) == state(first)


def test_fuzz_smoke_correct_protocol_keeps_safety_properties() -> None:
    for seed in range(6):
        for c in random_run(seed, 250, unclean=False):
            for tp in c.partitions:
                for b in c.broker_ids:
                    log = c.log(b, tp)
                    assert log is None or log.high_watermark <= log.log_end_offset
                    partition = c.partition(b, tp)
                    if c.is_alive(b) and partition is not None and partition.is_leader:
                        hw = partition.log.high_watermark  # type: ignore[union-attr]
                        prefix = [e for e in partition.log.entries if e.offset < hw]  # type: ignore[union-attr]
                        for r in partition.in_sync_replica_ids:
                            other = c.log(r, tp)
                            assert other is not None
                            assert [e for e in other.entries if e.offset < hw] == prefix
        for ack in c.acked:
            leader = c.leader(ack.tp)
            log = c.log(leader, ack.tp) if leader is not None else None
            if ack.acks == -1 and log is not None:
                entry = [e for e in log.entries if e.offset == ack.base_offset]
                assert [e.record_id for e in entry] == [ack.record_ids[0]]


def test_enabled_steps_lists_network_fetcher_client_time_and_fault_steps() -> None:
    c = Cluster((1, 2, 3))
    c.apply(Produce(TP, (1,)))
    kinds = {type(s).__name__ for s in c.enabled_steps()}
    assert {"Deliver", "Drop", "Duplicate", "DoWork", "Produce", "Tick", "ShrinkIsr"} <= kinds
    assert {"Crash", "UncleanShutdown", "Flush", "DetectFailure", "Elect"} <= kinds
    assert "Restart" not in kinds
    calm = {type(s).__name__ for s in c.enabled_steps(reorder=False, faults=False)}
    assert "Crash" not in calm and "Drop" not in calm


def test_impossible_steps_raise_simulation_error() -> None:
    c = Cluster((1, 2, 3))
    with pytest.raises(SimulationError):
        c.apply(Deliver(1, 2))
    with pytest.raises(SimulationError):
        c.apply(Restart(1))


# ------------------------------------------------------------------------------ network


def test_deliver_with_index_reorders_a_link() -> None:
    c = Cluster((1, 2, 3))
    c.apply(Produce(TP, (1,), acks=1))
    c.apply(Produce(TP, (2,), acks=1))
    c.apply(Deliver(CLIENT_ID, 1, 1))
    c.apply(Deliver(CLIENT_ID, 1, 0))
    log = c.log(1, TP)
    assert log is not None and log.record_ids() == [2, 1]


def test_drop_and_duplicate() -> None:
    c = Cluster((1, 2, 3))
    c.apply(Produce(TP, (1,), acks=1))
    c.apply(Duplicate(CLIENT_ID, 1))
    c.apply(Deliver(CLIENT_ID, 1))
    c.apply(Deliver(CLIENT_ID, 1))  # the duplicate appends the record again
    c.apply(Produce(TP, (2,), acks=1))
    c.apply(Drop(CLIENT_ID, 1))
    c.run_until_quiescent()
    log = c.log(1, TP)
    assert log is not None and log.record_ids() == [1, 1]
    assert [a.record_ids for a in c.acked] == [(1,)]  # one ack per correlation id
    assert c.network.dropped == 1 and c.network.duplicated == 1


def test_isolated_link_holds_messages_until_healed() -> None:
    c = Cluster((1, 2, 3))
    c.apply(Isolate(CLIENT_ID, 1))
    c.apply(Produce(TP, (1,), acks=1))
    c.run_until_quiescent()
    assert c.acked == [] and len(c.in_flight()) == 1
    c.apply(Heal(CLIENT_ID, 1))
    c.run_until_quiescent()
    assert len(c.acked) == 1


# ------------------------------------------------------------------------------- faults


def test_crash_drops_messages_to_the_broker_and_old_incarnation_answers() -> None:
    sc = Scenario(brokers=3)
    sc.produce(1)
    sc.do_work(2, 1)  # a fetch from 2 is in flight to 1
    sc.deliver(2, 1)
    sc.cluster.apply(Crash(2))
    assert all(e.dst != 2 for e in sc.cluster.in_flight())
    sc.cluster.apply(Restart(2))
    sc.tick(500)  # the parked fetch of the old incarnation of 2 expires
    sc.run()
    assert sc.cluster.network.dropped >= 1
    sc.settle()
    assert sc.records(2) == [1]


def test_unclean_shutdown_loses_exactly_the_unflushed_tail() -> None:
    sc = Scenario(brokers=3)
    sc.produce(2)
    sc.flush(2)
    sc.produce(1)
    sc.unclean_shutdown(2)
    assert sc.records(2) == [1, 2]
    assert sc.records(1) == [1, 2, 3]
    sc.restart(2)
    sc.settle()
    assert sc.records(2) == [1, 2, 3]
    assert 2 in sc.isr()


def test_crash_keeps_the_whole_log() -> None:
    sc = Scenario(brokers=3)
    sc.produce(2)
    sc.crash(3)
    sc.restart(3)
    assert sc.records(3) == [1, 2]


def test_r11_r12_end_to_end_isr_shrinks_and_expands() -> None:
    sc = Scenario(brokers=3, config=BrokerConfig(replica_lag_time_max_ms=1_000))
    sc.produce(1)
    sc.isolate(1, 3)
    sc.send_produce(1, acks=1)
    sc.run()
    sc.tick(1_001)
    sc.cluster.apply(ShrinkIsr(1))
    assert sc.isr() == (1, 2)
    sc.heal(1, 3)
    sc.settle()
    assert sc.isr() == (1, 2, 3)
    assert sc.records(3) == [1, 2]


def test_produce_times_out_end_to_end() -> None:
    sc = Scenario(brokers=3)
    sc.isolate(1, 2)
    sc.isolate(1, 3)
    sc.cluster.apply(Produce(TP, (1,), acks=-1, timeout_ms=1_000))
    sc.run()
    sc.tick(1_000)
    sc.run()
    responses = [m for _, m in sc.cluster.client.failed_produces]
    assert responses[-1].partitions[0].error is Errors.REQUEST_TIMED_OUT
    assert sc.records(1) == [1] and sc.acked_records() == []


def test_r9_end_to_end_follower_behind_leader_log_start_restarts_its_log() -> None:
    sc = Scenario(brokers=3)
    sc.produce(2)
    sc.crash(3)
    sc.produce(3)
    sc.cluster.apply(DeleteRecords(TP, 4))
    assert sc.cluster.log(1, TP).log_start_offset == 4  # type: ignore[union-attr]
    sc.restart(3)
    sc.settle()
    log = sc.cluster.log(3, TP)
    assert log is not None and log.log_start_offset == 4
    assert sc.records(3) == [5]


def test_failed_log_dir_on_a_follower_marks_the_partition_failed() -> None:
    sc = Scenario(brokers=3)
    sc.produce(1)
    sc.cluster.apply(FailLogDir(3, TP))
    sc.produce(1)
    fetchers = sc.cluster.broker(3).replica_manager.replica_fetcher_manager
    assert TP in fetchers.failed_partitions  # the append hit the storage error
    assert sc.records(3) == [1] and sc.records(1) == [1, 2]
    sc.crash(3)
    sc.restart(3)  # the restarted broker has a working log directory again
    sc.settle()
    assert sc.records(3) == [1, 2]


# ----------------------------------------------------------------------------- variants


def test_fencing_off_sends_no_current_leader_epoch() -> None:
    sc = Scenario(brokers=2, variant=Variant(fencing="off"))
    sc.produce(1)
    sc.elect(1)  # new epoch: the follower truncates with an OLE request
    sc.tick(500)  # its parked fetch expires; the stale answer is ignored
    sc.deliver(1, 2)
    sc.do_work(2, 1)
    [ole] = [e.payload for e in sc.cluster.in_flight() if e.src == 2 and e.dst == 1]
    assert isinstance(ole, OffsetsForLeaderEpochRequest)
    assert ole.partitions[0].current_leader_epoch is None
    sc.settle()
    fetcher = sc.cluster.broker(2).replica_manager.replica_fetcher_manager.fetchers[1]
    assert fetcher.in_flight is not None
    fetch = fetcher.in_flight.request
    assert isinstance(fetch, FetchRequest)
    assert fetch.partitions[0].current_leader_epoch is None


def test_alter_partition_mode_sends_isr_changes_as_messages() -> None:
    config = BrokerConfig(replica_lag_time_max_ms=1_000)
    sc = Scenario(brokers=3, variant=Variant(isr="alter-partition"), config=config)
    sc.produce(1)
    sc.isolate(1, 3)
    sc.send_produce(1, acks=1)
    sc.run()
    sc.tick(1_001)
    sc.shrink_isr(1)
    partition = sc.cluster.partition(1, TP)
    assert partition is not None and partition.pending_isr == {1, 2}
    assert partition.in_sync_replica_ids == {1, 2, 3}
    [request] = [e.payload for e in sc.cluster.in_flight() if e.dst == CONTROLLER_ID]
    assert isinstance(request, AlterPartitionRequest)
    assert sc.hw(1) == 1  # the maximal ISR still includes 3
    sc.deliver(1, CONTROLLER_ID)
    sc.deliver(CONTROLLER_ID, 1)
    assert partition.in_sync_replica_ids == {1, 2} and partition.pending_isr is None
    assert sc.isr() == (1, 2)
    assert sc.hw(1) == 2


def test_elr_is_not_implemented() -> None:
    with pytest.raises(NotImplementedError):
        Cluster((1, 2, 3), variant=Variant(elr="on"))


def test_acks_dimension_sets_the_default_acks() -> None:
    c = Cluster((1, 2, 3), variant=Variant(acks="1"))
    step = c.next_record(TP)
    assert step.acks == 1
    c.apply(step)
    [envelope] = c.in_flight()
    assert isinstance(envelope.payload, ProduceRequest) and envelope.payload.acks == 1


def test_enabled_produce_steps_use_fresh_record_ids() -> None:
    c = Cluster((1, 2, 3))
    first = next(s for s in c.enabled_steps() if isinstance(s, Produce))
    c.apply(first)
    second = next(s for s in c.enabled_steps() if isinstance(s, Produce))
    assert first.record_ids != second.record_ids
    assert c.next_record(TP).record_ids == second.record_ids  # not applied: still free
