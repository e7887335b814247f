"""A fetcher's per-partition state, as values (R7): Kafka 2.6.3's PartitionFetchState,
OffsetTruncationState and InitialFetchState (AbstractFetcherThread.scala) and PartitionStates
(org.apache.kafka.common.internals), plus the sans-IO bookkeeping of a request in flight and of a
pending out-of-range reset. `fetcher.AbstractFetcherThread` owns and changes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from kreplica.impl.messages import (
    LATEST_TIMESTAMP,
    FetchPartitionData,
    Message,
    TopicPartition,
)

if TYPE_CHECKING:
    pass


class ReplicaState(Enum):
    """Truncating (find the divergence point first) or Fetching."""

    TRUNCATING = "Truncating"
    FETCHING = "Fetching"


TRUNCATING = ReplicaState.TRUNCATING
FETCHING = ReplicaState.FETCHING


@dataclass(frozen=True, slots=True)
class PartitionFetchState:
    """Fetch offset, current leader epoch, state and an optional back-off deadline (R7)."""

    fetch_offset: int
    lag: int | None
    current_leader_epoch: int
    delay_until_ms: int | None
    state: ReplicaState

    def is_delayed(self, now_ms: int) -> bool:
        """True while backing off (DelayedItem not yet due)."""
        return self.delay_until_ms is not None and self.delay_until_ms > now_ms


class PartitionStates:
    """Partition fetch states in round-robin order (PartitionStates): moved-to-end = served last."""

    __slots__ = ("_map",)

    def __init__(self) -> None:
        self._map: dict[TopicPartition, PartitionFetchState] = {}

    def state_value(self, tp: TopicPartition) -> PartitionFetchState | None:
        """The state of tp, or None if not tracked."""
        return self._map.get(tp)

    def update_and_move_to_end(self, tp: TopicPartition, state: PartitionFetchState) -> None:
        """Set tp's state and move it to the end of the round-robin order."""
        self._map.pop(tp, None)
        self._map[tp] = state

    def update(self, tp: TopicPartition, state: PartitionFetchState) -> None:
        """Set tp's state keeping its place."""
        self._map[tp] = state

    def remove(self, tp: TopicPartition) -> None:
        """Stop tracking tp."""
        self._map.pop(tp, None)

    def items(self) -> list[tuple[TopicPartition, PartitionFetchState]]:
        """(tp, state) pairs in round-robin order."""
        return list(self._map.items())

    def partitions(self) -> list[TopicPartition]:
        """Tracked partitions in round-robin order."""
        return list(self._map)

    def __len__(self) -> int:
        return len(self._map)


@dataclass(frozen=True, slots=True)
class InitialFetchState:
    """Where a follower starts: the leader, its epoch and the initial fetch offset (the HW)."""

    leader: int
    leader_epoch: int
    offset: int


@dataclass(frozen=True, slots=True)
class OffsetTruncationState:
    """A truncation offset and whether truncation is complete (R6)."""

    offset: int
    truncation_completed: bool


@dataclass(frozen=True, slots=True)
class EpochData:
    """An OffsetsForLeaderEpoch entry: the fetcher's current leader epoch and its latest epoch."""

    current_leader_epoch: int
    leader_epoch: int


@dataclass(slots=True)
class OffsetReset:
    """A pending out-of-range reset of one partition (R9): LATEST first, then EARLIEST."""

    tp: TopicPartition
    leader_epoch: int
    request_epoch: int | None
    phase: int = LATEST_TIMESTAMP
    leader_end_offset: int = -1


@dataclass(slots=True)
class InFlight:
    """The one request a fetcher has in flight and what it needs to handle the answer."""

    correlation_id: int
    deadline_ms: int
    """Sent + replica.socket.timeout.ms: it fails without an answer once this has passed (R8)."""
    request: Message
    epochs: dict[TopicPartition, EpochData] | None = None
    session: dict[TopicPartition, FetchPartitionData] | None = None
    reset: OffsetReset | None = None
    disconnected: bool = False
    """Its connection broke with no answer on its way: it fails now, not at deadline_ms (R8)."""

    def failed(self, now_ms: int) -> bool:
        """True once it has failed: disconnected, or unanswered past its deadline (R8; Kafka's
        NetworkClient expires a request more than its time-out after the send)."""
        return self.disconnected or now_ms > self.deadline_ms
