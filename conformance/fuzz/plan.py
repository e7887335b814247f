"""The plan of a fuzz run: how many records and faults, when they may come, which kinds, and
which nodes the scheduler favours; decided once per run from the numbers Hypothesis draws.

Like a small spec config, a plan bounds a run and steers it towards the corners where
replication bugs live, without knowing any bug (docs/fuzzing.md, "How a run is steered"):
- budgets (`Budget`): a few records and faults (at most the set-up's `max_faults`) and planned
  leader changes (`LEADER_CHANGES`); records come at least a gap apart, faults only within a
  window of steps after the replication state moved (`stirred_by`, `STIRRING_VARS`), when what
  each replica knows is briefly inconsistent;
- focus: every kind of fault, or one kind only;
- swarm testing: half the runs never flush, so a power loss loses a log's tail; half never
  delete records; half of those with three replicas or more take Kafka's durable set-up;
- priorities: scheduling favours high-priority nodes, so a slow node falls behind (PCT), and
  in half the runs each fault is a change point at which the slowest node becomes the fastest.

Contract: `plan_run` is a pure function of the set-up, the nodes, the longest gap and the
draws (`Draws`); it returns a `RunPlan`, which `machine.ReplicationMachine.plan` follows.
Each draw shrinks towards the simplest run: one fault right after a stir, one record, every
kind of fault, flushes, fixed priorities in the natural order, no planned leader change. This
module knows no cluster and no Hypothesis: the machine draws, applies steps and counts. Pinned
by the corpora a seed writes (`kreplica fuzz --seed 1 --corpus F` is the same byte for byte as
before the plan moved here), and by `tests/test_leader_changes.py` for `LEADER_CHANGES`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from kreplica.conformance.bridge.projection import State
from kreplica.conformance.fuzz.setup import CONFIG, COSTLY_KINDS, DURABLE_MIN_ISR, FAULTS, FuzzSetup
from kreplica.impl.config import BrokerConfig
from kreplica.impl.steps import Deliver, DoWork, Step

UNLIMITED = 2**62
"""A budget that never runs out."""

STIRRING_VARS = ("hw", "isr", "ctrlIsr", "leaderEpoch", "ctrlEpoch", "acked")
"""The spec variables whose change marks a moment when safety hinges on what each replica
knows: a HW moved, an ISR changed, a leader took office, a producer got an ack. Faults
strike only just after such a moment (as CrashTuner crashes nodes right after meta-data
updates): a fault at a random time mostly hits a cluster at rest. A fault's own step opens
no window (its consequences, such as a leader taking office, do)."""

STIRRING_REQUESTS = frozenset({"OffsetsForLeaderEpochRequest", "ListOffsetsRequest"})
"""Requests whose sending is a stir too: a follower asks its leader where to truncate (R6)
or where its out-of-range reset lands (R9). A fault before the answer (an election, a crash,
a failed log dir) makes the leader answer with an error, or the follower take an answer
from an epoch that has moved on: the window KIP-101 and KIP-279 are about."""


def stirred_by(before: State, after: State) -> bool:
    """The step moved a STIRRING_VARS variable or sent a STIRRING_REQUESTS request."""
    if any(before[v] != after[v] for v in STIRRING_VARS):
        return True
    if after["msgs"] is before["msgs"]:  # most steps: the same messages, shared
        return False
    sent = after["msgs"] - before["msgs"]
    return any(m["type"] in STIRRING_REQUESTS for m in sent)


FAULT_WINDOWS = (1, 2, 4, 8)
"""Trigger timing: how many steps after a stir a fault may strike."""

FAULT_COUNTS = (1, 2, 1, 2, 3, 0, UNLIMITED)
"""Faults per run (at most max_faults): the spec's counterexamples need one or two; a few runs
have none, a few as many as allowed."""

RECORD_BUDGETS = (1, 2, 1, 2, 3, 4, 8, UNLIMITED)
"""Records per run: the spec's counterexamples need one or two, in a run with little else
going on; unlimited runs grow longer logs."""

LEADER_CHANGES = (0, 2, 0, 3)
"""Planned leader changes per run, besides the faults: clean elections that move leadership
to another live ISR replica, and back to the preferred replica, as a controlled shutdown and
a preferred-replica election do. Half the runs have two or three. In half of those a change is
patient: it waits until the leader has written a record in its epoch (`choices.wrote_in_office`),
spaced like records, so records are written under several leader epochs and followers cache
more than one (the multi-epoch truncation of R6, KIP-101 and KIP-279). In the other half it is
hasty: it strikes like a fault, right after the replication state moved (`FAULT_WINDOWS`), as
soon as the leader has taken office (`choices.took_office`), and a hasty change away from the
preferred replica is the controller losing touch with it: a network partition keeps the
controller's requests from it, so it goes on leading in its old epoch (the zombie leader of
KIP-320) while leadership moves away and back (S4). A hasty change may depose a leader with an
epoch it wrote nothing in (Kafka 2.6.0's KAFKA-10706: as a follower it may never finish
truncating; 2.6.3's truncation drops that epoch, the seeded bug `kafka-10706` keeps it). Without
planned changes most runs never change leaders: a crash moves leadership only once the
controller detects it, and an elect fault picks the leader itself, or a dead or out-of-sync
broker, as often as another."""


@dataclass
class Budget:
    """How many more events of a kind (records, faults) a run may have, and when. Gap timing
    (records): at least `gap` steps apart. Trigger timing (faults): only within `window`
    steps after the replication state moved (see STIRRING_VARS). A quiet cluster (nothing
    else would happen) need not wait."""

    left: int
    gap: int = 0
    """Steps to wait after each event before the next one..."""
    wait: int = 0
    """...of which this many remain."""
    window: int | None = None
    """Trigger timing: events only this many steps after a stir (None: gap timing)."""
    calm: int = UNLIMITED
    """Steps since the replication state last moved."""

    def ready(self, quiet: bool) -> bool:
        """An event may happen now: some are left, and the timing allows it or nothing else
        would happen (a quiet cluster)."""
        if self.left <= 0:
            return False
        if quiet:
            return True
        return self.wait == 0 if self.window is None else self.calm < self.window

    def ready_if(self, quiet: Callable[[], bool]) -> bool:
        """`ready(quiet())`, asking `quiet` (a costly question) only if some are left."""
        return self.left > 0 and self.ready(quiet())

    def spend(self) -> None:
        """One event happened."""
        self.left -= 1
        self.wait = self.gap

    def tick(self, stirred: bool = False) -> None:
        """One step went by (and moved the replication state, if `stirred`)."""
        self.wait = self.wait - 1 if self.wait > 0 else 0  # max(0, wait - 1), without a call
        self.calm = 0 if stirred else self.calm + 1


# ---------------------------------------------------------------- the plan of a run


@dataclass(frozen=True)
class Draws:
    """The numbers Hypothesis draws for a run's plan (each shrinks towards 0, the simplest)."""

    faults: int
    timing: int
    focus: int
    records: int
    record_gap: int
    swarm: int
    order: int
    churn: int


@dataclass(frozen=True)
class RunPlan:
    """What a run may do: its budgets, the rules it allows, its broker config, the nodes'
    priorities. The budgets are the run's to spend (`Budget.spend`, `Budget.tick`)."""

    faults: Budget
    records: Budget
    leader_changes: Budget
    hasty: bool
    """Planned leader changes need not wait for the leader to write in its epoch."""
    kinds: frozenset[str]
    """The rules the run allows (by the names of CHOICES)."""
    change_points: bool
    """Every fault is a PCT change point (`change_priorities`)."""
    config: BrokerConfig | None
    """The run's broker config, if not CONFIG (Kafka's durable set-up: `DURABLE_MIN_ISR`)."""
    priority: dict[int, int]
    """Each node's rank: 0 is scheduled first most often."""


def plan_run(setup: FuzzSetup, nodes: Sequence[int], max_gap: int, draws: Draws) -> RunPlan:
    """Plan a run of `setup` on `nodes` (the controller and the brokers), with gaps of at most
    `max_gap` steps: how many faults and records, how soon after a stir a fault strikes, how
    far apart the records are, whether the faults are all of one kind (`focus`), whether logs
    are flushed (`swarm`), the nodes' priorities (`prioritise`), and how many planned leader
    changes, how far apart (`LEADER_CHANGES`)."""
    count = min(setup.max_faults, FAULT_COUNTS[draws.faults % len(FAULT_COUNTS)])
    records = RECORD_BUDGETS[draws.records % len(RECORD_BUDGETS)]
    kinds, change_points, config = swarm(setup, focus(setup, draws.focus), draws.swarm)
    changes = LEADER_CHANGES[draws.churn % len(LEADER_CHANGES)]
    hasty = bool(draws.churn // len(LEADER_CHANGES) % 2)
    spacing = draws.churn // (2 * len(LEADER_CHANGES))
    return RunPlan(
        faults=fault_budget(count, draws.timing),
        records=Budget(records, gap(draws.record_gap, max_gap)),
        leader_changes=(
            fault_budget(changes, spacing) if hasty else Budget(changes, gap(spacing, max_gap))
        ),
        hasty=hasty,
        kinds=kinds,
        change_points=change_points,
        config=config,
        priority=prioritise(nodes, draws.order),
    )


def fault_budget(count: int, timing: int) -> Budget:
    """`count` faults with trigger timing: each within a window of FAULT_WINDOWS steps
    after a stir."""
    return Budget(count, window=FAULT_WINDOWS[timing % len(FAULT_WINDOWS)])


def gap(pick: int, max_gap: int) -> int:
    """A gap of 0, 1, 3, 7, 15 or 31 steps (at most max_gap): back-to-back events as
    often as widely spread ones."""
    return min(int(max_gap), (1 << (pick % 6)) - 1)


def focus(setup: FuzzSetup, pick: int) -> frozenset[str]:
    """The rules of a run: every kind of fault (pick 0), or one kind only (like a spec
    config)."""
    allowed = [kind for kind in FAULTS if kind in setup.kinds]
    if allowed and pick % (len(allowed) + 1):
        only = allowed[pick % (len(allowed) + 1) - 1]
        return setup.kinds - COSTLY_KINDS | {only}
    return setup.kinds


def swarm(
    setup: FuzzSetup, kinds: frozenset[str], pick: int
) -> tuple[frozenset[str], bool, BrokerConfig | None]:
    """Swarm testing: the run's rules, whether each fault is a change point, its broker config
    (None: CONFIG). Logs are never flushed in half the runs (so a power loss loses their
    tails), in half the runs every fault is a change point of the nodes' priorities (see
    `change_priorities`), in half the runs no client deletes records, and half the runs of
    three or more replicas take Kafka's durable set-up (`DURABLE_MIN_ISR`)."""
    if pick % 2:
        kinds = kinds - {"flush"}
    change_points = bool(pick // 2 % 2)
    if pick // 4 % 2:
        kinds = kinds - {"delete_records"}
    config = None
    if pick // 8 % 2 and setup.replicas >= 3:
        config = replace(CONFIG, min_insync_replicas=DURABLE_MIN_ISR)
    return kinds, change_points, config


# ---------------------------------------------------------------- priorities (PCT)


def natural_priorities(nodes: Sequence[int]) -> dict[int, int]:
    """The nodes ranked in their order (a run's priorities before its plan)."""
    return {node: rank for rank, node in enumerate(nodes)}


def prioritise(nodes: Sequence[int], order: int) -> dict[int, int]:
    """Rank the nodes by permutation number `order`: messages to a high-priority node, and
    its fetcher, are scheduled first more often, so a slow node falls behind (as in PCT
    testing, probabilistic concurrency testing)."""
    orders = list(itertools.permutations(nodes))
    return natural_priorities(orders[order % len(orders)])


def change_priorities(priority: dict[int, int]) -> dict[int, int]:
    """A PCT change point: the slowest node becomes the fastest (after a fault, the node
    that fell behind races the others)."""
    last = max(priority.values())
    return {n: 0 if r == last else r + 1 for n, r in priority.items()}


def urgency(priority: dict[int, int], step: Step) -> tuple[int, int]:
    """How late a scheduling step comes: by the slower of its nodes, then the faster."""
    ranks = [priority[node] for node in nodes_of(step)]
    return max(ranks), min(ranks)


def nodes_of(step: Step) -> tuple[int, ...]:
    """The nodes a scheduling step involves: a fetcher's broker, a message's two ends."""
    if isinstance(step, DoWork):
        return (step.broker,)
    assert isinstance(step, Deliver)
    return (step.src, step.dst)


def trailing_ones(pick: int) -> int:
    """The number of trailing 1 bits: 0 half the time, 1 a quarter of the time, and so on
    (a scheduling rule's pick: the most urgent step most often)."""
    return (pick ^ (pick + 1)).bit_length() - 1
