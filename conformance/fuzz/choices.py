"""The choices of each rule: the steps the simulator has enabled now that the fuzzer may take."""

from __future__ import annotations

import itertools
from collections.abc import Callable

from kreplica.conformance.bridge.projection import (
    CLIENT,
    CONTROLLER,
    NO_LEADER,
    NOT_HOSTED,
    State,
    log_start_of,
)
from kreplica.conformance.fuzz.setup import (
    TICK_MS,
)
from kreplica.conformance.judges.invariants import logs_agree
from kreplica.conformance.replay.schedule import (
    TP,
)
from kreplica.impl.cluster import Cluster
from kreplica.impl.messages import AlterPartitionRequest, AlterPartitionResponse
from kreplica.impl.steps import (
    CheckpointHighWatermarks,
    ConsumerFetch,
    ConsumerListOffsets,
    Crash,
    DeleteRecords,
    Deliver,
    DetectFailure,
    DoWork,
    Drop,
    Duplicate,
    Elect,
    FailLogDir,
    Flush,
    HaltOnLogDirFailure,
    Heal,
    Isolate,
    Produce,
    Restart,
    ShrinkIsr,
    Step,
    Tick,
    UncleanShutdown,
)


def _queues(c: Cluster, deliverable: bool) -> list[tuple[int, int, int]]:
    """(src, dst, queued) of each link with messages (deliverable: not partitioned), client
    links left out: the client's requests are delivered at once, and its answers mean nothing
    to the spec (an ack counts when the leader sends it)."""
    blocked = c.network.blocked if deliverable else ()
    return [
        (a, b, len(queue))
        for (a, b), queue in c.network.lanes()  # in the order of links()
        if queue and a != CLIENT and b != CLIENT and (a, b) not in blocked
    ]


def behind(s: State, leader: int) -> bool:
    """The broker leads, and an ISR follower's last fetch was below its LEO (the spec's test)."""
    i = leader - 1
    if s["leader"][i] != leader:
        return False
    leo = len(s["log"][i])
    return any(s["remoteLeo"][i][f - 1] != leo for f in s["isr"][i] if f != leader)


def _out_of_sync(c: Cluster, s: State, leader: int) -> bool:
    """The leader has ISR followers that are out of sync: behind its LEO (the spec's test)
    and not caught up for replica.lag.time.max.ms (the simulator's)."""
    if not behind(s, leader):
        return False
    partition = c.partition(leader, TP)
    return partition is not None and bool(
        partition.get_out_of_sync_replicas(c.config.replica_lag_time_max_ms)
    )


def _in_step(c: Cluster, s: State, follower: int, leader: int) -> bool:
    """The follower fetches from a leader that has nothing to tell it, and knows its LEO: the
    same log (but for deleted records) and the HW a fetch would set, the leader's, or the
    follower's log start offset if that is higher (R8); and the same leader epoch, unless
    fetches carry none (fencing=off: a follower that missed a LeaderAndIsr fetches on at its
    old epoch, and the leader answers it as any other, R1)."""
    f, ld = follower - 1, leader - 1
    fenced = c.variant.fencing != "off"
    return bool(
        s["fetchState"][f] == "Fetching"
        and s["leader"][ld] == leader
        and (s["leaderEpoch"][f] == s["leaderEpoch"][ld] or not fenced)
        and logs_agree(s["log"][f], s["log"][ld])
        and s["hw"][f] == max(log_start_of(s, follower), s["hw"][ld])
        and s["remoteLeo"][ld][f] == len(s["log"][f])
    )


def _deletions(c: Cluster, s: State) -> list[Step]:
    """DeleteRecords on the controller's leader, if it runs and leads: every offset above its
    log start, up to its HW (what the simulator deletes; Kafka refuses more, R4)."""
    leader = c.leader(TP)
    if leader is None or leader not in s["alive"] or s["leader"][leader - 1] != leader:
        return []
    start, hw = log_start_of(s, leader), s["hw"][leader - 1]
    return [DeleteRecords(TP, offset) for offset in range(start + 1, hw + 1)]


def took_office(s: State) -> bool:
    """The controller's leader leads at the controller's epoch (it took the LeaderAndIsr)."""
    b = s["ctrlLeader"]
    return bool(
        b != NO_LEADER and s["leader"][b - 1] == b and s["leaderEpoch"][b - 1] == s["ctrlEpoch"]
    )


def wrote_in_office(s: State) -> bool:
    """The controller's leader has taken office at the controller's epoch and appended a
    record in it: its epoch cache's last epoch is that epoch, and starts below its LEO."""
    if not took_office(s):
        return False
    b, epoch = s["ctrlLeader"], s["ctrlEpoch"]
    cache = s["epochCache"][b - 1]
    return (
        bool(cache)
        and cache[-1]["epoch"] == epoch
        and cache[-1]["startOffset"] < len(s["log"][b - 1])
    )


