"""The steps of a schedule: each is a value; Cluster.apply(step) performs exactly one."""

from __future__ import annotations

from dataclasses import dataclass

from kreplica.impl.messages import IsolationLevel, TopicPartition


@dataclass(frozen=True, slots=True)
class Deliver:
    """Deliver the message at `index` of link (src, dst); index > 0 reorders."""

    src: int
    dst: int
    index: int = 0


@dataclass(frozen=True, slots=True)
class Drop:
    """Lose the message at `index` of link (src, dst)."""

    src: int
    dst: int
    index: int = 0


@dataclass(frozen=True, slots=True)
class Duplicate:
    """Queue a copy of the message at `index` of link (src, dst)."""

    src: int
    dst: int
    index: int = 0


@dataclass(frozen=True, slots=True)
class DoWork:
    """One iteration of `broker`'s fetcher towards `source` (AbstractFetcherThread.doWork)."""

    broker: int
    source: int


@dataclass(frozen=True, slots=True)
class Tick:
    """Advance the simulated clock by `ms` and expire delayed operations on every broker."""

    ms: int


@dataclass(frozen=True, slots=True)
class ShrinkIsr:
    """Run the isr-expiration task (maybeShrinkIsr) on `broker`."""

    broker: int


@dataclass(frozen=True, slots=True)
class Produce:
    """A client sends PRODUCE of record_ids to `broker` (default: the controller's leader)."""

    tp: TopicPartition
    record_ids: tuple[int, ...]
    acks: int = -1
    broker: int | None = None
    timeout_ms: int = 30_000


@dataclass(frozen=True, slots=True)
class ConsumerFetch:
    """A consumer sends FETCH for tp at offset to `broker` (default: the leader); the broker
    may hold it up to max_wait_ms for min_bytes (fetch.max.wait.ms, fetch.min.bytes). Each
    partition's read is limited to max_bytes (max.partition.fetch.bytes), and the response to
    response_max_bytes, which the partitions share in the request's order (fetch.max.bytes)."""

    tp: TopicPartition
    offset: int
    broker: int | None = None
    isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED
    max_bytes: int = 1_048_576
    max_wait_ms: int = 0
    min_bytes: int = 1
    other: TopicPartition | None = None
    """A second partition the FETCH reads too, at `other_offset` (a consumer of two)."""
    other_offset: int = 0
    other_first: bool = False
    """The second partition comes first in the request, so it is read first."""
    response_max_bytes: int | None = None
    """The byte limit of the whole response (fetch.max.bytes); None: `max_bytes`."""


@dataclass(frozen=True, slots=True)
class ConsumerListOffsets:
    """A consumer sends LIST_OFFSETS for tp, LATEST (-1) or EARLIEST (-2), to `broker`."""

    tp: TopicPartition
    timestamp: int
    broker: int | None = None
    isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED


@dataclass(frozen=True, slots=True)
class Crash:
    """The broker process dies; its logs (page cache included) survive."""

    broker: int


@dataclass(frozen=True, slots=True)
class UncleanShutdown:
    """Power loss: the broker dies and every log loses its records above the recovery point."""

    broker: int


@dataclass(frozen=True, slots=True)
class Restart:
    """A dead broker starts again (new incarnation) and registers with the controller."""

    broker: int


@dataclass(frozen=True, slots=True)
class DetectFailure:
    """The controller sees the broker's ZK session expire (whether or not it really died).

    `together`: other brokers whose sessions expired in the same ZooKeeper watch, handled in
    the same onBrokerFailure event, one election for all (R22; `broker` leads the partition).
    `failover`: a new controller finds `broker` gone while it fails over (the old controller
    ran on a broker that died or lost its session): it takes the replica offline first and
    elects after, two leader epochs (ReplicaStateMachine.startup, then
    PartitionStateMachine.startup)."""

    broker: int
    together: tuple[int, ...] = ()
    failover: bool = False

    def __repr__(self) -> str:
        """As the dataclass would, leaving out the fields at their defaults (the form
        recorded traces have always had for a plain detection)."""
        extra = (f", together={self.together}" if self.together else "") + (
            ", failover=True" if self.failover else ""
        )
        return f"DetectFailure(broker={self.broker}{extra})"


@dataclass(frozen=True, slots=True)
class Register:
    """A live broker the controller thinks dead registers again (new ZK session)."""

    broker: int


@dataclass(frozen=True, slots=True)
class Elect:
    """The controller makes `broker` the leader of tp (clean needs it alive and in the ISR)."""

    tp: TopicPartition
    broker: int


@dataclass(frozen=True, slots=True)
class Flush:
    """Flush every log of `broker`: its recovery points move to the LEOs."""

    broker: int


@dataclass(frozen=True, slots=True)
class CheckpointHighWatermarks:
    """Run `broker`'s highwatermark-checkpoint task now (ReplicaManager.checkpointHighWatermarks):
    the task also runs on the simulated clock, at each Tick that reaches its next time."""

    broker: int


@dataclass(frozen=True, slots=True)
class Isolate:
    """Network partition between nodes a and b (messages wait on both links)."""

    a: int
    b: int


@dataclass(frozen=True, slots=True)
class Heal:
    """End the network partition between a and b."""

    a: int
    b: int


@dataclass(frozen=True, slots=True)
class FailLogDir:
    """The log directory holding tp on broker fails, the broker's only one (every log on it):
    storage errors until the broker halts (HaltOnLogDirFailure) and restarts."""

    broker: int
    tp: TopicPartition


@dataclass(frozen=True, slots=True)
class HaltOnLogDirFailure:
    """A broker whose log dir failed halts: no live log dir is left (a crash)."""

    broker: int


@dataclass(frozen=True, slots=True)
class DeleteRecords:
    """Raise the log start offset of tp on its leader to offset (<= HW), like DeleteRecords."""

    tp: TopicPartition
    offset: int


Step = (
    Deliver
    | Drop
    | Duplicate
    | DoWork
    | Tick
    | ShrinkIsr
    | Produce
    | ConsumerFetch
    | ConsumerListOffsets
    | Crash
    | UncleanShutdown
    | Restart
    | DetectFailure
    | Register
    | Elect
    | Flush
    | CheckpointHighWatermarks
    | Isolate
    | Heal
    | FailLogDir
    | HaltOnLogDirFailure
    | DeleteRecords
)
