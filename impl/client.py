"""Client: the simulated producer/consumer node; it records every acknowledged produce."""

from __future__ import annotations

from dataclasses import dataclass

from kreplica.impl.messages import (
    NO_ERROR,
    FetchResponse,
    Message,
    ProduceRequest,
    ProduceResponse,
    TopicPartition,
)

CLIENT_ID = -1
"""Node id of the client in the simulated network."""


@dataclass(frozen=True, slots=True)
class AckedProduce:
    """A produce the client saw succeed (acks=-1 or acks=1): where its records landed."""

    tp: TopicPartition
    record_ids: tuple[int, ...]
    base_offset: int
    acks: int
    broker: int
    correlation_id: int
    time_ms: int


@dataclass(slots=True)
class SentRequest:
    """A request the client sent and is waiting on."""

    broker: int
    request: Message
    time_ms: int


class Client:
    """Sends requests with fresh correlation ids and records the answers it gets."""

    def __init__(self) -> None:
        self._correlation_id = 0
        self.pending: dict[int, SentRequest] = {}
        self.acked: list[AckedProduce] = []
        self.responses: list[tuple[int, Message]] = []
        """Answers other than PRODUCE (FETCH, LIST_OFFSETS, ...), in arrival order."""
        self.failed_produces: list[tuple[int, ProduceResponse]] = []
        """PRODUCE answers with at least one partition in error."""

    def next_correlation_id(self) -> int:
        """A fresh correlation id."""
        self._correlation_id += 1
        return self._correlation_id

    def sent(self, broker: int, request: Message, time_ms: int) -> None:
        """Remember a request that is now in flight."""
        self.pending[getattr(request, "correlation_id")] = SentRequest(  # noqa: B009
            broker, request, time_ms
        )

    def receive(self, src: int, message: Message, time_ms: int) -> None:
        """Record an answer: produces go to acked / failed_produces, the rest to responses."""
        if not isinstance(message, ProduceResponse):
            self.responses.append((src, message))
            self.pending.pop(getattr(message, "correlation_id"), None)  # noqa: B009
            return
        sent = self.pending.pop(message.correlation_id, None)
        if sent is None:
            return
        request = sent.request
        assert isinstance(request, ProduceRequest)
        records = {data.tp: data.record_ids for data in request.partitions}
        for part in message.partitions:
            if part.error is NO_ERROR and request.acks in (-1, 1):
                self.acked.append(
                    AckedProduce(
                        part.tp,
                        records.get(part.tp, ()),
                        part.base_offset,
                        request.acks,
                        src,
                        message.correlation_id,
                        time_ms,
                    )
                )
            elif part.error is not NO_ERROR and (
                not self.failed_produces or self.failed_produces[-1][1] is not message
            ):
                self.failed_produces.append((src, message))

    def fetch_responses(self) -> list[tuple[int, FetchResponse]]:
        """Every FETCH answer received, in arrival order."""
        return [(src, m) for src, m in self.responses if isinstance(m, FetchResponse)]
