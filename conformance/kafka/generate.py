"""Fault schedules to run on both worlds: the named scenarios of issue 13, and random ones.

`named_schedules()` are the scenarios the outcome table must show (each with the outcome Kafka
2.6.3 is expected to give in its notes); `random_schedules(seed, n)` are short, meaningful random
schedules, the same for the same seed. Every schedule ends healed, with every broker running and
a final produce, so both worlds end in a state worth comparing. `write_named(folder)` writes the
named ones as JSON files (the repository's `schedules/` folder holds them).

Pinned by tests/test_kafka_simulate.py.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kreplica.conformance.kafka.schedule import BROKERS, ZK, Schedule, Step

WAIT_TIMEOUT_S = 60.0
"""A random schedule's waits give up after this long (on both worlds: it is in the schedule)."""

MAX_STEPS = 12
"""A random schedule's length at most: each also runs on a real cluster (about 30-60 s)."""

LEADER_ALONE = ((1,), (2, 3, ZK))
"""The first leader cut from its followers and ZooKeeper."""

FOLLOWERS_ALONE = ((1, ZK), (2, 3))
"""The followers cut from the first leader and ZooKeeper."""


def _produce(count: int, acks: int | None = None) -> Step:
    return Step("produce", count=count, acks=acks)


def _on(op: str, broker: int) -> Step:
    return Step(op, broker=broker)


def _plain_wait(until: str) -> Step:
    return Step("wait", until=until)


def named_schedules() -> list[Schedule]:
    """The scenarios issue 13's outcome table shows, each with its expected outcome in notes."""
    return [
        Schedule(
            "acks-all-leader-crash",
            (
                _produce(5),
                _on("crash", 1),
                _produce(5),
                _on("restart", 1),
                _plain_wait("isr-full"),
                _produce(5),
            ),
            acks=-1,
            min_insync_replicas=2,
            notes="acks=-1, min ISR 2, clean election; the leader is killed and restarted: "
            "no acknowledged record is lost",
        ),
        Schedule(
            "acks-all-leader-partition",
            (
                _produce(5),
                Step("partition", groups=LEADER_ALONE),
                _produce(5),
                Step("heal"),
                _plain_wait("isr-full"),
                _produce(5),
            ),
            acks=-1,
            min_insync_replicas=2,
            notes="acks=-1, min ISR 2, clean election; the leader is cut from its followers and "
            "ZooKeeper, keeps serving, and rejoins as a follower: no acknowledged record is lost",
        ),
        Schedule(
            "acks1-leader-fails-before-replication",
            (
                _produce(5),
                Step("partition", groups=LEADER_ALONE),
                _produce(5),
                _on("crash", 1),
                Step("heal"),
                _on("restart", 1),
                _plain_wait("isr-full"),
                _produce(1),
            ),
            acks=1,
            min_insync_replicas=2,
            notes="acks=1: the cut-off leader acknowledges records no follower gets, then dies; "
            "a follower takes over and those records are lost",
        ),
        Schedule(
            "unclean-after-isr-shrank",
            (
                _produce(3),
                Step("partition", groups=FOLLOWERS_ALONE),
                _plain_wait("isr-shrunk"),
                _produce(3),
                _on("crash", 1),
                Step("heal"),
                Step("elect", kind="unclean"),
                _plain_wait("leader"),
                _on("restart", 1),
                _plain_wait("isr-full"),
                _produce(1),
            ),
            acks=-1,
            min_insync_replicas=1,
            unclean=True,
            notes="the ISR shrinks to the leader, which acknowledges alone (min ISR 1) and dies; "
            "an out-of-sync follower is elected uncleanly: acknowledged records are lost",
        ),
        Schedule(
            "kip101-follower-restart-leader-fails",
            (
                _on("crash", 3),
                _produce(5),
                _on("crash", 2),
                Step("partition", groups=LEADER_ALONE),
                _on("restart", 2),
                _on("crash", 1),
                Step("heal"),
                _plain_wait("leader"),
                _on("restart", 1),
                _on("restart", 3),
                _plain_wait("isr-full"),
                _produce(1),
            ),
            acks=-1,
            min_insync_replicas=1,
            unclean=True,
            notes="KIP-101 scenario 1: a follower crashes right after an ack (its HW lags), "
            "restarts while the leader is out of its reach, and the leader fails; with leader "
            "epochs (Kafka 2.6.3) it keeps its log and nothing is lost, with HW truncation "
            "(pre-KIP-101) it truncates an acknowledged record",
        ),
        Schedule(
            "controller-crash",
            (
                _produce(5),
                Step("crash-controller"),
                _produce(5),
                _plain_wait("leader"),
                _produce(2),
            ),
            acks=-1,
            min_insync_replicas=2,
            notes="acks=-1, min ISR 2, clean election; the controller's broker (any of the "
            "three) is killed and stays down: its successor fails over (on the leader: the "
            "leader offline, then an election, two epochs; on a follower: one ISR removal) "
            "and no acknowledged record is lost",
        ),
    ]


def schedule_text(schedule: Schedule) -> str:
    """The schedule as JSON text, one step a line (what load_schedule reads back)."""
    data = schedule.to_json()
    steps = data.pop("steps")
    head = json.dumps(data, indent=2)[:-2]  # without the closing newline and brace
    lines = ",\n".join(f"    {json.dumps(step)}" for step in steps)
    return f'{head},\n  "steps": [\n{lines}\n  ]\n}}\n'


