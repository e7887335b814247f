"""Kafka's caught-up times kept from a run's actions (conformance/judges/lag_times.py), and the
ISR shrinks they allow, on a real cluster."""

from __future__ import annotations

import pytest

from kreplica.conformance.bridge.projection import CLIENT
from kreplica.conformance.bridge.recorder import SpecRecorder
from kreplica.conformance.judges.checked_steps import Judge, apply_checked
from kreplica.conformance.judges.lag_times import (
    HW_NAME,
    NAME,
    FollowerTimes,
    LagTimes,
    hw_violations,
)
from kreplica.conformance.tla.tlavalue import Record
from kreplica.impl.cluster import Cluster
from kreplica.impl.config import BrokerConfig
from kreplica.impl.messages import TopicPartition
from kreplica.impl.partition import Partition
from kreplica.impl.steps import Deliver, DoWork, Produce, ShrinkIsr, Tick

TP = TopicPartition("t", 0)
LAG = BrokerConfig().replica_lag_time_max_ms


def recorder() -> Judge:
    """Two brokers, broker 1 leading, follower fetches answered at once (as the fuzzer's)."""
    c = Cluster((1, 2), {"t": 1}, config=BrokerConfig(replica_fetch_wait_max_ms=0))
    return Judge(SpecRecorder(c, TP, {}))


def checked(judged: Judge, *steps: object) -> None:
    for step in steps:
        assert apply_checked(judged, step) is None, step  # type: ignore[arg-type]


def fetch_round(judged: Judge) -> None:
    """Follower 2 fetches once from leader 1 and handles the answer."""
    checked(judged, DoWork(2, 1), Deliver(2, 1, 0), Deliver(1, 2, 0))


def test_times_follow_kafkas_rules() -> None:
    """makeLeader of a new leader: caught up now (ISR), last fetch unknown; a fetch below the
    leader's LEO but at or above the LEO of the last fetch moves the caught-up time to the last
    fetch's (time 0 here: no change); a fetch at the leader's LEO moves it to now
    (Replica.updateFetchState)."""
    judged = recorder()
    start = judged.recorder.cluster.clock.now_ms
    assert judged.lag_times.times == {(1, 2): FollowerTimes(start, -1, 0)}
    checked(judged, Produce(TP, (1,), 1, broker=1), Deliver(CLIENT, 1, 0), Tick(1_000))
    fetch_round(judged)  # at 0, leader LEO 1: behind, but at or above the last fetch's LEO (-1)
    assert judged.lag_times.times[(1, 2)] == FollowerTimes(start, 1, start + 1_000)
    assert (
        judged.recorder.state["log"][1] == judged.recorder.state["log"][0]
    )  # the answer brought the record
    checked(judged, Tick(1_000))
    fetch_round(judged)  # at 1, the leader's LEO: caught up now
    assert judged.lag_times.times[(1, 2)] == FollowerTimes(start + 2_000, 1, start + 2_000)


def test_a_follower_that_lags_is_dropped_on_time() -> None:
    """Behind the leader's LEO for more than replica.lag.time.max.ms: the shrink drops it, and
    the checker agrees; a moment earlier, it is not lagging."""
    judged = recorder()
    checked(judged, Produce(TP, (1,), 1, broker=1), Deliver(CLIENT, 1, 0))
    now = judged.recorder.cluster.clock.now_ms
    assert judged.lag_times.out_of_sync(judged.recorder.state, 1, now + LAG) == frozenset()
    assert judged.lag_times.out_of_sync(judged.recorder.state, 1, now + LAG + 1) == {2}
    checked(judged, Tick(LAG + 1), ShrinkIsr(1))
    assert judged.recorder.state["isr"][0] == frozenset({1})


def test_a_shrink_before_the_lag_time_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """A leader that drops a follower as soon as it is behind (no clock) breaks the rule."""
    judged = recorder()
    checked(judged, Produce(TP, (1,), 1, broker=1), Deliver(CLIENT, 1, 0))
    monkeypatch.setattr(Partition, "get_out_of_sync_replicas", lambda self, lag: frozenset({2}))
    found = apply_checked(judged, ShrinkIsr(1))
    assert found is not None and found[0] == NAME
    assert "dropped [2]" in found[1] and "30000 ms: none" in found[1]


def test_a_leader_that_keeps_a_lagging_follower_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """A leader whose isr-expiration task runs and keeps a follower lagging by the clock."""
    judged = recorder()
    checked(judged, Produce(TP, (1,), 1, broker=1), Deliver(CLIENT, 1, 0), Tick(LAG + 1))
    monkeypatch.setattr(Partition, "get_out_of_sync_replicas", lambda self, lag: frozenset())
    found = apply_checked(judged, ShrinkIsr(1))
    assert found is not None and found[0] == NAME
    assert "dropped no follower" in found[1] and ": [2]" in found[1]


