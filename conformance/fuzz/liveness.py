"""Bounded liveness: once the faults stop and the cluster settles, replication has caught up.

The invariants judge every state of a run, but a run in which nothing happens breaks none:
followers stuck in Truncating forever, or a controller that refuses every election, produce
traces that conform and keep every invariant. So each fuzz run ends with a settle phase
(`next_settling_step`, driven by `ReplicationMachine.settle`): no more faults; every network
partition heals, every dead broker restarts, messages are delivered in order, fetchers run,
leaders shrink ISRs of followers that cannot catch up, the controller re-elects when brokers
missed its decision, and time passes (backoffs end, followers lag, delayed produces expire),
all within bounds. Every settling step is a step a fuzzer rule could take (`choices.CHOICES`,
`setup.TICK_MS`), recorded like the others, so the trace still conforms to the spec.

Then `progress_violation` requires (the names are those of a failure, like an invariant's):
- `EventuallyReplicated`: the controller has a leader, which knows it leads at the
  controller's epoch, and every other replica has caught up with it: the leader's log and HW,
  its LEO known to the leader (whether or not it is back in the ISR yet: a follower in step
  is not scheduled to fetch again) (R9, R10);
- `EventuallyAnswered`: every acks=-1 produce delivered to a broker that has not crashed since
  got an answer, an ack or an error (R12, R17).

One livelock is Kafka 2.6's own, and the implementation keeps it as the release it models
does: KAFKA-10706 (`kafka_10706`). A run that settles into it is counted apart, not failed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kreplica.conformance.bridge.checked_steps import Violation
from kreplica.conformance.bridge.invariants import logs_agree
from kreplica.conformance.bridge.projection import CLIENT, UNDEFINED, State
from kreplica.conformance.bridge.schedule import TP
from kreplica.conformance.fuzz.choices import CHOICES
from kreplica.impl.cluster import Cluster
from kreplica.impl.messages import ProduceResponse
from kreplica.impl.steps import Elect, Step

REPLICATED = "EventuallyReplicated"
ANSWERED = "EventuallyAnswered"
LIVENESS = frozenset({REPLICATED, ANSWERED})
"""The names of the settle phase's failures."""

SETTLE_KINDS = ("heal", "halt_on_log_dir_failure", "restart", "deliver", "shrink_isr", "fetch")
"""The rules the settle phase takes, in order of precedence: faults end first."""

SETTLE_TICKS = (1_000, 30_001, 1_000, 30_001)
"""The clock advances of a settle phase, one each time the cluster is quiet and not yet
settled: a backoff ends; followers lag and delayed produces expire; and once more each."""

SETTLE_ELECTIONS = 2
"""Elections the settle phase may ask for, when a broker missed the controller's decision."""

SETTLE_MAX_STEPS = 400
"""The most steps a settle phase takes (far more than a correct cluster needs)."""

LOOP_EVENTS = 12
"""The spec actions a settle phase that never ends names in its reason (the loop it is in)."""

IDLE_LIMIT = 8
"""Steps in a row that record no spec action after which the cluster counts as quiet."""


KAFKA_10706 = "KAFKA-10706"
"""The name of Kafka 2.6's truncation livelock (`kafka_10706`), in summaries and trace #meta."""


def _end_offset_for(cache: Sequence[Any], requested: int, leo: int) -> tuple[int, int]:
    """The spec's EndOffsetFor (Kafka 2.6's LeaderEpochFileCache.endOffsetFor, R6): the epoch
    at most `requested` and where it ends, in an epoch cache of a log ending at `leo`."""
    if requested == UNDEFINED or not cache:
        return UNDEFINED, UNDEFINED
    if requested == cache[-1]["epoch"]:
        return requested, leo
    higher = [e for e in cache if e["epoch"] > requested]
    at_most = [e for e in cache if e["epoch"] <= requested]
    if not higher:
        return UNDEFINED, UNDEFINED
    if not at_most:
        return requested, cache[0]["startOffset"]
    return at_most[-1]["epoch"], higher[0]["startOffset"]


def kafka_10706(c: Cluster, s: State) -> int | None:
    """A follower caught in KAFKA-10706, Kafka 2.6's truncation livelock (apache/kafka#9633,
    fixed after 2.6.0), or None: its leader leads at its epoch, and it truncates, on an answer
    for an epoch it does not know (R6 case d), to its own LEO, where its epoch cache ends with
    an epoch it wrote nothing in (it led, briefly); 2.6's Log.truncateTo returns early at the
    LEO and leaves the cache alone, so the follower asks for that epoch again, and again."""
    if c.variant.truncation != "kip279":
        return None
    for f in sorted(s["alive"]):
        leader, cache, leo = s["leader"][f - 1], s["epochCache"][f - 1], len(s["log"][f - 1])
        if s["fetchState"][f - 1] != "Truncating" or leader not in s["alive"]:
            continue
        if (
            s["leader"][leader - 1] != leader
            or s["leaderEpoch"][leader - 1] != s["leaderEpoch"][f - 1]
        ):
            continue  # its leader would answer with an error, not from its epoch cache
        if not cache or cache[-1]["startOffset"] != leo:
            continue
        answer = _end_offset_for(
            s["epochCache"][leader - 1], cache[-1]["epoch"], len(s["log"][leader - 1])
        )
        mine = _end_offset_for(cache, answer[0], leo)
        if UNDEFINED not in (*answer, mine[1]) and mine[0] != answer[0] and mine[1] >= leo:
            return int(f)
    return None


@dataclass(frozen=True)
class SentProduce:
    """An acks=-1 produce delivered to `broker` (incarnation `incarnation`)."""

    correlation_id: int
    broker: int
    incarnation: int
    record: int


def next_settling_step(c: Cluster, s: State) -> Step | None:
    """The next step of the settle phase: heal, restart, deliver, shrink an ISR or fetch, the
    first enabled in that order (None: the cluster is quiet)."""
    for kind in SETTLE_KINDS:
        found = CHOICES[kind](c, s)
        if found:
            return found[0]
    return None


def stale_election(c: Cluster, s: State) -> Elect | None:
    """An election of the controller's leader (or of the first live broker, if it has none)
    when the partition has no leader or a running replica missed the controller's epoch (its
    LeaderAndIsr was lost): the controller sends its decision again (R1, R2)."""
    leader = c.leader(TP)
    missed = any(s["leaderEpoch"][b - 1] != s["ctrlEpoch"] for b in s["alive"])
    if leader is not None and not missed:
        return None
    candidates = sorted(s["ctrlLive"])
    if leader is not None and leader in candidates:
        return Elect(TP, leader)
    return Elect(TP, candidates[0]) if candidates else None


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
