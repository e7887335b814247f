"""Each spec action in the words of the Kafka 2.6.3 method it models (the method its comment in
spec/KafkaReplication.tla names), so a picture reads like Kafka, not like TLA+."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

KAFKA_METHODS: dict[str, str] = {
    "Init": "the initial state (Init)",
    "Produce": "ReplicaManager.appendRecords: leader {replica} appends record {record} "
    "(acks={acks})",
    "ExpireDelayedProduce": "DelayedProduce.onExpiration: record {record}'s produce at "
    "{replica} times out",
    "DeleteRecords": "ReplicaManager.deleteRecords: leader {replica} deletes below offset {offset}",
    "FollowerSendFetch": "ReplicaFetcherThread.buildFetch: {replica} fetches from {leader}",
    "LeaderHandleFetch": "ReplicaManager.fetchMessages: leader {replica} serves {follower} "
    "from offset {offset}",
    "FollowerHandleFetchResponse": "ReplicaFetcherThread.processPartitionData: {replica} "
    "appends what {leader} sent",
    "LeaderHandleListOffsets": "ReplicaManager.fetchOffsetForTimestamp: leader {replica} "
    "answers {follower}",
    "FollowerHandleListOffsetsResponse": "AbstractFetcherThread.handleOutOfRangeError: "
    "{replica} resets against {leader}",
    "FollowerTruncateToHighWatermark": "AbstractFetcherThread.truncateToHighWatermark: "
    "{replica} truncates to its HW",
    "FollowerSendOffsetsForLeaderEpoch": "AbstractFetcherThread.maybeTruncate: {replica} asks "
    "{leader} where its epoch ends",
    "LeaderHandleOffsetsForLeaderEpoch": "ReplicaManager.lastOffsetForLeaderEpoch: leader "
    "{replica} answers {follower} for epoch {requested}",
    "FollowerHandleOffsetsForLeaderEpochResponse": "AbstractFetcherThread."
    "truncateToEpochEndOffsets: {replica} truncates against {leader}",
    "BecomeLeaderOrFollower": "ReplicaManager.becomeLeaderOrFollower: {replica} takes epoch "
    "{epoch}, leader {leader}",
    "LeaderShrinkIsr": "Partition.maybeShrinkIsr: leader {replica} drops {followers}",
    "ControllerDetectFailure": "KafkaController.onBrokerFailure: broker {replica}'s session "
    "expires",
    "ControllerElectLeader": "KafkaController: elect {replica} leader in a new epoch",
    "Reregister": "KafkaController.onBrokerStartup: running broker {replica} registers again "
    "(a new ZooKeeper session)",
    "ControlledShutdown": "KafkaController.doControlledShutdown: broker {replica}'s leadership "
    "moves before it stops",
    "DeposedLeaderIncrementHw": "Partition.updateFollowerFetchState: deposed leader {replica} "
    "raises its HW (a fetch it read as leader)",
    "Crash": "broker {replica} crashes (kill -9; its log survives)",
    "UncleanShutdown": "broker {replica} loses power (its unflushed tail is lost)",
    "FailLogDir": "LogDirFailureChannel: broker {replica}'s log dir fails",
    "HaltOnLogDirFailure": "LogManager.handleLogDirFailure: broker {replica} halts",
    "Restart": "KafkaController.onBrokerStartup: broker {replica} restarts",
    "CheckpointHighWatermarks": "ReplicaManager.checkpointHighWatermarks: broker {replica}",
    "Flush": "Log.flush: broker {replica}'s log is durable to its LEO",
    "LoseMessage": "the network loses a message from {from} to {to}",
    "ControllerHandleAlterPartition": "KafkaController: AlterIsr from leader {replica}",
    "LeaderHandleAlterPartitionResponse": "Partition: leader {replica} takes the AlterIsr answer",
}
"""Every action a trace may name (the spec's, and the recorder's for isr=alter-partition)."""


def _plain(value: Any) -> str:
    if isinstance(value, frozenset | set):
        return "{" + ", ".join(str(v) for v in sorted(value)) + "}"
    return str(value)


def describe(action: str, args: Mapping[str, Any]) -> str:
    """`action` with `args` in Kafka's words; an unknown action or argument as it stands."""
    words = KAFKA_METHODS.get(action)
    plain = {k: _plain(v) for k, v in args.items()}
    if words is None:
        return f"{action}({', '.join(f'{k}={v}' for k, v in plain.items())})"
    try:
        return words.format(**plain)
    except (KeyError, IndexError):
        return f"{words.split(':')[0]} ({', '.join(f'{k}={v}' for k, v in plain.items())})"