def _leader_changes(c: Cluster, s: State) -> list[Step]:
    """Clean elections that move leadership (the controller's view: `ctrlIsr`, `ctrlLive`):
    back to the preferred replica, the first of the assignment, if it is a live ISR member
    and does not lead (a preferred-replica election); else to each live ISR replica but the
    leader (a controlled shutdown)."""
    ready = sorted(s["ctrlIsr"] & s["ctrlLive"])
    preferred = min(c.broker_ids)
    if preferred in ready and s["ctrlLeader"] != preferred:
        return [Elect(TP, preferred)]
    return [Elect(TP, b) for b in ready if b != s["ctrlLeader"]]


def next_deadline_ms(c: Cluster) -> int | None:
    """How far off the next deadline of a running broker is: a parked produce's or fetch's
    expiry, the end of a fetch back-off, a request's timeout (`Broker.next_timer_ms`)."""
    now = c.clock.now_ms
    waits = [
        when - now
        for b in c.broker_ids
        if c.is_alive(b) and (when := c.brokers[b].next_timer_ms()) is not None and when > now
    ]
    return min(waits) if waits else None


def _stoppable(s: State) -> list[int]:
    """Running brokers that may crash: all but the last one (a dead cluster does nothing)."""
    return sorted(s["alive"]) if len(s["alive"]) > 1 else []


def _serving(s: State) -> list[int]:
    """Running brokers whose log dir has not failed (they serve their Partition)."""
    return sorted(s["alive"] - s["logDirOffline"])


def _dead(c: Cluster, s: State) -> list[int]:
    """Brokers that are not running."""
    return [b for b in c.broker_ids if b not in s["alive"]]


def _detections(c: Cluster, s: State) -> list[Step]:
    """The controller learns that a dead broker's session expired: alone; if it led, also as
    a new controller's failover (offline, then elected) and together with the other dead
    brokers (one election for all, R22), where those elect a leader."""
    if all(c.is_alive(b) for b in c.broker_ids):  # most steps: no broker is dead
        return []
    alone: list[Step] = [DetectFailure(b) for b in _dead(c, s) if b in s["ctrlLive"]]
    return alone + c.failover_detections()


def _losable(c: Cluster, src: int, dst: int, index: int) -> bool:
    """A message the network may lose: any but an ISR change between a leader and the
    controller (isr=alter-partition), which Kafka 2.7's broker-to-controller channel resends
    until it is answered, so it can only be late (a lost one would leave the leader's
    proposal pending for good, a liveness failure Kafka does not have)."""
    payload = c.network.queues[(src, dst)][index].payload
    return not isinstance(payload, AlterPartitionRequest | AlterPartitionResponse)


def _node_pairs(c: Cluster) -> list[tuple[int, int]]:
    """Every pair of nodes that a network partition can separate: brokers and the controller."""
    return list(itertools.combinations((CONTROLLER, *c.broker_ids), 2))


def _blocked(c: Cluster, a: int, b: int) -> bool:
    """A network partition separates nodes a and b."""
    return (a, b) in c.network.blocked


Choices = Callable[[Cluster, State], list[Step]]

