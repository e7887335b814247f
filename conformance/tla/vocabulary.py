"""The spec's vocabulary: its actions with their arguments, and its variables.

One name per concept: these are the names in spec/KafkaReplication.tla (each action records
`[name |-> ..., args |-> ...]` in the variable `action`), in the implementation's recorder,
and in every ITF trace. `tests/test_vocabulary.py` pins this table to the spec's text.
"""

from __future__ import annotations

ACTION_ARGS: dict[str, frozenset[str]] = {
    "Produce": frozenset({"replica", "record", "acks"}),
    "ExpireDelayedProduce": frozenset({"replica", "record"}),
    "DeleteRecords": frozenset({"replica", "offset"}),
    "FollowerSendFetch": frozenset({"replica", "leader"}),
    "LeaderHandleFetch": frozenset({"replica", "follower", "offset"}),
    "FollowerHandleFetchResponse": frozenset({"replica", "leader"}),
    "LeaderHandleListOffsets": frozenset({"replica", "follower"}),
    "FollowerHandleListOffsetsResponse": frozenset({"replica", "leader"}),
    "FollowerTruncateToHighWatermark": frozenset({"replica", "leader"}),
    "FollowerSendOffsetsForLeaderEpoch": frozenset({"replica", "leader"}),
    "LeaderHandleOffsetsForLeaderEpoch": frozenset({"replica", "follower", "requested"}),
    "FollowerHandleOffsetsForLeaderEpochResponse": frozenset({"replica", "leader"}),
    "BecomeLeaderOrFollower": frozenset({"replica", "epoch", "leader"}),
    "LeaderShrinkIsr": frozenset({"replica", "followers"}),
    "ControllerDetectFailure": frozenset({"replica"}),
    "ControllerElectLeader": frozenset({"replica"}),
    "Reregister": frozenset({"replica"}),
    "ControlledShutdown": frozenset({"replica"}),
    "DeposedLeaderIncrementHw": frozenset({"replica"}),
    "Crash": frozenset({"replica"}),
    "UncleanShutdown": frozenset({"replica"}),
    "FailLogDir": frozenset({"replica"}),
    "HaltOnLogDirFailure": frozenset({"replica"}),
    "Restart": frozenset({"replica"}),
    "Flush": frozenset({"replica"}),
    "CheckpointHighWatermarks": frozenset({"replica"}),
    "LoseMessage": frozenset({"from", "to"}),
}
"""Every spec action (the trace event names) and the names of its arguments."""

IMPL_ONLY_ACTIONS: dict[str, str] = {
    "ControllerHandleAlterPartition": "isr=alter-partition",
    "LeaderHandleAlterPartitionResponse": "isr=alter-partition",
}
"""Actions the recorder names for steps of a variant the spec does not model (the variant):
under isr=alter-partition (KIP-497) the controller takes a leader's ISR change, and the
leader takes the answer. Their traces are fuzzed and replayed, never conformed."""

INIT_ACTION = "Init"
"""The name of the first state's step."""

VARIABLES: tuple[str, ...] = (
    "log", "hw", "hwCheckpoint", "epochCache", "recoveryPoint", "leaderEpoch", "leader",
    "fetchState", "isr", "remoteLeo", "alive", "logDirOffline", "incarnation", "ctrlLive",
    "ctrlLeader", "ctrlEpoch", "ctrlIsr", "msgs", "nextRecord", "pending", "acked", "committed",
    "crashes", "uncleanShutdowns", "removed",
)  # fmt: skip
"""The spec's state variables that a trace records, in the order of its VARIABLES declaration
(all but `action`, which goes to each state's #meta)."""
