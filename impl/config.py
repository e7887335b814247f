"""Broker and topic configuration, with Kafka 2.6.3 defaults (KafkaConfig / LogConfig)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BrokerConfig:
    """The settings the replication path reads; names follow Kafka's config keys."""

    replica_lag_time_max_ms: int = 30_000
    """replica.lag.time.max.ms (R12, R13)."""
    min_insync_replicas: int = 1
    """min.insync.replicas (R14)."""
    replica_fetch_wait_max_ms: int = 500
    """replica.fetch.wait.max.ms: how long a follower fetch may wait in the leader's purgatory."""
    replica_fetch_min_bytes: int = 1
    """replica.fetch.min.bytes."""
    replica_fetch_max_bytes: int = 1_048_576
    """replica.fetch.max.bytes: per-partition max bytes in a follower fetch."""
    replica_fetch_response_max_bytes: int = 10_485_760
    """replica.fetch.response.max.bytes: response-level max bytes in a follower fetch."""
    replica_fetch_backoff_ms: int = 1_000
    """replica.fetch.backoff.ms: the delay of a partition after an error (R7, R8)."""
    replica_socket_timeout_ms: int = 30_000
    """replica.socket.timeout.ms: a fetcher request without an answer fails after this long."""
    replica_high_watermark_checkpoint_interval_ms: int | None = 5_000
    """replica.high.watermark.checkpoint.interval.ms: how often the highwatermark-checkpoint
    task writes every HW to disk; a restart reads the last one written (R13). None: only a
    CheckpointHighWatermarks step runs it (a replay of a spec trace, where the spec decides)."""
    max_message_bytes: int = 1_000_012
    """message.max.bytes: the largest record batch a leader accepts."""
    flush_interval_messages: int | None = None
    """log.flush.interval.messages: flush after this many unflushed records (None = never)."""