CHOICES: dict[str, Choices] = {
    "deliver": lambda c, s: [Deliver(a, b) for a, b, _ in _queues(c, True)],
    # The controller's requests to a broker go one at a time (Kafka's ControllerChannelManager
    # waits for each answer), so they are never reordered.
    "reorder": lambda c, s: [
        Deliver(a, b, i) for a, b, n in _queues(c, True) if a != CONTROLLER for i in range(1, n)
    ],
    "drop": lambda c, s: [
        Drop(a, b, i) for a, b, n in _queues(c, False) for i in range(n) if _losable(c, a, b, i)
    ],
    "duplicate": lambda c, s: [
        Duplicate(a, b, i) for a, b, n in _queues(c, False) for i in range(n)
    ],
    "isolate": lambda c, s: [Isolate(a, b) for a, b in _node_pairs(c) if not _blocked(c, a, b)],
    "heal": lambda c, s: (
        [Heal(a, b) for a, b in _node_pairs(c) if _blocked(c, a, b)] if c.network.blocked else []
    ),
    "fetch": lambda c, s: [
        DoWork(b, src)
        for b in c.broker_ids
        for src in c.brokers[b].workable_fetchers()
        if not _in_step(c, s, b, src)
    ],
    "shrink_isr": lambda c, s: [ShrinkIsr(b) for b in sorted(s["alive"]) if _out_of_sync(c, s, b)],
    "crash": lambda c, s: [Crash(b) for b in _stoppable(s)],
    "fail_log_dir": lambda c, s: [FailLogDir(b, TP) for b in _serving(s) if len(_serving(s)) > 1],
    "halt_on_log_dir_failure": lambda c, s: [
        HaltOnLogDirFailure(b) for b in sorted(s["alive"] & s["logDirOffline"])
    ],
    "unclean_shutdown": lambda c, s: [UncleanShutdown(b) for b in _stoppable(s)],
    "flush": lambda c, s: [  # only in runs with unclean shutdowns: see choices()
        Flush(b) for b in sorted(s["alive"]) if s["recoveryPoint"][b - 1] < len(s["log"][b - 1])
    ],
    "checkpoint": lambda c, s: [  # only in runs with unclean shutdowns: see choices()
        CheckpointHighWatermarks(b)
        for b in sorted(s["alive"] - s["logDirOffline"])
        if s["leaderEpoch"][b - 1] != NOT_HOSTED and s["hwCheckpoint"][b - 1] != s["hw"][b - 1]
    ],
    "restart": lambda c, s: [Restart(b) for b in _dead(c, s)],
    "detect_failure": lambda c, s: _detections(c, s),
    "elect": lambda c, s: [Elect(TP, b) for b in c.broker_ids],  # the dead too: refused
    "change_leader": _leader_changes,  # only in runs that plan leader changes: see choices()
    "delete_records": _deletions,
}
"""For each rule, the steps it may take now: the steps of `Cluster.enabled_steps()` (plus
network partitions) that the spec allows here. Left out, because the simulator would do
nothing or step outside the spec's model: client links (see `_queues`); failure detection of
a running broker; stopping the last running broker (or failing the log dir of the last one
that serves); flushing a flushed log; checkpointing the HW a checkpoint holds already (or on
a broker that hosts no partition yet); shrinking an ISR whose followers are all caught up or
not yet out of sync; a fetch by a follower in step with its leader (it would learn nothing
and tell nothing: left out, it is a follower that is briefly slow)."""

_KIND_OF_TYPE: dict[type, str] = {
    Drop: "drop",
    Duplicate: "duplicate",
    Isolate: "isolate",
    Heal: "heal",
    DoWork: "fetch",
    ShrinkIsr: "shrink_isr",
    Crash: "crash",
    FailLogDir: "fail_log_dir",
    HaltOnLogDirFailure: "halt_on_log_dir_failure",
    UncleanShutdown: "unclean_shutdown",
    Flush: "flush",
    CheckpointHighWatermarks: "checkpoint",
    Restart: "restart",
    DetectFailure: "detect_failure",
    Elect: "elect",
    DeleteRecords: "delete_records",
}


def kind_of(step: Step) -> str | None:
    """The rule of CHOICES that takes `step` (None: the client's and the clock's steps)."""
    if isinstance(step, Deliver):
        return "deliver" if step.index == 0 else "reorder"
    return _KIND_OF_TYPE.get(type(step))


def _answers(c: Cluster, previous: Step | None, step: Step) -> bool:
    """True if `step` delivers to the client an answer, on the network, of the broker
    `previous` delivered to."""
    return (
        isinstance(previous, Deliver)
        and previous.src == CLIENT
        and isinstance(step, Deliver)
        and (step.src, step.dst) == (previous.dst, CLIENT)
        and 0 <= step.index < len(c.network.queues.get((step.src, step.dst), ()))
    )


def fuzzer_may_take(c: Cluster, s: State, previous: Step | None, step: Step) -> bool:
    """True if a rule of the fuzzer could take `step` now (fault budgets aside): a client's
    request goes to a running broker (a refused PRODUCE is retried at a leader) and arrives
    in the next step; any other step is one of its rule's CHOICES. `minimize` keeps a failing run
    to such steps."""
    if isinstance(previous, Produce | ConsumerFetch | ConsumerListOffsets):
        b = previous.broker
        last = len(c.network.queues.get((CLIENT, b), ())) - 1 if b is not None else -1
        return b is not None and step == Deliver(CLIENT, b, last)  # the request just sent
    if _answers(c, previous, step):
        return True  # the answer to the request just delivered (list_offsets takes it)
    if isinstance(step, Produce | ConsumerFetch | ConsumerListOffsets):
        return step.broker is not None and step.broker in s["alive"]
    if isinstance(step, Tick):
        return step.ms in TICK_MS or step.ms == next_deadline_ms(c)
    if isinstance(step, ShrinkIsr):  # offered by the impl's clock or by Kafka's (lag_times)
        return behind(s, step.broker)
    kind = kind_of(step)
    return kind is not None and step in CHOICES[kind](c, s)
