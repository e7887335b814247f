"""Replica: the leader's view of one remote follower (kafka.cluster.Replica, R10)."""

from __future__ import annotations

from kreplica.impl.messages import UNKNOWN_OFFSET


class Replica:
    """A follower's LEO, log start and catch-up times as seen by the leader (R10)."""

    __slots__ = (
        "broker_id",
        "last_caught_up_time_ms",
        "last_fetch_leader_log_end_offset",
        "last_fetch_time_ms",
        "log_end_offset",
        "log_start_offset",
    )

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.log_end_offset = UNKNOWN_OFFSET
        self.log_start_offset = UNKNOWN_OFFSET
        self.last_fetch_leader_log_end_offset = 0
        self.last_fetch_time_ms = 0
        self.last_caught_up_time_ms = 0

    def update_fetch_state(
        self,
        follower_fetch_offset: int,
        follower_start_offset: int,
        follower_fetch_time_ms: int,
        leader_end_offset: int,
    ) -> None:
        """Record a fetch at follower_fetch_offset at time t with leader LEO X (R10)."""
        if follower_fetch_offset >= leader_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, follower_fetch_time_ms)
        elif follower_fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_start_offset = follower_start_offset
        self.log_end_offset = follower_fetch_offset
        self.last_fetch_leader_log_end_offset = leader_end_offset
        self.last_fetch_time_ms = follower_fetch_time_ms

    def reset_last_caught_up_time(
        self, cur_leader_log_end_offset: int, cur_time_ms: int, last_caught_up_time_ms: int
    ) -> None:
        """On becoming leader: previous fetch := (leader LEO, now), lastCaughtUp given (R10)."""
        self.last_fetch_leader_log_end_offset = cur_leader_log_end_offset
        self.last_fetch_time_ms = cur_time_ms
        self.last_caught_up_time_ms = last_caught_up_time_ms

    def __repr__(self) -> str:
        return (
            f"Replica(broker_id={self.broker_id}, leo={self.log_end_offset}, "
            f"log_start={self.log_start_offset}, last_caught_up={self.last_caught_up_time_ms}, "
            f"last_fetch=({self.last_fetch_leader_log_end_offset}, {self.last_fetch_time_ms}))"
        )
