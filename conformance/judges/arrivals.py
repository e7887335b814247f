"""The client's requests as the brokers met them: the judges' ledger of arrivals and answers.

`client_answers` judges each answer a broker sends to the client, and each request a broker
holds, against what the spec allows from the moment the request arrived: a delayed PRODUCE's
or FETCH's wait starts then, a PRODUCE's answer carries the log start offset of then, a FETCH
is read on the log segment of then. `Arrivals` keeps that ledger from the steps of a run: it
notes a client request before the step that delivers it runs (`before`), then the answers the
step sent (`after`). The recorder records; this ledger belongs to the judges.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kreplica.conformance.bridge.projection import CLIENT, State, log_start_of
from kreplica.impl.cluster import Cluster
from kreplica.impl.messages import TopicPartition
from kreplica.impl.network import Envelope
from kreplica.impl.steps import Deliver, Step


@dataclass(frozen=True)
class Arrival:
    """A client request a broker got: which broker, in which incarnation, and when (a
    delayed PRODUCE's or FETCH's wait starts then)."""

    broker: int
    incarnation: int
    time_ms: int
    request: Any
    log_start: int
    """The broker's log start offset when the request arrived (a PRODUCE's answer carries it)."""
    segment: int | None = None
    """The base offset of the broker's log segment when the request arrived: a FETCH's offset
    is read on it (None: the broker has no log of the partition)."""


def correlation_id(message: Any) -> int:
    """A message's correlation id (-1 for one that carries none)."""
    return int(getattr(message, "correlation_id", -1))


@dataclass
class Arrivals:
    """The client's requests that reached a broker, and which of them a broker answered."""

    arrivals: dict[int, Arrival] = field(default_factory=dict)
    """The client's requests that reached a broker, by correlation id."""
    arrived: int | None = None
    """The correlation id of the client request the last step delivered, if any."""
    answered: set[int] = field(default_factory=set)
    """The correlation ids of the client's requests a broker has answered (a FETCH may wait
    in the purgatory first)."""
    waiting: dict[int, Arrival] = field(default_factory=dict)
    """The arrivals not answered yet, in the order of `arrivals` (a broker holds them)."""

    def before(
        self, cluster: Cluster, tp: TopicPartition, state: State, step: Step
    ) -> Arrival | None:
        """The client request `step` delivers to a running broker, as it stands before the
        step runs (None: the step delivers none)."""
        if not (isinstance(step, Deliver) and step.src == CLIENT):
            return None
        envelope = cluster.network.peek((step.src, step.dst), step.index)
        if envelope is None or not cluster.is_alive(step.dst):
            return None
        incarnation = cluster.brokers[step.dst].incarnation
        log = cluster.log(step.dst, tp)
        segment = None if log is None else log.base_offset
        now = cluster.clock.now_ms
        start = log_start_of(state, step.dst)
        return Arrival(step.dst, incarnation, now, envelope.payload, start, segment)

    def after(self, arrival: Arrival | None, sent: list[Envelope]) -> None:
        """Note the request that arrived (from `before`) and the answers the step sent."""
        self.arrived = None
        if arrival is not None:
            key = self.arrived = correlation_id(arrival.request)
            self.arrivals[key] = arrival
            if key not in self.answered:
                self.waiting[key] = arrival
        for answer in (correlation_id(e.payload) for e in sent if e.dst == CLIENT):
            self.answered.add(answer)
            self.waiting.pop(answer, None)
