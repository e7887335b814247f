"""Kafka's caught-up times kept from a run's actions (conformance/bridge/lag_times.py), and the
ISR shrinks they allow, on a real cluster."""

from __future__ import annotations

import pytest

from kreplica.conformance.bridge.checked_steps import SpecRecorder, apply_checked
from kreplica.conformance.bridge.lag_times import NAME, FollowerTimes
from kreplica.conformance.bridge.projection import CLIENT
from kreplica.impl.cluster import Cluster
from kreplica.impl.config import BrokerConfig
from kreplica.impl.messages import TopicPartition
from kreplica.impl.partition import Partition
from kreplica.impl.steps import Deliver, DoWork, Produce, ShrinkIsr, Tick

TP = TopicPartition("t", 0)
LAG = BrokerConfig().replica_lag_time_max_ms


def recorder() -> SpecRecorder:
    """Two brokers, broker 1 leading, follower fetches answered at once (as the fuzzer's)."""
    c = Cluster((1, 2), {"t": 1}, config=BrokerConfig(replica_fetch_wait_max_ms=0))
    return SpecRecorder(c, TP, {})


def checked(rec: SpecRecorder, *steps: object) -> None:
    for step in steps:
        assert apply_checked(rec, step) is None, step  # type: ignore[arg-type]


def fetch_round(rec: SpecRecorder) -> None:
    """Follower 2 fetches once from leader 1 and handles the answer."""
    checked(rec, DoWork(2, 1), Deliver(2, 1, 0), Deliver(1, 2, 0))


def test_times_follow_kafkas_rules() -> None:
    """makeLeader of a new leader: caught up now (ISR), last fetch unknown; a fetch below the
    leader's LEO but at or above the LEO of the last fetch moves the caught-up time to the last
    fetch's (time 0 here: no change); a fetch at the leader's LEO moves it to now
    (Replica.updateFetchState)."""
    rec = recorder()
    start = rec.cluster.clock.now_ms
    assert rec.lag_times.times == {(1, 2): FollowerTimes(start, -1, 0)}
    checked(rec, Produce(TP, (1,), 1, broker=1), Deliver(CLIENT, 1, 0), Tick(1_000))
    fetch_round(rec)  # at 0, leader LEO 1: behind, but at or above the last fetch's LEO (-1)
    assert rec.lag_times.times[(1, 2)] == FollowerTimes(start, 1, start + 1_000)
    assert rec.state["log"][1] == rec.state["log"][0]  # the answer brought the record
    checked(rec, Tick(1_000))
    fetch_round(rec)  # at 1, the leader's LEO: caught up now
    assert rec.lag_times.times[(1, 2)] == FollowerTimes(start + 2_000, 1, start + 2_000)


def test_a_follower_that_lags_is_dropped_on_time() -> None:
    """Behind the leader's LEO for more than replica.lag.time.max.ms: the shrink drops it, and
    the checker agrees; a moment earlier, it is not lagging."""
    rec = recorder()
    checked(rec, Produce(TP, (1,), 1, broker=1), Deliver(CLIENT, 1, 0))
    now = rec.cluster.clock.now_ms
    assert rec.lag_times.out_of_sync(rec.state, 1, now + LAG) == frozenset()
    assert rec.lag_times.out_of_sync(rec.state, 1, now + LAG + 1) == {2}
    checked(rec, Tick(LAG + 1), ShrinkIsr(1))
    assert rec.state["isr"][0] == frozenset({1})


def test_a_shrink_before_the_lag_time_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """A leader that drops a follower as soon as it is behind (no clock) breaks the rule."""
    rec = recorder()
    checked(rec, Produce(TP, (1,), 1, broker=1), Deliver(CLIENT, 1, 0))
    monkeypatch.setattr(Partition, "get_out_of_sync_replicas", lambda self, lag: frozenset({2}))
    found = apply_checked(rec, ShrinkIsr(1))
    assert found is not None and found[0] == NAME
    assert "dropped [2]" in found[1] and "30000 ms: none" in found[1]


def test_a_leader_that_keeps_a_lagging_follower_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """A leader whose isr-expiration task runs and keeps a follower lagging by the clock."""
    rec = recorder()
    checked(rec, Produce(TP, (1,), 1, broker=1), Deliver(CLIENT, 1, 0), Tick(LAG + 1))
    monkeypatch.setattr(Partition, "get_out_of_sync_replicas", lambda self, lag: frozenset())
    found = apply_checked(rec, ShrinkIsr(1))
    assert found is not None and found[0] == NAME
    assert "dropped no follower" in found[1] and ": [2]" in found[1]
