"""No idle fetcher thread survives a LeaderAndIsr (conformance/judges/idle_fetchers.py)."""

from __future__ import annotations

import pytest

from kreplica.conformance.bridge.projection import CONTROLLER
from kreplica.conformance.bridge.recorder import SpecRecorder
from kreplica.conformance.judges.checked_steps import Judge, apply_checked
from kreplica.conformance.judges.idle_fetchers import NAME
from kreplica.impl.cluster import Cluster
from kreplica.impl.config import BrokerConfig
from kreplica.impl.messages import TopicPartition
from kreplica.impl.replica_fetcher import ReplicaFetcherManager
from kreplica.impl.steps import Deliver, Elect, Step

TP = TopicPartition("t", 0)


def move_leadership() -> tuple[Judge, list[Step]]:
    """Three brokers, 1 leading; the controller makes 2 the leader; the LeaderAndIsr steps."""
    c = Cluster((1, 2, 3), {"t": 1}, config=BrokerConfig(replica_fetch_wait_max_ms=0))
    judged = Judge(SpecRecorder(c, TP, {}))
    assert apply_checked(judged, Elect(TP, 2)) is None
    return judged, [Deliver(CONTROLLER, b) for b in (1, 2, 3)]


def test_a_follower_that_changes_leader_keeps_no_fetcher_to_the_old_one() -> None:
    judged, deliveries = move_leadership()
    for step in deliveries:
        assert apply_checked(judged, step) is None, step
    fetchers = judged.recorder.cluster.brokers[3].replica_manager.replica_fetcher_manager.fetchers
    assert sorted(fetchers) == [2]


def test_an_idle_fetcher_left_running_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    judged, deliveries = move_leadership()
    monkeypatch.setattr(ReplicaFetcherManager, "shutdown_idle_fetcher_threads", lambda self: None)
    found = [apply_checked(judged, step) for step in deliveries]
    assert (NAME, "broker 3 keeps a fetcher with no partition towards 1") in found
