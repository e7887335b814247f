"""What a real run leaves to chance, as questions the schedule simulator asks.

Theory of operation. kreplica's schedule simulator (`simulate.py`) fixes what a real cluster
leaves open: how long each message takes, when each broker's ISR task runs, which broker wins
the first controller election, how long after its nominal timeout ZooKeeper expires a session
(it expires sessions in buckets of tickTime), how long a controller's failover takes, how long
the harness's own steps take, and in which order concurrent work happens. The simulator asks
these questions of a `Fixed` (one answer each: the single prediction) or of a `Jitter(seed)`,
which draws each answer from the range this harness's real runs show (the ranges below, with
where each was measured), the same draws for the same seed. `predict.py` runs a schedule under
many seeds and collects the outcomes the model allows.

May import: the standard library only (the `kafka` room rule, tests/test_layout.py).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")

LATENCY_CEILINGS = (0, 2, 10, 50)
"""A run's messages take 0 to one of these many ms (four JVMs on two loaded cores: a follower
may or may not have fetched a record when the harness's next fault comes; a run on a quiet
machine is quicker throughout than one on a busy machine)."""

ZK_TICK_MS = 500
"""The harness's ZooKeeper tickTime (cluster.py's zoo.cfg): ZooKeeper expires a session at the
first tick after its timeout, so sessions lost close together expire together."""

EXPIRY_LAG_MS = 1_500
"""Up to this long more, on a loaded machine: ZooKeeper expired a session killed with -9 7.8 s
after the kill in random-1-32 (its server.log: "Expiring session ..., timeout of 6000ms
exceeded"), where the tick alone allows 6.5 s."""

FAILOVER_MS = (40, 1_000)
"""A new controller's failover, from "successfully elected as the controller" to "Ready to
serve as the new controller" in the brokers' server.log: 0.04 s to 1.0 s, median 0.2 s, over
161 failovers of the 105 traced real runs (docs/real-kafka.md)."""

FIXED_FAILOVER_MS = 200
"""The single prediction's failover time (the median above)."""

NEMESIS_MS = {"restart": (0, 300), "elect": (15, 300)}
"""How long the real harness takes over a nemesis step before its next step, measured between
consecutive fault stamps in harness-events.jsonl of 105 real runs: a restart waits until the
new broker registered and answers (0.72 s at least, median 1.0 s, with BOOT_MS), an election
asks the controller (0.015 s to 0.15 s, median); every other fault is a signal or an iptables
rule (median 0.01 s or less)."""

SHUTDOWN_MS = (1_300, 10_300)
"""A controlled shutdown, from "Starting controlled shutdown" to "shut down completed" in the
brokers' server.log: 1.3 s to 10.3 s, median 3.2 s, over 62 shutdowns of the traced real runs."""

BOOT_MS = (500, 1_500)
"""From a restart's start to the broker's registration in ZooKeeper (its JVM's start-up)."""

OTHER_NEMESIS_MS = (0, 50)


STARTUP_LAG_MS = 600
"""A follower's first fetches may come this long after the run starts: the harness starts
producing once ZooKeeper names broker 1 leader of a full ISR, which it does before the
followers have fetched (their first fetch can meet NOT_LEADER and back off 200 ms; seen in
acks1-leader-fails-before-replication, where no follower held a record at the cut). So may a
restarted broker's (a fresh JVM handles its first LeaderAndIsr slowly: in random-1-19 the
leader was paused before a restarted follower had fetched, so it never rejoined the ISR)."""


RECONNECT_MS = 2_000
"""A ZooKeeper client cut off retries its connection after a random pause of up to a second
(ZooKeeper 3.5's ClientCnxn), then learns its session expired and Kafka opens a new one."""


class Fixed:
    """One answer to every question: the single, deterministic prediction."""

    def first_controller(self, brokers: Sequence[int]) -> int:
        """The broker that wins the first controller election: the last (any of the three
        wins about as often; schedules fault broker 1, the first leader, most, so a controller
        elsewhere is the likelier case)."""
        return max(brokers)

    def latency_ms(self) -> int:
        """How long one message takes (none)."""
        return 0

    def startup_lag_ms(self) -> int:
        """How long after the start (or its restart) a broker's first request leaves (at
        once)."""
        return 0

    def boot_ms(self) -> int:
        """How long a restarted broker takes to start and register (the middle of BOOT_MS)."""
        return sum(BOOT_MS) // 2

    def metadata_broker(self, running: Sequence[int]) -> int | None:
        """Which running broker the producer asks for metadata (None: the answer is the
        controller's view, at once)."""
        del running
        return None

    def metadata_timed_out(self) -> None:
        """The broker asked for metadata did not answer in time."""

    def shutdown_ms(self) -> int:
        """How long a controlled shutdown takes until the process exits (at once)."""
        return 0

    def reconnect_ms(self) -> int:
        """How long a broker whose session expired takes to open a new one once it can reach
        ZooKeeper again (at once)."""
        return 0

    def isr_task_phase_ms(self, period_ms: int) -> int:
        """How far into its period a broker's ISR task first runs (all at once)."""
        del period_ms
        return 0

    def expiry_ms(self, lost_ms: int, timeout_ms: int) -> int:
        """When a session whose broker fell silent at lost_ms expires (one timeout later)."""
        return lost_ms + timeout_ms

    def failover_ms(self) -> int:
        """How long a new controller takes to fail over."""
        return FIXED_FAILOVER_MS

    def nemesis_ms(self, op: str, nominal_ms: int) -> int:
        """How long the harness takes over a nemesis step (Timing.nemesis_ms, whatever it is)."""
        del op
        return nominal_ms

    def pick(self, options: Sequence[T]) -> T:
        """One of several equally possible choices (the first)."""
        return options[0]

    def order(self, items: Sequence[T]) -> list[T]:
        """Concurrent work in the order it happens (as given)."""
        return list(items)


class Jitter(Fixed):
    """Each answer drawn from what a real run of this harness may show; seeded."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.max_latency_ms = self.rng.choice(LATENCY_CEILINGS)
        """This run's ceiling on a message's latency: some runs are quick, some slow."""
        self.metadata_node: int | None = None
        """The broker the producer asks for metadata, once it has asked one."""
        self.metadata_failed_node: int | None = None
        self.tick_phase_ms = self.rng.randrange(ZK_TICK_MS)
        """Where ZooKeeper's ticks fall on the run's clock."""
        self.tick_lags: dict[int, int] = {}
        """Tick -> how late its expiries reach the controller (one draw per tick)."""

    def first_controller(self, brokers: Sequence[int]) -> int:
        """Any broker (all three won it about equally often in the traced real runs)."""
        return self.rng.choice(list(brokers))

    def latency_ms(self) -> int:
        return self.rng.randint(0, self.max_latency_ms)

    def startup_lag_ms(self) -> int:
        return self.rng.choice((0, self.rng.randint(0, STARTUP_LAG_MS)))

    def boot_ms(self) -> int:
        return self.rng.randint(*BOOT_MS)

    def metadata_broker(self, running: Sequence[int]) -> int | None:
        """The same broker while it runs and answers (kafka-python asks the node it is
        connected to; after a time-out it drops that connection and asks another)."""
        if self.metadata_node not in running:
            others = [b for b in running if b != self.metadata_failed_node] or list(running)
            self.metadata_node = self.rng.choice(others) if others else None
        return self.metadata_node

    def metadata_timed_out(self) -> None:
        self.metadata_failed_node, self.metadata_node = self.metadata_node, None

    def shutdown_ms(self) -> int:
        return self.rng.randint(*SHUTDOWN_MS)

    def reconnect_ms(self) -> int:
        return self.rng.randint(0, RECONNECT_MS)

    def isr_task_phase_ms(self, period_ms: int) -> int:
        return self.rng.randrange(max(1, period_ms))

    def expiry_ms(self, lost_ms: int, timeout_ms: int) -> int:
        """One timeout after the session's last ping (up to a third of a timeout before it
        fell silent: ZooKeeper's client pings when idle that long), at the end of that
        ZooKeeper tick (the ticks' phase drawn once per run), plus the lag drawn for the tick:
        sessions due in one tick expire together (random-1-94: a pause and a kill 10 ms apart
        expired a tick apart)."""
        nominal_ms = lost_ms - self.rng.randint(0, timeout_ms // 3) + timeout_ms
        tick = (nominal_ms - self.tick_phase_ms) // ZK_TICK_MS + 1
        end = tick * ZK_TICK_MS + self.tick_phase_ms
        return end + self.tick_lags.setdefault(tick, self.rng.randint(0, EXPIRY_LAG_MS))

    def failover_ms(self) -> int:
        return self.rng.randint(*FAILOVER_MS)

    def nemesis_ms(self, op: str, nominal_ms: int) -> int:
        del nominal_ms
        return self.rng.randint(*NEMESIS_MS.get(op, OTHER_NEMESIS_MS))

    def pick(self, options: Sequence[T]) -> T:
        return self.rng.choice(list(options))

    def order(self, items: Sequence[T]) -> list[T]:
        shuffled = list(items)
        self.rng.shuffle(shuffled)
        return shuffled
