"""A broker keeps no idle fetcher thread once it has handled a LeaderAndIsr (R7).

Kafka 2.6.3's `ReplicaManager.becomeLeaderOrFollower` ends with
`replicaFetcherManager.shutdownIdleFetcherThreads()`: a fetcher thread towards a broker that no
longer leads any partition this broker follows is shut down, so a follower that moves to a new
leader leaves no thread fetching (and no connection open) to the old one. The spec has no
fetcher threads; this check reads the broker's fetcher manager after each
`BecomeLeaderOrFollower` and reports a fetcher that tracks no partition, as `NoIdleFetchers`.
"""

from __future__ import annotations

from kreplica.impl.cluster import Cluster

NAME = "NoIdleFetchers"
"""The name an idle fetcher is reported under."""


def idle_fetcher_violations(cluster: Cluster, broker: int) -> list[tuple[str, str]]:
    """The fetchers of `broker` that track no partition, right after a LeaderAndIsr."""
    if not cluster.is_alive(broker):
        return []
    manager = cluster.brokers[broker].replica_manager.replica_fetcher_manager
    idle = [leader for leader, f in sorted(manager.fetchers.items()) if f.partition_count() == 0]
    if not idle:
        return []
    towards = ", ".join(map(str, idle))
    return [(NAME, f"broker {broker} keeps a fetcher with no partition towards {towards}")]
