"""The HW checkpoint (replication-offset-checkpoint): written by the highwatermark-checkpoint
task every replica.high.watermark.checkpoint.interval.ms and read on restart, as Kafka 2.6.3's
ReplicaManager.checkpointHighWatermarks and Partition.createLog do (R13)."""

from __future__ import annotations

from kreplica.impl.cluster import START_TIME_MS
from kreplica.impl.messages import TopicPartition
from kreplica.impl.scenario import Scenario
from kreplica.impl.steps import DeleteRecords, FailLogDir, Restart

TP = TopicPartition("t", 0)


def checkpoint(sc: Scenario, broker: int) -> int | None:
    """The HW in broker's checkpoint file (None: the file holds none)."""
    return sc.cluster.log_managers[broker].hw_checkpoint.get(TP)


def next_run_ms(sc: Scenario, broker: int) -> int | None:
    return sc.cluster.brokers[broker].replica_manager.hw_checkpoint_next_ms


def test_the_task_starts_with_the_first_leader_and_isr_and_runs_every_5_s() -> None:
    sc = Scenario(brokers=2)  # the bootstrap LeaderAndIsr reached both at START_TIME_MS
    assert sc.cluster.clock.now_ms == START_TIME_MS
    assert next_run_ms(sc, 1) == next_run_ms(sc, 2) == START_TIME_MS  # due at once
    assert checkpoint(sc, 1) is None
    sc.tick(1)  # the task's first run writes HW 0
    assert checkpoint(sc, 1) == checkpoint(sc, 2) == 0
    assert next_run_ms(sc, 1) == START_TIME_MS + 5_000
    sc.produce(2, settle=False)
    sc.cluster.settle()  # followers learn the HW: parked fetches expire after 500 ms ticks
    now = sc.cluster.clock.now_ms
    assert sc.hw(1) == sc.hw(2) == 2 and now < START_TIME_MS + 5_000
    assert checkpoint(sc, 1) == checkpoint(sc, 2) == 0  # not yet written
    sc.tick(START_TIME_MS + 5_000 - 1 - now)
    assert checkpoint(sc, 1) == 0
    sc.tick(1)  # 5 s after the first run
    assert checkpoint(sc, 1) == checkpoint(sc, 2) == 2
    assert next_run_ms(sc, 1) == START_TIME_MS + 10_000
    sc.tick(12_000)  # at 17 s: the runs due at 10 s and 15 s run as one
    assert next_run_ms(sc, 1) == START_TIME_MS + 20_000  # still on the 5 s grid


def test_a_crash_restarts_with_the_checkpointed_hw_not_the_one_in_memory() -> None:
    sc = Scenario(brokers=2)
    sc.tick(1)  # checkpoint HW 0
    sc.produce(2)
    assert sc.hw(2) == 2 and checkpoint(sc, 2) == 0
    sc.crash(2)
    sc.restart(2)
    assert sc.hw(2) == 0  # Kafka 2.6.3 reads HW 0 back, though it had reached 2
    sc.checkpoint_high_watermarks(1)
    sc.crash(1, detect=False)
    sc.cluster.apply(Restart(1))
    assert sc.hw(1) == 2  # its checkpoint was current


def test_the_checkpointed_hw_is_kept_between_log_start_and_leo() -> None:
    """Log.updateHighWatermark: a checkpoint past the LEO (a power loss cut the log) is
    lowered to it; one below the log start offset (records deleted since) is raised to it."""
    sc = Scenario(brokers=2)
    sc.produce(2)
    sc.checkpoint_high_watermarks()
    assert checkpoint(sc, 2) == 2
    sc.unclean_shutdown(2)  # nothing flushed: the log is empty again
    sc.restart(2)
    assert sc.leo(2) == 0 and sc.hw(2) == 0
    sc.produce(2)  # records 3 and 4, at offsets 2 and 3 of the leader
    sc.checkpoint_high_watermarks(1)
    assert checkpoint(sc, 1) == 4
    sc.cluster.apply(DeleteRecords(TP, 3))
    assert sc.cluster.log(1, TP).log_start_offset == 3  # type: ignore[union-attr]
    sc.cluster.log_managers[1].hw_checkpoint[TP] = 1  # an older checkpoint, below the start
    sc.crash(1)
    sc.restart(1)
    assert sc.hw(1) == 3


def test_a_failed_log_dir_takes_no_checkpoint() -> None:
    sc = Scenario(brokers=2)
    sc.tick(1)
    sc.produce(1)
    sc.cluster.apply(FailLogDir(2, TP))
    sc.checkpoint_high_watermarks(2)
    sc.tick(10_000)
    assert checkpoint(sc, 2) == 0
    assert checkpoint(sc, 1) == 1


def test_a_restarted_broker_writes_nothing_before_its_first_leader_and_isr() -> None:
    """The task starts after the first LeaderAndIsr; before it the broker hosts no Partition
    (and an empty file would be no write either: no log of a live dir to list)."""
    sc = Scenario(brokers=2)
    sc.produce(1)
    sc.checkpoint_high_watermarks()
    sc.crash(2)
    sc.restart(2, deliver=False)
    assert next_run_ms(sc, 2) is None
    sc.checkpoint_high_watermarks(2)
    sc.tick(10_000)
    assert checkpoint(sc, 2) == 1 and next_run_ms(sc, 2) is None
    sc.deliver_controller()
    assert next_run_ms(sc, 2) == sc.cluster.clock.now_ms