def test_a_leader_that_keeps_its_hw_after_a_fetch_that_moves_it_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """maybeIncrementLeaderHW on a fetch that moved the follower's LEO (R13): the one
    follower has the record, so the HW must reach it."""
    judged = recorder()
    checked(judged, Produce(TP, (1,), 1, broker=1), Deliver(CLIENT, 1, 0))
    fetch_round(judged)  # the record reaches follower 2
    monkeypatch.setattr(Partition, "maybe_increment_leader_hw", lambda self, log, now=None: False)
    checked(judged, DoWork(2, 1))
    found = apply_checked(judged, Deliver(2, 1, 0))  # at offset 1: the follower has it
    assert found is not None and found[0] == HW_NAME
    assert "HW is 0 after a fetch" in found[1] and "expected 1" in found[1]


def test_a_follower_caught_up_on_time_holds_the_hw_back_outside_the_isr() -> None:
    """Kafka 2.6.3 also waits for a follower outside the ISR that caught up within
    replica.lag.time.max.ms (the spec lets any follower the leader heard from do so): follower
    3 (LEO 1) holds leader 1's HW at 1 until its caught-up time is that old (states by hand)."""
    lag = LagTimes((1, 2, 3), LAG)
    lag.times = {(1, 2): FollowerTimes(0, 3, 0), (1, 3): FollowerTimes(10_000, 3, 10_000)}
    log = (Record({"epoch": 0, "record": r}) for r in (1, 2, 3))
    before = {"isr": ({1, 2}, set(), set()), "hw": (1, 0, 0), "remoteLeo": ((-1, 2, 1),)}
    before["log"] = (tuple(log), (), ())
    after = {**before, "remoteLeo": ((-1, 3, 1),), "hw": (1, 0, 0)}
    assert hw_violations(lag, 1, before, after, 10_000 + LAG) == []
    [(name, reason)] = hw_violations(lag, 1, before, {**after, "hw": (3, 0, 0)}, 10_000 + LAG)
    assert name == HW_NAME and "expected 1" in reason and "[2, 3]" in reason
    assert hw_violations(lag, 1, before, {**after, "hw": (3, 0, 0)}, 10_001 + LAG) == []


def test_the_hw_is_judged_at_a_shrink_and_an_append(monkeypatch: pytest.MonkeyPatch) -> None:
    """maybeIncrementLeaderHW runs after an ISR shrink and after an append too (R13): once the
    lagging follower is out of the ISR and no longer caught up on time, the leader alone
    bounds its HW, so the HW must reach its LEO at the shrink, and again at the next append."""
    judged = recorder()
    checked(judged, Produce(TP, (1,), 1, broker=1), Deliver(CLIENT, 1, 0), Tick(LAG + 1))
    checked(judged, ShrinkIsr(1))  # the unpatched leader moves its HW to 1 here
    assert judged.recorder.state["isr"][0] == frozenset({1}) and judged.recorder.state["hw"][0] == 1
    monkeypatch.setattr(Partition, "maybe_increment_leader_hw", lambda self, log, now=None: False)
    checked(judged, Produce(TP, (2,), 1, broker=1))
    found = apply_checked(judged, Deliver(CLIENT, 1, 0))
    assert found is not None and found[0] == HW_NAME
    assert "HW is 1 after an append" in found[1] and "expected 2" in found[1]

    monkeypatch.undo()
    judged = recorder()
    checked(judged, Produce(TP, (1,), 1, broker=1), Deliver(CLIENT, 1, 0), Tick(LAG + 1))
    monkeypatch.setattr(Partition, "maybe_increment_leader_hw", lambda self, log, now=None: False)
    found = apply_checked(judged, ShrinkIsr(1))
    assert found is not None and found[0] == HW_NAME
    assert "HW is 0 after an ISR shrink" in found[1] and "expected 1" in found[1]


def test_kafkas_rules_are_checked_without_the_invariants(monkeypatch: pytest.MonkeyPatch) -> None:
    """`fuzz --rules-only` (invariants off, rules on) still judges the HW by the clock;
    `--no-invariants` alone (both off) only records."""
    found = {}
    for rules in (True, False):
        judged = recorder()
        checked(judged, Produce(TP, (1,), 1, broker=1), Deliver(CLIENT, 1, 0), Tick(LAG + 1))
        monkeypatch.setattr(
            Partition, "maybe_increment_leader_hw", lambda self, log, now=None: False
        )
        found[rules] = apply_checked(judged, ShrinkIsr(1), invariants=False, rules=rules)
        monkeypatch.undo()
    assert found[True] is not None and found[True][0] == HW_NAME
    assert found[False] is None
