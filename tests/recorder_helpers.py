"""A small recorded cluster for the tests of the recorder's actions."""

from __future__ import annotations

from kreplica.conformance.bridge.recorder import Recorder
from kreplica.impl.cluster import Cluster
from kreplica.impl.config import BrokerConfig
from kreplica.impl.messages import TopicPartition
from kreplica.impl.steps import Deliver, DoWork

TP = TopicPartition("t", 0)


def replicated(records: int, recorder: type[Recorder] = Recorder) -> tuple[Cluster, Recorder]:
    """Two brokers; leader 1 holds `records` records, which follower 2 has fetched, and both
    HWs cover them all (follower fetches answered at once, as the spec answers them)."""
    c = Cluster((1, 2), {"t": 1}, config=BrokerConfig(replica_fetch_wait_max_ms=0))
    rec = recorder(c, TP, {})
    for _ in range(records):
        rec.apply(c.next_record(TP))
        rec.apply(Deliver(-1, 1))
    for _ in range(3):  # records, then the leader's HW moves, then the follower's
        rec.apply(DoWork(2, 1))
        rec.apply(Deliver(2, 1))
        rec.apply(Deliver(1, 2))
    assert rec.state["hw"] == (records, records)
    return c, rec
