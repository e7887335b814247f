"""Bounded liveness, judged: once the faults stop and the cluster settles, replication has
caught up and every acks=-1 produce has its answer.

The invariants judge every state of a run, but a run in which nothing happens breaks none:
followers stuck in Truncating forever, or a controller that refuses every election, produce
traces that conform and keep every invariant. So each fuzz run ends with a settle phase
(`fuzz.settle`), and a settled cluster is held to two requirements, named like invariants:
- `EventuallyReplicated`: the controller has a leader, which knows it leads at the
  controller's epoch, and every other replica has caught up with it: the leader's log and HW,
  its LEO known to the leader (whether or not it is back in the ISR yet: a follower in step
  is not scheduled to fetch again) (R9, R10);
- `EventuallyAnswered`: every acks=-1 produce delivered to a broker that has not crashed since
  got an answer, an ack or an error (R12, R17).
`progress_violation` says which one a settled cluster breaks.
"""

from __future__ import annotations

from dataclasses import dataclass

from kreplica.conformance.bridge.local_partitions import SPEC_TP as TP
from kreplica.conformance.bridge.projection import CLIENT, State
from kreplica.conformance.bridge.recorder import Recorder
from kreplica.conformance.judges.invariants import logs_agree
from kreplica.impl.cluster import Cluster
from kreplica.impl.messages import ProduceRequest, ProduceResponse

Violation = tuple[str, str]
"""(requirement name, reason)."""

REPLICATED = "EventuallyReplicated"
ANSWERED = "EventuallyAnswered"
LIVENESS = frozenset({REPLICATED, ANSWERED})
"""The names of the failures of a run's settle phase (`fuzz.settle`): once the faults are
over, replication did not catch up, or a produce got no answer. No single step shows them, so
a schedule that records one is replayed with the settle phase after its steps
(`replay.schedule.replay_schedule`'s `settle`)."""


@dataclass(frozen=True)
class SentProduce:
    """An acks=-1 produce delivered to `broker` (incarnation `incarnation`)."""

    correlation_id: int
    broker: int
    incarnation: int
    record: int


def sent_produces(recorder: Recorder) -> list[SentProduce]:
    """The acks=-1 produces of the run that a broker took (the spec's Produce) and that the
    client still waits on, each with the broker's incarnation when it took it."""
    waiting: dict[tuple[int, int], int] = {}
    for correlation_id, sent in recorder.cluster.client.pending.items():
        request = sent.request
        if isinstance(request, ProduceRequest) and request.acks == -1:
            for part in request.partitions:
                if part.tp == TP:
                    for record in part.record_ids:
                        waiting[(sent.broker, record)] = correlation_id
    out = []
    for event in recorder.events:
        if event.action != "Produce" or event.args["acks"] != -1:
            continue
        broker, record = int(event.args["replica"]), int(event.args["record"])
        waited = waiting.get((broker, record))
        if waited is not None:
            incarnation = event.state["incarnation"][broker - 1]
            out.append(SentProduce(waited, broker, incarnation, record))
    return out


def progress_violation(c: Cluster, s: State, sent: list[SentProduce]) -> Violation | None:
    """The first liveness requirement a settled cluster breaks (None: it keeps both)."""
    return _replicated(c, s) or _answered(c, sent)


def _replicated(c: Cluster, s: State) -> Violation | None:
    """EventuallyReplicated: a live leader at the controller's epoch, and every other replica
    caught up with it: the leader's log and HW, its LEO known to the leader (R9, R10)."""
    leader = c.leader(TP)
    if leader is None:
        return REPLICATED, "the partition has no leader after settling"
    i = leader - 1
    if leader not in s["alive"] or s["leader"][i] != leader:
        return REPLICATED, f"the controller's leader {leader} does not lead after settling"
    if s["leaderEpoch"][i] != s["ctrlEpoch"]:
        epoch = s["leaderEpoch"][i]
        return (
            REPLICATED,
            f"leader {leader} is at epoch {epoch}, the controller's is {s['ctrlEpoch']}",
        )
    leo = len(s["log"][i])
    for b in c.broker_ids:
        f = b - 1
        caught_up = logs_agree(s["log"][f], s["log"][i]) and s["hw"][f] == s["hw"][i]
        if b != leader and not (caught_up and s["remoteLeo"][i][f] == leo):
            where = "ISR follower" if b in s["isr"][i] else "follower"
            return REPLICATED, (
                f"{where} {b} (LEO {len(s['log'][f])}, HW {s['hw'][f]}; its LEO at the leader "
                f"{s['remoteLeo'][i][f]}) has not caught up with leader {leader} (LEO {leo}, "
                f"HW {s['hw'][i]}) after settling"
            )
    return None


def _answered(c: Cluster, sent: list[SentProduce]) -> Violation | None:
    """EventuallyAnswered: each acks=-1 produce delivered to a broker still running in the same
    incarnation has its answer on the way to the client, or delivered (R12, R17)."""
    answered = {
        e.payload.correlation_id
        for b in c.broker_ids
        for e in c.network.queues.get((b, CLIENT), ())
        if isinstance(e.payload, ProduceResponse)
    }
    for p in sent:
        if c.incarnation(p.broker) != p.incarnation or not c.is_alive(p.broker):
            continue
        if p.correlation_id not in answered and p.correlation_id in c.client.pending:
            return ANSWERED, (
                f"the acks=-1 produce of record {p.record} to broker {p.broker} has no answer "
                "after settling"
            )
    return None
