"""The real cluster's timeouts as the schedule simulator reads them: Kafka 2.6.3's defaults, or
the real harness's settings (`harness_timing()`, from real.HARNESS_TIMING and the fetcher
settings cluster.py writes), so one `Timing` value configures a simulated run as the harness
configures its brokers and producer.

May import: the standard library and this room (the `kafka` room rule, tests/test_layout.py).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Timing:
    """The real cluster's timeouts (Kafka 2.6.3 defaults); set them as the real harness does."""

    session_timeout_ms: int = 18_000
    """zookeeper.session.timeout.ms: how long the controller takes to see a silent broker gone."""
    replica_lag_time_max_ms: int = 30_000
    """replica.lag.time.max.ms (R12): a follower this long behind leaves the ISR."""
    request_timeout_ms: int = 30_000
    """The producer's request.timeout.ms, also the PRODUCE request's timeout (R14)."""
    delivery_timeout_ms: int = 120_000
    """The producer's delivery.timeout.ms: it gives a record up after this long."""
    retry_backoff_ms: int = 100
    """The producer's retry.backoff.ms."""
    retries: bool = True
    """The producer retries a failed send (retries > 0) until delivery.timeout.ms."""
    replica_fetch_wait_max_ms: int = 500
    """replica.fetch.wait.max.ms: a follower learns a new HW at most this long after it moved."""
    replica_fetch_backoff_ms: int = 1_000
    """replica.fetch.backoff.ms: a fetcher's pause after an error."""
    replica_socket_timeout_ms: int = 30_000
    """replica.socket.timeout.ms: a fetch to a broker that died unanswered fails after this."""
    replica_high_watermark_checkpoint_interval_ms: int = 5_000
    """replica.high.watermark.checkpoint.interval.ms: a crash restarts from a HW this old."""
    nemesis_ms: int = 1_000
    """Real time a nemesis step takes after it acts (the harness's own latency)."""
    wait_timeout_ms: int = 120_000
    """How long a `wait` step waits when it names no timeout_s."""
    final_settle_ms: int = 30_000
    """At the end: how long followers may take to catch up and the ISR to fill."""


HARNESS_FETCHER = {
    "replica_fetch_wait_max_ms": 100,
    "replica_fetch_backoff_ms": 200,
    "replica_socket_timeout_ms": 3_000,
}
"""The fetcher settings cluster.broker_properties writes, where real.HARNESS_TIMING lacks them."""


def harness_timing() -> Timing:
    """The timeouts the real harness sets (real.HARNESS_TIMING), as a Timing."""
    from kreplica.conformance.kafka.real import HARNESS_TIMING  # the harness, loaded on demand

    return Timing(**{**HARNESS_FETCHER, **HARNESS_TIMING})  # type: ignore[arg-type]
