"""The real cluster's clients: producers that write sequenced values, and the final read.

Every record's value is its sequence number in ASCII (0, 1, 2, ... over the whole run, whatever
its acks), sent one request at a time (no batching, one in flight, no idempotence, as the model's
client) with the partition named, so it goes to the leader the client's metadata names. An
acknowledgement is a send whose future returns an offset; any error (a timeout, NOT_ENOUGH_REPLICAS
after the retries, no leader) is a record not acknowledged. The harness's clients run as root,
outside every partition: the nemesis cuts brokers from brokers and ZooKeeper, never the client.

The final read (`read_committed_values`) asks the leader for the HW (ListOffsets, latest: the
high watermark, since no transactions run) and consumes from offset 0 up to it.
"""

from __future__ import annotations

import time
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

from kreplica.conformance.kafka.cluster import PARTITION, TOPIC, Layout

REQUEST_TIMEOUT_MS = 7000
"""One produce request's time limit: longer than replica.lag.time.max.ms (4 s), so that an
acks=-1 request waiting on a dead follower sees the ISR shrink and is answered."""

DELIVERY_TIMEOUT_MS = 10000
"""A record's time limit, retries included: the producer retries until then."""

RETRY_BACKOFF_MS = 250
"""The producer's pause before a retry (and a metadata refresh)."""


@dataclass
class ProduceLog:
    """Every value sent and what came back: acknowledged (with its offset) or the error."""

    next_value: int = 0
    sent: dict[int, list[int]] = field(default_factory=dict)
    acked: dict[int, list[int]] = field(default_factory=dict)
    offsets: dict[int, int] = field(default_factory=dict)
    errors: dict[int, str] = field(default_factory=dict)


@dataclass
class Workload:
    """One producer per acks setting (made when first used), writing sequenced values."""

    layout: Layout
    log: ProduceLog = field(default_factory=ProduceLog)
    _producers: dict[int, Any] = field(default_factory=dict)

    def produce(self, count: int, acks: int) -> tuple[int, int]:
        """Send `count` fresh values, one at a time; return (acknowledged, failed)."""
        ok = 0
        for _ in range(count):
            ok += self._send_one(acks)
        return ok, count - ok

    def _send_one(self, acks: int) -> bool:
        from kafka.errors import KafkaError

        value = self.log.next_value
        self.log.next_value += 1
        self.log.sent.setdefault(acks, []).append(value)
        try:
            future = self._producer(acks).send(TOPIC, str(value).encode(), partition=PARTITION)
            metadata = future.get(timeout=DELIVERY_TIMEOUT_MS / 1000 + 5)
        except KafkaError as err:
            self.log.errors[value] = type(err).__name__
            return False
        self.log.acked.setdefault(acks, []).append(value)
        self.log.offsets[value] = int(metadata.offset)
        return True

    def _producer(self, acks: int) -> Any:
        from kafka import KafkaProducer

        if acks not in self._producers:
            self._producers[acks] = KafkaProducer(
                bootstrap_servers=self.layout.bootstrap(),
                acks=acks,
                enable_idempotence=False,
                retries=1_000_000,
                retry_backoff_ms=RETRY_BACKOFF_MS,
                linger_ms=0,
                max_in_flight_requests_per_connection=1,
                request_timeout_ms=REQUEST_TIMEOUT_MS,
                delivery_timeout_ms=DELIVERY_TIMEOUT_MS,
                max_block_ms=5000,
                metadata_max_age_ms=2000,
                reconnect_backoff_max_ms=1000,
            )
        return self._producers[acks]

    def close(self) -> None:
        """Close the producers without waiting for anything still unsent."""
        for producer in self._producers.values():
            with suppress(Exception):  # a client closing on a dead cluster: nothing to keep
                producer.close(timeout=1)
        self._producers.clear()


@dataclass(frozen=True)
class FinalRead:
    """What a consumer read from the leader: values from offset 0 up to the HW."""

    high_watermark: int
    values: tuple[int, ...]


def read_committed_values(layout: Layout, timeout_s: float = 15.0) -> FinalRead | None:
    """The leader's HW and its records below it (None when no leader answers in time)."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import KafkaError

    tp = TopicPartition(TOPIC, PARTITION)
    try:
        consumer = KafkaConsumer(
            bootstrap_servers=layout.bootstrap(),
            group_id=None,
            enable_auto_commit=False,
            request_timeout_ms=5000,
            consumer_timeout_ms=int(timeout_s * 1000),
            reconnect_backoff_max_ms=1000,
        )
    except KafkaError:
        return None
    try:
        return _consume(consumer, tp, time.monotonic() + timeout_s)
    except KafkaError:
        return None
    finally:
        consumer.close()


def _consume(consumer: Any, tp: Any, deadline: float) -> FinalRead | None:
    consumer.assign([tp])
    end = int(consumer.end_offsets([tp])[tp])
    consumer.seek(tp, 0)
    values: list[int] = []
    while consumer.position(tp) < end:
        if time.monotonic() > deadline:
            return None
        for records in consumer.poll(timeout_ms=500).values():
            values += [_value(r.value) for r in records if r.offset < end]
    return FinalRead(high_watermark=end, values=tuple(values))


def _value(raw: bytes | None) -> int:
    """A record's value as the producer's sequence number (-1 for one it did not write)."""
    try:
        return int((raw or b"").decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return -1
