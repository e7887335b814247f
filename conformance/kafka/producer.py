"""The harness's producer in the schedule simulator: one record per request, retries, metadata.

Theory of operation. `Producer.produce(step)` sends `count` fresh values, one request each, as
the real harness's kafka-python producer does (R14): each value goes to the leader the producer
believes in; an answer with an error, no answer within request.timeout.ms, or a refused
connection makes it refresh its metadata and retry after retry.backoff.ms, until
delivery.timeout.ms. Only an answer without error, received in time, counts as acknowledged.
Metadata comes from one broker (`Jitter.metadata_broker`): a paused one answers nothing until
the request's time-out, one the controller cannot reach answers from its own stale view; a
request the broker has not read when the producer gives up is never handled. Every attempt of
a value is a fresh simulator record id mapped back to that value, so a retried value may sit in
a log twice, as on a real cluster without idempotence.

May import: `kreplica.impl` and this room (the `kafka` room rule, tests/test_layout.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kreplica.conformance.kafka.schedule import BROKERS, Step
from kreplica.impl.client import CLIENT_ID
from kreplica.impl.steps import Drop, Produce

if TYPE_CHECKING:
    from kreplica.conformance.kafka.simulate import KafkaSim


class Producer:
    """The schedule's producer, acting on the simulator `sim` (its clock, cluster and world)."""

    def __init__(self, sim: KafkaSim) -> None:
        self.sim = sim

    def produce(self, step: Step) -> None:
        """Produce `count` fresh values one request each, each until acked or given up (R14)."""
        acks = self.sim.schedule.acks if step.acks is None else step.acks
        self.sim.world.acked.setdefault(acks, [])
        for _ in range(step.count or 0):
            value = self.sim.world.next_value
            self.sim.world.next_value += 1
            if self.send_value(value, acks):
                self.sim.world.acked[acks].append(value)

    def send_value(self, value: int, acks: int) -> bool:
        """The producer's attempts for one value; True if one was acknowledged in time."""
        deadline = self.sim.now + self.sim.timing.delivery_timeout_ms
        while True:
            if self._attempt(value, acks, deadline):
                return True
            if not self.sim.timing.retries or self.sim.now >= deadline:
                return False
            self._refresh_metadata(deadline)
            self.sim.advance(max(0, min(self.sim.timing.retry_backoff_ms, deadline - self.sim.now)))

    def _refresh_metadata(self, deadline: int) -> None:
        """The producer asks a broker for the partition's leader: the one the jitter picks
        among the running ones (a paused one answers nothing until request.timeout.ms, as
        kafka-python's metadata refresh found in random-1-51; one the controller cannot reach
        answers from its own view), else the controller's view."""
        sim = self.sim
        asked = sim.jitter.metadata_broker([b for b in BROKERS if sim.cluster.is_alive(b)])
        if asked is not None and asked in sim.world.paused:
            sim.advance(max(0, min(sim.timing.request_timeout_ms, deadline - sim.now)))
            self.sim.jitter.metadata_timed_out()
            return
        if asked is not None and not self.sim.seat.reaches(self.sim, asked):
            # A broker the controller cannot reach answers from its own stale view
            # (random-1-39: a cut-off follower kept naming the dead leader).
            partition = sim.cluster.brokers[asked].replica_manager.partition(sim.scenario.tp)
            stale = partition.leader_replica_id if partition is not None else None
            self.sim.world.believed_leader = stale if stale in BROKERS else None
            return
        self.sim.world.believed_leader = self.sim.scenario.leader()

    def _attempt(self, value: int, acks: int, deadline: int) -> bool:
        """One PRODUCE of the value to the believed leader; True if acked without error."""
        target = self.sim.world.believed_leader
        if target is None or not self.sim.cluster.is_alive(target):
            return False  # no leader known, or the connection is refused at once
        record = self.sim.cluster.next_record_id()
        self.sim.world.values[record] = value
        timeout = self.sim.timing.request_timeout_ms
        [sent] = self.sim.cluster.apply(
            Produce(self.sim.scenario.tp, (record,), acks, target, timeout_ms=timeout)
        )
        correlation_id = getattr(sent.payload, "correlation_id")  # noqa: B009
        pending = self.sim.cluster.client.pending
        answered = self.sim.advance_until(
            lambda: correlation_id not in pending, min(self.sim.now + timeout, deadline)
        )
        if not answered:
            pending.pop(correlation_id, None)  # the producer gives up on the connection
            self._drop_unread(target, correlation_id)
            return False
        return any(a.correlation_id == correlation_id for a in self.sim.cluster.acked)

    def _drop_unread(self, target: int, correlation_id: int) -> None:
        """A request the broker has not read when the producer closes the connection is never
        handled (a paused broker that resumes finds the connection closed: random-1-19 and
        random-1-51 kept none of the records sent to their paused leader)."""
        queue = self.sim.cluster.network.queue((CLIENT_ID, target))
        for index, envelope in enumerate(queue):
            if getattr(envelope.payload, "correlation_id", None) == correlation_id:
                self.sim.cluster.apply(Drop(CLIENT_ID, target, index))
                return