def write_named(folder: Path) -> list[Path]:
    """Write every named schedule as FOLDER/NAME.json (what load_schedule reads back)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for schedule in named_schedules():
        path = folder / f"{schedule.name}.json"
        path.write_text(schedule_text(schedule), encoding="utf-8")
        paths.append(path)
    return paths


# ------------------------------------------------------------------------------ random


@dataclass
class _Faults:
    """The faults in force while a random schedule is built, so every step means something."""

    unclean: bool
    down: set[int] = field(default_factory=set)
    paused: set[int] = field(default_factory=set)
    cut_from_zk: set[int] = field(default_factory=set)
    partitioned: bool = False

    def running(self) -> list[int]:
        """Brokers that run and are not paused."""
        return [b for b in BROKERS if b not in self.down and b not in self.paused]

    def apply(self, step: Step) -> None:
        """Track what the step does."""
        if step.op in ("crash", "shutdown") and step.broker is not None:
            self.down.add(step.broker)
            self.paused.discard(step.broker)
        elif step.op == "restart":
            self.down.discard(step.broker or 0)
        elif step.op == "pause":
            self.paused.add(step.broker or 0)
        elif step.op == "resume":
            self.paused.discard(step.broker or 0)
        elif step.op in ("partition", "heal"):
            self.partitioned = step.op == "partition"
            self.cut_from_zk = _cut_from_zk(step.groups or ())

    def healthy(self) -> bool:
        """No fault is in force."""
        return not (self.down or self.paused or self.partitioned)

    def recovery(self) -> list[Step]:
        """The steps that end every fault: heal, resume, restart."""
        steps = [Step("heal")] if self.partitioned else []
        steps += [_on("resume", b) for b in sorted(self.paused)]
        steps += [_on("restart", b) for b in sorted(self.down)]
        return steps


def _cut_from_zk(groups: Sequence[Sequence[int | str]]) -> set[int]:
    """The brokers a partition separates from ZooKeeper (a broker named nowhere stays with it)."""
    zk_side = next((set(g) for g in groups if ZK in g), None)
    named = {n for g in groups for n in g}
    if zk_side is None:
        return {b for b in BROKERS if b in named}
    return {b for b in BROKERS if b in named and b not in zk_side}


def _random_groups(rng: random.Random) -> tuple[tuple[int | str, ...], ...]:
    """A random partition: often the first leader or its followers cut off, else any cut."""
    shape = rng.random()
    if shape < 0.3:
        return LEADER_ALONE
    if shape < 0.45:
        return FOLLOWERS_ALONE
    nodes: list[int | str] = [*BROKERS, ZK]
    rng.shuffle(nodes)
    cut = rng.randint(1, 2)
    groups = (tuple(nodes[:cut]), tuple(nodes[cut:]))
    return tuple(tuple(sorted(g, key=str)) for g in groups)


def _wait(until: str) -> Step:
    return Step("wait", until=until, timeout_s=WAIT_TIMEOUT_S)


def _waits(faults: _Faults) -> list[Step]:
    """The waits worth making: for the ISR to fill when all is well, else to shrink."""
    return [_wait("isr-full" if faults.healthy() else "isr-shrunk"), _wait("leader")]


def _fault(rng: random.Random, faults: _Faults) -> Step:
    """One random step that is meaningful given the faults in force."""
    choices = [_produce(rng.randint(1, 4), acks) for acks in (-1, 1)]  # produce weighs double
    running = faults.running()
    if len(running) > 1:
        choices += [_on(op, rng.choice(running)) for op in ("crash", "shutdown", "pause")]
    choices += [_on("restart", b) for b in sorted(faults.down - faults.cut_from_zk)]
    choices += [_on("resume", b) for b in sorted(faults.paused)]
    choices.append(Step("partition", groups=_random_groups(rng)))
    if faults.partitioned:
        choices.append(Step("heal"))
    choices.append(Step("elect", kind="unclean" if faults.unclean else "preferred"))
    choices += _waits(faults)
    return rng.choice(choices)


def random_schedule(rng: random.Random, name: str) -> Schedule:
    """One random schedule of at most MAX_STEPS: a produce, faults, recovery, a final produce."""
    acks, min_isr, unclean = rng.choice((-1, 1)), rng.choice((1, 2)), rng.random() < 0.3
    faults = _Faults(unclean)
    steps = [_produce(rng.randint(1, 5))]
    for _ in range(rng.randint(3, 7)):
        step = _fault(rng, faults)
        after = copy.deepcopy(faults)
        after.apply(step)
        if len(steps) + 1 + len(after.recovery()) + 1 > MAX_STEPS:
            break
        steps.append(step)
        faults = after
    steps += [*faults.recovery(), _produce(rng.randint(1, 3))]
    return Schedule(name, tuple(steps), acks=acks, min_insync_replicas=min_isr, unclean=unclean)


def random_schedules(seed: int, n: int) -> list[Schedule]:
    """n random schedules named 'random-SEED-I'; the same seed always gives the same list."""
    rng = random.Random(seed)
    return [random_schedule(rng, f"random-{seed}-{i}") for i in range(n)]


def schedule_names(schedules: Sequence[Schedule]) -> list[str]:
    """The schedules' names, in order."""
    return [s.name for s in schedules]
