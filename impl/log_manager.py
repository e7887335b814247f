"""LogManager: the broker's logs on disk; they outlive a crash of the broker process."""

from __future__ import annotations

from kreplica.impl.config import BrokerConfig
from kreplica.impl.log import Log
from kreplica.impl.messages import TopicPartition


class LogManager:
    """One Log per partition, kept across restarts; an unclean shutdown cuts unflushed tails."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.logs: dict[TopicPartition, Log] = {}
        self.hw_checkpoint: dict[TopicPartition, int] = {}
        """The replication-offset-checkpoint file of the log dir: the HW of each partition as
        ReplicaManager.checkpointHighWatermarks last wrote it. It outlives a crash; the HWs in
        memory (each Log's high_watermark) do not."""

    def get_log(self, tp: TopicPartition) -> Log | None:
        """The log of tp, if this broker has one."""
        return self.logs.get(tp)

    def get_or_create_log(self, tp: TopicPartition) -> Log:
        """The log of tp, created empty at offset 0 if absent (LogManager.getOrCreateLog)."""
        log = self.logs.get(tp)
        if log is None:
            log = Log(tp, self.config.max_message_bytes, self.config.flush_interval_messages)
            self.logs[tp] = log
        return log

    def flush_all(self) -> None:
        """Flush every log: move each recovery point to its LEO; a log on a failed dir stays
        as it is (Log.flush raises KafkaStorageException, LogManager.flushDirtyLogs goes on)."""
        for tp in sorted(self.logs):
            if not self.logs[tp].offline:
                self.logs[tp].flush()

    def write_hw_checkpoint(self, high_watermarks: dict[TopicPartition, int]) -> None:
        """Replace the replication-offset-checkpoint file's contents (OffsetCheckpointFile.write);
        a failed log dir takes no write (KafkaStorageException, which the caller logs)."""
        if any(log.offline for log in self.logs.values()):
            return
        self.hw_checkpoint = dict(high_watermarks)

    def load_high_watermarks(self) -> None:
        """At start-up each log's HW is its checkpointed one, or 0 if none, kept between its
        log start offset and its LEO (Partition.createLog, Log.updateHighWatermark; R13).
        Kafka reads the file when the first LeaderAndIsr creates the Partition; nothing writes
        it before then (the checkpoint task starts there), so reading it now is the same."""
        for tp in sorted(self.logs):
            self.logs[tp].update_high_watermark(self.hw_checkpoint.get(tp, 0))

    def recover_all(self, unclean: bool) -> None:
        """Reload every log at start-up; after an unclean shutdown lose unflushed records. A
        power loss does not repair a failed log dir: only the restart brings it back."""
        for tp in sorted(self.logs):
            log = self.logs[tp]
            failed = log.offline
            log.recover(lose_unflushed=unclean)
            log.offline = failed and unclean
